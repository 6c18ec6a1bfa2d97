"""Tests for :mod:`dispatcher.placement.hami.webhook`: section 1, HAMi's admission webhook and resource problems.

Expected values come from ``/work/shared/hami-rules.md`` (section numbers in test names) or from HAMi's table
tests at commit 4707fb02; a comment names the Go file each ported case comes from.
"""

from __future__ import annotations

from typing import Any

import pytest
from hamibuild import container, gpu_spec, req

from dispatcher.placement.hami.devices import HamiConfig
from dispatcher.placement.hami.names import HamiAdmissionError
from dispatcher.placement.hami.quota import NamespaceQuota, admission_quota_fits
from dispatcher.placement.hami.requests import container_request
from dispatcher.placement.hami.webhook import hami_problem, hami_resource_problems, is_hami_request, mutate_pod

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
    out = mutate_pod(pod, cfg)
    got = (out["spec"]["containers"][0]["resources"].get("limits") or {}).get(cfg.resource_cores)
    assert got == core


def test_s1_webhook_bare_gpu_becomes_exclusive_card() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": [container({"nvidia.com/gpu": 1})]}}
    out = mutate_pod(pod)
    limits = out["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": 1, "nvidia.com/gpucores": "100"}
    assert container_request(out["spec"]["containers"][0]) == req(1, 0, 100, 100)
    assert out["spec"]["schedulerName"] == "hami-scheduler"
    assert "schedulerName" not in pod["spec"]  # the input is untouched
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}


def test_s1_webhook_adds_gpu_count() -> None:
    # memory or cores without gpu gets gpu = defaultGPUNum; with memory set, no core injection
    out = mutate_pod({"spec": {"containers": [container({"nvidia.com/gpumem": 3000})]}})
    assert out["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpumem": 3000, "nvidia.com/gpu": "1"}
    out = mutate_pod({"spec": {"containers": [container({"nvidia.com/gpucores": 30})]}}, HamiConfig(default_gpu_num=2))
    assert out["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpucores": 30, "nvidia.com/gpu": "2"}
    # only limits count for that step (mutateContainerResource)
    out = mutate_pod({"spec": {"containers": [container(None, {"nvidia.com/gpumem": 3000})]}})
    assert "nvidia.com/gpu" not in (out["spec"]["containers"][0]["resources"].get("limits") or {})
    assert "schedulerName" not in out["spec"]


@pytest.mark.parametrize(("pct", "error"), [(0, False), (100, False), (101, True), (150, True)])
def test_s1_webhook_percentage_validation(pct: int, error: bool) -> None:
    # device_test.go Test_MutateAdmission_MemoryPercentageValidation
    pod = {"spec": {"containers": [container({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": pct}, name="test")]}}
    if error:
        with pytest.raises(HamiAdmissionError) as exc:
            mutate_pod(pod)
        assert exc.value.code == 500
        assert exc.value.message == (
            f"invalid nvidia.com/gpumem-percentage value {pct} in container test: must be an integer between 0 and 100"
        )
    else:
        mutate_pod(pod)


def test_s1_webhook_pod_rules() -> None:
    gpu = container({"nvidia.com/gpu": 1}, name="g")
    with pytest.raises(HamiAdmissionError, match="pod has no containers"):
        mutate_pod({"spec": {"containers": []}})
    priv = dict(container({}, name="root"), securityContext={"privileged": True})
    with pytest.raises(HamiAdmissionError, match="container root is privileged") as exc:
        mutate_pod({"spec": {"initContainers": [priv], "containers": [gpu]}})
    assert exc.value.code == 403
    mutate_pod({"spec": {"containers": [priv]}})  # privileged without GPU is fine
    with pytest.raises(HamiAdmissionError, match="pod has node assigned"):
        mutate_pod({"spec": {"nodeName": "n1", "containers": [gpu]}})
    # a pod aimed at another scheduler is left alone; default-scheduler is overwritten
    other = mutate_pod({"spec": {"schedulerName": "volcano", "containers": [gpu]}})
    assert other["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    default = mutate_pod({"spec": {"schedulerName": "default-scheduler", "containers": [gpu]}})
    assert default["spec"]["schedulerName"] == "hami-scheduler"
    # priority env, runtime class
    cfg = HamiConfig(runtime_class_name="nvidia", gpu_core_policy="force")
    out = mutate_pod({"spec": {"containers": [container({"nvidia.com/gpu": 1, "nvidia.com/priority": 1})]}}, cfg)
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
    mutate_pod(ok, quota=quota)
    mutate_pod(whole, quota=quota)
    with pytest.raises(HamiAdmissionError, match="exceeding resource quota"):
        mutate_pod(too_much, quota=quota)
    # init containers count by their largest, app containers by their sum
    spec = {
        "initContainers": [container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 7000})],
        "containers": [container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}) for _ in range(2)],
    }
    assert admission_quota_fits(spec, NamespaceQuota(mem_limit=7000))
    assert not admission_quota_fits(spec, NamespaceQuota(mem_limit=6999))


def test_s1_is_hami_request() -> None:
    assert is_hami_request(gpu_spec(1))
    assert not is_hami_request({"containers": [container({"cpu": "1"})]})
    assert not is_hami_request(gpu_spec(1, "16Gi"))
    only_mem = {"containers": [container({"nvidia.com/gpumem": 1000})]}
    assert is_hami_request(only_mem)  # the webhook adds nvidia.com/gpu
    assert not is_hami_request(only_mem, webhook=False)


def test_s1_hami_resource_problems() -> None:
    assert hami_resource_problems(gpu_spec(1, 16000, 50)) == []
    assert hami_problem(gpu_spec(1)) is None
    (p,) = hami_resource_problems(gpu_spec(1, "16Gi"))
    assert p.startswith("nvidia.com/gpumem must be a plain integer in MiB, got '16Gi'")
    assert "without a GPU" in p
    (p,) = hami_resource_problems(gpu_spec(1, "2Ki"))
    assert p.startswith("nvidia.com/gpumem must be a plain integer in MiB, got '2Ki'") and "2048 MiB" in p
    (p,) = hami_resource_problems(gpu_spec("0.5"))
    assert p.startswith("nvidia.com/gpu must be a whole number of GPUs, got '0.5'")
    (p,) = hami_resource_problems(gpu_spec(1, pct=150))
    assert p.startswith("nvidia.com/gpumem-percentage must be between 0 and 100, got '150'")
    (p,) = hami_resource_problems(gpu_spec(1, cores=150))
    assert p.startswith("nvidia.com/gpucores must be at most 100, got '150'")
    assert hami_problem(gpu_spec(1, "16Gi")) == hami_resource_problems(gpu_spec(1, "16Gi"))[0]
