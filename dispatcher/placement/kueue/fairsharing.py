"""Kueue's fair sharing: dominant resource shares, and the order in which fair preemption visits ClusterQueues.

Follows Kueue v0.17.0 ``pkg/cache/scheduler/fair_sharing.go`` (``dominantResourceShare``: what a node borrows beyond
its subtree quota, per resource summed over flavors, over what its parent could ever lend, in per-mille, the
largest ratio winning, divided by the node's ``fairSharing.weight``; ``CompareDRS`` with zero weights),
``pkg/scheduler/preemption/fairsharing`` (``TargetClusterQueueOrdering``: from the root Cohort down, the child with
the highest share that still borrows and has candidates; the almost-lowest-common-ancestors whose shares the
strategies ``LessThanOrEqualToFinalShare`` and ``LessThanInitialShare`` compare) and
``pkg/scheduler/fair_sharing_iterator.go`` (the admission tournament: per Cohort, the child whose share after
admitting its head is lowest, non-borrowing heads first, then priority, then FIFO).

Shares are computed from the live quota tree, so callers add and remove usage around them as Kueue's scheduler
simulates it on its snapshot. ClusterQueues and Cohorts are visited in name order where Kueue iterates a Go set
(its order is random there; only exact ties between Cohorts can differ).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from .amounts import FlavorResource, _add
from .cells import _Node
from .tree import QuotaTree
from .workloads import AdmittedWorkload

__all__ = ["DRS", "TargetClusterQueue", "TargetOrdering", "compare_drs", "dominant_resource_share", "tournament"]


@dataclass(frozen=True, slots=True)
class DRS:
    """``DRS``: a node's dominant resource share (``ratio`` in per-mille, unweighted)."""

    weight: float
    ratio: float
    resource: str = ""
    borrowing: bool = False
    borrowed: tuple[FlavorResource, ...] = ()

    @property
    def is_zero(self) -> bool:
        return self.ratio == 0

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and not self.is_zero

    @property
    def weighted(self) -> float:
        """``PreciseWeightedShare``: the ratio over the weight (infinite for a zero weight that borrows)."""
        if self.is_zero:
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.ratio / self.weight

    def rounded(self) -> int:
        """``roundedWeightedShare``: the weighted share rounded up, ``MaxInt64`` for a zero weight that borrows."""
        if self.zero_weight_borrows:
            return 2**63 - 1
        return math.ceil(self.weighted)

    def borrowing_on(self, requested: Mapping[FlavorResource, int]) -> bool:
        """``IsBorrowingOn``: the node borrows on a flavor-resource the workload requests."""
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)


NEGATIVE = DRS(1.0, -1.0)
"""``NegativeDRS``: below every real share."""


def compare_drs(a: DRS, b: DRS) -> int:
    """``CompareDRS``: -1 when ``a`` is lower (preferred to schedule), 1 when higher (preferred to preempt)."""
    az, bz = a.zero_weight_borrows, b.zero_weight_borrows
    if az and bz:
        return (a.ratio > b.ratio) - (a.ratio < b.ratio)
    if az:
        return 1
    if bz:
        return -1
    wa, wb = a.weighted, b.weighted
    return (wa > wb) - (wa < wb)


def _weight(tree: QuotaTree, node: _Node) -> float:
    if node.is_cq:
        return tree._cq_specs[node.name].fair_weight
    spec = tree._cohort_specs.get(node.name)
    return spec.fair_weight if spec is not None else 1.0


def _potential(node: _Node, fr: FlavorResource) -> int:
    """``potentialAvailable`` with a missing cell read as zero quota (a Go map miss)."""
    c = node.cells.get(fr)
    subtree = c.subtree if c is not None else 0
    if node.parent is None:
        return subtree
    value = _add(c.local if c is not None else 0, _potential(node.parent, fr))
    if c is not None and c.borrowing_limit is not None:
        value = min(_add(subtree, c.borrowing_limit), value)
    return value


def _lendable(node: _Node) -> dict[str, int]:
    """``calculateLendable``: per resource, what ``node`` could ever lend, over every flavor the root knows."""
    root = node
    while root.parent is not None:
        root = root.parent
    out: dict[str, int] = {}
    for fr, c in root.cells.items():
        if c.declared:
            out[fr[1]] = _add(out.get(fr[1], 0), _potential(node, fr))
    return out


def dominant_resource_share(tree: QuotaTree, node: _Node, requests: Mapping[FlavorResource, int] | None = None) -> DRS:
    """``dominantResourceShare`` of a ClusterQueue or Cohort node, with ``requests`` added to its usage."""
    weight = _weight(tree, node)
    if node.parent is None:
        return DRS(weight, 0.0)
    borrowing: dict[str, int] = {}
    borrowed: list[FlavorResource] = []
    for fr, c in node.cells.items():
        if not c.declared:
            continue
        amount = (requests.get(fr, 0) if requests else 0) + c.usage - c.subtree
        if amount > 0:
            borrowing[fr[1]] = borrowing.get(fr[1], 0) + amount
            borrowed.append(fr)
    if not borrowing:
        return DRS(weight, 0.0)
    lendable = _lendable(node.parent)
    ratio, dominant = 0.0, ""
    for resource in sorted(borrowing):
        lr = lendable.get(resource, 0)
        if lr > 0:
            value = float(borrowing[resource]) * 1000.0 / float(lr)
            if value > ratio or (value == ratio and resource < dominant):
                ratio, dominant = value, resource
    return DRS(weight, ratio, dominant, True, tuple(borrowed))


def cluster_queue_share(
    tree: QuotaTree, cluster_queue: str, requests: Mapping[FlavorResource, int] | None = None
) -> DRS:
    """The ClusterQueue's :func:`dominant_resource_share` (``ClusterQueueSnapshot.DominantResourceShare``)."""
    return dominant_resource_share(tree, tree._cq(cluster_queue), requests)


def _children(node: _Node) -> tuple[list[_Node], list[_Node]]:
    return sorted(node.child_cqs, key=lambda n: n.name), sorted(node.child_cohorts, key=lambda n: n.name)


# --------------------------------------------------------------------------------------------------------------
# Fair preemption's order (pkg/scheduler/preemption/fairsharing)
# --------------------------------------------------------------------------------------------------------------


class TargetClusterQueue:
    """``TargetClusterQueue``: a ClusterQueue yielding candidates, with the shares the strategies compare."""

    __slots__ = ("node", "ordering")

    def __init__(self, ordering: TargetOrdering, node: _Node) -> None:
        self.ordering = ordering
        self.node = node

    @property
    def in_cluster_queue(self) -> bool:
        """``InClusterQueuePreemption``: the preemptor's own ClusterQueue."""
        return self.node is self.ordering.preemptor

    def has_workload(self) -> bool:
        return bool(self.ordering.by_cq.get(self.node.name))

    def pop(self) -> AdmittedWorkload:
        return self.ordering.by_cq[self.node.name].pop(0)

    def _almost_lcas(self) -> tuple[_Node, _Node]:
        """``getAlmostLCAs``: the children of the lowest common Cohort on the preemptor's and the target's paths."""
        lca = None
        for ancestor in self.node.ancestors():
            if id(ancestor) in self.ordering.ancestor_ids:
                lca = ancestor
                break
        assert lca is not None, "no least common ancestor"
        return _almost_lca(self.ordering.preemptor, lca), _almost_lca(self.node, lca)

    def shares(self) -> tuple[DRS, DRS]:
        """``ComputeShares``: the preemptor's almost-LCA share (its workload added) and the target's, before."""
        p, t = self._almost_lcas()
        tree = self.ordering.tree
        return dominant_resource_share(tree, p), dominant_resource_share(tree, t)

    def share_after_removal(self, workload: AdmittedWorkload) -> DRS:
        """``ComputeTargetShareAfterRemoval``: the target's almost-LCA share without ``workload``."""
        tree = self.ordering.tree
        tree.remove_usage(self.node.name, workload.usage)
        try:
            return dominant_resource_share(tree, self._almost_lcas()[1])
        finally:
            tree.add_usage(self.node.name, workload.usage)


def _almost_lca(node: _Node, lca: _Node) -> _Node:
    walk = node
    for ancestor in node.ancestors():
        if ancestor is lca:
            return walk
        walk = ancestor
    raise AssertionError("no almost least common ancestor")


class TargetOrdering:
    """``TargetClusterQueueOrdering``: which ClusterQueue fair preemption takes its next candidate from.

    ``candidates`` are in Kueue's candidate order; ``order_key`` is that order's key (it breaks ties between
    ClusterQueues of equal share by their first candidates). Iterating yields a :class:`TargetClusterQueue`, maybe
    the same one again while its share stays the highest; the caller pops a workload or drops the queue in between.
    """

    def __init__(
        self,
        tree: QuotaTree,
        cluster_queue: str,
        candidates: Sequence[AdmittedWorkload],
        order_key: Callable[[AdmittedWorkload], tuple[object, ...]],
    ) -> None:
        self.tree = tree
        self.preemptor = tree._cq(cluster_queue)
        self.ancestor_ids = {id(a) for a in self.preemptor.ancestors()}
        self.order_key = order_key
        self.by_cq: dict[str, list[AdmittedWorkload]] = {}
        for c in candidates:
            self.by_cq.setdefault(c.cluster_queue, []).append(c)
        self.pruned_cqs: set[str] = set()
        self.pruned_cohorts: set[str] = set()

    def drop(self, target: TargetClusterQueue) -> None:
        """``DropQueue``."""
        self.pruned_cqs.add(target.node.name)

    def __iter__(self) -> Iterator[TargetClusterQueue]:
        pre = self.preemptor
        if pre.parent is None:
            target = TargetClusterQueue(self, pre)
            while target.has_workload():
                yield target
            return
        root = pre.parent
        while root.parent is not None:
            root = root.parent
        while root.name not in self.pruned_cohorts:
            found = self._next(root)
            if found is not None:
                yield found

    def _next(self, cohort: _Node) -> TargetClusterQueue | None:
        """``nextTarget``."""
        tree = self.tree
        cqs, cohorts = _children(cohort)
        best_cq: _Node | None = None
        best_cq_drs = NEGATIVE
        for cq in cqs:
            if cq.name in self.pruned_cqs:
                continue
            drs = dominant_resource_share(tree, cq)
            if (not drs.borrowing and cq is not self.preemptor) or not self.by_cq.get(cq.name):
                self.pruned_cqs.add(cq.name)
                continue
            cmp = compare_drs(drs, best_cq_drs)
            if cmp == 0 and best_cq is not None:
                if self.order_key(self.by_cq[cq.name][0]) < self.order_key(self.by_cq[best_cq.name][0]):
                    best_cq = cq
            elif cmp == 1:
                best_cq_drs, best_cq = drs, cq
        best_cohort: _Node | None = None
        best_cohort_drs = NEGATIVE
        for child in cohorts:
            if child.name in self.pruned_cohorts:
                continue
            drs = dominant_resource_share(tree, child)
            if not drs.borrowing and id(child) not in self.ancestor_ids:
                self.pruned_cohorts.add(child.name)
            elif compare_drs(drs, best_cohort_drs) >= 0:
                best_cohort_drs, best_cohort = drs, child
        if best_cohort is None and best_cq is None:
            self.pruned_cohorts.add(cohort.name)
            return None
        if best_cohort is not None and compare_drs(best_cohort_drs, best_cq_drs) >= 0:
            return self._next(best_cohort)
        assert best_cq is not None
        return TargetClusterQueue(self, best_cq)


# --------------------------------------------------------------------------------------------------------------
# Admission order (pkg/scheduler/fair_sharing_iterator.go)
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Head:
    """One ClusterQueue's head in a scheduling cycle: its quota usage if admitted, priority and queue-order time."""

    key: str
    cluster_queue: str
    usage: Mapping[FlavorResource, int]
    priority: int = 0
    queue_order_time: float = 0.0


def tournament(tree: QuotaTree, heads: Sequence[Head], *, prioritize_non_borrowing: bool = True) -> list[Head]:
    """The order in which a fair-sharing scheduling cycle considers ``heads`` (``fairSharingIterator``).

    Each pick runs ``runTournament`` over the root Cohort of some remaining head: per Cohort, its children's
    nominees are compared by the share their subtree would have after admitting the nominee (a nominee whose subtree
    would not borrow on the flavors it asks for first, with ``FairSharingPrioritizeNonBorrowing``), then priority,
    then the older timestamp. Heads of ClusterQueues without a Cohort come out as they are. Shares are taken from
    ``tree`` at each pick: add the usage of an admitted head between picks as the scheduler does (this function
    returns the order for an unchanged tree).
    """
    remaining = {h.cluster_queue: h for h in heads}
    order: list[Head] = []
    while remaining:
        head = next(iter(remaining.values()))
        node = tree._cq(head.cluster_queue)
        if node.parent is None:
            order.append(remaining.pop(head.cluster_queue))
            continue
        root = node.parent
        while root.parent is not None:
            root = root.parent
        values = _tournament_values(tree, root, remaining)
        winner = _run(root, remaining, values, prioritize_non_borrowing)
        assert winner is not None
        order.append(remaining.pop(winner.cluster_queue))
    return order


def _tournament_values(tree: QuotaTree, root: _Node, heads: Mapping[str, Head]) -> dict[tuple[str, str], DRS]:
    """``computeDRS``: per (parent Cohort, head), the share of the head's subtree under that Cohort with the head
    admitted."""
    values: dict[tuple[str, str], DRS] = {}
    stack = [root]
    cqs: list[_Node] = []
    while stack:
        n = stack.pop()
        cqs.extend(n.child_cqs)
        stack.extend(n.child_cohorts)
    for cq in cqs:
        head = heads.get(cq.name)
        if head is None:
            continue
        tree.add_usage(cq.name, head.usage)
        try:
            share = dominant_resource_share(tree, cq)
            for ancestor in cq.ancestors():
                values[(ancestor.name, head.key)] = share
                share = dominant_resource_share(tree, ancestor)
        finally:
            tree.remove_usage(cq.name, head.usage)
    return values


def _run(
    cohort: _Node, heads: Mapping[str, Head], values: Mapping[tuple[str, str], DRS], non_borrowing: bool
) -> Head | None:
    """``runTournament``."""
    cqs, cohorts = _children(cohort)
    candidates = [c for c in (_run(child, heads, values, non_borrowing) for child in cohorts) if c is not None]
    candidates += [heads[cq.name] for cq in cqs if cq.name in heads]
    if not candidates:
        return None
    best = candidates[0]
    for current in candidates[1:]:
        if _less(current, best, cohort.name, values, non_borrowing):
            best = current
    return best


def _less(a: Head, b: Head, parent: str, values: Mapping[tuple[str, str], DRS], non_borrowing: bool) -> bool:
    """``entryComparer.less``."""
    a_drs, b_drs = values[(parent, a.key)], values[(parent, b.key)]
    if non_borrowing:
        a_borrows, b_borrows = a_drs.borrowing_on(a.usage), b_drs.borrowing_on(b.usage)
        if a_borrows != b_borrows:
            return not a_borrows
    cmp = compare_drs(a_drs, b_drs)
    if cmp != 0:
        return cmp == -1
    if a.priority != b.priority:
        return a.priority > b.priority
    return a.queue_order_time < b.queue_order_time
