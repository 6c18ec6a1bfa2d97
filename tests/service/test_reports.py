"""The status sync's manager writes (issue 20, item 2): a slow write holds back no other workload, a workload's
writes stay in order with only its newest report waiting, moved-on reports are dropped, and the number of writes
in flight is bounded."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from dispatcher.config import DispatcherConfig, KubeconfigRef, WorkerConfig
from dispatcher.kube.client import KubeError
from dispatcher.live import Live
from dispatcher.report import ManagerReports
from dispatcher.service import Dispatcher
from dispatcher.store.engine import make_engine
from dispatcher.store.models import WorkloadState
from dispatcher.store.repo import Repo


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


class RefusingManager:
    """A manager API that refuses every write with ``refusal`` until it is cleared."""

    def __init__(self) -> None:
        self.refusal: str | None = 'Job.batch "job-1" is invalid: status.uncountedTerminatedPods: Invalid value'
        self.code = 422
        self.patches: list[Any] = []

    async def patch(self, res: Any, namespace: str, name: str, patch: Any, **_: Any) -> dict[str, Any]:
        if self.refusal is not None:
            raise KubeError(self.code, "Invalid" if self.code == 422 else "Forbidden", self.refusal)
        self.patches.append(patch)
        return {}


async def test_a_refused_manager_write_is_said_once_per_answer_and_tried_again_with_backoff(
    caplog: Any,
) -> None:
    kube = KubeconfigRef(path="/nonexistent")
    config = DispatcherConfig(manager=kube, workers=(WorkerConfig("worker-1", kube),))
    dispatcher = Dispatcher(config, Repo(make_engine("sqlite+aiosqlite:///:memory:")))
    rt = dispatcher.rt
    manager = RefusingManager()
    rt.manager = manager  # type: ignore[assignment]

    class Intake:
        objects: dict[str, Any] = {}

    rt.intake = Intake()  # type: ignore[assignment]
    emitted: list[tuple[str, str, str]] = []
    rt.emit = lambda live, type_, reason, message: emitted.append((type_, reason, message))  # type: ignore[method-assign]
    live = _live(1)
    caplog.set_level(logging.INFO, logger="dispatcher")

    for attempt in (1, 2, 3):
        before = time.monotonic()
        await rt.report(live, WorkloadState.RUNNING, "pods running", None)
        at, _seq, kind, wid, _gen = max(rt.timers._heap, key=lambda e: e[1])  # the newest timer
        assert kind == "resync" and wid == live.id
        assert at - before >= 2.0**attempt, "tried again later, each time later"
    refused = [r for r in caplog.records if "refused the report" in r.getMessage()]
    assert len(refused) == 1 and refused[0].levelno == logging.WARNING, "said once for one answer"
    assert [(t, r) for t, r, _ in emitted] == [("Warning", "ReportRefused")]
    assert f"422 Invalid: {manager.refusal}" in emitted[0][2], "the server's answer, for the user to act on"

    manager.refusal = "another reason"
    await rt.report(live, WorkloadState.RUNNING, "pods running", None)
    assert len(emitted) == 2 and "another reason" in emitted[1][2], "a new answer is said again"

    # Refused rights: the Event says which and what to grant.
    manager.refusal = 'jobs.batch "job-1" is forbidden: User "dispatcher" cannot patch resource "jobs/status"'
    manager.code = 403
    await rt.report(live, WorkloadState.RUNNING, "pods running", None)
    assert len(emitted) == 3 and f"Forbidden: {manager.refusal}" in emitted[2][2]
    assert "deploy/rbac.yaml" in emitted[2][2] and "deploy/rbac.yaml" not in emitted[1][2]

    manager.refusal = None
    await rt.report(live, WorkloadState.RUNNING, "pods running", None)
    assert manager.patches and "refusals" not in live.reported
