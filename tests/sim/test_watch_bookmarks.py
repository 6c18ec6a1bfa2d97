"""The simulator's watch bookmarks come as kube-apiserver's cacher sends them: about a minute apart, and one 2 s
before the watch's deadline (``nextBookmarkTime``). More would make a client that counts on them look healthier
on the simulator than on a real cluster."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from dispatcher.config import KubeconfigRef
from dispatcher.kube.client import Resource, connect
from kubesim.cluster import ClusterOptions, SimCluster
from kubesim.http.common import BOOKMARK_INTERVAL

CM = Resource("", "v1", "configmaps", "ConfigMap")


async def test_one_bookmark_two_seconds_before_the_deadline_and_none_sooner(tmp_path: Path) -> None:
    assert BOOKMARK_INTERVAL == 60.0
    sim = SimCluster("t", ClusterOptions(kueue=False, jobs=False, scheduler=False, kubelet=False))
    await sim.start()
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(sim.kubeconfig()))
    client = await connect("t", KubeconfigRef(path=str(path)))
    try:
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
    finally:
        await client.close()
        await sim.stop()
