"""The simulated HAMi's own device rules (kubesim/hami), case by case against HAMi's source
(``/work/shared/hami-rules.md``, section numbers below)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from kubesim.hami.config import (
    CORDON_ANNOTATION,
    GPU_POLICY_ANNOTATION,
    HANDSHAKE_ANNOTATION,
    NUMA_BIND_ANNOTATION,
    REGISTER_ANNOTATION,
    SCORING_WEIGHTS_ANNOTATION,
    HamiAdmissionError,
    HamiSchedulingError,
)
from kubesim.hami.devices import (
    DeviceInfo,
    DeviceUsage,
    PodAllocation,
    bind_annotations,
    decode_node_devices,
    decode_pod_devices,
    encode_node_devices,
    node_usage,
    register_device,
)
from kubesim.hami.fit import schedule_pod
from kubesim.hami.health import NodeHealth, check_handshake
from kubesim.hami.requests import ContainerRequest, container_request, mutate_pod

Obj = dict[str, Any]


def gpus(node: str, n: int, *, count: int = 10, mem: int = 40960, numa_split: bool = True) -> list[DeviceUsage]:
    out = []
    for i in range(n):
        numa = i // max(1, n // 2) if numa_split else 0
        info = register_device(f"GPU-{node}-{i}", i, mem, "A100", numa=numa, split_count=count)
        out.append(DeviceUsage(info, health=True))
    return out


def pod(limits: dict[str, str], annotations: dict[str, str] | None = None, *, init: Obj | None = None) -> Obj:
    spec: Obj = {"containers": [{"name": "main", "resources": {"limits": limits}}]}
    if init is not None:
        spec["initContainers"] = [init]
    return {"metadata": {"name": "p", "annotations": annotations or {}}, "spec": spec}


def devices_of(result_devices: list[list[Any]]) -> list[list[tuple[str, int, int]]]:
    return [[(d.uuid, d.usedmem, d.usedcores) for d in c] for c in result_devices]


# ---- section 1: requests and the webhook --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "want"),
    [
        ({"nvidia.com/gpu": "1"}, ContainerRequest(1, 0, 100, 0)),  # memory omitted: the whole card
        ({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "3000"}, ContainerRequest(2, 3000, 101, 0)),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "150"}, ContainerRequest(1, 0, 100, 0)),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "0"}, ContainerRequest(1, 0, 100, 0)),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "16Gi"}, None),  # not a plain MiB count: no GPU at all
        ({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "150"}, ContainerRequest(1, 0, 100, 150)),
        ({"nvidia.com/gpumem": "3000"}, None),
    ],
)
def test_container_requests(limits: dict[str, str], want: ContainerRequest | None) -> None:
    assert container_request({"resources": {"limits": limits}}) == want


def test_webhook_defaults_and_denials() -> None:
    whole = mutate_pod(pod({"nvidia.com/gpu": "1"}))
    assert whole["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"] == "100"
    assert whole["spec"]["schedulerName"] == "hami-scheduler"
    memory_only = mutate_pod(pod({"nvidia.com/gpumem": "3000"}))
    assert memory_only["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpumem": "3000",
        "nvidia.com/gpu": "1",
    }
    other = pod({"nvidia.com/gpu": "1"})
    other["spec"]["schedulerName"] = "my-scheduler"
    assert mutate_pod(other) == other
    with pytest.raises(HamiAdmissionError) as bad:
        mutate_pod(pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "101"}))
    assert bad.value.code == 500 and "must be an integer between 0 and 100" in bad.value.message
    pinned = pod({"nvidia.com/gpu": "1"})
    pinned["spec"]["nodeName"] = "n"
    with pytest.raises(HamiAdmissionError, match="pod has node assigned"):
        mutate_pod(pinned)


# ---- sections 2 and 7: registration, annotations, usage -----------------------------------------------------------


def test_registration_round_trips_in_hamis_json_form() -> None:
    devices = [register_device("GPU-x", 1, 40960, "A100", numa=1), DeviceInfo("GPU-y", devmem=1, health=False)]
    raw = encode_node_devices(devices)
    assert raw == (
        '[{"id":"GPU-x","index":1,"count":10,"devmem":40960,"devcore":100,"type":"NVIDIA-A100","numa":1,'
        '"mode":"hami-core","health":true},{"id":"GPU-y","devmem":1}]'
    )
    assert decode_node_devices(raw) == devices


def test_usage_collapses_init_containers_and_shrinks_when_they_are_done() -> None:
    devices = [register_device("GPU-a", 0, 40960, "A100")]
    annotation = "GPU-a,NVIDIA,8000,50:;GPU-a,NVIDIA,3000,10:GPU-a,NVIDIA,2000,0:;"
    running: Obj = {
        "metadata": {"annotations": {"hami.io/vgpu-node": "n", "hami.io/vgpu-devices-allocated": annotation}},
        "spec": {"initContainers": [{}], "containers": [{}, {}]},
        "status": {"phase": "Running"},
    }
    [u] = node_usage(devices, [a for a in [PodAllocation.from_pod(running)] if a])
    assert (u.used, u.usedmem, u.usedcores) == (2, 8000, 50)  # max(init peak, app sum), app slots
    running["status"]["initContainerStatuses"] = [{"state": {"terminated": {"exitCode": 0}}}]
    [u] = node_usage(devices, [a for a in [PodAllocation.from_pod(running)] if a])
    assert (u.used, u.usedmem, u.usedcores) == (2, 5000, 10)


def test_bind_annotations_erase_what_the_device_plugin_allocated() -> None:
    devices = decode_pod_devices("GPU-a,NVIDIA,3000,0:;")
    out = bind_annotations("n", devices, 1700000000.5)
    assert out["hami.io/vgpu-devices-allocated"] == "GPU-a,NVIDIA,3000,0:;;"
    assert out["hami.io/vgpu-devices-to-allocate"] == ";;;"
    assert (out["hami.io/vgpu-time"], out["hami.io/bind-phase"]) == ("1700000000", "success")


# ---- sections 3 to 5: Fit, order, node choice ---------------------------------------------------------------------


def test_spread_then_binpack_order_and_node_choice() -> None:
    nodes = {"n1": gpus("n1", 2), "n2": gpus("n2", 2)}
    nodes["n1"][1].used, nodes["n1"][1].usedmem = 1, 10000
    spread = schedule_pod(nodes, mutate_pod(pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"})))
    # Node policy binpack: the more used node; GPU policy spread: its less used GPU.
    assert spread.node == "n1" and spread.fit is not None
    assert devices_of(spread.fit.devices) == [[("GPU-n1-0", 1000, 0)]]
    binpack = schedule_pod(
        nodes, pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}, {GPU_POLICY_ANNOTATION: "binpack"})
    )
    assert binpack.fit is not None and devices_of(binpack.fit.devices) == [[("GPU-n1-1", 1000, 0)]]


def test_failure_reasons_are_hamis() -> None:
    nodes = {"n1": gpus("n1", 2), "n2": gpus("n2", 1)}
    nodes["n1"][0].usedmem = 40000
    nodes["n1"][1].used = 10
    result = schedule_pod(
        nodes, pod({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "2000"}, {CORDON_ANNOTATION: "ignored on pods"})
    )
    assert result.node is None
    assert result.failed == {
        "n1": "1/2 CardInsufficientMemory, 1/2 CardTimeSlicingExhausted",
        "n2": "NodeInsufficientDevice",
    }


def test_exclusive_cards_cordons_and_numa_binding() -> None:
    nodes = {"n": gpus("n", 4)}
    nodes["n"][2].used = nodes["n"][3].used = 1
    annotations = {"n": {CORDON_ANNOTATION: " GPU-n-0 ,"}}
    whole = mutate_pod(pod({"nvidia.com/gpu": "2"}))
    result = schedule_pod(nodes, whole, node_annotations=annotations)
    assert result.node is None
    assert result.failed["n"] == (
        "1/4 AllocatedCardsInsufficientRequest, 1/4 CardCordoned, 2/4 ExclusiveDeviceAllocateConflict"
    )
    bound = pod({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000"}, {NUMA_BIND_ANNOTATION: "true"})
    result = schedule_pod(nodes, bound, node_annotations=annotations)
    assert result.fit is not None
    assert sorted(d.uuid for d in result.fit.devices[0]) == ["GPU-n-2", "GPU-n-3"]  # NUMA node 1; 0 is cordoned


def test_topology_aware_takes_the_best_connected_pair() -> None:
    nodes = {"n": gpus("n", 4, numa_split=False)}
    scores = {
        "n": {f"GPU-n-{i}": {f"GPU-n-{j}": (200 if {i, j} == {0, 3} else 10) for j in range(4)} for i in range(4)}
    }
    result = schedule_pod(
        nodes,
        pod({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000"}, {GPU_POLICY_ANNOTATION: "topology-aware"}),
        pair_scores=scores,
    )
    assert result.fit is not None and sorted(d.uuid for d in result.fit.devices[0]) == ["GPU-n-0", "GPU-n-3"]


def test_containers_without_gpus_leave_no_entry_for_model_typed_gpus() -> None:
    """``scoreNode`` pads by the node's device type names, and real GPUs are ``NVIDIA-<model>``: the ``NVIDIA`` list
    the annotation is written from holds only the containers that got GPUs."""
    p = pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}, init={"name": "setup", "resources": {}})
    result = schedule_pod({"n": gpus("n", 1)}, p)
    assert result.fit is not None and len(result.fit.devices) == 1
    typed = {"n": [DeviceUsage(DeviceInfo("GPU-t", count=10, devmem=1000, devcore=100, type="NVIDIA", health=True))]}
    result = schedule_pod(typed, p)
    assert result.fit is not None and [len(c) for c in result.fit.devices] == [0, 1]


def test_bad_scoring_weights_fail_the_filter() -> None:
    with pytest.raises(HamiSchedulingError, match="at least one weight must be positive"):
        schedule_pod(
            {"n": gpus("n", 1)}, pod({"nvidia.com/gpu": "1"}, {SCORING_WEIGHTS_ANNOTATION: "slot=0,core=0,memory=0"})
        )


# ---- section 6: health -------------------------------------------------------------------------------------------


def test_handshake_and_node_health() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0)
    first = check_handshake(None, now, 8)
    assert first == check_handshake("Reported whatever", now, 8) and first.write == "Requesting_2025-01-01 12:00:00"
    assert check_handshake(first.write, now + timedelta(seconds=59), 0).healthy
    assert not check_handshake(first.write, now + timedelta(seconds=61), 0).healthy
    assert check_handshake(first.write, now + timedelta(seconds=61), 8).healthy
    health = NodeHealth()
    annotations = {HANDSHAKE_ANNOTATION: first.write or "", REGISTER_ANNOTATION: "[]"}
    assert health.check("n", annotations, 8, now).changed
    assert not health.check("n", annotations, 8, now).changed
    assert not health.check("n", annotations, 0, now).healthy  # the GPUs went away


def test_pair_scores_annotation_is_json() -> None:
    from kubesim.hami.devices import decode_pair_scores

    raw = json.dumps([{"uuid": "GPU-0", "score": {"GPU-1": 100}}])
    assert decode_pair_scores(raw) == {"GPU-0": {"GPU-1": 100}}
