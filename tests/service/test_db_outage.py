"""PostgreSQL becomes unreachable in the middle of a run: the dispatcher retries, resumes and loses nothing."""

from __future__ import annotations

import os
from pathlib import Path

import asyncpg
import pytest
from harness import eventually, job, start_rig, stop_rig
from sqlalchemy.engine import make_url

from dispatcher.store.models import WorkloadState


@pytest.mark.postgres
async def test_database_outage_mid_run_loses_nothing(tmp_path: Path, pg_url: str) -> None:
    """PostgreSQL only: SQLite is a file inside the process, it has no outage to stage."""
    db_url = pg_url
    url = make_url(db_url)
    name = url.database
    admin_url = make_url(os.environ["DISPATCHER_TEST_PG_URL"]).set(drivername="postgresql")
    admin = await asyncpg.connect(admin_url.render_as_string(hide_password=False))
    r = await start_rig(tmp_path, db_url)
    try:
        names = [f"outage-{i}" for i in range(10)]
        for n in names[:5]:
            await r.submit(job(n, seconds=2))
        await r.wait_state("team-a", names[0], WorkloadState.RUNNING, WorkloadState.SUCCEEDED)

        # The outage: no new connections to this database, and every open one cut.
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name)
        for n in names[5:]:
            await r.submit(job(n, seconds=2))  # submitted while the database is down

        async def erroring() -> bool:
            errors = r.dispatcher.metrics.registry.get_sample_value("kueue_dispatcher_sql_errors_total")
            return bool(errors) and await _ping_fails(r)

            await eventually(
                erroring, timeout=20, what="the dispatcher's SQL writes failing (counted) during the outage"
            )

        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')

        for n in names:
            row = await r.wait_state("team-a", n, WorkloadState.SUCCEEDED, timeout=90)
            copies = await r.copies("team-a", n)
            assert list(copies) == [row.cluster], f"{n}: exactly one copy"
    finally:
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        await admin.close()
        await stop_rig(r)


async def _ping_fails(r: object) -> bool:
    try:
        await r.repo.ping()  # type: ignore[attr-defined]
    except Exception:
        return True
    return False
