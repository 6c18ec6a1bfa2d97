"""A priority-class change on the manager object reaches the copy within 15 s (issue 16, item 4), on the simulator
and on the real rig, and the worker's Kueue re-prioritises the copy's Workload with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import JOBS, eventually, job, start_rig, stop_rig
from realrig import RealRig

from dispatcher import labels as L
from dispatcher.kube.client import Resource
from dispatcher.store.models import WorkloadState

WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
Obj = dict[str, Any]


@pytest.mark.real_rig
async def test_a_priority_class_change_on_the_manager_job_reaches_the_copy_and_its_workload(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    r = await start_rig(tmp_path, db_url, real=real_rig)
    try:
        await r.submit(job("reprioritised", seconds=60, priority="low"))
        row = await r.wait_state("team-a", "reprioritised", WorkloadState.RUNNING, timeout=60)
        worker = r.workers[row.cluster or ""]
        await r.manager.patch(JOBS, "team-a", "reprioritised", {"metadata": {"labels": {L.PRIORITY_CLASS: "high"}}})

        async def copy_followed() -> Obj | None:
            copy = await worker.get(JOBS, "team-a", "reprioritised")
            return copy if (copy or {}).get("metadata", {}).get("labels", {}).get(L.PRIORITY_CLASS) == "high" else None

        copy = await eventually(copy_followed, timeout=15, what="the copy's priority class high within 15 s")

        async def reprioritised() -> Obj | None:
            for wl in (await worker.list(WORKLOADS, "team-a"))["items"]:
                owners = [ref.get("uid") for ref in wl["metadata"].get("ownerReferences") or []]
                if copy["metadata"]["uid"] in owners and wl["spec"].get("priority") == 1000:
                    return dict(wl)
            return None

        await eventually(reprioritised, timeout=15, what="the worker's Workload at priority 1000")

        async def recorded() -> Any:
            row = await r.row("team-a", "reprioritised")
            return row if row is not None and row.priority == 1000 and row.priority_class == "high" else None

        final = await eventually(recorded, timeout=15, what="the new priority recorded in SQL")
        assert final.state == WorkloadState.RUNNING and final.generation == row.generation, "not restarted"
    finally:
        await stop_rig(r)
