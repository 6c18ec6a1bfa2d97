"""Tests for :mod:`dispatcher.placement.hami.inventory`: the placement engine's pod-set fit (``fit_pod_set``).

Expected values come from ``/work/shared/hami-rules.md`` (section numbers in test names) or from HAMi's table
tests at commit 4707fb02; a comment names the Go file each ported case comes from.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hamibuild import a100, container, dev, gpu_node, gpu_spec, req

from dispatcher.placement.hami.devices import DeviceUsage
from dispatcher.placement.hami.fit import schedule_pod
from dispatcher.placement.hami.inventory import GpuInventory, NodeSummary, fit_pod_set
from dispatcher.placement.hami.podcodec import bind_annotations
from dispatcher.placement.hami.quota import NamespaceQuota
from dispatcher.placement.hami.selection import prepare_pod
from dispatcher.placement.hami.usage import PodAllocation, node_usage
from dispatcher.placement.hami.webhook import mutate_pod


def test_podset_places_pods_binpack() -> None:
    nodes = {"w1": gpu_node("w1"), "w2": gpu_node("w2", busy=2, mem=8000, cores=20), "w3": gpu_node("w3")}
    result = fit_pod_set(nodes, gpu_spec(2, 24000, 30), 4)
    assert result.ok and result.placed == 4
    # binpack: the most used node first, and it keeps winning while it fits (4 pods × 2 GPUs = 8 GPUs)
    assert result.nodes == ["w2", "w2", "w2", "w2"]
    used = {d.uuid for pod in result.devices for c in pod for d in c}
    assert len(used) == 8
    assert all(d.usedmem == 24000 and d.usedcores == 30 for pod in result.devices for c in pod for d in c)
    assert 0 < result.score <= 1
    after = result.usage_after["w2"]
    assert sum(d.used for d in after) == 2 + 8


def test_podset_spread() -> None:
    nodes = {"w1": gpu_node("w1"), "w2": gpu_node("w2", busy=2, mem=8000, cores=20), "w3": gpu_node("w3")}
    result = fit_pod_set(nodes, gpu_spec(1, 8000, 10), 3, {"hami.io/node-scheduler-policy": "spread"})
    assert result.ok
    assert result.nodes == ["w1", "w3", "w1"]  # the least used node each time; equal scores by name


def test_podset_failure_reason() -> None:
    nodes = {
        "worker-gpu-1": gpu_node("worker-gpu-1", gpus=4, busy=4, mem=20000),
        "worker-gpu-3": gpu_node("worker-gpu-3", gpus=4, busy=3, mem=20000),
    }
    result = fit_pod_set(nodes, gpu_spec(2, 24000, 30), 1)
    assert not result.ok and result.placed == 0
    assert result.reason.startswith(
        "no node has 2 GPUs with 24000 MiB and 30% cores free each; best node worker-gpu-3 has 1 (HAMi: "
    )
    assert "CardInsufficientMemory" in result.reason
    # partial placement is reported
    result = fit_pod_set(nodes, gpu_spec(1, 24000, 30), 3)
    assert not result.ok and result.placed == 1 and result.nodes == ["worker-gpu-3"]
    assert result.reason.startswith(
        "placed 1 of 3 pods; no node has 1 GPU with 24000 MiB and 30% cores free; best node"
    )
    # more GPUs than any node has
    result = fit_pod_set(nodes, gpu_spec(8, 100, 10), 1)
    assert result.reason == "no node has 8 GPUs; the largest has 4"
    # whole cards (the webhook makes a bare nvidia.com/gpu exclusive)
    result = fit_pod_set(nodes, gpu_spec(2), 1)
    assert result.reason.startswith(
        "no node has 2 idle GPUs with all of its memory free each; best node worker-gpu-3 has 1"
    )
    assert fit_pod_set({}, gpu_spec(1), 1).reason == "no GPU nodes"


def test_podset_webhook_exclusive_and_trivial_cases() -> None:
    nodes = {"w": gpu_node("w", gpus=2, busy=1, mem=1000, cores=10)}
    assert not fit_pod_set(nodes, gpu_spec(2), 1).ok  # bare gpu: exclusive whole cards
    assert fit_pod_set(nodes, gpu_spec(2), 1, webhook=False).ok is False  # whole memory still needs an idle card
    assert fit_pod_set(nodes, gpu_spec(2, 1000, 10), 1).ok
    no_gpu = fit_pod_set(nodes, {"containers": [container({"cpu": "1"})]}, 3)
    assert no_gpu.ok and no_gpu.nodes == [] and no_gpu.reason == "no HAMi GPU request"
    assert fit_pod_set(nodes, gpu_spec(1, 100), 0).ok


def test_podset_quota_and_selectors() -> None:
    nodes = {"w": gpu_node("w", gpus=4)}
    quota = NamespaceQuota(mem_limit=20000)
    result = fit_pod_set(nodes, gpu_spec(1, 8000, 10), 3, quota=quota)
    assert not result.ok and result.placed == 2 and "ResourceQuotaNotFit" in result.reason
    annos = {"nvidia.com/use-gputype": "H100"}
    result = fit_pod_set(nodes, gpu_spec(1, 8000, 10), 1, annos)
    assert not result.ok and "4/4 CardTypeMismatch" in result.reason


def test_podset_inventory_reuse_and_apply() -> None:
    nodes = {"w1": gpu_node("w1", gpus=2), "w2": gpu_node("w2", gpus=2, busy=1, mem=4000, cores=10)}
    inv = GpuInventory(nodes)
    prepared = prepare_pod(gpu_spec(1, 30000, 50))
    first = fit_pod_set(inv, prepared, 2)
    assert first.ok and first.nodes == ["w2", "w2"]
    assert fit_pod_set(inv, prepared, 2).nodes == first.nodes  # the inventory is not mutated
    inv2 = inv.apply(first)
    assert inv2.summary("w2").gpus_with(30000) == 0
    second = fit_pod_set(inv2, prepared, 2)
    assert second.ok and second.nodes == ["w1", "w1"]
    assert not fit_pod_set(inv2.apply(second), prepared, 1).ok
    assert 0 < inv2.utilisation() < 1


def test_node_summary() -> None:
    devices = [
        a100("a", 0),
        a100("b", 1, used=1, usedmem=30000, usedcores=50),
        a100("c", 2, health=False),
        a100("d", 3, used=10),
    ]
    s = NodeSummary.of(devices)
    assert (s.gpus, len(s.free), s.max_free_mem, s.max_free_cores, s.idle_gpus) == (4, 2, 40960, 100, 1)
    assert s.gpus_with(10000) == 2 and s.gpus_with(20000) == 1
    assert s.fitting_gpus(req(1, 10000, 101, 100)) == 1  # exclusive: only the idle GPU
    assert s.fitting_gpus(req(1, 10000), mutex=True) == 1
    assert s.may_fit(req(2, 10000)) and not s.may_fit(req(3, 100)) and not s.may_fit(req(1, 41000))
    assert not NodeSummary.of(devices, frozenset({"a"})).may_fit(req(1, 20000))


def schedule_sequentially(
    nodes: dict[str, list[DeviceUsage]], spec: dict[str, Any], annos: dict[str, str], count: int
) -> list[str | None]:
    """The reference: HAMi's Filter pod by pod, with usage rebuilt from the bind annotations of earlier pods."""
    infos = {name: [d.info for d in devices] for name, devices in nodes.items()}
    allocations: dict[str, list[PodAllocation]] = {name: [] for name in nodes}
    base = {name: [(d.used, d.usedmem, d.usedcores) for d in devices] for name, devices in nodes.items()}
    mutated = mutate_pod({"metadata": {"annotations": annos}, "spec": spec})
    chosen: list[str | None] = []
    for _ in range(count):
        current = {}
        for name in nodes:
            usage = node_usage(infos[name], allocations[name])
            current[name] = [
                DeviceUsage(u.info, u.used + b[0], u.usedmem + b[1], u.usedcores + b[2])
                for u, b in zip(usage, base[name], strict=True)
            ]
        result = schedule_pod(current, mutated)
        chosen.append(result.node)
        if result.node is None:
            break
        assert result.fit is not None
        bound = bind_annotations(result.node, result.fit.hami_devices, 0)
        pod = {"metadata": {"annotations": bound}, "spec": mutated["spec"], "status": {"phase": "Running"}}
        alloc = PodAllocation.from_pod(pod)
        assert alloc is not None
        allocations[result.node].append(alloc)
    return chosen


@pytest.mark.parametrize("seed", range(12))
def test_podset_matches_pod_by_pod_filter(seed: int) -> None:
    rnd = random.Random(seed)
    nodes: dict[str, list[DeviceUsage]] = {}
    for n in range(rnd.randint(1, 6)):
        gpus = rnd.choice([1, 2, 4, 8])
        devices = []
        for i in range(gpus):
            busy = rnd.random() < 0.5
            k = rnd.randint(1, 3) if busy else 0
            devices.append(
                dev(
                    f"n{n}-g{i}",
                    index=i,
                    devmem=rnd.choice([16384, 40960]),
                    type=rnd.choice(["NVIDIA-A100", "NVIDIA-T4"]),
                    numa=i // 2,
                    used=k,
                    usedmem=k * rnd.choice([0, 2000, 6000]),
                    usedcores=min(100, k * rnd.choice([0, 10, 30])),
                    health=rnd.random() > 0.1,
                )
            )
        nodes[f"node-{n}"] = devices
    limits: dict[str, Any] = {"nvidia.com/gpu": rnd.choice([1, 1, 2, 3])}
    if rnd.random() < 0.8:
        limits["nvidia.com/gpumem"] = rnd.choice([1000, 4000, 12000])
    if rnd.random() < 0.7:
        limits["nvidia.com/gpucores"] = rnd.choice([10, 25, 50, 100])
    spec: dict[str, Any] = {"containers": [container(limits)]}
    if rnd.random() < 0.3:
        spec["initContainers"] = [
            container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 10})
        ]
    if rnd.random() < 0.3:
        spec["containers"].append(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000, "nvidia.com/gpucores": 5}))
    annos = {}
    if rnd.random() < 0.4:
        annos["hami.io/node-scheduler-policy"] = "spread"
    if rnd.random() < 0.4:
        annos["hami.io/gpu-scheduler-policy"] = rnd.choice(["binpack", "spread", "mutex", "numa,binpack"])
    count = rnd.randint(1, 8)
    reference = schedule_sequentially(nodes, spec, annos, count)
    result = fit_pod_set(nodes, spec, count, annos)
    placed = [n for n in reference if n is not None]
    assert result.nodes == placed
    assert result.ok is (len(placed) == count)
