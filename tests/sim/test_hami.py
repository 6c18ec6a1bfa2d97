"""The simulated HAMi end to end, in process: device plugin registration, webhook, scheduler extender, release.

Every test builds a SimCluster with HAMi on (and Kueue off), creates pods or Jobs through the same API a client
uses, and waits (polling the store, bounded by a timeout) for what a cluster running HAMi would show.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from functools import partial
from typing import Any

import pytest
from simclient import wait_for

from dispatcher.placement.hami.health import check_handshake
from dispatcher.placement.hami.names import (
    ALLOCATED_ANNOTATION,
    ASSIGNED_NODE_ANNOTATION,
    ASSIGNED_TIME_ANNOTATION,
    BIND_PHASE_ANNOTATION,
    HANDSHAKE_ANNOTATION,
    REGISTER_ANNOTATION,
    TO_ALLOCATE_ANNOTATION,
)
from dispatcher.placement.hami.nodecodec import decode_node_devices, encode_node_devices
from dispatcher.placement.hami.podcodec import decode_pod_devices
from kubesim.cluster import ClusterOptions, SimCluster
from kubesim.constants import RUN_SECONDS
from kubesim.controllers.hami import HamiController, gpu_uuid
from kubesim.errors import ApiError
from kubesim.topology import GpuSpec, NodeGroup

Obj = dict[str, Any]


# ---- helpers ---------------------------------------------------------------------------------------------------


@asynccontextmanager
async def hami_cluster(*groups: NodeGroup) -> AsyncIterator[SimCluster]:
    cluster = SimCluster("w", ClusterOptions(hami=True, kueue=False, bookmark_interval=0.2))
    for group in groups:
        cluster.add_nodes(group)
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


def gpu_group(count: int = 1, gpus: int = 4, memory_mib: int = 40960) -> NodeGroup:
    return NodeGroup(
        prefix="gpu", count=count, cpu="32", memory="128Gi", gpus=GpuSpec(count=gpus, memory_mib=memory_mib)
    )


CPU = NodeGroup(prefix="cpu", count=1)


def pod(
    name: str,
    limits: dict[str, str] | None = None,
    *,
    run_seconds: float = 3600,
    labels: dict[str, str] | None = None,
    privileged: bool = False,
) -> Obj:
    container: Obj = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
    if limits:
        container["resources"]["limits"] = limits
    if privileged:
        container["securityContext"] = {"privileged": True}
    meta: Obj = {"name": name, "namespace": "default", "annotations": {RUN_SECONDS: str(run_seconds)}}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [container]}}


def get_pod(cluster: SimCluster, name: str) -> Obj:
    obj = cluster.store.get("pods", "default", name)
    assert obj is not None, name
    return obj


def bound(cluster: SimCluster, name: str) -> Obj | None:
    obj = cluster.store.get("pods", "default", name)
    return obj if obj is not None and (obj.get("spec") or {}).get("nodeName") else None


def unschedulable(cluster: SimCluster, name: str) -> Obj | None:
    obj = cluster.store.get("pods", "default", name)
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return dict(c)
    return None


def hami(cluster: SimCluster) -> HamiController:
    controller = cluster.controllers["hami"]
    assert isinstance(controller, HamiController)
    return controller


def node_gpus(cluster: SimCluster, node: str) -> list[str]:
    obj = cluster.store.get("nodes", "", node)
    assert obj is not None
    return [d.id for d in decode_node_devices(obj["metadata"]["annotations"][REGISTER_ANNOTATION])]


def allocation(obj: Obj) -> list[tuple[str, int, int]]:
    """The (UUID, MiB, cores) of every device of the pod's single app container."""
    containers = decode_pod_devices(obj["metadata"]["annotations"][ALLOCATED_ANNOTATION])
    return [(d.uuid, d.usedmem, d.usedcores) for d in containers[0]]


def registered(cluster: SimCluster, node: str) -> bool:
    return hami(cluster).registered_devices(node) is not None


# ---- device plugin and node registration ----------------------------------------------------------------------


async def test_gpu_nodes_carry_hami_registration_and_handshake() -> None:
    async with hami_cluster(CPU, gpu_group(gpus=4)) as cluster:
        gpu_node, cpu_node = "w-gpu-1", "w-cpu-1"
        await wait_for(lambda: registered(cluster, gpu_node), "GPU node registered with HAMi")
        node = cluster.store.get("nodes", "", gpu_node)
        assert node is not None
        annotations = node["metadata"]["annotations"]
        raw = annotations[REGISTER_ANNOTATION]
        devices = decode_node_devices(raw)
        # HAMi's JSON form round-trips byte for byte.
        assert encode_node_devices(devices) == raw
        assert [d.id for d in devices] == [gpu_uuid(gpu_node, i) for i in range(4)]
        assert len({d.id for d in devices}) == 4 and all(d.id.startswith("GPU-") for d in devices)
        assert [d.index for d in devices] == [0, 1, 2, 3]
        assert [d.numa for d in devices] == [0, 0, 1, 1]
        for d in devices:
            assert (d.count, d.devmem, d.devcore) == (10, 40960, 100)
            assert d.type == "NVIDIA-A100-SXM4-40GB" and d.mode == "hami-core" and d.health
        # The kubelet advertises the plugin's vGPU slots.
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "40"
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "40"
        # HAMi's scheduler wrote its handshake, and reads the node as healthy.
        handshake = annotations[HANDSHAKE_ANNOTATION]
        assert handshake.startswith("Requesting_")
        assert check_handshake(handshake, datetime.now(), 40).healthy
        # A node without GPUs gets a handshake but no registration, and HAMi does not hold it.
        cpu = cluster.store.get("nodes", "", cpu_node)
        assert cpu is not None
        await wait_for(
            lambda: HANDSHAKE_ANNOTATION in (cluster.store.get("nodes", "", cpu_node) or {})["metadata"]["annotations"],
            "handshake on the CPU node",
        )
        assert REGISTER_ANNOTATION not in cpu["metadata"]["annotations"]
        assert not registered(cluster, cpu_node)


async def test_node_whose_gpus_disappear_is_cleaned_up_as_hami_does() -> None:
    async with hami_cluster(gpu_group(gpus=2)) as cluster:
        name = "w-gpu-1"
        await wait_for(lambda: registered(cluster, name), "GPU node registered")
        # The kubelet loses the device plugin: allocatable nvidia.com/gpu drops to 0.
        nodes = cluster.client.rt("", "Node")
        cluster.client.patch(
            nodes, None, name, {"status": {"allocatable": {"nvidia.com/gpu": "0"}}}, subresource="status"
        )
        await wait_for(lambda: not registered(cluster, name), "node dropped from HAMi's cache")
        node = cluster.store.get("nodes", "", name)
        assert node is not None
        assert HANDSHAKE_ANNOTATION not in node["metadata"]["annotations"]  # NodeCleanUp
        cluster.client.create(pod("late", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}))
        cond = await wait_for(lambda: unschedulable(cluster, "late"), "GPU pod refused on the cleaned-up node")
        assert cond["message"] == "0/1 nodes are available: 1 node unregistered."


# ---- webhook ----------------------------------------------------------------------------------------------------


async def test_webhook_applies_hami_defaults_and_denials() -> None:
    async with hami_cluster(CPU) as cluster:
        bare = cluster.client.create(pod("bare", {"nvidia.com/gpu": "1"}))
        limits = bare["spec"]["containers"][0]["resources"]["limits"]
        # A whole-card request becomes exclusive: gpucores 100 is injected, and HAMi's scheduler is named.
        assert limits["nvidia.com/gpucores"] == "100"
        assert bare["spec"]["schedulerName"] == "hami-scheduler"

        memory_only = cluster.client.create(pod("memonly", {"nvidia.com/gpumem": "3000"}))
        limits = memory_only["spec"]["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == "1"  # defaultGPUNum
        assert "nvidia.com/gpucores" not in limits  # memory was given: not exclusive

        plain = cluster.client.create(pod("plain"))
        assert plain["spec"].get("schedulerName") != "hami-scheduler"

        ignored = cluster.client.create(pod("ignored", {"nvidia.com/gpu": "1"}, labels={"hami.io/webhook": "ignore"}))
        assert "nvidia.com/gpucores" not in ignored["spec"]["containers"][0]["resources"]["limits"]

        with pytest.raises(ApiError) as denied:
            cluster.client.create(pod("priv", {"nvidia.com/gpu": "1"}, privileged=True))
        assert denied.value.code == 403
        assert (
            denied.value.message == 'admission webhook "vgpu.hami.io" denied the request: container main is privileged'
        )
        assert cluster.store.get("pods", "default", "priv") is None


# ---- scheduler extender ------------------------------------------------------------------------------------------


async def test_fractional_pods_share_gpus_with_allocation_annotations() -> None:
    async with hami_cluster(CPU, gpu_group(gpus=2)) as cluster:
        node = "w-gpu-1"
        await wait_for(lambda: registered(cluster, node), "GPU node registered")
        uuids = node_gpus(cluster, node)
        names = [f"frac-{i}" for i in range(4)]
        for name in names:
            cluster.client.create(pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10000"}))
        pods = [await wait_for(partial(bound, cluster, name), f"{name} bound") for name in names]
        per_gpu: Counter[str] = Counter()
        for p in pods:
            annotations = p["metadata"]["annotations"]
            assert p["spec"]["nodeName"] == node
            assert annotations[ASSIGNED_NODE_ANNOTATION] == node
            assert annotations[BIND_PHASE_ANNOTATION] == "success"
            assert annotations[ASSIGNED_TIME_ANNOTATION].isdigit()
            assert TO_ALLOCATE_ANNOTATION in annotations
            [(uuid, mem, cores)] = allocation(p)
            assert uuid in uuids and (mem, cores) == (10000, 0)
            per_gpu[uuid] += 1
        # HAMi's default GPU policy is spread: two 10000 MiB slices on each GPU.
        assert sorted(per_gpu.values()) == [2, 2]
        usage = hami(cluster).node_usage(node, pods)
        assert usage is not None and [(d.used, d.usedmem) for d in usage] == [(2, 20000), (2, 20000)]


async def test_one_gpu_takes_slices_until_its_memory_runs_out() -> None:
    async with hami_cluster(gpu_group(gpus=1)) as cluster:
        node = "w-gpu-1"
        await wait_for(lambda: registered(cluster, node), "GPU node registered")
        [only] = node_gpus(cluster, node)
        for i in range(4):
            cluster.client.create(pod(f"slice-{i}", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10000"}))
        for i in range(4):
            p = await wait_for(partial(bound, cluster, f"slice-{i}"), f"slice-{i} bound")
            assert allocation(p) == [(only, 10000, 0)]
        # 4 x 10000 of 40960 MiB are taken; a fifth slice does not fit.
        cluster.client.create(pod("slice-4", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10000"}))
        cond = await wait_for(lambda: unschedulable(cluster, "slice-4"), "slice-4 refused")
        assert cond["message"] == "0/1 nodes are available: 1 1/1 CardInsufficientMemory."


async def test_pod_asking_two_gpus_gets_two_distinct_cards_on_one_node() -> None:
    async with hami_cluster(gpu_group(count=2, gpus=4)) as cluster:
        for node in ("w-gpu-1", "w-gpu-2"):
            await wait_for(partial(registered, cluster, node), f"{node} registered")
        cluster.client.create(
            pod("pair", {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "8000", "nvidia.com/gpucores": "30"})
        )
        p = await wait_for(lambda: bound(cluster, "pair"), "pair bound")
        devices = allocation(p)
        assert len(devices) == 2
        assert devices[0][0] != devices[1][0]
        assert {d[0] for d in devices} <= set(node_gpus(cluster, p["spec"]["nodeName"]))
        assert all((mem, cores) == (8000, 30) for _, mem, cores in devices)


async def test_fragmented_memory_refuses_then_release_schedules() -> None:
    async with hami_cluster(CPU, gpu_group(gpus=2)) as cluster:
        node = "w-gpu-1"
        await wait_for(lambda: registered(cluster, node), "GPU node registered")
        # Two 30000 MiB tenants, spread over both GPUs: 10960 MiB free on each, 21920 MiB free on the node.
        cluster.client.create(pod("long", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "30000"}))
        long_pod = await wait_for(lambda: bound(cluster, "long"), "long bound")
        cluster.client.create(pod("short", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "30000"}, run_seconds=1.5))
        short_pod = await wait_for(lambda: bound(cluster, "short"), "short bound")
        [(long_gpu, _, _)] = allocation(long_pod)
        [(short_gpu, _, _)] = allocation(short_pod)
        assert long_gpu != short_gpu

        cluster.client.create(pod("wide", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000"}))
        cond = await wait_for(lambda: unschedulable(cluster, "wide"), "wide refused")
        usage = hami(cluster).node_usage(node, [long_pod, short_pod])
        assert usage is not None and sum(d.free_mem for d in usage) > 20000
        assert cond["message"] == "0/2 nodes are available: 1 2/2 CardInsufficientMemory, 1 node unregistered."
        assert bound(cluster, "wide") is None

        # The short tenant completes; its GPU frees and the pending pod lands there.
        wide = await wait_for(lambda: bound(cluster, "wide"), "wide bound after release", timeout=15)
        assert get_pod(cluster, "short")["status"]["phase"] == "Succeeded"
        assert get_pod(cluster, "long")["status"]["phase"] == "Running"
        assert allocation(wide) == [(short_gpu, 20000, 0)]


async def test_deleting_a_gpu_pod_frees_its_device() -> None:
    async with hami_cluster(gpu_group(gpus=1)) as cluster:
        await wait_for(lambda: registered(cluster, "w-gpu-1"), "GPU node registered")
        cluster.client.create(pod("whole", {"nvidia.com/gpu": "1"}))  # webhook: exclusive card
        await wait_for(lambda: bound(cluster, "whole"), "whole bound")
        cluster.client.create(pod("next", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}))
        cond = await wait_for(lambda: unschedulable(cluster, "next"), "next refused")
        assert "1/1 CardInsufficientMemory" in cond["message"]
        cluster.client.delete(cluster.client.rt("", "Pod"), "default", "whole")
        await wait_for(lambda: bound(cluster, "next"), "next bound after the delete")


async def test_pods_without_hami_resources_are_left_to_the_default_scheduler() -> None:
    async with hami_cluster(gpu_group(gpus=1)) as cluster:
        await wait_for(lambda: registered(cluster, "w-gpu-1"), "GPU node registered")
        created = cluster.client.create(pod("cpu-only"))
        assert not hami(cluster).interested(created)
        p = await wait_for(lambda: bound(cluster, "cpu-only"), "cpu-only bound")
        assert p["spec"]["nodeName"] == "w-gpu-1"
        assert not any(k.startswith("hami.io/") for k in p["metadata"].get("annotations", {}))
        gpu = cluster.client.create(pod("gpu", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}))
        assert hami(cluster).interested(gpu)


async def test_job_pods_get_hami_allocations() -> None:
    async with hami_cluster(gpu_group(gpus=2)) as cluster:
        await wait_for(lambda: registered(cluster, "w-gpu-1"), "GPU node registered")
        template = pod("unused", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"})
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {
                "parallelism": 2,
                "completions": 2,
                "template": {
                    "metadata": {"annotations": template["metadata"]["annotations"]},
                    "spec": {**template["spec"], "restartPolicy": "Never"},
                },
            },
        }
        cluster.client.create(job)

        def job_pods() -> list[Obj]:
            pods = [
                p
                for p in cluster.store.list("pods", "default")
                if (p["metadata"].get("labels") or {}).get("job-name") == "train" and p["spec"].get("nodeName")
            ]
            return pods if len(pods) == 2 else []

        pods = await wait_for(job_pods, "both Job pods bound")
        for p in pods:
            assert p["spec"]["schedulerName"] == "hami-scheduler"
            [(uuid, mem, _)] = allocation(p)
            assert uuid in node_gpus(cluster, "w-gpu-1") and mem == 4000
