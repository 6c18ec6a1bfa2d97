"""``dispatcher drill --sim``: lose a worker under load and measure what the dispatcher does.

Starts simulated clusters and a dispatcher of its own (SQLite in a temporary directory), loads N
long-running jobs, waits until they run, then fails the worker holding the most of them:

- ``down``: the whole cluster is down (its API refuses connections and nothing runs there);
- ``partition``: the cluster accepts connections and never answers, and keeps running its pods;
- ``flaky``: half of its API calls fail with 500/429.

The report: ``detection_seconds`` (fault to Lost), ``replacement_seconds`` (Lost to every affected job
admitted elsewhere), ``affected``, ``duplicates`` (jobs seen running on two clusters at the same instant,
sampled on the simulated clusters every 50 ms), ``lost`` (affected jobs not running anywhere at the end).
The exit code is non-zero when a duplicate or a loss happened. A partitioned cluster keeps running what
it has, so ``partition`` shows the at-least-once limit of failover (see :mod:`.failover`).

``leader-kill`` (:func:`run_leader_kill_drill`): several replicas on one PostgreSQL, the leader SIGKILLed.

Simulated clusters run in this process; the replicas are ``dispatcher run --leader-elect`` child processes on a
fresh PostgreSQL database (created next to the one given, dropped at the end). The first replica leads; once the
others are ready (informers warm), N short jobs are submitted at a steady pace and the leader is SIGKILLed when a
third of them are in. Report:

- ``takeover_seconds``: from the kill to the new leader's first action (its fencing-term bump in SQL, the first
  write of a takeover); ``first_placement_seconds``: from the kill to the first placement recorded after it;
- ``duplicates``: jobs seen running on two workers at the same instant (workers sampled through their APIs
  every 100 ms), or completed on more than one; ``lost``: jobs that did not succeed; ``jobs_succeeded``.

The exit code is non-zero when a duplicate or a loss happened. :class:`ReplicaSet` is also the harness of the
HA tests (``tests/service/test_ha.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import aiohttp
import yaml

from . import labels as L
from .adapters.job import JobAdapter
from .config import Policy, load_config
from .health import HealthState
from .kube.client import ClusterClient, KubeError, connect
from .leader import DEFAULT_LEASE_NAME, DEFAULT_LEASE_NAMESPACE, LEASES
from .service import Dispatcher
from .store.engine import make_engine
from .store.migrate import upgrade
from .store.models import WorkloadState
from .store.repo import Repo

__all__ = ["DrillOptions", "HaDrillOptions", "ReplicaSet", "run_drill", "run_leader_kill_drill"]

Obj = dict[str, Any]


@dataclass
class DrillOptions:
    workers: int = 3
    mode: str = "down"
    jobs: int = 100
    lost_timeout: float = 5.0
    json: bool = False
    timeout: float = 300.0


_last_bar: dict[str, int] = {}


def _bar(done: int, total: int, label: str, out: TextIO) -> None:
    """A progress bar on ``out``, redrawn only when it changes."""
    if _last_bar.get(label) == done:
        return
    _last_bar[label] = done
    width = 30
    filled = int(width * done / max(total, 1))
    out.write(f"\r{label:<28} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    out.flush()


def _job(i: int) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"drill-{i:05d}", "namespace": "team-a", "labels": {L.QUEUE_NAME: "user-queue"}},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"sim.dispatcher.io/run-seconds": "3600"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        }
                    ],
                },
            },
        },
    }


class DuplicateSampler:
    """Which workloads run where, read straight from the simulated clusters' stores."""

    def __init__(self, world: Any, origin: str) -> None:
        self.world = world
        self.origin = origin
        self.duplicates: set[str] = set()
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> dict[str, set[str]]:
        running: dict[str, set[str]] = {}
        for cluster in self.world.workers:
            if cluster.down:
                continue  # a cluster that is down runs nothing
            for obj in cluster.store.list("jobs.batch"):
                labels = (obj.get("metadata") or {}).get("labels") or {}
                if labels.get(L.ORIGIN) != self.origin:
                    continue
                if int((obj.get("status") or {}).get("active") or 0) > 0:
                    running.setdefault(labels.get(L.WORKLOAD_UID, ""), set()).add(cluster.name)
        for uid, where in running.items():
            if len(where) > 1:
                self.duplicates.add(uid)
        self.samples += 1
        return running

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(0.05)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def run_drill(options: DrillOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    from .sim.topology import default_topology
    from .sim.world import SimWorld, WorldOptions

    if options.mode not in ("down", "partition", "flaky"):
        print(f"dispatcher drill: --mode must be down, partition or flaky, got {options.mode!r}", file=err)
        return 2
    progress = err
    topo = default_topology()
    # Many small pods per node so that a worker can hold thousands of drill jobs.
    nodes = [dataclasses.replace(g, pods=2000) for g in topo.cpu_worker.nodes]
    topo = dataclasses.replace(topo, cpu_worker=dataclasses.replace(topo.cpu_worker, nodes=nodes))
    world = SimWorld(WorldOptions(workers=options.workers, gpu_workers=0, default_run_seconds=3600.0), topo)
    await world.start()
    report: Obj = {}
    with tempfile.TemporaryDirectory(prefix="dispatcher-drill-") as tmp:
        directory = Path(tmp)
        await asyncio.to_thread(world.write_files, directory)
        loaded = load_config(directory / "clusters.yaml")
        lost_timeout = options.lost_timeout
        policy = Policy(
            admission_timeout=max(60.0, lost_timeout * 4),
            lost_timeout=lost_timeout,
            suspect_after=min(lost_timeout / 2, 10.0),
            finished_retention=3600.0,
            gc_interval=30.0,
        )
        config = dataclasses.replace(
            loaded, policy=policy, database_url=f"sqlite+aiosqlite:///{directory / 'dispatcher.sqlite'}"
        )
        engine = make_engine(config.database_url or "")
        await upgrade(engine)
        repo = Repo(engine)
        dispatcher = Dispatcher(config, repo, probe_interval=min(1.0, lost_timeout / 5))
        sampler = DuplicateSampler(world, config.origin)
        try:
            await dispatcher.start()
            report = await _drill(world, dispatcher, config.manager, options, sampler, progress)
        finally:
            await sampler.stop()
            await dispatcher.stop()
            await engine.dispose()
            await world.stop()
    if options.json:
        json.dump(report, out, indent=2)
        out.write("\n")
    else:
        for key in (
            "mode",
            "victim",
            "jobs",
            "lost_timeout",
            "detection_seconds",
            "replacement_seconds",
            "affected",
            "duplicates",
            "lost",
            "fenced",
            "fence_seconds",
        ):
            print(f"{key:<20} {report.get(key)}", file=out)
        if report.get("note"):
            print(f"\n{report['note']}", file=out)
    return 1 if report.get("duplicates") or report.get("lost") else 0


async def _drill(
    world: Any,
    dispatcher: Dispatcher,
    manager_ref: Any,
    options: DrillOptions,
    sampler: DuplicateSampler,
    progress: TextIO,
) -> Obj:
    manager = await connect("drill", manager_ref)
    try:
        sem = asyncio.Semaphore(32)

        async def submit(i: int) -> None:
            async with sem:
                await manager.create(JobAdapter.resource, "team-a", _job(i))

        await asyncio.gather(*(submit(i) for i in range(options.jobs)))
    finally:
        await manager.close()

    deadline = time.monotonic() + options.timeout
    while True:
        running = sum(1 for lv in dispatcher.live.by_id.values() if lv.state == WorkloadState.RUNNING)
        _bar(running, options.jobs, "jobs running", progress)
        if running >= options.jobs or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    progress.write("\n")

    by_worker: dict[str, list[int]] = {}
    for lv in dispatcher.live.by_id.values():
        if lv.cluster:
            by_worker.setdefault(lv.cluster, []).append(lv.id)
    victim = max(sorted(by_worker), key=lambda w: len(by_worker[w]))
    affected = {wid: dispatcher.live.by_id[wid].generation for wid in by_worker[victim]}
    sampler.start()
    started = time.monotonic()
    fault = {"down": "down", "partition": "partition", "flaky": "flaky"}[options.mode]
    await world.cluster(victim).set_fault(fault, error_rate=0.5)
    detection: float | None = None
    replacement: float | None = None
    note = ""
    while time.monotonic() - started < options.lost_timeout * 3 + 30:
        if dispatcher.capacities[victim].health == HealthState.LOST:
            lost_at = dispatcher.failover.lost_at.get(victim, time.monotonic())
            detection = lost_at - started
            break
        await asyncio.sleep(0.05)
    if detection is None:
        note = f"{victim} was never declared Lost (mode {options.mode}); nothing failed over"
    else:
        lost_at = started + detection
        while time.monotonic() < deadline:
            moved = 0
            for wid, gen in affected.items():
                now_live = dispatcher.live.by_id.get(wid)
                if (
                    now_live is not None
                    and now_live.generation > gen
                    and now_live.state in (WorkloadState.ADMITTED, WorkloadState.RUNNING)
                ):
                    moved += 1
            _bar(moved, len(affected), f"re-placed off {victim}", progress)
            if moved >= len(affected):
                replacement = time.monotonic() - lost_at
                break
            await asyncio.sleep(0.05)
        progress.write("\n")
    # Lost: an affected job not running anywhere (allowing its pods a moment to start after admission).
    uids = {dispatcher.live.by_id[wid].uid for wid in affected if wid in dispatcher.live.by_id}
    missing = len(affected) - len(uids)
    settle = time.monotonic() + 30
    while True:
        not_running = missing + len(uids - set(sampler.sample()))
        if not_running == 0 or time.monotonic() > settle:
            break
        await asyncio.sleep(0.1)
    # Duplicates are judged while the worker is failed; on its return its stale copies are fenced (deleted)
    # before it is trusted, and the time that takes is reported separately.
    await sampler.stop()
    fenced_before = dispatcher.failover.fenced
    healed = time.monotonic()
    await world.cluster(victim).set_fault("none")
    fence_seconds: float | None = None
    if detection is not None:
        end = time.monotonic() + 30
        while time.monotonic() < end and dispatcher.capacities[victim].health != HealthState.READY:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if dispatcher.capacities[victim].health == HealthState.READY:
            fence_seconds = time.monotonic() - healed
    if options.mode == "partition" and sampler.duplicates:
        note = (
            "a partitioned worker keeps running its copies while they run again elsewhere: failover is "
            f"at-least-once there; annotate jobs with {L.NO_FAILOVER}=true to fail them instead"
        )
    return {
        "mode": options.mode,
        "victim": victim,
        "jobs": options.jobs,
        "lost_timeout": options.lost_timeout,
        "detection_seconds": round(detection, 3) if detection is not None else None,
        "replacement_seconds": round(replacement, 3) if replacement is not None else None,
        "affected": len(affected) if detection is not None else 0,
        "duplicates": len(sampler.duplicates),
        "lost": not_running if detection is not None else 0,
        "fenced": dispatcher.failover.fenced - fenced_before,
        "fence_seconds": round(fence_seconds, 3) if fence_seconds is not None else None,
        "samples": sampler.samples,
        "note": note,
    }


# -- leader-kill: several replicas, the leader SIGKILLed ----------------------------------------


JOBS = JobAdapter.resource


@dataclass
class HaDrillOptions:
    db_url: str
    replicas: int = 2
    jobs: int = 100
    workers: int = 3
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    run_seconds: float = 2.0
    json: bool = False
    timeout: float = 300.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ReplicaSet:
    """``dispatcher run --leader-elect`` child processes sharing one configuration and database."""

    config_path: Path
    log_dir: Path
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    namespace: str = DEFAULT_LEASE_NAMESPACE
    name: str = DEFAULT_LEASE_NAME
    procs: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    _http: aiohttp.ClientSession | None = None

    async def start(self, identity: str) -> None:
        port = _free_port()
        log = (self.log_dir / f"{identity}.log").open("ab")
        try:
            self.procs[identity] = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "dispatcher", "run", "--config", str(self.config_path),
                "--api-listen", f"127.0.0.1:{port}", "--log-level", "info",
                "--leader-elect", "--leader-elect-identity", identity,
                "--leader-elect-resource-namespace", self.namespace, "--leader-elect-resource-name", self.name,
                "--leader-elect-lease-duration", f"{self.lease_duration:g}",
                "--leader-elect-renew-deadline", f"{self.renew_deadline:g}",
                "--leader-elect-retry-period", f"{self.retry_period:g}",
                stdout=asyncio.subprocess.DEVNULL, stderr=log,
            )  # fmt: skip
        finally:
            log.close()
        self.ports[identity] = port

    def signal(self, identity: str, sig: int) -> None:
        proc = self.procs[identity]
        if proc.returncode is None:
            proc.send_signal(sig)

    async def readyz(self, identity: str) -> Obj | None:
        """The replica's /readyz body (None when it does not answer)."""
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0))
        try:
            async with self._http.get(f"http://127.0.0.1:{self.ports[identity]}/readyz") as resp:
                body: Obj = await resp.json()
                return body
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
            return None

    async def leaders(self) -> list[str]:
        """The replicas that say they lead (their /readyz ``leader``)."""
        out = []
        for identity, proc in self.procs.items():
            if proc.returncode is not None:
                continue
            body = await self.readyz(identity)
            if body is not None and body.get("leader"):
                out.append(identity)
        return out

    async def lease(self, manager: ClusterClient) -> Obj | None:
        try:
            return await manager.get(LEASES, self.namespace, self.name)
        except KubeError:
            return None

    async def stop(self) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGCONT)
                    proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self._http is not None:
            await self._http.close()
            self._http = None


async def wait_for(probe: Any, what: str, timeout: float, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await probe()
        if value:
            return value
        await asyncio.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")


def drill_job(i: int, seconds: float, prefix: str = "ha") -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{prefix}-{i:05d}", "namespace": "team-a", "labels": {L.QUEUE_NAME: "user-queue"}},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"sim.dispatcher.io/run-seconds": f"{seconds:g}"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "100m"}}}
                    ],
                },
            },
        },
    }


class CopySampler:
    """Running copies per workload across the workers, through their APIs (every 100 ms)."""

    def __init__(self, workers: dict[str, ClusterClient]) -> None:
        self.workers = workers
        self.duplicates: set[str] = set()
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    async def sample(self) -> None:
        running: dict[str, set[str]] = {}
        lists = await asyncio.gather(
            *(c.list(JOBS, "team-a", label_selector=L.ORIGIN) for c in self.workers.values()), return_exceptions=True
        )
        for name, listed in zip(self.workers, lists, strict=True):
            if isinstance(listed, BaseException):
                continue
            for obj in listed.get("items") or []:
                if int((obj.get("status") or {}).get("active") or 0) > 0:
                    running.setdefault(obj["metadata"]["labels"].get(L.WORKLOAD_UID, ""), set()).add(name)
        self.duplicates |= {uid for uid, where in running.items() if len(where) > 1}
        self.samples += 1

    async def _run(self) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(0.1)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def completed(self) -> dict[str, list[str]]:
        """Workload uid -> the workers where a copy of it completed."""
        out: dict[str, list[str]] = {}
        for name, client in self.workers.items():
            items, _ = await client.list_all(JOBS, "team-a", label_selector=L.ORIGIN)
            for obj in items:
                done = any(
                    c.get("type") == "Complete" and c.get("status") == "True"
                    for c in (obj.get("status") or {}).get("conditions") or []
                )
                if done:
                    out.setdefault(obj["metadata"]["labels"][L.WORKLOAD_UID], []).append(name)
        return out


async def fresh_database(base_url: str, suffix: str) -> str:
    """A new, empty PostgreSQL database on the server of ``base_url`` (named after it and ``suffix``)."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    url = make_url(base_url)
    name = f"{url.database or 'dispatcher'}_{suffix}"[:63]
    admin = make_engine(base_url, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0)
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        await admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


async def drop_database(base_url: str, url: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    name = make_url(url).database
    admin = make_engine(base_url, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0)
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


@dataclass
class HaWorld:
    """Simulated clusters, a fresh database, clients, and a :class:`ReplicaSet` (not started)."""

    world: Any
    db_url: str
    repo: Repo
    manager: ClusterClient
    workers: dict[str, ClusterClient]
    replicas: ReplicaSet


@contextlib.asynccontextmanager
async def ha_world(
    directory: Path,
    base_db_url: str,
    *,
    workers: int = 3,
    lease_duration: float = 15.0,
    renew_deadline: float = 10.0,
    retry_period: float = 2.0,
    run_seconds: float = 2.0,
) -> Any:
    from .sim.world import SimWorld, WorldOptions

    world = SimWorld(WorldOptions(workers=workers, gpu_workers=0, default_run_seconds=run_seconds))
    await world.start()
    db_url = await fresh_database(base_db_url, f"ha_{os.getpid()}_{int(time.time() * 1000) % 10**8}")
    clients: list[ClusterClient] = []
    engine = make_engine(db_url)
    replicas: ReplicaSet | None = None
    try:
        await asyncio.to_thread(world.write_files, directory)
        world.manager.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DEFAULT_LEASE_NAMESPACE}})
        raw = yaml.safe_load((directory / "clusters.yaml").read_text())
        raw["policy"] = {"admissionTimeout": "60s", "lostTimeout": "30s", "finishedRetention": "1h", "gcInterval": "5s"}
        raw["database"] = {"url": db_url}
        config_path = directory / "ha-clusters.yaml"
        config_path.write_text(yaml.safe_dump(raw))
        config = load_config(config_path)
        await upgrade(engine)
        manager = await connect("ha-manager", config.manager)
        clients.append(manager)
        worker_clients = {w.name: await connect(f"ha-{w.name}", w.kube) for w in config.workers}
        clients.extend(worker_clients.values())
        replicas = ReplicaSet(
            config_path,
            directory,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
        )
        yield HaWorld(world, db_url, Repo(engine), manager, worker_clients, replicas)
    finally:
        if replicas is not None:
            await replicas.stop()
        for c in clients:
            await c.close()
        await engine.dispose()
        await world.stop()
        await drop_database(base_db_url, db_url)


async def wait_leading(ha: HaWorld, identity: str, timeout: float) -> int:
    """Wait until ``identity`` holds the Lease and has taken its term in SQL; returns the term."""

    async def probe() -> int | None:
        lease = await ha.replicas.lease(ha.manager)
        term, holder, _ = await ha.repo.leadership()
        if lease and (lease.get("spec") or {}).get("holderIdentity") == identity and holder == identity:
            return term
        return None

    term: int = await wait_for(probe, f"{identity} leading", timeout)
    return term


async def _leader_kill(ha: HaWorld, options: HaDrillOptions, progress: TextIO) -> Obj:
    names = [f"replica-{i}" for i in range(options.replicas)]
    await ha.replicas.start(names[0])
    await wait_leading(ha, names[0], 60)
    for name in names[1:]:
        await ha.replicas.start(name)

    async def all_ready() -> bool:
        bodies = [await ha.replicas.readyz(n) for n in names]
        return all(b is not None and b.get("status") == "ready" for b in bodies)

    await wait_for(all_ready, "every replica ready", 60)
    sampler = CopySampler(ha.workers)
    sampler.start()
    sem = asyncio.Semaphore(16)
    pace = max(0.02, min(0.1, 10.0 / options.jobs))

    async def submit(i: int) -> None:
        async with sem:
            for _ in range(50):
                try:
                    await ha.manager.create(JOBS, "team-a", drill_job(i, options.run_seconds))
                    return
                except KubeError as exc:
                    if exc.already_exists:
                        return
                    await asyncio.sleep(0.2)

    kill_at = max(1, options.jobs // 3)
    submissions: list[asyncio.Task[None]] = []
    killed = ""
    killed_mono = 0.0
    killed_wall = datetime.now(UTC)
    term_before = 0
    for i in range(options.jobs):
        submissions.append(asyncio.create_task(submit(i)))
        if i + 1 == kill_at:
            lease = await ha.replicas.lease(ha.manager)
            killed = str(((lease or {}).get("spec") or {}).get("holderIdentity") or names[0])
            term_before, _, _ = await ha.repo.leadership()
            killed_mono, killed_wall = time.monotonic(), datetime.now(UTC)
            ha.replicas.signal(killed, signal.SIGKILL)
            progress.write(f"SIGKILL {killed} after {kill_at} jobs\n")
        await asyncio.sleep(pace)
    await asyncio.gather(*submissions)

    takeover: float | None = None
    new_leader = ""

    async def taken_over() -> bool:
        nonlocal takeover, new_leader
        term, holder, _ = await ha.repo.leadership()
        if term > term_before:
            takeover = time.monotonic() - killed_mono
            new_leader = holder or ""
            return True
        return False

    with contextlib.suppress(TimeoutError):
        await wait_for(taken_over, "a new leader", options.lease_duration * 4 + 30, interval=0.02)
    first_placement: float | None = None

    async def placed_after_kill() -> Any:
        from sqlalchemy import func, select

        from .store.models import Placement

        async with ha.repo.sessions() as s:
            return (
                await s.execute(select(func.min(Placement.created_at)).where(Placement.created_at > killed_wall))
            ).scalar_one_or_none()

    with contextlib.suppress(TimeoutError):
        first = await wait_for(placed_after_kill, "a placement after the kill", 60, interval=0.1)
        first_placement = (first - killed_wall).total_seconds()

    deadline = time.monotonic() + options.timeout
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        counts = await ha.repo.count_by_state()
        done = counts.get(WorkloadState.SUCCEEDED, 0)
        progress.write(f"\rjobs succeeded {done}/{options.jobs}")
        progress.flush()
        if done >= options.jobs:
            break
        await asyncio.sleep(0.5)
    progress.write("\n")
    await sampler.stop()
    completed = await sampler.completed()
    succeeded = counts.get(WorkloadState.SUCCEEDED, 0)
    twice = {uid for uid, where in completed.items() if len(where) > 1}
    return {
        "mode": "leader-kill",
        "replicas": options.replicas,
        "jobs": options.jobs,
        "lease_duration": options.lease_duration,
        "renew_deadline": options.renew_deadline,
        "retry_period": options.retry_period,
        "killed": killed,
        "new_leader": new_leader,
        "takeover_seconds": round(takeover, 3) if takeover is not None else None,
        "first_placement_seconds": round(first_placement, 3) if first_placement is not None else None,
        "duplicates": len(sampler.duplicates | twice),
        "lost": options.jobs - succeeded,
        "jobs_succeeded": succeeded,
        "completed_more_than_once": len(twice),
        "samples": sampler.samples,
    }


async def run_leader_kill_drill(options: HaDrillOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    with tempfile.TemporaryDirectory(prefix="dispatcher-ha-drill-") as tmp:
        async with ha_world(
            Path(tmp),
            options.db_url,
            workers=options.workers,
            lease_duration=options.lease_duration,
            renew_deadline=options.renew_deadline,
            retry_period=options.retry_period,
            run_seconds=options.run_seconds,
        ) as ha:
            report = await _leader_kill(ha, options, err)
    if options.json:
        json.dump(report, out, indent=2)
        out.write("\n")
    else:
        for key, value in report.items():
            print(f"{key:<26} {value}", file=out)
    return 1 if report.get("duplicates") or report.get("lost") else 0


def median(values: list[float]) -> float:
    return float(statistics.median(values))
