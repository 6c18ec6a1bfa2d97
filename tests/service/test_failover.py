"""Failover and fencing on the simulated clusters (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import JOBS, Rig, eventually, job, start_rig, stop_rig
from realrig import RealRig

from dispatcher import labels as L
from dispatcher.config import Policy
from dispatcher.health import HealthState
from dispatcher.kube.client import Resource
from dispatcher.store.models import PlacementState, WorkloadState

EVENTS = Resource("", "v1", "events", "Event")
Obj = dict[str, Any]
FAST = Policy(admission_timeout=60.0, lost_timeout=2.0, suspect_after=1.0, finished_retention=600.0, gc_interval=5.0)


async def _reasons(rig: Rig, name: str) -> set[str]:
    data = await rig.manager.list(EVENTS, "team-a", field_selector=f"involvedObject.name={name}")
    return {e.get("reason", "") for e in data.get("items") or []}


async def _moved(rig: Rig, name: str, timeout: float = 30.0) -> Any:
    async def probe() -> Any:
        row = await rig.row("team-a", name)
        ok = row is not None and row.generation >= 2 and row.state in (WorkloadState.RUNNING, WorkloadState.SUCCEEDED)
        return row if ok else None

    return await eventually(probe, timeout=timeout, what=f"{name} running again at a new generation")


async def _health(rig: Rig, worker: str, state: str, timeout: float = 20.0) -> None:
    async def probe() -> bool:
        return rig.dispatcher.capacities[worker].health == state

    await eventually(probe, timeout=timeout, what=f"{worker} {state}")


@pytest.mark.real_rig
async def test_lost_worker_fails_over_and_is_fenced_when_it_returns(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    r = await start_rig(tmp_path, db_url, policy=FAST, weights={"worker-1": 10.0}, real=real_rig)
    try:
        await r.submit(job("moves", seconds=15))  # runs again in full once moved: the test waits for that
        await r.submit(job("once", seconds=30, annotations={L.NO_FAILOVER: "true"}))
        await r.submit(job("managed-once", seconds=30, managed=True, annotations={L.NO_FAILOVER: "true"}))
        for name in ("moves", "once", "managed-once"):
            row = await r.wait_state("team-a", name, WorkloadState.RUNNING)
            assert row.cluster == "worker-1"

        await r.fault("worker-1", "stop")
        await _health(r, "worker-1", HealthState.LOST)

        moved = await _moved(r, "moves")
        assert moved.cluster in ("worker-2", "worker-3") and moved.generation == 2
        lost = [p for p in moved.placements if p.state == PlacementState.LOST]
        assert len(lost) == 1 and lost[0].cluster == "worker-1" and lost[0].generation == 1

        once = await r.wait_state("team-a", "once", WorkloadState.FAILED)
        assert once.reason and once.reason.startswith("WorkerLost") and len(once.placements) == 1
        assert "FailedOver" in await _reasons(r, "moves")
        assert "WorkerLost" in await _reasons(r, "once")

        async def managed_failed() -> Obj | None:
            obj = await r.manager.get(JOBS, "team-a", "managed-once")
            conds = {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}
            return obj if conds.get("Failed", {}).get("reason") == "WorkerLost" else None

        await eventually(managed_failed, what="the managed manager Job Failed with reason WorkerLost")

        # The worker returns: its stale copies (generation 1 of "moves", the no-failover ones) go first.
        await r.fault("worker-1", "none")
        await _health(r, "worker-1", HealthState.READY)
        for name in ("moves", "once", "managed-once"):
            assert await r.workers["worker-1"].get(JOBS, "team-a", name) is None, f"{name} fenced on worker-1"
        events = await r.repo.recent_events(["Fenced"])
        assert len(events) == 3

        final = await r.wait_state("team-a", "moves", WorkloadState.SUCCEEDED, timeout=60)
        assert final.generation == 2 and final.cluster == moved.cluster
        assert (await r.row("team-a", "once")).state == WorkloadState.FAILED  # type: ignore[union-attr]
    finally:
        await stop_rig(r)


@pytest.mark.real_rig
async def test_a_partitioned_worker_is_detected_like_a_dead_one(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    r = await start_rig(tmp_path, db_url, policy=FAST, weights={"worker-2": 10.0}, real=real_rig)
    try:
        await r.submit(job("across", seconds=30))
        row = await r.wait_state("team-a", "across", WorkloadState.RUNNING)
        assert row.cluster == "worker-2"
        await r.fault("worker-2", "partition")  # accepts connections, never answers
        await _health(r, "worker-2", HealthState.LOST, timeout=30)
        moved = await _moved(r, "across")
        assert moved.cluster != "worker-2" and moved.generation == 2
        await r.fault("worker-2", "none")
        await _health(r, "worker-2", HealthState.READY, timeout=30)
        assert await r.workers["worker-2"].get(JOBS, "team-a", "across") is None
    finally:
        await stop_rig(r)  # returns: no task is left hanging on the partitioned worker


async def test_cordon_and_drain_move_work_off_a_worker(tmp_path: Path, db_url: str) -> None:
    r = await start_rig(tmp_path, db_url, weights={"worker-1": 10.0})
    try:
        await r.submit(job("resident", seconds=60))
        row = await r.wait_state("team-a", "resident", WorkloadState.RUNNING)
        assert row.cluster == "worker-1"
        await r.dispatcher.cordon("worker-1")
        await r.submit(job("newcomer", seconds=1))
        newcomer = await r.wait_state("team-a", "newcomer", WorkloadState.SUCCEEDED)
        assert newcomer.cluster != "worker-1"
        verdicts = {w["cluster"]: w for w in (newcomer.last_decision or {})["workers"]}
        assert "cordoned" in verdicts["worker-1"]["reason"]
        assert (await r.row("team-a", "resident")).cluster == "worker-1"  # type: ignore[union-attr]

        assert await r.dispatcher.drain("worker-1", running=False) == 0  # nothing waiting there
        assert await r.dispatcher.drain("worker-1", running=True) == 1
        moved = await _moved(r, "resident")
        assert moved.cluster != "worker-1"
        assert min(moved.placements, key=lambda p: p.id).state == PlacementState.DRAINED
        assert await r.workers["worker-1"].get(JOBS, "team-a", "resident") is None
        clusters = {c.name: c for c in await r.repo.clusters()}
        assert clusters["worker-1"].cordoned

        await r.dispatcher.cordon("worker-1", False)
        await r.submit(job("welcome-back", seconds=1))
        back = await r.wait_state("team-a", "welcome-back", WorkloadState.SUCCEEDED)
        assert back.cluster == "worker-1"
    finally:
        await stop_rig(r)
