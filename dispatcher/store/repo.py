"""Queries and transactions on the dispatcher's SQL state.

Every state change is a guarded update: it names the workload's generation (and, where it matters,
the state it expects), so a late writer, a retried step after a crash or a stale copy's status cannot
overwrite newer truth. Writes that come in bursts (intake, status sync) are applied in batches, one
transaction per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import event, insert, select, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlalchemy.orm import Session

from ..fencing import Deposed, Fence
from .intents import NewWorkload, PlacementIntent, RaceIntent, Transition, WorkloadCounts
from .models import AuditEvent, Cluster, Leadership, utcnow
from .reads import Reads
from .writes import Writes

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


class Repo(Reads, Writes):
    """The dispatcher's SQL state: leadership (the fencing term), clusters, and the reads and writes of its two
    halves (:mod:`.reads`, :mod:`.writes`)."""

    def __init__(self, engine: AsyncEngine, *, fence: Fence | None = None) -> None:
        self.engine = engine
        #: With leader election: every write transaction is checked against this fence's term (see _check_term).
        self.fence = fence
        self.sessions = async_sessionmaker(engine, expire_on_commit=False, info={"fence": fence} if fence else None)

    def set_fence(self, fence: Fence | None) -> None:
        """Fence (or stop fencing) every transaction opened from now on."""
        self.fence = fence
        self.sessions.configure(info={"fence": fence} if fence else None)

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
