"""A worker's informers list independently: an admitted Workload may arrive before its ClusterQueue."""

from __future__ import annotations

from typing import Any

from dispatcher.placement.worker import WorkerCapacity

Obj = dict[str, Any]


def _cluster_queue() -> Obj:
    flavor = {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": "8"}]}
    return {
        "metadata": {"name": "team"},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [flavor]}]},
    }


def _admitted(name: str, cpu: str) -> Obj:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "ownerReferences": [{"uid": f"job-{name}", "controller": True}],
        },
        "spec": {"queueName": "user-queue"},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {
                "clusterQueue": "team",
                "podSetAssignments": [
                    {"name": "main", "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": cpu}, "count": 1}
                ],
            },
        },
    }


def _used(w: WorkerCapacity) -> int:
    return sum(int(row["used"]) for row in w.quota_report() if row["resource"] == "cpu")


def test_an_admitted_workload_seen_before_its_cluster_queue_counts_once_the_queue_arrives() -> None:
    w = WorkerCapacity("worker-1")
    w.set_flavor({"metadata": {"name": "default-flavor"}, "spec": {}})
    assert w.workload_event("ADDED", _admitted("early", "3")) == "job-early"  # no KeyError: kept aside
    assert not w.admitted("default/early")
    w.set_cluster_queue(_cluster_queue())
    assert w.admitted("default/early") and _used(w) == 3000
    w.workload_event("ADDED", _admitted("gone-early", "2"))
    assert _used(w) == 5000
    w.workload_event("DELETED", _admitted("gone-early", "2"))
    assert _used(w) == 3000


def test_a_workload_deleted_before_its_cluster_queue_arrives_is_not_counted() -> None:
    w = WorkerCapacity("worker-1")
    w.set_flavor({"metadata": {"name": "default-flavor"}, "spec": {}})
    w.workload_event("ADDED", _admitted("brief", "4"))
    w.workload_event("DELETED", _admitted("brief", "4"))
    w.set_cluster_queue(_cluster_queue())
    assert not w.admitted("default/brief") and _used(w) == 0


def test_a_cluster_queue_status_write_changes_nothing_and_a_spec_change_does() -> None:
    w = WorkerCapacity("worker-1")
    w.set_flavor({"metadata": {"name": "default-flavor"}, "spec": {}})
    assert w.set_cluster_queue(_cluster_queue()) is True
    w.workload_event("ADDED", _admitted("running", "3"))
    version = w.version
    # Kueue writes the queue's status on every admission: the verdicts on this worker stay valid.
    status_only = {**_cluster_queue(), "status": {"admittedWorkloads": 1, "flavorsUsage": [{"name": "default-flavor"}]}}
    assert w.set_cluster_queue(status_only) is False
    assert w.version == version and _used(w) == 3000
    # A new quota is a change: every verdict is looked at again.
    bigger = _cluster_queue()
    bigger["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "16"
    assert w.set_cluster_queue(bigger) is True
    assert w.version > version
    assert w.set_cluster_queue(bigger) is False
