"""Fixtures for the dispatcher's end-to-end tests on the simulated clusters (SQLite and PostgreSQL)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import Rig, start_rig, stop_rig
from realrig import RealRig


@pytest.fixture
async def rig(db_url: str, tmp_path: Path, real_rig: RealRig | None) -> AsyncIterator[Rig]:
    """Manager + worker-1, worker-2 (CPU) + worker-3 (HAMi GPUs), the dispatcher running on ``db_url``; on the
    simulator, or on the session's real rig for a ``real_rig`` test's real variant."""
    r = await start_rig(tmp_path, db_url, real=real_rig)
    try:
        yield r
    finally:
        await stop_rig(r)
