"""Resuming from SQL: when a dispatcher starts (or a replica becomes the leader), every open workload is loaded and
put back at the step it had reached, so that a crash at any line loses nothing and repeats nothing.

Pending ones are queued; Placing ones create their copy again once the manager's objects are known (the create is
idempotent); Placed ones get their admission timer; finished ones their retention; a move the crash cut short is
finished; races without a winner are rebuilt; workloads whose manager object went away meanwhile are cancelled.
"""

from __future__ import annotations

import gc
import logging
import time

from .finish import Finish
from .live import Live
from .mirror import Mirror
from .race import Races
from .requeue import Requeue
from .runtime import Runtime
from .store.models import WorkloadState

__all__ = ["FREEZE_AFTER_RECOVERING", "Recovery"]

log = logging.getLogger("dispatcher.service")
#: Recovering at least this many workloads freezes the loaded objects out of the cyclic GC (see ``recover``).
FREEZE_AFTER_RECOVERING = 10_000


class Recovery:
    def __init__(self, rt: Runtime, mirror: Mirror, requeue: Requeue, finish: Finish, races: Races) -> None:
        self.rt = rt
        self.mirror = mirror
        self.requeue = requeue
        self.finish = finish
        self.races = races
        self._resume_placing: list[Live] = []

    async def recover(self) -> None:
        """Load open workloads from SQL and resume each at the step it had reached."""
        rt = self.rt
        # Recovery creates millions of objects that all stay alive (the open workloads' JSON, Live records,
        # pending entries): the cyclic GC would walk every one of them again at each collection the allocations
        # trigger (about three times the work of the load itself at 100,000 workloads), so it is paused for the
        # load. A large recovered state is then moved out of the GC's reach for good (gc.freeze: they are still
        # freed by reference counting), or the first collections after the load would walk it all again, for
        # seconds, before the first placement (the rows themselves hold no reference cycles).
        paused = gc.isenabled()
        gc.disable()
        try:
            await self._recover_rows()
            if len(rt.live) >= FREEZE_AFTER_RECOVERING:
                gc.freeze()
        finally:
            if paused:
                gc.enable()
        log.info("recovered %d open workloads (%d pending)", len(rt.live), len(rt.queue))
        rt.wake.set()

    async def _recover_rows(self) -> None:
        rt = self.rt
        rows = await rt.repo.load_open()
        placements = {p.id: p for p in await rt.repo.open_placements()}
        # Races (allAtOnce / incremental) without a winner: their decision is reloaded (load_open leaves it out).
        racing = [
            r.id
            for r in rows
            if r.state in (WorkloadState.PLACING, WorkloadState.PLACED) and r.cluster is None and r.placement_id is None
        ]
        race_decisions = await rt.repo.last_decisions(racing)
        mono, wall = time.monotonic(), time.time()
        for row in rows:
            live = Live.from_row(row, mono, wall)
            rt.live.add(live)
            placement = placements.get(row.placement_id) if row.placement_id else None
            if placement is not None and placement.remote_uid:
                rt.live.set_remote(live, placement.cluster, placement.remote_uid)
            if live.terminal:
                if not live.cleaned:
                    self.finish.schedule_retention(live, row)
                continue
            if (
                live.state in (WorkloadState.PLACING, WorkloadState.PLACED)
                and row.cluster is None
                and row.placement_id is None
            ):
                # A race (allAtOnce / incremental) without a winner yet: rebuilt from its open placements.
                self.races.recover(
                    live,
                    row,
                    [p for p in placements.values() if p.workload_id == row.id],
                    race_decisions.get(row.id) or {},
                )
            elif live.deleted:
                rt.spawn(self.finish.cancel(live), live)
            elif live.state == WorkloadState.PENDING:
                if not live.problem:
                    rt.queue.push(live.pending())
            elif live.state == WorkloadState.PLACING:
                self._resume_placing.append(live)
            elif live.state == WorkloadState.PLACED:
                if row.placement_id is not None and row.placement_id not in placements:
                    # The placement was closed (timed out / rejected) but the move did not finish.
                    move = self.requeue.move_elsewhere(live, "resuming an interrupted move", exclude=True)
                    rt.spawn(move, live)
                else:
                    rt.arm_admission_timer(live)
            # Marked with the sync's wake-up: the workers' informers listed their copies before these workloads
            # were loaded, so a copy that finished while the dispatcher was down sends no event to wake it later.
            rt.mark_dirty(live.id)

    async def after_intake_synced(self) -> None:
        """Once the manager's objects are known: resume interrupted creates, cancel what was deleted."""
        rt = self.rt
        assert rt.intake is not None
        await rt.intake.wait_synced()
        for live in list(rt.live.by_id.values()):
            if live.uid not in rt.intake.objects and not live.terminal and not live.deleted:
                self.finish.manager_deleted(live.uid)
        for live in self._resume_placing:
            if live.deleted or live.cluster is None or live.placement_id is None:
                continue
            live.busy = True
            rt.spawn(self.mirror.create(live, None), live)
        self._resume_placing = []
        self.races.resume()
