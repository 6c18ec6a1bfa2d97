"""Tests for :mod:`dispatcher.placement.hami.fit`: section 3, ``Fit``, ``scoreNode`` and ``Filter``.

Expected values come from ``/work/shared/hami-rules.md`` (section numbers in test names) or from HAMi's table
tests at commit 4707fb02; a comment names the Go file each ported case comes from.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hamibuild import MIG_PROFILES, container, dev, fit, gpu_spec, req

from dispatcher.placement.hami.devices import ContainerDevice, ContainerRequest, DeviceUsage, HamiConfig, MigPlacement
from dispatcher.placement.hami.fit import filter_failure_messages, fit_container, fit_pod, parse_reason, schedule_pod
from dispatcher.placement.hami.inventory import NodeSummary
from dispatcher.placement.hami.names import CORDON_ANNOTATION, PAIR_SCORE_ANNOTATION
from dispatcher.placement.hami.nodecodec import cordoned_devices
from dispatcher.placement.hami.podcodec import encode_mig_allocations, encode_pod_devices
from dispatcher.placement.hami.quota import NamespaceQuota, namespace_quota
from dispatcher.placement.hami.requests import container_request
from dispatcher.placement.hami.usage import PodAllocation, node_usage

# pkg/device/nvidia/device_test.go TestDevices_Fit
FIT_CASES: list[tuple[str, list[DeviceUsage], ContainerRequest, dict[str, str], bool, list[str], str]] = [
    (
        "fit success",
        [dev("dev-0", count=100, devmem=128), dev("dev-1", count=100, devmem=128)],
        req(1, 64, 0, 50),
        {},
        True,
        ["dev-1"],
        "",
    ),
    (
        "memory not enough",
        [dev("dev-0", count=100, devmem=128)],
        req(1, 512, 0, 50),
        {},
        False,
        [],
        "1/1 CardInsufficientMemory",
    ),
    (
        "core not enough",
        [dev("dev-0", count=100, devmem=1024, usedcores=100)],
        req(1, 512, 0, 50),
        {},
        False,
        [],
        "1/1 CardInsufficientCore",
    ),
    (
        "type mismatch",
        [dev("dev-0", count=100, devmem=128)],
        req(1, 512, 0, 50, "OtherType"),
        {},
        False,
        [],
        "1/1 CardTypeMismatch",
    ),
    (
        "use uuid mismatch",
        [dev("dev-1", count=100, devmem=1280)],
        req(2, 512, 0, 50),
        {"nvidia.com/use-gpuuuid": "dev-0"},
        False,
        [],
        "1/1 CardUuidMismatch",
    ),
    (
        "nouse uuid match",
        [dev("dev-0", count=100, devmem=1280)],
        req(2, 512, 0, 50),
        {"nvidia.com/nouse-gpuuuid": "dev-0"},
        False,
        [],
        "1/1 CardUuidMismatch",
    ),
    (
        "card overused",
        [dev("dev-0", count=100, devmem=1280, used=100)],
        req(1, 512, 0, 50),
        {},
        False,
        [],
        "1/1 CardTimeSlicingExhausted",
    ),
    ("core limit clamped to 100", [dev("dev-0", count=100, devmem=1280)], req(1, 512, 0, 120), {}, True, ["dev-0"], ""),
    (
        "card exclusively",
        [dev("dev-0", count=100, devmem=1280, used=20)],
        req(1, 512, 0, 100),
        {},
        False,
        [],
        "1/1 ExclusiveDeviceAllocateConflict",
    ),
    (
        "compute units exhausted",
        [dev("dev-0", count=100, devmem=1280, used=20, usedcores=100)],
        req(1, 512, 0, 0),
        {},
        False,
        [],
        "1/1 CardComputeUnitsExhausted",
    ),
    (
        "allocated cards insufficient",
        [dev("dev-0", count=100, devmem=1280, used=20, usedcores=10)],
        req(2, 512, 0, 20),
        {},
        False,
        [],
        "1/1 AllocatedCardsInsufficientRequest",
    ),
    (
        "partial allocation for multiple cards",
        [dev("dev-0", count=100, devmem=1280), dev("dev-1", index=1, count=100, devmem=1280)],
        req(3, 512, 0, 20),
        {},
        False,
        [],
        "2/2 AllocatedCardsInsufficientRequest",
    ),
    (
        "memory percentage",
        [dev("dev-0", count=100, devmem=1280, used=20, usedcores=10)],
        req(1, 0, 10, 20),
        {},
        True,
        ["dev-0"],
        "",
    ),
    (
        "not healthy",
        [dev("dev-0", count=100, devmem=1280, health=False)],
        req(1, 0, 10, 20),
        {},
        False,
        [],
        "1/1 CardNotHealth",
    ),
]


@pytest.mark.parametrize(
    ("name", "devices", "request_", "annos", "ok", "ids", "reason"), FIT_CASES, ids=[c[0] for c in FIT_CASES]
)
def test_s3_fit_table(
    name: str,
    devices: list[DeviceUsage],
    request_: ContainerRequest,
    annos: dict[str, str],
    ok: bool,
    ids: list[str],
    reason: str,
) -> None:
    got_ok, got, got_reason = fit(devices, request_, annos)
    assert got_ok is ok
    assert got_reason == reason
    if ok:
        assert [d.uuid for d in got] == ids


def test_s3_fit_result_values() -> None:
    # the taken device records the per-GPU memory and the clamped cores
    ok, got, _ = fit([dev("d", devmem=1280)], req(1, 512, 101, 120))
    assert ok and (got[0].usedmem, got[0].usedcores) == (512, 100)
    # a percentage uses integer division of the registered devmem
    ok, got, _ = fit([dev("d", devmem=11111)], req(1, 0, 33, 0))
    assert ok and got[0].usedmem == 11111 * 33 // 100
    # device_test.go TestZeroMemoryPercentageIsAccountedAsWholeCard
    whole = container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 0}))
    assert whole is not None
    ok, got, _ = fit([dev("dev-0", devmem=11264)], whole)
    assert ok and got[0].usedmem == 11264
    ok, _, reason = fit([dev("dev-0", devmem=11264, usedmem=11260)], whole)
    assert not ok and "CardInsufficientMemory" in reason


def test_s3_f1_to_f12_each_rejects_with_its_reason() -> None:
    cordon = {CORDON_ANNOTATION: " d , other"}
    cases: list[tuple[DeviceUsage, ContainerRequest, dict[str, str], dict[str, str], str]] = [
        (dev("d", health=False), req(1, 100), {}, {}, "CardNotHealth"),
        (dev("d"), req(1, 100), {}, cordon, "CardCordoned"),
        (dev("d", type="NVIDIA-T4"), req(1, 100), {"nvidia.com/use-gputype": "a100"}, {}, "CardTypeMismatch"),
        (dev("d"), req(1, 100), {"nvidia.com/use-gpuuuid": "x"}, {}, "CardUuidMismatch"),
        (dev("d", used=10), req(1, 100), {}, {}, "CardTimeSlicingExhausted"),
        (
            dev("d", used=1),
            req(1, 100),
            {"hami.io/gpu-scheduler-policy": "mutex"},
            {},
            "ExclusiveDeviceAllocateConflict",
        ),
        (dev("d", usedmem=8000), req(1, 200), {}, {}, "CardInsufficientMemory"),
        (dev("d", usedcores=60), req(1, 100, 101, 50), {}, {}, "CardInsufficientCore"),
        (dev("d", used=1), req(1, 100, 101, 100), {}, {}, "ExclusiveDeviceAllocateConflict"),
        (dev("d", used=1, usedcores=100), req(1, 100, 101, 0), {}, {}, "CardComputeUnitsExhausted"),
    ]
    for d, r, annos, node_annos, reason in cases:
        assert fit([d], r, annos, node_annotations=node_annos) == (False, [], f"1/1 {reason}"), reason
    # F8 (quota) and F13 (MIG) have their own tests below


def test_s3_check_order() -> None:
    # the first failing check wins: an unhealthy, cordoned, overfull device counts once, as CardNotHealth
    d = dev("d", health=False, used=10, usedmem=8192)
    assert fit([d], req(1, 100), node_annotations={CORDON_ANNOTATION: "d"})[2] == "1/1 CardNotHealth"
    # memory before cores
    assert fit([dev("d", usedmem=8192, usedcores=100)], req(1, 1, 101, 10))[2] == "1/1 CardInsufficientMemory"
    # GenReason sorts the "<n>/<m> <Reason>" strings
    devices = [dev("a", health=False), dev("b", used=10), dev("c", used=10), dev("e", usedmem=8192)]
    assert fit(devices, req(1, 100))[2] == "1/4 CardInsufficientMemory, 1/4 CardNotHealth, 2/4 CardTimeSlicingExhausted"


def test_s3_cordon() -> None:
    # device_test.go TestFit_DeviceCordon
    devices = [dev("dev-0", devmem=128, count=100), dev("dev-1", devmem=128, count=100)]
    r = req(1, 64, 101, 50)
    ok, got, _ = fit(devices, r, node_annotations={CORDON_ANNOTATION: "dev-1, "})
    assert ok and got[0].uuid == "dev-0"
    assert fit(devices, r, node_annotations={CORDON_ANNOTATION: "dev-0,dev-1"}) == (False, [], "2/2 CardCordoned")
    busy = [devices[0], dev("dev-1", devmem=128, count=100, used=1, usedcores=50, usedmem=64)]
    ok, got, _ = fit(busy, r, node_annotations={CORDON_ANNOTATION: "dev-1"})
    assert ok and got[0].uuid == "dev-0"
    assert fit(devices, r, node_annotations={})[0]
    assert cordoned_devices({CORDON_ANNOTATION: " a,, b ,"}) == frozenset({"a", "b"})


def test_s3_f3_type_and_mode() -> None:
    t4 = dev("t4", type="NVIDIA-Tesla T4")
    a100 = dev("a100", type="NVIDIA-A100-SXM4-40GB")
    r = req(1, 100)
    # case-insensitive substrings, comma lists, empty entries ignored
    assert fit([t4, a100], r, {"nvidia.com/use-gputype": "a100"})[1][0].uuid == "a100"
    assert fit([a100, t4], r, {"nvidia.com/use-gputype": " ,tesla t4"})[1][0].uuid == "t4"
    assert fit([t4, a100], r, {"nvidia.com/nouse-gputype": "A100"})[1][0].uuid == "t4"
    assert fit([t4], r, {"nvidia.com/use-gputype": "   "})[0]  # blank: no constraint
    assert (
        fit([t4], r, {"nvidia.com/use-gputype": ","})[2] == "1/1 CardTypeMismatch"
    )  # only empty entries: nothing matches
    # vgpu-mode must contain the device mode; an empty device mode always passes
    assert fit([t4], r, {"nvidia.com/vgpu-mode": "mig"})[2] == "1/1 CardTypeMismatch"
    assert fit([t4], r, {"nvidia.com/vgpu-mode": "hami-core,mps"})[0]
    assert fit([dev("x", mode="")], r, {"nvidia.com/vgpu-mode": "mig"})[0]


def test_s3_f4_numa() -> None:
    # device_test.go TestFit_NumaSwitching: walked from the end: dev-2 (NUMA 0), then dev-1, dev-0 (NUMA 1)
    devices = [
        dev("dev-0", index=0, numa=1),
        dev("dev-1", index=1, numa=1),
        dev("dev-2", index=2, numa=0),
    ]
    ok, got, _ = fit(devices, req(2, 100, 101, 10), {"nvidia.com/numa-bind": "true"})
    assert ok and [d.uuid for d in got] == ["dev-1", "dev-0"]
    # without numa-bind the first two from the end win, across NUMA nodes
    ok, got, _ = fit(devices, req(2, 100, 101, 10))
    assert [d.uuid for d in got] == ["dev-2", "dev-1"]
    # NumaNotFit counts the devices collected before each NUMA switch
    spread = [dev("a", numa=0), dev("b", numa=1), dev("c", numa=2)]
    assert fit(spread, req(2, 100), {"nvidia.com/numa-bind": "1"}) == (
        False,
        [ContainerDevice("a", "NVIDIA", 100, 0)],
        "1/3 AllocatedCardsInsufficientRequest, 2/3 NumaNotFit",
    )
    assert fit(spread, req(2, 100), {"nvidia.com/numa-bind": "yes"})[0]  # not a Go bool: no binding


def test_s3_f5_uuid() -> None:
    devices = [dev("GPU-a"), dev("GPU-b", index=1)]
    assert fit(devices, req(1, 100), {"nvidia.com/use-gpuuuid": " GPU-a , GPU-x"})[1][0].uuid == "GPU-a"
    assert fit(devices, req(1, 100), {"nvidia.com/nouse-gpuuuid": "GPU-b"})[1][0].uuid == "GPU-a"
    assert fit(devices, req(1, 100), {"nvidia.com/use-gpuuuid": ""})[1][0].uuid == "GPU-b"  # empty: no constraint
    assert fit(devices, req(1, 100), {"nvidia.com/use-gpuuuid": "gpu-a"})[2] == "2/2 CardUuidMismatch"  # exact match


def test_s3_f7_mutex() -> None:
    # device_test.go TestFit_MutexPolicy
    devices = [dev("used", index=0, used=1), dev("idle", index=1)]
    annos = {"hami.io/gpu-scheduler-policy": "mutex"}
    ok, got, _ = fit(devices, req(1, 100, 101, 10), annos)
    assert ok and [d.uuid for d in got] == ["idle"]
    assert not fit(devices, req(2, 100, 101, 10), annos)[0]
    # mutex in a comma chain still applies
    assert fit([devices[0]], req(1, 100), {"hami.io/gpu-scheduler-policy": "binpack, mutex"})[2] == (
        "1/1 ExclusiveDeviceAllocateConflict"
    )


def test_s3_f8_quota() -> None:
    devices = [dev("a", devmem=16000), dev("b", devmem=16000, index=1)]
    r = req(2, 4000, 101, 10)
    assert fit(devices, r, quota=NamespaceQuota(mem_limit=8000))[0]
    # the second device brings the namespace to 2001 + 2 × 4000 > 10000
    assert fit(devices, r, quota=NamespaceQuota(mem_limit=10000, mem_used=2001))[2] == (
        "1/2 AllocatedCardsInsufficientRequest, 1/2 ResourceQuotaNotFit"
    )
    assert fit(devices, r, quota=NamespaceQuota(core_limit=0))[2] == "2/2 ResourceQuotaNotFit"  # an explicit 0 blocks
    assert fit(devices, r, quota=NamespaceQuota())[0]  # no limits configured
    # the memory limit is scaled by memoryFactor > 1
    assert not fit(devices, r, quota=NamespaceQuota(mem_limit=4000))[0]
    assert fit_container(devices, r, None, HamiConfig(memory_factor=2), quota=NamespaceQuota(mem_limit=4000))[0]
    # quota from ResourceQuota objects: only limits.<resource> keys with whole values
    rq = [
        {"spec": {"hard": {"limits.nvidia.com/gpumem": "8000", "requests.nvidia.com/gpucores": "1", "limits.cpu": "2"}}}
    ]
    assert namespace_quota(rq) == NamespaceQuota(mem_limit=8000)
    assert namespace_quota([{"spec": {"hard": {"cpu": "1"}}}]) is None


def test_s3_f13_mig() -> None:
    mig = dev("mig", devmem=81920, count=7, mode="mig", type="NVIDIA-A100", profiles=MIG_PROFILES)
    # non-MIG devices always pass F13; a MIG GPU needs a profile with enough memory and a free placement
    assert fit([mig], req(1, 90000))[2] == "1/1 CardInsufficientMemory"
    too_big = dev("mig", devmem=100000, count=7, mode="mig", type="NVIDIA-A100", profiles=MIG_PROFILES)
    assert fit([too_big], req(1, 90000))[2] == "1/1 CardMigTopologyInfeasible"
    # a MIG GPU is revisited: one container can get several instances of the same GPU
    ok, got, _ = fit([mig], req(2, 9000))
    assert ok and [d.uuid for d in got] == ["mig", "mig"]
    # fit_pod applies AddResourceUsage: the profile's memory and cores, placements from the top for 1g profiles
    fitted = fit_pod([mig], [req(2, 9000)])
    assert fitted.ok
    assert [(d.usedmem, d.usedcores, d.mig_profile, d.mig_placement) for d in fitted.devices[0]] == [
        (9856, 15, "1g.10gb", MigPlacement(6, 1)),
        (9856, 15, "1g.10gb", MigPlacement(5, 1)),
    ]
    assert encode_mig_allocations(fitted.hami_devices) == (
        '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"mig","profile":"1g.10gb","placement":{"start":6,"size":1}},'
        '{"containerIndex":0,"deviceIndex":1,"gpuUUID":"mig","profile":"1g.10gb","placement":{"start":5,"size":1}}]'
    )
    # occupied placements block: with both 3g halves taken nothing of 3g size is left
    full = dev("mig", devmem=81920, count=7, mode="mig", profiles=MIG_PROFILES)
    full.mig_in_use = (MigPlacement(0, 4), MigPlacement(4, 4))
    assert fit([full], req(1, 30000))[2] == "1/1 CardMigTopologyInfeasible"


def test_s3_memory_and_cores_are_per_gpu() -> None:
    # nvidia.com/gpumem and gpucores apply to every GPU; Nums is the number of distinct GPUs
    devices = [dev("a", devmem=40960, type="NVIDIA-A100"), dev("b", devmem=40960, type="NVIDIA-A100", index=1)]
    result = fit_pod(devices, [req(2, 24000, 101, 30)])
    assert result.ok
    assert sorted((d.uuid, d.usedmem, d.usedcores) for d in result.devices[0]) == [("a", 24000, 30), ("b", 24000, 30)]
    # a single huge GPU cannot serve 2 GPUs
    big = [dev("big", devmem=200000, count=100, type="NVIDIA-A100")]
    assert fit_pod(big, [req(2, 1000)]).reason == "NodeInsufficientDevice"
    assert fit(big, req(2, 1000)) == (
        False,
        [ContainerDevice("big", "NVIDIA", 1000, 0)],
        "1/1 AllocatedCardsInsufficientRequest",
    )


def test_s3_fragmented_memory_refuses() -> None:
    # 2 × 10000 MiB free is 20000 in total, but no single GPU has 16000
    devices = [dev("a", devmem=16000, usedmem=6000, used=1), dev("b", devmem=16000, usedmem=6000, used=1, index=1)]
    result = fit_pod(devices, [req(1, 16000)])
    assert not result.ok and result.reason == "2/2 CardInsufficientMemory"
    assert NodeSummary.of(devices).gpus_with(16000) == 0
    assert NodeSummary.of(devices).gpus_with(10000) == 2


# device_test.go TestFit_Topology*
PAIRS = {
    "dev-0": {"dev-1": 100, "dev-2": 200},
    "dev-1": {"dev-0": 100, "dev-2": 150},
    "dev-2": {"dev-0": 200, "dev-1": 150},
}


def pair_annotation(pairs: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    import json

    return {PAIR_SCORE_ANNOTATION: json.dumps([{"uuid": k, "score": s} for k, s in pairs.items()])}


def test_s3_topology() -> None:
    topo = {"hami.io/gpu-scheduler-policy": "topology-aware"}
    two = [dev("dev-0"), dev("dev-1", index=1)]
    three = [dev("dev-0"), dev("dev-1", index=1), dev("dev-2", index=2)]
    r1, r2 = req(1, 100, 101, 10), req(2, 100, 101, 10)
    ok, got, _ = fit(two, r2, topo)
    assert ok and len(got) == 2
    ok, got, _ = fit(three, r1, topo, node_annotations=pair_annotation(PAIRS))
    assert ok and [d.uuid for d in got] == ["dev-1"]  # the worst-connected card
    ok, got, _ = fit(three, r2, topo, node_annotations=pair_annotation(PAIRS))
    assert ok and {d.uuid for d in got} == {"dev-0", "dev-2"}  # the best pair
    zero = {k: dict.fromkeys(s, 0) for k, s in PAIRS.items()}
    ok, got, _ = fit(three, r2, topo, node_annotations=pair_annotation(zero))
    assert ok and len(got) == 2
    negative = {
        "dev-0": {"dev-1": -5, "dev-2": -3},
        "dev-1": {"dev-0": -5, "dev-2": -1},
        "dev-2": {"dev-0": -3, "dev-1": -1},
    }
    ok, got, _ = fit(three, r1, topo, node_annotations=pair_annotation(negative))
    assert [d.uuid for d in got] == ["dev-0"]
    ok, got, _ = fit(three, r2, topo, node_annotations=pair_annotation(negative))
    assert {d.uuid for d in got} == {"dev-1", "dev-2"}
    # not enough candidates still fails with the collected count
    assert fit(two, req(3, 100), topo)[2] == "2/2 AllocatedCardsInsufficientRequest"


def test_s4_node_insufficient_and_type_filter() -> None:
    # score_test.go Test_fitInDevices: request more GPUs than the node has
    assert fit_pod([dev("a")], [req(2, 100)]).reason == "NodeInsufficientDevice"
    # devices whose type does not contain NVIDIA are not offered to Fit (and not counted in n/m)
    devices = [dev("gpu", type="NVIDIA-T4", usedmem=8192), dev("other", type="Ascend910")]
    assert fit_pod(devices, [req(1, 100)]).reason == "1/1 CardInsufficientMemory"


# --------------------------------------------------------------------------------------------------------------
# scoreNode: containers on one node
# --------------------------------------------------------------------------------------------------------------


def two_devices(type: str = "NVIDIA") -> list[DeviceUsage]:
    return [dev("uuid1", index=0, devmem=8000, type=type), dev("uuid2", index=1, devmem=8000, type=type)]


def test_scorenode_app_containers_share_usage() -> None:
    # score_test.go "one node two device one pod two containers use two device with spread, should not in same device"
    result = fit_pod(two_devices(), [req(1, 8000, 101, 30), req(1, 1000, 101, 30)])
    assert result.ok
    assert [[d.uuid for d in c] for c in result.devices] == [["uuid2"], ["uuid1"]]
    assert result.node_score == 0.0


def test_scorenode_init_containers_on_fresh_copies() -> None:
    # score_test.go "pod has one init container (uses 1 device) and one regular container"
    result = fit_pod(two_devices(), [req(1, 1000, 101, 30), req(1, 1000, 101, 30)], num_init=1)
    assert [[d.uuid for d in c] for c in result.devices] == [["uuid2"], ["uuid2"]]
    # score_test.go "init container requests MORE than app container"
    result = fit_pod(two_devices(), [req(2, 1000, 101, 30), req(1, 1000, 101, 30)], num_init=1)
    assert [[d.uuid for d in c] for c in result.devices] == [["uuid2", "uuid1"], ["uuid2"]]
    # an init container bigger than any GPU fails the node (score_test.go "init container requests more memory")
    result = fit_pod(two_devices(), [req(1, 9000), req(1, 1000)], num_init=1)
    assert not result.ok and result.failed_container == 0 and result.reason == "2/2 CardInsufficientMemory"


def test_scorenode_init_peak_vs_app_sum_after_bind() -> None:
    # the bound pod is charged max(init peak, app sum) per GPU
    devices = [dev("g", type="NVIDIA-A100", devmem=40000)]
    result = fit_pod(devices, [req(1, 30000), req(1, 10000), req(1, 5000)], num_init=1)
    assert result.ok
    usage = node_usage([devices[0].info], [PodAllocation(tuple(map(tuple, result.hami_devices)), num_init=1)])
    assert (usage[0].used, usage[0].usedmem) == (2, 30000)
    result = fit_pod(devices, [req(1, 10000), req(1, 15000), req(1, 15000)], num_init=1)
    usage = node_usage([devices[0].info], [PodAllocation(tuple(map(tuple, result.hami_devices)), num_init=1)])
    assert (usage[0].used, usage[0].usedmem) == (2, 30000)


def test_scorenode_padding_depends_on_device_type() -> None:
    # score_test.go "one pod with three containers, middle container uses one device" (devices typed "NVIDIA")
    requests = [None, req(1, 1000, 101, 30), None]
    result = fit_pod([dev("uuid1", devmem=8000)], requests)
    assert result.devices == result.hami_devices == [[], [ContainerDevice("uuid1", "NVIDIA", 1000, 30)], []]
    assert encode_pod_devices(result.hami_devices) == ";uuid1,NVIDIA,1000,30:;;"
    # with real NVIDIA-<model> types HAMi pads under the model name, so the NVIDIA list skips those containers
    result = fit_pod([dev("uuid1", devmem=8000, type="NVIDIA-A100")], requests)
    assert result.devices == [[], [ContainerDevice("uuid1", "NVIDIA", 1000, 30)], []]
    assert result.hami_devices == [[ContainerDevice("uuid1", "NVIDIA", 1000, 30)]]
    assert encode_pod_devices(result.hami_devices) == "uuid1,NVIDIA,1000,30:;"


# --------------------------------------------------------------------------------------------------------------
# Filter: one pod over nodes
# --------------------------------------------------------------------------------------------------------------


def test_s5_schedule_pod() -> None:
    nodes = {
        "n1": [dev("a", type="NVIDIA-T4", devmem=16000, used=1, usedmem=8000, usedcores=50)],
        "n2": [dev("b", type="NVIDIA-T4", devmem=16000)],
        "n3": [dev("c", type="NVIDIA-T4", devmem=16000, usedmem=15000, used=1)],
    }
    pod = {"metadata": {"annotations": {}}, "spec": gpu_spec(1, 4000, 20)}
    result = schedule_pod(nodes, pod)
    assert result.node == "n1" and result.failed_nodes == {"n3": "1/1 CardInsufficientMemory"}
    spread = {"metadata": {"annotations": {"hami.io/node-scheduler-policy": "spread"}}, "spec": gpu_spec(1, 4000, 20)}
    assert schedule_pod(nodes, spread).node == "n2"
    assert schedule_pod(nodes, {"spec": {"containers": [container({})]}}).passthrough
    assert filter_failure_messages(
        {"n3": "1/1 CardInsufficientMemory", "n4": "1/2 CardInsufficientMemory, 1/2 CardNotHealth"}
    ) == [
        "2 nodes CardInsufficientMemory(n3,n4)",
        "1 nodes CardNotHealth(n4)",
    ]
    assert parse_reason("NodeInsufficientDevice") == {}
