"""What the simulated Kueue's scheduler decides for one pending Workload: flavors, victims, partial counts.

Follows Kueue v0.17 ``pkg/scheduler/scheduler.go`` ``getInitialAssignments``: the full counts are assigned
flavors; a ``Fit`` is taken as is, a ``Preempt`` with preemption targets too; otherwise, with PartialAdmission on
(its default) and a pod set whose ``minCount`` is below its count, ``flavorassigner.PodSetReducer`` searches the
largest reduced counts that fit or can preempt (``podset_reducer.go``: every pod set gives up the same share of
``count - minCount``; Go's ``sort.Search`` over the search indices). Without any, the full assignment stands with
no targets. Fair sharing (``fair``) and TAS (``tas``, the cluster's TAS state) reach the flavor assigner and the
preemptor; a TAS assignment's preemption also needs its pod sets placed (``workloadFits``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from .fairsharing import FairSharing
from .flavors import Assignment, Mode, assign_flavors
from .preemption import Preemptor, Target
from .quota import QuotaTree
from .requests import PodSet
from .specs import ClusterQueueSpec, FlavorSpec
from .tasstate import TasState
from .tasstep import placeable

__all__ = ["Decision", "decide", "reduced_counts", "search_counts"]

R = TypeVar("R")


@dataclass
class Decision:
    """The assignment the scheduler nominates and the Workloads it would preempt for it."""

    assignment: Assignment
    targets: list[Target] = field(default_factory=list)


def reduced_counts(full: Sequence[int], deltas: Sequence[int], up: int, down: int) -> list[int]:
    """``fillPodSetSizesForSearchIndex``: each pod set gives up ``delta * up / down`` pods (rounded down)."""
    return [f - d * up // down for f, d in zip(full, deltas, strict=True)]


def search_counts(
    counts: Sequence[int], min_counts: Sequence[int | None], fits: Callable[[list[int]], tuple[R | None, bool]]
) -> tuple[R | None, bool]:
    """``PodSetReducer.Search``: the result for the largest reduced counts that pass ``fits``, and whether the
    search ended on one (``sort.Search`` over the indices ``0..total``; ``fits`` is assumed monotonic, as Kueue
    assumes)."""
    deltas = [c - (c if m is None else m) for c, m in zip(counts, min_counts, strict=True)]
    total = sum(deltas)
    if total == 0:
        return None, False
    last_good, last = 0, None
    lo, hi = 0, total + 1
    while lo < hi:
        mid = (lo + hi) // 2
        result, ok = fits(reduced_counts(counts, deltas, mid, total))
        if ok:
            last_good, last = mid, result
            hi = mid
        else:
            lo = mid + 1
    return last, lo == last_good


def decide(
    tree: QuotaTree,
    spec: ClusterQueueSpec,
    pod_sets: Sequence[PodSet],
    flavors: Mapping[str, FlavorSpec],
    *,
    priority: int,
    timestamp: float,
    now: float,
    last: Sequence[Mapping[str, int]] | None = None,
    fair: FairSharing | None = None,
    tas: TasState | None = None,
) -> Decision:
    """``getInitialAssignments`` for a Workload of ``priority`` and queue-order ``timestamp`` in ``spec``'s
    ClusterQueue (``last``: the previous attempt's flavor state, if still current)."""
    preemptor = Preemptor(tree, spec, priority, timestamp, now, fair, tas)

    def assign(counts: Sequence[int] | None) -> Assignment:
        return assign_flavors(
            tree, spec, pod_sets, flavors, preemptor.simulate, counts=counts, last=last, fair=fair is not None, tas=tas
        )

    def victims(assignment: Assignment) -> list[Target]:
        check = placeable(assignment, spec, flavors, tas)
        return preemptor.targets(assignment.quota_usage(), assignment.needs_preemption(), check)

    full = assign(None)
    if full.mode is Mode.FIT:
        return Decision(full)
    if full.mode is Mode.PREEMPT:
        targets = victims(full)
        if targets:
            return Decision(full, targets)
    if any(ps.min_count is not None and ps.spec_count > ps.min_count for ps in pod_sets):

        def fits(counts: list[int]) -> tuple[Decision | None, bool]:
            assignment = assign(counts)
            if assignment.mode is Mode.FIT:
                return Decision(assignment), True
            if assignment.mode is Mode.PREEMPT:
                found = victims(assignment)
                if found:
                    return Decision(assignment, found), True
            return None, False

        minimums = [ps.min_count for ps in pod_sets]
        partial, ok = search_counts([ps.spec_count for ps in pod_sets], minimums, fits)
        if ok and partial is not None:
            return partial
    return Decision(full)
