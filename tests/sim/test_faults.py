"""Fault modes of a simulated cluster as a kubernetes_asyncio client sees them, and the SimWorld admin switch.

- stop: connection refused until healed;
- partition: connections accepted, nothing answered (a client timeout fires), answers again when healed;
- slow: every request takes at least the added latency and still succeeds;
- flaky: a share of requests fail with 500 or with 429 + ``Retry-After``, each with a Status body;
- restart: open watches end, state (objects and resourceVersions) is kept, a watch from the last version works.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import watch
from simclient import Obj, kube_configuration, raw_request, wait_for

from kubesim.cluster import SimCluster
from kubesim.world import SimWorld, WorldOptions

NS = "default"


def configmap(name: str, data: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data or {}}


@pytest.fixture
def core(api_client: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(api_client)


async def test_stop_refuses_connections_until_healed(sim_cluster: SimCluster, core: k8s.CoreV1Api) -> None:
    await core.create_namespaced_config_map(NS, configmap("kept"))
    await sim_cluster.set_fault("stop")
    assert not sim_cluster.server.running
    with pytest.raises(aiohttp.ClientConnectorError):
        await core.list_namespaced_config_map(NS, _request_timeout=5)
    # A fresh connection (no pooled keep-alive one) is refused too.
    with pytest.raises(aiohttp.ClientConnectorError):
        await core.read_namespaced_config_map("kept", NS, _request_timeout=5)
    await sim_cluster.set_fault("none")
    assert sim_cluster.server.running
    got = await core.read_namespaced_config_map("kept", NS, _request_timeout=5)
    assert got.metadata.name == "kept"


async def test_partition_accepts_but_never_answers(sim_cluster: SimCluster, core: k8s.CoreV1Api) -> None:
    await sim_cluster.set_fault("partition")
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await core.list_namespaced_config_map(NS, _request_timeout=0.5)
    assert time.monotonic() - started >= 0.5
    # A request sent during the partition hangs and completes once healed.
    pending = asyncio.create_task(core.create_namespaced_config_map(NS, configmap("late"), _request_timeout=10))
    done, _ = await asyncio.wait({pending}, timeout=0.3)
    assert not done  # still unanswered
    await sim_cluster.set_fault("none")
    async with asyncio.timeout(10):
        created = await pending
    assert created.metadata.name == "late"
    listed = await core.list_namespaced_config_map(NS, _request_timeout=5)
    assert "late" in [i.metadata.name for i in listed.items]


async def test_slow_adds_latency(sim_cluster: SimCluster, core: k8s.CoreV1Api) -> None:
    await sim_cluster.set_fault("slow", latency=1.0)
    for call in (
        core.create_namespaced_config_map(NS, configmap("slow")),
        core.read_namespaced_config_map("slow", NS),
    ):
        started = time.monotonic()
        result = await call
        assert time.monotonic() - started >= 1.0
        assert result.metadata.name == "slow"
    await sim_cluster.set_fault("none")
    started = time.monotonic()
    await core.read_namespaced_config_map("slow", NS)
    assert time.monotonic() - started < 1.0  # healed: the added second is gone


async def test_flaky_answers_500_or_429_with_retry_after(sim_cluster: SimCluster, api_client: k8s.ApiClient) -> None:
    sim_cluster.faults.rng = random.Random(7)
    await sim_cluster.set_fault("flaky", error_rate=1.0)
    codes: set[int] = set()
    for _ in range(20):
        resp = await raw_request(api_client, "GET", f"/api/v1/namespaces/{NS}/configmaps")
        assert resp.status in (500, 429)
        codes.add(resp.status)
        body = resp.body
        assert (body["kind"], body["status"], body["code"]) == ("Status", "Failure", resp.status)
        if resp.status == 429:
            assert body["reason"] == "TooManyRequests"
            assert int(resp.headers["Retry-After"]) >= 1
            assert body["details"]["retryAfterSeconds"] == int(resp.headers["Retry-After"])
        else:
            assert body["reason"] == "InternalError"
            assert "Retry-After" not in resp.headers
    assert codes == {500, 429}
    # The typed client surfaces them as ApiException with the status code.
    with pytest.raises(k8s.ApiException) as err:
        await k8s.CoreV1Api(api_client).list_namespace()
    assert err.value.status in (500, 429)
    # Health endpoints stay up, and with a partial rate some requests get through.
    assert (await raw_request(api_client, "GET", "/healthz")).status == 200
    await sim_cluster.set_fault("flaky", error_rate=0.5)
    statuses = [(await raw_request(api_client, "GET", "/api/v1/namespaces")).status for _ in range(30)]
    assert 200 in statuses and set(statuses) - {200}
    await sim_cluster.set_fault("none")
    assert (await raw_request(api_client, "GET", "/api/v1/namespaces")).status == 200


async def test_restart_ends_watches_and_keeps_state(sim_cluster: SimCluster, core: k8s.CoreV1Api) -> None:
    created = await core.create_namespaced_config_map(NS, configmap("survivor", {"a": "1"}))
    start = created.metadata.resource_version
    events: list[tuple[str, str]] = []
    ended: list[BaseException | None] = []
    w = watch.Watch()

    async def consume() -> None:
        try:
            async for event in w.stream(
                core.list_namespaced_config_map, NS, resource_version=start, timeout_seconds=60
            ):
                events.append((event["type"], event["object"].metadata.name))
        except (TimeoutError, aiohttp.ClientError, k8s.ApiException) as exc:
            ended.append(exc)
            return
        ended.append(None)

    task = asyncio.create_task(consume())
    await core.create_namespaced_config_map(NS, configmap("seen-before-restart"))
    await wait_for(lambda: ("ADDED", "seen-before-restart") in events, "the watch to be live")
    last_rv = (await core.read_namespaced_config_map("seen-before-restart", NS)).metadata.resource_version
    await sim_cluster.set_fault("restart", downtime=0.2)
    async with asyncio.timeout(10):
        await task
    await w.close()
    assert len(ended) == 1  # the watch ended (cleanly or with a connection error) instead of hanging
    assert sim_cluster.server.running
    # State is kept, resourceVersions included.
    again = await core.read_namespaced_config_map("survivor", NS)
    assert again.metadata.resource_version == created.metadata.resource_version
    assert again.metadata.uid == created.metadata.uid
    assert again.data == {"a": "1"}
    # A new watch from the last seen version gets what happened after it, and nothing before.
    await core.create_namespaced_config_map(NS, configmap("after-restart"))
    resumed: list[tuple[str, str]] = []
    w2 = watch.Watch()
    async for event in w2.stream(core.list_namespaced_config_map, NS, resource_version=last_rv, timeout_seconds=5):
        resumed.append((event["type"], event["object"].metadata.name))
        if event["object"].metadata.name == "after-restart":
            w2.stop()
    await w2.close()
    assert resumed == [("ADDED", "after-restart")]


async def test_partition_holds_watch_events_until_healed(sim_cluster: SimCluster, core: k8s.CoreV1Api) -> None:
    start = (await core.list_namespaced_config_map(NS)).metadata.resource_version
    events: list[str] = []
    w = watch.Watch()

    async def consume() -> None:
        async for event in w.stream(core.list_namespaced_config_map, NS, resource_version=start, timeout_seconds=30):
            events.append(event["object"].metadata.name)

    task = asyncio.create_task(consume())
    await core.create_namespaced_config_map(NS, configmap("p1"))
    await wait_for(lambda: "p1" in events, "the watch to be live")
    await sim_cluster.set_fault("partition")
    sim_cluster.client.create(configmap("p2") | {"metadata": {"name": "p2", "namespace": NS}})
    with pytest.raises(AssertionError):
        await wait_for(lambda: "p2" in events, "p2 during the partition", timeout=0.5)
    await sim_cluster.set_fault("none")
    await wait_for(lambda: "p2" in events, "p2 after healing")
    w.stop()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await w.close()


# ---- SimWorld admin endpoint -----------------------------------------------------------------------------------


@pytest.fixture
async def world() -> AsyncIterator[SimWorld]:
    w = SimWorld(WorldOptions(workers=1, gpu_workers=0))
    await w.start()
    try:
        yield w
    finally:
        await w.stop()


async def _admin(session: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> tuple[int, Any]:
    async with session.request(method, url, json=body) as resp:
        return resp.status, await resp.json()


async def test_world_admin_endpoint_switches_fault_modes(world: SimWorld, tmp_path: Path) -> None:
    worker = world.cluster("worker-1")
    conf = await kube_configuration(worker, tmp_path)
    async with aiohttp.ClientSession() as session, k8s.ApiClient(conf) as api:
        core = k8s.CoreV1Api(api)
        assert (await core.list_namespace()).items
        code, listing = await _admin(session, "GET", f"{world.admin_url}/clusters")
        assert code == 200
        assert {c["name"]: c["fault"] for c in listing} == {"manager": "none", "worker-1": "none"}

        code, answer = await _admin(session, "POST", f"{world.admin_url}/clusters/worker-1/fault", {"mode": "stop"})
        assert (code, answer) == (200, {"name": "worker-1", "fault": "stop"})
        with pytest.raises(aiohttp.ClientConnectorError):
            await core.list_namespace(_request_timeout=5)
        code, listing = await _admin(session, "GET", f"{world.admin_url}/clusters")
        state = {c["name"]: (c["fault"], c["running"]) for c in listing}
        assert state == {"manager": ("none", True), "worker-1": ("stop", False)}

        body = {"mode": "slow", "latency": 0.2}
        code, answer = await _admin(session, "POST", f"{world.admin_url}/clusters/worker-1/fault", body)
        assert (code, answer["fault"]) == (200, "slow")
        started = time.monotonic()
        assert (await core.list_namespace(_request_timeout=5)).items
        assert time.monotonic() - started >= 0.2

        code, answer = await _admin(session, "POST", f"{world.admin_url}/clusters/worker-1/fault", {"mode": "none"})
        assert (code, answer["fault"]) == (200, "none")
        assert worker.faults.mode == "none"

        code, answer = await _admin(session, "POST", f"{world.admin_url}/clusters/worker-1/fault", {"mode": "melt"})
        assert code == 400
        assert "mode must be one of" in answer["error"]
        code, answer = await _admin(session, "POST", f"{world.admin_url}/clusters/nope/fault", {"mode": "stop"})
        assert code == 404

        # compact: an old resourceVersion answers 410 afterwards.
        old = (await core.list_namespace()).metadata.resource_version
        await core.create_namespaced_config_map(NS, configmap("bump"))
        code, answer = await _admin(session, "POST", f"{world.admin_url}/clusters/worker-1/compact")
        assert code == 200
        assert answer["compactedResourceVersion"] > int(old)
        resp = await raw_request(api, "GET", "/api/v1/namespaces", query={"watch": "1", "resourceVersion": old})
        assert resp.body["type"] == "ERROR"
        assert resp.body["object"]["code"] == 410
        assert resp.body["object"]["reason"] == "Expired"
