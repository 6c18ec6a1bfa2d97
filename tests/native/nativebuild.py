"""Manager Workloads as Kueue v0.17.0 writes them (the shapes seen on the real rig), for the native-mode tests."""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]
#: MultiKueue's workerLostTimeout and the dispatcher's lostTimeout on the test rig (short: a failover test waits it).
LOST_TIMEOUT = 20
T0 = "2026-01-01T10:00:00Z"
T1 = "2026-01-01T10:05:00Z"


def workload(
    name: str = "job-train-1a2b3",
    *,
    uid: str = "wl-uid-1",
    job: str = "train",
    cpu: str = "1",
    count: int = 2,
    check: str = "Pending",
    reserved: str | None = T0,
    cluster: str | None = None,
    nominated: list[str] | None = None,
    evicted: bool = False,
    finished: str | None = None,
    check_message: str = "",
    rv: str = "100",
) -> Obj:
    """A manager Workload of a managedBy Job in team-a, its MultiKueue check ``multikueue`` in state ``check``;
    ``reserved``: the QuotaReserved condition's time (None: no quota reserved)."""
    conditions: list[Obj] = []
    status: Obj = {
        "admissionChecks": [{"name": "multikueue", "state": check, "message": check_message, "lastTransitionTime": T0}],
    }
    if reserved is not None:
        status["admission"] = {
            "clusterQueue": "team-a",
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": count,
                    "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
                    "resourceUsage": {"cpu": str(int(cpu) * count), "memory": f"{count}Gi"},
                }
            ],
        }
        conditions.append(
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "Quota reserved in ClusterQueue team-a",
                "lastTransitionTime": reserved,
                "observedGeneration": 1,
            }
        )
    if evicted:
        conditions.append(
            {
                "type": "Evicted",
                "status": "True",
                "reason": "AdmissionCheck",
                "message": "At least one admission check is false",
                "lastTransitionTime": T1,
            }
        )
    if finished:
        conditions.append(
            {"type": "Finished", "status": "True", "reason": finished, "message": "done", "lastTransitionTime": T1}
        )
    if conditions:
        status["conditions"] = conditions
    if cluster:
        status["clusterName"] = cluster
    if nominated:
        status["nominatedClusterNames"] = list(nominated)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": uid,
            "resourceVersion": rv,
            "creationTimestamp": T0,
            "labels": {"kueue.x-k8s.io/job-uid": "job-uid-1"},
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "job-uid-1", "controller": True}
            ],
        },
        "spec": {
            "active": True,
            "queueName": "user-queue",
            "priority": 0,
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
                        }
                    },
                }
            ],
        },
        "status": status,
    }


def admission_check(name: str = "multikueue", controller: str = "kueue.x-k8s.io/multikueue") -> Obj:
    return {"metadata": {"name": name}, "spec": {"controllerName": controller}}


def with_status(obj: Obj, **changes: Any) -> Obj:
    out = copy.deepcopy(obj)
    out["status"].update(changes)
    return out
