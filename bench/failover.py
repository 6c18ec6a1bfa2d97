"""Failover: 1,000 running jobs on a worker that stops answering, lost timeout 5 s.

Reuses ``failover_speed.py`` (simulated clusters out of process, the dispatcher here): the jobs are spread over
the workers and run; the worker holding the most is stopped (the simulator's ``down`` fault pauses the whole
cluster). Figures, medians of ``--runs`` runs:

- ``detection_seconds``: from the fault until the dispatcher marks the worker Lost;
- ``fence_wait_seconds``: from Lost until the first affected job moves. The simulated workers run fencing
  agents, so the dispatcher moves a Lost worker's jobs only once the fencing Lease's ``leaseDuration + grace``
  has passed since its last renewal there (``--lease-duration``, default 5 s, and ``--grace``, 2.5 s; the
  product's defaults are 40 s and 30 s): what the at-most-once guarantee costs, set by the policy;
- ``placed_seconds``: from Lost until every affected job has its copy on another worker;
- ``readmitted_seconds``: from Lost until every affected job is admitted by another worker's Kueue
  (target: <= 5 s after the fence wait);
- ``duplicates``: workloads with a copy on two or more of the remaining workers at the end (target 0);
- ``lost``: jobs not admitted or running anywhere but the stopped worker at the end (target 0).

    python bench/failover.py                      # 1,000 jobs, 3 workers, lost timeout 5 s, 3 runs
    python bench/failover.py --quick --json       # 200 jobs, 1 run
    python bench/failover.py --db-url postgresql+asyncpg://root@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import failover_speed
from _common import add_keep_option, emit, machine, machine_line, median, parser, scratch_database, scratch_dir

from dispatcher import labels as L
from dispatcher.adapters.job import JobAdapter
from dispatcher.service import Dispatcher
from dispatcher.store.models import WorkloadState

_original_measure = failover_speed._measure
_DONE = (WorkloadState.ADMITTED, WorkloadState.RUNNING, WorkloadState.SUCCEEDED)


async def _measure_and_count(
    args: argparse.Namespace, dispatcher: Dispatcher, manager_ref: object, admin: str
) -> dict[str, object]:
    """``failover_speed._measure``, then duplicates and lost jobs, read before the dispatcher stops."""
    report = await _original_measure(args, dispatcher, manager_ref, admin)
    victim = str(report["victim"])
    copies: dict[str, int] = {}
    for name, view in dispatcher.views.items():
        if name == victim:
            continue
        for obj in view.remote_jobs(JobAdapter.resource.plural).values():
            uid = ((obj.get("metadata") or {}).get("labels") or {}).get(L.WORKLOAD_UID)
            if uid:
                copies[uid] = copies.get(uid, 0) + 1
    report["duplicates"] = sum(1 for n in copies.values() if n > 1)
    ok = sum(1 for lv in dispatcher.live.by_id.values() if lv.state in _DONE and lv.cluster not in (None, victim))
    report["lost"] = args.jobs - ok
    return report


async def _one(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    failover_speed._measure = _measure_and_count  # type: ignore[assignment]
    given = args.db_url
    try:
        if not given:
            return await failover_speed.run(args, tmp)  # SQLite in the run's temporary directory
        async with scratch_database(given, tmp / "unused.sqlite") as url:
            args.db_url = url  # a PostgreSQL database of its own for this run
            return await failover_speed.run(args, tmp)
    finally:
        args.db_url = given
        failover_speed._measure = _original_measure  # type: ignore[assignment]


def main() -> int:
    p = parser(__doc__, runs=3)
    p.add_argument("--jobs", type=int, help="running jobs (default 1,000; --quick 200)")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--lost-timeout", type=float, default=5.0)
    p.add_argument("--max-in-flight", type=int, default=500, help="per worker (the config default is 500)")
    failover_speed.add_fencing_arguments(p)
    p.add_argument("--db-url", help="default: SQLite in a temporary directory")
    add_keep_option(p)
    args = p.parse_args()
    runs = args.runs or (1 if args.quick else 3)
    args.jobs = args.jobs or (200 if args.quick else 1000)
    info = machine()
    print(machine_line(info))
    db = "PostgreSQL" if args.db_url and args.db_url.startswith("postgresql") else "SQLite"
    print(
        f"failover: {args.jobs} running jobs over {args.workers} workers, the busiest stopped, lost timeout "
        f"{args.lost_timeout:g}s, fencing lease {args.lease_duration:g}s + grace {args.grace:g}s, {db}; "
        f"median of {runs} runs"
    )
    results = []
    for i in range(runs):
        with scratch_dir("failover-", keep=args.keep) as tmp:
            r = asyncio.run(_one(args, tmp))
        results.append(r)
        print(
            f"  run {i + 1}: {r['affected']} jobs on {r['victim']}: detection {r['detection_seconds']}s, "
            f"fence wait {r['fence_wait_seconds']}s, placed {r['placed_seconds']}s and re-admitted "
            f"{r['admitted_seconds']}s after detection, {r['duplicates']} duplicates, {r['lost']} lost"
        )

    def med(key: str) -> float | None:
        values = [float(r[key]) for r in results if r.get(key) is not None]
        return round(median(values), 2) if len(values) == len(results) else None

    readmitted = med("admitted_seconds")
    fence_wait = med("fence_wait_seconds")
    # Per run, then the median: the fence wait and the re-admission of one run belong together.
    for r in results:
        known = r.get("admitted_seconds") is not None and r.get("fence_wait_seconds") is not None
        r["after_fence_seconds"] = float(r["admitted_seconds"]) - float(r["fence_wait_seconds"]) if known else None
    after_fence = med("after_fence_seconds")
    duplicates = max(int(r["duplicates"]) for r in results)
    lost = max(int(r["lost"]) for r in results)
    report: dict[str, Any] = {
        "machine": info,
        "database": db,
        "jobs": args.jobs,
        "workers": args.workers,
        "lost_timeout": args.lost_timeout,
        "lease_duration": args.lease_duration,
        "grace": args.grace,
        "runs": runs,
        "affected": median([float(r["affected"]) for r in results]),
        "detection_seconds": med("detection_seconds"),
        "fence_wait_seconds": fence_wait,
        "readmitted_after_fence_seconds": after_fence,
        "placed_seconds": med("placed_seconds"),
        "readmitted_seconds": readmitted,
        "duplicates": duplicates,
        "lost": lost,
        "per_run": [{k: v for k, v in r.items() if k != "timeline"} for r in results],
    }
    ok = after_fence is not None and after_fence <= 5.0 and duplicates == 0 and lost == 0
    print(
        f"median: detection {report['detection_seconds']}s; after detection: fence wait {fence_wait}s, placed "
        f"{report['placed_seconds']}s, re-admitted {readmitted}s ({after_fence}s after the fence); duplicates "
        f"{duplicates}, lost {lost} (worst run) {'PASS' if ok else 'FAIL'} (target: re-admitted <= 5 s after the "
        "fence wait, 0 duplicates, 0 lost)"
    )
    emit(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
