"""A health probe answered by a recent request: no ``/readyz`` call, contact dated at the answer, never later."""

from __future__ import annotations

import time
from typing import Any, cast

import pytest

from dispatcher.capacity import WorkerView, probe_worker
from dispatcher.health import Answered, HealthMachine, HealthMonitor, HealthState
from dispatcher.kube.client import ClusterClient


class Client:
    """What a probe reads of a ClusterClient, and its ``/readyz`` calls."""

    def __init__(self, *, answered_ago: float | None, failed_ago: float | None = None, ready: bool = True) -> None:
        now = time.monotonic()
        self.last_answered = now - answered_ago if answered_ago is not None else 0.0
        self.last_failure = now - failed_ago if failed_ago is not None else 0.0
        self.probes_skipped = 0
        self.calls = 0
        self.ready = ready

    async def probe(self, timeout: float) -> bool | str:
        self.calls += 1
        return self.ready


class View:
    def __init__(self, refusal: str | None = None) -> None:
        self.refusal = refusal

    def rejection(self) -> str | None:
        return self.refusal


async def probe(client: Client, view: View | None = None, answered_within: float = 3.0) -> Any:
    return await probe_worker(
        cast(ClusterClient, client), cast(WorkerView, view or View()), 1.0, answered_within=answered_within
    )


async def test_a_request_answered_within_the_interval_stands_for_the_call() -> None:
    client = Client(answered_ago=1.0)
    result = await probe(client)
    assert isinstance(result, Answered) and result.at == client.last_answered
    assert client.calls == 0 and client.probes_skipped == 1
    # The dispatcher's reads refused (an informer's 403): the refusal, still without a call.
    assert await probe(client, View("Forbidden: cannot list pods")) == "Forbidden: cannot list pods"
    assert client.calls == 0


@pytest.mark.parametrize(
    ("client", "answered_within"),
    [
        (Client(answered_ago=5.0), 3.0),  # too long ago
        (Client(answered_ago=1.0, failed_ago=0.5), 3.0),  # a request failed since
        (Client(answered_ago=None), 3.0),  # none yet
        (Client(answered_ago=0.1), 0.0),  # skipping not asked for
        (Client(answered_ago=1.0, ready=False), 0.5),  # too long ago for this interval: the call says not ready
    ],
    ids=["stale", "failed-since", "never", "off", "not-ready"],
)
async def test_otherwise_the_readyz_call_is_made(client: Client, answered_within: float) -> None:
    result = await probe(client, answered_within=answered_within)
    assert client.calls == 1 and client.probes_skipped == 0
    assert result is client.ready


def test_contact_is_dated_at_the_answer_so_silence_counts_from_it() -> None:
    m = HealthMachine(suspect_after=3.0, lost_timeout=9.0, state=HealthState.READY, since=0.0, last_contact=0.0)
    assert m.probe(True, 10.0, answered_at=8.0) is None and m.last_contact == 8.0
    # Silent since 8.0: Suspect once more than 3 s have passed since then (11.5), not since the probe (10.0).
    assert m.probe(False, 11.5) == HealthState.SUSPECT
    # A plain success is dated now.
    m2 = HealthMachine(suspect_after=3.0, lost_timeout=9.0, state=HealthState.READY, since=0.0)
    m2.probe(True, 10.0)
    assert m2.last_contact == 10.0


async def test_the_monitor_feeds_an_answered_probe_as_a_success_dated_at_the_answer() -> None:
    changes: list[tuple[str, str, str]] = []
    monitor = HealthMonitor(interval=1.0, on_change=lambda *c: changes.append(c))
    answered_at = time.monotonic() - 0.5

    async def answered() -> Answered:
        return Answered(answered_at)

    m = HealthMachine(suspect_after=3.0, lost_timeout=9.0)
    monitor.add("w", m, answered, lambda: 0.0)
    await monitor.probe_all()
    assert changes == [("w", HealthState.UNKNOWN, HealthState.READY)]
    assert m.last_contact == answered_at and m.streak == 1
