"""Classical preemption of the simulated Kueue: which admitted Workloads to evict so a pending one fits.

Follows Kueue v0.17 ``pkg/scheduler/preemption/preemption.go`` (``classicalPreemptions``: the attempts with and
without borrowing, removing candidates in order until the Workload fits, then ``fillBackWorkloads`` in reverse
order; ``workloadFits``; ``queueUnderNominalInResourcesNeedingPreemption``), ``classical/hierarchical_preemption.go``
(candidate collection within the ClusterQueue and, walking up the Cohorts, in subtrees over their nominal quota;
the preemption variants and ``borrowWithinCohort`` with its priority threshold), ``classical/candidate_generator.go``
(evicted candidates first, then hierarchy, priority and same-queue candidates; ``candidateIsValid`` up to the
lowest common ancestor), ``common/ordering.go`` (``CandidatesOrdering``), ``common/preemption_policy.go``
(``SatisfiesPreemptionPolicy``, without the timestamp buffer gate) and ``preemption_oracle.go``
(``SimulatePreemption``).

With fair sharing on, ``fairPreemptions`` instead: the ClusterQueue's own candidates and those of every borrowing
ClusterQueue of the tree, taken in :class:`~.fairsharing.QueueOrder`'s order, each from another ClusterQueue only
when the first strategy lets it (the second strategy then gets one more try per queue), or while the preemptor is
within its nominal quota (``FairSharingPreemptWithinNominal``). With TAS, a candidate's removal frees its topology
domains, and a workload fits only where its pod sets can be placed (``workloadFits``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from .fairsharing import FairSharing, Share, compare, queue_order
from .flavors import NO_CANDIDATES, PREEMPT_POSSIBLE, RECLAIM_POSSIBLE
from .quota import AdmittedWorkload, Node, QuotaTree, available, lowest_fitting_subtree
from .requests import FlavorResource
from .specs import NEVER, ClusterQueueSpec

__all__ = ["Preemptor", "Target"]

# preemptionVariant
_NEVER, _WITHIN_CQ, _HIERARCHICAL_RECLAIM, _RECLAIM_WITHOUT_BORROWING, _RECLAIM_WHILE_BORROWING = range(5)
_REASONS = {
    _WITHIN_CQ: "InClusterQueue",
    _HIERARCHICAL_RECLAIM: "InCohortReclamation",
    _RECLAIM_WITHOUT_BORROWING: "InCohortReclamation",
    _RECLAIM_WHILE_BORROWING: "InCohortReclaimWhileBorrowing",
}


@dataclass(frozen=True)
class Target:
    """A Workload to evict and the reason its Preempted condition carries."""

    workload: AdmittedWorkload
    reason: str


class TasUsage(Protocol):
    """Where admitted workloads' topology usage lives (the controller's TAS state)."""

    def drop(self, wl: AdmittedWorkload) -> None: ...

    def keep(self, wl: AdmittedWorkload) -> None: ...


@dataclass
class _Candidate:
    wl: AdmittedWorkload
    lca: Node | None
    variant: int


class Preemptor:
    """Preemption for one pending Workload (its priority and queue-order timestamp) in one ClusterQueue.

    ``now`` stands in for a candidate's missing QuotaReserved time, as Kueue's clock does.
    """

    def __init__(
        self,
        tree: QuotaTree,
        spec: ClusterQueueSpec,
        priority: int,
        timestamp: float,
        now: float,
        fair: FairSharing | None = None,
        tas: TasUsage | None = None,
    ) -> None:
        self.tree = tree
        self.spec = spec
        self.node = tree.node(spec.name)
        self.priority = priority
        self.timestamp = timestamp
        self.now = now
        self.fair = fair
        self.tas = tas
        #: ``workloadFits``' TAS check for the workload being considered (set per :meth:`targets` call).
        self._placeable: Callable[[], bool] | None = None

    # ---- policy -------------------------------------------------------------------------------------------------

    def _satisfies(self, policy: str, wl: AdmittedWorkload) -> bool:
        if policy == "LowerPriority":
            return self.priority > wl.priority
        if policy == "LowerOrNewerEqualPriority":
            return self.priority > wl.priority or (
                self.priority == wl.priority and self.timestamp < wl.queue_order_time
            )
        return policy == "Any"

    def _bwc_forbidden(self) -> bool:
        return self.spec.preemption.borrow_within_cohort == NEVER

    def _classify(self, wl: AdmittedWorkload, frs: Collection[FlavorResource], advantage: bool) -> int:
        """``classifyPreemptionVariant``."""
        if not any(fr in frs for fr in wl.assigned):
            return _NEVER
        same = wl.cluster_queue == self.spec.name
        pre = self.spec.preemption
        if not self._satisfies(pre.within_cluster_queue if same else pre.reclaim_within_cohort, wl):
            return _NEVER
        if same:
            return _WITHIN_CQ
        if advantage:
            return _HIERARCHICAL_RECLAIM
        if self._bwc_forbidden():
            return _RECLAIM_WITHOUT_BORROWING
        threshold = pre.max_priority_threshold
        if wl.priority >= self.priority or (threshold is not None and wl.priority > threshold):
            return _RECLAIM_WITHOUT_BORROWING
        return _RECLAIM_WHILE_BORROWING

    # ---- candidates ---------------------------------------------------------------------------------------------

    def _from_cq(
        self, node: Node, lca: Node | None, frs: Collection[FlavorResource], advantage: bool, out: list[_Candidate]
    ) -> None:
        for wl in self.tree.workloads.get(node.name, {}).values():
            variant = self._classify(wl, frs, advantage)
            if variant != _NEVER:
                out.append(_Candidate(wl, lca, variant))

    def _in_subtree(
        self,
        current: Node,
        root: Node,
        skip: Node | None,
        frs: Collection[FlavorResource],
        advantage: bool,
        out: list[_Candidate],
    ) -> None:
        """``collectCandidatesInSubtree``: ClusterQueues over nominal quota in subtrees over nominal quota."""
        for child in current.child_cohorts:
            if child is skip or child.within_nominal(frs):
                continue
            self._in_subtree(child, root, skip, frs, advantage, out)
        for cq in current.child_cqs:
            if cq is not self.node and not cq.within_nominal(frs):
                self._from_cq(cq, root, frs, advantage, out)

    def _order(self, c: _Candidate) -> tuple[bool, bool, int, float, str]:
        """``CandidatesOrdering``: evicted first, other ClusterQueues first, lower priority first, the most recent
        reservation first, then UID."""
        reserved = c.wl.reserved_at if c.wl.reserved_at is not None else self.now
        return (not c.wl.evicted, c.wl.cluster_queue == self.spec.name, c.wl.priority, -reserved, c.wl.uid)

    def _valid(self, c: _Candidate, borrow: bool, frs: Collection[FlavorResource]) -> bool:
        """``candidateIsValid``, evaluated as candidates are removed."""
        if c.wl.cluster_queue == self.spec.name:
            return True
        if borrow and c.variant == _RECLAIM_WITHOUT_BORROWING:
            return False
        node = self.tree.cqs.get(c.wl.cluster_queue)
        if node is None or node.within_nominal(frs):
            return False
        for ancestor in node.ancestors():
            if ancestor is c.lca:
                break
            if ancestor.within_nominal(frs):
                return False
        return True

    # ---- the algorithm ------------------------------------------------------------------------------------------

    def _fits(self, usage: Mapping[FlavorResource, int], borrow: bool) -> bool:
        """``workloadFits``."""
        for fr, value in usage.items():
            if not borrow and self.node.borrowing_with(fr, value):
                return False
            if value > max(0, available(self.node, fr)):
                return False
        return self._placeable is None or self._placeable()

    def _take_out(self, wl: AdmittedWorkload) -> None:
        self.tree.remove_usage(wl.cluster_queue, wl.usage)
        if self.tas is not None and wl.tas:
            self.tas.drop(wl)

    def _put_back(self, wl: AdmittedWorkload) -> None:
        self.tree.add_usage(wl.cluster_queue, wl.usage)
        if self.tas is not None and wl.tas:
            self.tas.keep(wl)

    def targets(
        self,
        usage: Mapping[FlavorResource, int],
        frs: Collection[FlavorResource],
        placeable: Callable[[], bool] | None = None,
    ) -> list[Target]:
        """The Workloads to evict so ``usage`` fits (and, with TAS, ``placeable`` holds), or none. The tree is
        left as is."""
        if not frs:
            return []
        self._placeable = placeable
        try:
            if self.fair is not None:
                return self._fair(usage, frs, self.fair)
            return self._classical(usage, frs)
        finally:
            self._placeable = None

    def _classical(self, usage: Mapping[FlavorResource, int], frs: Collection[FlavorResource]) -> list[Target]:
        """``classicalPreemptions``."""
        same: list[_Candidate] = []
        if self.spec.preemption.within_cluster_queue != NEVER:
            self._from_cq(self.node, None, frs, False, same)
        hierarchy: list[_Candidate] = []
        by_priority: list[_Candidate] = []
        if self.node.parent is not None and self.spec.preemption.reclaim_within_cohort != NEVER:
            advantage, remaining = self.node.quantities_fit(usage)
            previous: Node | None = None
            for current in self.node.ancestors():
                self._in_subtree(current, current, previous, frs, advantage, hierarchy if advantage else by_priority)
                fits, remaining = current.quantities_fit(remaining)
                advantage = advantage or fits
                previous = current
        lists = [sorted(lst, key=self._order) for lst in (hierarchy, by_priority, same)]
        candidates = [c for lst in lists for c in lst if c.wl.evicted] + [
            c for lst in lists for c in lst if not c.wl.evicted
        ]
        under_nominal = all(
            self.node.usage.get(fr, 0) < self.spec.quotas[fr].nominal if fr in self.spec.quotas else False for fr in frs
        )
        forbidden = self._bwc_forbidden()
        if (not hierarchy and not by_priority) or (forbidden and not under_nominal):
            attempts: tuple[bool, ...] = (True,)
        elif forbidden and not hierarchy:
            attempts = (False, True)
        else:
            attempts = (True, False)
        for borrow in attempts:
            chosen: list[_Candidate] = []
            for c in candidates:
                if not self._valid(c, borrow, frs):
                    continue
                self._take_out(c.wl)
                chosen.append(c)
                if self._fits(usage, borrow):
                    chosen = self._fill_back(chosen, usage, borrow)
                    self._restore(chosen)
                    return [Target(c.wl, _REASONS[c.variant]) for c in chosen]
            self._restore(chosen)
        return []

    def _restore(self, chosen: list[_Candidate]) -> None:
        for c in chosen:
            self._put_back(c.wl)

    def _fill_back(
        self, chosen: list[_Candidate], usage: Mapping[FlavorResource, int], borrow: bool
    ) -> list[_Candidate]:
        """``fillBackWorkloads``: give back, newest first (the last one is needed), what the fit does not need."""
        for i in range(len(chosen) - 2, -1, -1):
            self._put_back(chosen[i].wl)
            if self._fits(usage, borrow):
                chosen[i] = chosen[-1]
                chosen.pop()
            else:
                self._take_out(chosen[i].wl)
        return chosen

    # ---- fair sharing (fairPreemptions) ---------------------------------------------------------------------

    def _fair(
        self, usage: Mapping[FlavorResource, int], frs: Collection[FlavorResource], fair: FairSharing
    ) -> list[Target]:
        pre = self.spec.preemption
        found: list[AdmittedWorkload] = []
        for wl in self.tree.workloads.get(self.spec.name, {}).values():
            uses = any(fr in frs for fr in wl.assigned)
            if pre.within_cluster_queue != NEVER and self._satisfies(pre.within_cluster_queue, wl) and uses:
                found.append(wl)
        if self.node.parent is not None and pre.reclaim_within_cohort != NEVER:
            for other in self.node.root().subtree_cluster_queues():
                if other is self.node or not any(other.borrowing_with(fr, 0) for fr in frs):
                    continue
                for wl in self.tree.workloads.get(other.name, {}).values():
                    if self._satisfies(pre.reclaim_within_cohort, wl) and any(fr in frs for fr in wl.assigned):
                        found.append(wl)
        if not found:
            return []

        def key(wl: AdmittedWorkload) -> tuple[bool, bool, int, float, str]:
            return self._order(_Candidate(wl, None, _NEVER))

        found.sort(key=key)
        me = self.spec.name
        taken: list[Target] = []

        def fits_now() -> bool:
            self.tree.remove_usage(me, usage)
            try:
                return self._fits(usage, True)
            finally:
                self.tree.add_usage(me, usage)

        def take(wl: AdmittedWorkload, reason: str) -> bool:
            self._take_out(wl)
            taken.append(Target(wl, reason))
            return fits_now()

        self.tree.add_usage(me, usage)
        try:
            ok, retry = self._first_rule(found, frs, fair, key, take)
            if not ok and len(fair.strategies) > 1:
                ok = self._second_rule(retry, key, take)
        finally:
            self.tree.remove_usage(me, usage)
        if not ok:
            for t in taken:
                self._put_back(t.workload)
            return []
        reasons = {t.workload.key: t.reason for t in taken}
        kept = self._fill_back([_Candidate(t.workload, None, _NEVER) for t in taken], usage, True)
        self._restore(kept)
        return [Target(c.wl, reasons[c.wl.key]) for c in kept]

    def _first_rule(
        self,
        found: list[AdmittedWorkload],
        frs: Collection[FlavorResource],
        fair: FairSharing,
        key: Callable[[AdmittedWorkload], tuple[bool, bool, int, float, str]],
        take: Callable[[AdmittedWorkload, str], bool],
    ) -> tuple[bool, list[AdmittedWorkload]]:
        """``runFirstFsStrategy``."""
        rule = _RULES.get(fair.strategies[0], _final_share_rule)
        # queueWithinNominalInResourcesNeedingPreemption, with the workload's usage added.
        nominal_ok = fair.within_nominal and not any(self.node.borrowing_with(fr, 0) for fr in frs)
        retry: list[AdmittedWorkload] = []
        for target in queue_order(self.tree, self.spec.name, found, key):
            if target.own:
                if take(target.pop(), "InClusterQueue"):
                    return True, []
                continue
            if nominal_ok:
                if take(target.pop(), "InCohortReclamation"):
                    return True, []
                continue
            mine, theirs_before = target.shares()
            while target.pending():
                wl = target.pop()
                if rule(mine, theirs_before, target.share_without(wl)):
                    if take(wl, "InCohortFairSharing"):
                        return True, []
                    break
                retry.append(wl)
        return False, retry

    def _second_rule(
        self,
        retry: list[AdmittedWorkload],
        key: Callable[[AdmittedWorkload], tuple[bool, bool, int, float, str]],
        take: Callable[[AdmittedWorkload, str], bool],
    ) -> bool:
        """``runSecondFsStrategy``: ``LessThanInitialShare``, once per ClusterQueue."""
        order = queue_order(self.tree, self.spec.name, retry, key)
        for target in order:
            mine, theirs_before = target.shares()
            if compare(mine, theirs_before) < 0 and take(target.pop(), "InCohortFairSharing"):
                return True
            order.drop(target)
        return False

    def simulate(self, fr: FlavorResource, quantity: int) -> tuple[int, int]:
        """``PreemptionOracle.SimulatePreemption`` for one flavor-resource: the possibility (no candidates,
        preempt, or reclaim when every victim is in another ClusterQueue) and the borrowing height after it."""
        found = self.targets({fr: quantity}, {fr})
        if not found:
            return NO_CANDIDATES, lowest_fitting_subtree(self.node, fr, quantity)[0]
        for t in found:
            self.tree.remove_usage(t.workload.cluster_queue, t.workload.usage)
        try:
            borrow = lowest_fitting_subtree(self.node, fr, quantity)[0]
        finally:
            for t in found:
                self.tree.add_usage(t.workload.cluster_queue, t.workload.usage)
        if any(t.workload.cluster_queue == self.spec.name for t in found):
            return PREEMPT_POSSIBLE, borrow
        return RECLAIM_POSSIBLE, borrow


def _final_share_rule(mine: Share, _before: Share, after: Share) -> bool:
    """Rule S2-a, ``LessThanOrEqualToFinalShare``."""
    return compare(mine, after) <= 0


def _initial_share_rule(mine: Share, before: Share, _after: Share) -> bool:
    """Rule S2-b, ``LessThanInitialShare``."""
    return compare(mine, before) < 0


_RULES = {"LessThanOrEqualToFinalShare": _final_share_rule, "LessThanInitialShare": _initial_share_rule}
