"""Exactly once across a partition: the worker-side fencing agent (dispatcher/agent.py) and the dispatcher's fencing
Lease (dispatcher/worker_lease.py).

A partition cuts only the dispatcher's path to the worker: the worker's own controllers and its fencing agent keep
talking to its API server (the tests look into the worker the same way, through ``Rig.inside``).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from harness import JOBS, Rig, eventually, job, start_rig, stop_rig
from realrig import RealRig

from dispatcher import labels as L
from dispatcher.agent import LEASES, AgentGroup, fencing_lease_name
from dispatcher.api import views
from dispatcher.config import FencingPolicy, KubeconfigRef, Policy
from dispatcher.explain import render_workload
from dispatcher.health import HealthState
from dispatcher.kube.client import ClusterClient
from dispatcher.remote import clusters_table
from dispatcher.store.models import PlacementState, WorkloadState
from dispatcher.worker_lease import WorkerLeases

Obj = dict[str, Any]
EVENTS_RES = JOBS.__class__("", "v1", "events", "Event")
FAST = Policy(admission_timeout=60.0, lost_timeout=2.0, suspect_after=1.0, finished_retention=600.0, gc_interval=5.0)
LEASE = FencingPolicy(lease_duration=3.0, grace=2.0)


async def _health(rig: Rig, worker: str, state: str, timeout: float = 30.0) -> None:
    async def probe() -> bool:
        return rig.dispatcher.capacities[worker].health == state

    await eventually(probe, timeout=timeout, what=f"{worker} {state}")


def _active(obj: Obj | None) -> bool:
    return obj is not None and int((obj.get("status") or {}).get("active") or 0) > 0


class Overlap:
    """Samples, from inside every worker, where a Job's copies run; the seconds two ran at once."""

    def __init__(self, rig: Rig, name: str) -> None:
        self.rig = rig
        self.name = name
        self.overlap = 0.0
        self.seen: dict[str, bool] = {}
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        last = time.monotonic()
        while True:
            running = [w for w, c in self.rig.inside.items() if _active(await c.get(JOBS, "team-a", self.name))]
            now = time.monotonic()
            if len(running) > 1:
                self.overlap += now - last
            for w in running:
                self.seen[w] = True
            last = now
            await asyncio.sleep(0.05)

    def __enter__(self) -> Overlap:
        self._task = asyncio.create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


@pytest.mark.real_rig
async def test_a_partitioned_workers_copy_stops_before_it_starts_elsewhere(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    r = await start_rig(tmp_path, db_url, policy=FAST, fencing=LEASE, weights={"worker-2": 10.0}, real=real_rig)
    try:
        await eventually(lambda: _agent_up(r, "worker-2"), what="worker-2's fencing agent seen running")
        await r.submit(job("exactly-once", seconds=120))
        row = await r.wait_state("team-a", "exactly-once", WorkloadState.RUNNING, timeout=60)
        assert row.cluster == "worker-2"
        with Overlap(r, "exactly-once") as sampler:
            partitioned = time.monotonic()
            await r.fault("worker-2", "partition")  # only the dispatcher's path: the worker keeps running
            await _health(r, "worker-2", HealthState.LOST)

            async def fenced() -> Obj | None:
                copy = await r.inside["worker-2"].get(JOBS, "team-a", "exactly-once")
                annotated = copy is not None and L.FENCED in (copy["metadata"].get("annotations") or {})
                ok = annotated and copy is not None and copy["spec"].get("suspend") and not _active(copy)
                return copy if ok else None

            stale = await eventually(fenced, timeout=30, what="the stale copy suspended by the agent")
            stopped = time.monotonic() - partitioned
            assert L.FENCED in stale["metadata"]["annotations"]
            assert "did not renew its fencing Lease" in stale["metadata"]["annotations"][L.FENCED]
            moved = await eventually(
                lambda: _running_elsewhere(r, "exactly-once", "worker-2"), timeout=60, what="running elsewhere"
            )
            started = time.monotonic() - partitioned
            # Not before the fencing Lease ran out plus the grace (counted from the last renewal sent).
            assert started >= LEASE.lease_duration + LEASE.grace - LEASE.renew_interval - 0.5
            assert stopped < started
            assert moved.generation == 2

            async def seen_there() -> bool:
                return moved.cluster in sampler.seen

            await eventually(seen_there, timeout=30, what=f"the new copy seen running on {moved.cluster}")
        assert sampler.overlap == 0.0, f"two copies ran at once for {sampler.overlap:.2f}s"
        assert set(sampler.seen) == {"worker-2", moved.cluster}
        reasons = await _reasons(r, "exactly-once")
        assert "WaitingForFencing" in reasons and "FailedOver" in reasons
        # The agent's own Event on the copy it stopped, in the worker.
        worker_events = await r.inside["worker-2"].list(
            EVENTS_RES, "team-a", field_selector="involvedObject.name=exactly-once"
        )
        assert "FencedByAgent" in {e.get("reason") for e in worker_events.get("items") or []}
        await r.fault("worker-2", "none")
        await _health(r, "worker-2", HealthState.READY, timeout=40)
        assert await r.inside["worker-2"].get(JOBS, "team-a", "exactly-once") is None  # the stale copy was deleted
    finally:
        await stop_rig(r)


@pytest.mark.real_rig
async def test_a_copy_the_agent_stopped_during_a_short_partition_is_placed_again(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    """The Lease runs out before the worker is declared Lost: the agent stops the copy, nothing failed over; once
    the worker answers, the dispatcher sees the fenced copy and places the workload again (the agent never resumes)."""
    policy = Policy(
        admission_timeout=60.0, lost_timeout=60.0, suspect_after=30.0, finished_retention=600.0, gc_interval=5.0
    )
    short = FencingPolicy(lease_duration=1.5, grace=1.0)
    r = await start_rig(tmp_path, db_url, policy=policy, fencing=short, weights={"worker-1": 10.0}, real=real_rig)
    try:
        await r.submit(job("interrupted", seconds=120))
        row = await r.wait_state("team-a", "interrupted", WorkloadState.RUNNING, timeout=60)
        assert row.cluster == "worker-1"
        await r.fault("worker-1", "partition")

        async def fenced() -> bool:
            copy = await r.inside["worker-1"].get(JOBS, "team-a", "interrupted")
            return copy is not None and L.FENCED in (copy["metadata"].get("annotations") or {})

        await eventually(fenced, timeout=20, what="the copy fenced by the agent")
        assert r.dispatcher.capacities["worker-1"].health != HealthState.LOST
        await r.fault("worker-1", "none")

        async def again() -> Any:
            row = await r.row("team-a", "interrupted")
            ok = row is not None and row.generation >= 2 and row.state == WorkloadState.RUNNING
            return row if ok else None

        moved = await eventually(again, timeout=60, what="placed again and running")
        first = min(moved.placements, key=lambda p: p.id)
        assert first.state == PlacementState.FENCED
        assert "fencing agent" in (first.outcome or "")
        assert "FencedByAgent" in await _reasons(r, "interrupted")
        copies = await r.copies("team-a", "interrupted")
        assert list(copies) == [moved.cluster]
        assert L.FENCED not in (copies[moved.cluster]["metadata"].get("annotations") or {})
    finally:
        await stop_rig(r)


async def test_without_an_agent_failover_is_at_least_once_and_says_so(tmp_path: Path, db_url: str) -> None:
    r = await start_rig(tmp_path, db_url, policy=FAST, weights={"worker-2": 10.0})
    try:
        assert r.dispatcher.leases.describe("worker-2")["mode"] == "none"
        await r.submit(job("twice", seconds=120))
        placed = await r.wait_state("team-a", "twice", WorkloadState.RUNNING, timeout=60)
        # Said plainly where operators look: explain, the cluster table, the API's fencing object.
        assert "Failover: at-least-once: worker-2 has fencing: none" in render_workload(placed)
        table = clusters_table({"items": [views.cluster_summary(r.dispatcher.capacities["worker-2"])]})
        assert "none (at-least-once)" in table
        with Overlap(r, "twice") as sampler:
            await r.fault("worker-2", "partition")
            await _health(r, "worker-2", HealthState.LOST)
            moved = await eventually(lambda: _running_elsewhere(r, "twice", "worker-2"), timeout=60, what="moved")
            await eventually(lambda: _overlapping(sampler), timeout=20, what="both copies seen running")
        assert sampler.overlap > 0  # the honest report of what fencing: none allows
        lost = min(moved.placements, key=lambda p: p.id)
        assert "at-least-once" in (lost.outcome or "") or "at-least-once" in await _messages(r, "twice")
    finally:
        await stop_rig(r)


async def test_a_worker_whose_agent_is_down_is_shown_and_failover_says_so(tmp_path: Path, db_url: str) -> None:
    r = await start_rig(tmp_path, db_url, policy=FAST, fencing=LEASE, weights={"worker-2": 10.0})
    try:
        await eventually(lambda: _agent_up(r, "worker-2"), what="worker-2's agent seen running")
        assert r.dispatcher.leases.describe("worker-2")["summary"] == "agent (running)"
        assert 'kueue_dispatcher_fencing_agent_up{cluster="worker-2"} 1.0' in _metrics(r)
        assert 'kueue_dispatcher_fencing_lease_renewing{cluster="worker-2"} 1.0' in _metrics(r)
        await r.submit(job("guarded", seconds=1))
        guarded = await r.wait_state("team-a", "guarded", WorkloadState.RUNNING, WorkloadState.SUCCEEDED, timeout=60)
        assert "Failover: exactly once: a fencing agent runs on worker-2" in render_workload(guarded)
        assert r.agents is not None
        await r.agents.stop_one("worker-2")

        async def down() -> bool:
            return r.dispatcher.leases.agent_up("worker-2") is False

        await eventually(down, timeout=30, what="worker-2's agent seen down")
        fencing = r.dispatcher.leases.describe("worker-2")
        assert "NOT running" in fencing["summary"]
        assert 'kueue_dispatcher_fencing_agent_up{cluster="worker-2"} 0.0' in _metrics(r)
        summary = views.cluster_summary(r.dispatcher.capacities["worker-2"], fencing=fencing)
        assert "agent (DOWN)" in clusters_table({"items": [summary]})
        await r.submit(job("at-risk", seconds=120))
        await r.wait_state("team-a", "at-risk", WorkloadState.RUNNING, timeout=60)
        await r.fault("worker-2", "partition")
        await _health(r, "worker-2", HealthState.LOST)
        await eventually(lambda: _running_elsewhere(r, "at-risk", "worker-2"), timeout=60, what="moved")
        assert "not running when it was lost" in await _messages(r, "at-risk")
        # Nobody stopped the copy left there: that is what is at risk.
        assert _active(await r.inside["worker-2"].get(JOBS, "team-a", "at-risk"))
    finally:
        await stop_rig(r)


async def test_a_fencing_lease_left_from_an_earlier_configuration_is_deleted(tmp_path: Path, db_url: str) -> None:
    r = await start_rig(tmp_path, db_url, fencing=LEASE)
    try:
        name = fencing_lease_name(r.config.origin)
        assert await r.inside["worker-1"].get(LEASES, "kueue-system", name) is not None
    finally:
        await stop_rig(r)
    r = await start_rig(tmp_path / "again", db_url)
    try:
        # A new world: plant a stale Lease, then a dispatcher with fencing: none must remove it at start.
        await r.inside["worker-1"].create(
            LEASES,
            "kueue-system",
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "labels": {L.FENCING: r.config.origin}},
                "spec": {"holderIdentity": "old", "leaseDurationSeconds": 5},
            },
        )
        await r.dispatcher.leases.stop()
        r.dispatcher.leases.start()  # what a (re)start or a new leader does
        await eventually(lambda: _gone(r.inside["worker-1"], name), timeout=10, what="the stale fencing Lease deleted")
    finally:
        await stop_rig(r)


class SkewedClock:
    """A monotonic clock ``offset`` seconds off and running at ``rate`` times real time."""

    def __init__(self, offset: float, rate: float) -> None:
        self.start = time.monotonic()
        self.offset = offset
        self.rate = rate

    def __call__(self) -> float:
        return self.offset + self.start + (time.monotonic() - self.start) * self.rate


@pytest.mark.parametrize(("offset", "rate"), [(7200.0, 1.0), (-7200.0, 1.0), (0.0, 1.05), (0.0, 0.95)])
async def test_the_agent_judges_the_lease_by_its_own_clock(tmp_path: Path, offset: float, rate: float) -> None:
    """Bounded drift, as Kubernetes leases assume: an agent clock hours off never fences while the dispatcher renews;
    one running 5% fast or slow still fences before the dispatcher would start the copy elsewhere."""
    from kubesim.world import SimWorld, WorldOptions

    world = SimWorld(WorldOptions(workers=1, gpu_workers=0))
    await world.start()
    agents: AgentGroup | None = None
    leases: WorkerLeases | None = None
    client: ClusterClient | None = None
    try:
        await asyncio.to_thread(world.write_files, tmp_path)
        from dispatcher.kube.client import connect

        client = await connect("worker-1", KubeconfigRef(path=str(tmp_path / "worker-1.kubeconfig")))
        policy = FencingPolicy(lease_duration=2.0, grace=1.0)
        leases = WorkerLeases({"worker-1": client}, ["worker-1"], policy, origin="manager", identity="test")
        leases.start()
        await eventually(lambda: _exists(client, fencing_lease_name("manager")), what="the Lease created")
        ref = KubeconfigRef(path=str(tmp_path / "worker-1.agent.kubeconfig"))
        agents = await AgentGroup.start({"worker-1": ref}, clocks={"worker-1": SkewedClock(offset, rate)})
        agent = agents.agents["worker-1"]
        async with asyncio.timeout(10):
            await agent.ready.wait()
        await asyncio.sleep(3 * policy.lease_duration)  # renewed all along: never expired
        assert not agent.leases["manager"].expired, agent.status()
        leases.hold("worker-1")  # the dispatcher stops renewing (as for a Lost worker)
        safe_at = leases.safe_at("worker-1")

        async def expired() -> bool:
            return agent.leases["manager"].expired

        await eventually(expired, timeout=10, what="the agent fencing")
        assert time.monotonic() < safe_at, "the agent fenced only after the dispatcher would have failed over"
        leases.release("worker-1")

        async def renewed() -> bool:
            return not agent.leases["manager"].expired

        await eventually(renewed, timeout=10, what="fencing stopped once renewed")
    finally:
        if agents is not None:
            await agents.stop()
        if leases is not None:
            await leases.close()
        if client is not None:
            await client.close()
        await world.stop()


# -- helpers -------------------------------------------------------------------------------------------------


def _metrics(r: Rig) -> str:
    return r.dispatcher.metrics.render()[0].decode()


async def _agent_up(r: Rig, worker: str) -> bool:
    return r.dispatcher.leases.agent_up(worker) is True


async def _running_elsewhere(r: Rig, name: str, worker: str) -> Any:
    row = await r.row("team-a", name)
    ok = row is not None and row.generation >= 2 and row.cluster != worker and row.state == WorkloadState.RUNNING
    return row if ok else None


async def _overlapping(sampler: Overlap) -> bool:
    return sampler.overlap > 0


async def _reasons(r: Rig, name: str) -> set[str]:
    data = await r.manager.list(EVENTS_RES, "team-a", field_selector=f"involvedObject.name={name}")
    return {e.get("reason", "") for e in data.get("items") or []}


async def _messages(r: Rig, name: str) -> str:
    data = await r.manager.list(EVENTS_RES, "team-a", field_selector=f"involvedObject.name={name}")
    return "\n".join(str(e.get("message", "")) for e in data.get("items") or [])


async def _exists(client: ClusterClient, name: str) -> bool:
    return await client.get(LEASES, "kueue-system", name) is not None


async def _gone(client: ClusterClient, name: str) -> bool:
    return await client.get(LEASES, "kueue-system", name) is None
