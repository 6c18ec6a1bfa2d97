"""Records of finished workloads are deleted after ``policy.recordRetention`` (issue 16, item 10), and a finished
manager Job whose record is gone is never dispatched again, on the simulator and on the real rig."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import eventually, job, start_rig, stop_rig
from realrig import RealRig

from dispatcher.config import Policy
from dispatcher.service import Dispatcher
from dispatcher.store.models import WorkloadState


@pytest.mark.real_rig
async def test_a_finished_record_is_deleted_after_retention_and_its_job_never_runs_again(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    policy = Policy(
        admission_timeout=60.0,
        lost_timeout=20.0,
        suspect_after=5.0,
        finished_retention=1.0,
        record_retention=2.0,
        gc_interval=1.0,
    )
    r = await start_rig(tmp_path, db_url, policy=policy, real=real_rig)
    try:
        await r.submit(job("short", seconds=1))
        done = await r.wait_state("team-a", "short", WorkloadState.SUCCEEDED, timeout=90)
        assert done.cluster is not None

        async def purged() -> bool:
            return await r.row("team-a", "short") is None

        await eventually(purged, timeout=30, what="the record of short deleted after recordRetention")
        deleted = r.dispatcher.metrics.registry.get_sample_value("kueue_dispatcher_records_deleted_total")
        assert deleted is not None and deleted >= 1
        assert await r.copies("team-a", "short") == {}, "the copy was cleaned before its record went"

        # A restarted dispatcher meets the finished manager Job again with no record of it: it must leave it.
        await r.dispatcher.stop()
        r.dispatcher = Dispatcher(r.config, r.repo, probe_interval=0.3)
        await r.dispatcher.start()
        await r.submit(job("after", seconds=1))
        await r.wait_state("team-a", "after", WorkloadState.SUCCEEDED, timeout=90)
        assert r.dispatcher.rt.intake is not None and r.dispatcher.rt.intake.ignored >= 1
        assert await r.row("team-a", "short") is None, "a finished Job was taken in again after its record went"
        copies = await r.copies("team-a", "short")
        assert copies == {}, f"a finished Job ran again: {copies}"
    finally:
        await stop_rig(r)
