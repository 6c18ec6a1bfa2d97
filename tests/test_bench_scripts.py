"""The issue-6 benchmark scripts run, reduced, and end with their figures as one JSON object.

No figure is judged here (speed is for the scripts to print, not for tests to assert): each script must run to
the end on a tiny load and report what it promises, and the failover script must lose and duplicate nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def run_bench(script: str, *args: str, timeout: float = 120, tmp: Path | None = None) -> dict[str, Any]:
    """Run ``script`` reduced; with ``tmp``, its temporary directories go there (``TMPDIR``)."""
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent)}
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("machine: ") and "cores" in lines[0], lines[0]
    report: dict[str, Any] = json.loads(lines[-1])
    assert report["machine"]["cores"] >= 1 and report["machine"]["python"]
    return report


def test_placement_reports_decisions_per_worker_count_and_memory() -> None:
    report = run_bench(
        "placement.py", "--quick", "--workers", "4", "--workers", "8", "--workloads", "300", "--gpu-nodes", "2"
    )
    assert set(report["decisions_per_second"]) == {"4", "8"}
    assert all(rate > 0 for rate in report["decisions_per_second"].values())
    for per in report["per_workers"].values():
        assert per["placed"] + per["parked"] > 0
    assert report["bytes_per_workload"] > 0


def test_restart_reports_ready_and_first_placement(tmp_path: Path) -> None:
    report = run_bench("restart.py", "--quick", "--workloads", "200", "--workers", "2")
    assert report["workloads"] == 200
    assert report["ready_seconds"] is not None and report["ready_seconds"] > 0
    assert report["first_placement_seconds"] is not None
    assert report["first_copy_seconds"] is not None


def test_failover_moves_every_job_once(tmp_path: Path) -> None:
    report = run_bench(
        "failover.py", "--quick", "--jobs", "30", "--lost-timeout", "2", "--lease-duration", "3", tmp=tmp_path
    )
    assert not list(tmp_path.iterdir())  # its clusters' files and database are removed
    assert report["affected"] > 0
    # The simulated workers run fencing agents: nothing moves before leaseDuration + grace (3 + 2.5 s) have passed
    # since the last renewal, which was at most a renewal interval (3/4 s) before the fault, itself 2 s before Lost.
    assert report["lease_duration"] == 3.0 and report["grace"] == 2.5
    assert report["fence_wait_seconds"] is not None and report["fence_wait_seconds"] >= 5.5 - 0.75 - 2.0
    assert report["readmitted_seconds"] is not None and report["readmitted_after_fence_seconds"] is not None
    assert report["duplicates"] == 0 and report["lost"] == 0


@pytest.mark.parametrize("pg", [False, True], ids=["sqlite", "postgresql"])
def test_dispatch_reports_the_ratio_to_the_floor(pg: bool, tmp_path: Path) -> None:
    args = ["--quick", "--workers", "2", "--jobs", "40", "--paced-jobs", "10"]
    if pg:
        url = os.environ["DISPATCHER_TEST_PG_URL"]  # tests/conftest.py defaults it to the local server
        args += ["--db-url", url]
    report = run_bench("dispatch.py", *args, timeout=180, tmp=tmp_path)
    # Its clusters' files and database were removed once it had ended well (hundreds of MB at 10,000 Jobs).
    assert not list(tmp_path.glob("dispatch-bench-*"))
    size = report["workers"]["2"]
    assert size["jobs"]["40"]["placed_per_second"] > 0 and size["jobs"]["40"]["floor_per_second"] > 0
    assert report["ratio_to_floor"] > 0
    assert size["submit_to_mirrored_p50"] is not None and size["status_syncs"] > 0
    # CPU per Job over the placement window and over the Jobs' whole life (placement to finished and synced),
    # each also above what the dispatcher uses with no Job at all.
    jobs = size["jobs"]["40"]
    assert 0 <= jobs["idle_cpu_busy"] < 1
    assert jobs["cpu_ms_per_job_life"] >= jobs["cpu_ms_per_job"] > 0
    assert jobs["cpu_ms_per_job_life"] > jobs["cpu_ms_per_job_life_above_idle"] > 0
    # Every Job's Placed and Finished Events were written within its whole life, none dropped.
    assert jobs["runs"][0]["events_written"] >= 2 * 40 and jobs["runs"][0]["events_dropped"] == 0
    # The floor ran in a process of its own; the dispatcher here spent CPU meanwhile on watching its copies.
    assert jobs["floor_cpu_ms_per_job"] > 0 and jobs["floor_watch_cpu_ms_per_job"] > 0
    # At a steady rate, the Jobs submitted by a child process: the CPU measured is the dispatcher's alone.
    assert size["paced_cpu_ms_per_job"] > size["paced_cpu_ms_per_job_above_idle"] > 0


def test_a_runs_scratch_directory_is_removed_unless_the_run_failed_or_keep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    from _common import scratch_dir

    with scratch_dir("ok-") as path:
        (path / "db.sqlite").write_text("x")
    assert not path.exists()
    with scratch_dir("kept-", keep=True) as kept:
        pass
    assert kept.is_dir() and f"kept {kept}" in capsys.readouterr().err
    with pytest.raises(RuntimeError), scratch_dir("failed-") as failed:
        (failed / "rig-up.log").write_text("why")
        raise RuntimeError("the rig did not start")
    assert (failed / "rig-up.log").read_text() == "why"
    assert f"kept {failed} (the run failed)" in capsys.readouterr().err
