"""The Kueue conformance summary (tests/conftest.py): one outcome per case, counted per Kueue source file."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest


def _tally_class(config: pytest.Config) -> Any:
    """``KueueTally`` of the root conftest as pytest loaded it (importing ``conftest`` could pick another one)."""
    for plugin in config.pluginmanager.get_plugins():
        tally = getattr(plugin, "KueueTally", None)
        if tally is not None:
            return tally
    raise AssertionError("tests/conftest.py defines no KueueTally")


def _report(nodeid: str, when: str, outcome: str, *, xfail: bool = False) -> SimpleNamespace:
    report = SimpleNamespace(
        nodeid=nodeid, when=when, passed=outcome == "passed", failed=outcome == "failed", skipped=outcome == "skipped"
    )
    if xfail:
        report.wasxfail = "reason"
    return report


def test_outcomes_are_counted_per_source_file(pytestconfig: pytest.Config) -> None:
    tally = _tally_class(pytestconfig)()
    a, b = "pkg/a_test.go", "pkg/b_test.go"
    for nodeid, source in (
        ("t::ok", a), ("t::fails", a), ("t::setup", a), ("t::skip", b), ("t::xfail", b), ("t::teardown", b),
        ("t::never", b),
    ):  # fmt: skip
        tally.collect(nodeid, source)
    reports = [
        ("t::ok", "setup", "passed"), ("t::ok", "call", "passed"), ("t::ok", "teardown", "passed"),
        ("t::fails", "setup", "passed"), ("t::fails", "call", "failed"), ("t::fails", "teardown", "passed"),
        ("t::setup", "setup", "failed"), ("t::setup", "teardown", "passed"),
        ("t::skip", "setup", "skipped"), ("t::skip", "teardown", "passed"),
        ("t::teardown", "setup", "passed"), ("t::teardown", "call", "passed"), ("t::teardown", "teardown", "failed"),
        ("other::test", "call", "failed"),  # not a Kueue case
    ]  # fmt: skip
    for nodeid, when, outcome in reports:
        tally.record(_report(nodeid, when, outcome))
    tally.record(_report("t::xfail", "setup", "passed"))
    tally.record(_report("t::xfail", "call", "skipped", xfail=True))
    assert tally.lines() == [
        "kueue conformance: pkg/a_test.go 1 passed, 1 failed, 1 error",
        "kueue conformance: pkg/b_test.go 1 error, 1 skipped, 1 xfailed, 1 not run",
        "kueue conformance: 7 cases from 2 Kueue test files (1 passed, 1 failed, 2 error, 1 skipped, 1 xfailed, "
        "1 not run)",
    ]
    assert tally.lines(ran=False)[-1] == "kueue conformance: 7 cases from 2 Kueue test files (7 collected)"


def test_no_kueue_case_no_summary(pytestconfig: pytest.Config) -> None:
    assert _tally_class(pytestconfig)().lines() == []
