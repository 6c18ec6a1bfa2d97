"""Tests for :mod:`dispatcher.placement.hami.usage`: section 2, usage rebuilt from bound pods.

Expected values come from ``/work/shared/hami-rules.md`` (section numbers in test names) or from HAMi's table
tests at commit 4707fb02; a comment names the Go file each ported case comes from.
"""

from __future__ import annotations

from typing import Any

import pytest
from hamibuild import MIG_PROFILES, cd, container

from dispatcher.placement.hami.devices import ContainerDevice, DeviceInfo, DeviceUsage, MigAllocation, MigPlacement
from dispatcher.placement.hami.fit import schedule_pod
from dispatcher.placement.hami.names import HamiFormatError
from dispatcher.placement.hami.podcodec import bind_annotations, decode_mig_allocations
from dispatcher.placement.hami.usage import PodAllocation, collapse_pod_usage, node_usage

# pkg/device/initContainer_test.go
COLLAPSE_CASES: list[tuple[str, int, list[list[ContainerDevice]], ContainerDevice]] = [
    ("no init", 0, [[cd("gpu0", 100, 10)], [cd("gpu0", 200, 20)]], ContainerDevice("gpu0", "NVIDIA", 300, 30, slots=2)),
    (
        "only init",
        2,
        [[cd("gpu0", 100, 10)], [cd("gpu0", 200, 30)]],
        ContainerDevice("gpu0", "NVIDIA", 200, 30, slots=1),
    ),
    ("mixed", 1, [[cd("gpu0", 500, 50)], [cd("gpu0", 100, 10)]], ContainerDevice("gpu0", "NVIDIA", 500, 50, slots=1)),
    (
        "init larger",
        1,
        [[cd("gpu0", 1000, 80)], [cd("gpu0", 200, 20)]],
        ContainerDevice("gpu0", "NVIDIA", 1000, 80, slots=1),
    ),
    (
        "app larger",
        1,
        [[cd("gpu0", 100, 10)], [cd("gpu0", 200, 20)], [cd("gpu0", 300, 30)]],
        ContainerDevice("gpu0", "NVIDIA", 500, 50, slots=2),
    ),
    (
        "init peak",
        3,
        [[cd("gpu0", 100, 10)], [cd("gpu0", 300, 30)], [cd("gpu0", 200, 20)], [cd("gpu0", 50, 5)]],
        ContainerDevice("gpu0", "NVIDIA", 300, 30, slots=1),
    ),
]


@pytest.mark.parametrize(("name", "num_init", "raw", "want"), COLLAPSE_CASES, ids=[c[0] for c in COLLAPSE_CASES])
def test_s2_collapse(name: str, num_init: int, raw: list[list[ContainerDevice]], want: ContainerDevice) -> None:
    assert collapse_pod_usage(raw, num_init) == [want]


def test_s2_node_usage() -> None:
    infos = [
        DeviceInfo("GPU-a", 0, 10, 16000, 100, "NVIDIA-T4", 0, True, "hami-core"),
        DeviceInfo("GPU-b", 1, 10, 16000, 100, "NVIDIA-T4", 0, True, "hami-core"),
    ]
    pods = [
        # init 4000/40 on a, app 1000/10 + 2000/20 on a -> max(init peak, app sum) = 4000/40, slots 2
        PodAllocation(((cd("GPU-a", 4000, 40),), (cd("GPU-a", 1000, 10),), (cd("GPU-a", 2000, 20),)), num_init=1),
        PodAllocation(((cd("GPU-b", 500, 5), cd("GPU-zz", 999, 99)),)),  # the unknown UUID is ignored
    ]
    usage = node_usage(infos, pods)
    assert [(u.used, u.usedmem, u.usedcores) for u in usage] == [(2, 4000, 40), (1, 500, 5)]
    assert all(u.info.health for u in usage)
    # after all init containers exited 0, HAMi counts the app containers only
    done = PodAllocation(pods[0].devices, num_init=1, init_done=True)
    assert [(u.used, u.usedmem, u.usedcores) for u in node_usage(infos, [done])] == [(2, 3000, 30), (0, 0, 0)]


def test_s2_real_device_types_shift_positions() -> None:
    # HAMi pads its per-container list by node device *type names*; with NVIDIA-<model> types a GPU-less init
    # container gets no entry, so the app containers move to position 0.. and the first is collapsed as an init
    # container (peak, one slot). Reproduced as HAMi does it: two 3000 MiB app containers count 3000, not 6000.
    spec = {
        "initContainers": [container({}, name="setup")],
        "containers": [
            container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 10}, name=n) for n in "ab"
        ],
    }
    for gpu_type, encoded, usage in [
        ("NVIDIA-A100", "g,NVIDIA,3000,10:;g,NVIDIA,3000,10:;", (1, 3000, 10)),
        ("NVIDIA", ";g,NVIDIA,3000,10:;g,NVIDIA,3000,10:;", (2, 6000, 20)),
    ]:
        info = DeviceInfo("g", 0, 10, 40960, 100, gpu_type, 0, True, "hami-core")
        result = schedule_pod({"n": [DeviceUsage(info)]}, {"spec": spec})
        assert result.fit is not None
        annos = bind_annotations("n", result.fit.hami_devices, 0)
        assert annos["hami.io/vgpu-devices-allocated"] == encoded
        alloc = PodAllocation.from_pod({"metadata": {"annotations": annos}, "spec": spec})
        assert alloc is not None
        (u,) = node_usage([info], [alloc])
        assert (u.used, u.usedmem, u.usedcores) == usage


def test_s2_mig_usage_from_annotations() -> None:
    mig = DeviceInfo("m", 0, 7, 81920, 100, "NVIDIA-A100", 0, True, "mig", MIG_PROFILES)
    core = DeviceInfo("c", 1, 10, 81920, 100, "NVIDIA-A100", 0, True, "hami-core")
    text = (
        '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"m","profile":"1g.10gb","placement":{"start":6,"size":1}},'
        '{"containerIndex":0,"deviceIndex":1,"gpuUUID":"m","profile":"1g.10gb","placement":{"start":5,"size":1}}]'
    )
    allocations = tuple(decode_mig_allocations(text))
    pod = PodAllocation(((cd("m", 9856, 15), cd("m", 9856, 15)),), mig_allocations=allocations)
    m, c = node_usage([mig, core], [pod])
    assert (m.used, m.usedmem, m.mig_in_use, m.info.health) == (
        2,
        19712,
        (MigPlacement(6, 1), MigPlacement(5, 1)),
        True,
    )
    # a MIG GPU used without a reservation, or a reservation on a hami-core GPU, marks the GPU unhealthy
    m, c = node_usage([mig, core], [PodAllocation(((cd("m", 9856, 15), cd("c", 100, 1)),))])
    assert not m.info.health and c.info.health
    bad = PodAllocation(
        ((cd("c", 100, 1),),), mig_allocations=(MigAllocation(0, 0, "c", "1g.10gb", MigPlacement(0, 1)),)
    )
    assert not node_usage([mig, core], [bad])[1].info.health
    with pytest.raises(HamiFormatError, match="MIG allocation 0 is incomplete"):
        decode_mig_allocations('[{"gpuUUID":"m"}]')


def test_s2_pod_allocation_from_pod() -> None:
    annos = {"hami.io/vgpu-node": "n1", "hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,1000,10:;"}
    pod: dict[str, Any] = {
        "metadata": {"annotations": annos},
        "spec": {"containers": [{}]},
        "status": {"phase": "Running"},
    }
    alloc = PodAllocation.from_pod(pod)
    assert alloc is not None and alloc.devices == ((cd("GPU-a", 1000, 10),), ())
    assert PodAllocation.from_pod({**pod, "status": {"phase": "Succeeded"}}) is None
    assert PodAllocation.from_pod({"metadata": {"annotations": {}}}) is None
    bad = {"metadata": {"annotations": {**annos, "hami.io/vgpu-devices-allocated": "a,b,c:;"}}}
    assert PodAllocation.from_pod(bad) is None
    with_init = {
        **pod,
        "spec": {"initContainers": [{}], "containers": [{}]},
        "status": {"phase": "Running", "initContainerStatuses": [{"state": {"terminated": {"exitCode": 0}}}]},
    }
    alloc = PodAllocation.from_pod(with_init)
    assert alloc is not None and alloc.num_init == 1 and alloc.init_done
