"""Partial admission end to end (issue 19, item 4), on the simulator and on the real rig: a Job with
``kueue.x-k8s.io/job-min-parallelism`` whose pods do not all fit anywhere is placed where the most of them fit, the
decision says how many, and the worker's Kueue admits exactly that many and lowers the copy's parallelism."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from harness import JOBS, eventually, job, start_rig, stop_rig
from realrig import RealRig

from dispatcher.kube.client import Resource
from dispatcher.store.models import WorkloadState

WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
Obj = dict[str, Any]


@pytest.mark.real_rig
async def test_job_min_parallelism_is_placed_partially_as_predicted(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    r = await start_rig(tmp_path, db_url, real=real_rig)
    try:
        # 8 pods of 4 CPUs: 32 CPUs; every worker's cohort holds 24, so at most 6 pods fit (minCount 2).
        wide = job("wide", cpu="4", parallelism=8, seconds=1, annotations={"kueue.x-k8s.io/job-min-parallelism": "2"})
        await r.submit(wide)
        row = await r.wait_state(
            "team-a", "wide", WorkloadState.ADMITTED, WorkloadState.RUNNING, WorkloadState.SUCCEEDED, timeout=40
        )
        assert row.cluster is not None and row.last_decision is not None
        summary = row.last_decision["summary"]
        found = re.search(r"partial admission: fits (\d+) of 8 pods \(minCount 2\) on (\S+)$", summary)
        assert found is not None, summary
        predicted, where = int(found.group(1)), found.group(2)
        assert where == row.cluster and 2 <= predicted < 8
        chosen = {w["cluster"]: w for w in row.last_decision["workers"]}[row.cluster]
        assert chosen["partial"] == f"fits {predicted} of 8 pods (minCount 2)"

        client = r.workers[row.cluster]

        async def admitted() -> Obj | None:
            for wl in (await client.list(WORKLOADS, "team-a")).get("items") or []:
                owners = {o.get("name") for o in wl["metadata"].get("ownerReferences") or []}
                if "wide" in owners and (wl.get("status") or {}).get("admission"):
                    return wl
            return None

        wl = await eventually(admitted, timeout=30, what="the copy's Workload admitted")
        assert wl["status"]["admission"]["podSetAssignments"][0]["count"] == predicted

        async def started() -> Obj | None:
            copy = await client.get(JOBS, "team-a", "wide")
            return copy if copy is not None and not copy["spec"].get("suspend") else None

        copy = await eventually(started, timeout=30, what="the copy started")
        assert (copy["spec"]["parallelism"], copy["spec"]["completions"]) == (predicted, 8)
        local = await r.manager.get(JOBS, "team-a", "wide")
        assert local is not None and local["spec"]["parallelism"] == 8  # the manager's Job is left as submitted
        await r.wait_state("team-a", "wide", WorkloadState.SUCCEEDED, timeout=60)
    finally:
        await stop_rig(r)
