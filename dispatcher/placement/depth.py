"""What fair sharing and Topology Aware Scheduling add to a worker's verdict: words and score terms.

* TAS (Kueue v0.17.0 ``pkg/scheduler/flavorassigner/tas_flavorassigner.go``, ``pkg/cache/scheduler/
  tas_flavor_snapshot.go``): a ClusterQueue whose TAS flavor names a missing Topology is inactive
  (``TopologyNotFound``); a pod set that cannot be placed is explained in the topology's terms ("needs 8 pods in one
  rack; largest free rack on worker-2 holds 6"), with Kueue's own message; a placement of a pod set with a preferred
  level scores by how many domains of that level it spans (``topology`` term: 1 in one domain, 1/n over n).
* Fair sharing (``pkg/cache/scheduler/fair_sharing.go``): the ClusterQueue's dominant resource share once the workload
  is admitted (``fairShare`` term: ``1 / (1 + share / 1000)``, 1 when it does not borrow): Kueue's admission
  tournament favours the lower share, and fair preemption takes from the higher one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .kueue.amounts import FlavorResource
from .kueue.assignment import Assignment
from .kueue.fairsharing import DRS, cluster_queue_share
from .kueue.specs import ClusterQueueSpec
from .kueue.tasassign import TopologyPlacement
from .kueue.topology import TASUsage
from .worker import WorkerCapacity

__all__ = [
    "fair_share",
    "fair_share_term",
    "level_name",
    "missing_topology",
    "placement_words",
    "tas_shortfall",
    "tas_usage",
    "topology_term",
]


def level_name(key: str) -> str:
    """A topology level's short name: ``cloud.provider.com/topology-rack`` is "rack", the hostname level "node"."""
    if key == "kubernetes.io/hostname":
        return "node"
    name = key.rsplit("/", 1)[-1]
    return name.removeprefix("topology-") or key


def missing_topology(w: WorkerCapacity, spec: ClusterQueueSpec) -> str | None:
    """Why Kueue keeps the ClusterQueue inactive for TAS (``isTASViolated``): a TAS flavor's Topology is missing."""
    for rg in spec.resource_groups:
        for fq in rg.flavors:
            flavor = w.flavors.get(fq.name)
            if flavor is not None and flavor.topology_name and flavor.topology_name not in w.tas.topologies:
                return (
                    f"ClusterQueue {spec.name} is inactive: there is no Topology {flavor.topology_name!r} "
                    f"for TAS flavor {fq.name} (Kueue: TopologyNotFound)"
                )
    return None


def _failed(assignment: Assignment) -> TopologyPlacement | None:
    for p in assignment.placements:
        if isinstance(p, TopologyPlacement) and p.failure is not None:
            return p
    return None


def tas_shortfall(w: WorkerCapacity, cq: str, assignment: Assignment) -> str | None:
    """Why the worker's Kueue cannot place a TAS pod set, in the topology's words; ``None`` when none failed."""
    p = _failed(assignment)
    if p is None or p.failure is None:
        return None
    f = p.failure
    unit = "pods" if f.unit == "pod" else "slices"
    where = f"ClusterQueue {cq}: pod set {p.pod_set}"
    if p.level is not None and f.needed and not p.preferred:
        lvl = level_name(p.level)
        text = f"{where} needs {f.needed} {unit} in one {lvl}; largest free {lvl} on {w.name} holds {f.best}"
    elif f.needed:
        text = (
            f"{where} needs {f.needed} {unit} on the nodes of TAS flavor {p.flavor}; "
            f"only {f.best} fit there on {w.name}"
        )
    else:
        text = f"{where} cannot be placed in TAS flavor {p.flavor}"
    if assignment.topology_blocked:
        text += ", even with every TAS workload preempted"
    return f"{text} (Kueue: {f.message})"


def placement_words(assignment: Assignment) -> str:
    """Where the TAS pod sets go, for the verdict: ``8 pods in one rack`` / ``spread over 2 racks``."""
    parts = []
    for p in assignment.placements:
        if not isinstance(p, TopologyPlacement) or p.assignment is None:
            continue
        pods = p.assignment.pods
        if p.level is None:
            parts.append(f"pod set {p.pod_set}: {pods} pods on {len(p.assignment.domains)} node(s)")
            continue
        lvl = level_name(p.level)
        if p.domains_at_level <= 1:
            parts.append(f"pod set {p.pod_set}: {pods} pods in one {lvl}")
        else:
            wanted = "preferred" if p.preferred else "required"
            parts.append(f"pod set {p.pod_set}: {pods} pods over {p.domains_at_level} {lvl}s ({wanted}: one {lvl})")
    return "; ".join(parts)


def topology_term(assignment: Assignment) -> float | None:
    """The ``topology`` score term: for pod sets with a preferred level, 1 over the domains of it they span (the
    worst pod set decides); ``None`` when no pod set prefers a level."""
    values = [
        1.0 / max(1, p.domains_at_level)
        for p in assignment.placements
        if isinstance(p, TopologyPlacement) and p.preferred and p.assignment is not None
    ]
    return min(values) if values else None


def tas_usage(assignment: Assignment) -> tuple[TASUsage, ...]:
    """The topology domains the assignment's TAS pod sets take, as a reservation holds them."""
    out: list[TASUsage] = []
    for flavor, requests in assignment.tas_requests.items():
        for tr in requests:
            ta = assignment.topology.get(tr.name)
            if ta is None:
                continue
            for d in ta.domains:
                out.append(TASUsage(flavor, ",".join(d.values), dict(tr.requests), d.count))
    return tuple(out)


def fair_share(w: WorkerCapacity, cq: str, usage: Mapping[FlavorResource, int]) -> DRS | None:
    """The ClusterQueue's dominant resource share once ``usage`` is admitted (``None``: fair sharing is off)."""
    if w.fair_sharing is None:
        return None
    return cluster_queue_share(w.tree, cq, usage)


def fair_share_term(drs: DRS) -> float:
    """``1 / (1 + share / 1000)``: 1 without borrowing, 0.5 when borrowing all the cohort could lend (weight 1)."""
    share = drs.weighted
    if share == float("inf"):
        return 0.0
    return 1.0 / (1.0 + max(0.0, share) / 1000.0)


def fair_share_json(drs: DRS) -> dict[str, Any]:
    """For ``dispatcher explain``: the rounded weighted share (per mille of what the cohort could lend), its
    resource, and the weight."""
    return {"share": drs.rounded(), "resource": drs.resource, "weight": drs.weight}


def preemption_words(reasons: Sequence[str]) -> str:
    """The Preempted reasons Kueue would write, counted: ``InCohortFairSharing: 2, InClusterQueue: 1``."""
    counts: dict[str, int] = {}
    for r in reasons:
        counts[r] = counts.get(r, 0) + 1
    return ", ".join(f"{r}: {n}" for r, n in counts.items())
