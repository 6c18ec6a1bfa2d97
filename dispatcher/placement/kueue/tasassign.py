"""The TAS part of Kueue's flavor assignment: which flavors a pod set asking for a topology may take, and the
topology placement of an assignment whose quota fits or can be made to fit.

Follows Kueue v0.17.0 ``pkg/scheduler/flavorassigner/tas_flavorassigner.go`` (``checkPodSetAndFlavorMatchForTAS``,
``isTASImplied`` for a ClusterQueue all of whose flavors are TAS flavors, ``WorkloadsTopologyRequests``,
``onlyTASFlavor``) and the end of ``FlavorAssigner.assign`` in ``flavorassigner.go``: a ``Fit`` assignment whose
pod sets cannot be placed becomes ``Preempt`` (the placement's reason added to the pod set's), and a ``Preempt``
one becomes ``NoFit`` when they could not be placed even with every TAS workload gone (``WithSimulateEmpty``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .assignment import Assignment, FlavorAssignmentMode, PodSetAssignment
from .specs import ClusterQueueSpec, ResourceFlavorSpec
from .tas import TASCache
from .tassnapshot import TopologyFlavorSnapshot
from .topology import PlacementFailure, TASPodSetRequest, TopologyAssignment
from .workloads import PodSetRequest

__all__ = [
    "TopologyPlacement",
    "apply_topology",
    "cluster_queue_tas_flavors",
    "is_tas_only",
    "tas_flavor_mismatch",
    "tas_requested",
    "topology_fits",
]


def cluster_queue_tas_flavors(
    spec: ClusterQueueSpec, flavors: Mapping[str, ResourceFlavorSpec], tas: TASCache | None
) -> dict[str, TopologyFlavorSnapshot]:
    """``ClusterQueueSnapshot.TASFlavors``: the ClusterQueue's flavors whose Topology exists, with their snapshot."""
    out: dict[str, TopologyFlavorSnapshot] = {}
    if tas is None:
        return out
    for rg in spec.resource_groups:
        for fq in rg.flavors:
            flavor = flavors.get(fq.name)
            if flavor is None or flavor.topology_name is None or fq.name in out:
                continue
            snap = tas.snapshot(flavor)
            if snap is not None:
                out[fq.name] = snap
    return out


def is_tas_only(spec: ClusterQueueSpec, flavors: Mapping[str, ResourceFlavorSpec]) -> bool:
    """``clusterQueue.isTASOnly``: every flavor of every resource group exists and names a topology."""
    return all(
        (f := flavors.get(fq.name)) is not None and f.topology_name is not None
        for rg in spec.resource_groups
        for fq in rg.flavors
    )


def tas_requested(ps: PodSetRequest, tas_only: bool) -> tuple[bool, bool]:
    """``(isTASRequested, isTASImplied)`` for a pod set."""
    explicit = ps.topology is not None and ps.topology.explicit
    implied = not explicit and tas_only
    return explicit or implied, implied


def tas_flavor_mismatch(
    ps: PodSetRequest,
    flavor: ResourceFlavorSpec,
    covered: frozenset[str],
    tas_only: bool,
    tas_flavors: Mapping[str, TopologyFlavorSnapshot],
) -> str | None:
    """``checkPodSetAndFlavorMatchForTAS``: why ``flavor`` cannot serve the pod set as far as TAS goes, or ``None``."""
    requested, implied = tas_requested(ps, tas_only)
    if requested:
        if implied:
            return None
        if flavor.topology_name is None:
            raw = ps.tas_requests if ps.tas_requests is not None else ps.requests
            if not covered.intersection(raw):
                return None
            return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
        snap = tas_flavors.get(flavor.name)
        if snap is None:
            return f'Flavor "{flavor.name}" information missing in TAS cache'
        if not snap.has_level(ps.topology):
            return f'Flavor "{flavor.name}" does not contain the requested level'
        return None
    if flavor.topology_name is not None:
        return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
    return None


@dataclass(slots=True)
class TopologyPlacement:
    """Where a pod set's pods would go (``assignment``) or why they cannot (``failure``), in which TAS flavor, with
    the level it asked for (``None``: unconstrained)."""

    pod_set: str
    flavor: str
    level: str | None
    preferred: bool
    assignment: TopologyAssignment | None = None
    failure: PlacementFailure | None = None
    #: For a placement: how many domains of the asked level it spans (1: all in one).
    domains_at_level: int = 0


def _requests(
    assignment: Assignment,
    pod_sets: Sequence[PodSetRequest],
    tas_only: bool,
    tas_flavors: Mapping[str, TopologyFlavorSnapshot],
) -> dict[str, list[TASPodSetRequest]]:
    """``WorkloadsTopologyRequests``: per TAS flavor, the pod sets to place there; a pod set that cannot be
    placed at all (no TAS flavor, several) gets its error."""
    out: dict[str, list[TASPodSetRequest]] = {}
    for ps, psa in zip(pod_sets, assignment.pod_sets, strict=False):
        requested, implied = tas_requested(ps, tas_only)
        if not requested or psa.error is not None:
            continue
        if not tas_flavors:
            psa.error = "workload requires Topology, but there is no TAS cache information"
            continue
        chosen = sorted({a.flavor for a in psa.flavors.values() if a.flavor in tas_flavors})
        if not chosen:
            psa.error = "no TAS flavor assigned"
            continue
        if len(chosen) > 1:
            psa.error = f"more than one TAS flavor assigned: {', '.join(chosen)}"
            continue
        topo = ps.topology
        out.setdefault(chosen[0], []).append(
            TASPodSetRequest(
                name=ps.name,
                count=psa.count,
                requests=ps.tas_requests if ps.tas_requests is not None else ps.requests,
                topology=topo,
                node_selector=ps.node_selector,
                tolerations=ps.tolerations,
                node_affinity=ps.node_affinity,
                implied=implied,
                group=topo.group if topo is not None else None,
            )
        )
    return out


def _find(
    requests: Mapping[str, list[TASPodSetRequest]],
    tas_flavors: Mapping[str, TopologyFlavorSnapshot],
    simulate_empty: bool,
) -> list[TopologyPlacement]:
    """``FindTopologyAssignmentsForWorkload``, flavor by flavor."""
    out: list[TopologyPlacement] = []
    for flavor, trs in requests.items():
        snap = tas_flavors[flavor]
        result = snap.find_assignments(trs, simulate_empty=simulate_empty)
        for tr in trs:
            if tr.name not in result:
                continue
            ta, failure = result[tr.name]
            topo = tr.topology
            level = snap.level_key(topo, tr.implied)
            constrained = topo is not None and (topo.required is not None or topo.preferred is not None)
            placement = TopologyPlacement(
                tr.name,
                flavor,
                level if constrained else None,
                topo is not None and topo.preferred is not None,
                ta,
                failure,
            )
            if ta is not None and constrained and level is not None:
                placement.domains_at_level = _domains_at(snap, ta, level)
            out.append(placement)
    return out


def _domains_at(snap: TopologyFlavorSnapshot, ta: TopologyAssignment, level: str) -> int:
    """How many domains of ``level`` the assignment's pods are spread over."""
    idx = snap.level_index(level)
    if idx is None:
        return 0
    by_id = {leaf.id: leaf.values for leaf in snap.leaves.values()}
    seen: set[tuple[str, ...]] = set()
    for d in ta.domains:
        values = by_id.get(",".join(d.values)) if snap.lowest_is_node else d.values
        if values is not None:
            seen.add(tuple(values[: idx + 1]))
    return len(seen)


def _pod_set(assignment: Assignment, name: str) -> PodSetAssignment | None:
    return next((p for p in assignment.pod_sets if p.name == name), None)


def _set_mode(psa: PodSetAssignment, mode: FlavorAssignmentMode) -> None:
    for a in psa.flavors.values():
        a.mode = mode


def apply_topology(
    assignment: Assignment,
    pod_sets: Sequence[PodSetRequest],
    spec: ClusterQueueSpec,
    flavors: Mapping[str, ResourceFlavorSpec],
    tas: TASCache | None,
) -> None:
    """The TAS step at the end of flavor assignment (``FlavorAssigner.assign``), in place.

    A ``Fit`` gets each TAS pod set's placement (:attr:`Assignment.topology`) or, when one cannot be placed,
    becomes ``Preempt`` with the placement's reason; a ``Preempt`` becomes ``NoFit`` when the pod sets could not
    be placed with every TAS workload gone. :attr:`Assignment.placements` keeps what the explanation needs.
    """
    mode = assignment.mode
    if mode is FlavorAssignmentMode.NO_FIT:
        return
    tas_only = is_tas_only(spec, flavors)
    if not any(tas_requested(ps, tas_only)[0] for ps in pod_sets):
        return
    tas_flavors = cluster_queue_tas_flavors(spec, flavors, tas)
    requests = _requests(assignment, pod_sets, tas_only, tas_flavors)
    # Kueue's representative mode was computed before: a pod set failed above does not change it.
    assignment.representative = mode
    assignment.tas_requests = requests
    if requests:
        assignment.tas_check = lambda: topology_fits(assignment, tas, spec, flavors)
    if mode is FlavorAssignmentMode.FIT:
        placements = _find(requests, tas_flavors, False)
        assignment.placements = placements
        failed = next((p for p in placements if p.assignment is None and p.failure is not None), None)
        if failed is None:
            assignment.topology = {p.pod_set: p.assignment for p in placements if p.assignment is not None}
            return
        psa = _pod_set(assignment, failed.pod_set)
        if psa is not None and failed.failure is not None:
            psa.reasons = [*psa.reasons, failed.failure.message]
            _set_mode(psa, FlavorAssignmentMode.PREEMPT)
        assignment.representative = FlavorAssignmentMode.PREEMPT
    empty = _find(requests, tas_flavors, True)
    if not assignment.placements:
        assignment.placements = empty
    failed = next((p for p in empty if p.assignment is None and p.failure is not None), None)
    if failed is not None:
        psa = _pod_set(assignment, failed.pod_set)
        if psa is not None:
            _set_mode(psa, FlavorAssignmentMode.NO_FIT)
        assignment.representative = FlavorAssignmentMode.NO_FIT
        assignment.topology_blocked = True
        return
    for trs in requests.values():
        for tr in trs:
            psa = _pod_set(assignment, tr.name)
            if psa is not None:
                _set_mode(psa, FlavorAssignmentMode.PREEMPT)
    assignment.representative = FlavorAssignmentMode.PREEMPT


def topology_fits(
    assignment: Assignment,
    tas: TASCache | None,
    spec: ClusterQueueSpec,
    flavors: Mapping[str, ResourceFlavorSpec],
) -> bool:
    """Whether the assignment's TAS pod sets can be placed in the current state (``workloadFits``' TAS half)."""
    requests = assignment.tas_requests
    if not requests:
        return True
    tas_flavors = cluster_queue_tas_flavors(spec, flavors, tas)
    if any(f not in tas_flavors for f in requests):
        return False
    return all(p.assignment is not None for p in _find(requests, tas_flavors, False))
