"""Restart: 100,000 open workloads in SQL; how long from process start to ready, and to the first new placement?

The simulated manager runs in this process and holds the 100,000 suspended Jobs the workloads stand for (so the
dispatcher's intake finds every one of them, as after a real restart); 3 simulated workers run in a child process.
The workload rows are written straight into SQL (all Pending, as Intake writes them), once; each run starts
from that same state (SQLite: a copy of the file; PostgreSQL: the tables emptied and written again).

Each run starts ``dispatcher run`` as a new process and measures, from just before the process is started:

- ``ready_seconds``: until ``GET /readyz`` answers 200 (clusters connected, every open workload resumed from SQL);
- ``first_placement_seconds``: until the first placement intent is in SQL (a workload decided and recorded);
- ``first_copy_seconds``: until the first copy is created on a worker (a workload Placed).

Target: <= 10 s for both. Medians of ``--runs`` runs.

    python bench/restart.py                                      # SQLite, 100,000 workloads, 3 runs
    python bench/restart.py --db-url postgresql+asyncpg://root@127.0.0.1:5432/test
    python bench/restart.py --quick --json                       # 10,000 workloads, 1 run
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from _common import emit, machine, machine_line, median, parser, scratch_database
from sqlalchemy import delete, func, insert, select

from dispatcher import labels as L
from dispatcher.adapters.job import JobAdapter
from dispatcher.config import load_config
from dispatcher.drill import drill_job
from dispatcher.kube.client import connect
from dispatcher.store.engine import make_engine
from dispatcher.store.migrate import upgrade
from dispatcher.store.models import AuditEvent, Cluster, Placement, Workload, WorkloadState, utcnow
from kubesim.world import SimWorld, WorldOptions

Obj = dict[str, Any]
NAMESPACE = "team-a"
#: States of a workload whose copy exists on a worker.
COPIED = (WorkloadState.PLACED, WorkloadState.ADMITTED, WorkloadState.RUNNING, WorkloadState.SUCCEEDED)


def _job(i: int) -> Obj:
    return drill_job(f"restart-{i:06d}", namespace=NAMESPACE)


def _rows(jobs: list[Obj]) -> list[dict[str, Any]]:
    """Workload rows as Intake writes them for these Jobs (pod sets with their template, Pending, generation 1)."""
    adapter = JobAdapter()
    now = utcnow()
    rows = []
    for i, obj in enumerate(jobs):
        meta = obj["metadata"]
        pod_sets = []
        for ps in adapter.pod_sets(obj):
            js = ps.to_json()
            js["template"] = ps.template
            pod_sets.append(js)
        rows.append(
            {
                "uid": meta["uid"],
                "namespace": meta["namespace"],
                "name": meta["name"],
                "kind": "Job",
                "api_version": "batch/v1",
                "queue": "user-queue",
                "priority": 0,
                "pod_sets": pod_sets,
                "state": WorkloadState.PENDING,
                "object_generation": 1,
                "generation": 1,
                "status_mode": "annotations",
                "no_failover": False,
                "excluded": [],
                "deleted": False,
                "created_at": now - timedelta(seconds=len(jobs) - i),
                "submitted_at": now,
                "updated_at": now,
            }
        )
    return rows


async def _write_sql(url: str, rows: list[dict[str, Any]]) -> None:
    engine = make_engine(url)
    try:
        await upgrade(engine)
        async with engine.begin() as conn:
            for table in (AuditEvent, Placement, Workload, Cluster):
                await conn.execute(delete(table))
            for start in range(0, len(rows), 5000):
                await conn.execute(insert(Workload), rows[start : start + 5000])
    finally:
        await engine.dispose()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _start_workers(tmp: Path, workers: int) -> asyncio.subprocess.Process:
    """The worker clusters in a child process (``dispatcher sim up``; its own manager is not used)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dispatcher", "sim", "up", "--workers", str(workers), "--gpu-workers", "0",
        "--dir", str(tmp / "workers"), "--run-seconds", "3600",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not await asyncio.to_thread((tmp / "workers" / "ready").exists):
        if time.monotonic() > deadline or proc.returncode is not None:
            raise RuntimeError("the simulated worker clusters did not start")
        await asyncio.sleep(0.1)
    return proc


async def _clear_copies(config: Path) -> None:
    """Delete the copies a previous run created on the workers, so every run starts alike."""
    for worker in load_config(config).workers:
        client = await connect(f"clear-{worker.name}", worker.kube)
        try:
            listed = await client.list(JobAdapter.resource, NAMESPACE, label_selector=L.ORIGIN)
            for obj in listed.get("items") or []:
                await client.delete(JobAdapter.resource, NAMESPACE, obj["metadata"]["name"])
        finally:
            await client.close()


async def _one_run(url: str, config: Path, workdir: Path, profile: str | None) -> dict[str, float | None]:
    port = _free_port()
    python = [sys.executable, "-m", "cProfile", "-o", profile] if profile else [sys.executable]
    engine = make_engine(url)
    log = (workdir / "dispatcher.log").open("ab")
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *python, "-m", "dispatcher", "run", "--config", str(config), "--api-listen", f"127.0.0.1:{port}",
        "--log-level", "warning", stdout=log, stderr=log,
    )  # fmt: skip
    ready = first_intent = first_copy = None
    try:
        async with aiohttp.ClientSession() as http:
            while time.monotonic() - started < 300 and (ready is None or first_intent is None or first_copy is None):
                if proc.returncode is not None:
                    log_path = workdir / "dispatcher.log"
                    raise RuntimeError(f"dispatcher run exited with {proc.returncode}; see {log_path}")
                now = time.monotonic() - started
                if ready is None:
                    try:
                        async with http.get(f"http://127.0.0.1:{port}/readyz") as r:
                            if r.status == 200:
                                ready = now
                    except aiohttp.ClientError:
                        pass
                if first_intent is None or first_copy is None:
                    async with engine.connect() as conn:
                        if first_intent is None and (await conn.scalar(select(func.count()).select_from(Placement))):
                            first_intent = now
                        # The (state, priority) index answers this without reading 100,000 rows per poll.
                        placed = await conn.scalar(
                            select(Workload.id).where(Workload.state.in_(COPIED)).limit(1)
                        )  # fmt: skip
                        if first_copy is None and placed is not None:
                            first_copy = now
                await asyncio.sleep(0.05)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(60):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        log.close()
        await engine.dispose()
    return {"ready_seconds": ready, "first_placement_seconds": first_intent, "first_copy_seconds": first_copy}


async def run(args: Any) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="restart-bench-"))
    # The manager here (its Jobs are written in process, fast); the workers in a child process, so that the
    # manager's long list does not hold up the workers' API as it would not on separate real API servers.
    world = SimWorld(WorldOptions(workers=0, gpu_workers=0, default_run_seconds=3600.0))
    await world.start()
    workers = await _start_workers(tmp, args.workers)
    try:
        world.write_files(tmp / "sim")
        t0 = time.monotonic()
        jobs = []
        for i in range(args.workloads):
            jobs.append(world.manager.client.create(_job(i)))
            if i % 500 == 0:
                await asyncio.sleep(0)
        seed_jobs = time.monotonic() - t0
        async with scratch_database(args.db_url, tmp / "dispatcher.sqlite") as url:
            return await _measure(args, world, tmp, jobs, seed_jobs, url)
    finally:
        if workers.returncode is None:
            workers.send_signal(signal.SIGTERM)
            await workers.wait()
        await world.stop()
        shutil.rmtree(tmp, ignore_errors=True)


async def _measure(
    args: Any, world: SimWorld, tmp: Path, jobs: list[Obj], seed_jobs: float, url: str
) -> dict[str, Any]:
    postgres = url.startswith("postgresql")
    rows = _rows(jobs)
    del jobs
    t0 = time.monotonic()
    await _write_sql(url, rows)
    seed_sql = time.monotonic() - t0
    template = tmp / "template.sqlite"
    if not postgres:
        shutil.copyfile(tmp / "dispatcher.sqlite", template)
    raw = yaml.safe_load((tmp / "sim" / "clusters.yaml").read_text())
    raw["workers"] = yaml.safe_load((tmp / "workers" / "clusters.yaml").read_text())["workers"]
    raw["database"] = {"url": url}
    config = tmp / "clusters.yaml"
    config.write_text(yaml.safe_dump(raw))
    print(f"  seeded {args.workloads} Jobs on the manager in {seed_jobs:.1f}s, SQL rows in {seed_sql:.1f}s")
    results = []
    for i in range(args.runs):
        if i:
            await _clear_copies(config)
            if postgres:
                await _write_sql(url, rows)
            else:
                for suffix in ("-wal", "-shm"):
                    (tmp / f"dispatcher.sqlite{suffix}").unlink(missing_ok=True)
                shutil.copyfile(template, tmp / "dispatcher.sqlite")
        r = await _one_run(url, config, tmp, args.profile if i == 0 else None)
        results.append(r)
        print(
            f"  run {i + 1}: ready {r['ready_seconds']:.2f}s, first placement {r['first_placement_seconds']:.2f}s, "
            f"first copy {r['first_copy_seconds']:.2f}s"
            if None not in r.values()
            else f"  run {i + 1}: {r}"
        )
    return {"results": results, "seed_jobs_seconds": round(seed_jobs, 1), "seed_sql_seconds": round(seed_sql, 1)}


def main() -> int:
    p = parser(__doc__, runs=3)
    p.add_argument("--workloads", type=int, help="open workloads in SQL (default 100,000; --quick 10,000)")
    p.add_argument("--db-url", help="default: SQLite in a temporary directory")
    p.add_argument("--workers", type=int, default=3, help="worker clusters (default 3)")
    p.add_argument("--profile", help="run the (first) dispatcher under cProfile, writing its statistics here")
    args = p.parse_args()
    args.runs = args.runs or (1 if args.quick else 3)
    args.workloads = args.workloads or (10_000 if args.quick else 100_000)
    info = machine()
    print(machine_line(info))
    db = "PostgreSQL" if args.db_url else "SQLite"
    print(f"restart: {args.workloads} open (Pending) workloads in {db}, `dispatcher run` as a new process; "
          f"median of {args.runs} runs")  # fmt: skip
    out = asyncio.run(run(args))
    results = out["results"]

    def med(key: str) -> float | None:
        values = [r[key] for r in results if r[key] is not None]
        return round(median(values), 2) if len(values) == len(results) else None

    report: dict[str, Any] = {
        "machine": info,
        "database": db,
        "workloads": args.workloads,
        "runs": args.runs,
        "ready_seconds": med("ready_seconds"),
        "first_placement_seconds": med("first_placement_seconds"),
        "first_copy_seconds": med("first_copy_seconds"),
        "per_run": results,
        "seed_jobs_seconds": out["seed_jobs_seconds"],
        "seed_sql_seconds": out["seed_sql_seconds"],
    }
    ready, first = report["ready_seconds"], report["first_placement_seconds"]
    ok = ready is not None and first is not None and max(ready, first) <= 10.0
    print(
        f"median: ready {report['ready_seconds']}s, first placement {report['first_placement_seconds']}s, "
        f"first copy {report['first_copy_seconds']}s {'PASS' if ok else 'FAIL'} (target <= 10 s)"
    )
    emit(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
