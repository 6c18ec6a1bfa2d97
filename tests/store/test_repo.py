"""The guarded bulk writes of :class:`Repo`: placement intents and failover, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import func, select

from dispatcher.store.engine import make_engine
from dispatcher.store.intents import Transition
from dispatcher.store.migrate import upgrade
from dispatcher.store.models import AuditEvent, Cluster, Placement, PlacementState, Workload, WorkloadState, utcnow
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


async def test_transitions_apply_only_at_their_generation_and_state_with_their_placement_and_event(
    repo: Repo,
) -> None:
    rows = await repo.add_workloads([_new(i) for i in range(3)])
    accepted = await repo.begin_placements([_intent(r.id, 1, "worker-1") for r in rows])
    a, b, c = accepted
    async with repo.sessions() as s:
        before = (await s.execute(select(Workload.updated_at).where(Workload.id == a.workload_id))).scalar_one()
    running = {"state": WorkloadState.RUNNING, "reason": "Running"}
    ok = await repo.apply(
        [
            Transition(
                a.workload_id, 1, running, (WorkloadState.PLACING,), a.placement_id,
                {"state": PlacementState.RUNNING}, ("Running", "running on worker-1", {"n": 1}), "worker-1",
            ),
            Transition(b.workload_id, 2, running, (WorkloadState.PLACING,), b.placement_id,
                       {"state": PlacementState.RUNNING}, ("Running", "stale", None)),  # a stale generation
            Transition(c.workload_id, 1, running, (WorkloadState.PENDING,), c.placement_id,
                       {"state": PlacementState.RUNNING}, ("Running", "wrong state", None)),  # not in that state
            Transition(c.workload_id, 1, {}, event=("Note", "no change, only an event", None)),
        ]
    )  # fmt: skip
    assert ok == [True, False, False, True]
    async with repo.sessions() as s:
        workloads = {w.id: w for w in (await s.execute(select(Workload))).scalars()}
        placements = {p.id: p for p in (await s.execute(select(Placement))).scalars()}
        events = (await s.execute(select(AuditEvent).where(AuditEvent.type.in_(["Running", "Note"])))).scalars().all()
    assert workloads[a.workload_id].state == WorkloadState.RUNNING and workloads[a.workload_id].updated_at > before
    assert placements[a.placement_id or -1].state == PlacementState.RUNNING
    for other in (b, c):
        assert workloads[other.workload_id].state == WorkloadState.PLACING
        assert placements[other.placement_id or -1].state == PlacementState.CREATING
    assert sorted((e.workload_id, e.type, e.message, e.data, e.cluster) for e in events) == sorted(
        [
            (a.workload_id, "Running", "running on worker-1", {"n": 1}, "worker-1"),
            (c.workload_id, "Note", "no change, only an event", None, None),
        ]
    )


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


async def test_a_race_records_every_copy_first_and_settles_in_one_transaction(repo: Repo) -> None:
    from dispatcher.store.repo import RaceIntent

    a, b = await repo.add_workloads([_new(1), _new(2)])
    intents = [
        RaceIntent(a.id, 1, "allAtOnce", ["worker-1", "worker-2", "worker-3"], {"summary": "race a"}),
        RaceIntent(b.id, 2, "allAtOnce", ["worker-1"], {"summary": "stale generation"}),
    ]
    (accepted,) = await repo.begin_races(intents)
    assert accepted.workload_id == a.id and set(accepted.placement_ids) == {"worker-1", "worker-2", "worker-3"}
    row = await repo.get_by_id(a.id)
    assert row is not None and (row.state, row.cluster, row.placement_id) == (WorkloadState.PLACING, None, None)
    assert {p.cluster: p.state for p in row.placements} == dict.fromkeys(
        accepted.placement_ids, PlacementState.CREATING
    )
    assert {p.strategy for p in row.placements} == {"allAtOnce"}

    more = RaceIntent(a.id, 1, "incremental", ["worker-4"], {})
    assert await repo.extend_race(more) and set(more.placement_ids) == {"worker-4"}
    assert not await repo.extend_race(RaceIntent(a.id, 7, "incremental", ["worker-5"], {})), "stale generation"

    pids = {**accepted.placement_ids, **more.placement_ids}
    await repo.close_placements([pids["worker-4"]], state=PlacementState.REJECTED, outcome="refused")
    losers = [(pids[c], f"uid-{c}") for c in ("worker-1", "worker-3", "worker-4")]
    settle = {
        "winner": "worker-2",
        "winner_placement": pids["worker-2"],
        "winner_uid": "uid-worker-2",
        "losers": losers,
        "decision": {"winner": "worker-2"},
        "message": "worker-2 won",
    }
    assert await repo.settle_race(a.id, 1, **settle)  # type: ignore[arg-type]
    assert not await repo.settle_race(a.id, 1, **settle), "a race is settled once"  # type: ignore[arg-type]
    row = await repo.get_by_id(a.id)
    assert row is not None and (row.state, row.cluster, row.placement_id) == (
        WorkloadState.PLACED, "worker-2", pids["worker-2"]
    )  # fmt: skip
    assert row.last_decision == {"winner": "worker-2"}
    states = {p.cluster: (p.state, p.remote_uid) for p in row.placements}
    assert states == {
        "worker-1": (PlacementState.SUPERSEDED, "uid-worker-1"),
        "worker-2": (PlacementState.CREATED, "uid-worker-2"),
        "worker-3": (PlacementState.SUPERSEDED, "uid-worker-3"),
        "worker-4": (PlacementState.REJECTED, None),  # closed first: the first close wins
    }
    opened = {p.id for p in await repo.open_placements()}
    assert opened == {pids["worker-2"]}


async def test_a_takeover_ends_a_frozen_replica_mid_statement_and_spares_other_sessions(pg_url: str) -> None:
    """A replica frozen between asyncpg's prepare (Parse, Describe, Flush: no Sync) and its execute holds the
    fencing row FOR SHARE in a session the server keeps "active" forever (no idle timeout applies): the next
    leader's term bump ends it instead of waiting for it. Sessions of anything else are left alone."""
    import asyncio

    import asyncpg
    from sqlalchemy.engine import make_url

    from dispatcher.store.repo import REPLICA_APPLICATION_NAME

    raw_url = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    replica = {"server_settings": {"application_name": REPLICA_APPLICATION_NAME}}
    engine = make_engine(pg_url, connect_args=replica)
    await upgrade(engine)
    frozen = await asyncpg.connect(raw_url, **replica)
    bystander = await asyncpg.connect(raw_url, server_settings={"application_name": "an operator's psql"})
    try:
        repo = Repo(engine)
        term = await repo.take_term("old")
        await frozen.execute("BEGIN")
        assert await frozen.fetchval("SELECT term FROM leadership WHERE id = 1 FOR SHARE") == term
        await frozen.prepare("INSERT INTO events (at, type, message) VALUES (now(), 'X', $1)")  # and it stops here
        await bystander.execute("BEGIN")
        await bystander.execute(
            "INSERT INTO clusters (name, health, cordoned, epoch, updated_at)"
            " VALUES ('other', 'Ready', false, 0, now())"
        )
        state = await bystander.fetchval("SELECT state FROM pg_stat_activity WHERE pid = $1", frozen.get_server_pid())
        assert state == "active"

        async with asyncio.timeout(10):
            assert await repo.take_term("new") == term + 1
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError, OSError)):
            await frozen.fetchval("SELECT 1")
        assert await bystander.fetchval("SELECT count(*) FROM clusters WHERE name = 'other'") == 1
        await bystander.execute("ROLLBACK")
        now_term, holder, _ = await repo.leadership()
        assert (now_term, holder) == (term + 1, "new")
    finally:
        frozen.terminate()
        await bystander.close()
        await engine.dispose()


async def test_purge_finished_deletes_only_old_finished_and_cleaned_records_in_batches(repo: Repo) -> None:
    from datetime import timedelta

    now = utcnow()
    old, recent = now - timedelta(days=8), now - timedelta(hours=1)
    rows = await repo.add_workloads([_new(i) for i in range(8)])
    accepted = await repo.begin_placements([_intent(r.id, 1, "worker-1") for r in rows])
    assert len(accepted) == 8
    # (state, finished_at, cleaned_at) per workload; only the first three may go.
    shapes = [
        (WorkloadState.SUCCEEDED, old, old),
        (WorkloadState.FAILED, old, old),
        (WorkloadState.CANCELLED, old, recent),
        (WorkloadState.SUCCEEDED, recent, recent),  # finished recently
        (WorkloadState.SUCCEEDED, old, None),  # its copy is not cleaned yet
        (WorkloadState.RUNNING, old, None),  # not finished (a stale finished_at must not matter)
        (WorkloadState.PENDING, None, None),
        (WorkloadState.FAILED, None, old),  # no finish time: kept
    ]
    async with repo.sessions.begin() as s:
        for row, (state, finished, cleaned) in zip(rows, shapes, strict=True):
            w = await s.get(Workload, row.id)
            assert w is not None
            w.state, w.finished_at, w.cleaned_at = state, finished, cleaned
            s.add(AuditEvent(workload_id=row.id, type="Note", message=f"event of {row.name}"))
    cutoff = now - timedelta(days=7)
    assert await repo.purge_finished(cutoff, batch=2) == 2
    assert await repo.purge_finished(cutoff, batch=2) == 1
    assert await repo.purge_finished(cutoff, batch=2) == 0
    async with repo.sessions() as s:
        left = sorted((await s.scalars(select(Workload.name))).all())
        placements = set((await s.scalars(select(Placement.workload_id))).all())
        events = set((await s.scalars(select(AuditEvent.workload_id))).all())
    kept = {r.id for r in rows[3:]}
    assert left == sorted(r.name for r in rows[3:])
    assert placements == kept and kept <= events and not events & {r.id for r in rows[:3]}


async def test_record_health_keeps_a_history_of_changes_only(repo: Repo) -> None:
    await repo.ensure_clusters(["worker-1"])
    assert await repo.record_health("worker-1", "Ready")
    assert not await repo.record_health("worker-1", "Ready"), "the same health twice is one change"
    assert await repo.record_health("worker-1", "NotReady", "Unauthorized: the worker refused the credentials")
    async with repo.sessions() as s:
        messages = list(
            await s.scalars(select(AuditEvent.message).where(AuditEvent.type == "WorkerHealth").order_by(AuditEvent.id))
        )
        (cluster,) = (await s.scalars(select(Cluster))).all()
    assert messages == ["Unknown -> Ready", "Ready -> NotReady: Unauthorized: the worker refused the credentials"]
    assert cluster.health == "NotReady" and cluster.health_since is not None


async def test_workload_counts_group_by_queue_namespace_and_worker(repo: Repo) -> None:
    batch = [_new(i) for i in range(5)]
    batch += [dataclasses.replace(_new(10 + i), namespace="team-b", queue="gpu-queue") for i in range(3)]
    batch.append(dataclasses.replace(_new(20), namespace="team-b", queue="user-queue"))
    rows = await repo.add_workloads(batch)
    a0, a1, b0 = rows[0].id, rows[1].id, rows[5].id
    placed = await repo.begin_placements(
        [_intent(a0, 1, "worker-1"), _intent(a1, 1, "worker-2"), _intent(b0, 1, "worker-1")]
    )
    assert len(placed) == 3
    _, failed = await repo.fail_over(
        "worker-2",
        [],
        [(a1, 1, placed[1].placement_id)],
        from_states=[WorkloadState.PLACING],
        move_reason="moved",
        fail_reason="worker-2 was lost and the workload may not fail over",
    )
    assert failed == {a1}
    counts = await repo.workload_counts()
    assert counts.queues == {
        ("team-a", "user-queue"): {"Pending": 3, "Placing": 1, "Failed": 1},
        ("team-b", "gpu-queue"): {"Pending": 2, "Placing": 1},
        ("team-b", "user-queue"): {"Pending": 1},
    }
    assert counts.namespaces() == {
        "team-a": {"Pending": 3, "Placing": 1, "Failed": 1},
        "team-b": {"Pending": 3, "Placing": 1},
    }
    assert counts.clusters == {"worker-1": {"Placing": 2}, "worker-2": {"Failed": 1}}


async def test_recent_events_filter_by_type_workload_and_worker(repo: Repo) -> None:
    await repo.ensure_clusters(["worker-1", "worker-2"])
    (w,) = await repo.add_workloads([_new(0)])
    await repo.begin_placements([_intent(w.id, 1, "worker-1")])
    await repo.record_health("worker-1", "Ready")
    await repo.record_health("worker-2", "Ready")
    await repo.record_health("worker-2", "Lost")
    assert [e.type for e in await repo.recent_events(None, workload_id=w.id)] == ["Placing", "Submitted"]
    history = await repo.recent_events(["WorkerHealth"], cluster="worker-2")
    assert [e.message for e in history] == ["Ready -> Lost", "Unknown -> Ready"]
    assert [e.type for e in await repo.recent_events(None, cluster="worker-1")] == ["WorkerHealth", "Placing"]
    assert [e.type for e in await repo.recent_events(["Placing"], 5, workload_id=w.id, cluster="worker-2")] == []
    assert len(await repo.recent_events(None, 2)) == 2


async def test_updates_of_one_placement_in_a_batch_land_in_the_batchs_order_whatever_their_columns(
    repo: Repo,
) -> None:
    """The placements' updates go in as one executemany per run of equal columns: a placement updated three times
    in one batch, with other columns in the middle, ends as the last update says, as one statement each did."""
    rows = await repo.add_workloads([_new(i) for i in range(2)])
    a, b = await repo.begin_placements([_intent(r.id, 1, "worker-1") for r in rows])
    assert a.placement_id is not None and b.placement_id is not None
    admitted = {"state": WorkloadState.ADMITTED}
    running = {"state": WorkloadState.RUNNING}
    done = {"state": WorkloadState.SUCCEEDED}
    ok = await repo.apply(
        [
            Transition(a.workload_id, 1, admitted, (WorkloadState.PLACING,), a.placement_id,
                       {"state": PlacementState.ADMITTED}),
            Transition(b.workload_id, 1, admitted, (WorkloadState.PLACING,), b.placement_id,
                       {"state": PlacementState.ADMITTED}),
            Transition(a.workload_id, 1, running, (WorkloadState.ADMITTED,), a.placement_id,
                       {"state": PlacementState.RUNNING, "outcome": "started"}),
            Transition(a.workload_id, 1, done, (WorkloadState.RUNNING,), a.placement_id,
                       {"state": PlacementState.SUCCEEDED}),
            Transition(b.workload_id, 1, done, (WorkloadState.RUNNING,), b.placement_id,  # b is not Running: refused
                       {"state": PlacementState.SUCCEEDED}),
        ]
    )  # fmt: skip
    assert ok == [True, True, True, True, False]
    async with repo.sessions() as s:
        placements = {p.id: p for p in (await s.execute(select(Placement))).scalars()}
        workloads = {w.id: w for w in (await s.execute(select(Workload))).scalars()}
    pa, pb = placements[a.placement_id], placements[b.placement_id]
    assert (pa.state, pa.outcome) == (PlacementState.SUCCEEDED, "started")
    assert (pb.state, pb.outcome) == (PlacementState.ADMITTED, None), "a refused transition leaves its placement"
    assert workloads[a.workload_id].state == WorkloadState.SUCCEEDED
    assert workloads[b.workload_id].state == WorkloadState.ADMITTED
