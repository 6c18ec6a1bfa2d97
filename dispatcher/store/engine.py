"""Engines for the embedded default (SQLite with WAL) and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from kubecommon import fastjson

__all__ = ["DatabaseUrlError", "make_engine", "redact", "sqlite_url"]


class DatabaseUrlError(ValueError):
    """An unusable database URL; the message names it (with any password hidden)."""


def redact(url: str) -> str:
    """The URL with its password replaced, fit for logs and errors."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparsable database URL>"


def sqlite_url(path: str) -> str:
    return f"sqlite+aiosqlite:///{path}"


def _json_codec(kwargs: dict[str, Any]) -> dict[str, Any]:
    """JSON columns (decision records, pod sets, remote status) through orjson: ``json`` encoding and decoding
    of them was about a tenth of the dispatcher's CPU in a profile of a 1,000-Job burst over 100 workers."""
    kwargs.setdefault("json_serializer", fastjson.dumps_text)
    kwargs.setdefault("json_deserializer", fastjson.loads)
    return kwargs


def make_engine(url: str, *, read_only: bool = False, **kwargs: Any) -> AsyncEngine:
    """An async engine. SQLite gets WAL, a busy timeout, foreign keys and write transactions that take the write
    lock when they begin (one writer at a time, no lock upgrade); PostgreSQL a pool.

    ``read_only``: the caller only reads (``explain``): a SQLite file that does not exist is an error, never
    created as a side effect. A SQLite file in a folder that does not exist is an error either way."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DatabaseUrlError(f"database URL {redact(url)!r} is not a SQLAlchemy URL") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.get_driver_name() != "aiosqlite":
            raise DatabaseUrlError(f"database URL {redact(url)!r}: use the async driver, sqlite+aiosqlite:///PATH")
        path = parsed.database or ""
        if path and path != ":memory:" and not path.startswith("file:"):
            where = Path(path).expanduser().resolve()
            if read_only and not where.is_file():
                raise DatabaseUrlError(
                    f"no dispatcher database at {where}: run this where the dispatcher's SQLite file is, or name it "
                    "with --db-url sqlite+aiosqlite:///PATH (or ask the running dispatcher with --api URL)"
                )
            if not where.parent.is_dir():
                raise DatabaseUrlError(
                    f"the folder of the SQLite database {where} does not exist: create it, or pass --db-url"
                )
        if not read_only and path and path != ":memory:":
            # One connection: the process's transactions queue for it in asyncio, in order, instead of in SQLite's
            # busy handler (which sleeps and retries, unfairly: under a 10,000-Job burst, fifteen pooled
            # connections contending for the one write lock left some waiting past the 30 s busy timeout).
            kwargs.setdefault("pool_size", 1)
            kwargs.setdefault("max_overflow", 0)
            kwargs.setdefault("pool_timeout", 300)
        engine = create_async_engine(url, connect_args={"timeout": 30}, **_json_codec(kwargs))
        begin = "BEGIN" if read_only else "BEGIN IMMEDIATE"

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            # Python's sqlite3 opens a transaction only before an INSERT/UPDATE/DELETE, so the reads of a
            # transaction ran outside it; SQLAlchemy's own BEGIN (below) makes the whole unit one transaction.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _begin(conn: Any) -> None:
            # IMMEDIATE: a transaction takes SQLite's one write lock when it starts, waiting under the busy
            # timeout. A deferred transaction that reads and then writes after another connection's commit fails
            # at once with "database is locked" (SQLITE_BUSY_SNAPSHOT in WAL mode), which no busy timeout waits out.
            conn.exec_driver_sql(begin)

        return engine
    if backend == "postgresql":
        if parsed.get_driver_name() != "asyncpg":
            raise DatabaseUrlError(f"database URL {redact(url)!r}: use the async driver, postgresql+asyncpg://…")
        kwargs.setdefault("pool_size", 10)
        kwargs.setdefault("max_overflow", 10)
        kwargs.setdefault("pool_pre_ping", True)
        return create_async_engine(url, **_json_codec(kwargs))
    raise DatabaseUrlError(f"database URL {redact(url)!r}: only sqlite+aiosqlite and postgresql+asyncpg are supported")
