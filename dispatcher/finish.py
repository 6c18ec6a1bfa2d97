"""The finish step: a workload's end. A finished copy stays on its worker for ``policy.finishedRetention`` (logs,
inspection), then is deleted and the row marked cleaned; a manager object deleted by its user cancels its workload
and deletes its copy; records of workloads finished long ago (``policy.recordRetention``) are purged from SQL.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .copies import delete_remote
from .live import Live
from .runtime import Runtime
from .store.models import PlacementState, Workload, WorkloadState, utcnow
from .store.repo import Transition

if TYPE_CHECKING:
    from .race import Races

__all__ = ["Finish"]

log = logging.getLogger("dispatcher.service")
#: Records deleted per transaction by the retention loop (short transactions: nothing waits long behind them).
PURGE_BATCH = 500


class Finish:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        #: allAtOnce / incremental races, told first when a manager object goes (they own their copies).
        self.races: Races | None = None
        rt.on_timer["retention"] = self._retention_due

    def _retention_due(self, live: Live) -> None:
        if live.terminal and not live.cleaned and not live.busy:
            live.busy = True
            self.rt.spawn(self.clean(live), live)

    def schedule_retention(self, live: Live, row: Workload | None = None) -> None:
        """The finished copy is cleaned up ``policy.finishedRetention`` after the workload finished."""
        delay = self.rt.policy.finished_retention
        if row is not None and row.finished_at is not None:
            delay = max(0.0, delay - (utcnow() - row.finished_at).total_seconds())
        self.rt.timers.add(time.monotonic() + delay, "retention", live.id, live.generation)

    def after_terminal(self, live: Live) -> None:
        """A workload ended without its copy reporting it (e.g. WorkerLost): start its retention clock."""
        self.schedule_retention(live)
        self.rt.wake_placement()

    def manager_deleted(self, uid: str) -> None:
        """The user deleted the manager object: the workload is cancelled (now, or when the step at work ends)."""
        live = self.rt.live.by_uid.get(uid)
        if live is None or live.deleted:
            return
        live.deleted = True
        if self.races is not None and self.races.cancel(live):
            return
        if live.busy:
            return  # the step in flight sees ``deleted`` when it ends
        self.rt.spawn(self.cancel(live), live)

    async def clean(self, live: Live) -> None:
        """Retention passed: delete the finished copy, mark the row cleaned, forget the workload."""
        rt = self.rt
        if live.cluster:
            await delete_remote(rt, live, live.cluster, rt.adapter(live))
        t = Transition(live.id, live.generation, {"cleaned_at": utcnow()}, from_states=tuple(WorkloadState.TERMINAL))
        await rt.retry("mark cleaned", lambda: rt.repo.apply([t]))
        live.cleaned = True
        live.busy = False
        rt.live.drop(live)

    async def cancel(self, live: Live) -> None:
        """The manager object is gone: cancel the workload and delete its copy."""
        rt = self.rt
        rt.queue.remove(live.id)
        if live.cluster in rt.capacities:
            rt.capacities[live.cluster].release(live.uid)
        values: dict[str, Any] = {"deleted": True}
        if not live.terminal:
            values.update(state=WorkloadState.CANCELLED, finished_at=utcnow(), reason="manager object deleted")
        t = Transition(
            live.id,
            live.generation,
            values,
            placement_id=live.placement_id,
            placement_values={"state": PlacementState.CANCELLED, "ended_at": utcnow()} if not live.terminal else {},
            event=("Cancelled", "the manager object was deleted", None),
            cluster=live.cluster,
        )
        await rt.retry("cancel", lambda: rt.repo.apply([t]))
        if not live.terminal:
            live.state = WorkloadState.CANCELLED
        if live.cluster:
            await delete_remote(rt, live, live.cluster, rt.adapter(live))
        cleaned = Transition(live.id, live.generation, {"cleaned_at": utcnow()})
        await rt.retry("mark cleaned", lambda: rt.repo.apply([cleaned]))
        live.cleaned = True
        live.busy = False
        rt.live.drop(live)
        rt.wake_placement()

    async def retention_loop(self) -> None:
        """Delete the records of workloads finished and cleaned more than ``policy.recordRetention`` ago, a batch
        at a time (a short transaction each: the API and the loops are never held up by a big delete)."""
        rt = self.rt
        interval = max(1.0, min(3600.0, rt.policy.record_retention / 10))
        while True:
            try:
                cutoff = utcnow() - timedelta(seconds=rt.policy.record_retention)
                while True:
                    deleted = await rt.repo.purge_finished(cutoff)
                    if deleted:
                        rt.metrics.records_deleted.inc(deleted)
                        log.info("deleted the records of %d workloads finished before %s", deleted, cutoff)
                    if deleted < PURGE_BATCH:
                        break
                    await asyncio.sleep(0)  # let the rest of the loop run between batches
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a database hiccup: the next round tries again
                rt.metrics.sql_error()
                log.warning("deleting old workload records failed (%s); trying again later", type(exc).__name__)
            await asyncio.sleep(interval)
