"""Kubernetes Events on manager objects, as a controller's event recorder writes them.

Repeats of the same (object, type, reason, message) within ``window`` seconds are counted, not
re-sent, the way client-go's event correlator keeps a busy controller from flooding the API server. Like its
correlator (an LRU of 4,096 entries, ``maxLruCacheEntries`` in client-go's ``tools/record/events_cache.go``), the
recorder remembers a bounded number of them, the oldest forgotten first.
Events are written in the background: losing one never blocks dispatching.

A burst places a hundred Jobs a second and each Job gets about three Events (Placed, Admitted, Finished), more
than one write at a time can carry, so ``writers`` writes are in flight. An Event that finds the queue full is
dropped, as client-go drops one when its broadcaster's queue is full, but never silently: a warning (at most one a
minute, with the count) and ``kueue_dispatcher_events_dropped_total``. A write the API server refuses for good
(Forbidden: the dispatcher's Role lacks ``create events``) is a misconfiguration and warns the same way; a
transient failure is tried again a few times. Each Event has a name of its own, as client-go gives them, so a
retry never writes one twice.

Warning Events wait apart from Normal ones, with room of their own, and are written first: a 30,000-Job burst on a
busy manager fills the queue with Placed, Admitted and Finished Events (bench/RESULTS.md: more than half of them
dropped), and a Warning that says something went wrong (a copy rejected, a worker lost, a Job no worker can hold)
must not be the one lost behind them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, deque
from datetime import UTC, datetime
from typing import Any

from kubecommon.tasks import cancel_and_wait

from .fencing import Deposed
from .kube.client import ClusterClient, KubeError, Resource

__all__ = ["EventRecorder"]

log = logging.getLogger("dispatcher.events")
EVENTS = Resource("", "v1", "events", "Event")
COMPONENT = "kueue-dispatcher"
QUEUE_FULL = "queue_full"
WRITE_FAILED = "write_failed"
#: Events remembered for the repeat check, as client-go's correlator keeps 4,096 (``maxLruCacheEntries``).
REMEMBERED = 4096


class EventRecorder:
    def __init__(
        self,
        client: ClusterClient,
        *,
        window: float = 600.0,
        queue_size: int = 10_000,
        writers: int = 4,
        warn_every: float = 60.0,
        retry_delays: tuple[float, ...] = (1.0, 3.0, 10.0),
        component: str = COMPONENT,
    ) -> None:
        self.client = client
        self.component = component
        self.window = window
        self.writers = max(1, writers)
        self.warn_every = warn_every
        #: (object uid, type, reason, message) -> when it was queued, oldest first; at most :data:`REMEMBERED`,
        #: none older than ``window``. Ordered so that forgetting is one step from the front per Event: a rebuild
        #: of the whole map past a bound cost every Event of a 30,000-Job burst a walk of 50,000 entries.
        self._seen: OrderedDict[tuple[str, str, str, str], float] = OrderedDict()
        #: Events waiting, Warnings apart (written first); each holds at most ``queue_size``.
        self.queue_size = queue_size
        self._warnings: deque[dict[str, Any]] = deque()
        self._normal: deque[dict[str, Any]] = deque()
        #: One release per Event queued, one acquire per Event a writer takes.
        self._waiting = asyncio.Semaphore(0)
        #: Events queued or being written; ``_idle`` is set when there are none (:meth:`flush`).
        self._unfinished = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._tasks: list[asyncio.Task[None]] = []
        #: Events dropped because the queue was full (``queue_full``) or the API server refused them
        #: (``write_failed``), since the start.
        self.dropped: dict[str, int] = {QUEUE_FULL: 0, WRITE_FAILED: 0}
        self.written = 0
        self._warned: dict[str, float] = {}
        self._unwarned: dict[str, int] = {QUEUE_FULL: 0, WRITE_FAILED: 0}
        self._last_ns = 0
        #: Seconds between the tries of a write that failed for a transient reason (a timeout, a 5xx, throttling).
        self.retry_delays: tuple[float, ...] = retry_delays

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._run(), name=f"event-recorder-{i}") for i in range(self.writers)]

    async def stop(self) -> None:
        if self._tasks:
            await cancel_and_wait(self._tasks, what="events")
            self._tasks = []

    @property
    def queued(self) -> int:
        """Events waiting to be written."""
        return len(self._warnings) + len(self._normal)

    @property
    def unfinished(self) -> int:
        """Events waiting or being written (a write may be waiting to be tried again)."""
        return self._unfinished

    def emit(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """Queue an Event about ``obj`` (a manager object as read from the API)."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("uid")), type_, reason, message)
        now = time.monotonic()
        seen = self._seen
        last = seen.get(key)
        if last is not None and now - last < self.window:
            return
        # Checked before the Event is built: a burst that fills the queue drops thousands of them.
        waiting = self._warnings if type_ == "Warning" else self._normal
        if len(waiting) >= self.queue_size:
            self._drop(
                QUEUE_FULL,
                f"{self.queue_size} {type_} Events already wait for the manager's API server, which takes them slower "
                "than they come: is it slow, or throttling the dispatcher's user (429, API Priority and Fairness)? "
                "kueue_dispatcher_events_queued shows the backlog",
            )
            return  # not remembered: a repeat may yet be written
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": self._name(str(meta.get("name") or "object")),
                "namespace": meta.get("namespace") or "default",
            },
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        if last is not None:
            seen.move_to_end(key)
        seen[key] = now
        cutoff = now - self.window
        while seen and (len(seen) > REMEMBERED or next(iter(seen.values())) < cutoff):
            seen.popitem(last=False)
        waiting.append(event)
        self._unfinished += 1
        self._idle.clear()
        self._waiting.release()

    def _name(self, involved: str) -> str:
        """``<object>.<nanoseconds, hex>``, as client-go's recorder names Events: a name of its own, so that a create
        retried after its answer was lost finds AlreadyExists instead of writing the Event twice."""
        self._last_ns = max(time.time_ns(), self._last_ns + 1)
        return f"{involved[:236].rstrip('-.')}.{self._last_ns:x}"

    def _drop(self, reason: str, why: str) -> None:
        """Count a lost Event; warn at once for the first of ``reason``, then at most every ``warn_every`` s."""
        self.dropped[reason] += 1
        self._unwarned[reason] += 1
        now = time.monotonic()
        last = self._warned.get(reason)
        if last is None or now - last >= self.warn_every:
            log.warning("%d Kubernetes Events not written (%s): %s", self._unwarned[reason], reason, why)
            self._warned[reason] = now
            self._unwarned[reason] = 0

    async def _run(self) -> None:
        while True:
            await self._waiting.acquire()
            event = (self._warnings or self._normal).popleft()
            try:
                await self._write(event)
            finally:
                self._unfinished -= 1
                if not self._unfinished:
                    self._idle.set()

    async def _write(self, event: dict[str, Any]) -> None:
        """Create one Event; a transient failure is tried again after each of :attr:`retry_delays` (as client-go
        tries an Event up to 12 times), a lasting one (Forbidden, Invalid) is not."""
        for delay in (*self.retry_delays, None):
            try:
                await self.client.create(EVENTS, event["metadata"]["namespace"], event)
                self.written += 1
                return
            except Deposed:  # a standby replica writes nothing
                return
            except KubeError as e:
                if e.already_exists:  # an earlier try landed, its answer was lost
                    self.written += 1
                    return
                if not e.transient:  # Forbidden, Unauthorized, Invalid: it would refuse every one
                    self._drop(WRITE_FAILED, str(e))
                    return
                if delay is None:
                    self.dropped[WRITE_FAILED] += 1
                    log.debug("event not written after %d tries: %s", len(self.retry_delays) + 1, e)
                    return
            await asyncio.sleep(delay)

    async def flush(self, timeout: float = 5.0) -> None:
        """Wait until queued events are written (for tests and clean shutdown)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._idle.wait()
