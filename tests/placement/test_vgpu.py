"""HAMi's NVIDIA rules (dispatcher.placement.vgpu) against /work/shared/hami-rules.md and HAMi's own Go tests.

Expected values come from the rules document (section numbers in test names) or from HAMi's table tests at
commit 4707fb02; a comment names the Go file each ported case comes from.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest

from dispatcher.placement import vgpu as v
from dispatcher.placement.hami.devices import (
    ContainerDevice,
    ContainerRequest,
    DeviceInfo,
    DeviceUsage,
    HamiConfig,
    MigPlacement,
    MigProfile,
)
from dispatcher.placement.hami.names import HamiAdmissionError, HamiFormatError, HamiSchedulingError
from dispatcher.placement.hami.quota import NamespaceQuota
from dispatcher.placement.hami.usage import PodAllocation

# --------------------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------------------


def dev(
    uuid: str,
    *,
    index: int = 0,
    count: int = 10,
    devmem: int = 8192,
    devcore: int = 100,
    type: str = "NVIDIA",
    numa: int = 0,
    health: bool = True,
    mode: str = "hami-core",
    used: int = 0,
    usedmem: int = 0,
    usedcores: int = 0,
    profiles: tuple[MigProfile, ...] = (),
) -> DeviceUsage:
    info = DeviceInfo(uuid, index, count, devmem, devcore, type, numa, health, mode, profiles)
    return DeviceUsage(info, used, usedmem, usedcores)


def container(
    limits: Mapping[str, Any] | None = None, requests: Mapping[str, Any] | None = None, name: str = "c"
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = dict(limits)
    if requests is not None:
        resources["requests"] = dict(requests)
    return {"name": name, "resources": resources}


def gpu_spec(
    gpus: int | str, mem: int | str | None = None, cores: int | None = None, pct: int | None = None
) -> dict[str, Any]:
    limits: dict[str, Any] = {"nvidia.com/gpu": gpus}
    if mem is not None:
        limits["nvidia.com/gpumem"] = mem
    if cores is not None:
        limits["nvidia.com/gpucores"] = cores
    if pct is not None:
        limits["nvidia.com/gpumem-percentage"] = pct
    return {"containers": [container(limits)]}


def req(nums: int, mem: int = 0, pct: int = 101, cores: int = 0, type: str = "NVIDIA") -> ContainerRequest:
    return ContainerRequest(nums, mem, pct, cores, type)


def fit(
    devices: list[DeviceUsage], request: ContainerRequest, annos: Mapping[str, str] | None = None, **kw: Any
) -> tuple[bool, list[ContainerDevice], str]:
    return v.fit_container(devices, request, annos, **kw)


# --------------------------------------------------------------------------------------------------------------
# Section 1: requests
# --------------------------------------------------------------------------------------------------------------

# pkg/device/nvidia/device_test.go TestGenerateResourceRequests
GENERATE_CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, ContainerRequest | None]] = [
    ("gpu only: whole card", {"nvidia.com/gpu": 1}, None, req(1, 0, 100, 0)),
    ("gpu + explicit memory", {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 4096}, None, req(2, 4096, 101)),
    ("gpu + percentage", {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50}, None, req(1, 0, 50)),
    ("percentage > 100 clamped", {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 150}, None, req(1, 0, 100)),
    (
        "percentage beyond int32",
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 2**32 + 50},
        None,
        req(1, 0, 100),
    ),
    ("percentage = sentinel 101", {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 101}, None, req(1, 0, 100)),
    ("explicit cores", {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 50}, None, req(1, 0, 100, 50)),
    ("no gpu resource", {}, None, None),
    ("gpu in requests only", {}, {"nvidia.com/gpu": 1}, req(1, 0, 100)),
    ("percentage 0 is unset", {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 0}, None, req(1, 0, 100)),
    ("percentage 0 in requests", {}, {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 0}, req(1, 0, 100)),
    ("negative percentage", {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": -1}, None, req(1, 0, 100)),
    (
        "percentage 0 + memory",
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000, "nvidia.com/gpumem-percentage": 0},
        None,
        req(1, 2000, 101),
    ),
    ("16Gi overflows int32: empty", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": "16Gi"}, None, None),
    ("16.0Gi: empty", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": "16.0Gi"}, None, None),
]


@pytest.mark.parametrize(("name", "limits", "requests", "want"), GENERATE_CASES, ids=[c[0] for c in GENERATE_CASES])
def test_s1_generate_resource_requests(
    name: str, limits: dict[str, Any], requests: dict[str, Any] | None, want: ContainerRequest | None
) -> None:
    assert v.container_request(container(limits, requests)) == want


def test_s1_memory_factor() -> None:
    # device_test.go TestGenerateResourceRequests_MemoryFactor
    cfg = HamiConfig(memory_factor=2)
    assert v.container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024}), cfg) == req(1, 2048, 101)
    assert v.container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "1Gi"}), cfg) is None
    # a factor of 0 counts as 1
    cfg0 = HamiConfig(memory_factor=0)
    assert v.container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024}), cfg0) == req(1, 1024, 101)


def test_s1_default_memory() -> None:
    # device_test.go TestGenerateResourceRequests_DefaultMemory
    cfg = HamiConfig(default_memory=512)
    want = req(1, 512, 101)
    assert v.container_request(container({"nvidia.com/gpu": 1}), cfg) == want
    assert v.container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 0}), cfg) == want
    assert v.container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 0}), cfg) == want


def test_s1_quantity_forms() -> None:
    # gpumem is read as MiB from the canonical quantity: 1.0 is 1, 1.5Gi is 1610612736 (still within int32)
    assert v.container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "1.0"})) == req(1, 1, 101)
    assert v.container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "1.5Gi"})) == req(
        1, 1610612736, 101
    )
    assert v.container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "500m"})) is None
    assert v.container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": -1})) is None
    # a fractional or zero GPU count is no request at all
    assert v.container_request(container({"nvidia.com/gpu": "0.5"})) is None
    assert v.container_request(container({"nvidia.com/gpu": 0})) is None
    # gpucores above 100 are not clamped in the request (Fit clamps them)
    assert v.container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 150})) == req(1, 0, 100, 150)
    # limits win over requests
    r = v.container_request(container({"nvidia.com/gpu": 2}, {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100}))
    assert r == req(2, 100, 101)


def test_s1_pod_requests_init_first() -> None:
    spec = {
        "initContainers": [container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10}, name="i")],
        "containers": [container({}, name="a"), container({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 20}, name="b")],
    }
    assert v.pod_requests(spec) == [req(1, 10), None, req(2, 20)]


# device_test.go TestMutateAdmissionDefaultsExclusiveCore
EXCLUSIVE_CASES: list[tuple[str, HamiConfig, dict[str, Any] | None, dict[str, Any] | None, str | None]] = [
    ("via percentage", HamiConfig(), {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"}, None, "100"),
    (
        "percentage in requests",
        HamiConfig(),
        None,
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"},
        "100",
    ),
    (
        "non-exclusive percentage",
        HamiConfig(),
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"},
        None,
        None,
    ),
    ("no memory fields", HamiConfig(), {"nvidia.com/gpu": "1"}, None, "100"),
    ("explicit cores kept", HamiConfig(), {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "70"}, None, "70"),
    ("memory size is shareable", HamiConfig(), {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192"}, None, None),
    ("memory name empty", HamiConfig(resource_memory=""), {"nvidia.com/gpu": "1"}, None, "100"),
    (
        "custom names",
        HamiConfig(
            resource_count="hami.io/gpu",
            resource_memory="hami.io/gpumem",
            resource_memory_percentage="hami.io/gpumem-percentage",
            resource_cores="hami.io/gpucores",
        ),
        {"hami.io/gpu": "1", "hami.io/gpumem-percentage": "100"},
        None,
        "100",
    ),
]


@pytest.mark.parametrize(
    ("name", "cfg", "limits", "requests", "core"), EXCLUSIVE_CASES, ids=[c[0] for c in EXCLUSIVE_CASES]
)
def test_s1_webhook_exclusive_core(
    name: str, cfg: HamiConfig, limits: dict[str, Any] | None, requests: dict[str, Any] | None, core: str | None
) -> None:
    pod = {"spec": {"containers": [container(limits, requests)]}}
    out = v.mutate_pod(pod, cfg)
    got = (out["spec"]["containers"][0]["resources"].get("limits") or {}).get(cfg.resource_cores)
    assert got == core


def test_s1_webhook_bare_gpu_becomes_exclusive_card() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": [container({"nvidia.com/gpu": 1})]}}
    out = v.mutate_pod(pod)
    limits = out["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": 1, "nvidia.com/gpucores": "100"}
    assert v.container_request(out["spec"]["containers"][0]) == req(1, 0, 100, 100)
    assert out["spec"]["schedulerName"] == "hami-scheduler"
    assert "schedulerName" not in pod["spec"]  # the input is untouched
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}


def test_s1_webhook_adds_gpu_count() -> None:
    # memory or cores without gpu gets gpu = defaultGPUNum; with memory set, no core injection
    out = v.mutate_pod({"spec": {"containers": [container({"nvidia.com/gpumem": 3000})]}})
    assert out["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpumem": 3000, "nvidia.com/gpu": "1"}
    out = v.mutate_pod(
        {"spec": {"containers": [container({"nvidia.com/gpucores": 30})]}}, HamiConfig(default_gpu_num=2)
    )
    assert out["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpucores": 30, "nvidia.com/gpu": "2"}
    # only limits count for that step (mutateContainerResource)
    out = v.mutate_pod({"spec": {"containers": [container(None, {"nvidia.com/gpumem": 3000})]}})
    assert "nvidia.com/gpu" not in (out["spec"]["containers"][0]["resources"].get("limits") or {})
    assert "schedulerName" not in out["spec"]


@pytest.mark.parametrize(("pct", "error"), [(0, False), (100, False), (101, True), (150, True)])
def test_s1_webhook_percentage_validation(pct: int, error: bool) -> None:
    # device_test.go Test_MutateAdmission_MemoryPercentageValidation
    pod = {"spec": {"containers": [container({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": pct}, name="test")]}}
    if error:
        with pytest.raises(HamiAdmissionError) as exc:
            v.mutate_pod(pod)
        assert exc.value.code == 500
        assert exc.value.message == (
            f"invalid nvidia.com/gpumem-percentage value {pct} in container test: must be an integer between 0 and 100"
        )
    else:
        v.mutate_pod(pod)


def test_s1_webhook_pod_rules() -> None:
    gpu = container({"nvidia.com/gpu": 1}, name="g")
    with pytest.raises(HamiAdmissionError, match="pod has no containers"):
        v.mutate_pod({"spec": {"containers": []}})
    priv = dict(container({}, name="root"), securityContext={"privileged": True})
    with pytest.raises(HamiAdmissionError, match="container root is privileged") as exc:
        v.mutate_pod({"spec": {"initContainers": [priv], "containers": [gpu]}})
    assert exc.value.code == 403
    v.mutate_pod({"spec": {"containers": [priv]}})  # privileged without GPU is fine
    with pytest.raises(HamiAdmissionError, match="pod has node assigned"):
        v.mutate_pod({"spec": {"nodeName": "n1", "containers": [gpu]}})
    # a pod aimed at another scheduler is left alone; default-scheduler is overwritten
    other = v.mutate_pod({"spec": {"schedulerName": "volcano", "containers": [gpu]}})
    assert other["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    default = v.mutate_pod({"spec": {"schedulerName": "default-scheduler", "containers": [gpu]}})
    assert default["spec"]["schedulerName"] == "hami-scheduler"
    # priority env, runtime class
    cfg = HamiConfig(runtime_class_name="nvidia", gpu_core_policy="force")
    out = v.mutate_pod({"spec": {"containers": [container({"nvidia.com/gpu": 1, "nvidia.com/priority": 1})]}}, cfg)
    assert out["spec"]["runtimeClassName"] == "nvidia"
    assert out["spec"]["containers"][0]["env"] == [
        {"name": "CUDA_TASK_PRIORITY", "value": "1"},
        {"name": "GPU_CORE_UTILIZATION_POLICY", "value": "force"},
    ]


def test_s1_webhook_quota_precheck() -> None:
    # webhook.go fitResourceQuota: explicit Memreq × Nums; percentage / whole card counts as 0
    quota = NamespaceQuota(mem_limit=8000)
    ok = {"spec": {"containers": [container({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 4000})]}}
    too_much = {"spec": {"containers": [container({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 4001})]}}
    whole = {"spec": {"containers": [container({"nvidia.com/gpu": 8})]}}
    v.mutate_pod(ok, quota=quota)
    v.mutate_pod(whole, quota=quota)
    with pytest.raises(HamiAdmissionError, match="exceeding resource quota"):
        v.mutate_pod(too_much, quota=quota)
    # init containers count by their largest, app containers by their sum
    spec = {
        "initContainers": [container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 7000})],
        "containers": [container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}) for _ in range(2)],
    }
    assert v.admission_quota_fits(spec, NamespaceQuota(mem_limit=7000))
    assert not v.admission_quota_fits(spec, NamespaceQuota(mem_limit=6999))


def test_s1_is_hami_request() -> None:
    assert v.is_hami_request(gpu_spec(1))
    assert not v.is_hami_request({"containers": [container({"cpu": "1"})]})
    assert not v.is_hami_request(gpu_spec(1, "16Gi"))
    only_mem = {"containers": [container({"nvidia.com/gpumem": 1000})]}
    assert v.is_hami_request(only_mem)  # the webhook adds nvidia.com/gpu
    assert not v.is_hami_request(only_mem, webhook=False)


def test_s1_hami_resource_problems() -> None:
    assert v.hami_resource_problems(gpu_spec(1, 16000, 50)) == []
    assert v.hami_problem(gpu_spec(1)) is None
    (p,) = v.hami_resource_problems(gpu_spec(1, "16Gi"))
    assert p.startswith("nvidia.com/gpumem must be a plain integer in MiB, got '16Gi'")
    assert "without a GPU" in p
    (p,) = v.hami_resource_problems(gpu_spec(1, "2Ki"))
    assert p.startswith("nvidia.com/gpumem must be a plain integer in MiB, got '2Ki'") and "2048 MiB" in p
    (p,) = v.hami_resource_problems(gpu_spec("0.5"))
    assert p.startswith("nvidia.com/gpu must be a whole number of GPUs, got '0.5'")
    (p,) = v.hami_resource_problems(gpu_spec(1, pct=150))
    assert p.startswith("nvidia.com/gpumem-percentage must be between 0 and 100, got '150'")
    (p,) = v.hami_resource_problems(gpu_spec(1, cores=150))
    assert p.startswith("nvidia.com/gpucores must be at most 100, got '150'")
    assert v.hami_problem(gpu_spec(1, "16Gi")) == v.hami_resource_problems(gpu_spec(1, "16Gi"))[0]


# --------------------------------------------------------------------------------------------------------------
# Sections 2 and 7: inventory annotation
# --------------------------------------------------------------------------------------------------------------


def test_s7_encode_node_devices_key_order_and_omitempty() -> None:
    devices = [
        DeviceInfo("GPU-0", 0, 10, 8192, 100, "NVIDIA-A100", 0, True, "hami-core"),
        DeviceInfo("GPU-1", 1, 10, 8192, 100, "NVIDIA-A100", 1, False, ""),
    ]
    assert v.encode_node_devices(devices) == (
        '[{"id":"GPU-0","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100","mode":"hami-core","health":true},'
        '{"id":"GPU-1","index":1,"count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100","numa":1}]'
    )
    back = v.decode_node_devices(v.encode_node_devices(devices))
    assert back == devices
    assert back[1].health is False  # a missing health key means unhealthy
    assert v.encode_node_devices([]) == "[]"
    assert v.encode_node_devices([DeviceInfo("<&>", type="a\nb")]) == '[{"id":"\\u003c\\u0026\\u003e","type":"a\\nb"}]'


def test_s7_mig_profile_wire_format() -> None:
    # devices_test.go TestMigProfileUsesCompactWireFormat
    profile = MigProfile("1g.5gb", 4864, 15, 1, (MigPlacement(6, 1),))
    d = DeviceInfo(
        "GPU-m",
        count=7,
        devmem=40960,
        devcore=100,
        type="NVIDIA-A100",
        health=True,
        mode="mig",
        mig_profiles=(profile,),
    )
    text = v.encode_node_devices([d])
    assert (
        '"migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,"placements":[{"start":6,"size":1}]}]'
        in text
    )
    assert v.decode_node_devices(text) == [d]


def test_s7_decode_node_devices() -> None:
    # devices_test.go TestUnMarshalNodeDevices
    got = v.decode_node_devices(
        '[{"index":1,"id":"id-1","count":1,"devmem":1024,"devcore":10,"type":"type","health":true},'
        '{"index":2,"id":"id-2","count":2,"devmem":4096,"devcore":20,"type":"type2","health":false}]\n'
    )
    assert got == [
        DeviceInfo("id-1", 1, 1, 1024, 10, "type", 0, True, ""),
        DeviceInfo("id-2", 2, 2, 4096, 20, "type2", 0, False, ""),
    ]
    # Go matches keys case-insensitively and ignores unknown keys
    assert v.decode_node_devices('[{"ID":"a","Count":3,"extra":[1]}]') == [DeviceInfo("a", count=3)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "no gpu found on node"),
        ("null", "no gpu found on node"),
        (
            "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:",
            "invalid character 'G' looking for beginning of value",
        ),
        ("", "unexpected end of JSON input"),
        ('[{"id":"a"}', "unexpected end of JSON input"),
        ('[{"id" "a"}]', "invalid character '\"' after object key"),
        ('[{"count":"10"}]', "json: cannot unmarshal string into Go struct field DeviceInfo.count of type int32"),
        ('[{"count":1.5}]', "json: cannot unmarshal number 1.5 into Go struct field DeviceInfo.count of type int32"),
        (
            '[{"devmem":4294967296}]',
            "json: cannot unmarshal number 4294967296 into Go struct field DeviceInfo.devmem of type int32",
        ),
        ('[{"health":"true"}]', "json: cannot unmarshal string into Go struct field DeviceInfo.health of type bool"),
        ('{"id":"a"}', "json: cannot unmarshal object into Go value of type []*device.DeviceInfo"),
        ("[1]", "json: cannot unmarshal number into Go value of type device.DeviceInfo"),
        ("[NaN]", "invalid character 'N' looking for beginning of value"),
    ],
)
def test_s7_decode_node_devices_errors(text: str, message: str) -> None:
    with pytest.raises(HamiFormatError) as exc:
        v.decode_node_devices(text)
    assert str(exc.value) == message


def test_s7_node_devices_from_annotations() -> None:
    with pytest.raises(HamiFormatError) as exc:
        v.node_devices_from_annotations({})
    assert str(exc.value) == "annos not found hami.io/node-nvidia-register"
    annos = {
        v.REGISTER_ANNOTATION: (
            '[{"id":"GPU-0","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-T4","health":true}]'
        ),
        v.PAIR_SCORE_ANNOTATION: '[{"uuid":"GPU-0","score":{"GPU-1":100}}]',
    }
    devices, pairs = v.node_devices_from_annotations(annos)
    assert devices == [DeviceInfo("GPU-0", 0, 10, 8192, 100, "NVIDIA-T4", 0, True, "")]
    assert pairs == {"GPU-0": {"GPU-1": 100}}
    with pytest.raises(HamiFormatError):
        v.node_devices_from_annotations({**annos, v.PAIR_SCORE_ANNOTATION: "{bad"})


V100 = "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4"

# devices_test.go Test_DecodeNodeDevices
LEGACY_CASES: list[tuple[str, list[DeviceInfo] | str]] = [
    ("", "node annotation missing device separator"),
    (":", []),
    ("::", []),
    (",", "node annotation missing device separator"),
    (",:", "unexpected field count 2 in node annotation"),
    ("a", "node annotation missing device separator"),
    (
        f"{V100},10,7680,100,NVIDIA-Tesla P4,0,true:",
        [DeviceInfo(V100, 0, 10, 7680, 100, "NVIDIA-Tesla P4", 0, True, "hami-core")],
    ),
    (
        f"{V100},10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:",
        [DeviceInfo(V100, 1, 10, 7680, 100, "NVIDIA-Tesla P4", 0, True, "hami-core")],
    ),
    ("garbage:", 'malformed node annotation segment: "garbage"'),
    (
        f"{V100},notanint,7680,100,NVIDIA-Tesla P4,0,true:",
        'invalid count field: strconv.ParseInt: parsing "notanint": invalid syntax',
    ),
    (
        f"{V100},10,notanint,100,NVIDIA-Tesla P4,0,true:",
        'invalid memory field: strconv.ParseInt: parsing "notanint": invalid syntax',
    ),
    (
        f"{V100},10,7680,notanint,NVIDIA-Tesla P4,0,true:",
        'invalid core field: strconv.ParseInt: parsing "notanint": invalid syntax',
    ),
    (
        f"{V100},10,7680,100,NVIDIA-Tesla P4,notanint,true:",
        'invalid numa field: strconv.Atoi: parsing "notanint": invalid syntax',
    ),
    (
        f"{V100},10,7680,100,NVIDIA-Tesla P4,0,notabool:",
        'invalid health field: strconv.ParseBool: parsing "notabool": invalid syntax',
    ),
    (f"{V100},10,7680,100,NVIDIA-Tesla P4:", "unexpected field count 5 in node annotation"),
    (
        f"{V100},10,7680,100,NVIDIA-Tesla P4,0,true,notanint,hami-core:",
        'invalid index field: strconv.Atoi: parsing "notanint": invalid syntax',
    ),
    (f"{V100},10,7680,100,NVIDIA-Tesla P4,0,true,-1,hami-core:", "index field must not be negative: -1"),
]


@pytest.mark.parametrize(("text", "want"), LEGACY_CASES)
def test_s7_legacy_colon_form(text: str, want: list[DeviceInfo] | str) -> None:
    if isinstance(want, str):
        with pytest.raises(HamiFormatError) as exc:
            v.decode_legacy_node_devices(text)
        assert str(exc.value) == want
    else:
        assert v.decode_legacy_node_devices(text) == want


def test_s7_legacy_encode() -> None:
    # devices_test.go Test_EncodeNodeDevices
    d = DeviceInfo(V100, 1, 10, 7680, 100, "NVIDIA-Tesla P4", 0, True, "hami-core")
    text = v.encode_legacy_node_devices([d])
    assert text == f"{V100},10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:"
    assert v.decode_legacy_node_devices(text) == [d]


# --------------------------------------------------------------------------------------------------------------
# Section 7: pod annotations
# --------------------------------------------------------------------------------------------------------------


def cd(uuid: str, mem: int, cores: int, type: str = "NVIDIA") -> ContainerDevice:
    return ContainerDevice(uuid, type, mem, cores)


def test_s7_pod_devices_coding() -> None:
    # devices_test.go TestPodDevicesCoding / Test_DecodePodDevices: the trailing ";" decodes to an extra entry
    assert v.encode_pod_devices([]) == ""
    assert v.decode_pod_devices("") == [[]]
    one = [[cd("UUID1", 1000, 30, "Type1")]]
    assert v.encode_pod_devices(one) == "UUID1,Type1,1000,30:;"
    assert v.decode_pod_devices("UUID1,Type1,1000,30:;") == [*one, []]
    two = [[cd("UUID1", 1000, 30), cd("UUID2", 1000, 30)]]
    assert v.encode_pod_devices(two) == "UUID1,NVIDIA,1000,30:UUID2,NVIDIA,1000,30:;"
    text = "GPU-8dcd,NVIDIA,500,3:;GPU-ebe7,NVIDIA,500,3:;"
    assert v.decode_pod_devices(text) == [[cd("GPU-8dcd", 500, 3)], [cd("GPU-ebe7", 500, 3)], []]
    assert v.decode_pod_devices(";GPU-a,NVIDIA,1,2:;") == [[], [cd("GPU-a", 1, 2)], []]
    # example from hami-rules.md section 7
    assert (
        v.encode_pod_devices([[cd("GPU-a", 3000, 0)], [cd("GPU-a", 5000, 0)]])
        == "GPU-a,NVIDIA,3000,0:;GPU-a,NVIDIA,5000,0:;"
    )


def test_s7_pod_devices_errors() -> None:
    # devices_test.go TestDecodePodDevices_BadAnnotation
    with pytest.raises(HamiFormatError, match="missing fields, do not use nodeName in task spec"):
        v.decode_pod_devices("uuid,type,100:;")
    with pytest.raises(HamiFormatError) as exc:
        v.decode_pod_devices("uuid,NVIDIA,x,1:;")
    assert str(exc.value) == 'invalid memory field: strconv.ParseInt: parsing "x": invalid syntax'
    assert v.decode_pod_devices("garbage:;") == [[], []]  # entries without a comma are skipped


def test_s7_device_plugin_pop_and_bind_annotations() -> None:
    containers = [[cd("GPU-a", 3000, 0)], [], [cd("GPU-b", 5000, 10), cd("GPU-c", 5000, 10)]]
    text = v.encode_pod_devices(containers)
    index, got, after = v.pop_next_container_devices(text)
    assert (index, got) == (0, containers[0])
    assert after == ";;GPU-b,NVIDIA,5000,10:GPU-c,NVIDIA,5000,10:;;"
    index, got, after = v.pop_next_container_devices(after)
    assert (index, got, after) == (2, containers[2], ";;;;;")
    assert v.pop_next_container_devices(after) == (None, [], after)

    now = datetime.fromtimestamp(1_700_000_000)
    annos = v.bind_annotations("node-1", containers, now, phase="allocating")
    assert annos == {
        "hami.io/vgpu-node": "node-1",
        "hami.io/vgpu-time": "1700000000",
        "hami.io/vgpu-devices-to-allocate": text,
        "hami.io/vgpu-devices-allocated": text,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
    }
    done = v.bind_annotations("node-1", containers, 1_700_000_000, bind_time=1_700_000_001)
    assert done["hami.io/bind-phase"] == "success"
    assert done["hami.io/vgpu-devices-to-allocate"] == ";;;;;"
    assert done["hami.io/vgpu-devices-allocated"] == text
    assert done["hami.io/bind-time"] == "1700000001"


# --------------------------------------------------------------------------------------------------------------
# Section 2: usage from bound pods
# --------------------------------------------------------------------------------------------------------------

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
    assert v.collapse_pod_usage(raw, num_init) == [want]


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
    usage = v.node_usage(infos, pods)
    assert [(u.used, u.usedmem, u.usedcores) for u in usage] == [(2, 4000, 40), (1, 500, 5)]
    assert all(u.info.health for u in usage)
    # after all init containers exited 0, HAMi counts the app containers only
    done = PodAllocation(pods[0].devices, num_init=1, init_done=True)
    assert [(u.used, u.usedmem, u.usedcores) for u in v.node_usage(infos, [done])] == [(2, 3000, 30), (0, 0, 0)]


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
        result = v.schedule_pod({"n": [DeviceUsage(info)]}, {"spec": spec})
        assert result.fit is not None
        annos = v.bind_annotations("n", result.fit.hami_devices, 0)
        assert annos["hami.io/vgpu-devices-allocated"] == encoded
        alloc = PodAllocation.from_pod({"metadata": {"annotations": annos}, "spec": spec})
        assert alloc is not None
        (u,) = v.node_usage([info], [alloc])
        assert (u.used, u.usedmem, u.usedcores) == usage


def test_s2_mig_usage_from_annotations() -> None:
    mig = DeviceInfo("m", 0, 7, 81920, 100, "NVIDIA-A100", 0, True, "mig", MIG_PROFILES)
    core = DeviceInfo("c", 1, 10, 81920, 100, "NVIDIA-A100", 0, True, "hami-core")
    text = (
        '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"m","profile":"1g.10gb","placement":{"start":6,"size":1}},'
        '{"containerIndex":0,"deviceIndex":1,"gpuUUID":"m","profile":"1g.10gb","placement":{"start":5,"size":1}}]'
    )
    allocations = tuple(v.decode_mig_allocations(text))
    pod = PodAllocation(((cd("m", 9856, 15), cd("m", 9856, 15)),), mig_allocations=allocations)
    m, c = v.node_usage([mig, core], [pod])
    assert (m.used, m.usedmem, m.mig_in_use, m.info.health) == (
        2,
        19712,
        (MigPlacement(6, 1), MigPlacement(5, 1)),
        True,
    )
    # a MIG GPU used without a reservation, or a reservation on a hami-core GPU, marks the GPU unhealthy
    m, c = v.node_usage([mig, core], [PodAllocation(((cd("m", 9856, 15), cd("c", 100, 1)),))])
    assert not m.info.health and c.info.health
    bad = PodAllocation(
        ((cd("c", 100, 1),),), mig_allocations=(v.MigAllocation(0, 0, "c", "1g.10gb", MigPlacement(0, 1)),)
    )
    assert not v.node_usage([mig, core], [bad])[1].info.health
    with pytest.raises(HamiFormatError, match="MIG allocation 0 is incomplete"):
        v.decode_mig_allocations('[{"gpuUUID":"m"}]')


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


def test_s2_register_device() -> None:
    d = v.register_device("GPU-0", 0, 40960, "Tesla V100", memory_scaling=1.5, core_scaling=0.29, healthy="healthy")
    assert (d.devmem, d.devcore, d.type, d.health, d.count) == (61440, 28, "NVIDIA-Tesla V100", True, 10)
    assert v.register_device("GPU-1", 1, 40960, "NVIDIA A100", healthy="Unhealthy").type == "NVIDIA A100"
    assert not v.register_device("GPU-1", 1, 40960, "NVIDIA A100", healthy="Unhealthy").health


# --------------------------------------------------------------------------------------------------------------
# Section 3: Fit
# --------------------------------------------------------------------------------------------------------------

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
    whole = v.container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 0}))
    assert whole is not None
    ok, got, _ = fit([dev("dev-0", devmem=11264)], whole)
    assert ok and got[0].usedmem == 11264
    ok, _, reason = fit([dev("dev-0", devmem=11264, usedmem=11260)], whole)
    assert not ok and "CardInsufficientMemory" in reason


def test_s3_f1_to_f12_each_rejects_with_its_reason() -> None:
    cordon = {v.CORDON_ANNOTATION: " d , other"}
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
    assert fit([d], req(1, 100), node_annotations={v.CORDON_ANNOTATION: "d"})[2] == "1/1 CardNotHealth"
    # memory before cores
    assert fit([dev("d", usedmem=8192, usedcores=100)], req(1, 1, 101, 10))[2] == "1/1 CardInsufficientMemory"
    # GenReason sorts the "<n>/<m> <Reason>" strings
    devices = [dev("a", health=False), dev("b", used=10), dev("c", used=10), dev("e", usedmem=8192)]
    assert fit(devices, req(1, 100))[2] == "1/4 CardInsufficientMemory, 1/4 CardNotHealth, 2/4 CardTimeSlicingExhausted"


def test_s3_cordon() -> None:
    # device_test.go TestFit_DeviceCordon
    devices = [dev("dev-0", devmem=128, count=100), dev("dev-1", devmem=128, count=100)]
    r = req(1, 64, 101, 50)
    ok, got, _ = fit(devices, r, node_annotations={v.CORDON_ANNOTATION: "dev-1, "})
    assert ok and got[0].uuid == "dev-0"
    assert fit(devices, r, node_annotations={v.CORDON_ANNOTATION: "dev-0,dev-1"}) == (False, [], "2/2 CardCordoned")
    busy = [devices[0], dev("dev-1", devmem=128, count=100, used=1, usedcores=50, usedmem=64)]
    ok, got, _ = fit(busy, r, node_annotations={v.CORDON_ANNOTATION: "dev-1"})
    assert ok and got[0].uuid == "dev-0"
    assert fit(devices, r, node_annotations={})[0]
    assert v.cordoned_devices({v.CORDON_ANNOTATION: " a,, b ,"}) == frozenset({"a", "b"})


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
    assert v.fit_container(devices, r, None, HamiConfig(memory_factor=2), quota=NamespaceQuota(mem_limit=4000))[0]
    # quota from ResourceQuota objects: only limits.<resource> keys with whole values
    rq = [
        {"spec": {"hard": {"limits.nvidia.com/gpumem": "8000", "requests.nvidia.com/gpucores": "1", "limits.cpu": "2"}}}
    ]
    assert v.namespace_quota(rq) == NamespaceQuota(mem_limit=8000)
    assert v.namespace_quota([{"spec": {"hard": {"cpu": "1"}}}]) is None


MIG_PROFILES = (
    MigProfile("1g.10gb", 9856, 15, 1, tuple(MigPlacement(i, 1) for i in range(7))),
    MigProfile("3g.40gb", 39424, 43, 3, (MigPlacement(0, 4), MigPlacement(4, 4))),
    MigProfile("7g.80gb", 80000, 100, 7, (MigPlacement(0, 8),)),
)


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
    fitted = v.fit_pod([mig], [req(2, 9000)])
    assert fitted.ok
    assert [(d.usedmem, d.usedcores, d.mig_profile, d.mig_placement) for d in fitted.devices[0]] == [
        (9856, 15, "1g.10gb", MigPlacement(6, 1)),
        (9856, 15, "1g.10gb", MigPlacement(5, 1)),
    ]
    assert v.encode_mig_allocations(fitted.hami_devices) == (
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
    result = v.fit_pod(devices, [req(2, 24000, 101, 30)])
    assert result.ok
    assert sorted((d.uuid, d.usedmem, d.usedcores) for d in result.devices[0]) == [("a", 24000, 30), ("b", 24000, 30)]
    # a single huge GPU cannot serve 2 GPUs
    big = [dev("big", devmem=200000, count=100, type="NVIDIA-A100")]
    assert v.fit_pod(big, [req(2, 1000)]).reason == "NodeInsufficientDevice"
    assert fit(big, req(2, 1000)) == (
        False,
        [ContainerDevice("big", "NVIDIA", 1000, 0)],
        "1/1 AllocatedCardsInsufficientRequest",
    )


def test_s3_fragmented_memory_refuses() -> None:
    # 2 × 10000 MiB free is 20000 in total, but no single GPU has 16000
    devices = [dev("a", devmem=16000, usedmem=6000, used=1), dev("b", devmem=16000, usedmem=6000, used=1, index=1)]
    result = v.fit_pod(devices, [req(1, 16000)])
    assert not result.ok and result.reason == "2/2 CardInsufficientMemory"
    assert v.NodeSummary.of(devices).gpus_with(16000) == 0
    assert v.NodeSummary.of(devices).gpus_with(10000) == 2


# device_test.go TestFit_Topology*
PAIRS = {
    "dev-0": {"dev-1": 100, "dev-2": 200},
    "dev-1": {"dev-0": 100, "dev-2": 150},
    "dev-2": {"dev-0": 200, "dev-1": 150},
}


def pair_annotation(pairs: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    import json

    return {v.PAIR_SCORE_ANNOTATION: json.dumps([{"uuid": k, "score": s} for k, s in pairs.items()])}


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


# --------------------------------------------------------------------------------------------------------------
# Section 4: device scores and order
# --------------------------------------------------------------------------------------------------------------


def test_s4_device_score() -> None:
    # pkg/scheduler/policy/gpu_policy_test.go TestComputeScore
    zero = dev("z", type="type1", count=0, devcore=0, devmem=0)
    assert v.device_score(zero) == 0.0
    d = dev("d", type="type1", devcore=4, devmem=8192, count=10, used=2, usedcores=1, usedmem=2048)
    assert v.device_score(d) == 7.0
    assert v.device_score(d, req(4, 1024, 0, 1, "type1")) == 11.75  # Nums is ignored: one slot per request
    assert v.device_score(d, req(2, 4096, 50, 2, "type2")) == 7.0  # another type does not count
    e = dev("e", type="type1", devcore=10, devmem=10000, count=10)
    assert v.device_score(e, req(1, 0, 50, 2, "type1")) == 8.0
    # real devices are typed NVIDIA-<model>: the "NVIDIA" request never adds its terms
    real = dev("r", type="NVIDIA-A100", used=2, usedmem=4096, usedcores=50)
    assert v.device_score(real, req(1, 4096, 101, 50)) == v.device_score(real)
    # float32: 10 × (1/3 + 1/3 + 1/3) is 10.0 in float32 arithmetic
    third = dev("t", type="x", count=3, devcore=3, devmem=3, used=1, usedcores=1, usedmem=1)
    assert v.device_score(third) == 10.0
    # custom weights
    w = v.ScoringWeights(slot=0, core=0, memory=2)
    assert v.device_score(d, None, w) == 5.0


def test_s4_scoring_weights() -> None:
    # pkg/util/device_scoring_weights_test.go
    assert v.parse_scoring_weights("slot=1,core=2,memory=3") == v.ScoringWeights(1, 2, 3)
    assert v.parse_scoring_weights(" memory = 3, slot = 1, core = 0 ") == v.ScoringWeights(1, 0, 3)
    for value, message in [
        ("", "expected slot, core, and memory weights"),
        ("slot=1,memory=3", "expected slot, core, and memory weights"),
        ("slot=1,core,memory=3", "expected key=value entries"),
        ("slot=1,core=high,memory=3", '"core" weight must be an integer'),
        ("slot=1,core=-1,memory=3", '"core" weight must not be negative'),
        ("slot=1,bandwidth=2,memory=3", 'unknown weight "bandwidth"'),
        ("slot=1,slot=2,memory=3", 'duplicate "slot" weight'),
        ("slot=0,core=0,memory=0", "at least one weight must be positive"),
    ]:
        with pytest.raises(HamiSchedulingError, match=message):
            v.parse_scoring_weights(value)
    with pytest.raises(HamiSchedulingError):
        v.fit_pod([dev("a")], [req(1)], {"hami.io/device-scoring-weights": "slot=1"})
    bad = v.fit_pod_set({"n": [dev("a")]}, gpu_spec(1), 1, {"hami.io/device-scoring-weights": "x"})
    assert not bad.ok and "expected slot, core, and memory weights" in bad.reason


def pair_less(policy: str, numa_bind: bool, a: tuple[int, int, int, float], b: tuple[int, int, int, float]) -> bool:
    """Less(0, 1) of DeviceUsageList through sort_devices: does a sort strictly before b?"""

    def mk(x: tuple[int, int, int, float], name: str) -> DeviceUsage:
        numa, used, index, _ = x
        return dev(name, numa=numa, used=used, index=index)

    da, db = mk(a, "a"), mk(b, "b")
    forward = [d.info.id for d in v.sort_devices([da, db], [a[3], b[3]], policy, numa_bind)]
    backward = [d.info.id for d in v.sort_devices([db, da], [b[3], a[3]], policy, numa_bind)]
    return forward == ["a", "b"] and backward == ["a", "b"]


# gpu_policy_test.go TestDeviceUsageList_Less: (numa, used, index, score) pairs
LESS_CASES: list[tuple[str, str, bool, tuple[int, int, int, float], tuple[int, int, int, float], bool]] = [
    ("binpack same numa", "binpack", False, (0, 10, 0, 10), (0, 20, 0, 20), True),
    ("binpack score primary", "binpack", False, (1, 10, 0, 10), (0, 20, 0, 20), True),
    ("binpack numa tiebreak", "binpack", False, (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("binpack high score last", "binpack", False, (1, 0, 0, 20), (0, 0, 0, 10), False),
    ("spread higher score first", "spread", False, (0, 10, 0, 10), (0, 20, 0, 20), False),
    ("spread over numa", "spread", False, (1, 0, 0, 20), (0, 0, 0, 10), True),
    ("spread numa tiebreak", "spread", False, (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("binpack+numabind numa primary", "binpack", True, (1, 0, 0, 5), (0, 0, 0, 99), True),
    ("binpack+numabind lower score first", "binpack", True, (0, 0, 0, 10), (0, 0, 0, 20), True),
    ("spread+numabind lower numa first", "spread", True, (0, 0, 0, 5), (1, 0, 0, 99), True),
    ("spread+numabind higher score first", "spread", True, (0, 0, 0, 20), (0, 0, 0, 10), True),
    ("mutex busy first", "mutex", False, (0, 2, 0, 0), (0, 0, 0, 0), True),
    ("mutex idle after busy", "mutex", False, (0, 0, 0, 0), (0, 1, 0, 0), False),
    ("mutex numa tiebreak", "mutex", False, (0, 0, 0, 0), (1, 0, 0, 0), True),
    ("bare numa", "numa", False, (0, 0, 0, 99), (1, 0, 0, 5), True),
    ("bare numa index tiebreak", "numa", False, (0, 0, 3, 10), (0, 0, 1, 20), False),
    ("chain binpack,numa", "binpack,numa", False, (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("chain spread,numa", "spread,numa", False, (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("chain numa,spread numa primary", "numa,spread", False, (1, 0, 0, 5), (0, 0, 0, 99), False),
    ("chain numa,spread then spread", "numa,spread", False, (0, 0, 0, 20), (0, 0, 0, 10), True),
    ("chain mutex,spread", "mutex,spread", False, (0, 5, 0, 10), (0, 0, 0, 20), False),
    ("chain filters only -> spread", "mutex,topology-aware", False, (0, 0, 0, 10), (0, 0, 0, 20), False),
    ("chain index tiebreak", "binpack,numa", False, (0, 0, 5, 10), (0, 0, 2, 10), False),
    ("chain + numabind numa forced", "binpack,spread", True, (0, 0, 0, 99), (1, 0, 0, 5), True),
    ("chain spread,numa + numabind", "spread,numa", True, (0, 0, 0, 20), (0, 0, 0, 10), True),
]


@pytest.mark.parametrize(("name", "policy", "numa_bind", "a", "b", "less"), LESS_CASES, ids=[c[0] for c in LESS_CASES])
def test_s4_less(
    name: str, policy: str, numa_bind: bool, a: tuple[int, int, int, float], b: tuple[int, int, int, float], less: bool
) -> None:
    assert pair_less(policy, numa_bind, a, b) is less


def test_s4_spread_vs_binpack_device_choice() -> None:
    # real device types: the score is current utilisation; Fit takes from the end of the sorted list
    devices = [
        dev("idle", type="NVIDIA-A100", devmem=40960),
        dev("half", type="NVIDIA-A100", devmem=40960, index=1, used=2, usedmem=20480, usedcores=50),
        dev("quarter", type="NVIDIA-A100", devmem=40960, index=2, used=1, usedmem=10240, usedcores=25),
    ]
    r = [req(1, 4096, 101, 10)]
    assert v.fit_pod(devices, r).devices[0][0].uuid == "idle"  # spread (default): least used GPU
    assert v.fit_pod(devices, r, {"hami.io/gpu-scheduler-policy": "binpack"}).devices[0][0].uuid == "half"
    assert v.fit_pod(devices, r, cfg=HamiConfig(gpu_policy="binpack")).devices[0][0].uuid == "half"
    # two GPUs: spread takes the two emptiest, binpack the two fullest
    r2 = [req(2, 4096, 101, 10)]
    assert [d.uuid for d in v.fit_pod(devices, r2).devices[0]] == ["idle", "quarter"]
    assert [d.uuid for d in v.fit_pod(devices, r2, {"hami.io/gpu-scheduler-policy": "binpack"}).devices[0]] == [
        "half",
        "quarter",
    ]
    # mutex only takes idle GPUs
    assert v.fit_pod(devices, r2, {"hami.io/gpu-scheduler-policy": "mutex"}).reason == (
        "1/3 AllocatedCardsInsufficientRequest, 2/3 ExclusiveDeviceAllocateConflict"
    )


def test_s4_float32_ties_decide_order() -> None:
    # 10 × (0/10 + 15/100) and 10 × (1/10 + 5/100) are both 1.5 in float32 but differ in float64; the tie keeps
    # registration order, so spread takes the last device (float64 would rank g1 higher and take g0)
    g0 = dev("g0", index=0, type="NVIDIA-T4", devmem=16384, usedcores=15)
    g1 = dev("g1", index=1, type="NVIDIA-T4", devmem=16384, used=1, usedcores=5)
    assert v.device_score(g0) == v.device_score(g1) == 1.5
    assert v.fit_pod([g0, g1], [req(1, 100, 101, 10)]).devices[0][0].uuid == "g1"


def test_s4_equal_scores_keep_registration_order() -> None:
    # Go's insertion sort is stable for <= 12 devices: identical GPUs stay in order, Fit takes the last
    devices = [dev(f"g{i}", index=i, type="NVIDIA-T4") for i in range(8)]
    assert v.fit_pod(devices, [req(1, 100)]).devices[0][0].uuid == "g7"
    assert v.fit_pod(devices, [req(1, 100)], {"hami.io/gpu-scheduler-policy": "binpack"}).devices[0][0].uuid == "g7"


def test_s4_go_sort_for_many_devices() -> None:
    rnd = random.Random(7)
    for n in (13, 16, 40, 64, 200):
        data = [rnd.randint(0, 5) for _ in range(n)]
        items = list(enumerate(data))
        v._go_sort(items, lambda a, b: a[1] < b[1])
        assert [x for _, x in items] == sorted(data)
        assert sorted(i for i, _ in items) == list(range(n))
    devices = [dev(f"g{i:02d}", index=i, type="NVIDIA-H100", used=i % 3) for i in range(16)]
    scores = [v.device_score(d) for d in devices]
    ordered = v.sort_devices(devices, scores, "spread")
    assert [v.device_score(d) for d in ordered] == sorted(scores, reverse=True)


def test_s4_node_insufficient_and_type_filter() -> None:
    # score_test.go Test_fitInDevices: request more GPUs than the node has
    assert v.fit_pod([dev("a")], [req(2, 100)]).reason == "NodeInsufficientDevice"
    # devices whose type does not contain NVIDIA are not offered to Fit (and not counted in n/m)
    devices = [dev("gpu", type="NVIDIA-T4", usedmem=8192), dev("other", type="Ascend910")]
    assert v.fit_pod(devices, [req(1, 100)]).reason == "1/1 CardInsufficientMemory"


# --------------------------------------------------------------------------------------------------------------
# scoreNode: containers on one node
# --------------------------------------------------------------------------------------------------------------


def two_devices(type: str = "NVIDIA") -> list[DeviceUsage]:
    return [dev("uuid1", index=0, devmem=8000, type=type), dev("uuid2", index=1, devmem=8000, type=type)]


def test_scorenode_app_containers_share_usage() -> None:
    # score_test.go "one node two device one pod two containers use two device with spread, should not in same device"
    result = v.fit_pod(two_devices(), [req(1, 8000, 101, 30), req(1, 1000, 101, 30)])
    assert result.ok
    assert [[d.uuid for d in c] for c in result.devices] == [["uuid2"], ["uuid1"]]
    assert result.node_score == 0.0


def test_scorenode_init_containers_on_fresh_copies() -> None:
    # score_test.go "pod has one init container (uses 1 device) and one regular container"
    result = v.fit_pod(two_devices(), [req(1, 1000, 101, 30), req(1, 1000, 101, 30)], num_init=1)
    assert [[d.uuid for d in c] for c in result.devices] == [["uuid2"], ["uuid2"]]
    # score_test.go "init container requests MORE than app container"
    result = v.fit_pod(two_devices(), [req(2, 1000, 101, 30), req(1, 1000, 101, 30)], num_init=1)
    assert [[d.uuid for d in c] for c in result.devices] == [["uuid2", "uuid1"], ["uuid2"]]
    # an init container bigger than any GPU fails the node (score_test.go "init container requests more memory")
    result = v.fit_pod(two_devices(), [req(1, 9000), req(1, 1000)], num_init=1)
    assert not result.ok and result.failed_container == 0 and result.reason == "2/2 CardInsufficientMemory"


def test_scorenode_init_peak_vs_app_sum_after_bind() -> None:
    # the bound pod is charged max(init peak, app sum) per GPU
    devices = [dev("g", type="NVIDIA-A100", devmem=40000)]
    result = v.fit_pod(devices, [req(1, 30000), req(1, 10000), req(1, 5000)], num_init=1)
    assert result.ok
    usage = v.node_usage([devices[0].info], [PodAllocation(tuple(map(tuple, result.hami_devices)), num_init=1)])
    assert (usage[0].used, usage[0].usedmem) == (2, 30000)
    result = v.fit_pod(devices, [req(1, 10000), req(1, 15000), req(1, 15000)], num_init=1)
    usage = v.node_usage([devices[0].info], [PodAllocation(tuple(map(tuple, result.hami_devices)), num_init=1)])
    assert (usage[0].used, usage[0].usedmem) == (2, 30000)


def test_scorenode_padding_depends_on_device_type() -> None:
    # score_test.go "one pod with three containers, middle container uses one device" (devices typed "NVIDIA")
    requests = [None, req(1, 1000, 101, 30), None]
    result = v.fit_pod([dev("uuid1", devmem=8000)], requests)
    assert result.devices == result.hami_devices == [[], [ContainerDevice("uuid1", "NVIDIA", 1000, 30)], []]
    assert v.encode_pod_devices(result.hami_devices) == ";uuid1,NVIDIA,1000,30:;;"
    # with real NVIDIA-<model> types HAMi pads under the model name, so the NVIDIA list skips those containers
    result = v.fit_pod([dev("uuid1", devmem=8000, type="NVIDIA-A100")], requests)
    assert result.devices == [[], [ContainerDevice("uuid1", "NVIDIA", 1000, 30)], []]
    assert result.hami_devices == [[ContainerDevice("uuid1", "NVIDIA", 1000, 30)]]
    assert v.encode_pod_devices(result.hami_devices) == "uuid1,NVIDIA,1000,30:;"


def test_s5_node_score_and_choice() -> None:
    # score_test.go "one node one device ... but this device before having use": 10 × (5/10 + 50/100 + 4000/8000)
    used = [dev("uuid1", devmem=8000, used=5, usedmem=4000, usedcores=50)]
    assert v.node_score(used) == 15.0
    result = v.fit_pod(used, [req(1, 1000, 101, 30)])
    assert result.ok and result.node_score == 15.0  # the score before this pod
    assert v.node_score([]) == 0.0
    scores = {"a": 5.0, "b": 15.0, "c": 15.0, "d": 1.0}
    assert v.choose_node(scores) == "b"  # binpack: most used; equal scores -> smallest name
    assert v.choose_node(scores, "spread") == "d"
    assert v.choose_node(scores, "Spread") == "b"  # only the exact word "spread" spreads
    assert v.choose_node({}) is None


def test_s5_schedule_pod() -> None:
    nodes = {
        "n1": [dev("a", type="NVIDIA-T4", devmem=16000, used=1, usedmem=8000, usedcores=50)],
        "n2": [dev("b", type="NVIDIA-T4", devmem=16000)],
        "n3": [dev("c", type="NVIDIA-T4", devmem=16000, usedmem=15000, used=1)],
    }
    pod = {"metadata": {"annotations": {}}, "spec": gpu_spec(1, 4000, 20)}
    result = v.schedule_pod(nodes, pod)
    assert result.node == "n1" and result.failed_nodes == {"n3": "1/1 CardInsufficientMemory"}
    spread = {"metadata": {"annotations": {"hami.io/node-scheduler-policy": "spread"}}, "spec": gpu_spec(1, 4000, 20)}
    assert v.schedule_pod(nodes, spread).node == "n2"
    assert v.schedule_pod(nodes, {"spec": {"containers": [container({})]}}).passthrough
    assert v.filter_failure_messages(
        {"n3": "1/1 CardInsufficientMemory", "n4": "1/2 CardInsufficientMemory, 1/2 CardNotHealth"}
    ) == [
        "2 nodes CardInsufficientMemory(n3,n4)",
        "1 nodes CardNotHealth(n4)",
    ]
    assert v.parse_reason("NodeInsufficientDevice") == {}


# --------------------------------------------------------------------------------------------------------------
# Section 6: health
# --------------------------------------------------------------------------------------------------------------


def test_s6_handshake() -> None:
    now = datetime(2024, 5, 1, 12, 0, 0)
    first = v.check_handshake(None, now, 0)
    assert first == v.HandshakeCheck(True, True, "Requesting_2024-05-01 12:00:00")
    assert v.check_handshake("Reported 2024-05-01", now, 0).write is not None  # old format: re-request
    assert v.check_handshake("Requesting", now, 0) == v.HandshakeCheck(True, False)
    assert v.check_handshake("Requesting_garbage", now, 0) == v.HandshakeCheck(True, False)
    recent = "Requesting_" + (now - timedelta(seconds=30)).strftime("%Y-%m-%d %H:%M:%S")
    assert v.check_handshake(recent, now, 0) == v.HandshakeCheck(True, False)
    old = "Requesting_" + (now - timedelta(seconds=61)).strftime("%Y-%m-%d %H:%M:%S")
    assert v.check_handshake(old, now, 4) == v.HandshakeCheck(True, False)
    assert v.check_handshake(old, now, 0) == v.HandshakeCheck(False, False)


def test_s6_nvidia_health_tracker() -> None:
    now = datetime(2024, 5, 1, 12, 0, 0)
    old = "Requesting_2024-05-01 11:00:00"
    t = v.NvidiaHealthTracker()
    annos = {v.HANDSHAKE_ANNOTATION: old, v.REGISTER_ANNOTATION: "[...]"}
    assert t.check("n", annos, 0, now) == v.HandshakeCheck(False, False)  # never reported, expired, nothing allocatable
    assert t.check("n", annos, 4, now) == v.HandshakeCheck(True, True)  # count changed
    assert t.check("n", annos, 4, now) == v.HandshakeCheck(True, False)
    assert t.check("n", {**annos, v.REGISTER_ANNOTATION: "[..]"}, 4, now) == v.HandshakeCheck(True, True)
    assert t.check("n", annos, 0, now).healthy is False  # dropped to 0 after being reported
    t.node_deleted("n")
    assert t.reported_gpus == {}


# --------------------------------------------------------------------------------------------------------------
# The placement engine: fit_pod_set
# --------------------------------------------------------------------------------------------------------------


def a100(uuid: str, index: int, **kw: Any) -> DeviceUsage:
    return dev(uuid, index=index, devmem=40960, type="NVIDIA-A100-SXM4-40GB", numa=index // 4, **kw)


def gpu_node(name: str, gpus: int = 8, busy: int = 0, mem: int = 0, cores: int = 0) -> list[DeviceUsage]:
    return [
        a100(
            f"{name}-g{i}",
            i,
            used=1 if i < busy else 0,
            usedmem=mem if i < busy else 0,
            usedcores=cores if i < busy else 0,
        )
        for i in range(gpus)
    ]


def test_podset_places_pods_binpack() -> None:
    nodes = {"w1": gpu_node("w1"), "w2": gpu_node("w2", busy=2, mem=8000, cores=20), "w3": gpu_node("w3")}
    result = v.fit_pod_set(nodes, gpu_spec(2, 24000, 30), 4)
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
    result = v.fit_pod_set(nodes, gpu_spec(1, 8000, 10), 3, {"hami.io/node-scheduler-policy": "spread"})
    assert result.ok
    assert result.nodes == ["w1", "w3", "w1"]  # the least used node each time; equal scores by name


def test_podset_failure_reason() -> None:
    nodes = {
        "worker-gpu-1": gpu_node("worker-gpu-1", gpus=4, busy=4, mem=20000),
        "worker-gpu-3": gpu_node("worker-gpu-3", gpus=4, busy=3, mem=20000),
    }
    result = v.fit_pod_set(nodes, gpu_spec(2, 24000, 30), 1)
    assert not result.ok and result.placed == 0
    assert result.reason.startswith(
        "no node has 2 GPUs with 24000 MiB and 30% cores free each; best node worker-gpu-3 has 1 (HAMi: "
    )
    assert "CardInsufficientMemory" in result.reason
    # partial placement is reported
    result = v.fit_pod_set(nodes, gpu_spec(1, 24000, 30), 3)
    assert not result.ok and result.placed == 1 and result.nodes == ["worker-gpu-3"]
    assert result.reason.startswith(
        "placed 1 of 3 pods; no node has 1 GPU with 24000 MiB and 30% cores free; best node"
    )
    # more GPUs than any node has
    result = v.fit_pod_set(nodes, gpu_spec(8, 100, 10), 1)
    assert result.reason == "no node has 8 GPUs; the largest has 4"
    # whole cards (the webhook makes a bare nvidia.com/gpu exclusive)
    result = v.fit_pod_set(nodes, gpu_spec(2), 1)
    assert result.reason.startswith(
        "no node has 2 idle GPUs with all of its memory free each; best node worker-gpu-3 has 1"
    )
    assert v.fit_pod_set({}, gpu_spec(1), 1).reason == "no GPU nodes"


def test_podset_webhook_exclusive_and_trivial_cases() -> None:
    nodes = {"w": gpu_node("w", gpus=2, busy=1, mem=1000, cores=10)}
    assert not v.fit_pod_set(nodes, gpu_spec(2), 1).ok  # bare gpu: exclusive whole cards
    assert v.fit_pod_set(nodes, gpu_spec(2), 1, webhook=False).ok is False  # whole memory still needs an idle card
    assert v.fit_pod_set(nodes, gpu_spec(2, 1000, 10), 1).ok
    no_gpu = v.fit_pod_set(nodes, {"containers": [container({"cpu": "1"})]}, 3)
    assert no_gpu.ok and no_gpu.nodes == [] and no_gpu.reason == "no HAMi GPU request"
    assert v.fit_pod_set(nodes, gpu_spec(1, 100), 0).ok


def test_podset_quota_and_selectors() -> None:
    nodes = {"w": gpu_node("w", gpus=4)}
    quota = NamespaceQuota(mem_limit=20000)
    result = v.fit_pod_set(nodes, gpu_spec(1, 8000, 10), 3, quota=quota)
    assert not result.ok and result.placed == 2 and "ResourceQuotaNotFit" in result.reason
    annos = {"nvidia.com/use-gputype": "H100"}
    result = v.fit_pod_set(nodes, gpu_spec(1, 8000, 10), 1, annos)
    assert not result.ok and "4/4 CardTypeMismatch" in result.reason


def test_podset_inventory_reuse_and_apply() -> None:
    nodes = {"w1": gpu_node("w1", gpus=2), "w2": gpu_node("w2", gpus=2, busy=1, mem=4000, cores=10)}
    inv = v.GpuInventory(nodes)
    prepared = v.prepare_pod(gpu_spec(1, 30000, 50))
    first = v.fit_pod_set(inv, prepared, 2)
    assert first.ok and first.nodes == ["w2", "w2"]
    assert v.fit_pod_set(inv, prepared, 2).nodes == first.nodes  # the inventory is not mutated
    inv2 = inv.apply(first)
    assert inv2.summary("w2").gpus_with(30000) == 0
    second = v.fit_pod_set(inv2, prepared, 2)
    assert second.ok and second.nodes == ["w1", "w1"]
    assert not v.fit_pod_set(inv2.apply(second), prepared, 1).ok
    assert 0 < inv2.utilisation() < 1


def test_node_summary() -> None:
    devices = [
        a100("a", 0),
        a100("b", 1, used=1, usedmem=30000, usedcores=50),
        a100("c", 2, health=False),
        a100("d", 3, used=10),
    ]
    s = v.NodeSummary.of(devices)
    assert (s.gpus, len(s.free), s.max_free_mem, s.max_free_cores, s.idle_gpus) == (4, 2, 40960, 100, 1)
    assert s.gpus_with(10000) == 2 and s.gpus_with(20000) == 1
    assert s.fitting_gpus(req(1, 10000, 101, 100)) == 1  # exclusive: only the idle GPU
    assert s.fitting_gpus(req(1, 10000), mutex=True) == 1
    assert s.may_fit(req(2, 10000)) and not s.may_fit(req(3, 100)) and not s.may_fit(req(1, 41000))
    assert not v.NodeSummary.of(devices, frozenset({"a"})).may_fit(req(1, 20000))


def schedule_sequentially(
    nodes: dict[str, list[DeviceUsage]], spec: dict[str, Any], annos: dict[str, str], count: int
) -> list[str | None]:
    """The reference: HAMi's Filter pod by pod, with usage rebuilt from the bind annotations of earlier pods."""
    infos = {name: [d.info for d in devices] for name, devices in nodes.items()}
    allocations: dict[str, list[PodAllocation]] = {name: [] for name in nodes}
    base = {name: [(d.used, d.usedmem, d.usedcores) for d in devices] for name, devices in nodes.items()}
    mutated = v.mutate_pod({"metadata": {"annotations": annos}, "spec": spec})
    chosen: list[str | None] = []
    for _ in range(count):
        current = {}
        for name in nodes:
            usage = v.node_usage(infos[name], allocations[name])
            current[name] = [
                DeviceUsage(u.info, u.used + b[0], u.usedmem + b[1], u.usedcores + b[2])
                for u, b in zip(usage, base[name], strict=True)
            ]
        result = v.schedule_pod(current, mutated)
        chosen.append(result.node)
        if result.node is None:
            break
        assert result.fit is not None
        bound = v.bind_annotations(result.node, result.fit.hami_devices, 0)
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
    result = v.fit_pod_set(nodes, spec, count, annos)
    placed = [n for n in reference if n is not None]
    assert result.nodes == placed
    assert result.ok is (len(placed) == count)
