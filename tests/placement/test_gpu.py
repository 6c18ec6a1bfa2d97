"""Tests for :mod:`dispatcher.placement.gpu` and :mod:`.gpufit`: a worker's HAMi GPU state and the engine's vGPU fit."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest

from dispatcher.config import Policy
from dispatcher.placement.engine import PlacementEngine
from dispatcher.placement.gpu import WorkerGpus, sync_worker
from dispatcher.placement.gpufit import HamiFitter
from dispatcher.placement.hami.devices import ContainerDevice
from dispatcher.placement.hami.names import HANDSHAKE_ANNOTATION, NODE_POLICY_ANNOTATION, REGISTER_ANNOTATION
from dispatcher.placement.hami.nodecodec import encode_node_devices, register_device
from dispatcher.placement.hami.podcodec import bind_annotations
from dispatcher.placement.worker import Reservation, WorkerCapacity
from dispatcher.placement.workload import PendingWorkload, PodSetSpec

Obj = dict[str, Any]
MEM = 40960
NOW = datetime(2025, 6, 1, 12, 0, 0)
_uids = itertools.count(1)


def clock() -> datetime:
    return NOW


def fresh_handshake() -> str:
    return "Requesting_" + NOW.strftime("%Y-%m-%d %H:%M:%S")


def gpu_node(
    name: str,
    gpus: int = 4,
    *,
    unhealthy: Sequence[int] = (),
    handshake: str | None = "fresh",
    allocatable: int | None = None,
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
) -> Obj:
    devices = [
        register_device(f"GPU-{name}-{i}", i, MEM, "A100-SXM4-40GB", healthy=i not in unhealthy) for i in range(gpus)
    ]
    annotations = {REGISTER_ANNOTATION: encode_node_devices(devices)}
    if handshake is not None:
        annotations[HANDSHAKE_ANNOTATION] = fresh_handshake() if handshake == "fresh" else handshake
    node: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {"hami.io/vgpu": "true"}, "annotations": annotations},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "allocatable": {
                "cpu": "32",
                "memory": "128Gi",
                "pods": "110",
                "nvidia.com/gpu": str(gpus * 10 if allocatable is None else allocatable),
            },
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    return node


def cpu_node(name: str) -> Obj:
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def gpu_pod(node: str, devices: Sequence[tuple[str, int, int]], *, phase: str = "Running", uid: str = "") -> Obj:
    """A bound pod holding one container with the given (device, MiB, cores), annotated as HAMi binds it."""
    container = [ContainerDevice(d, "NVIDIA", mem, cores) for d, mem, cores in devices]
    return {
        "metadata": {
            "name": f"pod-{uid or next(_uids)}",
            "namespace": "default",
            "uid": uid or f"uid-{next(_uids)}",
            "annotations": bind_annotations(node, [container], NOW),
        },
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }


def template(gpu: int = 1, mem: int | None = None, cores: int | None = None, annotations: Obj | None = None) -> Obj:
    limits: Obj = {"nvidia.com/gpu": str(gpu)}
    if mem is not None:
        limits["nvidia.com/gpumem"] = str(mem)
    if cores is not None:
        limits["nvidia.com/gpucores"] = str(cores)
    return {
        "metadata": {"annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": dict(limits)}}]},
    }


def pod_set(count: int, tpl: Obj, name: str = "main") -> PodSetSpec:
    limits = tpl["spec"]["containers"][0]["resources"]["limits"]
    requests = {"cpu": Fraction(1), **{k: Fraction(int(v)) for k, v in limits.items()}}
    return PodSetSpec(name=name, count=count, requests=requests, template=tpl)


def gpu_worker(name: str = "gpu-1", nodes: Sequence[Obj] = (), pods: Sequence[Obj] = ()) -> WorkerCapacity:
    w = WorkerCapacity(name)
    gpus = WorkerGpus(clock=clock)
    for n in nodes:
        gpus.node_event("ADDED", n)
    for p in pods:
        gpus.pod_event("ADDED", p)
    w.gpu = gpus
    return w


# -- WorkerGpus -------------------------------------------------------------------------------------------


def test_fractional_requests_fit_on_real_devices() -> None:
    w = gpu_worker(nodes=[gpu_node("n1"), gpu_node("n2")])
    fitter = HamiFitter()
    ps = pod_set(3, template(1, 10000, 30))
    assert fitter.wants([ps])
    v = fitter.fit(w, [ps], "binpack")
    assert v.ok, v.reason
    ids = {f"GPU-{n}-{i}" for n in ("n1", "n2") for i in range(4)}
    taken = [a for allocs in v.allocations.values() for a in allocs]
    assert taken and all(dev in ids for dev, *_ in taken)
    for node, allocs in v.allocations.items():
        assert all(dev.startswith(f"GPU-{node}-") for dev, *_ in allocs)
    assert sum(a[1] for a in taken) == 30000
    assert sum(a[2] for a in taken) == 90
    assert sum(a[3] for a in taken) == 3
    assert 0.0 < v.score < 1.0
    # HAMi's default node policy (binpack) puts all three pods on the first node; its default GPU policy
    # (spread) gives each pod a different GPU.
    assert list(v.allocations) == ["n1"]
    assert len(v.allocations["n1"]) == 3


def test_bare_gpu_request_is_an_exclusive_card() -> None:
    w = gpu_worker(nodes=[gpu_node("n1", gpus=2)])
    v = HamiFitter().fit(w, [pod_set(2, template(1))], "binpack")
    assert v.ok
    assert sorted(v.allocations["n1"]) == [("GPU-n1-0", MEM, 100, 1), ("GPU-n1-1", MEM, 100, 1)]
    assert not HamiFitter().fit(w, [pod_set(3, template(1))], "binpack").ok


def test_binpack_and_spread_scores_point_opposite_ways() -> None:
    busy = gpu_worker(
        "busy",
        nodes=[gpu_node("b1")],
        pods=[gpu_pod("b1", [(f"GPU-b1-{i}", 20000, 40)]) for i in range(4)],
    )
    idle = gpu_worker("idle", nodes=[gpu_node("i1")])
    fitter = HamiFitter()
    ps = [pod_set(1, template(1, 8000, 10))]
    bin_busy, bin_idle = fitter.fit(busy, ps, "binpack"), fitter.fit(idle, ps, "binpack")
    spr_busy, spr_idle = fitter.fit(busy, ps, "spread"), fitter.fit(idle, ps, "spread")
    assert all(v.ok for v in (bin_busy, bin_idle, spr_busy, spr_idle))
    assert bin_busy.score > bin_idle.score
    assert spr_idle.score > spr_busy.score
    assert bin_busy.score + spr_busy.score == pytest.approx(1.0)
    # The mode changes only the score, not where the worker's HAMi would put the pod.
    assert bin_busy.allocations == spr_busy.allocations


def test_node_policy_annotation_steers_node_choice_inside_the_worker() -> None:
    nodes = [gpu_node("a"), gpu_node("b")]
    pods = [gpu_pod("a", [("GPU-a-0", 20000, 0)])]
    fitter = HamiFitter()
    packed = fitter.fit(gpu_worker(nodes=nodes, pods=pods), [pod_set(1, template(1, 1000))], "binpack")
    spread_tpl = template(1, 1000, annotations={NODE_POLICY_ANNOTATION: "spread"})
    spread = fitter.fit(gpu_worker(nodes=nodes, pods=pods), [pod_set(1, spread_tpl)], "binpack")
    assert list(packed.allocations) == ["a"]  # HAMi binpack: the busier node
    assert list(spread.allocations) == ["b"]  # the pod asks HAMi to spread: the emptier node


def fragmented_pods() -> list[Obj]:
    return [gpu_pod("n1", [(f"GPU-n1-{i}", 30000, 0)], uid=f"busy-{i}") for i in range(4)]


def test_fragmentation_is_not_enough() -> None:
    w = gpu_worker(nodes=[gpu_node("n1")], pods=fragmented_pods())
    summary = w.gpu.summary()
    assert summary["memoryTotalMiB"] == 4 * MEM
    assert summary["memoryUsedMiB"] == 4 * 30000
    assert summary["memoryFreeMiB"] == 4 * (MEM - 30000)  # 43840 MiB free in total ...
    v = HamiFitter().fit(w, [pod_set(1, template(1, 20000))], "binpack")
    assert not v.ok  # ... but no single GPU has 20000 MiB
    assert "20000 MiB" in v.reason
    assert "memory" in v.reason.lower()
    assert "n1" in v.reason
    assert v.reason.startswith("pod set main:")


def test_finished_and_deleted_pods_release_usage() -> None:
    pods = fragmented_pods()
    w = gpu_worker(nodes=[gpu_node("n1")], pods=pods)
    gpus: WorkerGpus = w.gpu
    fitter = HamiFitter()
    ps = [pod_set(1, template(1, 20000))]
    assert not fitter.fit(w, ps, "binpack").ok
    assert gpus.pod_event("MODIFIED", pods[2]) is False  # same allocation: nothing changed
    done = {**pods[2], "status": {"phase": "Succeeded"}}
    assert gpus.pod_event("MODIFIED", done) is True
    v = fitter.fit(w, ps, "binpack")
    assert v.ok
    assert v.allocations == {"n1": [("GPU-n1-2", 20000, 0, 1)]}
    assert gpus.pod_event("MODIFIED", done) is False
    failed = {**pods[0], "status": {"phase": "Failed"}}
    assert gpus.pod_event("MODIFIED", failed) is True
    assert gpus.pod_event("DELETED", pods[1]) is True
    assert gpus.summary()["memoryUsedMiB"] == 30000
    assert gpus.pod_event("DELETED", pods[1]) is False


def test_pod_without_hami_annotations_or_on_unknown_node_changes_nothing() -> None:
    w = gpu_worker(nodes=[gpu_node("n1")])
    gpus: WorkerGpus = w.gpu
    plain = {"metadata": {"uid": "p", "name": "p", "namespace": "d"}, "spec": {}, "status": {"phase": "Running"}}
    assert gpus.pod_event("ADDED", plain) is False
    elsewhere = gpu_pod("n9", [("GPU-n9-0", 1000, 0)], uid="x")
    assert gpus.pod_event("ADDED", elsewhere) is False  # kept: counted once n9 registers its GPUs
    assert gpus.node_event("ADDED", gpu_node("n9")) is True
    assert gpus.summary()["memoryUsedMiB"] == 1000


def test_assume_and_forget_change_the_fit() -> None:
    w = gpu_worker(nodes=[gpu_node("n1", gpus=1)])
    gpus: WorkerGpus = w.gpu
    fitter = HamiFitter()
    ps = [pod_set(1, template(1, 30000, 50))]
    first = fitter.fit(w, ps, "binpack")
    assert first.ok
    assert first.allocations == {"n1": [("GPU-n1-0", 30000, 50, 1)]}
    w.set_cluster_queue({"metadata": {"name": "cq"}, "spec": {"resourceGroups": []}})
    version = w.version
    w.reserve(Reservation(uid="wl-1", cluster_queue="cq", usage={}, gpu=first.allocations))
    assert w.version > version
    assert gpus.assumed == {"wl-1": {"n1": (("GPU-n1-0", 30000, 50, 1),)}}
    assert gpus.summary()["memoryUsedMiB"] == 30000
    assert gpus.summary()["reservations"] == 1
    second = fitter.fit(w, ps, "binpack")
    assert not second.ok
    assert "30000 MiB" in second.reason
    w.release("wl-1")
    assert gpus.assumed == {}
    assert fitter.fit(w, ps, "binpack").ok
    # Directly, and idempotently per uid.
    gpus.assume("wl-2", first.allocations)
    gpus.assume("wl-2", first.allocations)
    assert gpus.summary()["memoryUsedMiB"] == 30000
    gpus.forget("wl-2")
    gpus.forget("wl-2")
    assert gpus.summary()["memoryUsedMiB"] == 0


def test_multiple_pod_sets_are_chained() -> None:
    w = gpu_worker(nodes=[gpu_node("n1", gpus=2)])
    fitter = HamiFitter()
    one = pod_set(1, template(1, 30000), "leader")
    two = pod_set(1, template(1, 30000), "worker")
    v = fitter.fit(w, [one, two], "binpack")
    assert v.ok
    assert sorted(a[0] for a in v.allocations["n1"]) == ["GPU-n1-0", "GPU-n1-1"]
    three = pod_set(2, template(1, 30000), "worker")
    bad = fitter.fit(w, [one, three], "binpack")
    assert not bad.ok
    assert bad.reason.startswith("pod set worker:")


def test_unusable_nodes_and_gpus() -> None:
    gpus = WorkerGpus(clock=clock)
    assert not gpus.has_gpus
    assert gpus.node_event("ADDED", cpu_node("cpu-1")) is False  # no register annotation: not a HAMi node
    assert not gpus.has_gpus
    stale = "Requesting_" + (NOW - timedelta(minutes=5)).strftime("%Y-%m-%d %H:%M:%S")
    assert gpus.node_event("ADDED", gpu_node("dead", handshake=stale, allocatable=0)) is True
    assert gpus.node_event("ADDED", gpu_node("cordoned", unschedulable=True)) is True
    assert gpus.node_event("ADDED", gpu_node("noplugin", allocatable=0)) is True
    broken = gpu_node("broken")
    broken["metadata"]["annotations"][REGISTER_ANNOTATION] = "[]"
    assert gpus.node_event("ADDED", broken) is True
    assert not gpus.has_gpus
    problems = gpus.unusable()
    assert set(problems) == {"dead", "cordoned", "noplugin", "broken"}
    assert "handshake" in problems["dead"]
    assert "no gpu found on node" in problems["broken"]
    w = WorkerCapacity("w")
    w.gpu = gpus
    v = HamiFitter().fit(w, [pod_set(1, template(1, 1000))], "binpack")
    assert not v.ok
    assert "no usable HAMi GPU nodes" in v.reason
    # A stale handshake is fine while the node still has allocatable GPUs (HAMi's CheckHealth).
    assert gpus.node_event("MODIFIED", gpu_node("dead", handshake=stale)) is True
    assert gpus.has_gpus
    assert gpus.summary()["nodes"] == 1


def test_node_without_handshake_is_used_as_hami_does() -> None:
    # HAMi's CheckHealth writes "Requesting_<now>" on a node without one and treats it as healthy.
    w = gpu_worker(nodes=[gpu_node("n1", handshake=None)])
    assert w.gpu.has_gpus
    assert HamiFitter().fit(w, [pod_set(1, template(1, 1000))], "binpack").ok


def test_unhealthy_gpu_is_not_used() -> None:
    w = gpu_worker(nodes=[gpu_node("n1", gpus=2, unhealthy=[0])])
    fitter = HamiFitter()
    v = fitter.fit(w, [pod_set(1, template(1, 30000))], "binpack")
    assert v.ok
    assert v.allocations == {"n1": [("GPU-n1-1", 30000, 0, 1)]}
    bad = fitter.fit(w, [pod_set(2, template(1, 30000))], "binpack")
    assert not bad.ok
    summary = w.gpu.summary()
    assert (summary["gpus"], summary["healthyGpus"]) == (2, 1)


def test_node_events_report_changes_only() -> None:
    gpus = WorkerGpus(clock=clock)
    node = gpu_node("n1")
    assert gpus.node_event("ADDED", node) is True
    inv = gpus.inventory()
    assert gpus.inventory() is inv  # cached
    version = gpus.version
    heartbeat = {**node, "status": {**node["status"], "conditions": [{"type": "Ready", "status": "True", "x": 1}]}}
    assert gpus.node_event("MODIFIED", heartbeat) is False
    assert gpus.version == version
    assert gpus.inventory() is inv
    cordon = gpu_node("n1")
    cordon["metadata"]["annotations"]["hami.io/device-cordon"] = "GPU-n1-0,GPU-n1-1,GPU-n1-2"
    assert gpus.node_event("MODIFIED", cordon) is True
    assert gpus.inventory() is not inv
    w = WorkerCapacity("w")
    w.gpu = gpus
    v = HamiFitter().fit(w, [pod_set(1, template(1, 1000))], "binpack")
    assert v.allocations == {"n1": [("GPU-n1-3", 1000, 0, 1)]}
    not_ready = gpu_node("n1")
    not_ready["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    assert gpus.node_event("MODIFIED", not_ready) is True
    assert not gpus.has_gpus
    assert gpus.node_event("DELETED", not_ready) is True
    assert gpus.node_event("DELETED", not_ready) is False
    assert gpus.summary()["gpus"] == 0


def test_fit_is_cached_per_version() -> None:
    w = gpu_worker(nodes=[gpu_node("n1")])
    fitter = HamiFitter()
    ps = [pod_set(2, template(1, 5000))]
    first = fitter.fit(w, ps, "binpack")
    assert fitter.fit(w, ps, "binpack") is first
    assert fitter.fit(w, [pod_set(2, template(1, 5000))], "binpack") == first  # same shape, new template
    w.gpu.pod_event("ADDED", gpu_pod("n1", [("GPU-n1-0", 1000, 0)]))
    assert fitter.fit(w, ps, "binpack") is not first


def test_wants() -> None:
    fitter = HamiFitter()
    cpu_only = PodSetSpec(
        name="main",
        count=1,
        requests={"cpu": Fraction(1)},
        template={"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]}},
    )
    assert not fitter.wants([cpu_only])
    assert fitter.wants([cpu_only, pod_set(1, template(1, 1000))])
    # Memory alone is a HAMi request: the webhook adds nvidia.com/gpu: 1.
    mem_only = {"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpumem": "1000"}}}]}}
    assert fitter.wants([PodSetSpec(name="m", count=1, requests={}, template=mem_only)])
    assert not fitter.wants([PodSetSpec(name="z", count=0, requests={}, template=mem_only)])


def test_sync_worker_exposes_gpus_only_when_usable() -> None:
    w = WorkerCapacity("w")
    gpus = WorkerGpus(clock=clock)
    sync_worker(w, gpus, gpus.pod_event("ADDED", gpu_pod("n1", [("GPU-n1-0", 1000, 0)])))
    assert w.gpu is None
    version = w.version
    sync_worker(w, gpus, gpus.node_event("ADDED", gpu_node("n1")))
    assert w.gpu is gpus
    assert w.version > version
    version = w.version
    sync_worker(w, gpus, gpus.node_event("MODIFIED", gpu_node("n1")))
    assert w.version == version
    sync_worker(w, gpus, gpus.node_event("DELETED", gpu_node("n1")))
    assert w.gpu is None


# -- end to end with the placement engine ------------------------------------------------------------------

HAMI_KUEUE_CONFIG: Obj = {
    "resources": {
        "transformations": [
            {
                "input": "nvidia.com/gpucores",
                "strategy": "Replace",
                "multiplyBy": "nvidia.com/gpu",
                "outputs": {"nvidia.com/total-gpucores": "1"},
            },
            {
                "input": "nvidia.com/gpumem",
                "strategy": "Replace",
                "multiplyBy": "nvidia.com/gpu",
                "outputs": {"nvidia.com/total-gpumem": "1"},
            },
        ]
    }
}


def cluster_queue(gpu: bool) -> Obj:
    groups: list[Obj] = [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": "default-flavor",
                    "resources": [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "256Gi"}],
                }
            ],
        }
    ]
    if gpu:
        groups.append(
            {
                "coveredResources": ["nvidia.com/gpu", "nvidia.com/total-gpumem", "nvidia.com/total-gpucores"],
                "flavors": [
                    {
                        "name": "hami-vgpu",
                        "resources": [
                            {"name": "nvidia.com/gpu", "nominalQuota": "40"},
                            {"name": "nvidia.com/total-gpumem", "nominalQuota": "400000"},
                            {"name": "nvidia.com/total-gpucores", "nominalQuota": "800"},
                        ],
                    }
                ],
            }
        )
    return {"metadata": {"name": "team"}, "spec": {"resourceGroups": groups}}


def ready_worker(name: str, *, gpu: bool) -> WorkerCapacity:
    w = WorkerCapacity(name)
    w.health = "Ready"
    w.synced = True
    w.set_flavor({"metadata": {"name": "default-flavor"}, "spec": {}})
    if gpu:
        w.set_flavor({"metadata": {"name": "hami-vgpu"}, "spec": {"nodeLabels": {"hami.io/vgpu": "true"}}})
        w.set_kueue_config(HAMI_KUEUE_CONFIG)
    w.set_cluster_queue(cluster_queue(gpu))
    w.set_local_queue({"metadata": {"name": "user-queue", "namespace": "default"}, "spec": {"clusterQueue": "team"}})
    nodes = [cpu_node(f"{name}-cpu-1")] + ([gpu_node(f"{name}-gpu-1"), gpu_node(f"{name}-gpu-2")] if gpu else [])
    gpus = WorkerGpus(clock=clock)
    for n in nodes:
        w.node_event("ADDED", n)
        sync_worker(w, gpus, gpus.node_event("ADDED", n))
    assert (w.gpu is not None) is gpu
    return w


def workload(uid: str, pod_sets: Sequence[PodSetSpec]) -> PendingWorkload:
    return PendingWorkload(
        id=1,
        uid=uid,
        namespace="default",
        name=uid,
        queue="user-queue",
        priority=0,
        created=0.0,
        generation=1,
        pod_sets=tuple(pod_sets),
    )


def test_engine_end_to_end() -> None:
    gpu_w, cpu_w = ready_worker("gpu-w", gpu=True), ready_worker("cpu-w", gpu=False)
    engine = PlacementEngine(Policy(), HamiFitter())
    wl = workload("wl-1", [pod_set(2, template(1, 20000, 30))])
    decision = engine.decide(wl, [cpu_w, gpu_w])
    by_name = {v.cluster: v for v in decision.verdicts}
    assert decision.chosen is not None
    assert decision.chosen.cluster == "gpu-w", decision.summary
    assert by_name["gpu-w"].feasible
    assert by_name["gpu-w"].gpu is not None
    assert "vgpuFit" in by_name["gpu-w"].terms
    assert not by_name["cpu-w"].feasible
    assert "no HAMi GPU nodes" in by_name["cpu-w"].reason
    reservation = engine.reserve(decision, {"gpu-w": gpu_w, "cpu-w": cpu_w})
    assert reservation is not None
    assert sum(a[1] for allocs in gpu_w.gpu.assumed["wl-1"].values() for a in allocs) == 40000
    # Too big for any single GPU: not feasible, and the reason says why.
    big = workload("wl-2", [pod_set(1, template(1, 50000))])
    verdict = engine.evaluate(big, gpu_w)
    assert not verdict.feasible
    assert "50000 MiB" in verdict.reason
    # A reservation is counted: 8 GPUs, 2 hold 20000 MiB, so 6 more pods of 30000 MiB fit and 7 do not.
    assert engine.evaluate(workload("wl-3", [pod_set(6, template(1, 30000))]), gpu_w).feasible
    assert not engine.evaluate(workload("wl-4", [pod_set(7, template(1, 30000))]), gpu_w).feasible
    gpu_w.release("wl-1")
    assert engine.evaluate(workload("wl-5", [pod_set(8, template(1, 30000))]), gpu_w).feasible
