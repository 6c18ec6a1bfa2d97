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
from dispatcher.live import Live
from dispatcher.mirror import copy_labels
from dispatcher.service import MISSING_GRACE, Dispatcher
from dispatcher.store.engine import make_engine
from dispatcher.store.models import WorkloadState
from dispatcher.store.repo import Repo

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


async def test_copy_not_yet_shown_is_not_lost_but_a_shown_one_that_vanishes_is() -> None:
    kube = KubeconfigRef(path="/nonexistent")
    config = DispatcherConfig(manager=kube, workers=(WorkerConfig("worker-1", kube),))
    engine = make_engine("sqlite+aiosqlite:///:memory:")
    dispatcher = Dispatcher(config, Repo(engine))
    moved: list[str] = []

    async def move_elsewhere(live: Live, reason: str, **_: Any) -> None:
        moved.append(reason)

    dispatcher._move_elsewhere = move_elsewhere  # type: ignore[method-assign]
    view = StubView()
    dispatcher.views["worker-1"] = view  # type: ignore[assignment]
    live = _live(placed_at=time.monotonic() - 10 * MISSING_GRACE)

    # Created long ago by the clock, never shown by the informer (its watch is behind): not lost.
    assert dispatcher._observe(live) is None
    await asyncio.sleep(0)
    assert not live.busy and moved == []

    # The informer shows it: seen from now on.
    view.jobs[(live.namespace, live.name)] = _copy(live, config.origin)
    dispatcher._observe(live)
    assert live.remote_seen

    # It disappears from the informer's cache: gone, so the workload is placed elsewhere.
    view.jobs.clear()
    assert dispatcher._observe(live) is None
    for _ in range(10):
        if moved:
            break
        await asyncio.sleep(0)
    assert live.busy and moved == [f"the copy on {live.cluster} disappeared"]
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
