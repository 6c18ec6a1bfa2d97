"""Fixtures for the dispatcher's end-to-end tests on the simulated clusters (SQLite and PostgreSQL)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from rig import Rig, start_rig, stop_rig


@pytest.fixture
async def rig(db_url: str, tmp_path: Path) -> AsyncIterator[Rig]:
    """Manager + worker-1, worker-2 (CPU) + worker-3 (HAMi GPUs), the dispatcher running on ``db_url``."""
    r = await start_rig(tmp_path, db_url)
    try:
        yield r
    finally:
        await stop_rig(r)
