"""Pending workloads in priority, then FIFO order, grouped so that a full cluster costs nothing.

Workloads with the same shape (namespace, queue, priority, pod sets), cluster selector and tried
workers get the same verdicts. They form a group; only the best of each group is offered to the
engine. When the best of a group cannot be placed, the whole group is parked until some worker's
capacity changes, so 100,000 waiting workloads of a few shapes cost a few evaluations per change,
not 100,000.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .workload import PendingWorkload

__all__ = ["PendingQueue"]


def _order(wl: PendingWorkload) -> tuple[int, float, int]:
    return (-wl.priority, wl.created, wl.id)


@dataclass
class _Group:
    key: tuple[Any, ...]
    heap: list[tuple[tuple[int, float, int], int]] = field(default_factory=list)
    parked: bool = False
    #: The order key under which the group sits in the ready heap (None: not in it).
    queued: tuple[int, float, int] | None = None
    #: What the caller noted when it parked the group (a verdict that holds for every member).
    note: Any = None


class PendingQueue:
    def __init__(self) -> None:
        self._items: dict[int, PendingWorkload] = {}
        self._group_of: dict[int, tuple[Any, ...]] = {}
        self._groups: dict[tuple[Any, ...], _Group] = {}
        self._ready: list[tuple[tuple[int, float, int], int, tuple[Any, ...]]] = []
        self._seq = itertools.count()
        #: Called with a workload that joins a parked group carrying a note, and the note: the verdict on the group
        #: holds for it too, though the engine will not be shown it until the group is offered again.
        self.on_join: Callable[[PendingWorkload, Any], None] | None = None

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, workload_id: int) -> bool:
        return workload_id in self._items

    def get(self, workload_id: int) -> PendingWorkload | None:
        return self._items.get(workload_id)

    def items(self) -> Iterator[PendingWorkload]:
        return iter(self._items.values())

    def push(self, wl: PendingWorkload) -> None:
        self.remove(wl.id)
        key = wl.group
        self._items[wl.id] = wl
        self._group_of[wl.id] = key
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(key)
        order = _order(wl)
        heapq.heappush(group.heap, (order, wl.id))
        if not group.parked and (group.queued is None or order < group.queued):
            self._offer(group)
        elif group.parked and group.note is not None and self.on_join is not None:
            self.on_join(wl, group.note)

    def remove(self, workload_id: int) -> PendingWorkload | None:
        """Drop a workload (placed, cancelled). Its heap entry is discarded lazily."""
        wl = self._items.pop(workload_id, None)
        self._group_of.pop(workload_id, None)
        return wl

    def _head(self, group: _Group) -> tuple[tuple[int, float, int], int] | None:
        while group.heap:
            order, wid = group.heap[0]
            if wid in self._items and self._group_of.get(wid) == group.key:
                return order, wid
            heapq.heappop(group.heap)
        return None

    def _offer(self, group: _Group) -> None:
        head = self._head(group)
        if head is None:
            if not group.heap:
                self._groups.pop(group.key, None)
            return
        heapq.heappush(self._ready, (head[0], next(self._seq), group.key))
        group.queued = head[0]

    def next(self) -> PendingWorkload | None:
        """The best workload among groups not parked, or None."""
        while self._ready:
            order, _, key = self._ready[0]
            group = self._groups.get(key)
            if group is None or group.parked or group.queued != order:
                heapq.heappop(self._ready)  # stale entry
                continue
            head = self._head(group)
            if head is None:
                heapq.heappop(self._ready)
                group.queued = None
                self._groups.pop(key, None)
                continue
            if head[0] != order:
                heapq.heapreplace(self._ready, (head[0], next(self._seq), key))
                group.queued = head[0]
                continue
            return self._items[head[1]]
        return None

    def members(self, wl: PendingWorkload) -> list[PendingWorkload]:
        """Every waiting workload of ``wl``'s group (its shape): the engine's verdict on one is the verdict on all."""
        key = self._group_of.get(wl.id)
        group = self._groups.get(key) if key is not None else None
        if group is None:
            return [wl]
        seen: set[int] = set()
        out = []
        for _order_key, wid in group.heap:
            if wid not in seen and wid in self._items and self._group_of.get(wid) == key:
                seen.add(wid)
                out.append(self._items[wid])
        return out

    def park(self, wl: PendingWorkload, note: Any = None) -> None:
        """``wl`` (the head of its group) cannot be placed now: park its whole group, with an optional ``note``
        handed to :attr:`on_join` for each workload that joins the group while it stays parked."""
        key = self._group_of.get(wl.id)
        group = self._groups.get(key) if key is not None else None
        if group is not None:
            group.parked = True
            group.queued = None
            group.note = note

    def unpark_all(self) -> int:
        """Capacity changed somewhere: offer every parked group again. Returns how many."""
        count = 0
        for group in list(self._groups.values()):
            if group.parked:
                group.parked = False
                group.note = None
                self._offer(group)
                count += 1
        return count

    def parked_groups(self) -> int:
        return sum(1 for g in self._groups.values() if g.parked)
