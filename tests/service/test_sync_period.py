"""The status sync's batch period (``policy.statusSyncPeriod``): a lone change is synced at once; changes that come
within the period of the last batch wait for its end and share one batch (one SQL transaction, one manager write per
workload); 0 turns the gathering off."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pytest

from dispatcher.config import ConfigError, DispatcherConfig, KubeconfigRef, Policy, WorkerConfig, _policy
from dispatcher.service import Dispatcher
from dispatcher.store.engine import make_engine
from dispatcher.store.models import Workload, WorkloadState
from dispatcher.store.repo import Repo


async def _until(probe: Any, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not probe():  # noqa: ASYNC110 (a condition on plain state, with a deadline)
            await asyncio.sleep(0.005)


def _dispatcher(period: float) -> tuple[Dispatcher, list[tuple[float, set[int]]]]:
    kube = KubeconfigRef(path="/nonexistent")
    config = DispatcherConfig(
        manager=kube,
        workers=(WorkerConfig("worker-1", kube),),
        policy=dataclasses.replace(Policy(), status_sync_period=period),
    )
    dispatcher = Dispatcher(config, Repo(make_engine("sqlite+aiosqlite:///:memory:")))
    batches: list[tuple[float, set[int]]] = []

    async def batch(ids: set[int]) -> set[int]:
        batches.append((time.monotonic(), set(ids)))
        return set()

    dispatcher.sync._sync_batch = batch  # type: ignore[method-assign]
    return dispatcher, batches


async def test_a_lone_change_is_synced_at_once_and_changes_within_the_period_share_the_next_batch() -> None:
    period = 0.5
    dispatcher, batches = _dispatcher(period)
    rt = dispatcher.rt
    loop = asyncio.create_task(dispatcher.sync.loop())
    try:
        marked = time.monotonic()
        rt.mark_dirty(1)
        await _until(lambda: len(batches) == 1)
        assert batches[0][1] == {1}
        assert batches[0][0] - marked < period / 2, "nothing batched before: no wait"

        # Two changes right after that batch (a copy admitted, then another copy running): one batch for both,
        # once the period since the last batch is over.
        rt.mark_dirty(2)
        await asyncio.sleep(0)
        rt.mark_dirty(3)
        await _until(lambda: len(batches) == 2)
        assert batches[1][1] == {2, 3}
        assert batches[1][0] - batches[0][0] >= period - 0.01

        # Quiet for longer than the period: the next change is synced at once again.
        await asyncio.sleep(period)
        marked = time.monotonic()
        rt.mark_dirty(4)
        await _until(lambda: len(batches) == 3)
        assert batches[2][1] == {4} and batches[2][0] - marked < period / 2
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


async def test_period_zero_syncs_every_wake_up_without_waiting() -> None:
    dispatcher, batches = _dispatcher(0.0)
    rt = dispatcher.rt
    loop = asyncio.create_task(dispatcher.sync.loop())
    try:
        start = time.monotonic()
        for wid in range(1, 6):
            rt.mark_dirty(wid)
            await _until(lambda n=wid: len(batches) == n)
        assert [ids for _, ids in batches] == [{1}, {2}, {3}, {4}, {5}]
        assert time.monotonic() - start < 1.0
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, 0.1), ("250ms", 0.25), (0, 0.0), ("1s", 1.0)],
)
def test_the_period_is_read_from_the_policy(raw: Any, expected: float) -> None:
    assert _policy({} if raw is None else {"statusSyncPeriod": raw}).status_sync_period == expected


@pytest.mark.parametrize("raw", ["-1s", "1m", "soon", True])
def test_a_bad_period_is_refused_with_its_path(raw: Any) -> None:
    with pytest.raises(ConfigError, match=r"policy\.statusSyncPeriod"):
        _policy({"statusSyncPeriod": raw})


class _OpenRows:
    """SQL as a restarted dispatcher finds it: workloads running on a worker, nothing else."""

    def __init__(self, rows: list[Workload]) -> None:
        self.rows = rows

    async def load_open(self) -> list[Workload]:
        return self.rows

    async def open_placements(self) -> list[Any]:
        return []

    async def last_decisions(self, ids: list[int]) -> dict[int, Any]:
        return {}


def _running(i: int) -> Workload:
    return Workload(
        id=i, uid=f"uid-{i}", namespace="team-a", name=f"job-{i}", kind="Job", queue="user-queue", priority=0,
        generation=1, state=WorkloadState.RUNNING, status_mode="annotations", no_failover=False, excluded=[],
        deleted=False, cluster="worker-1", placement_id=None,
        pod_sets=[{"name": "main", "count": 1, "requests": {"cpu": "1"}, "template": {}}],
    )  # fmt: skip


async def test_workloads_resumed_after_a_restart_are_synced_without_any_other_change() -> None:
    """The workers' informers list the copies before SQL's open workloads are loaded, so a copy that finished while
    the dispatcher was down sends no event afterwards: recovery itself must wake the sync (once every copy had
    finished, the crash drill's resumed workloads waited for good)."""
    kube = KubeconfigRef(path="/nonexistent")
    config = DispatcherConfig(manager=kube, workers=(WorkerConfig("worker-1", kube),))
    rows = [_running(i) for i in (1, 2)]
    dispatcher = Dispatcher(config, _OpenRows(rows))  # type: ignore[arg-type]
    batches: list[set[int]] = []

    async def batch(ids: set[int]) -> set[int]:
        batches.append(set(ids))
        return set()

    dispatcher.sync._sync_batch = batch  # type: ignore[method-assign]
    loop = asyncio.create_task(dispatcher.sync.loop())
    try:
        await dispatcher.recovery.recover()
        await _until(lambda: len(batches) == 1)
        assert batches[0] == {1, 2}
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
