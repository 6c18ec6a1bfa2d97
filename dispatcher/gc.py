"""Garbage collection of remote copies that no live workload owns.

A copy carries our origin label, its workload's uid and the placement generation. It is owned when
the workload is open (or finished and not yet cleaned), placed on that very worker, at that very
generation. Anything else with our origin label is an orphan: left by a crash between a SQL write and
a delete, by a failover (an older generation), or by a manager object deleted while the dispatcher
was down. Orphans are deleted with a uid precondition, and the deletion is recorded.

Runs every ``policy.gcInterval`` over the informer caches (no listing), and on demand for one worker
(a worker that comes back after being lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from . import labels as L
from .adapters.base import Adapter
from .copies import delete_copy
from .kube.client import KubeError
from .store.models import AuditEvent, utcnow

if TYPE_CHECKING:
    from .race import Races
    from .runtime import Runtime

__all__ = ["GarbageCollector"]

log = logging.getLogger("dispatcher.gc")
Obj = dict[str, Any]


class GarbageCollector:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        #: allAtOnce / incremental: a race's copies are its own, not orphans (set when the races are wired).
        self.races: Races | None = None
        self._requested: set[str] = set()
        self._event = asyncio.Event()
        self.deleted = 0

    def request(self, worker: str) -> None:
        """Collect on ``worker`` now (e.g. it came back after being lost)."""
        self._requested.add(worker)
        self._event.set()

    def orphans(self, worker: str) -> list[tuple[Adapter, Obj]]:
        """Copies on ``worker`` with our origin label that no live workload owns (from the informer cache)."""
        svc = self.rt
        view = svc.views.get(worker)
        if view is None or not view.jobs_synced():
            return []
        out = []
        for adapter in svc.adapters.values():
            for obj in list(view.remote_jobs(adapter.resource.plural).values()):
                meta = obj.get("metadata") or {}
                labels = meta.get("labels") or {}
                if labels.get(L.ORIGIN) != svc.config.origin or meta.get("deletionTimestamp"):
                    continue
                live = svc.live.by_uid.get(labels.get(L.WORKLOAD_UID, ""))
                if (
                    live is not None
                    and not live.cleaned
                    and live.cluster == worker
                    and labels.get(L.GENERATION) == str(live.generation)
                ):
                    continue
                if self.races is not None and self.races.owns(labels.get(L.WORKLOAD_UID, ""), worker):
                    continue  # a copy of a race in progress (allAtOnce / incremental)
                out.append((adapter, obj))
        return out

    async def collect(self, worker: str) -> int:
        svc = self.rt
        client = svc.clients.get(worker)
        cap = svc.capacities.get(worker)
        if client is None or cap is None or cap.health != "Ready":
            # A worker that is not Ready is failover's and fencing's: its stale copies are fenced (and recorded as
            # such) when it returns, not collected meanwhile by whichever call gets through first.
            return 0
        records = []
        # Items of a list carry no kind (as on a real API server): the adapter whose informer held them decides.
        for adapter, obj in self.orphans(worker):
            meta = obj.get("metadata") or {}
            try:
                await delete_copy(
                    client, adapter.resource, meta.get("namespace", ""), meta.get("name", ""), meta.get("uid")
                )
            except KubeError as exc:
                log.info("gc: deleting %s/%s on %s failed: %s", meta.get("namespace"), meta.get("name"), worker, exc)
                continue
            self.deleted += 1
            labels = meta.get("labels") or {}
            live = svc.live.by_uid.get(labels.get(L.WORKLOAD_UID, ""))
            records.append(
                AuditEvent(
                    at=utcnow(),
                    workload_id=live.id if live else None,
                    cluster=worker,
                    type="GarbageCollected",
                    message=(
                        f"deleted orphaned copy {meta.get('namespace')}/{meta.get('name')} "
                        f"(workload {labels.get(L.WORKLOAD_UID)}, generation {labels.get(L.GENERATION)})"
                    ),
                )
            )
            log.info("gc: deleted orphaned copy %s/%s on %s", meta.get("namespace"), meta.get("name"), worker)
        if records:
            with contextlib.suppress(Exception):
                await svc.repo.record(records)
        return len(records)

    async def run(self) -> None:
        interval = self.rt.policy.gc_interval
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._event.wait()
            self._event.clear()
            workers = set(self._requested) or set(self.rt.views)
            self._requested.clear()
            for worker in sorted(workers):
                try:
                    await self.collect(worker)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("gc on %s failed", worker)
