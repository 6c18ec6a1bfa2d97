"""Failover speed: N running jobs, one worker lost, how fast are they detected, re-placed and re-admitted?

The simulated clusters run in a child process (``dispatcher sim up``, nodes with room for thousands of pods), so
the figures are the dispatcher's and not the simulator sharing its event loop; the dispatcher runs here.

    python bench/failover_speed.py --jobs 1000 --lost-timeout 5
    python bench/failover_speed.py --jobs 1000 --max-in-flight 100       # with a tighter per-worker in-flight cap
    python bench/failover_speed.py --db-url postgresql+asyncpg://root@127.0.0.1:5432/test

Prints: detection (fault to Lost), placed (Lost to every affected job having its copy on another worker),
admitted (Lost to every affected job admitted by another worker's Kueue), and a timeline of states.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import signal
import sys
import time
from pathlib import Path

import aiohttp
from _common import add_keep_option, scratch_dir

from dispatcher.adapters.job import JobAdapter
from dispatcher.config import FencingPolicy, Policy, load_config
from dispatcher.drill import drill_job
from dispatcher.kube.client import connect
from dispatcher.service import Dispatcher
from dispatcher.store.engine import make_engine
from dispatcher.store.migrate import upgrade
from dispatcher.store.models import WorkloadState
from dispatcher.store.repo import Repo

TOPOLOGY = 'cpuWorker:\n  nodes: [{prefix: cpu, count: 4, cpu: "8", memory: 32Gi, pods: 2000}]\n'
PLACED = (WorkloadState.PLACED, WorkloadState.ADMITTED, WorkloadState.RUNNING)
ADMITTED = (WorkloadState.ADMITTED, WorkloadState.RUNNING)


async def run(args: argparse.Namespace, tmp: Path) -> dict[str, object]:
    (tmp / "topology.yaml").write_text(TOPOLOGY)
    sim = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dispatcher", "sim", "up", "--workers", str(args.workers), "--gpu-workers", "0",
        "--dir", str(tmp / "sim"), "--run-seconds", "3600", "--topology", str(tmp / "topology.yaml"),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not await asyncio.to_thread((tmp / "sim" / "ready").exists):
            if time.monotonic() > deadline or sim.returncode is not None:
                raise RuntimeError("the simulated clusters did not start")
            await asyncio.sleep(0.1)
        admin = json.loads((tmp / "sim" / "sim.json").read_text())["admin"]
        loaded = load_config(tmp / "sim" / "clusters.yaml")
        workers = tuple(dataclasses.replace(w, max_in_flight=args.max_in_flight) for w in loaded.workers)
        policy = Policy(
            lost_timeout=args.lost_timeout,
            suspect_after=args.lost_timeout / 2,
            admission_timeout=120.0,
            gc_interval=30.0,
            finished_retention=3600.0,
            # The simulated workers run fencing agents (``fencing: agent`` in sim up's clusters.yaml): a Lost
            # worker's jobs move only once leaseDuration + grace have passed since the last renewal there.
            fencing=FencingPolicy(lease_duration=args.lease_duration, grace=args.grace),
        )
        config = dataclasses.replace(loaded, workers=workers, policy=policy)
        engine = make_engine(args.db_url or f"sqlite+aiosqlite:///{tmp / 'dispatcher.sqlite'}")
        await upgrade(engine)
        dispatcher = Dispatcher(config, Repo(engine), probe_interval=min(1.0, args.lost_timeout / 5))
        await dispatcher.start()
        try:
            return await _measure(args, dispatcher, config.manager, admin)
        finally:
            await dispatcher.stop()
            await engine.dispose()
    finally:
        if sim.returncode is None:
            sim.send_signal(signal.SIGTERM)
            await sim.wait()


async def _measure(
    args: argparse.Namespace, dispatcher: Dispatcher, manager_ref: object, admin: str
) -> dict[str, object]:
    manager = await connect("bench", manager_ref)  # type: ignore[arg-type]
    sem = asyncio.Semaphore(32)

    async def submit(i: int) -> None:
        async with sem:
            await manager.create(JobAdapter.resource, "team-a", drill_job(f"drill-{i:05d}"))

    await asyncio.gather(*(submit(i) for i in range(args.jobs)))
    await manager.close()
    while sum(1 for lv in dispatcher.live.by_id.values() if lv.state == WorkloadState.RUNNING) < args.jobs:  # noqa: ASYNC110 (a benchmark polling in-memory state)
        await asyncio.sleep(0.2)
    by_worker: dict[str, list[int]] = {}
    for lv in dispatcher.live.by_id.values():
        by_worker.setdefault(lv.cluster or "", []).append(lv.id)
    victim = max(sorted(by_worker), key=lambda w: len(by_worker[w]))
    affected = {wid: dispatcher.live.by_id[wid].generation for wid in by_worker[victim]}
    async with aiohttp.ClientSession() as session:
        await session.post(f"{admin}/clusters/{victim}/fault", json={"mode": "down"})
    fault_at = time.monotonic()
    while dispatcher.capacities[victim].health != "Lost":  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    lost_at = time.monotonic()
    placed_s = admitted_s = moved_s = None
    timeline: list[tuple[float, dict[str, int]]] = []
    while time.monotonic() - lost_at < 300:
        states: dict[str, int] = {}
        for wid, gen in affected.items():
            lv = dispatcher.live.by_id[wid]
            state = lv.state if lv.generation > gen else "NotMovedYet"
            states[state] = states.get(state, 0) + 1
        now = time.monotonic() - lost_at
        if moved_s is None and states.get("NotMovedYet", 0) < len(affected):
            moved_s = now  # the fence cleared: failover moved the first job
        if not timeline or timeline[-1][1] != states:
            timeline.append((round(now, 2), states))
        if placed_s is None and sum(states.get(s, 0) for s in PLACED) == len(affected):
            placed_s = now
        if sum(states.get(s, 0) for s in ADMITTED) == len(affected):
            admitted_s = now
            break
        await asyncio.sleep(0.02)
    return {
        "jobs": args.jobs,
        "lost_timeout": args.lost_timeout,
        "max_in_flight": args.max_in_flight,
        "victim": victim,
        "affected": len(affected),
        "lease_duration": args.lease_duration,
        "grace": args.grace,
        "detection_seconds": round(lost_at - fault_at, 2),
        "fence_wait_seconds": round(moved_s, 2) if moved_s is not None else None,
        "placed_seconds": round(placed_s, 2) if placed_s is not None else None,
        "admitted_seconds": round(admitted_s, 2) if admitted_s is not None else None,
        "timeline": timeline[:: max(1, len(timeline) // 15)],
    }


def add_fencing_arguments(parser: argparse.ArgumentParser) -> None:
    """The fencing Lease of the run. The product's defaults (40 s and 30 s) would make every run wait over a minute
    for the fence; the benchmark measures what comes after it, and reports the wait."""
    parser.add_argument("--lease-duration", type=float, default=5.0, help="fencing leaseDuration (product: 40 s)")
    parser.add_argument("--grace", type=float, default=2.5, help="fencing grace (product: 30 s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--lost-timeout", type=float, default=5.0)
    parser.add_argument("--max-in-flight", type=int, default=500, help="per worker (the config default is 500)")
    add_fencing_arguments(parser)
    parser.add_argument("--db-url", help="default: SQLite in a temporary directory")
    add_keep_option(parser)
    args = parser.parse_args()
    with scratch_dir("failover-speed-", keep=args.keep) as tmp:
        report = asyncio.run(run(args, tmp))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
