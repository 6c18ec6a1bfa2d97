"""Kueue's classical preemption: which admitted workloads to evict so that a preemptor fits.

Follows ``pkg/scheduler/preemption`` with its ``classical`` and ``common`` packages: candidate collection
(within the ClusterQueue, reclaim within the cohort, hierarchical reclaim, ``borrowWithinCohort`` with its
priority threshold), Kueue's candidate ordering and the minimal-set heuristic (remove candidates until the
workload fits, then add them back in reverse order), and the preemption simulation the flavor assigner asks.

With fair sharing on (``FairSharingConfig``), ``fairPreemptions`` instead: candidates from the ClusterQueue and from
every ClusterQueue of the tree that borrows, visited in :class:`~.fairsharing.TargetOrdering`'s order, each
cross-queue candidate taken only when the first strategy allows it (then the second for those it refused), or
unconditionally while the preemptor stays within its nominal quota (``FairSharingPreemptWithinNominal``).

With a TAS cache, a candidate's removal frees its topology domains too, and the workload fits only when its pod
sets can also be placed (``tas_fits``), as ``workloadFits`` checks ``FindTopologyAssignmentsForWorkload``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from .amounts import FlavorResource
from .cells import _Node
from .fairsharing import DRS, TargetOrdering, compare_drs
from .specs import LESS_THAN_INITIAL_SHARE, ClusterQueueSpec, FairSharingConfig, PreemptionPolicy
from .tas import TASCache
from .tree import QuotaTree
from .workloads import AdmittedWorkload

__all__ = [
    "IN_CLUSTER_QUEUE",
    "IN_COHORT_FAIR_SHARING",
    "IN_COHORT_RECLAIMATION",
    "IN_COHORT_RECLAIM_WHILE_BORROWING",
    "PreemptionOracle",
    "PreemptionPossibility",
    "PreemptionTarget",
    "candidates_order_key",
    "find_preemption_targets",
    "simulate_preemption",
]


# Preemption reasons (the Preempted condition's reason).
IN_CLUSTER_QUEUE: Final = "InClusterQueue"
IN_COHORT_RECLAIMATION: Final = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING: Final = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING: Final = "InCohortFairSharing"


class PreemptionPossibility(IntEnum):
    """Outcome of a preemption simulation (``preemptioncommon.PreemptionPossibility``)."""

    NO_CANDIDATES = 0
    PREEMPT = 1
    RECLAIM = 2


@dataclass(frozen=True, slots=True)
class PreemptionTarget:
    """A workload to evict, with the reason Kueue writes on its Preempted condition."""

    workload: AdmittedWorkload
    reason: str


# preemptionVariant
_NEVER, _WITHIN_CQ, _HIERARCHICAL_RECLAIM, _RECLAIM_WITHOUT_BORROWING, _RECLAIM_WHILE_BORROWING = range(5)
_VARIANT_REASON = {
    _WITHIN_CQ: IN_CLUSTER_QUEUE,
    _HIERARCHICAL_RECLAIM: IN_COHORT_RECLAIMATION,
    _RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAIMATION,
    _RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING,
}


def candidates_order_key(
    workload: AdmittedWorkload, preemptor_cluster_queue: str, now: float = math.inf
) -> tuple[bool, bool, int, float, str]:
    """Kueue's ``CandidatesOrdering`` as a sort key: evicted first, other ClusterQueues before the preemptor's,
    lower priority first, most recently reserved first (a missing reservation counts as ``now``), then UID."""
    reserved = workload.quota_reserved_time if workload.quota_reserved_time is not None else now
    return (
        not workload.evicted,
        workload.cluster_queue == preemptor_cluster_queue,
        workload.priority,
        -reserved,
        workload.uid or workload.key,
    )


def _satisfies_policy(policy: PreemptionPolicy, priority: int, ts: float, candidate: AdmittedWorkload) -> bool:
    if policy is PreemptionPolicy.LOWER_PRIORITY:
        return priority > candidate.priority
    if policy is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return priority > candidate.priority or (priority == candidate.priority and ts < candidate.queue_order_time)
    return policy is PreemptionPolicy.ANY


def _borrowing_within_cohort_forbidden(spec: ClusterQueueSpec) -> tuple[bool, int | None]:
    bwc = spec.preemption.borrow_within_cohort
    if bwc is None or bwc.policy == "Never":
        return True, None
    return False, bwc.max_priority_threshold


@dataclass(slots=True)
class _Candidate:
    wl: AdmittedWorkload
    lca: _Node | None
    variant: int


class _Preemptor:
    """One run of the preemption algorithm for a preemptor in a ClusterQueue (``classicalPreemptions``, or
    ``fairPreemptions`` when fair sharing is on)."""

    __slots__ = ("cq", "fair", "frs", "now", "priority", "spec", "tas", "tas_fits", "timestamp", "tree", "usage")

    def __init__(
        self,
        tree: QuotaTree,
        cluster_queue: str,
        usage: Mapping[FlavorResource, int],
        frs: Collection[FlavorResource],
        priority: int,
        timestamp: float,
        now: float,
        fair: FairSharingConfig | None = None,
        tas: TASCache | None = None,
        tas_fits: Callable[[], bool] | None = None,
    ) -> None:
        self.tree = tree
        self.cq = tree._cq(cluster_queue)
        self.spec = tree._cq_specs[cluster_queue]
        self.usage = usage
        self.frs = frs
        self.priority = priority
        self.timestamp = timestamp
        self.now = now
        self.fair = fair
        self.tas = tas
        self.tas_fits = tas_fits

    def _uses_resources(self, wl: AdmittedWorkload) -> bool:
        usage = wl.usage
        return any(fr in usage for fr in self.frs)

    def _classify(self, wl: AdmittedWorkload, advantage: bool) -> int:
        if not self._uses_resources(wl):
            return _NEVER
        same = wl.cluster_queue == self.cq.name
        pre = self.spec.preemption
        policy = pre.within_cluster_queue if same else pre.reclaim_within_cohort
        if not _satisfies_policy(policy, self.priority, self.timestamp, wl):
            return _NEVER
        if same:
            return _WITHIN_CQ
        if advantage:
            return _HIERARCHICAL_RECLAIM
        forbidden, threshold = _borrowing_within_cohort_forbidden(self.spec)
        if forbidden:
            return _RECLAIM_WITHOUT_BORROWING
        if wl.priority >= self.priority or (threshold is not None and wl.priority > threshold):
            return _RECLAIM_WITHOUT_BORROWING
        return _RECLAIM_WHILE_BORROWING

    def _from_cq(self, node: _Node, lca: _Node | None, advantage: bool, out: list[_Candidate]) -> None:
        for wl in self.tree._workloads.get(node.name, {}).values():
            variant = self._classify(wl, advantage)
            if variant != _NEVER:
                out.append(_Candidate(wl, lca, variant))

    def _in_subtree(self, current: _Node, root: _Node, skip: _Node | None, adv: bool, out: list[_Candidate]) -> None:
        for child in current.child_cohorts:
            if child is skip or child.within_nominal(self.frs):
                continue
            self._in_subtree(child, root, skip, adv, out)
        for child_cq in current.child_cqs:
            if child_cq is not self.cq and not child_cq.within_nominal(self.frs):
                self._from_cq(child_cq, root, adv, out)

    def _collect(self) -> tuple[list[_Candidate], list[_Candidate], list[_Candidate]]:
        same: list[_Candidate] = []
        if self.spec.preemption.within_cluster_queue is not PreemptionPolicy.NEVER:
            self._from_cq(self.cq, None, False, same)
        hierarchy: list[_Candidate] = []
        by_priority: list[_Candidate] = []
        if self.cq.parent is not None and self.spec.preemption.reclaim_within_cohort is not PreemptionPolicy.NEVER:
            advantage, remaining = self.cq.quantities_fit(self.usage)
            previous: _Node | None = None
            for current in self.cq.ancestors():
                self._in_subtree(current, current, previous, advantage, hierarchy if advantage else by_priority)
                fits, remaining = current.quantities_fit(remaining)
                advantage = advantage or fits
                previous = current
        return same, hierarchy, by_priority

    def _valid(self, cand: _Candidate, borrow: bool) -> bool:
        if cand.wl.cluster_queue == self.cq.name:
            return True
        if borrow and cand.variant == _RECLAIM_WITHOUT_BORROWING:
            return False
        node = self.tree._cqs[cand.wl.cluster_queue]
        if node.within_nominal(self.frs):
            return False
        for ancestor in node.ancestors():
            if ancestor is cand.lca:
                break
            if ancestor.within_nominal(self.frs):
                return False
        return True

    def _fits(self, allow_borrowing: bool) -> bool:
        """``workloadFits``: quota (without borrowing when not allowed) and, with TAS, a placement."""
        cq = self.cq
        tree = self.tree
        for fr, v in self.usage.items():
            if not allow_borrowing and cq.borrowing_with(fr, v):
                return False
            if v > tree.available(cq.name, fr[0], fr[1]):
                return False
        return self.tas_fits is None or self.tas_fits()

    def _remove(self, wl: AdmittedWorkload) -> None:
        self.tree.remove_usage(wl.cluster_queue, wl.usage)
        if self.tas is not None and wl.tas_usage:
            self.tas.remove_workload(wl.key)

    def _restore(self, wl: AdmittedWorkload) -> None:
        self.tree.add_usage(wl.cluster_queue, wl.usage)
        if self.tas is not None and wl.tas_usage:
            self.tas.add_workload(wl.key, wl.tas_usage)

    def targets(self) -> list[PreemptionTarget]:
        if self.fair is not None:
            return self._fair_targets(self.fair)
        same, hierarchy, by_priority = self._collect()
        key_cq, now = self.cq.name, self.now

        def order(c: _Candidate) -> tuple[bool, bool, int, float, str]:
            return candidates_order_key(c.wl, key_cq, now)

        lists = [sorted(hierarchy, key=order), sorted(by_priority, key=order), sorted(same, key=order)]
        candidates = [c for lst in lists for c in lst if c.wl.evicted]
        candidates += [c for lst in lists for c in lst if not c.wl.evicted]
        forbidden, _ = _borrowing_within_cohort_forbidden(self.spec)
        under_nominal = all(
            (cell := self.cq.cells.get(fr)) is not None and cell.nominal > cell.usage for fr in self.frs
        )
        attempts: tuple[bool, ...]
        if (not hierarchy and not by_priority) or (forbidden and not under_nominal):
            attempts = (True,)
        elif forbidden and not hierarchy:
            attempts = (False, True)
        else:
            attempts = (True, False)
        for allow_borrowing in attempts:
            chosen: list[_Candidate] = []
            for cand in candidates:
                if not self._valid(cand, allow_borrowing):
                    continue
                self._remove(cand.wl)
                chosen.append(cand)
                if self._fits(allow_borrowing):
                    chosen = self._fill_back(chosen, allow_borrowing)
                    for c in chosen:
                        self._restore(c.wl)
                    return [PreemptionTarget(c.wl, _VARIANT_REASON[c.variant]) for c in chosen]
            for c in chosen:
                self._restore(c.wl)
        return []

    # ---- fair sharing (preemption.go fairPreemptions) ---------------------------------------------------------

    def _fair_candidates(self) -> list[AdmittedWorkload]:
        """``findCandidates``: the ClusterQueue's own (by ``withinClusterQueue``) and, by ``reclaimWithinCohort``,
        those of every other ClusterQueue of the tree that borrows a flavor-resource needing preemption."""
        pre = self.spec.preemption
        out: list[AdmittedWorkload] = []
        workloads = self.tree._workloads
        if pre.within_cluster_queue is not PreemptionPolicy.NEVER:
            for wl in workloads.get(self.cq.name, {}).values():
                policy = pre.within_cluster_queue
                if _satisfies_policy(policy, self.priority, self.timestamp, wl) and self._uses_resources(wl):
                    out.append(wl)
        if self.cq.parent is not None and pre.reclaim_within_cohort is not PreemptionPolicy.NEVER:
            for name in self.tree.cluster_queues_in_tree(self.cq.name):
                node = self.tree._cqs[name]
                if node is self.cq or not any(node.borrowing_with(fr, 0) for fr in self.frs):
                    continue
                for wl in workloads.get(name, {}).values():
                    policy = pre.reclaim_within_cohort
                    if _satisfies_policy(policy, self.priority, self.timestamp, wl) and self._uses_resources(wl):
                        out.append(wl)
        return out

    def _fits_fair(self) -> bool:
        """``workloadFitsForFairSharing``: the incoming usage (added for the shares) taken out while checking."""
        self.tree.remove_usage(self.cq.name, self.usage)
        try:
            return self._fits(True)
        finally:
            self.tree.add_usage(self.cq.name, self.usage)

    def _fair_targets(self, fair: FairSharingConfig) -> list[PreemptionTarget]:
        candidates = self._fair_candidates()
        if not candidates:
            return []
        cq_name, now = self.cq.name, self.now

        def order(wl: AdmittedWorkload) -> tuple[bool, bool, int, float, str]:
            return candidates_order_key(wl, cq_name, now)

        candidates.sort(key=order)
        self.tree.add_usage(cq_name, self.usage)
        try:
            fits, targets, retry = self._first_strategy(candidates, fair, order)
            if not fits and len(fair.strategies) > 1:
                fits, targets = self._second_strategy(retry, targets, order)
        finally:
            self.tree.remove_usage(cq_name, self.usage)
        if not fits:
            for target in targets:
                self._restore(target.workload)
            return []
        chosen = [_Candidate(t.workload, None, 0) for t in targets]
        reasons = {t.workload.key: t.reason for t in targets}
        kept = self._fill_back(chosen, True)
        for c in kept:
            self._restore(c.wl)
        return [PreemptionTarget(c.wl, reasons[c.wl.key]) for c in kept]

    def _take(self, wl: AdmittedWorkload, reason: str, targets: list[PreemptionTarget]) -> bool:
        self._remove(wl)
        targets.append(PreemptionTarget(wl, reason))
        return self._fits_fair()

    def _first_strategy(
        self,
        candidates: list[AdmittedWorkload],
        fair: FairSharingConfig,
        order: Callable[[AdmittedWorkload], tuple[bool, bool, int, float, str]],
    ) -> tuple[bool, list[PreemptionTarget], list[AdmittedWorkload]]:
        """``runFirstFsStrategy``."""
        strategy = _STRATEGIES.get(fair.strategies[0], _less_than_or_equal_to_final_share)
        ordering = TargetOrdering(self.tree, self.cq.name, candidates, order)
        within_nominal = fair.preempt_within_nominal and not any(self.cq.borrowing_with(fr, 0) for fr in self.frs)
        targets: list[PreemptionTarget] = []
        retry: list[AdmittedWorkload] = []
        for target in ordering:
            if target.in_cluster_queue:
                if self._take(target.pop(), IN_CLUSTER_QUEUE, targets):
                    return True, targets, []
                continue
            if within_nominal:
                if self._take(target.pop(), IN_COHORT_RECLAIMATION, targets):
                    return True, targets, []
                continue
            preemptor_share, target_old = target.shares()
            while target.has_workload():
                wl = target.pop()
                target_new = target.share_after_removal(wl)
                if strategy(preemptor_share, target_old, target_new):
                    if self._take(wl, IN_COHORT_FAIR_SHARING, targets):
                        return True, targets, []
                    break
                retry.append(wl)
        return False, targets, retry

    def _second_strategy(
        self,
        retry: list[AdmittedWorkload],
        targets: list[PreemptionTarget],
        order: Callable[[AdmittedWorkload], tuple[bool, bool, int, float, str]],
    ) -> tuple[bool, list[PreemptionTarget]]:
        """``runSecondFsStrategy``: rule S2-b, at most one workload per ClusterQueue."""
        ordering = TargetOrdering(self.tree, self.cq.name, retry, order)
        for target in ordering:
            preemptor_share, target_old = target.shares()
            allowed = _less_than_initial_share(preemptor_share, target_old, target_old)
            if allowed and self._take(target.pop(), IN_COHORT_FAIR_SHARING, targets):
                return True, targets
            ordering.drop(target)
        return False, targets

    def _fill_back(self, chosen: list[_Candidate], allow_borrowing: bool) -> list[_Candidate]:
        """Add victims back, newest choice first (the last one is needed), keeping those the fit does not need."""
        for i in range(len(chosen) - 2, -1, -1):
            self._restore(chosen[i].wl)
            if self._fits(allow_borrowing):
                chosen[i] = chosen[-1]
                chosen.pop()
            else:
                self._remove(chosen[i].wl)
        return chosen


def _less_than_or_equal_to_final_share(preemptor_new: DRS, _target_old: DRS, target_new: DRS) -> bool:
    """Rule S2-a (``LessThanOrEqualToFinalShare``)."""
    return compare_drs(preemptor_new, target_new) <= 0


def _less_than_initial_share(preemptor_new: DRS, target_old: DRS, _target_new: DRS) -> bool:
    """Rule S2-b (``LessThanInitialShare``)."""
    return compare_drs(preemptor_new, target_old) < 0


_STRATEGIES: dict[str, Callable[[DRS, DRS, DRS], bool]] = {
    "LessThanOrEqualToFinalShare": _less_than_or_equal_to_final_share,
    LESS_THAN_INITIAL_SHARE: _less_than_initial_share,
}


def find_preemption_targets(
    tree: QuotaTree,
    cluster_queue: str,
    usage: Mapping[FlavorResource, int],
    frs_need_preemption: Collection[FlavorResource],
    *,
    priority: int = 0,
    queue_order_time: float = 0.0,
    now: float = math.inf,
    fair_sharing: FairSharingConfig | None = None,
    tas: TASCache | None = None,
    tas_fits: Callable[[], bool] | None = None,
) -> list[PreemptionTarget]:
    """The minimal set of admitted workloads Kueue would evict so ``usage`` fits in ``cluster_queue``.

    Classical preemption over the workloads recorded in ``tree``: candidates are those using a flavor-resource in
    ``frs_need_preemption`` that the ClusterQueue's policy allows (``withinClusterQueue`` for its own,
    ``reclaimWithinCohort`` for ClusterQueues borrowing in the cohort, ``borrowWithinCohort`` deciding whether the
    preemptor may still borrow afterwards). They are taken in Kueue's order until the workload fits, then added
    back in reverse order when not needed. Empty when no set of candidates makes it fit. With ``fair_sharing``,
    Kueue's fair preemption instead; with ``tas``, removals free topology domains and ``tas_fits`` must hold too.
    The tree (and the TAS cache) is left as it was.
    """
    if not frs_need_preemption:
        return []
    return _Preemptor(
        tree, cluster_queue, usage, frs_need_preemption, priority, queue_order_time, now, fair_sharing, tas, tas_fits
    ).targets()


def simulate_preemption(
    tree: QuotaTree,
    cluster_queue: str,
    fr: FlavorResource,
    quantity: int,
    *,
    priority: int = 0,
    queue_order_time: float = 0.0,
    now: float = math.inf,
    fair_sharing: FairSharingConfig | None = None,
    tas: TASCache | None = None,
) -> tuple[PreemptionPossibility, int]:
    """Kueue's ``PreemptionOracle.SimulatePreemption`` for one flavor-resource.

    Returns whether preemption could make ``quantity`` fit (and whether only other ClusterQueues' workloads
    would be evicted: ``RECLAIM``), with the borrowing height after those evictions.
    """
    node = tree._cq(cluster_queue)
    targets = find_preemption_targets(
        tree,
        cluster_queue,
        {fr: quantity},
        (fr,),
        priority=priority,
        queue_order_time=queue_order_time,
        now=now,
        fair_sharing=fair_sharing,
        tas=tas,
    )
    if not targets:
        return PreemptionPossibility.NO_CANDIDATES, tree._height_of_lowest_subtree_that_fits(node, fr, quantity)[0]
    for t in targets:
        tree.remove_usage(t.workload.cluster_queue, t.workload.usage)
    try:
        borrow = tree._height_of_lowest_subtree_that_fits(node, fr, quantity)[0]
    finally:
        for t in targets:
            tree.add_usage(t.workload.cluster_queue, t.workload.usage)
    if any(t.workload.cluster_queue == cluster_queue for t in targets):
        return PreemptionPossibility.PREEMPT, borrow
    return PreemptionPossibility.RECLAIM, borrow


PreemptionOracle = Callable[[QuotaTree, str, FlavorResource, int], tuple[PreemptionPossibility, int]]
"""``(tree, cluster_queue, flavor_resource, quantity) -> (possibility, borrowing height after preemption)``."""
