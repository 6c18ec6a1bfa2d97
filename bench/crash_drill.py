"""Crash drill: SIGKILL the dispatcher at random moments during a run; every job must complete exactly once.

Simulated clusters run in a child process (``dispatcher sim up``); the dispatcher runs as ``dispatcher run``
in another child process and is killed with SIGKILL ``--kills`` times at random moments (seeded), then left
to finish. Meanwhile the worker clusters are sampled through their API every 100 ms: no workload may have
running pods on two clusters at the same instant. At the end: every job Succeeded, exactly one copy of each
completed, SQL is consistent (one Succeeded placement per workload, none left open).

    python bench/crash_drill.py --jobs 300 --kills 10 --seeds 20            # the full drill
    python bench/crash_drill.py --jobs 300 --db-url postgresql+asyncpg://root@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from dispatcher import labels as L
from dispatcher.adapters.job import JobAdapter
from dispatcher.config import KubeconfigRef, load_config
from dispatcher.drill import drill_job
from dispatcher.kube.client import ClusterClient, KubeError, connect
from dispatcher.store.engine import make_engine
from dispatcher.store.models import PlacementState, WorkloadState
from dispatcher.store.repo import Repo

JOBS = JobAdapter.resource
Obj = dict[str, Any]


def _job(i: int, seconds: float) -> Obj:
    return drill_job(f"crash-{i:04d}", seconds=seconds, cpu="250m")


async def _wait_file(path: Path, proc: asyncio.subprocess.Process, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(path.exists):
        if proc.returncode is not None:
            raise RuntimeError(f"sim up exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout:g}s")
        await asyncio.sleep(0.1)


class Sampler:
    """Running copies per workload across workers, through the workers' APIs."""

    def __init__(self, workers: dict[str, ClusterClient]) -> None:
        self.workers = workers
        self.duplicates: set[str] = set()
        self.samples = 0

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
                    uid = obj["metadata"]["labels"].get(L.WORKLOAD_UID, "")
                    running.setdefault(uid, set()).add(name)
        self.duplicates |= {uid for uid, where in running.items() if len(where) > 1}
        self.samples += 1

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.sample()
            await asyncio.sleep(0.1)


async def crash_drill(
    workdir: Path, db_url: str, *, jobs: int, kills: int, seed: int, timeout: float = 240, rig: Path | None = None
) -> Obj:
    """One seeded run; returns the report (raises nothing for a failed check: the report says it).

    ``rig``: the directory of a running ``dispatcher rig up [--real]`` to use instead of starting simulated
    clusters (its administrator kubeconfigs submit and sample; the dispatcher uses its ``clusters.yaml``)."""
    rng = random.Random(seed)
    simdir = rig or workdir / "sim"
    sim = None
    if rig is None:
        sim = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "dispatcher", "sim", "up", "--workers", "3", "--gpu-workers", "0",
            "--dir", str(simdir), "--run-seconds", "1",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
    clients: list[ClusterClient] = []
    dispatcher: asyncio.subprocess.Process | None = None
    stop = asyncio.Event()
    try:
        if sim is not None:
            await _wait_file(simdir / "ready", sim, 60)
        raw = yaml.safe_load((simdir / "clusters.yaml").read_text())
        raw["policy"] = {"admissionTimeout": "60s", "lostTimeout": "30s", "finishedRetention": "1h", "gcInterval": "5s"}
        raw["database"] = {"url": db_url}
        cfg_path = workdir / "clusters.yaml"
        cfg_path.write_text(yaml.safe_dump(raw))
        config = load_config(cfg_path)

        def admin(name: str, ref: KubeconfigRef) -> KubeconfigRef:
            # The drill's own clients are an administrator's: the dispatcher's may not create Jobs.
            path = simdir / f"{name}.kubeconfig"
            return KubeconfigRef(path=str(path)) if rig is not None and path.exists() else ref

        manager = await connect("crash-manager", admin("manager", config.manager))
        clients.append(manager)
        workers = {w.name: await connect(f"crash-{w.name}", admin(w.name, w.kube)) for w in config.workers}
        clients.extend(workers.values())
        sampler = Sampler(workers)
        sampling = asyncio.create_task(sampler.run(stop))

        async def start() -> asyncio.subprocess.Process:
            return await asyncio.create_subprocess_exec(
                sys.executable, "-m", "dispatcher", "run", "--config", str(cfg_path), "--log-level", "warning",
                "--api-listen", "127.0.0.1:0",
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip

        migrate = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "dispatcher", "db", "upgrade", "--db-url", db_url,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        if await migrate.wait() != 0:
            raise RuntimeError("dispatcher db upgrade failed")
        dispatcher = await start()
        sem = asyncio.Semaphore(16)

        async def submit(i: int) -> None:
            async with sem:
                await manager.create(JOBS, "team-a", _job(i, rng.choice([1, 2, 3])))

        submitting = asyncio.gather(*(submit(i) for i in range(jobs)))
        unexpected_exits = 0
        for _ in range(kills):
            await asyncio.sleep(rng.uniform(0.3, 2.5))  # the moment of the crash, drawn from the seed
            if dispatcher.returncode is not None:
                unexpected_exits += 1  # it died by itself: a failure of its own, reported
            else:
                dispatcher.send_signal(signal.SIGKILL)
            await dispatcher.wait()
            dispatcher = await start()
        await submitting
        engine = make_engine(db_url)
        repo = Repo(engine)
        started = time.monotonic()
        counts: dict[str, int] = {}
        try:
            while time.monotonic() - started < timeout:
                try:
                    counts = await repo.count_by_state()
                except Exception:  # the schema may not exist yet right after a kill
                    counts = {}
                if counts.get(WorkloadState.SUCCEEDED, 0) >= jobs:
                    break
                await asyncio.sleep(0.5)
            rows = await repo.list_workloads(limit=jobs + 100)
            detailed = [await repo.get_by_id(r.id) for r in rows]
            open_placements = await repo.open_placements()
        finally:
            await engine.dispose()
        stop.set()
        await sampling
        completed: dict[str, int] = {}
        for client in workers.values():
            items, _ = await client.list_all(JOBS, "team-a", label_selector=L.ORIGIN)
            for obj in items:
                done = any(
                    c.get("type") == "Complete" and c.get("status") == "True"
                    for c in (obj.get("status") or {}).get("conditions") or []
                )
                if done:
                    uid = obj["metadata"]["labels"][L.WORKLOAD_UID]
                    completed[uid] = completed.get(uid, 0) + 1
        bad_sql = [
            f"{w.namespace}/{w.name}"
            for w in detailed
            if w is not None and sum(1 for p in w.placements if p.state == PlacementState.SUCCEEDED) != 1
        ]
        return {
            "seed": seed,
            "jobs": jobs,
            "kills": kills,
            "rows": len(rows),
            "succeeded": counts.get(WorkloadState.SUCCEEDED, 0),
            "lost": jobs - counts.get(WorkloadState.SUCCEEDED, 0),
            "duplicates": len(sampler.duplicates),
            "completed_more_than_once": sum(1 for n in completed.values() if n > 1),
            "open_placements": len(open_placements),
            "inconsistent_sql": len(bad_sql),
            "unexpected_exits": unexpected_exits,
            "samples": sampler.samples,
            "seconds_to_finish": round(time.monotonic() - started, 1),
        }
    finally:
        stop.set()
        if dispatcher is not None and dispatcher.returncode is None:
            dispatcher.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(20):
                    await dispatcher.wait()
            except TimeoutError:
                dispatcher.kill()
        for c in clients:
            await c.close()
        if sim is not None and sim.returncode is None:
            sim.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(20):
                    await sim.wait()
            except TimeoutError:
                sim.kill()


def passed(report: Obj) -> bool:
    return all(
        report[k] == 0
        for k in (
            "lost",
            "duplicates",
            "completed_more_than_once",
            "open_placements",
            "inconsistent_sql",
            "unexpected_exits",
        )
    )


async def _main(args: argparse.Namespace) -> int:
    ok = True
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        with tempfile.TemporaryDirectory(prefix="crash-drill-") as tmp:
            url = args.db_url or f"sqlite+aiosqlite:///{Path(tmp) / 'dispatcher.sqlite'}"
            if args.db_url and args.db_url.startswith("postgresql"):
                url = await _fresh_pg(args.db_url, seed)
            try:
                report = await crash_drill(Path(tmp), url, jobs=args.jobs, kills=args.kills, seed=seed)
            except KubeError as exc:
                report = {"seed": seed, "error": str(exc)}
        good = "error" not in report and passed(report)
        ok = ok and good
        print(json.dumps({**report, "pass": good}), flush=True)
    return 0 if ok else 1


async def _fresh_pg(base: str, seed: int) -> str:
    import asyncpg
    from sqlalchemy.engine import make_url

    url = make_url(base)
    name = f"crash_drill_{os.getpid()}_{seed}"
    conn = await asyncpg.connect(url.set(drivername="postgresql").render_as_string(hide_password=False))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return url.set(database=name).render_as_string(hide_password=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument(
        "--db-url", help="default: a SQLite file per seed; a postgresql+asyncpg URL gets a fresh database"
    )
    sys.exit(asyncio.run(_main(parser.parse_args())))
