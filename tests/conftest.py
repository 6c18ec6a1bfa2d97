"""Shared fixtures: database URLs for SQLite and PostgreSQL, and the shared reference directory."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get("DISPATCHER_TEST_PG_URL")


def shared_dir() -> Path | None:
    """The reference material (``../shared``): from DISPATCHER_SHARED_DIR or beside the checkout."""
    for candidate in (os.environ.get("DISPATCHER_SHARED_DIR"), str(REPO.parent / "shared")):
        if candidate and (Path(candidate) / "schemas").is_dir():
            return Path(candidate)
    return None


def _backends() -> list[str]:
    return ["sqlite", "postgresql"]


@pytest.fixture(params=_backends())
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh, empty database: a SQLite file, or a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'dispatcher.sqlite'}"
        return
    if not PG_URL:
        pytest.skip("DISPATCHER_TEST_PG_URL is not set (CI sets it); PostgreSQL variant not run")
    import asyncpg
    from sqlalchemy.engine import make_url

    # A database of its own per test: full isolation, including the Alembic version table.
    name = f"dispatcher_t_{uuid.uuid4().hex[:12]}"
    base = make_url(PG_URL)
    admin = base.set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    yield base.set(database=name).render_as_string(hide_password=False)
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()
