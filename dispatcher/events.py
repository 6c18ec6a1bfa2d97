"""Kubernetes Events on manager objects, as a controller's event recorder writes them.

Repeats of the same (object, type, reason, message) within ``window`` seconds are counted, not
re-sent, the way client-go's event correlator keeps a busy controller from flooding the API server.
Events are written in the background: losing one never blocks dispatching.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime
from typing import Any

from kubecommon.tasks import cancel_and_wait

from .fencing import Deposed
from .kube.client import ClusterClient, KubeError, Resource

__all__ = ["EventRecorder"]

log = logging.getLogger("dispatcher.events")
EVENTS = Resource("", "v1", "events", "Event")
COMPONENT = "kueue-dispatcher"


class EventRecorder:
    def __init__(
        self, client: ClusterClient, *, window: float = 600.0, queue_size: int = 10_000, component: str = COMPONENT
    ) -> None:
        self.client = client
        self.component = component
        self.window = window
        self._seen: dict[tuple[str, str, str, str], float] = {}
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=queue_size)
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        self.written = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="event-recorder")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task], what="events")
            self._task = None

    def emit(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """Queue an Event about ``obj`` (a manager object as read from the API)."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("uid")), type_, reason, message)
        now = time.monotonic()
        last = self._seen.get(key)
        if last is not None and now - last < self.window:
            return
        self._seen[key] = now
        if len(self._seen) > 50_000:
            cutoff = now - self.window
            self._seen = {k: v for k, v in self._seen.items() if v >= cutoff}
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{meta.get('name', 'object')}.",
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
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self.client.create(EVENTS, event["metadata"]["namespace"], event)
                self.written += 1
            except (KubeError, Deposed) as e:  # Deposed: a standby replica writes nothing
                self.dropped += 1
                log.debug("event not written: %s", e)
            finally:
                self._queue.task_done()

    async def flush(self, timeout: float = 5.0) -> None:
        """Wait until queued events are written (for tests and clean shutdown)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._queue.join()
