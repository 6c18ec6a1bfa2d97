"""``dispatcher drill --sim --mode leader-kill``: several replicas on one PostgreSQL, the leader SIGKILLed.

Simulated clusters run in this process; the replicas are ``dispatcher run --leader-elect`` child processes on a
fresh PostgreSQL database (created next to the one given, dropped at the end). The first replica leads; once the
others are ready (informers warm), N short jobs are submitted at a steady pace and the leader is SIGKILLed when a
third of them are in. Report:

- ``takeover_seconds``: from the kill to the new leader's first action (its fencing-term bump in SQL, the first
  write of a takeover); ``first_placement_seconds``: from the kill to the first placement recorded after it;
- ``duplicates``: jobs seen running on two workers at the same instant (workers sampled through their APIs
  every 100 ms), or completed on more than one; ``lost``: jobs that did not succeed; ``jobs_succeeded``.

The exit code is non-zero when a duplicate or a loss happened. :class:`ReplicaSet` is also the harness of the
HA tests (``tests/service/test_ha.py``). The worker-loss drills are in :mod:`.drill`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import aiohttp
import yaml

from kubecommon.tasks import cancel_and_wait

from . import labels as L
from .adapters.job import JobAdapter
from .config import KubeconfigRef, load_config
from .drill import drill_job as job_named
from .kube.client import ClusterClient, KubeError, connect
from .leader import DEFAULT_LEASE_NAME, DEFAULT_LEASE_NAMESPACE, LEASES
from .store.engine import make_engine
from .store.migrate import upgrade
from .store.models import WorkloadState
from .store.repo import Repo

__all__ = ["HaDrillOptions", "ReplicaSet", "run_leader_kill_drill"]

Obj = dict[str, Any]
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
                async with asyncio.timeout(20):
                    await proc.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self._http is not None:
            await self._http.close()
            self._http = None


async def wait_for(
    probe: Any, what: str, timeout: float, interval: float = 0.05, state: Callable[[], Awaitable[Any]] | None = None
) -> Any:
    """Poll ``probe`` until it returns something true. On a timeout the error names ``what`` it waited for and,
    with ``state``, what ``state()`` saw then (so that a failure under load says why, not only that)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await probe()
        if value:
            return value
        await asyncio.sleep(interval)
    seen = ""
    if state is not None:
        try:
            seen = f"; seen then: {await state()}"
        except Exception as exc:  # the diagnosis must not hide the timeout
            seen = f"; reading the state failed: {exc!r}"
    raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}{seen}")


async def sessions_in_transaction(repo: Repo) -> list[dict[str, Any]]:
    """The database's other sessions inside a transaction (PostgreSQL): state, wait, blockers, last query."""
    from sqlalchemy import text

    async with repo.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT pid, application_name, state, wait_event_type, wait_event, pg_blocking_pids(pid) AS blocked_by,"
                " round(extract(epoch FROM now() - xact_start)::numeric, 3)::float8 AS xact_seconds,"
                " round(extract(epoch FROM now() - state_change)::numeric, 3)::float8 AS state_seconds,"
                " left(query, 160) AS query"
                " FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND xact_start IS NOT NULL ORDER BY xact_start"
            )
        )
        return [dict(r._mapping) for r in rows]


def drill_job(i: int, seconds: float, prefix: str = "ha") -> Obj:
    return job_named(f"{prefix}-{i:05d}", seconds=seconds, cpu="100m")


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
            await cancel_and_wait([self._task], what="HA drill sampler")

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
    rig: Path | None = None,
) -> Any:
    """Clusters, a fresh database and replicas. The clusters are simulated (started here), or those of a running
    ``dispatcher rig up`` in ``rig`` (its ``clusters.yaml`` for the replicas, its administrator kubeconfigs for
    the drill's own clients)."""
    world: Any = None
    source = rig or directory
    if rig is None:
        from kubesim.world import SimWorld, WorldOptions

        world = SimWorld(WorldOptions(workers=workers, gpu_workers=0, default_run_seconds=run_seconds))
        await world.start()
    db_url = await fresh_database(base_db_url, f"ha_{os.getpid()}_{int(time.time() * 1000) % 10**8}")
    clients: list[ClusterClient] = []
    engine = make_engine(db_url)
    replicas: ReplicaSet | None = None
    try:
        if world is not None:
            await asyncio.to_thread(world.write_files, directory)
            world.manager.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DEFAULT_LEASE_NAMESPACE}}
            )
        raw = yaml.safe_load((source / "clusters.yaml").read_text())
        raw["workers"] = raw["workers"][:workers]
        raw["policy"] = {"admissionTimeout": "60s", "lostTimeout": "30s", "finishedRetention": "1h", "gcInterval": "5s"}
        raw["database"] = {"url": db_url}
        config_path = directory / "ha-clusters.yaml"
        config_path.write_text(yaml.safe_dump(raw))
        config = load_config(config_path)
        await upgrade(engine)

        def admin(name: str, ref: KubeconfigRef) -> KubeconfigRef:
            return KubeconfigRef(path=str(source / f"{name}.kubeconfig")) if rig is not None else ref

        manager = await connect("ha-manager", admin("manager", config.manager))
        clients.append(manager)
        worker_clients = {w.name: await connect(f"ha-{w.name}", admin(w.name, w.kube)) for w in config.workers}
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
        if world is not None:
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

    async def state() -> Obj:
        lease = await ha.replicas.lease(ha.manager)
        return {
            "lease": (lease or {}).get("spec"),
            "leadership": await ha.repo.leadership(),
            "sessions_in_transaction": await sessions_in_transaction(ha.repo),
        }

    term: int = await wait_for(probe, f"{identity} leading", timeout, state=state)
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
