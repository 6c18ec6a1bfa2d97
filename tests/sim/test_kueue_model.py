"""Pure pieces of the simulated Kueue: names, conditions, pod set info, requests, configuration, queues."""

from __future__ import annotations

from typing import Any

import yaml

from kubesim.controllers.kueue_jobs import BatchJobIntegration
from kubesim.controllers.kueue_model import (
    KueueConfig,
    PodSetInfo,
    PodSetMergeError,
    condition,
    pod_set_request,
    preemption_message,
    resource_requests_status,
    set_condition,
    set_quota_reservation,
    unset_quota_reservation,
    workload_name,
)
from kubesim.topology import HAMI_KUEUE_CONFIG

Obj = dict[str, Any]

LONG = (
    "marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-sub-department-social-media-"
    "engagement-tracker-and-analytics-dashboard-v2-final-revision-by-engineering-team-lead-senior-architect-"
    "validation-checked-approved-by-legal-and-ops-dept"
)


def test_workload_names_match_kueues_own_test_vectors() -> None:
    assert workload_name("name", "uid", "Job", "batch") == "job-name-ef3a1"
    got = workload_name(LONG, "uid", "Job", "batch")
    assert got.endswith("-218b8") and len(got) == 253
    assert got.startswith("job-marketing-campaign-autumn-2024")


def test_set_condition_moves_transition_time_only_on_status_change() -> None:
    status: Obj = {}
    assert set_condition(status, {"type": "X", "status": "False", "reason": "A", "message": "m"}, "t1")
    assert not set_condition(status, {"type": "X", "status": "False", "reason": "A", "message": "m"}, "t2")
    assert set_condition(status, {"type": "X", "status": "False", "reason": "B", "message": "m"}, "t3")
    assert status["conditions"][0]["lastTransitionTime"] == "t1"
    assert set_condition(status, {"type": "X", "status": "True", "reason": "C", "message": "m"}, "t4")
    assert status["conditions"][0]["lastTransitionTime"] == "t4"


def test_quota_reservation_round_trip() -> None:
    wl: Obj = {
        "metadata": {"generation": 1},
        "status": {
            "conditions": [
                {
                    "type": "Evicted",
                    "status": "True",
                    "reason": "Preempted",
                    "message": "gone",
                    "lastTransitionTime": "t0",
                }
            ]
        },
    }
    set_quota_reservation(wl, {"clusterQueue": "cq", "podSetAssignments": []}, "t1")
    qr, ad, ev = condition(wl, "QuotaReserved"), condition(wl, "Admitted"), condition(wl, "Evicted")
    assert qr is not None and (qr["status"], qr["reason"], qr["message"]) == (
        "True",
        "QuotaReserved",
        "Quota reserved in ClusterQueue cq",
    )
    assert ad is not None and (ad["status"], ad["reason"], ad["message"]) == (
        "True",
        "Admitted",
        "The workload is admitted",
    )
    assert ev is not None and (ev["status"], ev["reason"], ev["message"]) == (
        "False",
        "QuotaReserved",
        "Previously: gone",
    )
    assert unset_quota_reservation(wl, "PendingEvaluation", "why", "t2")
    assert "admission" not in wl["status"]
    ad = condition(wl, "Admitted")
    assert ad is not None and (ad["status"], ad["reason"]) == ("False", "NoReservation")


def test_preemption_message() -> None:
    assert preemption_message("u1", "", "InCohortReclamation", "/org/a", "/org/b") == (
        "Preempted to accommodate a workload (UID: u1, JobUID: UNKNOWN) due to reclamation within the cohort; "
        "preemptor path: /org/a; preemptee path: /org/b"
    )


def test_config_from_the_configmap_yaml() -> None:
    config = KueueConfig.from_yaml(
        yaml.safe_dump(
            {
                **HAMI_KUEUE_CONFIG,
                "resources": {**HAMI_KUEUE_CONFIG["resources"], "excludeResourcePrefixes": ["example.com/"]},
            }
        )
    )
    assert [t.input for t in config.transformations] == ["nvidia.com/gpucores", "nvidia.com/gpumem"]
    assert config.excluded_prefixes == ("example.com/",)
    assert KueueConfig.from_yaml("not: [valid") == KueueConfig()
    assert KueueConfig.from_yaml(None) == KueueConfig()


def test_pod_set_request_applies_transformations_and_exclusions() -> None:
    config = KueueConfig.from_yaml(
        yaml.safe_dump(
            {
                **HAMI_KUEUE_CONFIG,
                "resources": {**HAMI_KUEUE_CONFIG["resources"], "excludeResourcePrefixes": ["example.com/"]},
            }
        )
    )
    pod_set = {
        "name": "main",
        "count": 3,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "resources": {
                            "limits": {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000", "example.com/foo": "1"},
                            "requests": {"cpu": "500m"},
                        },
                    }
                ]
            }
        },
    }
    req = pod_set_request(pod_set, 3, config)
    assert dict(req.requests) == {"cpu": 500, "nvidia.com/gpu": 2, "nvidia.com/total-gpumem": 2000}
    assert resource_requests_status([req]) == [
        {"name": "main", "resources": {"cpu": "1500m", "nvidia.com/gpu": "6", "nvidia.com/total-gpumem": "6k"}}
    ]


def test_pod_set_info_merge_and_restore() -> None:
    template: Obj = {"metadata": {"labels": {"app": "x"}}, "spec": {"nodeSelector": {"zone": "a"}}}
    original = PodSetInfo.from_pod_set({"name": "main", "count": 1, "template": template})
    flavor: Obj = {"spec": {"nodeLabels": {"pool": "gpu"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}}
    info = PodSetInfo.from_assignment(
        {"name": "main", "flavors": {"cpu": "f", "memory": "f"}, "count": 1}, {"count": 1}, {"f": flavor}
    )
    info.labels["kueue.x-k8s.io/podset"] = "main"
    running: Obj = {"metadata": {"labels": {"app": "x"}}, "spec": {"nodeSelector": {"zone": "a"}}}
    info.merge_into(running)
    assert running["spec"]["nodeSelector"] == {"zone": "a", "pool": "gpu"}
    assert running["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert running["metadata"]["labels"] == {"app": "x", "kueue.x-k8s.io/podset": "main"}
    assert original.restore_into(running)
    assert running == {"metadata": {"labels": {"app": "x"}}, "spec": {"nodeSelector": {"zone": "a"}}}
    conflicting: Obj = {"metadata": {}, "spec": {"nodeSelector": {"pool": "cpu"}}}
    try:
        info.merge_into(conflicting)
    except PodSetMergeError as err:
        assert "conflict for nodeSelector" in str(err)
    else:
        raise AssertionError("a conflicting node selector must fail")


def test_batch_job_integration() -> None:
    integration = BatchJobIntegration()
    job: Obj = {
        "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "parallelism": 4,
            "completions": 2,
            "template": {
                "metadata": {
                    "labels": {
                        "job-name": "j",
                        "controller-uid": "u",
                        "batch.kubernetes.io/job-name": "j",
                        "batch.kubernetes.io/controller-uid": "u",
                        "app": "a",
                    }
                },
                "spec": {},
            },
        },
    }
    integration.default(job)
    assert job["spec"]["suspend"] is True
    [ps] = integration.pod_sets(job)
    assert ps["count"] == 2 and ps["name"] == "main"
    assert ps["template"]["metadata"]["labels"] == {"batch.kubernetes.io/job-name": "j", "app": "a"}
    assert ps["topologyRequest"] == {"podIndexLabel": "batch.kubernetes.io/job-completion-index"}
    other: Obj = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}}, "spec": {"managedBy": "example.com/x"}}
    integration.default(other)
    assert "suspend" not in other["spec"]
    job["status"] = {"succeeded": 1}
    job["spec"]["parallelism"] = 3
    job["spec"]["completions"] = 3
    assert integration.reclaimable_pods(job) == [{"name": "main", "count": 1}]
    job["status"] = {"conditions": [{"type": "Failed", "status": "True", "message": "boom"}]}
    assert integration.finished(job) == ("boom", False, True)


def test_cluster_queue_queue_orders_parks_and_blocks() -> None:
    from kubesim.controllers.kueue import ClusterQueueQueue

    q = ClusterQueueQueue(strict=False)
    q.add(("ns", "low"), (0, 1.0, "1"))
    q.add(("ns", "high"), (-10, 2.0, "2"))
    q.add(("ns", "low2"), (0, 1.0, "3"))
    assert q.pop_head() == ("ns", "high")
    q.requeue(("ns", "high"))
    assert q.pop_head() == ("ns", "low")
    q.requeue(("ns", "low"))
    assert q.pop_head() == ("ns", "low2")
    assert q.pop_head() is None
    q.requeue_all()
    assert q.pop_head() == ("ns", "high")
    strict = ClusterQueueQueue(strict=True)
    strict.add(("ns", "a"), (0, 1.0, "1"))
    strict.add(("ns", "b"), (0, 2.0, "2"))
    assert strict.pop_head() == ("ns", "a")
    strict.requeue(("ns", "a"))
    assert strict.blocked
    strict.requeue_all()
    assert strict.pop_head() == ("ns", "a")
