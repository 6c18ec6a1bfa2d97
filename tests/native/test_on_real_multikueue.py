"""Kueue-native mode on the real rig: real Kueue with MultiKueue on the manager (``rig up --real --manager-kueue
external``), this dispatcher as its external dispatcher. Only on real components: the simulator has no MultiKueue.

* A Job submitted to the manager runs to Complete on the worker the dispatcher nominated, and ``dispatcher
  explain`` says why.
* The worker running a Job dies (``down``: its API server stopped, every controller frozen): MultiKueue evicts the
  Job after its ``workerLostTimeout`` (the dispatcher's ``lostTimeout``), the dispatcher nominates another worker,
  the Job is admitted and completes there, once; when the dead worker comes back its stale copy is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nativebuild import LOST_TIMEOUT
from realrig import RealRig

from dispatcher.config import load_config
from dispatcher.kube.client import ClusterClient, Resource
from dispatcher.native.run import NativeDispatcher
from dispatcher.store.engine import make_engine
from dispatcher.store.migrate import upgrade
from dispatcher.store.models import Workload, WorkloadState
from dispatcher.store.repo import Repo

Obj = dict[str, Any]
JOBS = Resource("batch", "v1", "jobs", "Job")
PODS = Resource("", "v1", "pods", "Pod")
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
WORKERS = ("worker-1", "worker-2")


def _job(name: str, *, seconds: float, parallelism: int = 1) -> Obj:
    """A Job as users write it for MultiKueue (managedBy), unchanged for this dispatcher."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {
            "managedBy": "kueue.x-k8s.io/multikueue",
            "parallelism": parallelism,
            "completions": parallelism,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"sim.dispatcher.io/run-seconds": f"{seconds:g}"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                        }
                    ],
                },
            },
        },
    }


@dataclass
class Native:
    rig: RealRig
    dispatcher: NativeDispatcher
    repo: Repo
    db_url: str
    manager: ClusterClient
    workers: dict[str, ClusterClient]

    async def row(self, name: str) -> Workload | None:
        return await self.repo.get_workload("team-a", name)

    async def manager_workload(self, job: str) -> Obj | None:
        for wl in (await self.manager.list(WORKLOADS, "team-a")).get("items") or []:
            owners = wl["metadata"].get("ownerReferences") or []
            if any(o.get("name") == job for o in owners):
                return dict(wl)
        return None

    async def complete(self, job: str) -> Obj | None:
        obj = await self.manager.get(JOBS, "team-a", job)
        conds = ((obj or {}).get("status") or {}).get("conditions") or []
        return obj if any(c.get("type") == "Complete" and c.get("status") == "True" for c in conds) else None


async def eventually(probe: Any, *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last: {last!r}")


@pytest.fixture
async def native(kueue_rig: RealRig, tmp_path: Path) -> AsyncIterator[Native]:
    """The dispatcher in kueue-external mode on the rig's clusters.yaml (its own least-privilege credentials,
    deploy/native/'s RBAC on the manager), SQLite."""
    config = load_config(kueue_rig.directory / "clusters.yaml")
    assert config.mode == "kueue-external" and config.policy.lost_timeout == LOST_TIMEOUT
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'native.sqlite'}"
    engine = make_engine(db_url)
    await upgrade(engine)
    repo = Repo(engine)
    dispatcher = NativeDispatcher(config, repo, probe_interval=1.0)
    await dispatcher.start()
    manager = await kueue_rig.client("manager")
    workers = {w: await kueue_rig.client(w) for w in WORKERS}
    try:
        yield Native(kueue_rig, dispatcher, repo, db_url, manager, workers)
    finally:
        await dispatcher.stop()
        for c in (manager, *workers.values()):
            await c.close()
        await engine.dispose()
        for w in WORKERS:
            with contextlib.suppress(Exception):
                await kueue_rig.fault(w, "none")


@pytest.mark.timeout(300)
async def test_a_job_runs_to_complete_on_the_nominated_worker_and_explain_says_why(native: Native) -> None:
    await native.manager.create(JOBS, "team-a", _job("native-hello", seconds=2, parallelism=2))
    await eventually(lambda: native.complete("native-hello"), timeout=120, what="the manager Job Complete")
    row = await eventually(lambda: native.row("native-hello"), timeout=10, what="the SQL record")
    row = await eventually(
        lambda: _in_state(native, "native-hello", WorkloadState.SUCCEEDED), timeout=30, what="Succeeded in SQL"
    )
    [placement] = row.placements
    nominee = placement.cluster
    assert row.last_decision is not None and row.last_decision["nominated"] == [nominee]
    assert row.last_decision["chosen"] == nominee
    # MultiKueue ran it where this dispatcher said: the manager Workload's clusterName is the nominee.
    wl = await native.manager_workload("native-hello")
    assert wl is not None and wl["status"].get("clusterName") == nominee, wl and wl["status"]
    job = await native.manager.get(JOBS, "team-a", "native-hello")
    assert job is not None and job["status"].get("succeeded") == 2
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dispatcher",
        "explain",
        "team-a/native-hello",
        "--db-url",
        native.db_url,
        stdout=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, _ = await proc.communicate()
    assert proc.returncode == 0
    explained = out.decode()
    print(explained)
    assert f"{nominee} *" in explained and f"Nominated: {nominee}" in explained
    assert "Decision (kueue-external" in explained and "State: Succeeded" in explained


@pytest.mark.timeout(300)
async def test_the_jobs_cluster_selector_decides_where_it_is_nominated(native: Native) -> None:
    """Kueue does not copy the job's annotations onto its Workload: the dispatcher reads them from the job. The
    rig's workers are in zone-1 and zone-2; each job runs in the zone it names, whichever worker scores best."""
    for zone in ("zone-1", "zone-2"):
        job = _job(f"native-{zone}", seconds=1)
        job["metadata"]["annotations"] = {"kueue-dispatcher.io/cluster-selector": f"zone={zone}"}
        await native.manager.create(JOBS, "team-a", job)
    for worker, zone in (("worker-1", "zone-1"), ("worker-2", "zone-2")):
        row = await eventually(
            lambda z=zone: _in_state(native, f"native-{z}", WorkloadState.SUCCEEDED),
            timeout=120,
            what=f"native-{zone} Succeeded in SQL",
        )
        assert row.cluster_selector == {"zone": zone}
        assert [p.cluster for p in row.placements] == [worker]
        wl = await native.manager_workload(f"native-{zone}")
        assert wl is not None and wl["status"].get("clusterName") == worker
        other = "worker-2" if worker == "worker-1" else "worker-1"
        verdicts = {v["cluster"]: v for v in row.last_decision["workers"]}
        assert "excluded by the workload's cluster selector" in verdicts[other]["reason"]


async def _in_state(native: Native, name: str, *states: str) -> Workload | None:
    row = await native.row(name)
    return row if row is not None and row.state in states else None


async def _running_on(native: Native, worker: str, job: str) -> int:
    pods = (
        await native.workers[worker].list(PODS, "team-a", label_selector=f"batch.kubernetes.io/job-name={job}")
    ).get("items") or []
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")


@pytest.mark.timeout(420)
async def test_killing_the_worker_renominates_and_readmits_elsewhere_once(native: Native) -> None:
    name = "native-failover"
    await native.manager.create(JOBS, "team-a", _job(name, seconds=12))
    row = await eventually(
        lambda: _in_state(native, name, WorkloadState.ADMITTED), timeout=120, what="admitted on a worker"
    )
    victim = row.cluster
    assert victim in WORKERS
    other = next(w for w in WORKERS if w != victim)
    await eventually(lambda: _running_on(native, victim, name), timeout=60, what=f"its pod running on {victim}")
    killed = time.monotonic()
    await native.rig.fault(victim, "down")  # API server stopped, kwok and every controller frozen: a dead worker

    # While the victim is dead nothing of it runs (frozen); at most one live worker may run the Job at any time.
    most = 0
    stop = asyncio.Event()

    async def watch() -> None:
        nonlocal most
        while not stop.is_set():
            with contextlib.suppress(Exception):
                most = max(most, await _running_on(native, other, name))
            await asyncio.sleep(0.5)

    watcher = asyncio.create_task(watch())
    try:
        moved = await eventually(
            lambda: _moved(native, name, other), timeout=LOST_TIMEOUT * 4 + 60, what=f"re-admitted on {other}"
        )
        readmitted = time.monotonic() - killed
        wl = await native.manager_workload(name)
        assert wl is not None and wl["status"].get("clusterName") == other
        await eventually(lambda: native.complete(name), timeout=180, what="the manager Job Complete")
    finally:
        stop.set()
        await watcher
    print(f"failover: {victim} down -> admitted on {other} after {readmitted:.1f}s (workerLostTimeout {LOST_TIMEOUT}s)")
    assert most == 1
    job = await native.manager.get(JOBS, "team-a", name)
    assert job is not None and job["status"].get("succeeded") == 1 and not job["status"].get("failed")
    states = [(p.generation, p.cluster, p.state) for p in moved.placements]
    assert states[0] == (1, victim, "Lost") and (moved.generation, other) in {(g, c) for g, c, _ in states}
    events = [e.type for e in await native.repo.events_for(moved.id)]
    assert "FailedOver" in events and events.count("Nominated") >= 2

    # The dead worker comes back: MultiKueue removes its stale copy (the manager Workload is finished).
    await native.rig.fault(victim, "none")

    async def gone() -> bool:
        try:
            job_there = await native.workers[victim].get(JOBS, "team-a", name)
            wls = (await native.workers[victim].list(WORKLOADS, "team-a")).get("items") or []
        except Exception:
            return False
        return job_there is None and not any(name in w["metadata"]["name"] for w in wls)

    await eventually(gone, timeout=180, what=f"the stale copy on {victim} removed")


async def _moved(native: Native, name: str, other: str) -> Workload | None:
    row = await native.row(name)
    if row is not None and row.generation >= 2 and row.state in (WorkloadState.ADMITTED, WorkloadState.SUCCEEDED):
        return row if row.cluster == other else None
    return None


@pytest.mark.timeout(420)
async def test_the_rigs_three_multikueue_flavours_run_jobs_and_only_external_hands_over_the_nominations(
    native: Native,
) -> None:
    """``POST /multikueue`` restarts the manager's Kueue with another dispatcher: Kueue's own AllAtOnce and
    Incremental dispatchers run Jobs by themselves, and this dispatcher writes nothing meanwhile (the manager's
    Kueue does not name it); back to ``external``, it nominates again."""
    try:
        for flavour in ("all-at-once", "incremental"):
            await native.rig.post("/multikueue", {"flavour": flavour})
            nominator = native.dispatcher.nominator
            assert nominator is not None
            await eventually(lambda: _refused(native), timeout=60, what="the dispatcher to stand back")
            written = nominator.nominations_written
            name = f"native-{flavour}"
            await _create_when_kueue_answers(native, _job(name, seconds=1))
            await eventually(lambda n=name: native.complete(n), timeout=120, what=f"{name} Complete under {flavour}")
            assert nominator.nominations_written == written, f"the dispatcher nominated under {flavour}"
            wl = await native.manager_workload(name)
            assert wl is not None and wl["status"].get("clusterName") in WORKERS
    finally:
        await native.rig.post("/multikueue", {"flavour": "external"})
    await eventually(lambda: _nominating(native), timeout=60, what="the dispatcher to nominate again")
    await _create_when_kueue_answers(native, _job("native-back", seconds=1))
    await eventually(lambda: native.complete("native-back"), timeout=120, what="native-back Complete")
    row = await _in_state(native, "native-back", WorkloadState.SUCCEEDED, WorkloadState.ADMITTED)
    assert row is not None and row.last_decision is not None and row.last_decision.get("nominated")


async def _refused(native: Native) -> bool:
    return bool(native.dispatcher.nominator and native.dispatcher.nominator.refusal)


async def _nominating(native: Native) -> bool:
    return bool(native.dispatcher.nominator and not native.dispatcher.nominator.refusal)


async def _create_when_kueue_answers(native: Native, obj: Obj) -> None:
    """Create a Job; Kueue's webhooks refuse it while the manager's Kueue restarts."""

    async def create() -> bool:
        try:
            await native.manager.create(JOBS, "team-a", obj)
        except Exception as exc:
            return "already exists" in str(exc).lower()
        return True

    await eventually(create, timeout=90, what=f"Kueue's webhooks to admit {obj['metadata']['name']}")
