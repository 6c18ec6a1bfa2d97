"""SQL records of Kueue-native mode (the dispatcher as MultiKueue's external dispatcher).

The same tables as standalone mode, so that ``dispatcher explain``, the workload listings and the audit trail read
them unchanged: one ``workloads`` row per manager Workload MultiKueue handles (``status_mode`` ``kueue-native``,
``uid`` the Workload's, ``name`` its job's), one ``placements`` row per worker nominated (``strategy``
``kueue-external``), and events. The states mean:

* ``Pending``: waiting for the manager's quota, or for a nomination;
* ``Placed``: nominated (MultiKueue creates the copy there); its placements ``Created``;
* ``Admitted``: MultiKueue set ``clusterName`` (a worker admitted its copy); that placement ``Admitted``, the other
  nominees' ``Superseded``;
* ``Succeeded``/``Failed``: the manager Workload finished; ``Cancelled``: it was deleted unfinished.

An eviction (the worker lost, the copy evicted there, a preemption on the manager) raises the generation and
closes the open placements (``Lost`` or ``Evicted``), as a failover does in standalone mode. Every write is
guarded by the row's generation; the nomination is written here before it is applied to the Workload (intent
first), and the nominator converges the Workload to it after a crash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import selectinload

from .models import AuditEvent, Placement, PlacementState, Workload, WorkloadState, utcnow
from .repo import NewWorkload, Repo

__all__ = ["NATIVE_MODE", "NATIVE_STRATEGY", "NativeRecords", "NativeRow"]

#: ``workloads.status_mode`` of the rows of this mode, and ``placements.strategy`` of its nominations.
NATIVE_MODE = "kueue-native"
NATIVE_STRATEGY = "kueue-external"
#: A placement ended by an eviction of the copy (not a lost worker).
EVICTED = "Evicted"


@dataclass
class NativeRow:
    """What the nominator keeps in memory of one workload row."""

    id: int
    uid: str
    namespace: str
    name: str
    generation: int
    state: str
    cluster: str | None = None
    excluded: list[str] = field(default_factory=list)
    #: Open nominations: worker -> placement id.
    nominations: dict[str, int] = field(default_factory=dict)
    #: The manager's quota reservation the nominations were made for (its QuotaReserved condition's time): another
    #: one means Kueue evicted and re-admitted the Workload since.
    cycle: str = ""
    #: The job's cluster selector annotation (workers it may run on), or why it cannot be used (never nominated).
    selector: dict[str, str] | None = None
    problem: str | None = None

    @classmethod
    def of(cls, row: Workload) -> NativeRow:
        open_ = {
            p.cluster: p.id for p in row.placements if p.generation == row.generation and p.state in PlacementState.OPEN
        }
        return cls(
            id=row.id,
            uid=row.uid,
            namespace=row.namespace,
            name=row.name,
            generation=row.generation,
            state=row.state,
            cluster=row.cluster,
            excluded=list(row.excluded or []),
            nominations=open_,
            cycle=str((row.last_decision or {}).get("cycle", "")) if row.state == WorkloadState.PLACED else "",
            selector=dict(row.cluster_selector) if row.cluster_selector else None,
            problem=row.problem,
        )


class NativeRecords:
    """Guarded writes of Kueue-native mode, through the dispatcher's :class:`~.repo.Repo` (its fence included)."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo

    async def load_open(self) -> list[NativeRow]:
        """Every row of this mode not finished, with its open nominations."""
        async with self.repo.sessions() as s:
            stmt = (
                select(Workload)
                .where(Workload.status_mode == NATIVE_MODE, Workload.state.not_in(list(WorkloadState.TERMINAL)))
                .options(selectinload(Workload.placements))
            )
            return [NativeRow.of(w) for w in (await s.scalars(stmt)).all()]

    async def take(self, batch: Sequence[NewWorkload]) -> list[NativeRow]:
        """Rows for manager Workloads seen for the first time (uids already known are skipped)."""
        rows = await self.repo.add_workloads(batch)
        return [
            NativeRow(
                r.id,
                r.uid,
                r.namespace,
                r.name,
                r.generation,
                r.state,
                selector=dict(r.cluster_selector) if r.cluster_selector else None,
                problem=r.problem,
            )
            for r in rows
        ]

    async def nominate(
        self, row: NativeRow, clusters: Sequence[str], decision: dict[str, Any], summary: str, scores: dict[str, float]
    ) -> dict[str, int] | None:
        """Record new nominees (intent, before the Workload is patched); None when the row moved on."""
        now = utcnow()
        async with self.repo.sessions.begin() as s:
            res = await s.execute(
                update(Workload)
                .where(Workload.id == row.id, Workload.generation == row.generation)
                .where(Workload.state.in_([WorkloadState.PENDING, WorkloadState.PLACED]))
                .values(
                    state=WorkloadState.PLACED,
                    last_decision=decision,
                    reason=summary,
                    placed_at=now,
                    updated_at=now,
                )
            )
            if res.rowcount != 1:  # type: ignore[attr-defined]
                return None
            placements = [
                Placement(
                    workload_id=row.id,
                    generation=row.generation,
                    cluster=c,
                    strategy=NATIVE_STRATEGY,
                    score=scores.get(c),
                    decision=decision,
                    state=PlacementState.CREATED,
                    created_at=now,
                    mirrored_at=now,
                )
                for c in clusters
            ]
            s.add_all(placements)
            await s.flush()
            first = not row.nominations
            s.add(
                AuditEvent(
                    at=now,
                    workload_id=row.id,
                    cluster=clusters[0] if clusters else None,
                    type="Nominated" if first else "Renominated",
                    message=f"nominated {', '.join(clusters)} for MultiKueue: {summary}",
                    data={"clusters": list(clusters), "generation": row.generation},
                )
            )
        return {p.cluster: p.id for p in placements}

    async def assigned(self, row: NativeRow, cluster: str) -> bool:
        """MultiKueue set ``clusterName``: the workload is Admitted there; the other nominees are superseded."""
        now = utcnow()
        async with self.repo.sessions.begin() as s:
            res = await s.execute(
                update(Workload)
                .where(Workload.id == row.id, Workload.generation == row.generation)
                .where(Workload.state.not_in(list(WorkloadState.TERMINAL)))
                .values(state=WorkloadState.ADMITTED, cluster=cluster, admitted_at=now, reason=None, updated_at=now)
            )
            if res.rowcount != 1:  # type: ignore[attr-defined]
                return False
            for c, pid in row.nominations.items():
                values: dict[str, Any] = (
                    {"state": PlacementState.ADMITTED, "admitted_at": now}
                    if c == cluster
                    else {
                        "state": PlacementState.SUPERSEDED,
                        "outcome": f"MultiKueue kept the copy {cluster} admitted; this one was deleted",
                        "ended_at": now,
                    }
                )
                stmt = update(Placement).where(Placement.id == pid)
                if c != cluster:  # a nominee that timed out keeps that outcome
                    stmt = stmt.where(Placement.state.in_(list(PlacementState.OPEN)))
                await s.execute(stmt.values(**values))
            if cluster not in row.nominations:  # nominated by someone else, e.g. before this dispatcher ran
                s.add(
                    Placement(
                        workload_id=row.id,
                        generation=row.generation,
                        cluster=cluster,
                        strategy=NATIVE_STRATEGY,
                        state=PlacementState.ADMITTED,
                        outcome="not nominated by this dispatcher",
                        created_at=now,
                        admitted_at=now,
                    )
                )
            s.add(
                AuditEvent(
                    at=now,
                    workload_id=row.id,
                    cluster=cluster,
                    type="Admitted",
                    message=f"MultiKueue: {cluster}'s Kueue admitted the copy (status.clusterName={cluster})",
                )
            )
        return True

    async def timed_out(self, row: NativeRow, cluster: str, message: str) -> bool:
        """A nominee that did not admit the copy in time: its placement TimedOut, the worker excluded from the next
        decisions (its copy stays nominated: a nomination is never taken back, see native/rules.py)."""
        pid = row.nominations.get(cluster)
        now = utcnow()
        async with self.repo.sessions.begin() as s:
            res = await s.execute(
                update(Workload)
                .where(Workload.id == row.id, Workload.generation == row.generation)
                .values(excluded=sorted({*row.excluded, cluster}), updated_at=now)
            )
            if res.rowcount != 1:  # type: ignore[attr-defined]
                return False
            if pid is not None:
                await s.execute(
                    update(Placement)
                    .where(Placement.id == pid, Placement.state.in_(list(PlacementState.OPEN)))
                    .values(state=PlacementState.TIMED_OUT, outcome=message[:2000])
                )
            s.add(AuditEvent(at=now, workload_id=row.id, cluster=cluster, type="AdmissionTimeout", message=message))
        return True

    async def requeued(self, row: NativeRow, *, reason: str, lost: str | None, evicted_by: str | None) -> bool:
        """Kueue evicted the manager Workload (cleared ``clusterName`` and the nominations): a new generation,
        Pending; the open placements end ``Lost`` (``lost``: the worker was lost) or ``Evicted``."""
        now = utcnow()
        excluded = sorted({*row.excluded, evicted_by}) if evicted_by else list(row.excluded)
        async with self.repo.sessions.begin() as s:
            res = await s.execute(
                update(Workload)
                .where(Workload.id == row.id, Workload.generation == row.generation)
                .where(Workload.state.not_in(list(WorkloadState.TERMINAL)))
                .values(
                    state=WorkloadState.PENDING,
                    generation=Workload.generation + 1,
                    cluster=None,
                    placement_id=None,
                    reason=reason[:2000],
                    excluded=excluded,
                    updated_at=now,
                )
            )
            if res.rowcount != 1:  # type: ignore[attr-defined]
                return False
            await s.execute(
                update(Placement)
                .where(
                    Placement.workload_id == row.id,
                    Placement.generation == row.generation,
                    Placement.state.in_([*PlacementState.OPEN, PlacementState.TIMED_OUT]),
                )
                .values(state=PlacementState.LOST if lost else EVICTED, outcome=reason[:2000], ended_at=now)
            )
            s.add(
                AuditEvent(
                    at=now,
                    workload_id=row.id,
                    cluster=lost or evicted_by or row.cluster,
                    type="FailedOver" if lost else "Evicted",
                    message=reason,
                    data={"from": lost or evicted_by or row.cluster},
                )
            )
        return True

    async def finished(self, row: NativeRow, *, succeeded: bool, message: str) -> bool:
        """The manager Workload finished (MultiKueue copied the worker's outcome)."""
        now = utcnow()
        state = WorkloadState.SUCCEEDED if succeeded else WorkloadState.FAILED
        async with self.repo.sessions.begin() as s:
            res = await s.execute(
                update(Workload)
                .where(Workload.id == row.id, Workload.state.not_in(list(WorkloadState.TERMINAL)))
                .values(state=state, reason=message[:2000], finished_at=now, cleaned_at=now, updated_at=now)
            )
            if res.rowcount != 1:  # type: ignore[attr-defined]
                return False
            await s.execute(
                update(Placement)
                .where(Placement.workload_id == row.id, Placement.state.in_(list(PlacementState.OPEN)))
                .values(state=state, outcome=message[:2000], finished_at=now, ended_at=now)
            )
            s.add(AuditEvent(at=now, workload_id=row.id, cluster=row.cluster, type=state, message=message))
        return True

    async def cancelled(self, row: NativeRow) -> bool:
        """The manager Workload was deleted before it finished."""
        now = utcnow()
        async with self.repo.sessions.begin() as s:
            res = await s.execute(
                update(Workload)
                .where(Workload.id == row.id, Workload.state.not_in(list(WorkloadState.TERMINAL)))
                .values(state=WorkloadState.CANCELLED, deleted=True, finished_at=now, cleaned_at=now, updated_at=now)
            )
            if res.rowcount != 1:  # type: ignore[attr-defined]
                return False
            await s.execute(
                update(Placement)
                .where(Placement.workload_id == row.id, Placement.state.in_(list(PlacementState.OPEN)))
                .values(state=PlacementState.CANCELLED, outcome="the manager Workload was deleted", ended_at=now)
            )
            s.add(AuditEvent(at=now, workload_id=row.id, type="Cancelled", message="the manager Workload was deleted"))
        return True
