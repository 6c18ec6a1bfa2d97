"""Tests for :mod:`dispatcher.placement.kueue.workloads`: pod requests, admitted workloads, queue order.

The cases ported from Kueue's own Go tests are in tests/conformance/kueue/ (one file per Kueue test file); the
builders they share with these tests (``make_cq``, ``fq``, ``ps``, ...) are in tests/conformance/kueue/kueuebuild.py.
"""

from __future__ import annotations

import math
from typing import Any

from kueuebuild import Gi, podset_obj

from dispatcher.placement.kueue.preemption import candidates_order_key
from dispatcher.placement.kueue.specs import QueueingStrategy
from dispatcher.placement.kueue.workloads import (
    AdmittedWorkload,
    pending_order_key,
    pod_requests,
    queue_order_timestamp,
)


def test_pod_requests_follow_kubernetes_rules() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}},
        ],
        "initContainers": [
            {"name": "init", "resources": {"requests": {"cpu": "4"}}},
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    assert pod_requests(spec) == {"cpu": 4100, "memory": 2 * Gi, "nvidia.com/gpu": 1}


def test_admitted_workload_from_object() -> None:
    wl = {
        "metadata": {"name": "job-1", "namespace": "ns", "uid": "u-1", "creationTimestamp": "2024-05-01T10:00:00Z"},
        "spec": {"priority": 7, "podSets": [podset_obj("workers", 4, {"cpu": "1"})]},
        "status": {
            "admission": {
                "clusterQueue": "team",
                "podSetAssignments": [
                    {
                        "name": "workers",
                        "flavors": {"cpu": "default", "nvidia.com/gpu": "a100"},
                        "resourceUsage": {"cpu": "4", "nvidia.com/gpu": "4"},
                        "count": 4,
                    }
                ],
            },
            "reclaimablePods": [{"name": "workers", "count": 1}],
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2024-05-01T10:05:00Z"},
            ],
        },
    }
    got = AdmittedWorkload.from_object(wl)
    assert got.key == "ns/job-1"
    assert got.cluster_queue == "team"
    assert got.priority == 7
    assert got.usage == {("default", "cpu"): 3_000, ("a100", "nvidia.com/gpu"): 3}
    assert got.quota_reserved_time is not None
    assert got.quota_reserved_time - got.queue_order_time == 300
    assert not got.evicted
    assert got.uid == "u-1"


def test_queue_order_timestamp_uses_admission_check_eviction() -> None:
    wl: dict[str, Any] = {"metadata": {"creationTimestamp": "2024-05-01T10:00:00Z"}, "status": {"conditions": []}}
    created = queue_order_timestamp(wl)
    wl["status"]["conditions"].append(
        {
            "type": "Evicted",
            "status": "True",
            "reason": "PodsReadyTimeout",
            "lastTransitionTime": "2024-05-01T11:00:00Z",
        }
    )
    assert queue_order_timestamp(wl) == created
    assert queue_order_timestamp(wl, pods_ready_eviction_timestamp=True) == created + 3600
    wl["status"]["conditions"][0]["reason"] = "AdmissionCheck"
    assert queue_order_timestamp(wl) == created + 3600


def test_pending_order_and_queueing_strategies() -> None:
    pending = [("a", 0, 5.0), ("b", 10, 9.0), ("c", 10, 1.0), ("d", 0, 1.0)]
    ordered = sorted(pending, key=lambda p: pending_order_key(p[1], p[2], p[0]))
    assert [p[0] for p in ordered] == ["c", "b", "d", "a"]
    assert QueueingStrategy("StrictFIFO").head_blocks
    assert not QueueingStrategy("BestEffortFIFO").head_blocks
    assert math.isinf(candidates_order_key(AdmittedWorkload("x", "q", {}), "q")[3])
