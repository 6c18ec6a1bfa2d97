"""The cells of Kueue's quota tree: one node's quota and usage for one (flavor, resource).

Follows ``pkg/cache/scheduler/resource_node.go``: nominal quota, borrowing and lending limits, the subtree quota,
the part a lending limit keeps out of the parent's reach, and the recursive ``available`` /
``potentialAvailable`` walks with incremental usage bookkeeping, in an exact variant (saturating ``int64``
arithmetic) and a fast one (plain ints, while no value comes near ``int64``'s bounds). :class:`~.tree.QuotaTree`
builds and owns them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from .amounts import FlavorResource, _add, _sub


class _Cell:
    """One node's state for one (flavor, resource).

    ``up`` is the parent node's cell for the same flavor-resource, so the recursive ``available`` walk is a
    chain of attribute reads. ``local`` (the quota the lending limit keeps out of the parent's reach) and
    ``stored`` (what this node contributes to the parent) depend only on quotas and are cached at rebuild.
    """

    __slots__ = (
        "borrowing_limit",
        "declared",
        "lending_limit",
        "local",
        "nominal",
        "stored",
        "subtree",
        "up",
        "usage",
    )

    def __init__(self, up: _Cell | None) -> None:
        self.nominal = 0
        self.borrowing_limit: int | None = None
        self.lending_limit: int | None = None
        self.subtree = 0
        self.local = 0
        self.stored = 0
        self.usage = 0
        self.up = up
        #: Whether the flavor-resource is in the node's ``SubtreeQuota`` (quota declared by the node or below it);
        #: a cell that only holds usage is not (fair sharing's dominant resource share looks only at these).
        self.declared = False

    def finish(self) -> None:
        """Derive ``local`` and ``stored`` once the subtree quota is known (``resourceNode.localQuota``)."""
        if self.lending_limit is not None:
            self.local = max(0, _sub(self.subtree, self.lending_limit))
        else:
            self.local = 0
        self.stored = _sub(self.subtree, self.local)


@dataclass(frozen=True, slots=True)
class _ResourceGroup:
    covered: frozenset[str]
    flavors: tuple[str, ...]


class _Node:
    """A ClusterQueue or a Cohort of the tree."""

    __slots__ = ("cells", "child_cohorts", "child_cqs", "groups", "height", "is_cq", "name", "parent", "rg_of")

    def __init__(self, name: str, is_cq: bool) -> None:
        self.name = name
        self.is_cq = is_cq
        self.parent: _Node | None = None
        self.cells: dict[FlavorResource, _Cell] = {}
        self.child_cqs: list[_Node] = []
        self.child_cohorts: list[_Node] = []
        self.height = 0
        self.groups: tuple[_ResourceGroup, ...] = ()
        self.rg_of: dict[str, _ResourceGroup] = {}

    def cell(self, fr: FlavorResource) -> _Cell:
        """The cell for ``fr``, created (with its ancestors') as zero quota when absent, like a Go map miss."""
        c = self.cells.get(fr)
        if c is None:
            c = _Cell(self.parent.cell(fr) if self.parent is not None else None)
            self.cells[fr] = c
        return c

    def ancestors(self) -> Iterator[_Node]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def borrowing_with(self, fr: FlavorResource, value: int) -> bool:
        """ClusterQueue: usage+value beyond nominal; Cohort: beyond its subtree quota (``BorrowingWith``)."""
        c = self.cells.get(fr)
        if c is None:
            return value > 0
        return (c.nominal if self.is_cq else c.subtree) < _add(c.usage, value)

    def within_nominal(self, frs: Iterable[FlavorResource]) -> bool:
        """``IsWithinNominalInResources``: usage within the subtree quota for every listed flavor-resource."""
        for fr in frs:
            c = self.cells.get(fr)
            if c is not None and c.subtree < c.usage:
                return False
        return True

    def local_available(self, fr: FlavorResource) -> int:
        c = self.cells.get(fr)
        return 0 if c is None else max(0, _sub(c.local, c.usage))

    def quantities_fit(self, requests: Mapping[FlavorResource, int]) -> tuple[bool, dict[FlavorResource, int]]:
        """``QuantitiesFitInQuota``: whether requests fit this subtree, and what exceeds its guaranteed quota."""
        fits = True
        remaining: dict[FlavorResource, int] = {}
        for fr, v in requests.items():
            c = self.cells.get(fr)
            subtree, usage, local = (0, 0, 0) if c is None else (c.subtree, c.usage, c.local)
            if subtree < _add(usage, v):
                fits = False
            remaining[fr] = max(0, _sub(v, max(0, _sub(local, usage))))
        return fits, remaining


def _available_exact(c: _Cell) -> int:
    up = c.up
    if up is None:
        return _sub(c.subtree, c.usage)
    parent = _available_exact(up)
    bl = c.borrowing_limit
    if bl is not None:
        used_in_parent = max(0, _sub(c.usage, c.local))
        parent = min(_add(_sub(c.stored, used_in_parent), bl), parent)
    return _add(max(0, _sub(c.local, c.usage)), parent)


def _available_fast(c: _Cell) -> int:
    """``available`` on plain ints; valid while every quota and usage is far from int64's bounds."""
    up = c.up
    if up is None:
        return c.subtree - c.usage
    parent = _available_fast(up)
    bl = c.borrowing_limit
    usage = c.usage
    local = c.local
    if bl is not None:
        used_in_parent = usage - local
        used_in_parent = max(used_in_parent, 0)
        with_max = c.stored - used_in_parent + bl
        parent = min(parent, with_max)
    local_available = local - usage
    return parent + local_available if local_available > 0 else parent


def _potential_exact(c: _Cell) -> int:
    up = c.up
    if up is None:
        return c.subtree
    avail = _add(c.local, _potential_exact(up))
    if c.borrowing_limit is not None:
        avail = min(_add(c.subtree, c.borrowing_limit), avail)
    return avail


def _potential_fast(c: _Cell) -> int:
    up = c.up
    if up is None:
        return c.subtree
    avail = c.local + _potential_fast(up)
    if c.borrowing_limit is not None:
        avail = min(c.subtree + c.borrowing_limit, avail)
    return avail


def _add_usage(c: _Cell, value: int) -> None:
    """``addUsage``: what exceeds the node's local quota is also counted in the parent, recursively."""
    while True:
        local_available = max(0, _sub(c.local, c.usage))
        c.usage = _add(c.usage, value)
        up = c.up
        if up is None or value <= local_available:
            return
        value = _sub(value, local_available)
        c = up


def _remove_usage(c: _Cell, value: int) -> None:
    """``removeUsage``: gives back to the parent what the node was storing there, recursively."""
    while True:
        stored_in_parent = _sub(c.usage, c.local)
        c.usage = _sub(c.usage, value)
        up = c.up
        if stored_in_parent <= 0 or up is None:
            return
        value = min(value, stored_in_parent)
        c = up
