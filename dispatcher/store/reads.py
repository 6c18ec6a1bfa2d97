"""The store's reads: open workloads for recovery, one workload with its placements, pages of workloads for the API,
counts, events. No read holds a write lock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from sqlalchemy.orm import defer, selectinload

from .intents import WorkloadCounts
from .models import AuditEvent, Cluster, Placement, PlacementState, Workload, WorkloadState

__all__ = ["Reads"]


class Reads:
    """Read queries of :class:`~.repo.Repo` (a part of it)."""

    sessions: async_sessionmaker[AsyncSession]
    engine: AsyncEngine

    async def clusters(self) -> list[Cluster]:
        async with self.sessions() as s:
            return list((await s.scalars(select(Cluster).order_by(Cluster.name))).all())

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
