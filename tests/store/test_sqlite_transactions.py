"""SQLite transactions: one unit of reads and writes is one transaction, and concurrent writers wait their turn.

Python's sqlite3 opened a transaction only before a write, so a unit's reads ran outside it (a read-modify-write
lost updates); a deferred transaction that reads and then writes fails with "database is locked" when another
connection committed in between, whatever the busy timeout (issue 20: four such errors in a 10,000-Job burst).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import text

from dispatcher.store.engine import make_engine


async def test_concurrent_read_modify_write_units_are_serialised_without_lock_errors(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite+aiosqlite:///{tmp_path / 'dispatcher.sqlite'}")
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)"))
    errors: list[str] = []

    async def unit() -> None:
        try:
            async with engine.begin() as conn:
                seen = (await conn.execute(text("SELECT count(*) FROM t"))).scalar_one()
                await asyncio.sleep(0.001)  # let the other units' connections run
                await conn.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": seen})
        except Exception as exc:  # collected and asserted below
            errors.append(repr(exc))

    try:
        await asyncio.gather(*(unit() for _ in range(40)))
        async with engine.connect() as conn:
            values = sorted((await conn.execute(text("SELECT v FROM t"))).scalars())
    finally:
        await engine.dispose()
    assert errors == []
    # Each unit saw every unit committed before it: no lost update.
    assert values == list(range(40))


async def test_a_read_only_engine_reads_beside_a_writer(tmp_path: Path) -> None:
    """``explain``'s engine (read_only) does not take the write lock: it reads while a writer holds it."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'dispatcher.sqlite'}"
    writer = make_engine(url)
    async with writer.begin() as conn:
        await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY)"))
        await conn.execute(text("INSERT INTO t (id) VALUES (1)"))
    reader = make_engine(url, read_only=True)
    try:
        async with writer.begin() as conn:
            await conn.execute(text("INSERT INTO t (id) VALUES (2)"))
            async with reader.connect() as rconn:
                # A reader taking the write lock would wait out the busy timeout (30 s) here.
                read = rconn.execute(text("SELECT count(*) FROM t"))
                async with asyncio.timeout(5):
                    assert (await read).scalar_one() == 1
    finally:
        await reader.dispose()
        await writer.dispose()
