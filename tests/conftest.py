"""Shared fixtures: database URLs for SQLite and PostgreSQL, and the shared reference directory."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
# The builders of the Kueue conformance cases (kueuebuild), shared with tests/placement.
sys.path.insert(0, str(Path(__file__).parent / "conformance" / "kueue"))
# The builders of the HAMi rule tests (hamibuild), shared by tests/placement/hami/.
sys.path.insert(0, str(Path(__file__).parent / "placement" / "hami"))

import hangdump  # noqa: E402
from realrig import RealRig, RealRigError, start_real_rig  # noqa: E402

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


# -- the real rig ------------------------------------------------------------------------------------------
# A test marked ``real_rig`` runs on the simulated clusters (SQLite and PostgreSQL) and on the session's real rig
# (SQLite; the database is not what the real rig tests). It takes the ``backend`` fixture ("sim" or "real") and,
# through ``real_rig``, the running rig.


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """A test that times out also shows what each asyncio task was awaiting (tests/hangdump.py)."""
    return True if hangdump.install(item, settings) else None


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # As a parametrize mark (added before pytest reads the marks), so that it takes precedence over the
    # db_url fixture's own params.
    marker = metafunc.definition.get_closest_marker("real_rig")
    if marker is None:
        return
    databases = marker.kwargs.get("databases")
    if "db_url" in metafunc.fixturenames:
        combos = [("sim", "sqlite"), ("sim", "postgresql"), ("real", databases[0] if databases else "sqlite")]
        mark = pytest.mark.parametrize(
            ("backend", "db_url"), combos, indirect=True, ids=[f"{b}-{d}" for b, d in combos]
        )
    else:
        mark = pytest.mark.parametrize("backend", ["sim", "real"], indirect=True)
    metafunc.definition.add_marker(mark)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """Which clusters a ``real_rig`` test runs on: "sim" (the simulator) or "real" (the session's real rig)."""
    return str(getattr(request, "param", "sim"))


_REAL: dict[str, Any] = {}


@pytest.fixture(scope="session")
def real_rig_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealRig]:
    """``dispatcher rig up --real`` once per session; never skipped: unbuilt components fail with the fix."""
    try:
        rig = start_real_rig(tmp_path_factory.mktemp("real-rig"))
    except (RealRigError, OSError) as exc:
        pytest.fail(
            f"the real rig did not start: {exc}\n(build the components with `bash rig/build.sh`)", pytrace=False
        )
    _REAL["rig"] = rig
    try:
        yield rig
    finally:
        rig.stop()


@pytest.fixture
def real_rig(backend: str, request: pytest.FixtureRequest) -> RealRig | None:
    """The session's real rig for a test running on it, else None."""
    if backend != "real":
        return None
    rig: RealRig = request.getfixturevalue("real_rig_session")
    return rig


#: The tests that run on the real rig (a real_rig test's real variant, or one that takes the session's rig).
REAL_TESTS: set[str] = set()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_real = callspec is not None and callspec.params.get("backend") == "real"
        fixtures = getattr(item, "fixturenames", ())
        if on_real or "real_rig_session" in fixtures or "kueue_rig" in fixtures:
            REAL_TESTS.add(item.nodeid)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The summary names how many tests ran on real Kubernetes components, and how they ended; and how the Kueue
    conformance cases ended, per Kueue source file."""
    counts: dict[str, int] = {}
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = str(getattr(report, "nodeid", ""))
            counted = getattr(report, "when", "call") == "call" or outcome in ("error", "skipped")
            if counted and nodeid in REAL_TESTS:
                counts[outcome] = counts.get(outcome, 0) + 1
    ran = sum(counts.values())
    detail = ", ".join(f"{n} {o}" for o, n in counts.items()) or "none"
    terminalreporter.write_line(f"real rig: {ran} tests ran on real Kubernetes components ({detail})")
    for line in KUEUE.lines(ran=not config.option.collectonly):
        terminalreporter.write_line(line)


# -- the Kueue conformance suite ----------------------------------------------------------------------------
# Every test under tests/conformance/kueue/ carries ``@pytest.mark.kueue(source=..., test=...)``: the Kueue Go test
# file and test function its cases are ported from. The summary counts the cases per source file, skipped ones too.

KUEUE_DIR = Path(__file__).parent / "conformance" / "kueue"


class KueueTally:
    """How each collected Kueue-derived case ended, per Kueue source file (one outcome per test item)."""

    def __init__(self) -> None:
        self.source: dict[str, str] = {}  # nodeid -> Kueue source file
        self.outcome: dict[str, str] = {}  # nodeid -> passed, failed, error, skipped, xfailed, xpassed
        self.uncollected: dict[str, str] = {}  # a test file of the suite that pytest skipped or failed to collect

    def collect(self, nodeid: str, source: str) -> None:
        self.source[nodeid] = source

    def record(self, report: Any) -> None:
        nodeid = str(report.nodeid)
        if nodeid not in self.source:
            return
        xfail = hasattr(report, "wasxfail")
        if report.when == "call":
            if report.passed:
                outcome = "xpassed" if xfail else "passed"
            elif report.skipped:
                outcome = "xfailed" if xfail else "skipped"
            else:
                outcome = "failed"
        elif report.failed:  # setup or teardown
            outcome = "error"
        elif report.skipped:  # skipped (or xfail(run=False)) at setup
            outcome = "xfailed" if xfail else "skipped"
        else:
            return
        if self.outcome.get(nodeid) not in ("failed", "error"):
            self.outcome[nodeid] = outcome

    def lines(self, *, ran: bool = True) -> list[str]:
        """One line per Kueue source file, then the total; a case collected but never run is "not run"."""
        order = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "not run")
        per_file: dict[str, dict[str, int]] = {}
        for nodeid, source in self.source.items():
            outcome = self.outcome.get(nodeid, "not run") if ran else "collected"
            counts = per_file.setdefault(source, {})
            counts[outcome] = counts.get(outcome, 0) + 1
        total: dict[str, int] = {}
        out = []
        for source in sorted(per_file):
            counts = per_file[source]
            for outcome, n in counts.items():
                total[outcome] = total.get(outcome, 0) + n
            out.append(f"kueue conformance: {source} {_counts(counts, order)}")
        if out:
            files = f"{len(self.source)} cases from {len(per_file)} Kueue test files"
            out.append(f"kueue conformance: {files} ({_counts(total, order)})")
        out += [f"kueue conformance: {path} not collected ({why})" for path, why in sorted(self.uncollected.items())]
        return out


def _counts(counts: dict[str, int], order: tuple[str, ...]) -> str:
    return ", ".join(f"{counts[o]} {o}" for o in (*order, "collected") if counts.get(o))


KUEUE = KueueTally()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Registers the Kueue-derived items (after deselection); a test under tests/conformance/kueue/ without a
    complete ``kueue`` marker stops the run, so that no case goes uncounted."""
    missing = []
    for item in session.items:
        marker = item.get_closest_marker("kueue")
        source = marker.kwargs.get("source") if marker else None
        if marker and source and marker.kwargs.get("test"):
            KUEUE.collect(item.nodeid, str(source))
        elif item.path.is_relative_to(KUEUE_DIR) or marker:
            missing.append(item.nodeid)
    if missing:
        raise pytest.UsageError("tests without @pytest.mark.kueue(source=..., test=...): " + ", ".join(missing[:5]))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.outcome != "passed" and Path(report.fspath).resolve().is_relative_to(KUEUE_DIR):
        KUEUE.uncollected[report.nodeid] = "error" if report.failed else "skipped"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    KUEUE.record(report)
