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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from . import labels as L
from .adapters.job import JobAdapter
from .config import Policy, load_config
from .health import HealthState
from .kube.client import connect
from .service import Dispatcher
from .store.engine import make_engine
from .store.migrate import upgrade
from .store.models import WorkloadState
from .store.repo import Repo

__all__ = ["DrillOptions", "run_drill"]

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
