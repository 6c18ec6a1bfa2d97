"""A copy missing from the worker's informer cache: lost only once the informer has shown it.

Under load a worker's watch can lag by seconds; a copy just created and not yet shown must not be taken for
deleted (that would delete it and create it again elsewhere). A copy the informer showed and then dropped is
gone, and the workload is placed again. Driven on a Dispatcher that is not started, with a stub worker view.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from dispatcher.config import DispatcherConfig, KubeconfigRef, WorkerConfig
from dispatcher.copies import copy_labels
from dispatcher.live import Live
from dispatcher.service import Dispatcher
from dispatcher.store.engine import make_engine
from dispatcher.store.models import WorkloadState
from dispatcher.store.repo import Repo
from dispatcher.sync import MISSING_GRACE, UNSEEN_GRACE

Obj = dict[str, Any]


class StubView:
    """The two things ``Dispatcher._observe`` reads from a worker view: its Jobs cache and whether it synced."""

    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], Obj] = {}
        self.workloads_by_owner: dict[str, Obj] = {}

    def remote_jobs(self, _plural: str) -> dict[tuple[str, str], Obj]:
        return self.jobs

    def jobs_synced(self) -> bool:
        return True


def _live(**values: Any) -> Live:
    base: dict[str, Any] = {
        "id": 1,
        "uid": "uid-1",
        "namespace": "team-a",
        "name": "job-1",
        "kind": "Job",
        "queue": "user-queue",
        "priority": 0,
        "generation": 1,
        "state": WorkloadState.PLACED,
        "status_mode": "annotations",
        "no_failover": False,
        "pod_sets": [],
        "cluster_selector": None,
        "excluded": [],
        "created": time.time(),
        "cluster": "worker-1",
        "placement_id": 7,
        "remote_uid": "remote-1",
    }
    base.update(values)
    return Live(**base)


def _copy(live: Live, origin: str) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": live.name,
            "namespace": live.namespace,
            "uid": "remote-1",
            "labels": copy_labels(origin, live.uid, live.generation),
        },
        "spec": {"suspend": True},
        "status": {},
    }


class StubClient:
    """The worker's API as ``_confirm_missing`` asks it: GET of the copy by name."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Obj] = {}
        self.gets = 0

    async def get(self, _res: Any, namespace: str, name: str) -> Obj | None:
        self.gets += 1
        return self.objects.get((namespace, name))


async def _settle(moved: list[str], client: StubClient, gets: int) -> None:
    for _ in range(50):
        if moved or client.gets >= gets:
            break
        await asyncio.sleep(0)
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_missing_copy_is_confirmed_with_the_worker_before_it_is_placed_again() -> None:
    kube = KubeconfigRef(path="/nonexistent")
    config = DispatcherConfig(manager=kube, workers=(WorkerConfig("worker-1", kube),))
    engine = make_engine("sqlite+aiosqlite:///:memory:")
    dispatcher = Dispatcher(config, Repo(engine))
    moved: list[str] = []

    async def move_elsewhere(live: Live, reason: str, **_: Any) -> None:
        moved.append(reason)

    dispatcher.requeue.move_elsewhere = move_elsewhere  # type: ignore[method-assign]
    view, client = StubView(), StubClient()
    dispatcher.views["worker-1"] = view  # type: ignore[assignment]
    dispatcher.clients["worker-1"] = client  # type: ignore[assignment]

    # Just created, not shown yet: nothing is asked, but a look is scheduled for when the grace is over.
    fresh = _live(placed_at=time.monotonic())
    assert dispatcher.sync.observe_live(fresh) is None
    assert client.gets == 0 and not fresh.busy
    [(at, _seq, kind, wid, _gen)] = dispatcher.rt.timers._heap
    assert kind == "resync" and wid == fresh.id and at >= fresh.placed_at + UNSEEN_GRACE

    # Never shown long after its creation, but the worker has it (its watch lags): kept.
    old = _live(placed_at=time.monotonic() - 2 * UNSEEN_GRACE)
    client.objects[(old.namespace, old.name)] = _copy(old, config.origin)
    dispatcher.sync.observe_live(old)
    await _settle(moved, client, 1)
    assert moved == [] and not old.busy and client.gets == 1

    # Shown, then gone from the cache just after creation (within the grace): looked at again later, not now.
    seen = _live(placed_at=time.monotonic())
    view.jobs[(seen.namespace, seen.name)] = _copy(seen, config.origin)
    dispatcher.sync.observe_live(seen)
    assert seen.remote_seen
    view.jobs.clear()
    client.objects.clear()
    assert dispatcher.sync.observe_live(seen) is None
    assert client.gets == 1 and moved == []
    # The grace is over: the worker says it is gone, so the workload is placed again.
    seen.placed_at -= 2 * MISSING_GRACE
    dispatcher.sync.observe_live(seen)
    await _settle(moved, client, 2)
    assert seen.busy and moved == [f"the copy on {seen.cluster} disappeared"]
    await engine.dispose()


def test_copies_recovered_from_sql_count_as_seen() -> None:
    """After a restart the informers' first list is complete: a copy missing from it is gone."""
    from dispatcher.store.models import Workload

    for state, seen in ((WorkloadState.PLACED, True), (WorkloadState.RUNNING, True), (WorkloadState.PLACING, False)):
        row = Workload(
            id=1, uid="u", namespace="team-a", name="j", kind="Job", queue="q", priority=0, generation=1,
            state=state, status_mode="annotations", no_failover=False, pod_sets=[], excluded=[], deleted=False,
        )  # fmt: skip
        assert Live.from_row(row, time.monotonic(), time.time()).remote_seen is seen
