"""Running the Alembic migrations, from ``dispatcher db upgrade`` or at service start."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["alembic_config", "current_revision", "head_revision", "upgrade"]

#: The PostgreSQL advisory lock key that serialises migrations of concurrent replicas ("kdsp").
MIGRATION_LOCK = 0x6B647370


def _script_location() -> str:
    """The migrations: installed as ``dispatcher._migrations``, or ``migrations/`` in a checkout."""
    try:
        location = resources.files("dispatcher._migrations")
        path = Path(str(location))
        if (path / "env.py").exists():
            return str(path)
    except ModuleNotFoundError:
        pass
    return str(Path(__file__).resolve().parents[2] / "migrations")


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", _script_location())
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _upgrade(connection: Connection, cfg: Config, revision: str) -> None:
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, revision)


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` (idempotent)."""
    cfg = alembic_config()
    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Replicas starting at once (leader election) migrate one after the other, not into each other.
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        await conn.run_sync(_upgrade, cfg, revision)


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await conn.run_sync(_current)
