"""The versioned object store of one simulated cluster: etcd plus the watch cache, in memory.

Objects are JSON dicts kept in their storage version. A stored dict is never mutated: every write
puts a new dict in place, so readers (HTTP handlers, watch streams, in-process controllers) can share
it without copying. Every write takes the next ``resourceVersion`` of the whole cluster, as etcd's
revision does, and is appended to a bounded event log (the last 100,000 events, at most 5 minutes old) from
which watches replay. A watch that asks for a version older than the log's horizon gets 410 Gone, as after an
etcd compaction.
"""

from __future__ import annotations

import asyncio
import bisect
import builtins
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Store", "StoreEvent", "Subscription"]

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class StoreEvent:
    """One change. ``prev`` is the object before the change (None for ADDED), needed to filter watches."""

    rv: int
    resource: str  # group-resource, e.g. "jobs.batch" or "pods"
    type: str  # ADDED | MODIFIED | DELETED
    obj: Obj
    prev: Obj | None


class Subscription:
    """A live feed of store events for some resources. Bounded: a reader that falls far behind is
    closed (``overflowed``), as the real watch cache terminates slow watchers; it must re-watch."""

    def __init__(self, store: Store, resources: frozenset[str] | None, maxsize: int) -> None:
        self._store = store
        self.resources = resources
        self.queue: asyncio.Queue[StoreEvent | None] = asyncio.Queue(maxsize=maxsize)
        self.overflowed = False
        self.closed = False

    def offer(self, event: StoreEvent) -> None:
        if self.closed:
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._store._unsubscribe(self)
        # Wake the reader; make room for the sentinel when the queue is full.
        while True:
            try:
                self.queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                self.queue.get_nowait()

    async def get(self) -> StoreEvent | None:
        """The next event, or None once closed."""
        if self.closed and self.queue.empty():
            return None
        return await self.queue.get()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> StoreEvent:
        event = await self.get()
        if event is None:
            raise StopAsyncIteration
        return event


@dataclass
class _Bucket:
    """All objects of one resource, keyed by (namespace, name); namespace is "" for cluster-scoped ones."""

    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)
    by_namespace: dict[str, set[str]] = field(default_factory=dict)


class Store:
    """In-memory storage with a global revision, an event log and subscriptions."""

    def __init__(
        self,
        *,
        log_size: int = 100_000,
        log_seconds: float = 300.0,
        subscription_buffer: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self.rv = 0
        self._buckets: dict[str, _Bucket] = {}
        self._log: deque[StoreEvent] = deque()
        self._log_rvs: deque[int] = deque()
        self._log_times: deque[float] = deque()
        self._log_size = log_size
        #: History older than this is compacted, as kube-apiserver compacts etcd every 5 minutes: a burst of
        #: Jobs otherwise kept every version of every object (5 GB for 100 workers under 10,000 Jobs).
        self._log_seconds = log_seconds
        #: Highest revision whose history is gone; a watch from an older version gets 410.
        self.compacted_rv = 0
        self._subs: dict[str, set[Subscription]] = {}
        self._subs_all: set[Subscription] = set()
        self._sub_buffer = subscription_buffer
        self.uid_index: dict[str, tuple[str, str, str]] = {}
        #: (resource, namespace or None) -> its keys in (namespace, name) order; dropped when a key comes or goes.
        self._order: dict[tuple[str, str | None], builtins.list[tuple[str, str]]] = {}

    # -- reads ---------------------------------------------------------------------------------------

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        bucket = self._buckets.get(resource)
        return bucket.objects.get((namespace, name)) if bucket else None

    def list(self, resource: str, namespace: str | None = None) -> list[Obj]:
        """Objects sorted by (namespace, name), as etcd's key order gives them."""
        bucket = self._buckets.get(resource)
        if not bucket:
            return []
        return [bucket.objects[k] for k in self.sorted_keys(resource, namespace)]

    def sorted_keys(self, resource: str, namespace: str | None = None) -> builtins.list[tuple[str, str]]:
        """The (namespace, name) keys in order (shared: never to be modified). Kept between calls until a key
        of ``resource`` comes or goes, so paging through a large list does not sort it again for every page."""
        cached = self._order.get((resource, namespace))
        if cached is not None:
            return cached
        bucket = self._buckets.get(resource)
        if not bucket:
            return []
        if namespace is None:
            keys = sorted(bucket.objects)
        else:
            keys = [(namespace, n) for n in sorted(bucket.by_namespace.get(namespace, ()))]
        self._order[(resource, namespace)] = keys
        return keys

    def objects_of(self, resource: str) -> dict[tuple[str, str], Obj]:
        """Every object of ``resource`` by (namespace, name) (shared, read-only)."""
        bucket = self._buckets.get(resource)
        return bucket.objects if bucket else {}

    def _reorder(self, resource: str) -> None:
        for key in [k for k in self._order if k[0] == resource]:
            del self._order[key]

    def count(self, resource: str, namespace: str | None = None) -> int:
        bucket = self._buckets.get(resource)
        if not bucket:
            return 0
        if namespace is None:
            return len(bucket.objects)
        return len(bucket.by_namespace.get(namespace, ()))

    def iter_all(self, resource: str) -> Iterator[Obj]:
        bucket = self._buckets.get(resource)
        if bucket:
            yield from list(bucket.objects.values())

    def by_uid(self, uid: str) -> tuple[str, str, str] | None:
        """(resource, namespace, name) of the live object with this uid."""
        return self.uid_index.get(uid)

    # -- writes --------------------------------------------------------------------------------------

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def put(self, resource: str, obj: Obj, rv: int, *, created: bool) -> None:
        """Store ``obj`` (already carrying ``metadata.resourceVersion == str(rv)``) and notify."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        bucket = self._buckets.setdefault(resource, _Bucket())
        prev = bucket.objects.get(key)
        bucket.objects[key] = obj
        if prev is None:
            bucket.by_namespace.setdefault(key[0], set()).add(key[1])
            self._reorder(resource)
        uid = meta.get("uid")
        if uid:
            self.uid_index[uid] = (resource, key[0], key[1])
        self._emit(StoreEvent(rv, resource, "ADDED" if created or prev is None else "MODIFIED", obj, prev))

    def remove(self, resource: str, namespace: str, name: str, rv: int) -> Obj | None:
        """Delete for good. The DELETED event carries the last state with the deletion's revision."""
        bucket = self._buckets.get(resource)
        if not bucket:
            return None
        prev = bucket.objects.pop((namespace, name), None)
        if prev is None:
            return None
        self._reorder(resource)
        names = bucket.by_namespace.get(namespace)
        if names is not None:
            names.discard(name)
            if not names:
                del bucket.by_namespace[namespace]
        uid = prev["metadata"].get("uid")
        if uid and self.uid_index.get(uid) == (resource, namespace, name):
            del self.uid_index[uid]
        gone = {**prev, "metadata": {**prev["metadata"], "resourceVersion": str(rv)}}
        self._emit(StoreEvent(rv, resource, "DELETED", gone, prev))
        return gone

    def _emit(self, event: StoreEvent) -> None:
        now = self._clock()
        self._log.append(event)
        self._log_rvs.append(event.rv)
        self._log_times.append(now)
        horizon = now - self._log_seconds
        while len(self._log) > self._log_size or self._log_times[0] < horizon:
            dropped = self._log.popleft()
            self._log_rvs.popleft()
            self._log_times.popleft()
            self.compacted_rv = dropped.rv
        for sub in tuple(self._subs.get(event.resource, ())):
            sub.offer(event)
        for sub in tuple(self._subs_all):
            sub.offer(event)

    def compact(self) -> None:
        """Forget all history up to now (``etcdctl compact``): older watches get 410 Gone."""
        self.compacted_rv = self.rv
        self._log.clear()
        self._log_rvs.clear()
        self._log_times.clear()

    # -- watches -------------------------------------------------------------------------------------

    def too_old(self, rv: int) -> bool:
        return rv < self.compacted_rv

    def events_since(self, rv: int, resources: frozenset[str] | None) -> builtins.list[StoreEvent]:
        """Events after revision ``rv`` (caller checked :meth:`too_old`)."""
        start = bisect.bisect_right(self._log_rvs, rv)
        return [ev for ev in itertools.islice(self._log, start, None) if resources is None or ev.resource in resources]

    def subscribe(self, resources: frozenset[str] | None = None, *, maxsize: int | None = None) -> Subscription:
        """Subscribe to future events of ``resources`` (all when None). Replay is the caller's job,
        done in the same synchronous step so no event falls between replay and subscription."""
        sub = Subscription(self, resources, maxsize or self._sub_buffer)
        if resources is None:
            self._subs_all.add(sub)
        else:
            for r in resources:
                self._subs.setdefault(r, set()).add(sub)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        if sub.resources is None:
            self._subs_all.discard(sub)
        else:
            for r in sub.resources:
                subs = self._subs.get(r)
                if subs:
                    subs.discard(sub)

    def close_all_subscriptions(self) -> None:
        for subs in list(self._subs.values()):
            for sub in list(subs):
                sub.close()
        for sub in list(self._subs_all):
            sub.close()
