"""dispatcher/kube: what the client sends (its own request path on kubernetes_asyncio's session and credentials)
and what the informers keep, against a simulated API server over HTTPS with a bearer token."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from dispatcher.config import KubeconfigRef
from dispatcher.kube.client import ClusterClient, KubeError, Resource, connect
from dispatcher.kube.informer import Informer
from kubesim.cluster import ClusterOptions, SimCluster
from kubesim.http.common import BOOKMARK_INTERVAL

CM = Resource("", "v1", "configmaps", "ConfigMap")
Obj = dict[str, Any]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[SimCluster, ClusterClient]]:
    sim = SimCluster("t", ClusterOptions(kueue=False, jobs=False, scheduler=False, kubelet=False))
    await sim.start()
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(sim.kubeconfig()))
    client = await connect("t", KubeconfigRef(path=str(path)))
    try:
        yield sim, client
    finally:
        await client.close()
        await sim.stop()


def _cm(name: str, labels: dict[str, str], data: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": data or {}}


async def test_writes_queries_and_credentials_reach_the_server_as_sent(
    cluster: tuple[SimCluster, ClusterClient], tmp_path: Path
) -> None:
    sim, client = cluster
    text = 'grüße, 東京 "quoted" \\ and a line\nbreak'
    created = await client.create(CM, "default", _cm("a", {"tier": "x", "zone": "1"}, {"t": text}))
    assert created["data"]["t"] == text, "UTF-8 JSON in and out"
    await client.create(CM, "default", _cm("b", {"tier": "x", "zone": "2"}))
    await client.create(CM, "default", _cm("c", {"tier": "y"}))
    # A selector with '=', ',' and '!=' reaches the server as one query value.
    got = await client.list(CM, "default", label_selector="tier=x,zone!=2")
    assert [o["metadata"]["name"] for o in got["items"]] == ["a"]
    # Patches carry their content type: a JSON patch (a list body) and a merge patch.
    await client.patch(CM, "default", "a", [{"op": "add", "path": "/data/n", "value": "1"}], patch_type="json")
    patched = await client.patch(CM, "default", "a", {"metadata": {"annotations": {"k": "v"}}})
    assert patched["data"]["n"] == "1" and patched["metadata"]["annotations"] == {"k": "v"}
    # The field manager named in the query is the one recorded.
    assert {m["manager"] for m in patched["metadata"]["managedFields"]} == {"kueue-dispatcher"}

    # The guard stops a write before it leaves the process; reads still go.
    def deposed() -> None:
        raise RuntimeError("deposed")

    client.guard = deposed
    with pytest.raises(RuntimeError, match="deposed"):
        await client.create(CM, "default", _cm("d", {}))
    assert await client.get(CM, "default", "d") is None
    client.guard = None
    # Without the token the server refuses: the credentials came from the kubeconfig, not from anywhere else.
    bare = sim.kubeconfig()
    for user in bare["users"]:
        user["user"].pop("token", None)
    path = tmp_path / "no-token"
    path.write_text(json.dumps(bare))
    anonymous = await connect("anon", KubeconfigRef(path=str(path)))
    try:
        with pytest.raises(KubeError) as err:
            await anonymous.get(CM, "default", "a")
        assert err.value.code == 401
    finally:
        await anonymous.close()


async def test_last_answered_is_a_request_answered_with_our_credentials_not_a_watch_stream(
    cluster: tuple[SimCluster, ClusterClient], tmp_path: Path
) -> None:
    """What lets a health probe stand on a recent answer (dispatcher/capacity.py, ``probe_worker``)."""
    sim, client = cluster
    path = tmp_path / "watcher"
    path.write_text(json.dumps(sim.kubeconfig()))
    watcher = await connect("watcher", KubeconfigRef(path=str(path)))
    try:
        await client.create(CM, "default", _cm("w0", {}))
        rv = (await client.list(CM, "default"))["metadata"]["resourceVersion"]
        got = asyncio.Event()

        async def watch() -> None:
            async for _kind, _obj in watcher.watch(CM, "default", resource_version=rv):
                got.set()

        task = asyncio.create_task(watch())
        try:
            await client.create(CM, "default", _cm("w1", {}))
            async with asyncio.timeout(10):
                await got.wait()
        finally:
            task.cancel()
        assert watcher.last_success > 0 and watcher.last_answered == 0.0, "a watch's events are not an answer"
        before = time.monotonic()
        assert await watcher.get(CM, "default", "missing") is None  # a 404 is an answer too
        assert watcher.last_answered >= before
        # A refusal is not.
        bare = sim.kubeconfig()
        for user in bare["users"]:
            user["user"]["token"] = "wrong"
        path.write_text(json.dumps(bare))
        refused = await connect("refused", KubeconfigRef(path=str(path)))
        try:
            with pytest.raises(KubeError):
                await refused.get(CM, "default", "w0")
            assert refused.last_answered == 0.0 and refused.last_failure > 0
        finally:
            await refused.close()
    finally:
        await watcher.close()


async def test_informer_caches_and_hands_out_objects_without_managed_fields(
    cluster: tuple[SimCluster, ClusterClient],
) -> None:
    _sim, client = cluster
    await client.create(CM, "default", _cm("listed", {"a": "b"}))
    seen: list[tuple[str, Obj]] = []
    both = asyncio.Event()

    def handler(kind: str, obj: Obj, _old: Obj | None) -> None:
        seen.append((kind, obj))
        if any(k == "MODIFIED" for k, _ in seen) and any(o["metadata"]["name"] == "watched" for _, o in seen):
            both.set()

    inf = Informer(client, CM, handler, namespace="default")
    inf.start()
    try:
        async with asyncio.timeout(10):
            await inf.synced.wait()
        await client.create(CM, "default", _cm("watched", {"a": "b"}))
        await client.patch(CM, "default", "listed", {"data": {"x": "1"}})
        async with asyncio.timeout(10):
            await both.wait()
        server = await client.get(CM, "default", "listed")
        assert server is not None and server["metadata"].get("managedFields"), "the server keeps them"
        assert {k for k, _ in seen} >= {"ADDED", "MODIFIED"}
        assert all("managedFields" not in o["metadata"] for _, o in seen)
        assert all("managedFields" not in o["metadata"] for o in inf.cache.values())
        assert inf.cache[("default", "listed")]["data"] == {"x": "1"}
    finally:
        await inf.stop()


async def test_a_burst_reuses_a_few_connections_and_watches_never_take_the_requests(
    cluster: tuple[SimCluster, ClusterClient], tmp_path: Path
) -> None:
    """Requests share at most ``requests`` connections (a burst waits for a warm one instead of paying a TLS
    handshake on both sides per new connection); watches hold their own, so open streams never starve calls."""
    sim, _ = cluster
    path = tmp_path / "kubeconfig-small-pool"
    path.write_text(json.dumps(sim.kubeconfig()))
    client = await connect("small", KubeconfigRef(path=str(path)), requests=2)
    connector = client._api.rest_client.pool_manager.connector
    assert connector is not None
    opened = 0
    create_connection = connector._create_connection  # type: ignore[attr-defined]

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal opened
        opened += 1
        return await create_connection(*args, **kwargs)

    connector._create_connection = counted  # type: ignore[attr-defined]
    streams: list[asyncio.Task[None]] = []
    watching = asyncio.Event()

    async def watch() -> None:
        async for _kind, _obj in client.watch(CM, "default", resource_version="0"):
            watching.set()

    try:
        await client.create(CM, "default", _cm("first", {}))
        # Three open watches: with one pool of two connections they would hold both, and every call would wait.
        streams = [asyncio.create_task(watch()) for _ in range(3)]
        async with asyncio.timeout(10):
            await watching.wait()
        async with asyncio.timeout(30):
            await asyncio.gather(*(client.create(CM, "default", _cm(f"burst-{i}", {})) for i in range(40)))
        assert opened <= 2, f"{opened} connections for 41 requests"
        got = await client.list(CM, "default")
        assert len(got["items"]) == 41
    finally:
        for task in streams:
            task.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
        await client.close()


async def test_probes_and_leases_never_wait_behind_busy_request_connections(
    cluster: tuple[SimCluster, ClusterClient], tmp_path: Path
) -> None:
    """A worker whose request connections are all taken (a burst of copies to a slow server) still answers the
    dispatcher's health probe and takes its fencing Lease renewal: those have connections of their own."""
    sim, _ = cluster
    path = tmp_path / "kubeconfig-one-connection"
    path.write_text(json.dumps(sim.kubeconfig()))
    client = await connect("busy", KubeconfigRef(path=str(path)), requests=1)
    leases = Resource("coordination.k8s.io", "v1", "leases", "Lease")
    # A stream on the requests' only connection: every other request now waits for it.
    held = await client._send(
        "GET", CM.path("default"), query={"watch": "true"}, timeout=aiohttp.ClientTimeout(total=None)
    )
    try:
        with pytest.raises(KubeError):
            await client.request("GET", CM.path("default", "anything"), timeout=0.5)
        assert await client.probe(timeout=5.0) is True
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "fencing"},
            "spec": {"holderIdentity": "d", "leaseDurationSeconds": 20},
        }
        await client.create(leases, "default", lease, timeout=5.0)
        renewed = await client.patch(leases, "default", "fencing", {"spec": {"holderIdentity": "e"}}, timeout=5.0)
        assert renewed["spec"]["holderIdentity"] == "e"
    finally:
        held.release()
        await client.close()


async def test_the_simulator_bookmarks_two_seconds_before_the_deadline_and_none_sooner(
    cluster: tuple[SimCluster, ClusterClient],
) -> None:
    """The simulated API server's bookmarks come as kube-apiserver's cacher sends them (``nextBookmarkTime``):
    about a minute apart, and one 2 s before the watch's deadline. More would make a client that counts on them
    look healthier on the simulator than on a real cluster."""
    _sim, client = cluster
    assert BOOKMARK_INTERVAL == 60.0
    rv = (await client.list(CM, "default"))["metadata"]["resourceVersion"]
    loop = asyncio.get_running_loop()
    start = loop.time()
    seen: list[tuple[str, float]] = []
    async with asyncio.timeout(15):
        async for kind, _obj in client.watch(CM, "default", resource_version=rv, timeout_seconds=5):
            seen.append((kind, loop.time() - start))
    ended = loop.time() - start
    assert [k for k, _ in seen] == ["BOOKMARK"], seen
    assert 2.5 <= seen[0][1] < 4.5, seen  # at the deadline (5 s) less 2 s
    assert 4.5 <= ended < 8, ended
