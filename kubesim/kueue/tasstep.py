"""The TAS part of the simulated Kueue's flavor assignment.

Written from Kueue v0.17.0 ``pkg/scheduler/flavorassigner/tas_flavorassigner.go`` and the end of
``flavorassigner.go`` ``assign``:

* a pod set that asks for a topology (or any pod set of a ClusterQueue whose flavors are all TAS flavors: TAS is
  then implied) may only take a flavor with a ``topologyName`` whose Topology the cache knows and has the asked level;
  a flavor with a topology serves no other pod set; a flavor without one may still give a TAS pod set resources
  the TAS flavor does not cover (``checkPodSetAndFlavorMatchForTAS``);
* once quota is assigned, the TAS pod sets of a ``Fit`` are placed (their assignment written to the admission); one
  that cannot be placed turns the assignment into ``Preempt``, with the placement's reason; a ``Preempt`` becomes
  ``NoFit`` when the pod sets could not be placed with every TAS workload gone (``WithSimulateEmpty``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .requests import PodSet
from .specs import ClusterQueueSpec, FlavorSpec
from .tas import FlavorTopology
from .tasnodes import TasPodSet, explicit_tas, fits_times
from .tasstate import TasState

__all__ = ["flavor_mismatch", "tas_only", "tas_views"]


def tas_only(spec: ClusterQueueSpec, flavors: Mapping[str, FlavorSpec]) -> bool:
    """``isTASOnly``: every flavor of every resource group exists and names a Topology."""
    return all(name in flavors and flavors[name].topology is not None for rg in spec.groups for name in rg.flavors)


def tas_views(
    spec: ClusterQueueSpec, flavors: Mapping[str, FlavorSpec], state: TasState | None
) -> dict[str, FlavorTopology]:
    """``ClusterQueueSnapshot.TASFlavors``: the ClusterQueue's flavors whose Topology exists."""
    out: dict[str, FlavorTopology] = {}
    if state is None:
        return out
    for name in spec.flavor_names():
        f = flavors.get(name)
        if f is not None and f.topology is not None:
            view = state.view(name, f.topology, f.node_labels, f.tolerations)
            if view is not None:
                out[name] = view
    return out


def flavor_mismatch(
    ps: PodSet, flavor: FlavorSpec, covered: frozenset[str], only_tas: bool, views: Mapping[str, FlavorTopology]
) -> str | None:
    """``checkPodSetAndFlavorMatchForTAS``."""
    explicit = explicit_tas(ps.topology)
    if explicit or only_tas:
        if not explicit:
            return None
        if flavor.topology is None:
            asked = ps.tas_per_pod or ps.requests
            return (
                None if not covered & set(asked) else f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
            )
        view = views.get(flavor.name)
        if view is None:
            return f'Flavor "{flavor.name}" information missing in TAS cache'
        if not view.has_level(ps.topology):
            return f'Flavor "{flavor.name}" does not contain the requested level'
        return None
    if flavor.topology is not None:
        return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
    return None


def _requests(
    pod_sets: Sequence[PodSet], psas: Sequence[Any], only_tas: bool, views: Mapping[str, FlavorTopology]
) -> dict[str, list[TasPodSet]]:
    """``WorkloadsTopologyRequests``."""
    out: dict[str, list[TasPodSet]] = {}
    for ps, psa in zip(pod_sets, psas, strict=False):
        explicit = explicit_tas(ps.topology)
        if not (explicit or only_tas) or psa.error is not None:
            continue
        if not views:
            psa.error = "workload requires Topology, but there is no TAS cache information"
            continue
        mine = sorted({c.flavor for c in psa.flavors.values() if c.flavor in views})
        if len(mine) != 1:
            psa.error = (
                "no TAS flavor assigned" if not mine else f"more than one TAS flavor assigned: {', '.join(mine)}"
            )
            continue
        out.setdefault(mine[0], []).append(
            TasPodSet(ps.name, psa.count, ps.tas_per_pod, ps.topology, ps.pod_spec, implied=not explicit)
        )
    return out


def topology_step(
    assignment: Any,
    spec: ClusterQueueSpec,
    pod_sets: Sequence[PodSet],
    flavors: Mapping[str, FlavorSpec],
    state: TasState | None,
    modes: Any,
) -> None:
    """The TAS step of ``FlavorAssigner.assign`` on ``assignment`` (a :class:`~.flavors.Assignment`)."""
    mode = assignment.mode
    if mode is modes.NO_FIT:
        return
    only = tas_only(spec, flavors)
    if not any(explicit_tas(ps.topology) or only for ps in pod_sets):
        return
    views = tas_views(spec, flavors, state)
    requests = _requests(pod_sets, assignment.pod_sets, only, views)
    assignment.override = mode
    assignment.tas_requests = requests
    by_name = {p.name: p for p in assignment.pod_sets}

    def place(empty: bool) -> tuple[str, str] | None:
        placements: dict[str, Any] = {}
        for flavor, trs in requests.items():
            got = views[flavor].place(trs, empty=empty)
            for tr in trs:
                if tr.name in got:
                    outcome = got[tr.name]
                    if outcome.reason:
                        return tr.name, outcome.reason
                    placements[tr.name] = outcome
        if not empty:
            assignment.topology = {n: (o.levels, o.domains) for n, o in placements.items()}
        return None

    def set_mode(psa: Any, m: Any) -> None:
        for c in psa.flavors.values():
            c.mode = m

    if mode is modes.FIT:
        failed = place(False)
        if failed is None:
            return
        psa = by_name[failed[0]]
        psa.reasons.append(failed[1])
        set_mode(psa, modes.PREEMPT)
        assignment.override = modes.PREEMPT
    failed = place(True)
    if failed is not None:
        set_mode(by_name[failed[0]], modes.NO_FIT)
        assignment.override = modes.NO_FIT
        assignment.topology = {}
        return
    for trs in requests.values():
        for tr in trs:
            set_mode(by_name[tr.name], modes.PREEMPT)
    assignment.override = modes.PREEMPT
    assignment.topology = {}


def placeable(
    assignment: Any, spec: ClusterQueueSpec, flavors: Mapping[str, FlavorSpec], state: TasState | None
) -> Callable[[], bool] | None:
    """``workloadFits``' TAS half for the assignment's TAS pod sets (``None`` when it has none)."""
    requests = getattr(assignment, "tas_requests", None)
    if not requests:
        return None

    def check() -> bool:
        views = tas_views(spec, flavors, state)
        for flavor, trs in requests.items():
            view = views.get(flavor)
            if view is None or any(o.reason for o in view.place(trs).values()):
                return False
        return True

    return check


def domains_fit(
    view: FlavorTopology, per_pod: Mapping[str, int], domains: Sequence[tuple[tuple[str, ...], int]]
) -> bool:
    """``TASFlavorSnapshot.Fits``: each domain's pods still fit its leaf's free capacity."""
    for values, count in domains:
        leaf = view.leaves.get(",".join(values))
        if leaf is None:
            return False
        free = {r: v - leaf.used.get(r, 0) for r, v in leaf.free.items()}
        for r, v in leaf.used.items():
            free.setdefault(r, -v)
        if fits_times(per_pod, free)[0] < count:
            return False
    return True
