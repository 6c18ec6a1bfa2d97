"""Tests for :mod:`dispatcher.placement.hami.requests`: section 1, pod resources to per-container requests.

Expected values come from ``/work/shared/hami-rules.md`` (section numbers in test names) or from HAMi's table
tests at commit 4707fb02; a comment names the Go file each ported case comes from.
"""

from __future__ import annotations

from typing import Any

import pytest
from hamibuild import container, req

from dispatcher.placement.hami.devices import ContainerRequest, HamiConfig
from dispatcher.placement.hami.requests import container_request, pod_requests

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
    assert container_request(container(limits, requests)) == want


def test_s1_memory_factor() -> None:
    # device_test.go TestGenerateResourceRequests_MemoryFactor
    cfg = HamiConfig(memory_factor=2)
    assert container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024}), cfg) == req(1, 2048, 101)
    assert container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "1Gi"}), cfg) is None
    # a factor of 0 counts as 1
    cfg0 = HamiConfig(memory_factor=0)
    assert container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024}), cfg0) == req(1, 1024, 101)


def test_s1_default_memory() -> None:
    # device_test.go TestGenerateResourceRequests_DefaultMemory
    cfg = HamiConfig(default_memory=512)
    want = req(1, 512, 101)
    assert container_request(container({"nvidia.com/gpu": 1}), cfg) == want
    assert container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 0}), cfg) == want
    assert container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 0}), cfg) == want


def test_s1_quantity_forms() -> None:
    # gpumem is read as MiB from the canonical quantity: 1.0 is 1, 1.5Gi is 1610612736 (still within int32)
    assert container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "1.0"})) == req(1, 1, 101)
    assert container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "1.5Gi"})) == req(1, 1610612736, 101)
    assert container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "500m"})) is None
    assert container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": -1})) is None
    # a fractional or zero GPU count is no request at all
    assert container_request(container({"nvidia.com/gpu": "0.5"})) is None
    assert container_request(container({"nvidia.com/gpu": 0})) is None
    # gpucores above 100 are not clamped in the request (Fit clamps them)
    assert container_request(container({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 150})) == req(1, 0, 100, 150)
    # limits win over requests
    r = container_request(container({"nvidia.com/gpu": 2}, {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100}))
    assert r == req(2, 100, 101)


def test_s1_pod_requests_init_first() -> None:
    spec = {
        "initContainers": [container({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10}, name="i")],
        "containers": [container({}, name="a"), container({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 20}, name="b")],
    }
    assert pod_requests(spec) == [req(1, 10), None, req(2, 20)]
