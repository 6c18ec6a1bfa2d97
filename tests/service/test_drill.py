"""``dispatcher drill --sim``: reduced drills (the 1,000-job figures come from running it by hand)."""

from __future__ import annotations

import asyncio
import io
import json
import sys

from dispatcher.drill import DrillOptions, run_drill


async def test_down_drill_fails_over_every_job_without_duplicates_or_losses() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = await run_drill(DrillOptions(jobs=30, lost_timeout=2.0, mode="down", json=True), out, err)
    report = json.loads(out.getvalue())
    assert code == 0, report
    assert report["affected"] > 0 and report["duplicates"] == 0 and report["lost"] == 0
    assert report["detection_seconds"] > 0 and report["replacement_seconds"] is not None
    assert report["fenced"] == report["affected"], "every stale copy is deleted when the worker returns"
    assert "re-placed off" in err.getvalue()  # the progress bar


async def test_partition_drill_reports_the_at_least_once_limit_honestly() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = await run_drill(DrillOptions(jobs=20, lost_timeout=2.0, mode="partition", json=True), out, err)
    report = json.loads(out.getvalue())
    # A partitioned worker keeps running its copies while they run again elsewhere: reported, and exit 1.
    assert report["affected"] > 0 and report["lost"] == 0
    assert report["duplicates"] == report["affected"] and code == 1
    assert "no-failover" in report["note"]


async def test_drill_cli_prints_the_json_report_keys() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dispatcher", "drill", "--sim", "--jobs", "10", "--lost-timeout", "2", "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-2000:]
    report = json.loads(out)
    assert {"detection_seconds", "replacement_seconds", "affected", "duplicates", "lost"} <= set(report)
