"""Partial admission: the largest pod counts, between ``count`` and ``minCount``, that a ClusterQueue admits.

Kueue (PartialAdmission, beta and on by default) admits a workload with fewer pods when the full counts neither
fit nor can preempt, provided a pod set has a ``minCount`` below its ``count`` (for a ``batch/v1`` Job: the
``kueue.x-k8s.io/job-min-parallelism`` annotation; once admitted so, Kueue lowers the Job's ``spec.parallelism``
to the admitted count). Its scheduler (``getInitialAssignments``) then walks the counts down with
``flavorassigner.PodSetReducer``:

* every pod set can give up ``delta = count - minCount`` pods; the deltas sum to ``total``;
* search index ``i`` in ``0..total`` gives each pod set ``count - delta * i // total`` pods: all pod sets shrink
  in proportion, ``i = 0`` being the full counts and ``i = total`` the minimum counts;
* a binary search (Go's ``sort.Search``) finds the smallest index whose counts pass: a flavor assignment in
  ``Fit`` mode, or in ``Preempt`` mode with preemption targets. Those are the largest counts Kueue admits.

The engine and the simulated Kueue both call :func:`partial_counts`, so a prediction and a simulated admission
reduce counts the same way; :func:`search_counts` is the search alone, for any ``fits`` test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from .kueue.assignment import Assignment, FlavorAssignmentMode, preemption_targets
from .kueue.flavors import assign_flavors
from .kueue.preemption import PreemptionOracle, PreemptionTarget
from .kueue.specs import FairSharingConfig, ResourceFlavorSpec
from .kueue.tas import TASCache
from .kueue.tree import QuotaTree
from .kueue.workloads import PodSetRequest

__all__ = ["PartialAdmission", "can_be_partially_admitted", "partial_counts", "reduced_counts", "search_counts"]

R = TypeVar("R")


def reduced_counts(full: Sequence[int], deltas: Sequence[int], up: int, down: int) -> list[int]:
    """The counts at search index ``up`` of ``down`` (``fillPodSetSizesForSearchIndex``): each pod set gives up
    the same share of what it may give up, rounded down, so the sum of the counts falls by about ``up`` pods."""
    return [f - d * up // down for f, d in zip(full, deltas, strict=True)]


def search_counts(
    counts: Sequence[int], min_counts: Sequence[int | None], fits: Callable[[list[int]], tuple[R | None, bool]]
) -> tuple[R | None, bool]:
    """``PodSetReducer.Search``: the result of ``fits`` for the largest reduced counts that pass, and whether any did.

    ``min_counts[i]`` of ``None`` means the pod set cannot shrink. Nothing to give up: not found, ``fits`` never
    called. The search assumes ``fits`` is monotonic (fewer pods never fit worse), like Kueue's; it runs Go's
    ``sort.Search`` over indices ``0..total`` step by step, so a non-monotonic ``fits`` gives Kueue's answer too.
    """
    deltas = [c - (c if m is None else m) for c, m in zip(counts, min_counts, strict=True)]
    total = sum(deltas)
    if total == 0:
        return None, False
    last_good = 0
    last: R | None = None
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


def can_be_partially_admitted(pod_sets: Sequence[PodSetRequest]) -> bool:
    """``workload.CanBePartiallyAdmitted``: some pod set has a ``minCount`` below its (spec) count."""
    return any(ps.min_count is not None and ps.full_count > ps.min_count for ps in pod_sets)


@dataclass(slots=True)
class PartialAdmission:
    """Reduced counts Kueue would admit, with their flavor assignment and the victims it preempts (none: a Fit)."""

    counts: tuple[int, ...]
    assignment: Assignment
    targets: list[PreemptionTarget] = field(default_factory=list)

    def describe(self, pod_sets: Sequence[PodSetRequest]) -> str:
        """``fits 6 of 8 pods (minCount 4)``, per reduced pod set (named when there are several), for explanations."""
        parts = []
        for ps, count in zip(pod_sets, self.counts, strict=True):
            full = ps.full_count
            if count == full:
                continue
            minimum = ps.min_count if ps.min_count is not None else full
            name = f"pod set {ps.name} " if len(pod_sets) > 1 else ""
            parts.append(f"{name}fits {count} of {full} pods (minCount {minimum})")
        return ", ".join(parts)


def partial_counts(
    tree: QuotaTree,
    cluster_queue: str,
    pod_sets: Sequence[PodSetRequest],
    resource_flavors: Mapping[str, ResourceFlavorSpec],
    *,
    priority: int = 0,
    queue_order_time: float = 0.0,
    now: float = math.inf,
    last_tried_flavor_idx: Sequence[Mapping[str, int]] | None = None,
    ignore_undeclared_resources: bool = False,
    oracle: PreemptionOracle | None = None,
    fair_sharing: FairSharingConfig | None = None,
    tas: TASCache | None = None,
) -> PartialAdmission | None:
    """The largest reduced counts that Kueue's scheduler would admit, or ``None``.

    Call it when the full counts' assignment is neither ``Fit`` nor ``Preempt`` with targets, as Kueue does; the
    arguments are :func:`~.kueue.flavors.assign_flavors`'s. As Kueue v0.17 (``NewPodSetReducer(wl.Obj.Spec.PodSets,
    ...)``), the search walks down from the Workload's spec counts (``PodSetRequest.full_count``), not from the
    counts after ``status.reclaimablePods`` that the full assignment uses; they differ only for a pending Workload
    some of whose pods already succeeded (and a pod set with no pod left stays at 0, see
    :func:`~.kueue.flavors.assign_flavors`).
    """
    if not can_be_partially_admitted(pod_sets):
        return None

    def fits(counts: list[int]) -> tuple[PartialAdmission | None, bool]:
        assignment = assign_flavors(
            tree,
            cluster_queue,
            pod_sets,
            resource_flavors,
            priority=priority,
            queue_order_time=queue_order_time,
            now=now,
            counts=counts,
            last_tried_flavor_idx=last_tried_flavor_idx,
            ignore_undeclared_resources=ignore_undeclared_resources,
            oracle=oracle,
            fair_sharing=fair_sharing,
            tas=tas,
        )
        mode = assignment.mode
        if mode is FlavorAssignmentMode.FIT:
            return PartialAdmission(tuple(counts), assignment), True
        if mode is FlavorAssignmentMode.PREEMPT:
            targets = preemption_targets(
                tree,
                assignment,
                priority=priority,
                queue_order_time=queue_order_time,
                now=now,
                fair_sharing=fair_sharing,
                tas=tas,
            )
            if targets:
                return PartialAdmission(tuple(counts), assignment, targets), True
        return None, False

    minimums = [None if ps.min_count is None else min(ps.min_count, ps.full_count) for ps in pod_sets]
    found, ok = search_counts([ps.full_count for ps in pod_sets], minimums, fits)
    return found if ok else None
