"""The placement step: pending workloads, in priority-then-FIFO order (:class:`~.placement.queue.PendingQueue`), are
decided by the engine (:mod:`.placement.engine`, no I/O) over every worker's capacity view; the chosen worker's
capacity is reserved and the intent recorded in SQL (Pending -> Placing) before the mirror step touches any cluster.

A workload no worker can take now is parked with its decision (explained in SQL: ``dispatcher explain``) until
capacity changes; one no worker can *ever* hold gets a Warning, and so does every later workload of its shape.
allAtOnce / incremental (MultiKueue's strategies, :mod:`.race`) nominate several workers instead of one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from .live import Live
from .mirror import Mirror
from .placement.engine import Decision, PendingWorkload
from .race import Races
from .runtime import Runtime
from .store.models import Workload, WorkloadState
from .store.repo import PlacementIntent, RaceIntent

__all__ = ["Placement"]

log = logging.getLogger("dispatcher.service")
Obj = dict[str, Any]
Waiting = list[tuple[int, int, dict[str, Any], str | None]]


class Placement:
    def __init__(self, rt: Runtime, mirror: Mirror, races: Races) -> None:
        self.rt = rt
        self.mirror = mirror
        self.races = races
        self._blocked_joins: list[tuple[int, Decision]] = []
        rt.queue.on_join = self._joined_blocked

    def take_new(self, rows: list[Workload]) -> None:
        """Intake took new manager objects (rows written): queue them for placement."""
        rt = self.rt
        mono, wall = time.monotonic(), time.time()
        for row in rows:
            live = Live.from_row(row, mono, wall)
            rt.live.add(live)
            if not live.problem:
                rt.queue.push(live.pending())
        rt.wake_placement(unpark=False)

    async def loop(self) -> None:
        """Woken by anything that may let a workload in (a new one, freed capacity, a worker back)."""
        rt = self.rt
        while True:
            await rt.wake.wait()
            rt.wake.clear()
            if rt.unpark:
                rt.unpark = False
                rt.queue.unpark_all()
            try:
                more = await self.place_round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("placement round failed")
                await asyncio.sleep(1.0)
                rt.wake_placement()
                continue
            if more:
                rt.wake.set()
            await asyncio.sleep(0)

    async def place_round(self, limit: int = 200) -> bool:
        """Decide up to ``limit`` workloads, record the intents in one transaction, start the mirrors."""
        rt = self.rt
        if rt.queue.next() is None and not self._blocked_joins:
            # Nothing to decide. Every watch event that may free capacity wakes placement, most often with no
            # workload waiting (bench/RESULTS.md: 12 % of the dispatcher's CPU while it watched others' Jobs).
            return False
        workers = rt.workers()
        by_name = {w.name: w for w in workers}
        chosen: list[tuple[Live, Decision]] = []
        races: list[tuple[Live, RaceIntent]] = []
        waiting: Waiting = []
        while len(chosen) + len(races) < limit:
            wl = rt.queue.next()
            if wl is None:
                break
            live = rt.live.by_id.get(wl.id)
            if live is None or live.state != WorkloadState.PENDING or live.generation != wl.generation or live.stopped:
                rt.queue.remove(wl.id)
                continue
            decision = rt.engine.decide(wl, workers)
            if self.races.active:
                # MultiKueue's strategies: copies on the nominated workers, no capacity reserved.
                nominated = self.races.nominate(decision, workers)
                if nominated:
                    rt.queue.remove(wl.id)
                    races.append((live, self.races.intent(live, decision, nominated)))
                    continue
                decision.chosen = None
            if decision.chosen is None:
                blocked = decision.permanent_block
                # A verdict that no worker can ever hold it is the verdict on every workload of its shape: each
                # gets the decision and the Warning, not only the one the engine was shown.
                members = rt.queue.members(wl) if blocked else [wl]
                # Workloads joining the parked group later get the same verdict (see _joined_blocked).
                rt.queue.park(wl, decision if blocked else None)
                for member in members:
                    self._record_waiting(member.id, decision, waiting)
                continue
            rt.engine.reserve(decision, by_name)
            rt.queue.remove(wl.id)
            chosen.append((live, decision))
        joined, self._blocked_joins = self._blocked_joins, []
        for wid, decision in joined:
            self._record_waiting(wid, decision, waiting)
        if waiting:
            await rt.retry("record decisions", lambda: rt.repo.set_decision(waiting))
        if races:
            await self._begin_races(races)
        if not chosen:
            return bool(races)
        return await self._begin_placements(chosen, by_name)

    async def _begin_placements(self, chosen: list[tuple[Live, Decision]], by_name: dict[str, Any]) -> bool:
        rt = self.rt
        intents = [
            PlacementIntent(
                workload_id=live.id,
                generation=live.generation,
                cluster=d.chosen.cluster if d.chosen else "",
                strategy=d.strategy,
                score=d.chosen.score if d.chosen else None,
                decision=self.explanation(d),
            )
            for live, d in chosen
        ]
        try:
            accepted = await rt.repo.begin_placements(intents)
        except Exception as exc:
            rt.metrics.sql_error()
            log.warning("recording %d placement intents failed (%s); will retry", len(intents), exc)
            for live, d in chosen:
                if d.chosen is not None:
                    by_name[d.chosen.cluster].release(live.uid)
                rt.queue.push(live.pending())
            await asyncio.sleep(1.0)
            return True
        ok = {i.workload_id: i for i in accepted}
        for live, d in chosen:
            intent = ok.get(live.id)
            if intent is None or d.chosen is None:
                if d.chosen is not None:
                    by_name[d.chosen.cluster].release(live.uid)
                continue
            live.state = WorkloadState.PLACING
            live.cluster = d.chosen.cluster
            live.placement_id = intent.placement_id
            live.decision_summary = d.summary
            live.busy = True
            rt.placements_made += 1
            rt.spawn(self.mirror.create(live, d), live)
        return True

    def explanation(self, d: Decision) -> Obj:
        """The decision as SQL keeps it, with the chosen worker's fencing (``dispatcher explain`` says plainly when
        a failover from there would be at-least-once)."""
        out = d.explanation()
        if d.chosen is not None and self.rt.leases is not None:
            out["fencing"] = "agent" if self.rt.leases.fenced(d.chosen.cluster) else "none"
        return out

    def _record_waiting(self, workload_id: int, decision: Decision, waiting: Waiting) -> None:
        """Keep (for SQL) a waiting workload's decision; warn once when no worker can ever hold it."""
        rt = self.rt
        live = rt.live.by_id.get(workload_id)
        if live is None or live.state != WorkloadState.PENDING:
            return
        if decision.summary != live.decision_summary:
            live.decision_summary = decision.summary
            waiting.append((live.id, live.generation, decision.explanation(), decision.summary))
        blocked = decision.permanent_block
        live.never_fits = bool(blocked)
        if blocked and rt.warned.get(live.id) != blocked:
            rt.warned[live.id] = blocked
            rt.emit(live, "Warning", "NoWorkerCanRunIt", f"no worker can ever hold this as it is: {blocked}")

    def _joined_blocked(self, wl: PendingWorkload, note: Any) -> None:
        """A workload joined a group parked because no worker can ever hold that shape: the same verdict, now."""
        self._blocked_joins.append((wl.id, note))
        self.rt.wake_placement(unpark=False)

    async def _begin_races(self, races: list[tuple[Live, RaceIntent]]) -> None:
        """Record every copy of these races in SQL (one transaction), then create them."""
        rt = self.rt
        try:
            accepted = await rt.repo.begin_races([i for _, i in races])
        except Exception as exc:
            rt.metrics.sql_error()
            log.warning("recording %d race intents failed (%s); will retry", len(races), exc)
            for live, _ in races:
                rt.queue.push(live.pending())
            await asyncio.sleep(1.0)
            rt.wake_placement(unpark=False)
            return
        ok = {i.workload_id: i for i in accepted}
        for live, _ in races:
            intent = ok.get(live.id)
            if intent is not None:
                self.races.start(live, intent)
