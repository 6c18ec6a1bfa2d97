"""Failover drills: lose a worker under load and measure what the dispatcher does.

Two ways to run one, with the same measurement and the same report:

- ``dispatcher drill --sim`` starts simulated clusters and a dispatcher of its own (SQLite in a temporary
  directory) and watches that dispatcher from inside.
- ``dispatcher drill --config clusters.yaml --api URL --cluster NAME`` drives a dispatcher that is already
  running: it submits the drill's Jobs to the manager named in ``clusters.yaml``, follows the workloads and
  the worker's health through the dispatcher's REST API, and watches the copies on every worker with the
  worker kubeconfigs of ``clusters.yaml``. The fault is made by the simulator's admin endpoint (found in the
  ``sim.json`` that ``dispatcher sim up`` writes beside ``clusters.yaml``, or ``--sim-admin``), by
  ``--fault-command``/``--heal-command`` (e.g. ``docker stop``/``docker start`` of a kind control plane), or
  by the operator: the drill then waits until the worker stops answering and counts from there.

The faults:

- ``down``: the whole cluster is down (its API refuses connections and nothing runs there);
- ``partition``: the cluster accepts connections and never answers, and keeps running its pods;
- ``flaky``: half of its API calls fail with 500/429.

The report: ``detection_seconds`` (fault to Lost), ``replacement_seconds`` (Lost to every affected job
admitted elsewhere), ``affected``, ``duplicates`` (jobs seen running on two clusters at the same instant,
sampled every 50 ms), ``overlap_seconds`` / ``overlap_seconds_max`` (for how long, summed over the jobs and for
the worst one: the GPU time run twice), ``lost`` (affected jobs not running anywhere at the end), and on the
worker's return ``fenced`` (stale copies deleted there) and ``fence_seconds``. The exit code is non-zero when a
duplicate or a loss happened. A partitioned cluster keeps running what it has, so ``partition`` shows the at-least-once
limit of failover (see :mod:`.failover`); against real clusters a partitioned worker cannot be looked into,
so only the copies on workers that answer are compared.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import secrets
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO

import aiohttp

from . import labels as L
from .adapters.job import JobAdapter
from .config import ConfigError, DispatcherConfig, Policy, load_config
from .health import HealthState
from .kube.client import ClusterClient, KubeError, connect
from .kube.informer import Informer
from .logs import redact_text
from .remote import ApiError, call_api
from .service import Dispatcher
from .store.engine import make_engine
from .store.migrate import upgrade
from .store.models import WorkloadState
from .store.repo import Repo

__all__ = ["DrillError", "DrillOptions", "drill_job", "run_drill", "run_remote_drill"]

Obj = dict[str, Any]
MODES = ("down", "partition", "flaky")
REPORT_KEYS = (
    "mode",
    "victim",
    "jobs",
    "lost_timeout",
    "detection_seconds",
    "replacement_seconds",
    "affected",
    "duplicates",
    "overlap_seconds",
    "overlap_seconds_max",
    "lost",
    "fenced",
    "fence_seconds",
)


class DrillError(Exception):
    """The drill cannot run as asked (its message names the option or the cluster)."""


@dataclass
class DrillOptions:
    workers: int = 3
    mode: str = "down"
    jobs: int = 100
    lost_timeout: float = 5.0
    json: bool = False
    timeout: float = 300.0
    # Against a running dispatcher (``--config/--api/--cluster``):
    config: str | None = None
    api: str | None = None
    token: str | None = None
    cluster: str | None = None
    namespace: str = "team-a"
    queue: str = "user-queue"
    sim_admin: str | None = None
    fault_command: str | None = None
    heal_command: str | None = None
    keep: bool = False


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


def drill_job(
    name: str,
    *,
    seconds: float = 3600.0,
    cpu: str = "10m",
    namespace: str = "team-a",
    queue: str = "user-queue",
) -> Obj:
    """A suspended Job of the drills and benchmarks: ``sleep`` for ``seconds`` on a real cluster, the same simulated
    run time on the simulator."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {L.QUEUE_NAME: queue}},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"sim.dispatcher.io/run-seconds": f"{seconds:g}"}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "command": ["sleep", f"{seconds:g}"],
                            "resources": {"requests": {"cpu": cpu, "memory": "16Mi"}},
                        }
                    ],
                },
            },
        },
    }


# -- what the dispatcher says --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One workload as the dispatcher shows it."""

    uid: str
    name: str
    state: str
    cluster: str | None
    generation: int


class Observer(Protocol):
    """The dispatcher under drill, as seen from outside (its API) or inside (its memory)."""

    async def workloads(self) -> list[Seen]: ...

    async def health(self, cluster: str) -> str: ...

    def lost_at(self, cluster: str) -> float | None:
        """Monotonic time the worker was declared Lost, where the observer knows it exactly."""

    async def fenced(self) -> int | None: ...


class LocalObserver:
    """A dispatcher in this process."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    async def workloads(self) -> list[Seen]:
        return [
            Seen(lv.uid, lv.name, lv.state, lv.cluster, lv.generation) for lv in self.dispatcher.live.by_id.values()
        ]

    async def health(self, cluster: str) -> str:
        return str(self.dispatcher.capacities[cluster].health)

    def lost_at(self, cluster: str) -> float | None:
        return self.dispatcher.failover.lost_at.get(cluster)

    async def fenced(self) -> int | None:
        return self.dispatcher.failover.fenced


class ApiObserver:
    """A running dispatcher, through its REST API (``/api/v1/workloads``, ``/api/v1/clusters``, ``/metrics``)."""

    def __init__(self, base: str, token: str | None, namespace: str) -> None:
        self.base = base
        self.token = token
        self.namespace = namespace

    async def workloads(self) -> list[Seen]:
        out: list[Seen] = []
        token: str | None = None
        while True:
            path = f"/api/v1/workloads?namespace={self.namespace}&limit=1000"
            if token:
                path += f"&continue={token}"
            body = await call_api(self.base, "GET", path, token=self.token)
            for w in body.get("items") or []:
                out.append(
                    Seen(
                        str(w.get("uid")),
                        str(w.get("name")),
                        str(w.get("state")),
                        w.get("cluster"),
                        int(w.get("generation") or 0),
                    )
                )
            token = body.get("continue")
            if not token:
                return out

    async def health(self, cluster: str) -> str:
        body = await call_api(self.base, "GET", f"/api/v1/clusters/{cluster}", token=self.token)
        return str(body.get("health"))

    async def lost_timeout(self) -> float:
        """The running dispatcher's own ``policy.lostTimeout`` (the drill waits by it, not by a guess)."""
        body = await call_api(self.base, "GET", "/api/v1/policy", token=self.token)
        return float(body["lostTimeoutSeconds"])

    def lost_at(self, cluster: str) -> float | None:
        return None

    async def fenced(self) -> int | None:
        """The sum of ``kueue_dispatcher_fenced_copies_total`` over workers, from ``/metrics``."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
                session.get(self.base.rstrip("/") + "/metrics", headers=headers) as resp,
            ):
                text = await resp.text()
        except (aiohttp.ClientError, TimeoutError):
            return None
        total = 0.0
        found = False
        for line in text.splitlines():
            if line.startswith("kueue_dispatcher_fenced_copies_total{"):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        return int(total) if found else None


# -- what the clusters run -----------------------------------------------------------------------------------


class CopySampler(Protocol):
    """Which workloads run where, as the clusters themselves show it."""

    duplicates: set[str]
    overlap: dict[str, float]
    samples: int

    def sample(self) -> dict[str, set[str]]: ...

    def hide(self, cluster: str | None) -> None:
        """Stop (or, with None, resume) reading ``cluster``: its answers cannot be trusted while it is failed."""


class _Sampler:
    """The periodic part: sample every 50 ms, remember every workload seen running on two clusters."""

    #: A pause between two samples longer than this (a stalled event loop) counts only this much overlap.
    MAX_STEP = 0.5

    def __init__(self) -> None:
        self.duplicates: set[str] = set()
        #: Per workload uid, the seconds two or more of its copies were seen running at once: what a duplicate
        #: costs (GPU time spent twice, two writers to one checkpoint), not only that it happened.
        self.overlap: dict[str, float] = {}
        self.samples = 0
        self.hidden: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._last = 0.0

    def running(self) -> dict[str, set[str]]:
        raise NotImplementedError

    def sample(self) -> dict[str, set[str]]:
        running = self.running()
        now = time.monotonic()
        step = min(now - self._last, self.MAX_STEP) if self._last else 0.0
        self._last = now
        for uid, where in running.items():
            if len(where) > 1:
                self.duplicates.add(uid)
                # Seen overlapping now: count the time since the previous sample (it began at most that long ago).
                self.overlap[uid] = self.overlap.get(uid, 0.0) + step
        self.samples += 1
        return running

    def hide(self, cluster: str | None) -> None:
        self.hidden = cluster

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
            self._task = None


def _running_copies(objs: Any, origin: str, cluster: str, into: dict[str, set[str]]) -> None:
    for obj in objs:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if labels.get(L.ORIGIN) != origin:
            continue
        if int((obj.get("status") or {}).get("active") or 0) > 0:
            into.setdefault(labels.get(L.WORKLOAD_UID, ""), set()).add(cluster)


class DuplicateSampler(_Sampler):
    """Straight from the simulated clusters' stores: a partitioned worker is still looked into."""

    def __init__(self, world: Any, origin: str) -> None:
        super().__init__()
        self.world = world
        self.origin = origin

    def running(self) -> dict[str, set[str]]:
        running: dict[str, set[str]] = {}
        for cluster in self.world.workers:
            if cluster.down:
                continue  # a cluster that is down runs nothing
            _running_copies(cluster.store.list("jobs.batch"), self.origin, cluster.name, running)
        return running


class KubeSampler(_Sampler):
    """Through the workers' API servers: an informer per worker on the Jobs with the dispatcher's origin.

    A failed worker is hidden: its informer's cache holds what it ran before the fault, and a real cluster
    that is down or partitioned cannot be looked into.
    """

    def __init__(self, clients: dict[str, ClusterClient], origin: str) -> None:
        super().__init__()
        self.origin = origin
        self.informers = {
            name: Informer(
                client,
                JobAdapter.resource,
                lambda kind, obj, old: None,
                label_selector=f"{L.ORIGIN}={origin}",
                idle_timeout=10.0,
            )
            for name, client in clients.items()
        }
        for inf in self.informers.values():
            inf.start()

    def running(self) -> dict[str, set[str]]:
        running: dict[str, set[str]] = {}
        for name, inf in self.informers.items():
            if name != self.hidden:
                _running_copies(inf.cache.values(), self.origin, name, running)
        return running

    async def close(self) -> None:
        await self.stop()
        for inf in self.informers.values():
            await inf.stop()


# -- the fault -----------------------------------------------------------------------------------------------


class Fault(Protocol):
    async def inject(self) -> float:
        """Fail the worker; the monotonic time the fault began."""

    async def heal(self) -> None: ...


class SimFault:
    """A fault of a simulated cluster in this process."""

    def __init__(self, cluster: Any, mode: str) -> None:
        self.cluster = cluster
        self.mode = mode

    async def inject(self) -> float:
        started = time.monotonic()
        await self.cluster.set_fault(self.mode, error_rate=0.5)
        return started

    async def heal(self) -> None:
        await self.cluster.set_fault("none")


class AdminFault:
    """A fault of a simulated cluster of ``dispatcher sim up``, through its admin endpoint."""

    def __init__(self, admin: str, cluster: str, mode: str) -> None:
        self.admin = admin
        self.cluster = cluster
        self.mode = mode

    async def _set(self, body: Obj) -> None:
        url = f"{self.admin.rstrip('/')}/clusters/{self.cluster}/fault"
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
                session.post(url, json=body) as resp,
            ):
                if resp.status >= 400:
                    raise DrillError(f"the simulator's admin endpoint refused the fault: {await resp.text()}")
        except aiohttp.ClientError as exc:
            raise DrillError(f"cannot reach the simulator's admin endpoint {self.admin}: {exc}") from None

    async def inject(self) -> float:
        started = time.monotonic()
        await self._set({"mode": self.mode, "errorRate": 0.5})
        return started

    async def heal(self) -> None:
        await self._set({"mode": "none"})


async def _shell(command: str, what: str) -> None:
    proc = await asyncio.create_subprocess_shell(
        command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    if proc.returncode:
        # The command and its output are the operator's, and may quote a token: redacted like a log line.
        said = out.decode(errors="replace")[-500:]
        raise DrillError(redact_text(f"{what} {command!r} exited with {proc.returncode}: {said}"))


class CommandFault:
    """A fault made by the operator's commands (``--fault-command``, ``--heal-command``)."""

    def __init__(self, inject_command: str, heal_command: str | None) -> None:
        self.inject_command = inject_command
        self.heal_command = heal_command

    async def inject(self) -> float:
        started = time.monotonic()
        await _shell(self.inject_command, "--fault-command")
        return started

    async def heal(self) -> None:
        if self.heal_command:
            await _shell(self.heal_command, "--heal-command")


class ManualFault:
    """The operator fails the worker by hand; the fault begins when the worker first stops answering."""

    def __init__(self, client: ClusterClient, name: str, progress: TextIO, timeout: float) -> None:
        self.client = client
        self.name = name
        self.progress = progress
        self.timeout = timeout

    async def inject(self) -> float:
        self.progress.write(
            f"\nnow make worker {self.name} fail (for kind: kind/drill.sh {self.name}); "
            f"waiting up to {self.timeout:g}s for it to stop answering\n"
        )
        self.progress.flush()
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            probed = time.monotonic()
            if not await self.client.readyz(timeout=1.0):
                return probed
            await asyncio.sleep(0.2)
        raise DrillError(f"worker {self.name} kept answering for {self.timeout:g}s; no fault to measure")

    async def heal(self) -> None:
        self.progress.write(f"bring worker {self.name} back now; waiting for the dispatcher to trust it again\n")
        self.progress.flush()


# -- the drill -----------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """What one drill needs, wherever the dispatcher runs."""

    observer: Observer
    sampler: _Sampler
    fault_for: Callable[[str], Fault]
    submit: Callable[[list[str]], Awaitable[None]]
    prefix: str
    workers: list[str]
    heal_wait: float = 30.0


async def _drill(plan: Plan, options: DrillOptions, progress: TextIO) -> Obj:
    names = [f"{plan.prefix}{i:05d}" for i in range(options.jobs)]
    await plan.submit(names)
    mine = set(names)

    async def drill_workloads() -> list[Seen]:
        return [s for s in await plan.observer.workloads() if s.name in mine]

    deadline = time.monotonic() + options.timeout
    while True:
        seen = await drill_workloads()
        running = sum(1 for s in seen if s.state == WorkloadState.RUNNING)
        _bar(running, options.jobs, "jobs running", progress)
        if running >= options.jobs or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    progress.write("\n")

    by_worker: dict[str, list[Seen]] = {}
    for s in seen:
        if s.cluster and s.state in WorkloadState.ACTIVE:
            by_worker.setdefault(s.cluster, []).append(s)
    if options.cluster:
        victim = options.cluster
    elif by_worker:
        victim = max(sorted(by_worker), key=lambda w: len(by_worker[w]))
    else:
        raise DrillError(f"none of the {options.jobs} drill jobs was placed within {options.timeout:g}s")
    affected = {s.uid: s.generation for s in by_worker.get(victim, [])}
    if not affected:
        raise DrillError(f"worker {victim} holds none of the drill's jobs; nothing to fail over")
    plan.sampler.start()
    fault = plan.fault_for(victim)
    started = await fault.inject()
    plan.sampler.hide(victim)
    fenced_before = await plan.observer.fenced()
    detection: float | None = None
    replacement: float | None = None
    note = ""
    while time.monotonic() - started < options.lost_timeout * 3 + 30:
        if await plan.observer.health(victim) == HealthState.LOST:
            lost_at = plan.observer.lost_at(victim) or time.monotonic()
            detection = lost_at - started
            break
        await asyncio.sleep(0.05)
    not_running = 0
    if detection is None:
        note = f"{victim} was never declared Lost (mode {options.mode}); nothing failed over"
    else:
        lost_at = started + detection
        while time.monotonic() < deadline:
            moved = 0
            for s in await drill_workloads():
                gen = affected.get(s.uid)
                if (
                    gen is not None
                    and s.generation > gen
                    and s.cluster != victim
                    and s.state in (WorkloadState.ADMITTED, WorkloadState.RUNNING)
                ):
                    moved += 1
            _bar(moved, len(affected), f"re-placed off {victim}", progress)
            if moved >= len(affected):
                replacement = time.monotonic() - lost_at
                break
            await asyncio.sleep(0.05)
        progress.write("\n")
        # Lost: an affected job not running anywhere (allowing its pods a moment to start after admission).
        settle = time.monotonic() + 30
        while True:
            not_running = len(set(affected) - set(plan.sampler.sample()))
            if not_running == 0 or time.monotonic() > settle:
                break
            await asyncio.sleep(0.1)
    # Duplicates are judged while the worker is failed; on its return its stale copies are fenced (deleted)
    # before it is trusted, and the time that takes is reported separately.
    await plan.sampler.stop()
    healed = time.monotonic()
    await fault.heal()
    fence_seconds: float | None = None
    if detection is not None:
        end = time.monotonic() + plan.heal_wait
        while time.monotonic() < end and await plan.observer.health(victim) != HealthState.READY:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if await plan.observer.health(victim) == HealthState.READY:
            fence_seconds = time.monotonic() - healed
    fenced_after = await plan.observer.fenced()
    if options.mode == "partition" and plan.sampler.duplicates:
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
        "duplicates": len(plan.sampler.duplicates),
        "overlap_seconds": round(sum(plan.sampler.overlap.values()), 2),
        "overlap_seconds_max": round(max(plan.sampler.overlap.values(), default=0.0), 2),
        "lost": not_running,
        "fenced": fenced_after - fenced_before if fenced_after is not None and fenced_before is not None else None,
        "fence_seconds": round(fence_seconds, 3) if fence_seconds is not None else None,
        "samples": plan.sampler.samples,
        "note": note,
    }


def _print_report(report: Obj, options: DrillOptions, out: TextIO) -> int:
    if options.json:
        json.dump(report, out, indent=2)
        out.write("\n")
    else:
        for key in REPORT_KEYS:
            print(f"{key:<20} {report.get(key)}", file=out)
        if report.get("note"):
            print(f"\n{report['note']}", file=out)
    if report.get("detection_seconds") is None or report.get("replacement_seconds") is None:
        # A drill passes only on what it saw: the worker declared Lost and every affected job running elsewhere.
        unseen = (
            "the worker was never declared Lost"
            if report.get("detection_seconds") is None
            else ("not every affected job was seen running elsewhere")
        )
        print(f"dispatcher drill: FAILED: {unseen} within the drill's time", file=out)
        return 1
    return 1 if report.get("duplicates") or report.get("lost") else 0


async def _submit_to(manager: ClusterClient, namespace: str, queue: str, names: list[str]) -> None:
    sem = asyncio.Semaphore(32)

    async def one(name: str) -> None:
        async with sem:
            await manager.create(JobAdapter.resource, namespace, drill_job(name, namespace=namespace, queue=queue))

    await asyncio.gather(*(one(n) for n in names))


async def run_drill(options: DrillOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """``dispatcher drill --sim``: simulated clusters and a dispatcher of this process."""
    from .sim.topology import default_topology
    from .sim.world import SimWorld, WorldOptions

    if options.mode not in MODES:
        print(f"dispatcher drill: --mode must be down, partition or flaky, got {options.mode!r}", file=err)
        return 2
    topo = default_topology()
    # Many small pods per node so that a worker can hold thousands of drill jobs.
    nodes = [dataclasses.replace(g, pods=2000) for g in topo.cpu_worker.nodes]
    topo = dataclasses.replace(topo, cpu_worker=dataclasses.replace(topo.cpu_worker, nodes=nodes))
    world = SimWorld(WorldOptions(workers=options.workers, gpu_workers=0, default_run_seconds=3600.0), topo)
    await world.start()
    report: Obj = {}
    try:
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
            dispatcher = Dispatcher(config, Repo(engine), probe_interval=min(1.0, lost_timeout / 5))
            sampler = DuplicateSampler(world, config.origin)
            manager = await connect("drill", config.manager)
            try:
                await dispatcher.start()
                plan = Plan(
                    observer=LocalObserver(dispatcher),
                    sampler=sampler,
                    fault_for=lambda victim: SimFault(world.cluster(victim), options.mode),
                    submit=lambda names: _submit_to(manager, "team-a", "user-queue", names),
                    prefix="drill-",
                    workers=[w.name for w in config.workers],
                )
                report = await _drill(plan, options, err)
            finally:
                await sampler.stop()
                await manager.close()
                await dispatcher.stop()
                await engine.dispose()
    except DrillError as exc:
        print(f"dispatcher drill: {exc}", file=err)
        return 2
    finally:
        await world.stop()
    return _print_report(report, options, out)


def _sim_admin_beside(config_path: Path) -> str | None:
    """The fault admin endpoint of ``dispatcher sim up`` or ``rig up --real``, from the ``sim.json`` or ``rig.json``
    it writes beside ``clusters.yaml`` (the same API: ``POST /clusters/NAME/fault``)."""
    for state in ("sim.json", "rig.json"):
        try:
            admin = json.loads((config_path.parent / state).read_text()).get("admin")
        except (OSError, ValueError, AttributeError):
            continue
        if admin:
            return str(admin)
    return None


async def run_remote_drill(options: DrillOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """``dispatcher drill --config clusters.yaml --api URL --cluster NAME``: a dispatcher that is running."""
    try:
        return await _run_remote(options, out, err)
    except (DrillError, ApiError) as exc:
        print(f"dispatcher drill: {exc}", file=err)
        return 2


async def _run_remote(options: DrillOptions, out: TextIO, err: TextIO) -> int:
    if options.mode not in MODES:
        raise DrillError(f"--mode must be down, partition or flaky, got {options.mode!r}")
    if not options.config or not options.api or not options.cluster:
        raise DrillError("--config, --api and --cluster are all needed for a drill against a running dispatcher")
    config_path = Path(options.config)
    try:
        config: DispatcherConfig = await asyncio.to_thread(load_config, config_path)
    except ConfigError as exc:
        raise DrillError(f"--config {config_path}: {exc}") from None
    workers = [w.name for w in config.workers]
    if options.cluster not in workers:
        known = ", ".join(workers)
        raise DrillError(f"--cluster: no worker named {options.cluster!r} in {config_path} (workers: {known})")
    if len(workers) < 2:
        raise DrillError(f"{config_path} names one worker; a drill needs another one to fail over to")
    # The dispatcher must be there and must know the worker before anything is submitted.
    observer = ApiObserver(options.api, options.token, options.namespace)
    health = await observer.health(options.cluster)
    if health != HealthState.READY:
        raise DrillError(f"worker {options.cluster} is {health}, not Ready; a drill starts from a healthy worker")
    # Wait by the service's own lost timeout (a guess would end the drill before the failover it came to see).
    options = dataclasses.replace(options, lost_timeout=await observer.lost_timeout())
    assert options.api is not None and options.cluster is not None

    clients: dict[str, ClusterClient] = {}
    manager: ClusterClient | None = None
    sampler: KubeSampler | None = None
    try:
        manager = await connect("drill-manager", config.manager)
        for w in config.workers:
            clients[w.name] = await connect(f"drill-{w.name}", w.kube)
        sampler = KubeSampler(clients, config.origin)
        admin = options.sim_admin or (None if options.fault_command else _sim_admin_beside(config_path))
        victim_client = clients[options.cluster]

        def fault_for(victim: str) -> Fault:
            if options.fault_command:
                return CommandFault(options.fault_command, options.heal_command)
            if admin:
                return AdminFault(admin, victim, options.mode)
            return ManualFault(victim_client, victim, err, options.timeout)

        prefix = f"drill-{secrets.token_hex(3)}-"
        man = manager
        plan = Plan(
            observer=ApiObserver(options.api, options.token, options.namespace),
            sampler=sampler,
            fault_for=fault_for,
            submit=lambda names: _submit_to(man, options.namespace, options.queue, names),
            prefix=prefix,
            workers=workers,
            heal_wait=options.timeout if not (options.fault_command or admin) else 60.0,
        )
        try:
            report = await _drill(plan, options, err)
        finally:
            if not options.keep:
                await _delete_jobs(manager, options.namespace, prefix, options.jobs)
        report["prefix"] = prefix
        if options.mode == "partition" and not report["duplicates"]:
            report["note"] = (
                report["note"]
                or "a partitioned worker cannot be looked into: only copies on workers that answer were compared"
            )
        return _print_report(report, options, out)
    except KubeError as exc:
        raise DrillError(f"a cluster of {config_path} refused the drill: {exc}") from None
    finally:
        if sampler is not None:
            await sampler.close()
        for c in clients.values():
            await c.close()
        if manager is not None:
            await manager.close()


async def _delete_jobs(manager: ClusterClient, namespace: str, prefix: str, count: int) -> None:
    """Remove the drill's Jobs from the manager (the dispatcher then deletes their copies)."""
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with sem:
            with contextlib.suppress(KubeError):
                await manager.delete(JobAdapter.resource, namespace, f"{prefix}{i:05d}", propagation="Background")

    await asyncio.gather(*(one(i) for i in range(count)))
