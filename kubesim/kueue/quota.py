"""The simulated Kueue's quota tree: ClusterQueues and Cohorts with their quotas, usage, borrowing and lending.

Follows Kueue v0.17 ``pkg/cache/scheduler/resource_node.go`` (subtree quota, local quota kept back by a lending
limit, ``available`` and ``potentialAvailable`` bounded by borrowing limits on the way up, usage that bubbles up
past the local quota, ``QuantitiesFitInQuota``, ``IsWithinNominalInResources``), ``clusterqueue_snapshot.go`` and
``cohort_snapshot.go`` (``BorrowingWith``), ``pkg/cache/hierarchy`` (implicit Cohorts for names nothing defines,
dropped again when nothing is under them; Cohorts in a parent cycle are left out and their ClusterQueues are
inactive) and ``pkg/workload`` for the usage of an admitted Workload (``totalRequestsFromAdmission``: the
admission's resource usage, scaled down for reclaimable pods).

Amounts are Python integers: they neither overflow nor saturate, so a ``1E`` CPU quota is simply very large.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubecommon.quantity import QuantityError, parse_quantity

from .queues import queue_order_timestamp, timestamp
from .requests import FlavorResource, quantity_string, resource_value
from .specs import ClusterQueueSpec, CohortSpec, Quota
from .tasnodes import assignment_from_api

__all__ = ["AdmittedWorkload", "Node", "QuotaTree", "available", "lowest_fitting_subtree", "potential_available"]

Obj = dict[str, Any]
_NO_QUOTA = Quota()


@dataclass
class AdmittedWorkload:
    """A Workload holding quota (``workload.Info`` built from its admission)."""

    key: str
    cluster_queue: str
    usage: dict[FlavorResource, int]
    #: Every (flavor, resource) the admission assigned, zero usage included (``WorkloadUsesResources``).
    assigned: frozenset[FlavorResource] = frozenset()
    priority: int = 0
    queue_order_time: float = 0.0
    reserved_at: float | None = None
    evicted: bool = False
    uid: str = ""
    #: TAS: (flavor, leaf domain key, per-pod usage, pods) for every domain of a ``topologyAssignment``.
    tas: tuple[tuple[str, str, Mapping[str, int], int], ...] = ()

    @classmethod
    def from_object(cls, wl: Mapping[str, Any]) -> AdmittedWorkload:
        meta = wl.get("metadata") or {}
        status = wl.get("status") or {}
        admission = status.get("admission") or {}
        spec_counts: dict[str, int] = {}
        for ps in (wl.get("spec") or {}).get("podSets") or ():
            raw = ps.get("count", 1)
            spec_counts[str(ps.get("name") or "main")] = raw if isinstance(raw, int) else 1
        reclaimable = {str(r.get("name") or ""): int(r.get("count") or 0) for r in status.get("reclaimablePods") or ()}
        usage: dict[FlavorResource, int] = {}
        assigned: set[FlavorResource] = set()
        tas: list[tuple[str, str, Mapping[str, int], int]] = []
        for psa in admission.get("podSetAssignments") or ():
            name = str(psa.get("name") or "main")
            raw_count = psa.get("count")
            count = raw_count if isinstance(raw_count, int) else spec_counts.get(name, 0)
            after_reclaim = spec_counts.get(name, 0) - reclaimable.get(name, 0)
            flavors = {str(r): str(f) for r, f in (psa.get("flavors") or {}).items()}
            assigned.update((f, r) for r, f in flavors.items())
            placed = assignment_from_api(psa.get("topologyAssignment"))
            if placed is not None:
                # totalRequestsFromAdmission: the pod set's usage over its count, per domain (before reclaim).
                per_pod = {
                    str(r): resource_value(str(r), _parse(q)) // count if count else 0
                    for r, q in (psa.get("resourceUsage") or {}).items()
                }
                for flavor in dict.fromkeys(flavors.values()):
                    tas += [(flavor, ",".join(vals), per_pod, n) for vals, n in placed[1]]
            for res, qty in (psa.get("resourceUsage") or {}).items():
                value = resource_value(str(res), _parse(qty))
                if after_reclaim < count:
                    value = value // count * after_reclaim if count else value
                fr = (flavors.get(str(res), ""), str(res))
                usage[fr] = usage.get(fr, 0) + value
        reserved = None
        for c in status.get("conditions") or ():
            if c.get("type") == "QuotaReserved" and c.get("status") == "True":
                reserved = timestamp(c.get("lastTransitionTime"))
        evicted = any(c.get("type") == "Evicted" and c.get("status") == "True" for c in status.get("conditions") or ())
        priority = (wl.get("spec") or {}).get("priority")
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        return cls(
            key=f"{ns}/{name}",
            cluster_queue=str(admission.get("clusterQueue") or ""),
            usage=usage,
            assigned=frozenset(assigned),
            priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
            queue_order_time=queue_order_timestamp(wl),
            reserved_at=reserved,
            evicted=evicted,
            uid=str(meta.get("uid") or ""),
            tas=tuple(tas),
        )


def _parse(qty: object) -> Fraction:
    try:
        return parse_quantity(qty if isinstance(qty, str | int | float) else 0)
    except QuantityError:
        return Fraction(0)


class Node:
    """A ClusterQueue or a Cohort (``resourceNode`` plus its place in the hierarchy)."""

    __slots__ = ("child_cohorts", "child_cqs", "generation", "is_cq", "name", "parent", "quotas", "subtree", "usage")

    def __init__(self, name: str, is_cq: bool, quotas: Mapping[FlavorResource, Quota]) -> None:
        self.name = name
        self.is_cq = is_cq
        self.parent: Node | None = None
        self.quotas = quotas
        self.subtree: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}
        self.child_cqs: list[Node] = []
        self.child_cohorts: list[Node] = []
        #: ``AllocatableResourceGeneration`` (ClusterQueues only).
        self.generation = 1

    def ancestors(self) -> Iterator[Node]:
        """``PathParentToRoot``."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> Node:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def local_quota(self, fr: FlavorResource) -> int:
        """Quota a lending limit keeps inside this subtree (``resourceNode.localQuota``)."""
        lending = self.quotas.get(fr, _NO_QUOTA).lending_limit
        return max(0, self.subtree.get(fr, 0) - lending) if lending is not None else 0

    def local_available(self, fr: FlavorResource) -> int:
        """``LocalAvailable``: the kept-back quota not yet used."""
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def borrowing_with(self, fr: FlavorResource, value: int) -> bool:
        """``BorrowingWith``: usage plus ``value`` above nominal (ClusterQueue) or subtree quota (Cohort)."""
        limit = self.quotas.get(fr, _NO_QUOTA).nominal if self.is_cq else self.subtree.get(fr, 0)
        return self.usage.get(fr, 0) + value > limit

    def within_nominal(self, frs: Iterable[FlavorResource]) -> bool:
        """``IsWithinNominalInResources``."""
        return all(self.usage.get(fr, 0) <= self.subtree.get(fr, 0) for fr in frs)

    def quantities_fit(self, requests: Mapping[FlavorResource, int]) -> tuple[bool, dict[FlavorResource, int]]:
        """``QuantitiesFitInQuota``: whether the requests fit this subtree, and what exceeds its local quota."""
        fits = True
        remaining: dict[FlavorResource, int] = {}
        for fr, value in requests.items():
            if self.usage.get(fr, 0) + value > self.subtree.get(fr, 0):
                fits = False
            remaining[fr] = max(0, value - self.local_available(fr))
        return fits, remaining

    def height(self) -> int:
        """``getNodeHeight``: the distance to the furthest leaf (a Cohort with only ClusterQueues is 1)."""
        h = min(len(self.child_cqs) + len(self.child_cohorts), 1)
        for child in self.child_cohorts:
            h = max(h, child.height() + 1)
        return h

    def subtree_cluster_queues(self) -> list[Node]:
        out = list(self.child_cqs)
        for child in self.child_cohorts:
            out += child.subtree_cluster_queues()
        return out


def available(node: Node, fr: FlavorResource) -> int:
    """``available`` (may be negative after over-admission)."""
    if node.parent is None:
        return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
    parent_available = available(node.parent, fr)
    borrowing = node.quotas.get(fr, _NO_QUOTA).borrowing_limit
    if borrowing is not None:
        local = node.local_quota(fr)
        stored_in_parent = node.subtree.get(fr, 0) - local
        used_in_parent = max(0, node.usage.get(fr, 0) - local)
        parent_available = min(stored_in_parent - used_in_parent + borrowing, parent_available)
    return node.local_available(fr) + parent_available


def potential_available(node: Node, fr: FlavorResource) -> int:
    """``potentialAvailable``: the most the node could get with nothing in use."""
    if node.parent is None:
        return node.subtree.get(fr, 0)
    value = node.local_quota(fr) + potential_available(node.parent, fr)
    borrowing = node.quotas.get(fr, _NO_QUOTA).borrowing_limit
    if borrowing is not None:
        value = min(node.subtree.get(fr, 0) + borrowing, value)
    return value


def lowest_fitting_subtree(node: Node, fr: FlavorResource, value: int) -> tuple[int, bool]:
    """``FindHeightOfLowestSubtreeThatFits`` (preemption/classical): the height of the smallest subtree that fits
    ``value`` more (0 without borrowing; the whole tree's height when none fits), and whether a higher Cohort
    remains above it (so quota could be reclaimed in the hierarchy)."""
    if not node.borrowing_with(fr, value) or node.parent is None:
        return 0, node.parent is not None
    remaining = value - node.local_available(fr)
    for tracking in node.ancestors():
        if not tracking.borrowing_with(fr, remaining):
            return tracking.height(), tracking.parent is not None
        remaining -= tracking.local_available(fr)
    return node.parent.root().height(), False


def _add_usage(node: Node, fr: FlavorResource, value: int) -> None:
    local_available = node.local_available(fr)
    node.usage[fr] = node.usage.get(fr, 0) + value
    if node.parent is not None and value > local_available:
        _add_usage(node.parent, fr, value - local_available)


def _remove_usage(node: Node, fr: FlavorResource, value: int) -> None:
    stored_in_parent = node.usage.get(fr, 0) - node.local_quota(fr)
    node.usage[fr] = node.usage.get(fr, 0) - value
    if stored_in_parent <= 0 or node.parent is None:
        return
    _remove_usage(node.parent, fr, min(value, stored_in_parent))


@dataclass
class QuotaTree:
    """The cache's ClusterQueues and Cohorts. Structure changes rebuild the hierarchy and the subtree quotas
    (``updateCohortTreeResources``), keeping each ClusterQueue's usage; usage changes walk up incrementally."""

    cq_specs: dict[str, ClusterQueueSpec] = field(default_factory=dict)
    cohort_specs: dict[str, CohortSpec] = field(default_factory=dict)
    cqs: dict[str, Node] = field(default_factory=dict)
    cohorts: dict[str, Node] = field(default_factory=dict)
    workloads: dict[str, dict[str, AdmittedWorkload]] = field(default_factory=dict)
    #: ClusterQueues whose Cohort is part of a parent cycle (inactive in Kueue's snapshot).
    in_cycle: set[str] = field(default_factory=set)

    # ---- structure ----------------------------------------------------------------------------------------------

    def set_cluster_queue(self, spec: ClusterQueueSpec) -> None:
        self.cq_specs[spec.name] = spec
        self._rebuild()

    def delete_cluster_queue(self, name: str) -> None:
        if self.cq_specs.pop(name, None) is not None:
            self.workloads.pop(name, None)
            self._rebuild()

    def set_cohort(self, spec: CohortSpec) -> None:
        self.cohort_specs[spec.name] = spec
        self._rebuild()

    def delete_cohort(self, name: str) -> None:
        if self.cohort_specs.pop(name, None) is not None:
            self._rebuild()

    def _rebuild(self) -> None:
        old = self.cqs
        cohorts: dict[str, Node] = {}

        def cohort(name: str) -> Node:
            node = cohorts.get(name)
            if node is None:
                spec = self.cohort_specs.get(name)
                node = cohorts[name] = Node(name, False, spec.quotas if spec is not None else {})
            return node

        for cspec in self.cohort_specs.values():
            node = cohort(cspec.name)
            if cspec.parent:
                node.parent = cohort(cspec.parent)
        cyclic: set[str] = set()
        for node in list(cohorts.values()):
            seen: list[str] = []
            walk: Node | None = node
            while walk is not None and walk.name not in seen:
                seen.append(walk.name)
                walk = walk.parent
            if walk is not None:  # came back to a Cohort already seen: the whole chain has a cycle above it
                cyclic.update(seen)
        for node in cohorts.values():
            if node.parent is not None:
                node.parent.child_cohorts.append(node)
        self.in_cycle = set()
        cqs: dict[str, Node] = {}
        for spec in self.cq_specs.values():
            node = Node(spec.name, True, spec.quotas)
            previous = old.get(spec.name)
            if previous is not None:
                node.usage = previous.usage
                node.generation = previous.generation + 1
            cqs[spec.name] = node
            if spec.cohort:
                parent = cohort(spec.cohort)
                node.parent = parent
                parent.child_cqs.append(node)
        for name, node in cqs.items():
            if node.parent is not None and node.parent.name in cyclic:
                # Left out of Kueue's snapshot; detached here so that nothing walks the cycle.
                self.in_cycle.add(name)
                node.parent.child_cqs.remove(node)
                node.parent = None
        # An implicit Cohort exists only while something names it, so none is ever empty here.
        for node in cohorts.values():
            if node.name in cyclic:
                continue
            if node.parent is None:
                _accumulate(node)
        for node in cqs.values():
            if node.parent is None:
                node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}
        self.cqs = cqs
        self.cohorts = {n: c for n, c in cohorts.items() if n not in cyclic}

    # ---- lookups ------------------------------------------------------------------------------------------------

    def node(self, cluster_queue: str) -> Node:
        return self.cqs[cluster_queue]

    def parent_cohort(self, cluster_queue: str) -> str | None:
        node = self.cqs.get(cluster_queue)
        return node.parent.name if node is not None and node.parent is not None else None

    def path(self, cluster_queue: str) -> str:
        """``buildCQPath``: ``/root/.../cq``."""
        node = self.cqs.get(cluster_queue)
        parts = [cluster_queue] + ([a.name for a in _limited_ancestors(node)] if node is not None else [])
        return "/" + "/".join(reversed(parts))

    def cluster_queues_in_tree(self, cluster_queue: str) -> list[str]:
        """Every ClusterQueue under the same root Cohort (itself alone without a Cohort)."""
        node = self.cqs.get(cluster_queue)
        if node is None:
            return []
        if node.parent is None or cluster_queue in self.in_cycle:
            return [cluster_queue]
        return [n.name for n in node.root().subtree_cluster_queues()]

    # ---- usage --------------------------------------------------------------------------------------------------

    def add_usage(self, cluster_queue: str, usage: Mapping[FlavorResource, int]) -> None:
        node = self.cqs[cluster_queue]
        for fr, value in usage.items():
            _add_usage(node, fr, value)

    def remove_usage(self, cluster_queue: str, usage: Mapping[FlavorResource, int]) -> None:
        node = self.cqs[cluster_queue]
        for fr, value in usage.items():
            _remove_usage(node, fr, value)

    def add_workload(self, wl: AdmittedWorkload) -> None:
        """``addOrUpdateWorkload``: an update first removes the old entry (and so bumps the generation)."""
        self.remove_workload(wl.cluster_queue, wl.key)
        self.workloads.setdefault(wl.cluster_queue, {})[wl.key] = wl
        self.add_usage(wl.cluster_queue, wl.usage)

    def remove_workload(self, cluster_queue: str, key: str) -> AdmittedWorkload | None:
        """``deleteWorkload``: releases the usage and bumps the ClusterQueue's generation."""
        wl = self.workloads.get(cluster_queue, {}).pop(key, None)
        if wl is not None and cluster_queue in self.cqs:
            self.remove_usage(cluster_queue, wl.usage)
            self.cqs[cluster_queue].generation += 1
        return wl

    def find_workload(self, key: str) -> AdmittedWorkload | None:
        for wls in self.workloads.values():
            wl = wls.get(key)
            if wl is not None:
                return wl
        return None

    def fits(self, cluster_queue: str, usage: Mapping[FlavorResource, int]) -> bool:
        """``ClusterQueueSnapshot.Fits`` (no TAS)."""
        node = self.cqs[cluster_queue]
        return all(max(0, available(node, fr)) >= value for fr, value in usage.items())

    # ---- status -------------------------------------------------------------------------------------------------

    def flavors_reservation(self, cluster_queue: str) -> list[Obj]:
        """``status.flavorsReservation``: per flavor of each resource group, per covered resource (sorted), the
        ``total`` in use and what is ``borrowed`` beyond nominal quota (zero outside a Cohort)."""
        spec = self.cq_specs.get(cluster_queue)
        node = self.cqs.get(cluster_queue)
        if spec is None or node is None:
            return []
        out: list[Obj] = []
        for rg in spec.groups:
            for flavor in rg.flavors:
                resources = []
                for res in sorted(rg.covered):
                    used = node.usage.get((flavor, res), 0)
                    nominal = node.quotas.get((flavor, res), _NO_QUOTA).nominal
                    borrowed = max(0, used - nominal) if node.parent is not None else 0
                    resources.append(
                        {
                            "name": res,
                            "total": quantity_string(res, used),
                            "borrowed": quantity_string(res, borrowed),
                        }
                    )
                out.append({"name": flavor, "resources": resources})
        return out


def _limited_ancestors(node: Node | None) -> list[Node]:
    """Ancestors of ``node``, stopping at the first repeat (a parent cycle)."""
    out: list[Node] = []
    seen: set[str] = set()
    walk = node.parent if node is not None else None
    while walk is not None and walk.name not in seen:
        seen.add(walk.name)
        out.append(walk)
        walk = walk.parent
    return out


def _accumulate(cohort: Node) -> None:
    """``updateCohortResourceNode``: a Cohort's subtree quota is its own plus what its children lend, and its usage
    is what its children use beyond their local quota."""
    cohort.subtree = {fr: q.nominal for fr, q in cohort.quotas.items()}
    cohort.usage = {}
    for child in cohort.child_cohorts:
        _accumulate(child)
        _take_from_child(cohort, child)
    for cq in cohort.child_cqs:
        cq.subtree = {fr: q.nominal for fr, q in cq.quotas.items()}
        _take_from_child(cohort, cq)


def _take_from_child(parent: Node, child: Node) -> None:
    for fr, quota in child.subtree.items():
        parent.subtree[fr] = parent.subtree.get(fr, 0) + quota - child.local_quota(fr)
    for fr, used in child.usage.items():
        parent.usage[fr] = parent.usage.get(fr, 0) + max(0, used - child.local_quota(fr))
