"""The dispatcher is SIGKILLed at random moments during a run: every job completes exactly once, nothing runs
twice at the same instant, nothing is lost, SQL ends consistent. A reduced run here (SQLite and PostgreSQL on the
simulator, and on the real rig); the full drill (300 jobs, 20 seeds) is ``python bench/crash_drill.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from crash_drill import crash_drill, passed
from realrig import RealRig, clean


@pytest.mark.real_rig
async def test_sigkill_at_random_moments_loses_nothing_and_runs_nothing_twice(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    if real_rig is not None:
        await clean(real_rig)
    report = await crash_drill(
        tmp_path, db_url, jobs=40, kills=4, seed=11, timeout=180, rig=real_rig.directory if real_rig else None
    )
    assert passed(report), report
    assert report["succeeded"] == 40 and report["samples"] > 10
