"""Shared by the benchmark scripts: the machine line, medians, percentiles, resident memory, the report.

Every script prints a line about the machine first, its figures as medians of ``--runs`` runs, and with
``--json`` the same figures as one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """Cores (all and usable), Python, the platform, the load average and the date of the run."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "cores": os.cpu_count() or 1,
        "usable_cores": usable,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(terse=True),
        "load_average": [round(x, 2) for x in load],
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def machine_line(info: dict[str, Any]) -> str:
    load = ", ".join(f"{x:g}" for x in info["load_average"])
    return (
        f"machine: {info['cores']} cores ({info['usable_cores']} usable), {info['implementation']} "
        f"{info['python']}, {info['platform']}, load average {load}, {info['date']}"
    )


def parser(doc: str | None, *, runs: int) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark takes: --quick, --json, --runs."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a reduced run (well under a minute)")
    p.add_argument("--json", action="store_true", help="also print the figures as one JSON object on the last line")
    p.add_argument("--runs", type=int, default=None, help=f"runs per figure; the median is reported (default {runs})")
    return p


def add_keep_option(p: argparse.ArgumentParser) -> None:
    """``--keep``: keep the run's temporary directory (:func:`scratch_dir`) after a good run too."""
    p.add_argument(
        "--keep", action="store_true", help="keep the run's temporary directory (clusters, database, logs); say where"
    )


@contextlib.contextmanager
def scratch_dir(prefix: str, *, keep: bool = False) -> Iterator[Path]:
    """A temporary directory for one run: its simulated clusters' or rig's files, its SQLite database, its logs.

    It is removed once the run has ended well: a 10,000-Job dispatch run leaves about 600 MB there, and a machine
    that runs the benchmarks often filled its ``/tmp`` with them. After a failure, or with ``keep``, it stays, and
    its path is printed on stderr, for the logs it holds."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    except BaseException:
        print(f"kept {path} (the run failed)", file=sys.stderr)
        raise
    if keep:
        print(f"kept {path}", file=sys.stderr)
    else:
        shutil.rmtree(path, ignore_errors=True)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by the nearest-rank method."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered))))
    return float(ordered[rank - 1])


def rss_bytes() -> int:
    """This process's resident set size, from /proc (0 where there is no /proc)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def rnd(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def emit(report: dict[str, Any], as_json: bool) -> None:
    """The JSON object last (one line), after whatever the script printed for people."""
    if as_json:
        sys.stdout.flush()
        print(json.dumps(report, separators=(",", ":"), default=str))
    sys.stdout.flush()


@contextlib.asynccontextmanager
async def scratch_database(url: str | None, sqlite_path: Path) -> AsyncIterator[str]:
    """The database a benchmark writes to: a SQLite file at ``sqlite_path`` when no URL is given; for a
    PostgreSQL URL, a new database of its own on that server (dropped afterwards), so that a benchmark never
    touches the tables of the database named in the URL (tests may be using it)."""
    if not url:
        yield f"sqlite+aiosqlite:///{sqlite_path}"
        return
    if not url.startswith("postgresql"):
        yield url
        return
    import asyncpg
    from sqlalchemy.engine import make_url

    base = make_url(url)
    admin = base.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"dispatcher_bench_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(admin)
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
