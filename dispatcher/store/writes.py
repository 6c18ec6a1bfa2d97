"""The store's writes: every state change a guarded update (by generation and expected state), in batches where they
come in bursts: intake, placement intents (one claim UPDATE, one multi-row INSERT), races, transitions of the status
sync, failover of a lost worker's workloads in one transaction, the purge of old records."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, Update, and_, bindparam, delete, insert, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from .intents import NewWorkload, PlacementIntent, RaceIntent, Transition
from .models import AuditEvent, Placement, PlacementState, Workload, WorkloadState, utcnow

__all__ = ["Writes"]

log = logging.getLogger("dispatcher.store")


def _table(model: type[Any]) -> Table:
    """A mapped class's table, for Core statements."""
    return cast(Table, model.__table__)


# The write statements below are built once per shape, with bound parameters, and kept (functools.cache; a
# handful in all). Built per row, their construction (coercing every clause, a new cache key each time) was most
# of the Python side of Writes.apply; SQLAlchemy already cached their compiled form.


@functools.cache
def _workload_update(columns: tuple[str, ...], guarded: bool) -> Update:
    """``UPDATE workloads SET <columns>, updated_at WHERE id AND generation [AND state IN (...)]``; parameters
    ``w_id``, ``w_generation``, ``w_states`` (expanding) and ``v_<column>``."""
    t = _table(Workload)
    stmt = update(t).where(t.c.id == bindparam("w_id"), t.c.generation == bindparam("w_generation"))
    if guarded:
        stmt = stmt.where(t.c.state.in_(bindparam("w_states", expanding=True)))
    return stmt.values({c: bindparam(f"v_{c}", type_=t.c[c].type) for c in (*columns, "updated_at")})


@functools.cache
def _placement_update(columns: tuple[str, ...]) -> Update:
    """``UPDATE placements SET <columns> WHERE id``; parameters ``p_id`` and ``v_<column>``."""
    t = _table(Placement)
    return (
        update(t)
        .where(t.c.id == bindparam("p_id"))
        .values({c: bindparam(f"v_{c}", type_=t.c[c].type) for c in columns})
    )


@functools.cache
def _placing_update() -> Update:
    """``UPDATE workloads SET cluster, last_decision, placement_id WHERE id`` (parameters ``b_<column>``)."""
    t = _table(Workload)
    columns = ("cluster", "last_decision", "placement_id")
    return (
        update(t)
        .where(t.c.id == bindparam("b_id"))
        .values({c: bindparam(f"b_{c}", type_=t.c[c].type) for c in columns})
    )


class Writes:
    """Write transactions of :class:`~.repo.Repo` (a part of it)."""

    sessions: async_sessionmaker[AsyncSession]
    engine: AsyncEngine

    async def add_workloads(self, batch: Sequence[NewWorkload]) -> list[Workload]:
        """Insert new workloads, skipping uids already known. Returns the rows inserted."""
        if not batch:
            return []
        async with self.sessions.begin() as s:
            uids = [w.uid for w in batch]
            known = set((await s.scalars(select(Workload.uid).where(Workload.uid.in_(uids)))).all())
            rows = []
            seen: set[str] = set()
            for w in batch:
                if w.uid in known or w.uid in seen:
                    continue
                seen.add(w.uid)
                rows.append(
                    Workload(
                        uid=w.uid,
                        namespace=w.namespace,
                        name=w.name,
                        kind=w.kind,
                        api_version=w.api_version,
                        queue=w.queue,
                        priority=w.priority,
                        priority_class=w.priority_class,
                        pod_sets=w.pod_sets,
                        state=WorkloadState.PENDING,
                        reason=w.reason,
                        problem=w.problem,
                        object_generation=w.object_generation,
                        generation=1,
                        status_mode=w.status_mode,
                        no_failover=w.no_failover,
                        cluster_selector=w.cluster_selector,
                        excluded=[],
                        deleted=False,
                        created_at=w.created_at,
                        submitted_at=utcnow(),
                    )
                )
            s.add_all(rows)
            await s.flush()
            s.add_all(
                AuditEvent(
                    at=utcnow(), workload_id=r.id, type="Submitted", message=f"took {r.kind} {r.namespace}/{r.name}"
                )
                for r in rows
            )
        return rows

    async def purge_finished(self, before: datetime, *, batch: int = 500) -> int:
        """Delete one batch of finished, cleaned workloads that finished before ``before``, with their placements
        (foreign-key cascade) and events. Returns how many workloads went (0: nothing left to purge)."""
        async with self.sessions.begin() as s:
            ids = list(
                (
                    await s.scalars(
                        select(Workload.id)
                        .where(
                            Workload.state.in_(list(WorkloadState.TERMINAL)),
                            Workload.cleaned_at.is_not(None),
                            Workload.finished_at < before,
                        )
                        .order_by(Workload.id)
                        .limit(batch)
                    )
                ).all()
            )
            if not ids:
                return 0
            await s.execute(delete(AuditEvent).where(AuditEvent.workload_id.in_(ids)))
            await s.execute(delete(Placement).where(Placement.workload_id.in_(ids)))
            await s.execute(delete(Workload).where(Workload.id.in_(ids)))
            return len(ids)

    async def begin_placements(self, intents: Sequence[PlacementIntent]) -> list[PlacementIntent]:
        """Record intents (one transaction). An intent is kept only if its workload is still Pending at
        that generation; the accepted ones come back with ``placement_id`` set and the workload Placing.

        A handful of statements however many intents there are (a failover re-places hundreds at once): one
        guarded UPDATE that claims the workloads, one multi-row INSERT of the placements, one executemany
        UPDATE that points each workload at its placement, and the audit events."""
        if not intents:
            return []
        now = utcnow()
        unique: dict[int, PlacementIntent] = {}
        for intent in intents:
            unique.setdefault(intent.workload_id, intent)
        todo = list(unique.values())
        async with self.sessions.begin() as s:
            claimed = await _claim_pending(s, [(i.workload_id, i.generation) for i in todo], now)
            accepted = [i for i in todo if i.workload_id in claimed]
            if not accepted:
                return []
            # Core statements, as in apply(): the ORM's bulk paths cost more than the statements themselves.
            conn = await s.connection()
            placements = _table(Placement)
            rows = (
                await conn.execute(
                    insert(placements).returning(
                        placements.c.id, placements.c.workload_id, sort_by_parameter_order=True
                    ),
                    [
                        {
                            "workload_id": i.workload_id,
                            "generation": i.generation,
                            "cluster": i.cluster,
                            "strategy": i.strategy,
                            "score": i.score,
                            "decision": i.decision,
                            "state": PlacementState.CREATING,
                            "created_at": now,
                        }
                        for i in accepted
                    ],
                )
            ).all()
            for intent, (pid, wid) in zip(accepted, rows, strict=True):
                if int(wid) != intent.workload_id:  # sort_by_parameter_order guarantees it; never trust blindly
                    raise RuntimeError("placement rows came back out of order")
                intent.placement_id = int(pid)
            await conn.execute(
                _placing_update(),
                [
                    {
                        "b_id": i.workload_id,
                        "b_cluster": i.cluster,
                        "b_last_decision": i.decision,
                        "b_placement_id": i.placement_id,
                    }
                    for i in accepted
                ],
            )
            await conn.execute(
                insert(_table(AuditEvent)),
                [
                    {
                        "at": now,
                        "workload_id": i.workload_id,
                        "cluster": i.cluster,
                        "type": "Placing",
                        "message": str(i.decision.get("summary", f"placing on {i.cluster}")),
                    }
                    for i in accepted
                ],
            )
        return accepted

    async def begin_races(self, intents: Sequence[RaceIntent]) -> list[RaceIntent]:
        """Record every copy of each race as a placement intent (one transaction), before any copy exists.
        An intent is kept only if its workload is still Pending at that generation; the workload becomes
        Placing with no cluster (the race has no winner yet)."""
        if not intents:
            return []
        now = utcnow()
        unique: dict[int, RaceIntent] = {}
        for intent in intents:
            unique.setdefault(intent.workload_id, intent)
        todo = list(unique.values())
        async with self.sessions.begin() as s:
            claimed = await _claim_pending(
                s, [(i.workload_id, i.generation) for i in todo], now, cluster=None, placement_id=None
            )
            accepted = [i for i in todo if i.workload_id in claimed]
            if not accepted:
                return []
            await self._insert_race_placements(s, accepted, now)
            await s.execute(update(Workload), [{"id": i.workload_id, "last_decision": i.decision} for i in accepted])
            s.add_all(
                AuditEvent(
                    at=now,
                    workload_id=i.workload_id,
                    type="Placing",
                    message=str(i.decision.get("summary", "")),
                    data={"strategy": i.strategy, "copies": list(i.clusters)},
                )
                for i in accepted
            )
        return accepted

    async def _insert_race_placements(self, s: Any, intents: Sequence[RaceIntent], now: datetime) -> None:
        items = [(i, c) for i in intents for c in i.clusters]
        rows = (
            await s.execute(
                insert(Placement).returning(
                    Placement.id, Placement.workload_id, Placement.cluster, sort_by_parameter_order=True
                ),
                [
                    {
                        "workload_id": i.workload_id,
                        "generation": i.generation,
                        "cluster": c,
                        "strategy": i.strategy,
                        "score": None,
                        "decision": {"strategy": i.strategy, "copies": list(i.clusters)},
                        "state": PlacementState.CREATING,
                        "created_at": now,
                    }
                    for i, c in items
                ],
            )
        ).all()
        for (intent, cluster), (pid, wid, rc) in zip(items, rows, strict=True):
            if int(wid) != intent.workload_id or rc != cluster:
                raise RuntimeError("placement rows came back out of order")
            intent.placement_ids[cluster] = int(pid)

    async def extend_race(self, intent: RaceIntent) -> bool:
        """A new incremental round: more copies of a race still without a winner (guarded by generation)."""
        now = utcnow()
        async with self.sessions.begin() as s:
            res = await s.execute(
                update(Workload)
                .where(
                    Workload.id == intent.workload_id,
                    Workload.generation == intent.generation,
                    Workload.state.in_([WorkloadState.PLACING, WorkloadState.PLACED]),
                    Workload.cluster.is_(None),
                    Workload.deleted.is_(False),
                )
                .values(updated_at=now)
            )
            if res.rowcount != 1:  # type: ignore[attr-defined]
                return False
            await self._insert_race_placements(s, [intent], now)
            s.add(
                AuditEvent(
                    at=now,
                    workload_id=intent.workload_id,
                    type="Nominated",
                    message=f"{intent.strategy}: next round, copies on {', '.join(intent.clusters)}",
                    data={"strategy": intent.strategy, "copies": list(intent.clusters)},
                )
            )
        return True

    async def settle_race(
        self,
        workload_id: int,
        generation: int,
        *,
        winner: str,
        winner_placement: int,
        winner_uid: str,
        losers: Sequence[tuple[int, str | None]],
        decision: dict[str, Any],
        message: str,
    ) -> bool:
        """The first admission wins, in ONE transaction: the winner's placement becomes the workload's, every
        other copy of the race is Superseded. False when the race was settled or abandoned already."""
        now = utcnow()
        async with self.sessions.begin() as s:
            res = await s.execute(
                update(Workload)
                .where(
                    Workload.id == workload_id,
                    Workload.generation == generation,
                    Workload.state.in_([WorkloadState.PLACING, WorkloadState.PLACED]),
                    Workload.cluster.is_(None),
                )
                .values(
                    state=WorkloadState.PLACED,
                    cluster=winner,
                    placement_id=winner_placement,
                    placed_at=now,
                    last_decision=decision,
                    updated_at=now,
                )
            )
            if res.rowcount != 1:  # type: ignore[attr-defined]
                return False
            await s.execute(
                update(Placement)
                .where(Placement.id == winner_placement)
                .values(state=PlacementState.CREATED, remote_uid=winner_uid, mirrored_at=now)
            )
            for pid, uid in losers:
                values: dict[str, Any] = {
                    "state": PlacementState.SUPERSEDED,
                    "outcome": f"the copy on {winner} was admitted first",
                    "ended_at": now,
                }
                if uid:
                    values["remote_uid"] = uid
                await s.execute(
                    update(Placement)
                    .where(Placement.id == pid, Placement.state.in_(list(PlacementState.OPEN)))
                    .values(**values)
                )
            s.add(AuditEvent(at=now, workload_id=workload_id, cluster=winner, type="Won", message=message))
        return True

    async def apply(self, transitions: Sequence[Transition]) -> list[bool]:
        """Apply guarded transitions in one transaction; returns which ones took effect.

        Core statements on the session's connection, not ORM-enabled ones: nothing is loaded in these sessions,
        so the ORM's bulk-update path (synchronising a session that holds nothing, per statement) was pure cost,
        about half of this method's CPU on a 2,000-Job burst (bench/RESULTS.md). Each workload's guarded UPDATE is
        its own statement (its row count says whether it took effect), built once per set of columns; the
        placements' updates and the audit events go in as one executemany each."""
        if not transitions:
            return []
        results: list[bool] = []
        now = utcnow()
        audit = _table(AuditEvent)
        events: list[dict[str, Any]] = []
        # The placements' updates (unguarded: a placement follows its workload) go in as one executemany per run
        # of transitions writing the same columns; a new run starts when the columns change, so that two updates
        # of one placement in a batch still land in the batch's order.
        placement_columns: tuple[str, ...] = ()
        placement_rows: list[dict[str, Any]] = []
        async with self.sessions.begin() as s:
            conn = await s.connection()
            for t in transitions:
                values = t.values
                if values:
                    params = {f"v_{c}": v for c, v in values.items()}
                    params["v_updated_at"] = now
                    params["w_id"], params["w_generation"] = t.workload_id, t.generation
                    if t.from_states:
                        params["w_states"] = list(t.from_states)
                    res = await conn.execute(_workload_update(tuple(values), bool(t.from_states)), params)
                    ok = res.rowcount == 1
                else:
                    ok = True
                if ok and t.placement_id is not None and t.placement_values:
                    columns = tuple(t.placement_values)
                    if columns != placement_columns and placement_rows:
                        await conn.execute(_placement_update(placement_columns), placement_rows)
                        placement_rows = []
                    placement_columns = columns
                    params = {f"v_{c}": v for c, v in t.placement_values.items()}
                    params["p_id"] = t.placement_id
                    placement_rows.append(params)
                if ok and t.event is not None:
                    etype, message, data = t.event
                    events.append(
                        {
                            "at": now,
                            "workload_id": t.workload_id,
                            "cluster": t.cluster,
                            "type": etype,
                            "message": message,
                            "data": data,
                        }
                    )
                results.append(ok)
            if placement_rows:
                await conn.execute(_placement_update(placement_columns), placement_rows)
            if events:
                await conn.execute(insert(audit), events)
        return results

    async def fail_over(
        self,
        worker: str,
        moves: Sequence[tuple[int, int, int | None]],
        failures: Sequence[tuple[int, int, int | None]],
        *,
        from_states: Sequence[str],
        move_reason: str,
        fail_reason: str,
    ) -> tuple[set[int], set[int]]:
        """A lost worker's workloads in one transaction and a handful of statements, however many there are:
        ``moves`` (id, generation, placement id) go back to Pending at generation + 1, ``failures`` (no-failover)
        become Failed at generation + 1. Each is guarded by its generation and state. Returns the ids applied."""
        now = utcnow()
        moved: set[int] = set()
        failed: set[int] = set()
        async with self.sessions.begin() as s:
            for items, values, into in (
                (
                    moves,
                    {"state": WorkloadState.PENDING, "cluster": None, "placement_id": None, "reason": move_reason},
                    moved,
                ),
                (failures, {"state": WorkloadState.FAILED, "reason": fail_reason, "finished_at": now}, failed),
            ):
                for start in range(0, len(items), 500):
                    chunk = items[start : start + 500]
                    result = await s.execute(
                        update(Workload)
                        .where(
                            Workload.id.in_([i for i, _, _ in chunk]),  # the primary key, see _claim_pending
                            tuple_(Workload.id, Workload.generation).in_([(i, g) for i, g, _ in chunk]),
                            Workload.state.in_(list(from_states)),
                        )
                        .values(**values, generation=Workload.generation + 1, updated_at=now)
                        .returning(Workload.id)
                    )
                    into.update(int(x) for x in result.scalars().all())
            done = moved | failed
            pids = [pid for wid, _, pid in [*moves, *failures] if wid in done and pid is not None]
            for start in range(0, len(pids), 500):
                await s.execute(
                    update(Placement)
                    .where(Placement.id.in_(pids[start : start + 500]))
                    .values(state=PlacementState.LOST, outcome=f"worker {worker} was lost", ended_at=now)
                )
            s.add_all(
                AuditEvent(
                    at=now,
                    workload_id=wid,
                    cluster=worker,
                    type="FailedOver" if wid in moved else "WorkerLost",
                    message=move_reason if wid in moved else fail_reason,
                    data={"from": worker},
                )
                for wid in sorted(done)
            )
        return moved, failed

    async def close_placements(self, placement_ids: Sequence[int], *, state: str, outcome: str) -> None:
        """Close the placements still open among these (the first close wins)."""
        if not placement_ids:
            return
        async with self.sessions.begin() as s:
            await s.execute(
                update(Placement)
                .where(Placement.id.in_(list(placement_ids)), Placement.state.in_(list(PlacementState.OPEN)))
                .values(state=state, outcome=outcome[:2000], ended_at=utcnow())
            )

    async def update_placement(self, placement_id: int, **values: Any) -> None:
        async with self.sessions.begin() as s:
            await s.execute(update(Placement).where(Placement.id == placement_id).values(**values))

    async def set_decision(self, items: Sequence[tuple[int, int, dict[str, Any], str | None]]) -> None:
        """Store the latest decision (and reason) of workloads that stay pending: (id, generation, decision, reason)."""
        if not items:
            return
        async with self.sessions.begin() as s:
            for wid, gen, decision, reason in items:
                await s.execute(
                    update(Workload)
                    .where(
                        and_(Workload.id == wid, Workload.generation == gen, Workload.state == WorkloadState.PENDING)
                    )
                    .values(last_decision=decision, reason=reason)
                )

    async def record(self, events: Sequence[AuditEvent]) -> None:
        if not events:
            return
        async with self.sessions.begin() as s:
            s.add_all(events)


@functools.cache
def _claim_statement(columns: tuple[str, ...]) -> Update:
    """The claim's UPDATE for these extra columns (parameters ``ids``, ``keys``, ``now``, ``v_<column>``).

    ``id IN (...)`` beside the pairs is for the query planner: given only ``(id, generation) IN (VALUES ...)`` and
    ``state = 'Pending'``, SQLite searched the state index, that is, every Pending workload, on every placement
    round: 4 ms of CPU per claim with 2,000 workloads pending and 10 ms with 20,000 (bench/RESULTS.md)."""
    t = _table(Workload)
    return (
        update(t)
        .where(
            t.c.id.in_(bindparam("ids", expanding=True)),
            tuple_(t.c.id, t.c.generation).in_(bindparam("keys", expanding=True)),
            t.c.state == WorkloadState.PENDING,
            t.c.deleted.is_(False),
            t.c.stopped.is_(False),
        )
        .values(
            {"state": WorkloadState.PLACING, "reason": None, "updated_at": bindparam("now", type_=t.c.updated_at.type)}
            | {c: bindparam(f"v_{c}", type_=t.c[c].type) for c in columns}
        )
        .returning(t.c.id)
    )


async def _claim_pending(s: AsyncSession, keys: Sequence[tuple[int, int]], now: datetime, **values: Any) -> set[int]:
    """Pending → Placing for these (workload id, generation) pairs, guarded (still Pending at that generation,
    not deleted), in chunks of 500 rows; the ids it took. A Core statement on the session's connection: the
    ORM-enabled UPDATE prepared a session synchronisation for a session holding nothing, every round."""
    claimed: set[int] = set()
    conn = await s.connection()
    stmt = _claim_statement(tuple(values))
    extra = {f"v_{c}": v for c, v in values.items()}
    for start in range(0, len(keys), 500):
        chunk = list(keys[start : start + 500])
        result = await conn.execute(stmt, {"ids": [i for i, _ in chunk], "keys": chunk, "now": now, **extra})
        claimed.update(int(x) for x in result.scalars().all())
    return claimed
