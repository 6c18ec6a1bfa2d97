"""HA takeover: ``dispatcher drill --sim --mode leader-kill`` repeated; the median ``takeover_seconds``.

Two replicas on PostgreSQL with the default timings (lease 15 s, renew deadline 10 s, retry 2 s); each run
submits the jobs, SIGKILLs the leader after a third of them, and reports the takeover (kill to the new leader's
fencing-term bump), the first placement after the kill, duplicates and losses.

    python bench/ha_takeover.py --runs 5 --jobs 100 --db-url postgresql+asyncpg://root@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import sys

from dispatcher.ha_drill import HaDrillOptions, run_leader_kill_drill


async def _main(args: argparse.Namespace) -> int:
    reports = []
    for _ in range(args.runs):
        out = io.StringIO()
        options = HaDrillOptions(db_url=args.db_url, replicas=args.replicas, jobs=args.jobs, json=True)
        code = await run_leader_kill_drill(options, out, io.StringIO())
        report = json.loads(out.getvalue())
        reports.append(report)
        print(json.dumps({**report, "exit": code}), flush=True)
    takeovers = [r["takeover_seconds"] for r in reports if r["takeover_seconds"] is not None]
    placements = [r["first_placement_seconds"] for r in reports if r["first_placement_seconds"] is not None]
    summary = {
        "runs": len(reports),
        "takeover_seconds_median": statistics.median(takeovers) if takeovers else None,
        "takeover_seconds_min": min(takeovers, default=None),
        "takeover_seconds_max": max(takeovers, default=None),
        "first_placement_seconds_median": statistics.median(placements) if placements else None,
        "duplicates": sum(r["duplicates"] for r in reports),
        "lost": sum(r["lost"] for r in reports),
    }
    print(json.dumps(summary), flush=True)
    return 0 if summary["duplicates"] == 0 and summary["lost"] == 0 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--db-url", required=True, help="a postgresql+asyncpg URL (a fresh database per run)")
    sys.exit(asyncio.run(_main(parser.parse_args())))
