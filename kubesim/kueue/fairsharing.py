"""Fair sharing in the simulated Kueue: dominant resource shares, fair preemption's queue order, the admission
tournament.

Written from Kueue v0.17.0, independently of the dispatcher's model:

* ``pkg/cache/scheduler/fair_sharing.go``: a node's share is, per resource (summed over its flavors), what its usage
  (plus a workload's requests) exceeds its subtree quota by, times 1000, over what its parent could ever lend of
  that resource across the root's flavors (``potentialAvailable``); the largest ratio (ties: the smaller resource
  name), over the node's ``fairSharing.weight``. A root has no share. ``CompareDRS``: a zero weight that borrows is
  above everything;
* ``pkg/scheduler/preemption/fairsharing/ordering.go``: from the root Cohort down, the child ClusterQueue or
  Cohort with the highest share that still borrows (the preemptor's own queue and the Cohorts above it stay while
  they have candidates), ties between ClusterQueues by their first candidates, between a Cohort and a ClusterQueue
  to the Cohort; ``least_common_ancestor.go`` for the shares the strategies compare;
* ``pkg/scheduler/fair_sharing_iterator.go``: each pick runs a tournament up the root Cohort of some remaining head:
  per Cohort the child whose share with its nominee admitted is lowest wins (with
  ``FairSharingPrioritizeNonBorrowing``, one not borrowing on what it asks first), then priority, then the older
  timestamp.

Go iterates sets in random order where this module takes names in order: only exact ties between Cohorts differ.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubecommon.quantity import QuantityError, parse_quantity

from .quota import Node, QuotaTree, potential_available
from .requests import FlavorResource

__all__ = ["FairSharing", "Share", "compare", "fair_weight", "queue_order", "share_of", "tournament"]


@dataclass(frozen=True)
class FairSharing:
    """Kueue's ``fairSharing`` configuration: the preemption strategies, in order."""

    strategies: tuple[str, ...] = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
    within_nominal: bool = True
    non_borrowing_first: bool = True

    @classmethod
    def from_config(cls, raw: Mapping[str, Any]) -> FairSharing | None:
        """v1beta2: the section's presence turns it on; v1beta1: ``enable: true``."""
        section = raw.get("fairSharing")
        if not isinstance(section, Mapping):
            return None
        if str(raw.get("apiVersion") or "").endswith("v1beta1") and section.get("enable") is not True:
            return None
        listed = tuple(str(s) for s in section.get("preemptionStrategies") or () if s)
        raw_gates = raw.get("featureGates")
        gates: Mapping[str, Any] = raw_gates if isinstance(raw_gates, Mapping) else {}
        return cls(
            listed or cls.strategies,
            gates.get("FairSharingPreemptWithinNominal", True) is not False,
            gates.get("FairSharingPrioritizeNonBorrowing", True) is not False,
        )


def fair_weight(spec: Mapping[str, Any]) -> float:
    """``parseFairWeight`` of an object's ``spec.fairSharing.weight`` (1 when unset)."""
    weight = ((spec.get("fairSharing") or {}) if isinstance(spec, Mapping) else {}).get("weight")
    if weight is None:
        return 1.0
    try:
        return float(parse_quantity(weight))
    except (QuantityError, TypeError, ValueError):
        return 1.0


@dataclass(frozen=True)
class Share:
    """A node's dominant resource share (unweighted ``ratio`` in per mille)."""

    ratio: float
    weight: float
    resource: str = ""
    borrowing: bool = False
    borrowed: frozenset[FlavorResource] = frozenset()

    def value(self) -> float:
        if self.ratio == 0:
            return 0.0
        return math.inf if self.weight == 0 else self.ratio / self.weight

    @property
    def zero_weight_borrowing(self) -> bool:
        return self.weight == 0 and self.ratio != 0


BELOW_ALL = Share(-1.0, 1.0)


def compare(a: Share, b: Share) -> int:
    """``CompareDRS``."""
    if a.zero_weight_borrowing or b.zero_weight_borrowing:
        if a.zero_weight_borrowing and b.zero_weight_borrowing:
            x, y = a.ratio, b.ratio
        else:
            return 1 if a.zero_weight_borrowing else -1
    else:
        x, y = a.value(), b.value()
    return (x > y) - (x < y)


def share_of(tree: QuotaTree, node: Node, extra: Mapping[FlavorResource, int] | None = None) -> Share:
    """``dominantResourceShare``."""
    if node.is_cq:
        weight = tree.cq_specs[node.name].fair_weight
    else:
        cohort = tree.cohort_specs.get(node.name)
        weight = cohort.fair_weight if cohort is not None else 1.0
    if node.parent is None:
        return Share(0.0, weight)
    over: dict[str, int] = {}
    borrowed: set[FlavorResource] = set()
    for fr, quota in node.subtree.items():
        excess = (extra or {}).get(fr, 0) + node.usage.get(fr, 0) - quota
        if excess > 0:
            over[fr[1]] = over.get(fr[1], 0) + excess
            borrowed.add(fr)
    if not over:
        return Share(0.0, weight)
    root = node.parent.root()
    lendable: dict[str, int] = {}
    for fr in root.subtree:
        lendable[fr[1]] = lendable.get(fr[1], 0) + potential_available(node.parent, fr)
    best, name = 0.0, ""
    for res in sorted(over):
        if lendable.get(res, 0) > 0:
            ratio = float(over[res]) * 1000.0 / float(lendable[res])
            if ratio > best:
                best, name = ratio, res
    return Share(best, weight, name, True, frozenset(borrowed))


def _sorted_children(node: Node) -> tuple[list[Node], list[Node]]:
    return sorted(node.child_cqs, key=lambda n: n.name), sorted(node.child_cohorts, key=lambda n: n.name)


# --------------------------------------------------------------------------------------------------------------
# Fair preemption: where candidates come from
# --------------------------------------------------------------------------------------------------------------


class QueueTarget:
    """A ClusterQueue fair preemption takes candidates from."""

    def __init__(self, order: QueueOrder, node: Node) -> None:
        self.order = order
        self.node = node

    @property
    def own(self) -> bool:
        return self.node is self.order.preemptor

    def pending(self) -> bool:
        return bool(self.order.lists.get(self.node.name))

    def pop(self) -> Any:
        return self.order.lists[self.node.name].pop(0)

    def _pair(self) -> tuple[Node, Node]:
        above = {id(a) for a in self.order.preemptor.ancestors()}
        lca = next(a for a in self.node.ancestors() if id(a) in above)

        def child_of_lca(n: Node) -> Node:
            while n.parent is not lca:
                assert n.parent is not None
                n = n.parent
            return n

        return child_of_lca(self.order.preemptor), child_of_lca(self.node)

    def shares(self) -> tuple[Share, Share]:
        mine, theirs = self._pair()
        tree = self.order.tree
        return share_of(tree, mine), share_of(tree, theirs)

    def share_without(self, wl: Any) -> Share:
        tree = self.order.tree
        tree.remove_usage(self.node.name, wl.usage)
        try:
            return share_of(tree, self._pair()[1])
        finally:
            tree.add_usage(self.node.name, wl.usage)


class QueueOrder:
    """``TargetClusterQueueOrdering`` over candidates given in candidate order."""

    def __init__(self, tree: QuotaTree, cq: str, candidates: Sequence[Any], key: Callable[[Any], Any]) -> None:
        self.tree = tree
        self.preemptor = tree.node(cq)
        self.key = key
        self.lists: dict[str, list[Any]] = {}
        for c in candidates:
            self.lists.setdefault(c.cluster_queue, []).append(c)
        self.dropped: set[str] = set()
        self.done_cohorts: set[str] = set()
        self.above = {id(a) for a in self.preemptor.ancestors()}

    def drop(self, target: QueueTarget) -> None:
        self.dropped.add(target.node.name)

    def __iter__(self) -> Iterator[QueueTarget]:
        if self.preemptor.parent is None:
            t = QueueTarget(self, self.preemptor)
            while t.pending():
                yield t
            return
        root = self.preemptor.root()
        while root.name not in self.done_cohorts:
            found = self._descend(root)
            if found is not None:
                yield found

    def _descend(self, cohort: Node) -> QueueTarget | None:
        cqs, cohorts = _sorted_children(cohort)
        pick_cq, pick_cq_share = None, BELOW_ALL
        for cq in cqs:
            if cq.name in self.dropped:
                continue
            s = share_of(self.tree, cq)
            if (not s.borrowing and cq is not self.preemptor) or not self.lists.get(cq.name):
                self.dropped.add(cq.name)
                continue
            c = compare(s, pick_cq_share)
            if c > 0:
                pick_cq, pick_cq_share = cq, s
            elif (
                c == 0
                and pick_cq is not None
                and self.key(self.lists[cq.name][0]) < self.key(self.lists[pick_cq.name][0])
            ):
                pick_cq = cq
        pick_co, pick_co_share = None, BELOW_ALL
        for co in cohorts:
            if co.name in self.done_cohorts:
                continue
            s = share_of(self.tree, co)
            if not s.borrowing and id(co) not in self.above:
                self.done_cohorts.add(co.name)
            elif compare(s, pick_co_share) >= 0:
                pick_co, pick_co_share = co, s
        if pick_cq is None and pick_co is None:
            self.done_cohorts.add(cohort.name)
            return None
        if pick_co is not None and compare(pick_co_share, pick_cq_share) >= 0:
            return self._descend(pick_co)
        assert pick_cq is not None
        return QueueTarget(self, pick_cq)


def queue_order(tree: QuotaTree, cq: str, candidates: Sequence[Any], key: Callable[[Any], Any]) -> QueueOrder:
    return QueueOrder(tree, cq, candidates, key)


# --------------------------------------------------------------------------------------------------------------
# The admission tournament
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Contender:
    """A ClusterQueue's head in a cycle: its key, ClusterQueue, quota usage, priority, queue-order timestamp."""

    key: Any
    cq: str
    usage: Mapping[FlavorResource, int]
    priority: int
    ts: float


def tournament(tree: QuotaTree, heads: Sequence[Contender], non_borrowing_first: bool = True) -> Contender:
    """The next head to consider (``fairSharingIterator.pop`` for the first head's root Cohort)."""
    first = heads[0]
    node = tree.node(first.cq)
    if node.parent is None:
        return first
    root = node.root()
    by_cq = {h.cq: h for h in heads}
    shares: dict[tuple[str, Any], Share] = {}
    for cq in root.subtree_cluster_queues():
        head = by_cq.get(cq.name)
        if head is None:
            continue
        tree.add_usage(cq.name, head.usage)
        try:
            current = share_of(tree, cq)
            for anc in cq.ancestors():
                shares[(anc.name, head.key)] = current
                current = share_of(tree, anc)
        finally:
            tree.remove_usage(cq.name, head.usage)

    def better(a: Contender, b: Contender, parent: str) -> bool:
        sa, sb = shares[(parent, a.key)], shares[(parent, b.key)]
        if non_borrowing_first:
            ba = any(a.usage.get(fr, 0) > 0 for fr in sa.borrowed)
            bb = any(b.usage.get(fr, 0) > 0 for fr in sb.borrowed)
            if ba != bb:
                return not ba
        c = compare(sa, sb)
        if c:
            return c < 0
        if a.priority != b.priority:
            return a.priority > b.priority
        return a.ts < b.ts

    def play(cohort: Node) -> Contender | None:
        cqs, cohorts = _sorted_children(cohort)
        field_ = [w for w in (play(c) for c in cohorts) if w is not None]
        field_ += [by_cq[c.name] for c in cqs if c.name in by_cq]
        if not field_:
            return None
        best = field_[0]
        for other in field_[1:]:
            if better(other, best, cohort.name):
                best = other
        return best

    winner = play(root)
    assert winner is not None
    return winner
