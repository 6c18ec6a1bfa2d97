"""Pending workloads of one ClusterQueue, in Kueue's order, with its StrictFIFO / BestEffortFIFO behaviour.

Follows Kueue v0.17 ``pkg/cache/queue/cluster_queue.go`` (the heap ordered by ``baseCompareFunc``: higher
priority first, then the older queue-order timestamp of ``workload.Ordering.GetQueueOrderTimestamp``; inadmissible
workloads parked until ``QueueInadmissibleWorkloads``) and ``RequeueIfNotPresent``: a head that was not admitted
goes back to the heap at once when its ClusterQueue is ``StrictFIFO``, when it failed after nomination (skipped in
the cycle) or when its last flavor assignment left flavors to try; otherwise it is parked. A ``StrictFIFO`` head
that goes back blocks the queue until something changes, where Kueue would retry it in every cycle: the outcome
is the same, without polling.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from datetime import datetime
from typing import Any

__all__ = ["ClusterQueueQueue", "order_key", "queue_order_timestamp", "timestamp"]

WlKey = tuple[str, str]
SortKey = tuple[int, float, str]


def timestamp(value: object) -> float | None:
    """An RFC 3339 timestamp in seconds since the epoch (``None`` when missing or unreadable)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def _condition(wl: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    for c in (wl.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype:
            return c  # type: ignore[no-any-return]
    return None


def queue_order_timestamp(wl: Mapping[str, Any]) -> float:
    """``Ordering.GetQueueOrderTimestamp`` with PrioritySortingWithinCohort on and the ``Eviction`` requeuing
    timestamp: the eviction time after an eviction by a PodsReady timeout or an admission check, else the
    creation time."""
    evicted = _condition(wl, "Evicted")
    if (
        evicted is not None
        and evicted.get("status") == "True"
        and evicted.get("reason") in ("PodsReadyTimeout", "AdmissionCheck")
    ):
        ts = timestamp(evicted.get("lastTransitionTime"))
        if ts is not None:
            return ts
    return timestamp((wl.get("metadata") or {}).get("creationTimestamp")) or 0.0


def order_key(priority: int, queue_order_time: float, tie: str) -> SortKey:
    """Heap order: higher priority first, then older timestamp, then ``tie`` (Kueue uses the UID; the simulator
    passes the arrival order, since timestamps have second precision and a FIFO is expected among equals)."""
    return (-priority, queue_order_time, tie)


class ClusterQueueQueue:
    """One ClusterQueue's pending workloads: a heap plus the parked inadmissible ones.

    ``blocked`` is set when a ``StrictFIFO`` head went back without being admitted; it clears when a workload
    is added or re-ordered, or parked workloads are released (:meth:`requeue_all`).
    """

    __slots__ = ("blocked", "heap", "heap_sort", "inadmissible", "members", "strict")

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.heap: list[tuple[SortKey, WlKey]] = []
        self.heap_sort: dict[WlKey, SortKey] = {}
        self.members: dict[WlKey, SortKey] = {}
        self.inadmissible: set[WlKey] = set()
        self.blocked = False

    def _push(self, key: WlKey, sort: SortKey) -> None:
        if self.heap_sort.get(key) != sort:
            self.heap_sort[key] = sort
            heapq.heappush(self.heap, (sort, key))

    def add(self, key: WlKey, sort: SortKey) -> None:
        """Queue (or re-order) a pending workload; a new or re-ordered one unblocks a StrictFIFO head."""
        if self.members.get(key) == sort:
            return
        self.members[key] = sort
        self.inadmissible.discard(key)
        self._push(key, sort)
        self.blocked = False

    def remove(self, key: WlKey) -> None:
        self.members.pop(key, None)
        self.inadmissible.discard(key)
        self.heap_sort.pop(key, None)

    def pop_head(self) -> WlKey | None:
        while self.heap:
            sort, key = heapq.heappop(self.heap)
            if self.heap_sort.get(key) != sort:
                continue
            del self.heap_sort[key]
            if self.members.get(key) != sort or key in self.inadmissible:
                continue
            return key
        return None

    def requeue(self, key: WlKey, immediate: bool = False) -> None:
        """A head that was not admitted: back to the heap when ``immediate`` (the next cycle retries it), kept at
        the head and blocking under StrictFIFO, otherwise parked."""
        sort = self.members.get(key)
        if sort is None:
            return
        if immediate:
            self._push(key, sort)
        elif self.strict:
            self._push(key, sort)
            self.blocked = True
        else:
            self.inadmissible.add(key)

    def requeue_all(self) -> None:
        """``QueueInadmissibleWorkloads``: parked workloads compete again; a blocked head is retried."""
        for key in self.inadmissible:
            sort = self.members.get(key)
            if sort is not None:
                self._push(key, sort)
        self.inadmissible.clear()
        self.blocked = False
