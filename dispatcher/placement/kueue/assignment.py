"""The outcome of Kueue's flavor assignment: flavors and modes per resource, pod set and workload.

Follows the result types of ``pkg/scheduler/flavorassigner`` (``Assignment``, ``PodSetAssignment``,
``FlavorAssignment``, the mode of each and the reasons of a ``NoFit``, as Kueue writes them in its pending
message and in ``status.admission``), and the preemption targets an assignment in ``Preempt`` mode needs
(``Preemptor.GetTargets``). The assigner itself is in :mod:`.flavors`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Final

from .amounts import FlavorResource, format_amount
from .preemption import PreemptionPossibility, PreemptionTarget, find_preemption_targets
from .specs import FairSharingConfig
from .tas import TASCache
from .topology import TASPodSetRequest, TopologyAssignment, encode_assignment
from .tree import QuotaTree

__all__ = [
    "EXCEEDS_MAX_QUOTA",
    "NO_MATCHING_FLAVOR",
    "WAITING_FOR_QUOTA",
    "Assignment",
    "FlavorAssignment",
    "FlavorAssignmentAttempt",
    "FlavorAssignmentMode",
    "PodSetAssignment",
    "preemption_targets",
]


# Workload QuotaReserved reasons (apis/kueue/v1beta2/workload_types.go).
NO_MATCHING_FLAVOR: Final = "NoMatchingFlavor"
EXCEEDS_MAX_QUOTA: Final = "ExceedsMaxQuota"
WAITING_FOR_QUOTA: Final = "WaitingForQuota"


class FlavorAssignmentMode(IntEnum):
    """How a flavor can be assigned, worst to best."""

    NO_FIT = 0
    PREEMPT = 1
    DEFERRED_FIT = 2
    FIT = 3

    def __str__(self) -> str:
        return {0: "NoFit", 1: "Preempt", 2: "DeferredFit", 3: "Fit"}[int(self)]


@dataclass(slots=True)
class FlavorAssignment:
    """The flavor chosen for one resource of a PodSet, with its mode and borrowing height."""

    flavor: str
    mode: FlavorAssignmentMode
    borrow: int = 0
    tried_flavor_idx: int = 0


@dataclass(slots=True)
class FlavorAssignmentAttempt:
    """One flavor tried for a PodSet: its worst mode over the resources and why it was not a plain fit."""

    flavor: str
    mode: FlavorAssignmentMode
    borrow: int = 0
    preemption_possibility: PreemptionPossibility | None = None
    reasons: list[str] = field(default_factory=list)
    no_fit_reason: str = ""


@dataclass(slots=True)
class PodSetAssignment:
    """Flavors per resource for one PodSet; ``requests`` are the PodSet totals (per pod x count)."""

    name: str
    count: int
    flavors: dict[str, FlavorAssignment]
    requests: dict[str, int]
    reasons: list[str] = field(default_factory=list)
    error: str | None = None
    attempts: list[FlavorAssignmentAttempt] = field(default_factory=list)

    @property
    def is_fit(self) -> bool:
        return self.error is None and not self.reasons

    @property
    def mode(self) -> FlavorAssignmentMode:
        """The worst mode among the assigned flavors (``PodSetAssignment.RepresentativeMode``)."""
        if self.is_fit:
            return FlavorAssignmentMode.FIT
        if self.error is not None or not self.flavors:
            return FlavorAssignmentMode.NO_FIT
        return min(a.mode for a in self.flavors.values())

    def message(self) -> str:
        """The reasons, sorted and comma-joined as Kueue's ``Status.Message``."""
        if self.error is not None:
            return self.error
        return ", ".join(sorted(self.reasons))


@dataclass(slots=True)
class Assignment:
    """The outcome of :func:`assign_flavors` for one workload in one ClusterQueue.

    ``usage`` is the total quota the workload would take per flavor-resource; ``borrowing`` is the height of the
    smallest cohort subtree the workload must borrow from (0: within the ClusterQueue's nominal quota).
    """

    cluster_queue: str
    pod_sets: list[PodSetAssignment]
    usage: dict[FlavorResource, int]
    borrowing: int = 0
    no_fit_reason: str = ""
    last_tried_flavor_idx: list[dict[str, int]] = field(default_factory=list)
    #: Set by the TAS step (``representativeMode`` as Kueue caches and then overrides it).
    representative: FlavorAssignmentMode | None = None
    #: TAS: per TAS flavor, the pod sets to place (``WorkloadsTopologyRequests``), for preemption's fit check.
    tas_requests: dict[str, list[TASPodSetRequest]] = field(default_factory=dict)
    #: TAS: per pod set, where its pods go (only for a ``Fit``).
    topology: dict[str, TopologyAssignment] = field(default_factory=dict)
    #: TAS: the placements (or why not) the explanation shows (``tasassign.TopologyPlacement``).
    placements: list[Any] = field(default_factory=list)
    #: TAS: the pod sets could not be placed even with every TAS workload preempted.
    topology_blocked: bool = False
    #: TAS: whether the TAS pod sets can be placed in the current state (preemption's ``workloadFits``).
    tas_check: Callable[[], bool] | None = field(default=None, repr=False, compare=False)

    @property
    def mode(self) -> FlavorAssignmentMode:
        """The representative mode: the worst among the PodSets (``NoFit`` with no PodSet), unless the TAS step
        set it (:attr:`representative`)."""
        if self.representative is not None and self.pod_sets:
            return self.representative
        pod_sets = self.pod_sets
        if len(pod_sets) == 1:
            return pod_sets[0].mode
        if not pod_sets:
            return FlavorAssignmentMode.NO_FIT
        return min(ps.mode for ps in pod_sets)

    representative_mode = mode

    @property
    def borrows(self) -> bool:
        """Whether admitting needs quota beyond the ClusterQueue's nominal quota."""
        return self.borrowing > 0

    def message(self) -> str:
        """Kueue's pending message: ``couldn't assign flavors to pod set <name>: <reasons>`` per PodSet."""
        parts = []
        for ps in self.pod_sets:
            if ps.is_fit:
                continue
            if ps.error is not None:
                return f"failed to assign flavors to pod set {ps.name}: {ps.error}"
            parts.append(f"couldn't assign flavors to pod set {ps.name}: {ps.message()}")
        return "; ".join(parts)

    def flavor_resources_needing_preemption(self) -> set[FlavorResource]:
        return {
            (a.flavor, res)
            for ps in self.pod_sets
            for res, a in ps.flavors.items()
            if a.mode is FlavorAssignmentMode.PREEMPT
        }

    def to_admission(self) -> list[dict[str, Any]]:
        """``status.admission.podSetAssignments`` as Kueue writes them on admission."""
        out = []
        for ps in self.pod_sets:
            entry: dict[str, Any] = {
                "name": ps.name,
                "flavors": {res: a.flavor for res, a in ps.flavors.items()},
                "resourceUsage": {res: format_amount(res, ps.requests.get(res, 0)) for res in ps.flavors},
                "count": ps.count,
            }
            ta = self.topology.get(ps.name)
            if ta is not None:
                entry["topologyAssignment"] = encode_assignment(ta)
            out.append(entry)
        return out


def preemption_targets(
    tree: QuotaTree,
    assignment: Assignment,
    *,
    priority: int = 0,
    queue_order_time: float = 0.0,
    now: float = math.inf,
    fair_sharing: FairSharingConfig | None = None,
    tas: TASCache | None = None,
    tas_fits: Callable[[], bool] | None = None,
) -> list[PreemptionTarget]:
    """The victims for an assignment in ``Preempt`` mode (Kueue's ``Preemptor.GetTargets``: classical, or fair
    preemption with ``fair_sharing``; with TAS pod sets, ``tas_fits`` says whether they can be placed)."""
    usage = {fr: v for fr, v in assignment.usage.items() if v != 0}
    return find_preemption_targets(
        tree,
        assignment.cluster_queue,
        usage,
        assignment.flavor_resources_needing_preemption(),
        priority=priority,
        queue_order_time=queue_order_time,
        now=now,
        fair_sharing=fair_sharing,
        tas=tas,
        tas_fits=(tas_fits or assignment.tas_check) if assignment.tas_requests else None,
    )
