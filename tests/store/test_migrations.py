"""The Alembic migrations and the SQLAlchemy models describe the same schema, on both databases."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from dispatcher.store.engine import make_engine
from dispatcher.store.migrate import current_revision, head_revision, upgrade
from dispatcher.store.models import Base


async def test_migrations_match_models(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        await upgrade(engine)
        assert await current_revision(engine) == head_revision()

        def diff(conn):  # type: ignore[no-untyped-def]
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            return compare_metadata(ctx, Base.metadata)

        async with engine.connect() as conn:
            differences = await conn.run_sync(diff)
            tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
        assert differences == [], f"models and migrations differ: {differences}"
        assert {"workloads", "placements", "clusters", "events", "leadership"} <= tables
    finally:
        await engine.dispose()


async def test_upgrade_is_idempotent(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        await upgrade(engine)
        await upgrade(engine)
        assert await current_revision(engine) == head_revision()
    finally:
        await engine.dispose()
