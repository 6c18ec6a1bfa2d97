"""Lookup of kinds and schema nodes, and a speed sanity check of the request-time operations."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from kubesim.schema import KindInfo, Node, Schemas


def test_kinds_cover_builtins_and_every_served_crd_version() -> None:
    schemas = Schemas.load()
    kinds = {(k.group, k.version, k.kind): k for k in schemas.kinds()}
    for gvk in [
        ("", "v1", "Pod"),
        ("", "v1", "Namespace"),
        ("batch", "v1", "Job"),
        ("apps", "v1", "Deployment"),
        ("coordination.k8s.io", "v1", "Lease"),
        ("kueue.x-k8s.io", "v1beta1", "ClusterQueue"),
        ("kueue.x-k8s.io", "v1beta2", "Workload"),
        ("jobset.x-k8s.io", "v1alpha2", "JobSet"),
        ("kubeflow.org", "v1", "PyTorchJob"),
        ("kubeflow.org", "v1", "TFJob"),
        ("ray.io", "v1", "RayJob"),
        ("ray.io", "v1", "RayCluster"),
    ]:
        assert gvk in kinds, gvk
    job = kinds[("batch", "v1", "Job")]
    assert job.builtin and job.namespaced is None and job.storage and job.subresources == ()
    cq = kinds[("kueue.x-k8s.io", "v1beta2", "ClusterQueue")]
    assert cq == KindInfo(
        group="kueue.x-k8s.io",
        version="v1beta2",
        kind="ClusterQueue",
        builtin=False,
        plural="clusterqueues",
        singular="clusterqueue",
        short_names=("cq",),
        categories=cq.categories,
        namespaced=False,
        storage=True,
        subresources=("status",),
        printer_columns=cq.printer_columns,
        list_kind="ClusterQueueList",
        deprecated=False,
        deprecation_warning=None,
        selectable_fields=(),
        scale=None,
    )
    assert [c["name"] for c in cq.printer_columns] == ["Cohort", "Strategy", "Pending Workloads", "Admitted Workloads"]
    assert cq.printer_columns[1] == {
        "description": "The queueing strategy used to prioritize workloads",
        "jsonPath": ".spec.queueingStrategy",
        "name": "Strategy",
        "priority": 1,
        "type": "string",
    }
    old = kinds[("kueue.x-k8s.io", "v1beta1", "ClusterQueue")]
    assert not old.storage and old.deprecated
    assert kinds[("kueue.x-k8s.io", "v1beta2", "Workload")].namespaced is True


def test_unknown_kind_is_key_error() -> None:
    with pytest.raises(KeyError):
        Schemas.load().get("batch", "v1", "CronJob")
    with pytest.raises(KeyError):
        Schemas.load().get("kueue.x-k8s.io", "v1", "ClusterQueue")


def test_node_at_for_strategic_merge_patch() -> None:
    job = Schemas.load().get("batch", "v1", "Job")
    containers = job.node_at(("spec", "template", "spec", "containers"))
    assert containers is not None
    assert (containers.type, containers.patch_strategy, containers.patch_merge_key) == ("array", "merge", "name")
    assert containers.list_type == "map" and list(containers.list_map_keys or ()) == ["name"]
    item = containers.items
    assert isinstance(item, Node) and item.ref_name == "Container"
    assert item.properties["resources"].ref_name == "ResourceRequirements"
    requests = job.node_at(("spec", "template", "spec", "containers", "resources", "requests"))
    assert requests is not None and requests.type == "object"
    quantity = job.node_at(("spec", "template", "spec", "containers", "resources", "requests", "cpu"))
    assert quantity is not None and quantity.ref_name == "Quantity"
    spec = job.node_at(("spec",))
    assert spec is not None and spec.ref_name == "JobSpec" and spec.description
    assert job.node_at(("spec", "nope")) is None
    # Resolved nodes are shared: walking twice costs nothing and gives the same objects.
    assert job.node_at(("spec", "template", "spec", "containers")) is containers


def test_crd_nodes_and_metadata() -> None:
    schemas = Schemas.load()
    cq = schemas.get("kueue.x-k8s.io", "v1beta2", "ClusterQueue")
    quota = cq.node_at(("spec", "resourceGroups", "flavors", "resources", "nominalQuota"))
    assert quota is not None and quota.int_or_string and quota.type is None
    flavors = cq.node_at(("spec", "resourceGroups", "flavors"))
    assert flavors is not None and flavors.list_type == "map"
    # A custom resource's metadata is ObjectMeta, as the apiserver treats it.
    owners = cq.node_at(("metadata", "ownerReferences"))
    assert owners is not None and owners.patch_merge_key == "uid"
    labels = cq.node_at(("metadata", "labels"))
    assert labels is not None and isinstance(labels.additional_properties, Node)
    assert cq.root.gvk == [{"group": "kueue.x-k8s.io", "kind": "ClusterQueue", "version": "v1beta2"}]


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sample", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "backoffLimit": 3,
            "template": {
                "metadata": {"labels": {"app": "sample"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "command": ["sh", "-c", "sleep 10"],
                            "env": [{"name": "A", "value": "1"}],
                            "resources": {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"cpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


def _workload() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-sample-1a2b3", "namespace": "default", "labels": {"kueue.x-k8s.io/job-uid": "u"}},
        "spec": {
            "queueName": "lq",
            "priority": 0,
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "template": {
                        "metadata": {"labels": {"app": "sample"}},
                        "spec": _job()["spec"]["template"]["spec"],
                    },
                }
            ],
        },
    }


def test_speed_sanity(capsys: pytest.CaptureFixture[str]) -> None:
    """Not a timed assertion: prints what a decode and a CR apply cost (run with -s to see it)."""
    schemas = Schemas.load()
    job, wl = schemas.get("batch", "v1", "Job"), schemas.get("kueue.x-k8s.io", "v1beta2", "Workload")
    body, wbody = _job(), _workload()
    job.decode_builtin(body)
    stored, _ = wl.apply_crd(wbody)
    n = 200
    start = time.perf_counter()
    for _ in range(n):
        job.decode_builtin(body)
    per_job = (time.perf_counter() - start) / n
    start = time.perf_counter()
    for _ in range(n):
        wl.apply_crd(wbody)
    per_create = (time.perf_counter() - start) / n
    update = copy.deepcopy(stored)
    update["status"] = {"conditions": []}
    start = time.perf_counter()
    for _ in range(n):
        wl.apply_crd(update, old=stored)
    per_update = (time.perf_counter() - start) / n
    with capsys.disabled():
        print(
            f"\n[schema speed] decode_builtin Job: {per_job * 1e6:.0f} us; apply_crd Workload create: "
            f"{per_create * 1e6:.0f} us, status update: {per_update * 1e6:.0f} us"
        )
