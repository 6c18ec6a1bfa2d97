"""An eviction by a worker's Kueue is acted on at once (issue 16, item 3), on the simulator and on the real rig:
a copy preempted on its worker is placed again within 90 s (MultiKueue redoes admission on an eviction in a
worker), and the eviction's reason is recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import JOBS, eventually, job, start_rig, stop_rig
from realrig import RealRig

from dispatcher.config import Policy
from dispatcher.kube.client import Resource
from dispatcher.store.models import WorkloadState

EVENTS = Resource("", "v1", "events", "Event")
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")


@pytest.mark.real_rig
async def test_a_copy_preempted_on_its_worker_is_placed_again_with_the_eviction_reason(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    # The admission timeout is far away: only the eviction itself can move the workload in time.
    policy = Policy(admission_timeout=600.0, lost_timeout=20.0, suspect_after=5.0, gc_interval=1.0)
    r = await start_rig(tmp_path, db_url, policy=policy, weights={"worker-1": 10.0}, real=real_rig)
    try:
        await r.submit(job("victim", cpu="6", seconds=120, priority="low"))
        await r.wait_state("team-a", "victim", WorkloadState.ADMITTED, WorkloadState.RUNNING, timeout=60)
        assert (await r.row("team-a", "victim")).cluster == "worker-1"  # type: ignore[union-attr]
        # People on worker-1 fill the cohort's other ClusterQueues (8 CPUs each, nothing left to borrow), then
        # submit urgent work to the copy's ClusterQueue: 4 CPUs, 2 free in its nominal 8. Its Kueue preempts
        # the lower-priority copy (withinClusterQueue: LowerPriority).
        w1 = r.workers["worker-1"]
        await w1.create(JOBS, "default", job("filler-default", namespace="default", cpu="8", seconds=120))
        await w1.create(JOBS, "team-b", job("filler-b", namespace="team-b", cpu="8", seconds=120))

        async def fillers_admitted() -> bool | None:
            # Before the urgent job: had it come first, it would borrow, and a filler would then reclaim its quota
            # by preempting in the cohort (InCohortReclamation), another eviction than the one tested here.
            admitted = 0
            for ns in ("default", "team-b"):
                for wl in (await w1.list(WORKLOADS, ns)).get("items") or []:
                    conds = (wl.get("status") or {}).get("conditions") or []
                    admitted += any(c.get("type") == "QuotaReserved" and c.get("status") == "True" for c in conds)
            return True if admitted == 2 else None

        await eventually(fillers_admitted, timeout=60, what="both fillers admitted on worker-1")
        await w1.create(JOBS, "team-a", job("urgent", cpu="4", seconds=120, priority="high"))

        async def moved() -> Any:
            row = await r.row("team-a", "victim")
            return row if row is not None and row.generation >= 2 and row.cluster not in (None, "worker-1") else None

        row = await eventually(moved, timeout=90, what="the preempted copy placed again")
        reasons = [e.message for e in await r.repo.recent_events(["Rejected"]) if e.workload_id == row.id]
        assert any("evicted on worker-1 by its Kueue (Preempted" in m for m in reasons), reasons
        assert await r.workers["worker-1"].get(JOBS, "team-a", "victim") is None, "the evicted copy is deleted"

        async def warned() -> bool:
            items = (await r.manager.list(EVENTS, "team-a", field_selector="involvedObject.name=victim"))["items"]
            return any(e.get("reason") == "Evicted" and "Preempted" in e.get("message", "") for e in items)

        await eventually(warned, what="an Evicted Warning naming the preemption on the manager Job")
        # Counted as Kueue counts it, under Kueue's names: evicted (Preempted) and preempted (within the CQ).
        sample = r.dispatcher.metrics.registry.get_sample_value
        cq = {"cluster": "worker-1", "cluster_queue": "team-a"}
        evicted = sample(
            "kueue_dispatcher_evicted_workloads_total", {**cq, "reason": "Preempted", "priority_class": "low"}
        )
        assert evicted == 1, evicted
        preempted = sample("kueue_dispatcher_preempted_workloads_total", {**cq, "reason": "InClusterQueue"})
        assert preempted == 1, preempted
        waits = sample(
            "kueue_dispatcher_admission_wait_time_seconds_count",
            {"cluster": "worker-1", "cluster_queue": "team-a", "priority_class": "low"},
        )
        assert waits == 1, waits
    finally:
        await stop_rig(r)
