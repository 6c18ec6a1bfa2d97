"""The guarded bulk writes of :class:`Repo`: placement intents and failover, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import func, select

from dispatcher.store.engine import make_engine
from dispatcher.store.migrate import upgrade
from dispatcher.store.models import AuditEvent, Placement, PlacementState, Workload, WorkloadState, utcnow
from dispatcher.store.repo import NewWorkload, PlacementIntent, Repo


def _new(i: int) -> NewWorkload:
    return NewWorkload(
        uid=f"uid-{i}", namespace="team-a", name=f"job-{i}", kind="Job", api_version="batch/v1", queue="user-queue",
        priority=0, priority_class=None, pod_sets=[{"name": "main", "count": 1, "requests": {"cpu": "1"}}],
        status_mode="annotations", no_failover=False, cluster_selector=None, created_at=utcnow(),
    )  # fmt: skip


@pytest.fixture
async def repo(db_url: str) -> AsyncIterator[Repo]:
    engine = make_engine(db_url)
    await upgrade(engine)
    try:
        yield Repo(engine)
    finally:
        await engine.dispose()


def _intent(wid: int, generation: int, cluster: str) -> PlacementIntent:
    return PlacementIntent(wid, generation, cluster, "scored", 0.5, {"chosen": cluster, "summary": f"on {cluster}"})


async def test_begin_placements_claims_only_pending_workloads_at_their_generation(repo: Repo) -> None:
    rows = await repo.add_workloads([_new(i) for i in range(700)])  # more than one 500-row chunk
    ids = [r.id for r in rows]
    (taken,) = await repo.begin_placements([_intent(ids[0], 1, "worker-1")])  # no longer Pending
    intents = [_intent(wid, 1, f"worker-{wid % 3}") for wid in ids[1:]]
    intents.append(_intent(ids[0], 1, "worker-2"))
    intents[5] = _intent(ids[6], 2, "worker-1")  # a stale generation
    accepted = await repo.begin_placements(intents)

    assert {i.workload_id for i in accepted} == set(ids[1:]) - {ids[6]}
    assert len({i.placement_id for i in accepted}) == len(accepted) and taken.placement_id not in {
        i.placement_id for i in accepted
    }
    async with repo.sessions() as s:
        workloads = {w.id: w for w in (await s.execute(select(Workload))).scalars()}
        placements = {p.id: p for p in (await s.execute(select(Placement))).scalars()}
        placing_events = await s.scalar(
            select(func.count()).select_from(AuditEvent).where(AuditEvent.type == "Placing")
        )
    for intent in accepted:
        w = workloads[intent.workload_id]
        p = placements[intent.placement_id or -1]
        assert (w.state, w.cluster, w.placement_id) == (WorkloadState.PLACING, intent.cluster, p.id)
        assert w.last_decision == {"chosen": intent.cluster, "summary": f"on {intent.cluster}"}
        assert (p.workload_id, p.cluster, p.state, p.generation) == (w.id, intent.cluster, PlacementState.CREATING, 1)
    assert workloads[ids[6]].state == WorkloadState.PENDING and workloads[ids[6]].placement_id is None
    assert workloads[ids[0]].cluster == "worker-1", "a workload already placing is not claimed again"
    assert placing_events == len(accepted) + 1
    assert await repo.begin_placements([_intent(ids[1], 1, "worker-1")]) == [], "claimed once only"


async def test_fail_over_moves_and_fails_in_bulk_guarded_by_generation(repo: Repo) -> None:
    rows = await repo.add_workloads([_new(i) for i in range(600)])
    accepted = await repo.begin_placements([_intent(r.id, 1, "worker-1") for r in rows])
    moves = [(i.workload_id, 1, i.placement_id) for i in accepted[:550]]
    moves.append((accepted[550].workload_id, 7, accepted[550].placement_id))  # stale: not moved
    failures = [(i.workload_id, 1, i.placement_id) for i in accepted[551:]]
    moved, failed = await repo.fail_over(
        "worker-1", moves, failures, from_states=[WorkloadState.PLACING], move_reason="lost", fail_reason="WorkerLost"
    )
    assert moved == {i.workload_id for i in accepted[:550]}
    assert failed == {i.workload_id for i in accepted[551:]}
    async with repo.sessions() as s:
        workloads = {w.id: w for w in (await s.execute(select(Workload))).scalars()}
        lost = await s.scalar(select(func.count()).select_from(Placement).where(Placement.state == PlacementState.LOST))
    assert all(workloads[w].state == WorkloadState.PENDING and workloads[w].generation == 2 for w in moved)
    assert all(workloads[w].state == WorkloadState.FAILED and workloads[w].generation == 2 for w in failed)
    assert workloads[accepted[550].workload_id].state == WorkloadState.PLACING
    assert lost == len(moved) + len(failed)
