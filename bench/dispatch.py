"""Dispatch throughput against the API floor: simulated clusters of 10 and 100 workers, 1,000 and 10,000 quick jobs.

The simulated clusters run in child processes (``dispatcher sim up``: a manager and N workers, HTTPS, Kueue, job
controller, scheduler and kubelet; jobs run 1 s); the dispatcher and the floor run here, one after the other,
against the same clusters, in turn (dispatcher, floor, dispatcher, floor, ...), so that the ratio of each pair
is measured under the same load.

**Dispatcher** (one per cluster size, kept running across runs; SQLite or ``--db-url``): the workers are
held back (cordoned in memory), the run's jobs are submitted to the manager and taken by the intake into SQL;
then the workers are released and the clock runs until every job has its copy created on a worker, recorded in
SQL and reported on the manager object (``Placed``). ``placed_per_second`` is jobs over that time. Each run also
counts the Kubernetes Events the dispatcher wrote and dropped over the phase (``events_written``,
``events_dropped``): a phase that dropped Events did less work per Job than one that wrote them all.

**Floor**: a bare asyncio loop with the same Kubernetes client that makes only the API calls a dispatch needs:
for every job (submitted beforehand, like the dispatcher's) create the copy on a worker (round robin) and patch
the manager Job's annotations. No SQL, no placement, no watches; in a process of its own, so that its CPU per Job
is its own (the dispatcher, still running here, watches the floor's copies meanwhile: ``floor_watch_cpu_ms_per_job``,
the part of a Job's cost that watching Kueue on the workers takes). ``ratio_to_floor`` is the median over runs of
dispatcher rate / floor rate of each pair. Target: >= 0.7.

``--sim-processes N`` spreads the simulated clusters over N processes (``sim up --processes``; default
:data:`SIM_PROCESSES`, at most one per worker); "sim" is the cores they use together, "busiest" the busiest
process's share of a core.

``--real``: the same, against ``dispatcher rig up --real`` instead of the simulator (real etcd, kube-apiserver,
controller manager, scheduler, kwok and Kueue per cluster, built by ``rig/build.sh``): floor and dispatcher in turn
on the same real clusters. "sim" then stands for every process of the rig (the components and the rig's own
process, which carries the outside path of each API server).

**Latency** (after the throughput runs, dispatcher only): jobs submitted one by one at a steady rate (a quarter of the
measured throughput, at most ``--paced-rate``); ``submit_to_mirrored`` p50/p99 is from the create call on the
manager to the copy placed and reported. ``status_sync_lag`` p50/p99 is the service's own measure (from a
watch event marking a workload for sync to its state written to SQL and the manager), over the whole run.
``paced_cpu_ms_per_job`` is the dispatcher's CPU per Job at that steady rate, from the first submission until
every Job has finished with its status and Events written (the Jobs are submitted from a child process, so the
figure is the dispatcher's alone); ``_above_idle`` leaves out what the fleet costs with no Job (see ``idle``).
A burst shares each SQL transaction, status-sync batch and loop wake-up among many Jobs; at a steady rate of a
few Jobs a second each Job pays for its own, so this figure is several times the burst's.

    python bench/dispatch.py                                  # 10 and 100 workers x 1,000 and 10,000 jobs, 3 runs
    python bench/dispatch.py --db-url postgresql+asyncpg://root@127.0.0.1:5432/test
    python bench/dispatch.py --quick --json                   # 10 workers, 1,000 jobs, 1 run
    python bench/dispatch.py --real --workers 3 --jobs 1000 --runs 1 --paced-jobs 100   # on real components
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import pickle
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import (
    add_keep_option,
    emit,
    machine,
    machine_line,
    median,
    parser,
    percentile,
    rnd,
    scratch_database,
    scratch_dir,
)

from dispatcher import labels as L
from dispatcher.adapters.job import JobAdapter
from dispatcher.config import DispatcherConfig, KubeconfigRef, load_config
from dispatcher.kube.client import ClusterClient, KubeError, connect
from dispatcher.live import Live
from dispatcher.service import Dispatcher
from dispatcher.store.engine import make_engine
from dispatcher.store.migrate import upgrade
from dispatcher.store.models import WorkloadState
from dispatcher.store.repo import Repo
from kubecommon import gcpolicy

Obj = dict[str, Any]
JOBS = JobAdapter.resource
NAMESPACE = "team-a"
TOPOLOGY = 'cpuWorker:\n  nodes: [{prefix: cpu, count: 4, cpu: "64", memory: 256Gi, pods: 5000}]\n'
BENCH_LABEL = "bench.dispatcher.io/floor"
SCRIPT = os.path.abspath(__file__)


def _job(name: str, labelled: bool) -> Obj:
    labels = {L.QUEUE_NAME: "user-queue"} if labelled else {BENCH_LABEL: "true"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        }
                    ],
                }
            },
        },
    }


#: Processes of the simulated clusters by default. The benchmark measures the dispatcher, so the simulator must not
#: set its pace (issue 20). On the project's 2-core machine, 100 workers, 2,000-4,000 Jobs (bench/RESULTS.md): with
#: one process it is saturated; with two the busiest runs at 68-73 % of a core in the dispatcher's phase and
#: 82-85 % in the floor's; with three at 43-52 % and 52-56 %, at the same rate.
SIM_PROCESSES = 3


async def _create_job(manager: ClusterClient, name: str, labelled: bool) -> Obj:
    """Submit one Job, retried on a timeout as a user's client would (a create that landed: read it back)."""
    delay = 0.2
    while True:
        try:
            created: Obj = await manager.create(JOBS, NAMESPACE, _job(name, labelled))
            return created
        except KubeError as exc:
            if exc.already_exists:
                found = await manager.get(JOBS, NAMESPACE, name)
                if found is not None:
                    return found
            elif not exc.transient:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)


async def _submit(manager: ClusterClient, names: list[str], labelled: bool, concurrency: int = 32) -> list[Obj]:
    sem = asyncio.Semaphore(concurrency)

    async def one(name: str) -> Obj:
        async with sem:
            return await _create_job(manager, name, labelled)

    return await asyncio.gather(*(one(n) for n in names))


async def _start_sim(workers: int, tmp: Path, processes: int = 1) -> tuple[asyncio.subprocess.Process, Path, list[int]]:
    """``dispatcher sim up`` in ``processes`` processes (it exits with this one); its clusters.yaml and the pids
    whose CPU is the simulator's."""
    (tmp / "topology.yaml").write_text(TOPOLOGY)
    sim = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dispatcher", "sim", "up", "--workers", str(workers), "--gpu-workers", "0",
        "--dir", str(tmp / "sim"), "--run-seconds", "1", "--topology", str(tmp / "topology.yaml"),
        "--processes", str(processes), "--parent-pid", str(os.getpid()),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while not await asyncio.to_thread((tmp / "sim" / "ready").exists):
        if time.monotonic() > deadline or sim.returncode is not None:
            raise RuntimeError("the simulated clusters did not start")
        await asyncio.sleep(0.2)
    state = json.loads(await asyncio.to_thread((tmp / "sim" / "sim.json").read_text))
    return sim, tmp / "sim" / "clusters.yaml", state.get("pids", [sim.pid])


async def _start_real(workers: int, tmp: Path) -> tuple[asyncio.subprocess.Process, Path, list[int]]:
    """``dispatcher rig up --real`` with ``workers`` CPU workers; its clusters.yaml and the pids whose CPU is the
    rig's: every component's and the rig process's own (it carries the API servers' outside paths)."""
    (tmp / "topology.yaml").write_text(TOPOLOGY)
    directory = tmp / "rig"
    rig = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dispatcher", "rig", "up", "--real", "--workers", str(workers), "--gpu-workers", "0",
        "--dir", str(directory), "--run-seconds", "1", "--topology", str(tmp / "topology.yaml"),
        stdout=asyncio.subprocess.DEVNULL, stderr=(tmp / "rig-up.log").open("wb"),
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while not await asyncio.to_thread((directory / "ready").exists):
        if time.monotonic() > deadline or rig.returncode is not None:
            raise RuntimeError(f"the real rig did not start; see {tmp / 'rig-up.log'}")
        await asyncio.sleep(0.5)
    state = json.loads(await asyncio.to_thread((directory / "rig.json").read_text))
    pids = [int(state.get("pid") or rig.pid)]
    for cluster in state.get("clusters") or []:
        pids += [int(c["pid"]) for c in (cluster.get("components") or {}).values() if c.get("pid")]
    return rig, directory / "clusters.yaml", pids


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far, from /proc (0 without /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _each(phase: dict[str, Any]) -> str:
    """Every simulator process's share of a core in a phase, as ``1%/72%/66%`` (sim.json's order)."""
    return "/".join(f"{x:.0%}" for x in phase.get("sim_busy_each", ()))


class Cpu:
    """CPU used over a phase by this process (the dispatcher, or the floor) and by the simulated clusters:
    ``sim_cpu_busy`` is the cores its processes used together, ``sim_busiest`` the busiest one's share of a core
    (what says whether the simulator paced the phase), ``sim_busy_each`` every one's."""

    def __init__(self, sim_pids: list[int]) -> None:
        self.sim_pids = sim_pids
        self.own = time.process_time()
        self.sim = {pid: _proc_cpu(pid) for pid in sim_pids}

    def per_job(self, n: int, seconds: float) -> dict[str, Any]:
        own = time.process_time() - self.own
        used = [_proc_cpu(pid) - before for pid, before in self.sim.items()]
        return {
            "cpu_ms_per_job": 1000 * own / n,
            "cpu_busy": own / seconds if seconds else 0.0,
            "sim_cpu_busy": sum(used) / seconds if seconds else 0.0,
            "sim_busiest": max(used, default=0.0) / seconds if seconds else 0.0,
            # Each process's share of a core, in the order sim.json names them (a sharded simulator: the
            # coordinator, then shard 0, which also runs the manager, then the others).
            "sim_busy_each": [round(u / seconds, 3) if seconds else 0.0 for u in used],
        }


class Bench:
    """One dispatcher against one set of simulated clusters, with hooks that time each job's way. ``submitter``:
    the credentials the jobs are submitted with (a user's: on the real rig the dispatcher's own may not create
    Jobs on the manager)."""

    def __init__(self, config: DispatcherConfig, db_url: str, sim_pids: list[int], submitter: KubeconfigRef) -> None:
        self.config = config
        self.submitter = submitter
        self.sim_pids = sim_pids
        self.db_url = db_url
        self.placed_at: dict[str, float] = {}
        #: The names wait_placed waits for that are not placed yet (kept as they are placed, so that waiting for
        #: 10,000 Jobs costs the dispatcher's process nothing per placement: the measured CPU is the dispatcher's).
        self._awaited: set[str] = set()
        #: Workloads whose manager object awaits a status write, since when.
        self._dirty: dict[int, float] = {}
        self.sync_lags: list[float] = []
        self._placed_event = asyncio.Event()
        self._dispatcher: Dispatcher | None = None

    @property
    def d(self) -> Dispatcher:
        assert self._dispatcher is not None
        return self._dispatcher

    async def start(self) -> None:
        self.engine = make_engine(self.db_url)
        await upgrade(self.engine)
        d = self._dispatcher = Dispatcher(self.config, Repo(self.engine))
        original_placed = d.mirror._placed

        async def placed(live: Live, remote_uid: str) -> None:
            await original_placed(live, remote_uid)
            if live.state != WorkloadState.PENDING:
                self.placed_at.setdefault(live.name, time.monotonic())
                self._awaited.discard(live.name)
                if not self._awaited:
                    self._placed_event.set()

        d.mirror._placed = placed  # type: ignore[method-assign]
        metrics = d.metrics
        dirty_since = self._dirty
        original_requested, original_finished = metrics.sync_requested, metrics.sync_finished

        def requested(workload_id: int) -> None:
            dirty_since.setdefault(workload_id, time.monotonic())
            original_requested(workload_id)

        def finished(workload_ids: Any) -> None:
            ids = list(workload_ids)
            now = time.monotonic()
            for wid in ids:
                since = dirty_since.pop(wid, None)
                if since is not None:
                    self.sync_lags.append(now - since)
            original_finished(ids)

        metrics.sync_requested = requested  # type: ignore[method-assign]
        metrics.sync_finished = finished  # type: ignore[method-assign]
        await d.start()
        self.manager = await connect("bench-manager", self.submitter)

    async def stop(self) -> None:
        await self.manager.close()
        await self.d.stop()
        await self.engine.dispose()

    def hold(self, held: bool) -> None:
        """Cordon (or uncordon) every worker in memory only: no SQL write, no API call."""
        for cap in self.d.capacities.values():
            cap.cordoned = held
            cap.touch()
        if not held:
            self.d.rt.wake_placement()

    async def wait_placed(self, names: list[str], timeout: float) -> float:
        self._awaited = {n for n in names if n not in self.placed_at}
        self._placed_event.clear()
        try:
            async with asyncio.timeout(timeout):
                while self._awaited:
                    await self._placed_event.wait()
                    self._placed_event.clear()
        except TimeoutError:
            raise TimeoutError(f"{len(self._awaited)} of {len(names)} jobs not placed within {timeout:g}s") from None
        return max(self.placed_at[n] for n in names)

    async def idle(self, seconds: float) -> float:
        """The dispatcher's CPU (cores) with no Job to dispatch: what its fleet costs it per second (health probes,
        watches and their bookmarks, leases), whatever the Jobs. It is counted in every Job's CPU of a phase, and
        weighs more the fewer Jobs a second a phase places."""
        await asyncio.sleep(2.0)  # the start's lists and first probes are over
        before, start = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        return (time.process_time() - before) / (time.monotonic() - start)

    async def quiet(self, timeout: float) -> float:
        """Wait until no worker's Kueue holds a Workload (the earlier phases' Jobs, the floor's among them, have
        finished); returns the seconds waited. On the simulator Jobs run 1 s; on the real rig the floor's copies
        may still run when its phase ends, and a phase measured meanwhile would count the watching of them."""
        start = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while True:
                    if not any(cap.active_workloads for cap in self.d.rt.capacities.values()):
                        break
                    await asyncio.sleep(0.5)
        return time.monotonic() - start

    async def throughput(self, prefix: str, n: int) -> dict[str, Any]:
        names = [f"{prefix}-{i:05d}" for i in range(n)]
        self.hold(True)
        await _submit(self.manager, names, labelled=True)
        wanted = set(names)
        deadline = time.monotonic() + 600
        while sum(1 for lv in list(self.d.live.by_id.values()) if lv.name in wanted) < n:
            if time.monotonic() > deadline:
                raise TimeoutError("the intake did not take every job")
            await asyncio.sleep(0.05)
        start, cpu = time.monotonic(), Cpu(self.sim_pids)
        events_before = self._events()
        self.hold(False)
        end = await self.wait_placed(names, 600)
        seconds = end - start
        placed = cpu.per_job(n, seconds)
        # The whole life: until every Job of the phase has finished in the dispatcher, no status write is pending
        # and its Events are written, so that the work after placement (status sync, finish, the copies' watch
        # events, the manager's Events) is counted too;
        # the placement window alone leaves out more of it the shorter the phase.
        life = await self.wait_finished(names, 600) - start
        lived = cpu.per_job(n, life)
        written, dropped = (after - before for after, before in zip(self._events(), events_before, strict=True))
        return {
            "jobs": n,
            "seconds": seconds,
            "placed_per_second": n / seconds,
            **placed,
            "life_seconds": life,
            "cpu_ms_per_job_life": lived["cpu_ms_per_job"],
            "events_written": written,
            "events_dropped": dropped,
        }

    def _events(self) -> tuple[int, int]:
        """Kubernetes Events written and dropped so far: a phase whose Events were dropped (the manager took them
        slower than they came) did less work per Job than one that wrote them all."""
        events = self.d.rt.events
        return (events.written, sum(events.dropped.values())) if events is not None else (0, 0)

    async def wait_finished(self, names: list[str], timeout: float) -> float:
        """When every job of ``names`` is terminal (or gone) in the dispatcher with no status write pending and
        no Kubernetes Event left to write or being written (each Job has about three, written in the background)."""
        wanted = set(names)
        events = self.d.rt.events
        async with asyncio.timeout(timeout):
            while True:
                open_ = {lv.name for lv in self.d.live.by_id.values() if not lv.terminal} & wanted
                if not open_ and not self._dirty and (events is None or not events.unfinished):
                    return time.monotonic()
                await asyncio.sleep(0.25)

    async def paced(self, prefix: str, n: int, rate: float) -> tuple[list[float], dict[str, float]]:
        """Submit ``n`` jobs at ``rate`` per second from a child process (so that this process's CPU is the
        dispatcher's alone); each job's submit-to-placed latency, and the dispatcher's CPU per Job at that steady
        rate: from the first submission until every Job has finished, its status is written and its Events too.

        The child's clock is this one's (``time.monotonic`` is the system's CLOCK_MONOTONIC on Linux)."""
        names = [f"{prefix}-{i:05d}" for i in range(n)]
        child = await _start_child("--submit-child", (self.submitter, names, rate), "the submitting process")
        assert child.stdout is not None
        before, start = time.process_time(), time.monotonic()  # connected; it submits from now on
        submitted: dict[str, float] = {}
        async for line in child.stdout:
            name, _, at = line.decode().partition(" ")
            submitted[name] = float(at)
        if await child.wait() != 0 or len(submitted) != n:
            raise RuntimeError(f"the submitting process failed (exit code {child.returncode})")
        await self.wait_placed(names, 600)
        end = await self.wait_finished(names, 600)
        cpu = {"cpu_ms_per_job": 1000 * (time.process_time() - before) / n, "seconds": end - start}
        return [self.placed_at[n] - submitted[n] for n in names], cpu


async def _with_retries(call: Callable[[], Awaitable[Any]], *, created: bool = False) -> None:
    """An API call of the floor, retried on a transient error (a timeout when the simulator falls behind on a
    10,000-job burst) as the dispatcher retries its own; a create that had landed before its answer was lost
    answers AlreadyExists the second time, which counts as done."""
    delay = 0.2
    while True:
        try:
            await call()
            return
        except KubeError as exc:
            if created and exc.already_exists:
                return
            if not exc.transient:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)


async def floor(
    config: DispatcherConfig,
    prefix: str,
    n: int,
    concurrency: int,
    sim_pids: list[int],
    submitter: KubeconfigRef,
    *,
    on_start: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """The API calls alone: create each copy on a worker (round robin), patch the manager Job (with the
    dispatcher's credentials; the jobs are submitted with ``submitter``'s beforehand)."""
    manager = await connect("floor-manager", config.manager)
    user = await connect("floor-submitter", submitter)
    workers = [await connect(f"floor-{w.name}", w.kube) for w in config.workers]
    adapter = JobAdapter()
    try:
        names = [f"{prefix}-{i:05d}" for i in range(n)]
        objs = await _submit(user, names, labelled=False)
        sem = asyncio.Semaphore(concurrency)

        async def dispatch(i: int, obj: Obj) -> None:
            meta = obj["metadata"]
            body = adapter.remote_copy(obj, {BENCH_LABEL: "true", L.QUEUE_NAME: "user-queue"}, {})
            async with sem:
                await _with_retries(lambda: workers[i % len(workers)].create(JOBS, NAMESPACE, body), created=True)
                patch = {
                    "metadata": {
                        "annotations": {
                            L.CLUSTER: config.workers[i % len(workers)].name,
                            L.STATE: WorkloadState.PLACED,
                            L.MESSAGE: "placed by the floor",
                        }
                    }
                }
                await _with_retries(lambda: manager.patch(JOBS, NAMESPACE, meta["name"], patch))

        on_start()
        start, cpu = time.monotonic(), Cpu(sim_pids)
        await asyncio.gather(*(dispatch(i, o) for i, o in enumerate(objs)))
        seconds = time.monotonic() - start
        return {"jobs": n, "seconds": seconds, "placed_per_second": n / seconds, **cpu.per_job(n, seconds)}
    finally:
        await manager.close()
        await user.close()
        for w in workers:
            await w.close()


async def _start_child(mode: str, args: tuple[Any, ...], what: str) -> asyncio.subprocess.Process:
    """This script in a child process (``mode``: ``--floor-child`` or ``--submit-child``), its arguments pickled on
    its stdin; returned once it has said ``start`` (its clients are connected), with its stdout still to read."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, SCRIPT, mode, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(pickle.dumps(args))
    await child.stdin.drain()
    child.stdin.close()
    if (await child.stdout.readline()).strip() != b"start":
        raise RuntimeError(f"{what} ended before it started (exit code {await child.wait()})")
    return child


async def floor_apart(
    config: DispatcherConfig, prefix: str, n: int, concurrency: int, sim_pids: list[int], submitter: KubeconfigRef
) -> dict[str, Any]:
    """:func:`floor` in a child process (this script with ``--floor-child``), so that its CPU is the floor's
    alone: in this one the dispatcher keeps running, and its informers take every event of the floor's copies.
    ``watch_cpu_ms_per_job`` is what this process spent per floor Job meanwhile (watching the copies' Workloads
    and Jobs on the workers, probes, leases, Events still queued), which the floor does not do."""
    child = await _start_child(
        "--floor-child", (config, prefix, n, concurrency, sim_pids, submitter), "the floor's process"
    )
    assert child.stdout is not None
    before, start = time.process_time(), time.monotonic()  # its Jobs are submitted; its clock starts now
    answer = await child.stdout.read()
    cpu, seconds = time.process_time() - before, time.monotonic() - start
    if await child.wait() != 0:
        raise RuntimeError(f"the floor's process failed (exit code {child.returncode})")
    result: dict[str, Any] = json.loads(answer)
    result["watch_cpu_ms_per_job"] = 1000 * cpu / n
    result["watch_seconds"] = seconds
    return result


def _submit_child() -> int:
    """The child of :meth:`Bench.paced`: (kubeconfig, names, rate) pickled on stdin; ``start`` once connected,
    then ``name monotonic-time`` as each Job's create is sent."""
    submitter, names, rate = pickle.loads(sys.stdin.buffer.read())

    async def run() -> None:
        manager = await connect("bench-submitter", submitter)
        try:
            sys.stdout.write("start\n")
            sys.stdout.flush()
            tasks = []
            start = time.monotonic()
            for i, name in enumerate(names):
                await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
                sys.stdout.write(f"{name} {time.monotonic()!r}\n")
                sys.stdout.flush()
                tasks.append(asyncio.create_task(_create_job(manager, name, True)))
            await asyncio.gather(*tasks)
        finally:
            await manager.close()

    asyncio.run(run())
    return 0


def _floor_child() -> int:
    """The child of :func:`floor_apart`: its arguments pickled on stdin; ``start`` then the result (JSON) on stdout."""
    args = pickle.loads(sys.stdin.buffer.read())

    def started() -> None:
        sys.stdout.write("start\n")
        sys.stdout.flush()

    gcpolicy.settle()
    result = asyncio.run(floor(*args, on_start=started))
    sys.stdout.write(json.dumps(result))
    return 0


async def run_size(args: Any, workers: int, job_counts: list[int], tmp: Path) -> dict[str, Any]:
    if args.real:
        sim, clusters, sim_pids = await _start_real(workers, tmp)
    else:
        processes = args.sim_processes if args.sim_processes is not None else min(SIM_PROCESSES, workers)
        sim, clusters, sim_pids = await _start_sim(workers, tmp, processes)
    try:
        loaded = load_config(clusters)
        policy = dataclasses.replace(
            loaded.policy, admission_timeout=300.0, lost_timeout=60.0, finished_retention=3600.0, gc_interval=300.0
        )
        config = dataclasses.replace(loaded, policy=policy)
        # A user's credentials for submitting: the administrator's kubeconfig beside clusters.yaml (the real rig's
        # clusters.yaml names the dispatcher's least-privilege ones, which may not create Jobs on the manager).
        admin = clusters.parent / "manager.kubeconfig"
        submitter = KubeconfigRef(path=str(admin)) if admin.exists() else loaded.manager
        async with scratch_database(args.db_url, tmp / "dispatcher.sqlite") as url:
            return await _measure_size(args, workers, job_counts, config, url, sim_pids, submitter)
    finally:
        if sim.returncode is None:
            sim.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(120):
                    await sim.wait()
            except TimeoutError:
                sim.kill()


async def _measure_size(
    args: Any,
    workers: int,
    job_counts: list[int],
    config: DispatcherConfig,
    url: str,
    sim_pids: list[int],
    submitter: KubeconfigRef,
) -> dict[str, Any]:
    bench = Bench(config, url, sim_pids, submitter)
    await bench.start()
    # As `dispatcher run` does once the dispatcher has started (kubecommon/gcpolicy.py).
    gcpolicy.settle()
    out: dict[str, Any] = {}
    try:
        idle = await bench.idle(10.0)
        print(f"  {workers} workers, no Job: dispatcher {idle:.1%} of a core")
        for n in job_counts:
            pairs = []
            for r in range(args.runs):
                disp = await bench.throughput(f"d{workers}-{n}-{r}", n)
                disp["cpu_ms_per_job_above_idle"] = 1000 * (disp["cpu_busy"] - idle) * disp["seconds"] / n
                disp["cpu_ms_per_job_life_above_idle"] = (
                    disp["cpu_ms_per_job_life"] - 1000 * idle * disp["life_seconds"] / n
                )
                flo = await floor_apart(config, f"f{workers}-{n}-{r}", n, args.floor_concurrency, sim_pids, submitter)
                ratio = disp["placed_per_second"] / flo["placed_per_second"]
                watch_above = flo["watch_cpu_ms_per_job"] - 1000 * idle * flo["watch_seconds"] / n
                flo["watch_cpu_ms_per_job_above_idle"] = watch_above
                pairs.append((disp, flo, ratio))
                print(
                    f"  {workers} workers, {n} jobs, run {r + 1}: dispatcher {disp['placed_per_second']:.0f}/s "
                    f"({disp['seconds']:.2f}s, {disp['cpu_ms_per_job']:.2f} ms CPU/job, "
                    f"{disp['cpu_ms_per_job_above_idle']:.2f} above idle; whole life {disp['life_seconds']:.1f}s, "
                    f"{disp['cpu_ms_per_job_life']:.2f} ms CPU/job, "
                    f"{disp['cpu_ms_per_job_life_above_idle']:.2f} above idle; "
                    f"Events {disp['events_written']} written, {disp['events_dropped']} dropped; busy "
                    f"{disp['cpu_busy']:.0%}, sim {disp['sim_cpu_busy']:.0%}, busiest {disp['sim_busiest']:.0%}, "
                    f"each {_each(disp)}), "
                    f"floor {flo['placed_per_second']:.0f}/s ({flo['seconds']:.2f}s, {flo['cpu_ms_per_job']:.2f} ms "
                    f"CPU/job, busy {flo['cpu_busy']:.0%}, sim {flo['sim_cpu_busy']:.0%}, "
                    f"busiest {flo['sim_busiest']:.0%}, each {_each(flo)}; the dispatcher meanwhile "
                    f"{flo['watch_cpu_ms_per_job']:.2f} ms CPU/job, {watch_above:.2f} above idle), ratio {ratio:.2f}"
                )
            rate = median([p[0]["placed_per_second"] for p in pairs])
            out[str(n)] = {
                "placed_per_second": round(rate, 1),
                "floor_per_second": round(median([p[1]["placed_per_second"] for p in pairs]), 1),
                "ratio_to_floor": round(median([p[2] for p in pairs]), 3),
                "cpu_ms_per_job": round(median([p[0]["cpu_ms_per_job"] for p in pairs]), 3),
                "cpu_ms_per_job_above_idle": round(median([p[0]["cpu_ms_per_job_above_idle"] for p in pairs]), 3),
                "idle_cpu_busy": round(idle, 3),
                "cpu_ms_per_job_life": round(median([p[0]["cpu_ms_per_job_life"] for p in pairs]), 3),
                "cpu_ms_per_job_life_above_idle": round(
                    median([p[0]["cpu_ms_per_job_life_above_idle"] for p in pairs]), 3
                ),
                "floor_cpu_ms_per_job": round(median([p[1]["cpu_ms_per_job"] for p in pairs]), 3),
                "floor_watch_cpu_ms_per_job": round(median([p[1]["watch_cpu_ms_per_job"] for p in pairs]), 3),
                "floor_watch_cpu_ms_per_job_above_idle": round(
                    median([p[1]["watch_cpu_ms_per_job_above_idle"] for p in pairs]), 3
                ),
                "sim_cpu_busy": round(median([p[0]["sim_cpu_busy"] for p in pairs]), 2),
                "floor_sim_cpu_busy": round(median([p[1]["sim_cpu_busy"] for p in pairs]), 2),
                "sim_busiest": round(median([p[0]["sim_busiest"] for p in pairs]), 2),
                "runs": [
                    {
                        "dispatcher": round(a["placed_per_second"], 1),
                        "floor": round(b["placed_per_second"], 1),
                        "events_written": a["events_written"],
                        "events_dropped": a["events_dropped"],
                        "sim_busy_each": a["sim_busy_each"],
                        "floor_sim_busy_each": b["sim_busy_each"],
                    }
                    for a, b, _ in pairs
                ],
            }
        throughput = min(float(v["placed_per_second"]) for v in out.values())
        rate = max(1.0, min(args.paced_rate, throughput / 4))
        waited = await bench.quiet(600.0)
        if waited >= 1.0:
            print(f"  {workers} workers: waited {waited:.0f}s for the workers to finish the earlier phases' Jobs")
        bench.sync_lags.clear()
        lat, steady = await bench.paced(f"p{workers}", args.paced_jobs, rate)
        lags = list(bench.sync_lags)
        steady_above = steady["cpu_ms_per_job"] - 1000 * idle * steady["seconds"] / args.paced_jobs
        latency = {
            "paced_jobs": args.paced_jobs,
            "paced_rate": round(rate, 1),
            "paced_cpu_ms_per_job": rnd(steady["cpu_ms_per_job"]),
            "paced_cpu_ms_per_job_above_idle": rnd(steady_above),
            "submit_to_mirrored_p50": rnd(percentile(lat, 0.5)),
            "submit_to_mirrored_p99": rnd(percentile(lat, 0.99)),
            "status_sync_lag_p50": rnd(percentile(lags, 0.5)),
            "status_sync_lag_p99": rnd(percentile(lags, 0.99)),
            "status_syncs": len(lags),
        }
        print(
            f"  {workers} workers, {args.paced_jobs} jobs at {rate:.0f}/s: submit-to-mirrored p50 "
            f"{latency['submit_to_mirrored_p50']}s p99 {latency['submit_to_mirrored_p99']}s; status-sync lag p50 "
            f"{latency['status_sync_lag_p50']}s p99 {latency['status_sync_lag_p99']}s ({len(lags)} syncs); "
            f"dispatcher {steady['cpu_ms_per_job']:.2f} ms CPU/job at this steady rate, {steady_above:.2f} above idle"
        )
    finally:
        await bench.stop()
    return {"jobs": out, **latency}


def main() -> int:
    if sys.argv[1:] == ["--floor-child"]:
        return _floor_child()
    if sys.argv[1:] == ["--submit-child"]:
        return _submit_child()
    p = parser(__doc__, runs=3)
    p.add_argument("--workers", type=int, action="append", help="worker counts (default 10 and 100; --quick 10)")
    p.add_argument("--jobs", type=int, action="append", help="jobs per run (default 1,000 and 10,000; --quick 1,000)")
    p.add_argument("--db-url", help="default: SQLite in a temporary directory")
    p.add_argument("--floor-concurrency", type=int, default=128, help="API calls in flight in the floor")
    p.add_argument("--paced-jobs", type=int, default=None, help="jobs of the latency phase (default 500; --quick 200)")
    p.add_argument("--paced-rate", type=float, default=100.0, help="at most this many submissions per second")
    p.add_argument(
        "--sim-processes",
        type=int,
        default=None,
        help=f"processes of the simulated clusters (`sim up --processes`; default {SIM_PROCESSES}, at most --workers)",
    )
    p.add_argument("--real", action="store_true", help="on `dispatcher rig up --real` instead of the simulator")
    add_keep_option(p)
    args = p.parse_args()
    args.runs = args.runs or (1 if args.quick else 3)
    worker_counts = args.workers or ([10] if args.quick else [10, 100])
    job_counts = args.jobs or ([1000] if args.quick else [1000, 10_000])
    args.paced_jobs = args.paced_jobs or (200 if args.quick else 500)
    info = machine()
    print(machine_line(info))
    db = "PostgreSQL" if args.db_url else "SQLite"
    clusters = "real clusters (rig up --real)" if args.real else "simulated clusters out of process"
    print(
        f"dispatch: {db}, {clusters}; workers {worker_counts}, jobs {job_counts}; "
        f"median of {args.runs} runs (dispatcher and floor in turn)"
    )
    report: dict[str, Any] = {"machine": info, "database": db, "runs": args.runs, "real": args.real, "workers": {}}
    for workers in worker_counts:
        with scratch_dir(f"dispatch-bench-{workers}-", keep=args.keep) as tmp:
            report["workers"][str(workers)] = asyncio.run(run_size(args, workers, job_counts, tmp))
    ratios = [float(j["ratio_to_floor"]) for w in report["workers"].values() for j in w["jobs"].values()]
    report["ratio_to_floor"] = round(min(ratios), 3) if ratios else None
    print(
        f"ratio to floor (lowest of every size): {report['ratio_to_floor']} "
        f"{'PASS' if report['ratio_to_floor'] is not None and report['ratio_to_floor'] >= 0.7 else 'FAIL'} "
        f"(target >= 0.7)"
    )
    if not args.json:
        print(json.dumps(report["workers"], indent=1))
    emit(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
