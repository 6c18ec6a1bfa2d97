"""The status sync's writes to the manager objects, off the sync's own path.

The status sync records what the workers show in SQL, a batch at a time, then reports it on each manager object
(labels, annotations, and the status of a managedBy object). A manager write can be slow: a saturated API server,
a request queued behind the client's pooled connections until its 10 s timeout. Awaited by the batch, one such
write held back every workload of the batch and every batch behind it (a status-sync lag p99 of 10-24 s on a busy
manager, issue 20). Here each workload has at most one write in flight and at most one waiting, always its newest
report (an older one waiting is replaced: the manager only ever needs the latest state, and a workload's writes
stay in order); writes of different workloads run side by side, at most ``limit`` at once; the sync goes on.

A report whose workload moved on meanwhile (a new generation: it was moved, stopped or cancelled) is dropped; the
step that moved it reports the new state itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .live import Live

__all__ = ["ManagerReports"]

log = logging.getLogger("dispatcher.report")
Obj = dict[str, Any]

Write = Callable[[Live, str, str, Obj | None], Awaitable[None]]


class ManagerReports:
    """Per-workload ordered, globally bounded writes to the manager objects."""

    def __init__(
        self, write: Write, *, tasks: set[asyncio.Task[None]], on_written: Callable[[int], None], limit: int = 64
    ) -> None:
        self._write = write
        self._tasks = tasks
        self._on_written = on_written
        self._limit = asyncio.Semaphore(limit)
        #: Workload id -> its newest report not yet started: (live, generation, state, message, remote).
        self._waiting: dict[int, tuple[Live, int, str, str, Obj | None]] = {}
        #: Workload ids with a writer task (a write in flight, or about to start).
        self._writing: set[int] = set()

    def submit(self, live: Live, state: str, message: str, remote: Obj | None) -> None:
        """Report ``state`` on ``live``'s manager object soon; replaces a report of it still waiting."""
        self._waiting[live.id] = (live, live.generation, state, message, remote)
        if live.id in self._writing:
            return
        self._writing.add(live.id)
        task = asyncio.create_task(self._drain(live.id), name=f"report-{live.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def pending(self) -> int:
        """Workloads with a report waiting or being written."""
        return len(self._writing)

    async def _drain(self, workload_id: int) -> None:
        try:
            while workload_id in self._waiting:
                async with self._limit:
                    item = self._waiting.pop(workload_id, None)
                    if item is None:
                        break
                    live, generation, state, message, remote = item
                    if live.generation != generation or live.busy:
                        continue  # moved on, or a step is at work on it: that step reports
                    try:
                        await self._write(live, state, message, remote)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        log.exception("reporting %s on the manager failed", live.key)
                    if live.generation != generation:
                        # Moved while the write was in flight: what that write left must not count as reported.
                        live.reported.pop("annotations", None)
                        live.reported.pop("labels", None)
                self._on_written(workload_id)
        finally:
            self._writing.discard(workload_id)
