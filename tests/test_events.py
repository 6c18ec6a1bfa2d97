"""The Event recorder: several writes in flight, and no Event lost without a warning and a count."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import pytest

from dispatcher import events as events_module
from dispatcher.events import QUEUE_FULL, REMEMBERED, WRITE_FAILED, EventRecorder
from dispatcher.fencing import Deposed
from dispatcher.kube.client import ClusterClient, KubeError

Obj = dict[str, Any]


class Manager:
    """A manager API server's Event creates: held until released, or failing with ``error``."""

    def __init__(self, error: Exception | None = None, failures: int = 1_000_000) -> None:
        self.error = error
        #: How many creates fail with ``error`` before they succeed.
        self.failures = failures
        self.tries = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.created: list[Obj] = []
        self.release = asyncio.Event()
        self.four_in_flight = asyncio.Event()

    async def create(self, res: Any, namespace: str, body: Obj) -> Obj:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if self.in_flight == 4:
            self.four_in_flight.set()
        try:
            await self.release.wait()
            self.tries += 1
            if self.error is not None and self.tries <= self.failures:
                raise self.error
            self.created.append(body)
            return body
        finally:
            self.in_flight -= 1


def job(i: int) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"j{i}", "namespace": "team-a", "uid": f"u{i}"},
    }


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_repeat_within_the_window_is_queued_once_and_again_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(events_module.time, "monotonic", clock)
    rec = EventRecorder(cast(ClusterClient, Manager()), window=600.0)
    rec.emit(job(1), "Normal", "Placed", "placed on worker-1")
    clock.now += 599.0
    rec.emit(job(1), "Normal", "Placed", "placed on worker-1")
    assert rec.queued == 1
    rec.emit(job(1), "Normal", "Placed", "placed on worker-2")  # another message: another Event
    rec.emit(job(2), "Normal", "Placed", "placed on worker-1")  # another object
    assert rec.queued == 3
    clock.now += 1.0  # the first is 600 s old: a repeat now is written again
    rec.emit(job(1), "Normal", "Placed", "placed on worker-1")
    assert rec.queued == 4


def test_what_the_repeat_check_remembers_is_bounded_and_forgotten_oldest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """client-go's correlator remembers 4,096 Events; so does the recorder, however many Jobs a burst brings, and
    it forgets what is older than the window as time goes (a 30,000-Job burst once made every Event walk them all)."""
    clock = Clock()
    monkeypatch.setattr(events_module.time, "monotonic", clock)
    rec = EventRecorder(cast(ClusterClient, Manager()), window=600.0, queue_size=2 * REMEMBERED)
    for i in range(REMEMBERED + 5):
        rec.emit(job(i), "Normal", "Placed", "placed on worker-1")
    assert len(rec._seen) == REMEMBERED
    queued = rec.queued
    rec.emit(job(REMEMBERED + 4), "Normal", "Placed", "placed on worker-1")  # the newest is remembered
    assert rec.queued == queued
    rec.emit(job(0), "Normal", "Placed", "placed on worker-1")  # the oldest was forgotten: written again
    assert rec.queued == queued + 1
    clock.now += 601.0
    rec.emit(job(-1), "Normal", "Placed", "placed on worker-1")
    assert list(rec._seen) == [("u-1", "Normal", "Placed", "placed on worker-1")]


async def test_a_burst_is_written_several_at_a_time() -> None:
    manager = Manager()
    rec = EventRecorder(cast(ClusterClient, manager), writers=4)
    rec.start()
    try:
        for i in range(10):
            rec.emit(job(i), "Normal", "Placed", "placed on worker-1")
        async with asyncio.timeout(5):
            await manager.four_in_flight.wait()
        assert rec.queued == 6
        assert rec.unfinished == 10  # the four being written count too (the benchmark waits on this)
        manager.release.set()
        await rec.flush()
        assert manager.most_in_flight == 4 and rec.written == 10 and rec.queued == 0 and rec.unfinished == 0
        assert sorted(e["involvedObject"]["name"] for e in manager.created) == sorted(f"j{i}" for i in range(10))
        assert rec.dropped == {QUEUE_FULL: 0, WRITE_FAILED: 0}
    finally:
        await rec.stop()


async def test_a_full_queue_drops_with_a_count_and_a_warning_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    manager = Manager()
    rec = EventRecorder(cast(ClusterClient, manager), queue_size=2, writers=1)
    with caplog.at_level(logging.WARNING, logger="dispatcher.events"):
        for i in range(5):  # not started: nothing is taken off the queue
            rec.emit(job(i), "Normal", "Placed", "placed on worker-1")
    assert rec.queued == 2 and rec.dropped[QUEUE_FULL] == 3
    rec.emit(job(4), "Normal", "Placed", "placed on worker-1")  # a dropped Event is not taken for written
    assert rec.dropped[QUEUE_FULL] == 4
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1, warnings  # the first drop warns; the next two, within the minute, are counted
    assert "1 Kubernetes Events not written (queue_full)" in warnings[0]
    rec.warn_every = 0.0
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dispatcher.events"):
        rec.emit(job(9), "Normal", "Placed", "placed on worker-1")
    assert caplog.records[0].getMessage().startswith("4 Kubernetes Events not written (queue_full)")


async def test_warnings_have_room_of_their_own_and_are_written_first() -> None:
    """A burst's Normal Events fill the queue; a Warning after them is still queued, and written before them."""
    manager = Manager()
    rec = EventRecorder(cast(ClusterClient, manager), queue_size=2, writers=1)
    for i in range(3):  # not started: the third Normal finds the queue full
        rec.emit(job(i), "Normal", "Placed", "placed on worker-1")
    rec.emit(job(7), "Warning", "CopyRejected", "the worker refused the copy")
    rec.emit(job(8), "Warning", "WorkerLost", "worker-1 lost")
    assert rec.queued == 4 and rec.dropped[QUEUE_FULL] == 1
    manager.release.set()
    rec.start()
    try:
        await rec.flush()
        assert [(e["type"], e["involvedObject"]["name"]) for e in manager.created] == [
            ("Warning", "j7"),
            ("Warning", "j8"),
            ("Normal", "j0"),
            ("Normal", "j1"),
        ]
        assert rec.queued == 0 and rec.written == 4
    finally:
        await rec.stop()


@pytest.mark.parametrize(
    ("error", "warned"),
    [
        (KubeError(403, "Forbidden", 'events is forbidden: User "d" cannot create resource "events"'), True),
        (KubeError(503, "ServiceUnavailable", "etcd is slow"), False),
        (Deposed("a standby"), False),
    ],
    ids=["forbidden", "transient", "deposed"],
)
async def test_a_refused_write_is_counted_and_a_lasting_refusal_warns(
    error: Exception, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    manager = Manager(error)
    manager.release.set()
    rec = EventRecorder(cast(ClusterClient, manager), retry_delays=(0.0, 0.0))
    rec.start()
    try:
        with caplog.at_level(logging.WARNING, logger="dispatcher.events"):
            rec.emit(job(1), "Warning", "CopyRejected", "no")
            await rec.flush()
    finally:
        await rec.stop()
    assert rec.written == 0 and rec.dropped[QUEUE_FULL] == 0
    # A standby writes nothing by design: not a lost Event.
    assert rec.dropped[WRITE_FAILED] == (0 if isinstance(error, Deposed) else 1)
    # Only a transient failure is tried again: three tries in all here.
    transient = isinstance(error, KubeError) and error.transient
    assert manager.tries == (3 if transient else 1)
    messages = [r.getMessage() for r in caplog.records]
    if warned:
        assert len(messages) == 1 and "(write_failed)" in messages[0] and "cannot create resource" in messages[0]
    else:
        assert messages == []


async def test_a_transient_failure_is_tried_again_and_a_lost_answer_never_writes_twice() -> None:
    manager = Manager(KubeError(503, "ServiceUnavailable", "etcd is slow"), failures=1)
    manager.release.set()
    rec = EventRecorder(cast(ClusterClient, manager), retry_delays=(0.0, 0.0))
    rec.start()
    try:
        rec.emit(job(1), "Normal", "Placed", "placed on worker-1")
        rec.emit(job(2), "Normal", "Placed", "placed on worker-1")
        await rec.flush()
    finally:
        await rec.stop()
    assert rec.written == 2 and rec.dropped[WRITE_FAILED] == 0
    # Each Event has a name of its own, as client-go names them (<object>.<nanoseconds, hex>): a retried create
    # whose first try had landed answers AlreadyExists, and that counts as written.
    names = [e["metadata"]["name"] for e in manager.created]
    assert len(set(names)) == 2 and all(n.split(".")[0] in ("j1", "j2") for n in names)
    assert all("generateName" not in e["metadata"] for e in manager.created)
    landed = Manager(KubeError(409, "AlreadyExists", 'events "j1.1" already exists'), failures=1)
    landed.release.set()
    again = EventRecorder(cast(ClusterClient, landed), retry_delays=(0.0,))
    again.start()
    try:
        again.emit(job(1), "Normal", "Placed", "placed on worker-1")
        await again.flush()
    finally:
        await again.stop()
    assert again.written == 1 and landed.tries == 1
