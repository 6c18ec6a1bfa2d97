"""A copy deleted on the worker right after it was created is placed again (issue 16, item 2), on the simulator
and on the real rig: within 30 s, with a Warning Event and a recorded reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import JOBS, eventually, job, start_rig, stop_rig
from realrig import RealRig

from dispatcher.kube.client import Resource
from dispatcher.store.models import WorkloadState

EVENTS = Resource("", "v1", "events", "Event")
Obj = dict[str, Any]


@pytest.mark.real_rig
async def test_a_copy_deleted_on_the_worker_within_seconds_of_its_creation_is_placed_again(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    r = await start_rig(tmp_path, db_url, weights={"worker-1": 10.0}, real=real_rig)
    try:
        await r.submit(job("vanishes", seconds=8))
        worker = r.workers["worker-1"]

        async def created() -> Obj | None:
            return await worker.get(JOBS, "team-a", "vanishes")

        first = await eventually(created, timeout=30, what="the copy on worker-1")
        # Deleted by someone on the worker, well inside the 5 s the dispatcher gives a fresh copy.
        await worker.delete(JOBS, "team-a", "vanishes", propagation="Background", uid=first["metadata"]["uid"])

        async def placed_again() -> Any:
            row = await r.row("team-a", "vanishes")
            ok = row is not None and row.generation >= 2 and row.state != WorkloadState.PENDING
            return row if ok else None

        row = await eventually(placed_again, timeout=30, what="vanishes placed again within 30 s")
        reasons = [e.message for e in await r.repo.recent_events(["Rejected"]) if e.workload_id == row.id]
        assert any("the copy on worker-1 disappeared" in m for m in reasons), reasons

        async def warned() -> bool:
            items = (await r.manager.list(EVENTS, "team-a", field_selector="involvedObject.name=vanishes"))["items"]
            return any(e.get("reason") == "CopyDisappeared" and e.get("type") == "Warning" for e in items)

        await eventually(warned, what="a CopyDisappeared Warning on the manager Job")
        final = await r.wait_state("team-a", "vanishes", WorkloadState.SUCCEEDED, timeout=90)
        assert final.generation == row.generation
        copies = await r.copies("team-a", "vanishes")
        assert list(copies) == [final.cluster], copies
    finally:
        await stop_rig(r)
