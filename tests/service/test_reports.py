"""The status sync's manager writes (issue 20, item 2): a slow write holds back no other workload, a workload's
writes stay in order with only its newest report waiting, moved-on reports are dropped, and the number of writes
in flight is bounded."""

from __future__ import annotations

import asyncio
from typing import Any

from dispatcher.live import Live
from dispatcher.report import ManagerReports
from dispatcher.store.models import WorkloadState


def _live(wid: int) -> Live:
    return Live(
        id=wid, uid=f"uid-{wid}", namespace="team-a", name=f"job-{wid}", kind="Job", queue="user-queue", priority=0,
        generation=1, state=WorkloadState.PLACED, status_mode="annotations", no_failover=False, pod_sets=[],
        cluster_selector=None, excluded=[], created=0.0, cluster="worker-1",
    )  # fmt: skip


class Manager:
    """A manager API whose writes block until released, recording what was written and how many at once."""

    def __init__(self) -> None:
        self.written: list[tuple[int, str]] = []
        self.gates: dict[int, asyncio.Event] = {}
        self.in_flight = 0
        self.most_in_flight = 0

    def gate(self, wid: int) -> asyncio.Event:
        return self.gates.setdefault(wid, asyncio.Event())

    async def write(self, live: Live, state: str, message: str, remote: Any) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate(live.id).wait()
            self.written.append((live.id, state))
        finally:
            self.in_flight -= 1


async def _until(probe: Any, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not probe():  # noqa: ASYNC110 (a condition on plain state, with a deadline)
            await asyncio.sleep(0.005)


async def test_a_slow_write_holds_back_no_other_workload_and_only_the_newest_report_waits() -> None:
    manager, tasks, synced = Manager(), set[asyncio.Task[None]](), []
    reports = ManagerReports(manager.write, tasks=tasks, on_written=synced.append)
    slow, quick = _live(1), _live(2)
    reports.submit(slow, WorkloadState.ADMITTED, "", None)
    await _until(lambda: manager.in_flight == 1)
    reports.submit(slow, WorkloadState.RUNNING, "", None)  # waits behind the write in flight...
    reports.submit(slow, WorkloadState.SUCCEEDED, "", None)  # ...and is replaced by the newer one
    manager.gate(2).set()
    reports.submit(quick, WorkloadState.RUNNING, "", None)
    await _until(lambda: (2, WorkloadState.RUNNING) in manager.written)
    assert manager.written == [(2, WorkloadState.RUNNING)], "the quick workload did not wait for the slow one"
    assert synced == [2]
    manager.gate(1).set()
    await _until(lambda: reports.pending == 0)
    assert manager.written[1:] == [(1, WorkloadState.ADMITTED), (1, WorkloadState.SUCCEEDED)]
    assert synced == [2, 1, 1], "each write counts; the metric keeps the first request's lag"


async def test_a_report_of_a_workload_that_moved_on_is_dropped() -> None:
    manager, tasks, synced = Manager(), set[asyncio.Task[None]](), []
    reports = ManagerReports(manager.write, tasks=tasks, on_written=synced.append)
    live = _live(1)
    reports.submit(live, WorkloadState.ADMITTED, "", None)
    await _until(lambda: manager.in_flight == 1)
    reports.submit(live, WorkloadState.RUNNING, "", None)
    live.generation = 2  # moved elsewhere meanwhile: the move reports its own state
    live.reported["labels"] = {"stale": "yes"}
    manager.gate(1).set()
    await _until(lambda: reports.pending == 0)
    assert manager.written == [(1, WorkloadState.ADMITTED)]
    assert "labels" not in live.reported, "a write finished after a move does not count as the report"


async def test_writes_in_flight_are_bounded() -> None:
    manager, tasks, synced = Manager(), set[asyncio.Task[None]](), []
    reports = ManagerReports(manager.write, tasks=tasks, on_written=synced.append, limit=3)
    for wid in range(10):
        reports.submit(_live(wid), WorkloadState.RUNNING, "", None)
    await _until(lambda: manager.in_flight == 3)
    await asyncio.sleep(0.05)
    assert manager.in_flight == 3
    for wid in range(10):
        manager.gate(wid).set()
    await _until(lambda: reports.pending == 0 and not tasks)
    assert manager.most_in_flight == 3 and sorted(synced) == list(range(10))
