"""Jobs that no worker can ever hold are told so (issue 16, item 5), on the simulator and on the real rig: every
such Job (not only the first of its shape) gets a Warning Event and a decision "no worker can ever hold this",
distinct from waiting for capacity, and it is decided again when the workers' quotas change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import Rig, eventually, job, start_rig, stop_rig
from realrig import RealRig

from dispatcher.kube.client import Resource
from dispatcher.store.models import WorkloadState

EVENTS = Resource("", "v1", "events", "Event")
CQS = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
Obj = dict[str, Any]


async def _warning(r: Rig, name: str) -> Obj:
    async def probe() -> Obj | None:
        items = (await r.manager.list(EVENTS, "team-a", field_selector=f"involvedObject.name={name}"))["items"]
        return next((e for e in items if e.get("reason") == "NoWorkerCanRunIt"), None)

    return await eventually(probe, timeout=30, what=f"a NoWorkerCanRunIt Warning on {name}")


async def _decided_never(r: Rig, name: str) -> Any:
    async def probe() -> Any:
        row = await r.row("team-a", name)
        summary = ((row.last_decision if row else None) or {}).get("summary") or ""
        return row if summary.startswith("no worker can ever hold this: ") else None

    return await eventually(probe, timeout=30, what=f"{name}'s decision: no worker can ever hold it")


async def _set_cpu_quota(r: Rig, worker: str, cq: str, value: str) -> None:
    obj = await r.workers[worker].get(CQS, None, cq)
    assert obj is not None
    groups = obj["spec"]["resourceGroups"]
    for res in groups[0]["flavors"][0]["resources"]:
        if res["name"] == "cpu":
            res["nominalQuota"] = value
    await r.workers[worker].patch(CQS, None, cq, {"spec": {"resourceGroups": groups}})


@pytest.mark.real_rig
async def test_jobs_no_worker_can_ever_hold_are_warned_each_and_placed_once_a_quota_grows(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    r = await start_rig(tmp_path, db_url, real=real_rig)
    try:
        # 10 pods of 5 CPUs: 50 CPUs; every worker's cohort holds 24.
        for name in ("too-big-1", "too-big-2"):
            await r.submit(job(name, cpu="5", parallelism=10, seconds=1))
        # 9 vGPUs in one pod: the GPU nodes have 4 GPUs each (HAMi gives a container one slot per GPU).
        await r.submit(job("nine-gpus", cpu="1", limits={"nvidia.com/gpu": "9"}, seconds=1))

        for name in ("too-big-1", "too-big-2"):
            row = await _decided_never(r, name)
            verdicts = {w["cluster"]: w["reason"] for w in row.last_decision["workers"]}
            assert "can never admit pod set main: it asks for 50 cpu" in verdicts["worker-1"], verdicts
            assert "no flavor could ever hold more than 24" in verdicts["worker-1"], verdicts
            assert row.state == WorkloadState.PENDING
            warning = await _warning(r, name)
            assert warning["type"] == "Warning" and "no worker can ever hold this" in warning["message"]
        gpu = await _decided_never(r, "nine-gpus")
        verdicts = {w["cluster"]: w["reason"] for w in gpu.last_decision["workers"]}
        assert "never: not even with every GPU free" in verdicts["worker-3"], verdicts
        await _warning(r, "nine-gpus")

        # A quota grows: decided again, and placed.
        await _set_cpu_quota(r, "worker-1", "team-a", "60")
        placed = await r.wait_state(
            "team-a",
            "too-big-1",
            WorkloadState.PLACED,
            WorkloadState.ADMITTED,
            WorkloadState.RUNNING,
            WorkloadState.SUCCEEDED,
            timeout=30,
        )
        assert placed.cluster == "worker-1"
    finally:
        try:
            await _set_cpu_quota(r, "worker-1", "team-a", "8")
        finally:
            await stop_rig(r)
