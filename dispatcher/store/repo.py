"""Queries and transactions on the dispatcher's SQL state.

Every state change is a guarded update: it names the workload's generation (and, where it matters,
the state it expects), so a late writer, a retried step after a crash or a stale copy's status cannot
overwrite newer truth. Writes that come in bursts (intake, status sync) are applied in batches, one
transaction per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, event, func, insert, select, text, tuple_, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, defer, selectinload
from sqlalchemy.sql.dml import Update

from ..fencing import Deposed, Fence
from .models import AuditEvent, Cluster, Leadership, Placement, PlacementState, Workload, WorkloadState, utcnow

__all__ = [
    "REPLICA_APPLICATION_NAME",
    "NewWorkload",
    "PlacementIntent",
    "RaceIntent",
    "Repo",
    "Transition",
    "WorkloadCounts",
]

log = logging.getLogger("dispatcher.store")

#: The one row of the ``leadership`` table.
LEADERSHIP_ROW = 1
#: The PostgreSQL ``application_name`` of a leader-elected replica's sessions (``dispatcher run --leader-elect``):
#: how a new leader finds a deposed one's transactions (:meth:`Repo.end_stale_writers`).
REPLICA_APPLICATION_NAME = "kueue-dispatcher"


@event.listens_for(Session, "before_commit")
def _check_term(session: Session) -> None:
    """Fencing (leader election only): every transaction of a :class:`Repo` with a fence commits only if its
    term is still the current one. The row is read ``FOR SHARE`` and the lock held through the commit, so a
    takeover's bump (an UPDATE of that row) waits for this transaction, and a transaction that starts its
    check after the bump sees the new term and fails with :class:`Deposed` (rolled back: nothing written)."""
    fence = session.info.get("fence")
    if not isinstance(fence, Fence):
        return
    term = fence.check()
    current = (
        session.connection()
        .execute(select(Leadership.term).where(Leadership.id == LEADERSHIP_ROW).with_for_update(read=True))
        .scalar_one_or_none()
    )
    if current != term:
        fence.revoke()
        raise Deposed(f"term {term} is over: the current term in SQL is {current}")


@dataclass
class NewWorkload:
    uid: str
    namespace: str
    name: str
    kind: str
    api_version: str
    queue: str
    priority: int
    priority_class: str | None
    pod_sets: list[dict[str, Any]]
    status_mode: str
    no_failover: bool
    cluster_selector: dict[str, str] | None
    created_at: datetime | None
    object_generation: int = 1
    problem: str | None = None
    reason: str | None = None


@dataclass
class PlacementIntent:
    """A decision to create a copy of a workload on ``cluster`` at ``generation``."""

    workload_id: int
    generation: int
    cluster: str
    strategy: str
    score: float | None
    decision: dict[str, Any]
    #: Set by :meth:`Repo.begin_placements` when the intent was recorded.
    placement_id: int | None = None


@dataclass
class RaceIntent:
    """MultiKueue-style strategies: copies of one workload at one generation on several workers at once."""

    workload_id: int
    generation: int
    strategy: str
    clusters: list[str]
    decision: dict[str, Any]
    #: Set when recorded: placement id per cluster.
    placement_ids: dict[str, int] = field(default_factory=dict)


@dataclass
class WorkloadCounts:
    """Workloads per state, per LocalQueue ``(namespace, queue)`` and per worker (only states with any)."""

    queues: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    clusters: dict[str, dict[str, int]] = field(default_factory=dict)

    def namespaces(self) -> dict[str, dict[str, int]]:
        """Per namespace: the sum over its LocalQueues."""
        out: dict[str, dict[str, int]] = {}
        for (namespace, _queue), states in sorted(self.queues.items()):
            into = out.setdefault(namespace, {})
            for state, n in states.items():
                into[state] = into.get(state, 0) + n
        return out


@dataclass
class Transition:
    """A guarded update of a workload (and optionally its placement), applied in a batch."""

    workload_id: int
    generation: int
    values: dict[str, Any]
    #: Only when the workload is in one of these states (empty: any non-terminal state).
    from_states: tuple[str, ...] = ()
    placement_id: int | None = None
    placement_values: dict[str, Any] = field(default_factory=dict)
    event: tuple[str, str, dict[str, Any] | None] | None = None  # (type, message, data)
    cluster: str | None = None


class Repo:
    def __init__(self, engine: AsyncEngine, *, fence: Fence | None = None) -> None:
        self.engine = engine
        #: With leader election: every write transaction is checked against this fence's term (see _check_term).
        self.fence = fence
        self.sessions = async_sessionmaker(engine, expire_on_commit=False, info={"fence": fence} if fence else None)

    def set_fence(self, fence: Fence | None) -> None:
        """Fence (or stop fencing) every transaction opened from now on."""
        self.fence = fence
        self.sessions.configure(info={"fence": fence} if fence else None)

    # -- leadership (fencing term) -------------------------------------------------------------------

    async def take_term(self, holder: str) -> int:
        """A takeover: raise the fencing term by one and return it. Waits for the open transactions of the
        previous term (they hold the row FOR SHARE), so none of them can commit after this returns. On
        PostgreSQL the replicas' write transactions still open are ended first (:meth:`end_stale_writers`): a
        deposed leader frozen in the middle of one would make the bump wait for as long as it stays frozen."""
        if self.engine.dialect.name == "postgresql":
            await self.end_stale_writers()
        now = utcnow()
        while True:
            async with self.engine.begin() as conn:
                bumped = (
                    await conn.execute(
                        update(Leadership)
                        .where(Leadership.id == LEADERSHIP_ROW)
                        .values(term=Leadership.term + 1, holder=holder[:253], updated_at=now)
                        .returning(Leadership.term)
                    )
                ).scalar_one_or_none()
                if bumped is not None:
                    return int(bumped)
                try:
                    async with conn.begin_nested():
                        await conn.execute(
                            insert(Leadership).values(id=LEADERSHIP_ROW, term=1, holder=holder[:253], updated_at=now)
                        )
                except IntegrityError:
                    continue  # another replica inserted it first: bump again
                return 1

    async def end_stale_writers(self) -> list[int]:
        """End the other replicas' sessions (:data:`REPLICA_APPLICATION_NAME`) inside a write transaction, on
        PostgreSQL; returns their backend pids. For a new leader, before it takes its term.

        It holds the Lease, so no other replica may write now: such a transaction is a deposed leader's (or a
        standby's, refused by its fence at commit). None of them may commit in the new term, and rolling one
        back is what a crash of its replica would do. The server ends a session left *idle* in a transaction
        (``idle_in_transaction_session_timeout``), but not one whose process stopped in the middle of a
        statement: asyncpg prepares a statement (Parse, Describe, Flush: no Sync) before it binds and executes
        it, and a process frozen in between (SIGSTOP, a VM pause) leaves its session ``active``, waiting for
        the client, holding its locks for as long as it stays frozen: the fencing row FOR SHARE, which the
        term bump waits for, and the rows it wrote, which the new leader's writes would wait for. A failure
        (a role not allowed to end the others' sessions) is logged; the bump then waits as before."""
        stale = text(
            "WITH stale AS MATERIALIZED (SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND application_name = :name AND backend_xid IS NOT NULL)"
            " SELECT pid FROM stale WHERE pg_terminate_backend(pid)"
        )
        try:
            async with self.engine.begin() as conn:
                ended = [int(pid) for pid in (await conn.execute(stale, {"name": REPLICA_APPLICATION_NAME})).scalars()]
        except DBAPIError as exc:
            log.warning("could not end the write transactions of other replicas (%s); waiting for them", exc)
            return []
        if ended:
            log.warning("ended %d write transaction(s) of a deposed leader (sessions %s)", len(ended), ended)
        return ended

    async def leadership(self) -> tuple[int, str | None, datetime | None]:
        """(term, holder, when it was taken); (0, None, None) before any takeover."""
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(Leadership.term, Leadership.holder, Leadership.updated_at).where(
                        Leadership.id == LEADERSHIP_ROW
                    )
                )
            ).first()
        if row is None:
            return 0, None, None
        return int(row[0]), row[1], row[2]

    async def check_term(self) -> None:
        """Raise :class:`Deposed` unless this repo's fence still holds the current term (a read, no lock)."""
        if self.fence is None:
            return
        term = self.fence.check()
        async with self.engine.connect() as conn:
            current = (
                await conn.execute(select(Leadership.term).where(Leadership.id == LEADERSHIP_ROW))
            ).scalar_one_or_none()
        if current != term:
            self.fence.revoke()
            raise Deposed(f"term {term} is over: the current term in SQL is {current}")

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    # -- clusters ------------------------------------------------------------------------------------

    async def ensure_clusters(self, names: Iterable[str]) -> dict[str, Cluster]:
        async with self.sessions.begin() as s:
            existing = {c.name: c for c in (await s.scalars(select(Cluster))).all()}
            for name in names:
                if name not in existing:
                    c = Cluster(name=name, health="Unknown", cordoned=False, epoch=0)
                    s.add(c)
                    existing[name] = c
        return existing

    async def update_cluster(self, name: str, **values: Any) -> None:
        async with self.sessions.begin() as s:
            await s.execute(update(Cluster).where(Cluster.name == name).values(**values, updated_at=utcnow()))

    async def record_health(self, name: str, health: str, reason: str = "") -> bool:
        """Store a worker's health; when it changed, also when (``health_since``) and a ``WorkerHealth`` event
        (``"Ready -> Suspect: …"``), the worker's health history. Idempotent: the same health again writes nothing."""
        now = utcnow()
        async with self.sessions.begin() as s:
            old = await s.scalar(select(Cluster.health).where(Cluster.name == name))
            if old == health:
                return False
            await s.execute(
                update(Cluster).where(Cluster.name == name).values(health=health, health_since=now, updated_at=now)
            )
            message = f"{old or 'Unknown'} -> {health}" + (f": {reason}" if reason else "")
            s.add(AuditEvent(at=now, cluster=name, type="WorkerHealth", message=message[:2000]))
            return True

    async def clusters(self) -> list[Cluster]:
        async with self.sessions() as s:
            return list((await s.scalars(select(Cluster).order_by(Cluster.name))).all())

    # -- workloads -----------------------------------------------------------------------------------

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

    async def load_open(self) -> list[Workload]:
        """Every workload not in a terminal state, plus terminal ones whose remote copy is not cleaned."""
        async with self.sessions() as s:
            # The last decision (every worker's verdict) and the remote status are large JSON documents that
            # recovery does not read: left unloaded, and reading them from these rows raises.
            stmt = (
                select(Workload)
                .where((Workload.state.not_in(list(WorkloadState.TERMINAL))) | (Workload.cleaned_at.is_(None)))
                .options(defer(Workload.last_decision, raiseload=True), defer(Workload.remote_status, raiseload=True))
            )
            return list((await s.scalars(stmt)).all())

    async def open_placements(self) -> list[Placement]:
        async with self.sessions() as s:
            stmt = select(Placement).where(Placement.state.in_(list(PlacementState.OPEN)))
            return list((await s.scalars(stmt)).all())

    async def get_workload(self, namespace: str, name: str) -> Workload | None:
        """The newest workload of that name, with its placements."""
        async with self.sessions() as s:
            stmt = (
                select(Workload)
                .where(Workload.namespace == namespace, Workload.name == name)
                .options(selectinload(Workload.placements))
                .order_by(Workload.id.desc())
                .limit(1)
            )
            return (await s.scalars(stmt)).first()

    async def get_by_id(self, workload_id: int) -> Workload | None:
        async with self.sessions() as s:
            return await s.get(Workload, workload_id, options=[selectinload(Workload.placements)])

    async def list_workloads(
        self,
        *,
        state: str | None = None,
        cluster: str | None = None,
        queue: str | None = None,
        namespace: str | None = None,
        limit: int = 100,
        after_id: int = 0,
        newest_first: bool = False,
    ) -> list[Workload]:
        """A page of workloads, filtered; ``after_id`` is the cursor (the last id of the previous page), in id order
        or, ``newest_first``, in reverse (0: from the newest)."""
        if newest_first:
            stmt = select(Workload).where(Workload.id < after_id) if after_id else select(Workload)
        else:
            stmt = select(Workload).where(Workload.id > after_id)
        if state:
            stmt = stmt.where(Workload.state == state)
        if cluster:
            stmt = stmt.where(Workload.cluster == cluster)
        if queue:
            stmt = stmt.where(Workload.queue == queue)
        if namespace:
            stmt = stmt.where(Workload.namespace == namespace)
        order = Workload.id.desc() if newest_first else Workload.id
        async with self.sessions() as s:
            return list((await s.scalars(stmt.order_by(order).limit(limit))).all())

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

    async def count_by_state(self) -> dict[str, int]:
        async with self.sessions() as s:
            rows = await s.execute(select(Workload.state, func.count()).group_by(Workload.state))
            return {state: int(n) for state, n in rows.all()}

    async def workload_counts(self) -> WorkloadCounts:
        """How many workloads are in each state per LocalQueue (namespace, queue name) and per worker, counted by
        the database (GROUP BY), so the dashboard's summary stays exact and cheap however many records there are
        (a listing would page through them all). Per namespace is the sum of its queues."""
        by_queue = (
            select(Workload.namespace, Workload.queue, Workload.state, func.count())
            .group_by(Workload.namespace, Workload.queue, Workload.state)
            .order_by(Workload.namespace, Workload.queue)
        )
        by_cluster = (
            select(Workload.cluster, Workload.state, func.count())
            .where(Workload.cluster.is_not(None))
            .group_by(Workload.cluster, Workload.state)
            .order_by(Workload.cluster)
        )
        counts = WorkloadCounts()
        async with self.sessions() as s:
            for namespace, queue, state, n in (await s.execute(by_queue)).all():
                counts.queues.setdefault((str(namespace), str(queue)), {})[str(state)] = int(n)
            for cluster, state, n in (await s.execute(by_cluster)).all():
                counts.clusters.setdefault(str(cluster), {})[str(state)] = int(n)
        return counts

    async def events_for(self, workload_id: int, limit: int = 200) -> list[AuditEvent]:
        async with self.sessions() as s:
            stmt = select(AuditEvent).where(AuditEvent.workload_id == workload_id).order_by(AuditEvent.id).limit(limit)
            return list((await s.scalars(stmt)).all())

    async def recent_events(
        self,
        types: Sequence[str] | None,
        limit: int = 50,
        *,
        workload_id: int | None = None,
        cluster: str | None = None,
    ) -> list[AuditEvent]:
        """The newest events, newest first: of these ``types`` (None: every type), optionally only one workload's
        (the API's workload page) or one worker's (its health history: ``WorkerHealth`` with ``cluster``)."""
        stmt = select(AuditEvent)
        if types is not None:
            stmt = stmt.where(AuditEvent.type.in_(list(types)))
        if workload_id is not None:
            stmt = stmt.where(AuditEvent.workload_id == workload_id)
        if cluster is not None:
            stmt = stmt.where(AuditEvent.cluster == cluster)
        async with self.sessions() as s:
            return list((await s.scalars(stmt.order_by(AuditEvent.id.desc()).limit(limit))).all())

    async def last_decisions(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The last decision of each of these workloads (the column :meth:`load_open` leaves unloaded)."""
        out: dict[int, dict[str, Any]] = {}
        unique = sorted(set(ids))
        async with self.sessions() as s:
            for start in range(0, len(unique), 500):
                stmt = select(Workload.id, Workload.last_decision).where(Workload.id.in_(unique[start : start + 500]))
                out.update({int(i): dict(d or {}) for i, d in (await s.execute(stmt)).all()})
        return out

    async def workload_names(self, ids: Sequence[int]) -> dict[int, str]:
        """``namespace/name`` of each of these workload ids that exists."""
        if not ids:
            return {}
        async with self.sessions() as s:
            stmt = select(Workload.id, Workload.namespace, Workload.name).where(Workload.id.in_(list(set(ids))))
            return {int(i): f"{ns}/{name}" for i, ns, name in (await s.execute(stmt)).all()}

    # -- placement intents ---------------------------------------------------------------------------

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
            rows = (
                await s.execute(
                    insert(Placement).returning(Placement.id, Placement.workload_id, sort_by_parameter_order=True),
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
            await s.execute(
                update(Workload),
                [
                    {
                        "id": i.workload_id,
                        "cluster": i.cluster,
                        "last_decision": i.decision,
                        "placement_id": i.placement_id,
                    }
                    for i in accepted
                ],
            )
            s.add_all(
                AuditEvent(
                    at=now,
                    workload_id=i.workload_id,
                    cluster=i.cluster,
                    type="Placing",
                    message=str(i.decision.get("summary", f"placing on {i.cluster}")),
                )
                for i in accepted
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
        """Apply guarded transitions in one transaction; returns which ones took effect."""
        if not transitions:
            return []
        results: list[bool] = []
        now = utcnow()
        async with self.sessions.begin() as s:
            for t in transitions:
                stmt: Update = update(Workload).where(Workload.id == t.workload_id, Workload.generation == t.generation)
                if t.from_states:
                    stmt = stmt.where(Workload.state.in_(list(t.from_states)))
                values = dict(t.values)
                if values:
                    values["updated_at"] = now
                    res = await s.execute(stmt.values(**values))
                    ok = res.rowcount == 1  # type: ignore[attr-defined]
                else:
                    ok = True
                if ok and t.placement_id is not None and t.placement_values:
                    await s.execute(
                        update(Placement).where(Placement.id == t.placement_id).values(**t.placement_values)
                    )
                if ok and t.event is not None:
                    etype, message, data = t.event
                    s.add(
                        AuditEvent(
                            at=now, workload_id=t.workload_id, cluster=t.cluster, type=etype, message=message, data=data
                        )
                    )
                results.append(ok)
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


async def _claim_pending(s: AsyncSession, keys: Sequence[tuple[int, int]], now: datetime, **values: Any) -> set[int]:
    """Pending → Placing for these (workload id, generation) pairs, guarded (still Pending at that generation,
    not deleted), in chunks of 500 rows; the ids it took."""
    claimed: set[int] = set()
    for start in range(0, len(keys), 500):
        result = await s.execute(
            update(Workload)
            .where(
                tuple_(Workload.id, Workload.generation).in_(list(keys[start : start + 500])),
                Workload.state == WorkloadState.PENDING,
                Workload.deleted.is_(False),
                Workload.stopped.is_(False),
            )
            .values(state=WorkloadState.PLACING, reason=None, updated_at=now, **values)
            .returning(Workload.id)
        )
        claimed.update(int(x) for x in result.scalars().all())
    return claimed
