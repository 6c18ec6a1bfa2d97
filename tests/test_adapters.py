"""The per-kind adapters without clusters: intake, pod sets as Kueue computes them, copies, phases."""

from __future__ import annotations

import copy
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatcher import DEFAULT_CONTROLLER_NAME
from dispatcher.adapters import default_adapters
from dispatcher.adapters.base import Adapter
from dispatcher.adapters.job import JobAdapter
from dispatcher.adapters.jobset import JobSetAdapter
from dispatcher.adapters.pytorchjob import PyTorchJobAdapter
from dispatcher.adapters.raycluster import RayClusterAdapter
from dispatcher.adapters.rayjob import RayJobAdapter
from dispatcher.resources import InvalidRequest

Obj = dict[str, Any]
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
ADAPTERS: dict[str, Adapter] = {a.kind: a for a in default_adapters()}
CRD_KINDS = ("JobSet", "PyTorchJob", "TFJob", "RayJob", "RayCluster")


def example(kind: str) -> Obj:
    obj: Obj = yaml.safe_load((EXAMPLES / f"{kind.lower()}.yaml").read_text())
    return obj


def shape(kind: str, obj: Obj) -> list[tuple[str, int, dict[str, Fraction]]]:
    return [(ps.name, ps.count, dict(ps.requests)) for ps in ADAPTERS[kind].pod_sets(obj)]


def test_jobset_pod_sets_are_replicas_times_pods_per_job() -> None:
    obj = example("JobSet")
    obj["spec"]["replicatedJobs"][1]["template"]["spec"]["completions"] = 1  # parallelism 2 capped by completions
    got = shape("JobSet", obj)
    assert [(n, c) for n, c, _ in got] == [("leader", 1), ("workers", 2)]
    assert got[0][2] == {"cpu": Fraction(1), "memory": Fraction(2**30)}


def test_kubeflow_pod_sets_follow_kueues_replica_type_order() -> None:
    tf = example("TFJob")
    specs = tf["spec"]["tfReplicaSpecs"]
    specs["Chief"] = copy.deepcopy(specs["PS"])
    specs["Chief"].pop("replicas")  # defaults to 1
    assert [(n, c) for n, c, _ in shape("TFJob", tf)] == [("chief", 1), ("ps", 1), ("worker", 2)]
    assert [(n, c) for n, c, _ in shape("PyTorchJob", example("PyTorchJob"))] == [("master", 1), ("worker", 2)]


def test_rayjob_pod_sets_add_the_submitter_or_the_sidecar_and_the_autoscaler() -> None:
    rj = example("RayJob")
    got = shape("RayJob", rj)
    assert [(n, c) for n, c, _ in got] == [("head", 1), ("workers", 2), ("submitter", 1)]
    # KubeRay's default submitter: 500m / 200Mi requested.
    assert got[2][2] == {"cpu": Fraction(1, 2), "memory": Fraction(200 * 2**20)}
    assert got[1][2]["nvidia.com/gpumem"] == 10000

    sidecar = copy.deepcopy(rj)
    sidecar["spec"]["submissionMode"] = "SidecarMode"
    sidecar["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    sidecar["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] = 2
    got = shape("RayJob", sidecar)
    assert [(n, c) for n, c, _ in got] == [("head", 1), ("workers", 4)]
    # head 1 CPU + autoscaler 500m + submitter sidecar 500m.
    assert got[0][2]["cpu"] == Fraction(2)


def test_raycluster_with_gcs_fault_tolerance_counts_the_redis_cleanup() -> None:
    rc = example("RayCluster")
    rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    rc["metadata"]["annotations"] = {"ray.io/ft-enabled": "true"}
    head = shape("RayCluster", rc)[0]
    assert head[2] == {"cpu": Fraction(1, 5), "memory": Fraction(256 * 2**20)}


def test_a_bad_quantity_names_its_path() -> None:
    obj = example("PyTorchJob")
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "cpu"
    ] = "lots"
    with pytest.raises(InvalidRequest) as exc:
        ADAPTERS["PyTorchJob"].pod_sets(obj)
    assert exc.value.field == "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.requests[cpu]"


@pytest.mark.parametrize("kind", CRD_KINDS)
def test_intake_managed_suspended_foreign_and_running(kind: str) -> None:
    adapter = ADAPTERS[kind]
    obj = example(kind)
    assert adapter.managed_by(obj) == DEFAULT_CONTROLLER_NAME
    taken = adapter.intake(obj, DEFAULT_CONTROLLER_NAME)
    assert taken.take and taken.status_mode == "status"

    other = adapter.intake(obj, "example.com/another")
    assert not other.take and other.warning is None  # someone else's

    plain = copy.deepcopy(obj)
    run_policy = plain["spec"].get("runPolicy")
    (run_policy if kind in ("PyTorchJob", "TFJob") else plain["spec"]).pop("managedBy")
    running = adapter.intake(plain, DEFAULT_CONTROLLER_NAME)
    assert not running.take and running.warning and "suspend" in running.warning

    (run_policy if kind in ("PyTorchJob", "TFJob") else plain["spec"])["suspend"] = True
    suspended = adapter.intake(plain, DEFAULT_CONTROLLER_NAME)
    assert suspended.take and suspended.status_mode == "annotations"


@pytest.mark.parametrize("kind", CRD_KINDS)
def test_remote_copy_clears_managed_by_and_suspends(kind: str) -> None:
    adapter = ADAPTERS[kind]
    obj = example(kind)
    obj["metadata"].update(uid="u-1", resourceVersion="7", creationTimestamp="2025-01-01T00:00:00Z")
    obj["status"] = {"anything": True}
    copied = adapter.remote_copy(obj, {"kueue-dispatcher.io/origin": "m"}, {"kueue-dispatcher.io/placement-id": "1"})
    assert adapter.managed_by(copied) is None
    assert adapter.suspended(copied)
    assert "status" not in copied and "uid" not in copied["metadata"]
    assert copied["metadata"]["labels"]["kueue-dispatcher.io/origin"] == "m"
    assert copied["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"
    assert adapter.managed_by(obj) == DEFAULT_CONTROLLER_NAME, "the manager object is not changed"


def test_phases() -> None:
    js = ADAPTERS["JobSet"]
    assert js.phase({"status": {"conditions": [{"type": "Completed", "status": "True"}]}}).succeeded
    failed = js.phase({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs"}]}})
    assert failed.finished and not failed.succeeded and failed.reason == "FailedJobs"
    assert js.phase({"spec": {}, "status": {"replicatedJobsStatus": [{"name": "a", "active": 1}]}}).running

    torch = ADAPTERS["PyTorchJob"]
    assert torch.phase({"status": {"conditions": [{"type": "Running", "status": "True"}]}}).running
    assert torch.phase({"status": {"conditions": [{"type": "Succeeded", "status": "True"}]}}).succeeded

    ray = ADAPTERS["RayJob"]
    assert ray.phase({"status": {"jobDeploymentStatus": "Running"}}).running
    done = ray.phase({"status": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}})
    assert done.finished and done.succeeded
    bad = ray.phase({"status": {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED"}})
    assert bad.finished and not bad.succeeded
    assert not ray.phase({"status": {"jobDeploymentStatus": "Initializing"}}).running

    cluster = ADAPTERS["RayCluster"]
    ready = cluster.phase({"status": {"state": "ready"}})
    assert ready.running and not ready.finished  # a RayCluster never finishes


def test_failed_status_for_a_lost_worker_is_in_each_kinds_form() -> None:
    assert ADAPTERS["RayJob"].failed_status({}, "lost") == {
        "jobDeploymentStatus": "Failed",
        "jobStatus": "FAILED",
        "reason": "WorkerLost",
        "message": "lost",
        "endTime": ADAPTERS["RayJob"].failed_status({}, "lost")["endTime"],  # type: ignore[index]
    }
    js = ADAPTERS["JobSet"].failed_status({}, "lost") or {}
    assert js["terminalState"] == "Failed" and js["conditions"][0]["type"] == "Failed"
    kf = ADAPTERS["TFJob"].failed_status({}, "lost") or {}
    assert [c["type"] for c in kf["conditions"]] == ["Failed"]


@pytest.mark.parametrize(
    ("adapter", "obj", "selector"),
    [
        (JobAdapter(), {"metadata": {"name": "j", "uid": "u1"}}, "batch.kubernetes.io/controller-uid=u1"),
        (JobSetAdapter(), {"metadata": {"name": "js", "uid": "u2"}}, "jobset.sigs.k8s.io/jobset-uid=u2"),
        (PyTorchJobAdapter(), {"metadata": {"name": "pt", "uid": "u3"}}, "training.kubeflow.org/job-name=pt"),
        (RayClusterAdapter(), {"metadata": {"name": "rc", "uid": "u4"}}, "ray.io/cluster=rc"),
        (RayJobAdapter(), {"metadata": {"name": "rj"}, "status": {"rayClusterName": "rj-x"}}, "ray.io/cluster=rj-x"),
        (RayJobAdapter(), {"metadata": {"name": "rj"}}, None),
    ],
)
def test_pod_selector_finds_the_pods_the_kinds_controller_labels(adapter: Any, obj: Obj, selector: str | None) -> None:
    """The labels each kind's controller puts on its pods: what a fencing agent deletes a fenced copy's pods by."""
    assert adapter.pod_selector(obj) == selector
