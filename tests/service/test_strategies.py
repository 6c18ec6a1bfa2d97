"""MultiKueue's dispatch strategies as options: allAtOnce and incremental, end to end on the simulated clusters."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness import Rig, eventually, job, start_rig, stop_rig

from dispatcher.capacity import kueue_resource
from dispatcher.config import Policy
from dispatcher.explain import explain
from dispatcher.kube.client import Resource
from dispatcher.kube.informer import Informer
from dispatcher.store.models import PlacementState, WorkloadState

PODS = Resource("", "v1", "pods", "Pod")
CQS = kueue_resource("clusterqueues", "v1beta2")
WORKLOADS = kueue_resource("workloads", "v1beta2")
Obj = dict[str, Any]


def _policy(strategy: str, **extra: Any) -> Policy:
    return Policy(
        strategy=strategy,
        admission_timeout=60.0,
        lost_timeout=20.0,
        suspect_after=5.0,
        finished_retention=600.0,
        gc_interval=0.5,
        **extra,
    )


async def _pods(rig: Rig, worker: str, job_name: str) -> list[Obj]:
    items = (await rig.workers[worker].list(PODS, "team-a"))["items"]
    return [p for p in items if (p["metadata"].get("labels") or {}).get("job-name") == job_name]


async def _hold(rig: Rig, worker: str, hold: bool) -> None:
    await rig.workers[worker].patch(CQS, None, "team-a", {"spec": {"stopPolicy": "Hold" if hold else "None"}})


async def test_all_at_once_both_admit_exactly_one_copy_survives_and_runs(tmp_path: Path, db_url: str) -> None:
    rig = await start_rig(tmp_path, db_url, workers=2, gpu_workers=0, policy=_policy("allAtOnce"))
    started: dict[str, set[str]] = {"worker-1": set(), "worker-2": set()}

    def watch(worker: str) -> Any:
        def on_pod(kind: str, pod: Obj, _old: Obj | None) -> None:
            labels = pod["metadata"].get("labels") or {}
            if labels.get("job-name") == "race" and (pod.get("status") or {}).get("phase") in ("Running", "Succeeded"):
                started[worker].add(pod["metadata"]["uid"])

        return on_pod

    informers = [Informer(rig.workers[w], PODS, watch(w), namespace="team-a") for w in started]
    for inf in informers:
        inf.start()
    try:
        for inf in informers:
            async with asyncio.timeout(10):
                await inf.synced.wait()
        await rig.submit(job("race", seconds=2))
        row = await rig.wait_state("team-a", "race", WorkloadState.RUNNING, WorkloadState.SUCCEEDED, timeout=30)
        assert row.cluster in ("worker-1", "worker-2")
        loser = "worker-2" if row.cluster == "worker-1" else "worker-1"
        by_cluster = {p.cluster: p for p in row.placements}
        assert set(by_cluster) == {"worker-1", "worker-2"}, "a copy on every eligible worker"
        assert all(p.strategy == "allAtOnce" for p in row.placements)
        assert by_cluster[loser].state == PlacementState.SUPERSEDED
        assert by_cluster[row.cluster].id == row.placement_id

        async def loser_gone() -> bool:
            return loser not in await rig.copies("team-a", "race")

        await eventually(loser_gone, timeout=15, what="the losing copy deleted")
        copies = await rig.copies("team-a", "race")
        assert list(copies) == [row.cluster], "exactly one copy survives"
        await rig.wait_state("team-a", "race", WorkloadState.SUCCEEDED, timeout=30)
        assert len(await _pods(rig, row.cluster, "race")) == 1, "the winner ran"
        text = await explain(rig.repo, "team-a", "race")
        assert text is not None
        assert "Strategy allAtOnce: copies on worker-1, worker-2" in text
        assert f"Winner: {row.cluster}" in text
        assert rig.dispatcher.rt.copies_created == 2 and rig.dispatcher.rt.copies_deleted >= 1
        assert len(started[row.cluster]) == 1 and started[loser] == set(), "a pod started only on the winner"
    finally:
        for inf in informers:
            await inf.stop()
        await stop_rig(rig)


async def test_all_at_once_a_late_admission_on_the_loser_never_starts_a_pod(tmp_path: Path, db_url: str) -> None:
    rig = await start_rig(tmp_path, db_url, workers=2, gpu_workers=0, policy=_policy("allAtOnce"))
    try:
        # worker-2's queue holds admissions: its copy waits there while worker-1's Kueue admits and wins.
        await _hold(rig, "worker-2", True)
        await rig.submit(job("late", seconds=3))
        row = await rig.wait_state("team-a", "late", WorkloadState.RUNNING, WorkloadState.SUCCEEDED, timeout=30)
        assert row.cluster == "worker-1"
        assert {p.cluster: p.state for p in row.placements}["worker-2"] == PlacementState.SUPERSEDED

        async def loser_gone() -> bool:
            return "worker-2" not in await rig.copies("team-a", "late")

        await eventually(loser_gone, timeout=15, what="worker-2's losing copy deleted")
        # The loser's queue admits again: nothing of this job may start there (its copy is gone for good).
        await _hold(rig, "worker-2", False)
        await rig.submit(job("probe", seconds=0.5))  # a later job proves worker-2's queue admits again
        await rig.wait_state("team-a", "late", WorkloadState.SUCCEEDED, timeout=30)
        await rig.wait_state("team-a", "probe", WorkloadState.SUCCEEDED, timeout=30)
        assert await _pods(rig, "worker-2", "late") == []
        wls = (await rig.workers["worker-2"].list(WORKLOADS, "team-a"))["items"]
        assert not [w for w in wls if "late" in w["metadata"]["name"]]
        assert rig.dispatcher.races.by_workload == {}
    finally:
        await stop_rig(rig)


async def test_incremental_nominates_in_rounds(tmp_path: Path, db_url: str) -> None:
    policy = _policy("incremental", incremental_round=1, incremental_interval=1.5)
    rig = await start_rig(tmp_path, db_url, workers=3, gpu_workers=0, policy=policy)
    try:
        # worker-1 (first by name, nominated first) cannot admit: its copy waits; worker-2 can.
        await _hold(rig, "worker-1", True)
        await _hold(rig, "worker-3", True)
        await rig.submit(job("rounds", seconds=1))

        async def first_round() -> Obj | None:
            row = await rig.row("team-a", "rounds")
            return {"row": row} if row is not None and row.placements else None

        first = (await eventually(first_round, timeout=15, what="the first round's placement"))["row"]
        assert [p.cluster for p in first.placements] == ["worker-1"], "round one: only the nominated worker"
        assert list(await rig.copies("team-a", "rounds")) == ["worker-1"]
        row = await rig.wait_state("team-a", "rounds", WorkloadState.RUNNING, WorkloadState.SUCCEEDED, timeout=30)
        assert row.cluster == "worker-2"
        states = {p.cluster: p.state for p in row.placements}
        assert set(states) == {"worker-1", "worker-2"}, "round two added worker-2 only; worker-3 never nominated"
        assert states["worker-1"] == PlacementState.SUPERSEDED
        created = sorted(row.placements, key=lambda p: p.id)
        assert (created[1].created_at - created[0].created_at).total_seconds() >= 1.0, "after the round time"

        async def loser_gone() -> bool:
            return "worker-1" not in await rig.copies("team-a", "rounds")

        await eventually(loser_gone, timeout=15, what="worker-1's copy deleted")
        assert "worker-3" not in await rig.copies("team-a", "rounds")
        text = await explain(rig.repo, "team-a", "rounds")
        assert text is not None and "Strategy incremental: copies on worker-1, worker-2" in text
    finally:
        await stop_rig(rig)


async def test_a_restart_mid_race_resumes_it(tmp_path: Path, db_url: str) -> None:
    from dispatcher.service import Dispatcher

    rig = await start_rig(tmp_path, db_url, workers=2, gpu_workers=0, policy=_policy("allAtOnce"))
    try:
        await _hold(rig, "worker-1", True)
        await _hold(rig, "worker-2", True)
        await rig.submit(job("resume", seconds=1))

        async def two_copies() -> bool:
            return len(await rig.copies("team-a", "resume")) == 2

        await eventually(two_copies, timeout=15, what="copies on both workers")
        await rig.dispatcher.stop()
        rig.dispatcher = Dispatcher(replace(rig.config), rig.repo, probe_interval=0.3)
        await rig.dispatcher.start()
        await asyncio.sleep(0)
        assert rig.dispatcher.races.by_workload, "the race was rebuilt from SQL"
        await _hold(rig, "worker-2", False)
        row = await rig.wait_state("team-a", "resume", WorkloadState.SUCCEEDED, timeout=30)
        assert row.cluster == "worker-2"

        async def one_copy() -> bool:
            return list(await rig.copies("team-a", "resume")) == ["worker-2"]

        await eventually(one_copy, timeout=15, what="worker-1's copy deleted after the restart")
    finally:
        await stop_rig(rig)


async def test_deleting_the_manager_job_mid_race_deletes_every_copy(tmp_path: Path, db_url: str) -> None:
    from harness import JOBS

    rig = await start_rig(tmp_path, db_url, workers=2, gpu_workers=0, policy=_policy("allAtOnce"))
    try:
        await _hold(rig, "worker-1", True)
        await _hold(rig, "worker-2", True)
        await rig.submit(job("gone", seconds=1))

        async def two_copies() -> bool:
            return len(await rig.copies("team-a", "gone")) == 2

        await eventually(two_copies, timeout=15, what="copies on both workers")
        await rig.manager.delete(JOBS, "team-a", "gone")
        row = await rig.wait_state("team-a", "gone", WorkloadState.CANCELLED, timeout=20)
        assert {p.state for p in row.placements} == {PlacementState.CANCELLED}

        async def no_copies() -> bool:
            return not await rig.copies("team-a", "gone")

        await eventually(no_copies, timeout=15, what="every copy deleted")
        assert rig.dispatcher.races.by_workload == {}
    finally:
        await stop_rig(rig)
