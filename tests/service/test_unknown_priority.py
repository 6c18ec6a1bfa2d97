"""A Job naming a WorkloadPriorityClass no worker has is refused at once (issue 16, item 6), on the simulator and
on the real rig: a Warning and a decision instead of copies bouncing between workers on admission timeouts; once
a worker has the class, the Job goes there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import eventually, job, start_rig, stop_rig
from realrig import RealRig

from dispatcher.kube.client import Resource
from dispatcher.store.models import WorkloadState

EVENTS = Resource("", "v1", "events", "Event")
WPCS = Resource("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass", namespaced=False)


@pytest.mark.real_rig
async def test_an_unknown_priority_class_is_refused_with_a_warning_until_a_worker_has_it(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    r = await start_rig(tmp_path, db_url, real=real_rig)
    try:
        await r.submit(job("urgent-ish", seconds=1, priority="very-urgent"))

        async def refused() -> Any:
            row = await r.row("team-a", "urgent-ish")
            summary = ((row.last_decision if row else None) or {}).get("summary") or ""
            return row if summary.startswith("no worker can ever hold this") else None

        row = await eventually(refused, timeout=30, what="the decision that no worker has the class")
        verdicts = {w["cluster"]: w["reason"] for w in row.last_decision["workers"]}
        assert all("no WorkloadPriorityClass very-urgent on the cluster" in v for v in verdicts.values()), verdicts

        async def warned() -> bool:
            items = (await r.manager.list(EVENTS, "team-a", field_selector="involvedObject.name=urgent-ish"))["items"]
            return any(e.get("reason") == "NoWorkerCanRunIt" and "very-urgent" in e["message"] for e in items)

        await eventually(warned, what="a NoWorkerCanRunIt Warning naming the class")
        assert await r.copies("team-a", "urgent-ish") == {}, "no copy was made anywhere"

        await r.workers["worker-2"].create(
            WPCS,
            None,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": "very-urgent"},
                "value": 5000,
            },
        )
        done = await r.wait_state("team-a", "urgent-ish", WorkloadState.SUCCEEDED, timeout=60)
        assert done.cluster == "worker-2" and done.generation == 1
    finally:
        try:
            await r.workers["worker-2"].delete(WPCS, None, "very-urgent")
        finally:
            await stop_rig(r)
