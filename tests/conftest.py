"""Shared fixtures: database URLs for SQLite and PostgreSQL, and the shared reference directory."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The PostgreSQL the SQL tests run on besides SQLite: the development machine's own server unless
#: DISPATCHER_TEST_PG_URL names another. Never skipped: a PostgreSQL variant that cannot connect fails.
DEFAULT_PG_URL = "postgresql+asyncpg://root@127.0.0.1:5432/test"
PG_URL = os.environ.setdefault("DISPATCHER_TEST_PG_URL", DEFAULT_PG_URL)


def shared_dir() -> Path | None:
    """The reference material (``../shared``): from DISPATCHER_SHARED_DIR or beside the checkout."""
    for candidate in (os.environ.get("DISPATCHER_SHARED_DIR"), str(REPO.parent / "shared")):
        if candidate and (Path(candidate) / "schemas").is_dir():
            return Path(candidate)
    return None


def _backends() -> list[str]:
    return ["sqlite", "postgresql"]


@contextlib.asynccontextmanager
async def _fresh_postgres() -> AsyncIterator[str]:
    """A PostgreSQL database of its own (full isolation, including the Alembic version table), dropped after."""
    import asyncpg
    from sqlalchemy.engine import make_url

    name = f"dispatcher_t_{uuid.uuid4().hex[:12]}"
    base = make_url(PG_URL)
    admin = base.set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        conn = await asyncpg.connect(admin)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.fail(
            f"PostgreSQL at {base.render_as_string(hide_password=True)} does not answer ({exc}); start it or set "
            "DISPATCHER_TEST_PG_URL=postgresql+asyncpg://USER@HOST:5432/DB",
            pytrace=False,
        )
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        conn = await asyncpg.connect(admin)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


@pytest.fixture(params=_backends())
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh, empty database: a SQLite file, or a PostgreSQL database of its own."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'dispatcher.sqlite'}"
        return
    async with _fresh_postgres() as url:
        yield url


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    """A fresh PostgreSQL database, for tests that only make sense on a database server."""
    async with _fresh_postgres() as url:
        yield url
