"""Fixtures for the simulated API server: one running ``SimCluster`` and kubernetes_asyncio clients for it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client as k8s

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside the tests (simclient)

from simclient import kube_configuration

from kubesim.cluster import ClusterOptions, SimCluster


@pytest.fixture
async def sim_cluster() -> AsyncIterator[SimCluster]:
    """A started cluster with only the API server's own machinery (garbage collector, namespace controller):
    no Kueue, job controller, scheduler or kubelet, so what the tests see is the API server's doing."""
    cluster = SimCluster(
        "t",
        ClusterOptions(kueue=False, jobs=False, scheduler=False, kubelet=False, bookmark_interval=0.2),
    )
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


@pytest.fixture
async def api_client(sim_cluster: SimCluster, tmp_path: Path) -> AsyncIterator[k8s.ApiClient]:
    """A kubernetes_asyncio ``ApiClient`` configured from ``sim_cluster.kubeconfig()``."""
    conf = await kube_configuration(sim_cluster, tmp_path)
    async with k8s.ApiClient(conf) as api:
        yield api
