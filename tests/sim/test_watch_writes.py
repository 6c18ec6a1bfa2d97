"""A watch sends what is queued in one write, as kube-apiserver's watch handler flushes only when its channel is
empty: a burst of changes reaches the client complete and in order, in far fewer chunks than events."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from kubesim.cluster import ClusterOptions, SimCluster


async def test_a_burst_arrives_whole_in_order_and_in_few_chunks() -> None:
    sim = SimCluster("w", ClusterOptions(kueue=False, jobs=False, scheduler=False, kubelet=False, tls=False))
    await sim.start()
    try:
        url = f"{sim.url}/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true"
        headers = {"Authorization": f"Bearer {sim.token}"}
        async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as resp:
            assert resp.status == 200
            await asyncio.sleep(0.2)  # the watch is registered
            for i in range(200):  # one burst: no await between the writes
                sim.client.create(
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i:03d}", "namespace": "default"}}
                )
            sim.client.delete(sim.client.rt("", "ConfigMap"), "default", "c000")
            events: list[dict[str, Any]] = []
            chunks, buffer = 0, b""
            async with asyncio.timeout(10):
                while len(events) < 201:
                    data, end = await resp.content.readchunk()
                    assert data or end, "the stream ended early"
                    chunks += end
                    buffer += data
                    *lines, buffer = buffer.split(b"\n")
                    events += [json.loads(line) for line in lines if line]
        names = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
        assert names == [("ADDED", f"c{i:03d}") for i in range(200)] + [("DELETED", "c000")]
        versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        assert versions == sorted(versions)
        assert chunks <= 10, f"{chunks} chunks for 201 events"
    finally:
        await sim.stop()
