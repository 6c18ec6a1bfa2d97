"""HAMi on the real rig: the real kube-scheduler of the GPU worker places vGPU pods through HAMi's extender
(dispatcher/rig/hami.py) per GPU, not per node total, and the dispatcher's own model of HAMi reads the cluster the
extender leaves behind the same way (two independent implementations of HAMi's rules meeting on real objects).

worker-3 of the session's rig is the GPU worker: 2 nodes of 4 A100 40 GB (40960 MiB, split 10).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from realrig import RealRig

from dispatcher.kube.client import ClusterClient, KubeError, Resource
from dispatcher.placement.gpu import WorkerGpus, sync_worker
from dispatcher.placement.gpufit import HamiFitter
from dispatcher.placement.hami.usage import PodAllocation
from dispatcher.placement.worker import WorkerCapacity
from dispatcher.placement.workload import PodSetSpec

PODS = Resource("", "v1", "pods", "Pod")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
NAMESPACE = "default"
Obj = dict[str, Any]
T = TypeVar("T")


def _pod(name: str, gpumem: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"test": "hami-extender"},
            "annotations": {"sim.dispatcher.io/run-seconds": "600"},
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "resources": {
                        "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(gpumem), "nvidia.com/gpucores": "10"}
                    },
                }
            ],
        },
    }


async def _until(probe: Callable[[], Awaitable[T | None]], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await probe()
        if value is not None:
            return value
        await asyncio.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


async def _model(client: ClusterClient) -> WorkerCapacity:
    """The dispatcher's HAMi view of the worker, fed from the cluster's nodes and pods as its informers feed it."""
    worker = WorkerCapacity("worker-3")
    gpus = WorkerGpus()
    for node in (await client.list(NODES)).get("items") or []:
        gpus.node_event("ADDED", node)
    for pod in (await client.list(PODS)).get("items") or []:
        gpus.pod_event("ADDED", pod)
    sync_worker(worker, gpus, True)
    return worker


def _pod_set(gpumem: int) -> PodSetSpec:
    template = {"metadata": {}, "spec": _pod("x", gpumem)["spec"]}
    return PodSetSpec(name="main", count=1, requests={}, template=template)


async def test_the_real_scheduler_places_vgpu_pods_per_gpu_and_the_dispatchers_model_agrees(
    real_rig_session: RealRig,
) -> None:
    client = await real_rig_session.client("worker-3")
    names = [f"hami-{i}" for i in range(8)]
    try:
        # Eight pods of 30000 MiB: one per GPU (two would not share a 40960 MiB card).
        for name in names:
            await client.create(PODS, NAMESPACE, _pod(name, 30000))

        async def all_bound() -> list[Obj] | None:
            pods = [await client.get(PODS, NAMESPACE, n) for n in names]
            return pods if all(p and (p.get("spec") or {}).get("nodeName") for p in pods) else None  # type: ignore[misc]

        bound = await _until(all_bound, 60, "8 vGPU pods bound by the real kube-scheduler")
        cards = set()
        for pod in bound:
            annotations = pod["metadata"]["annotations"]
            assert annotations["hami.io/vgpu-node"] == pod["spec"]["nodeName"], "HAMi's node is where it was bound"
            assert annotations["hami.io/bind-phase"] == "success"
            allocation = PodAllocation.from_pod(pod)  # the dispatcher's decoder of the extender's annotations
            assert allocation is not None
            devices = [d for container in allocation.devices for d in container]
            assert len(devices) == 1 and devices[0].usedmem == 30000
            cards.add(devices[0].uuid)
        assert len(cards) == 8, "each 30000 MiB pod on a GPU of its own"

        # 8 x 10960 MiB free in total, but no single GPU has 20000: HAMi's Filter refuses every node.
        await client.create(PODS, NAMESPACE, _pod("hami-too-big", 20000))

        async def refused() -> Obj | None:
            pod = await client.get(PODS, NAMESPACE, "hami-too-big")
            for c in ((pod or {}).get("status") or {}).get("conditions") or []:
                if (c.get("type"), c.get("status"), c.get("reason")) == ("PodScheduled", "False", "Unschedulable"):
                    return dict(c)
            return None

        condition = await _until(refused, 60, "the 20000 MiB pod refused by the scheduler")
        assert "CardInsufficientMemory" in str(condition.get("message")), condition
        # ...while 10000 MiB still fits beside a 30000 MiB pod on one card.
        await client.create(PODS, NAMESPACE, _pod("hami-fits", 10000))

        async def fits_bound() -> Obj | None:
            pod = await client.get(PODS, NAMESPACE, "hami-fits")
            return pod if pod and (pod.get("spec") or {}).get("nodeName") else None

        await _until(fits_bound, 60, "the 10000 MiB pod bound")
        too_big = await client.get(PODS, NAMESPACE, "hami-too-big")
        assert too_big is not None and not (too_big.get("spec") or {}).get("nodeName")

        # The dispatcher's model of the same cluster: 20000 MiB fits nowhere, 9000 MiB does.
        worker = await _model(client)
        fitter = HamiFitter()
        assert not fitter.fit(worker, [_pod_set(20000)], "binpack").ok
        assert fitter.fit(worker, [_pod_set(9000)], "binpack").ok
        free = worker.gpu.summary()
        assert free["gpus"] == 8 and free["memoryUsedMiB"] == 8 * 30000 + 10000
    finally:
        for name in [*names, "hami-too-big", "hami-fits"]:
            with contextlib.suppress(KubeError):
                await client.request(
                    "DELETE", PODS.path(NAMESPACE, name), body={"kind": "DeleteOptions", "gracePeriodSeconds": 0}
                )
        await client.close()
