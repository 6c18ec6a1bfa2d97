"""Recovering a large open state: every workload queued, the cyclic GC on again afterwards (it is paused for the
load and the loaded state frozen out of its reach, see ``Recovery.recover``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from dispatcher.config import DispatcherConfig, KubeconfigRef, WorkerConfig
from dispatcher.recovery import FREEZE_AFTER_RECOVERING
from dispatcher.service import Dispatcher
from dispatcher.store.models import Placement, Workload, WorkloadState


class StubRepo:
    def __init__(self, rows: list[Workload]) -> None:
        self.rows = rows

    async def load_open(self) -> list[Workload]:
        return self.rows

    async def open_placements(self) -> list[Placement]:
        return []

    async def last_decisions(self, ids: list[int]) -> dict[int, dict[str, object]]:
        assert not ids, "no race was in progress among these rows"
        return {}


def _row(i: int) -> Workload:
    return Workload(
        id=i + 1, uid=f"uid-{i}", namespace="team-a", name=f"job-{i}", kind="Job", queue="user-queue", priority=0,
        generation=1, state=WorkloadState.PENDING, status_mode="annotations", no_failover=False, excluded=[],
        deleted=False, pod_sets=[{"name": "main", "count": 1, "requests": {"cpu": "1"}, "template": {}}],
    )  # fmt: skip


@pytest.fixture
def unfreeze() -> Iterator[None]:
    yield
    gc.unfreeze()  # give the test process's objects back to the collector


@pytest.mark.usefixtures("unfreeze")
async def test_a_large_recovery_queues_everything_and_leaves_the_gc_on() -> None:
    n = FREEZE_AFTER_RECOVERING + 10
    kube = KubeconfigRef(path="/nonexistent")
    config = DispatcherConfig(manager=kube, workers=(WorkerConfig("worker-1", kube),))
    dispatcher = Dispatcher(config, StubRepo([_row(i) for i in range(n)]))  # type: ignore[arg-type]
    assert gc.isenabled()
    await dispatcher.recovery.recover()
    assert gc.isenabled()
    assert len(dispatcher.live) == n and len(dispatcher.rt.queue) == n
    assert gc.get_freeze_count() > n  # the recovered records are out of the collector's walks
