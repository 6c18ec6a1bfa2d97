"""OpenAPI v3 documents rebuilt from the compact form: what kubectl explain / apply / field validation read."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from kubesim.schema import ResourceRoute, Schemas, openapi_v3_document, openapi_v3_paths
from kubesim.schema.openapi import crd_schema_name

JOB = ResourceRoute(kind="Job", plural="jobs", namespaced=True, subresources=("status",))
CQ = ResourceRoute(kind="ClusterQueue", plural="clusterqueues", namespaced=False, subresources=("status",))
WL = ResourceRoute(kind="Workload", plural="workloads", namespaced=True, subresources=("status",))


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str):
            yield ref
        for v in value.values():
            yield from _refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _refs(v)


def _assert_refs_resolve(doc: dict[str, Any]) -> None:
    schemas = doc["components"]["schemas"]
    for ref in _refs(doc):
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.rsplit("/", 1)[1] in schemas, f"dangling {ref}"


def _patch_op(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    """What kubectl's field-validation check looks for: a PATCH operation tagged with the kind's GVK."""
    for item in doc["paths"].values():
        op = item.get("patch")
        if op and op["x-kubernetes-group-version-kind"]["kind"] == kind:
            return dict(op)
    raise AssertionError(f"no PATCH operation for {kind}")


def test_batch_v1_document() -> None:
    doc = openapi_v3_document("batch", "v1", [JOB])
    assert doc["openapi"] == "3.0.0"
    schemas = doc["components"]["schemas"]
    job = schemas["io.k8s.api.batch.v1.Job"]
    assert job["x-kubernetes-group-version-kind"] == [{"group": "batch", "kind": "Job", "version": "v1"}]
    assert job["description"] == "Job represents the configuration of a single job."
    assert job["properties"]["spec"] == {
        "allOf": [{"$ref": "#/components/schemas/io.k8s.api.batch.v1.JobSpec"}],
        "default": {},
        "description": "Specification of the desired behavior of a job.",
    }
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["items"] == {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}
    for name in ("Status", "DeleteOptions", "Patch", "WatchEvent", "ObjectMeta", "ListMeta"):
        assert f"io.k8s.apimachinery.pkg.apis.meta.v1.{name}" in schemas
    assert schemas["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"]["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "DeleteOptions", "version": "v1"},
        {"group": "batch", "kind": "DeleteOptions", "version": "v1"},
    ]
    _assert_refs_resolve(doc)


def test_paths_carry_the_standard_parameters() -> None:
    doc = openapi_v3_document("batch", "v1", [JOB])
    paths = doc["paths"]
    assert set(paths) == {
        "/apis/batch/v1/",
        "/apis/batch/v1/jobs",
        "/apis/batch/v1/namespaces/{namespace}/jobs",
        "/apis/batch/v1/namespaces/{namespace}/jobs/{name}",
        "/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status",
        "/apis/batch/v1/watch/jobs",
        "/apis/batch/v1/watch/namespaces/{namespace}/jobs",
        "/apis/batch/v1/watch/namespaces/{namespace}/jobs/{name}",
    }
    patch = _patch_op(doc, "Job")
    names = [(p["name"], p["in"]) for p in patch["parameters"]]
    assert ("fieldValidation", "query") in names
    assert [n for n, _ in names] == ["dryRun", "fieldManager", "fieldValidation", "force"]
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    item = paths["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]
    assert item["patch"]["operationId"] == "patchBatchV1NamespacedJob"
    assert [p["name"] for p in item["parameters"]] == ["name", "namespace", "pretty"]
    collection = paths["/apis/batch/v1/namespaces/{namespace}/jobs"]
    assert collection["get"]["operationId"] == "listBatchV1NamespacedJob"
    assert [p["name"] for p in collection["get"]["parameters"]] == [
        "allowWatchBookmarks",
        "continue",
        "fieldSelector",
        "labelSelector",
        "limit",
        "resourceVersion",
        "resourceVersionMatch",
        "sendInitialEvents",
        "shardSelector",
        "timeoutSeconds",
        "watch",
    ]
    assert collection["post"]["x-kubernetes-action"] == "post"
    assert [p["name"] for p in collection["post"]["parameters"]] == ["dryRun", "fieldManager", "fieldValidation"]
    assert collection["delete"]["x-kubernetes-action"] == "deletecollection"
    status = paths["/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status"]
    assert status["put"]["operationId"] == "replaceBatchV1NamespacedJobStatus"


def test_kueue_v1beta2_document() -> None:
    doc = openapi_v3_document("kueue.x-k8s.io", "v1beta2", [CQ, WL])
    schemas = doc["components"]["schemas"]
    assert crd_schema_name("kueue.x-k8s.io", "v1beta2", "ClusterQueue") == "io.x-k8s.kueue.v1beta2.ClusterQueue"
    cq = schemas["io.x-k8s.kueue.v1beta2.ClusterQueue"]
    assert cq["x-kubernetes-group-version-kind"] == [
        {"group": "kueue.x-k8s.io", "kind": "ClusterQueue", "version": "v1beta2"}
    ]
    assert cq["properties"]["metadata"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    ]
    strategy = cq["properties"]["spec"]["properties"]["queueingStrategy"]
    assert strategy["enum"] == ["StrictFIFO", "BestEffortFIFO"]
    assert strategy["default"] == "BestEffortFIFO"
    flavors = cq["properties"]["spec"]["properties"]["resourceGroups"]["items"]["properties"]["flavors"]
    assert flavors["x-kubernetes-list-type"] == "map"
    assert flavors["x-kubernetes-list-map-keys"] == ["name"]
    quota = flavors["items"]["properties"]["resources"]["items"]["properties"]["nominalQuota"]
    assert quota["x-kubernetes-int-or-string"] is True
    assert quota["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert "x-kubernetes-validations" in cq["properties"]["spec"]
    assert schemas["io.x-k8s.kueue.v1beta2.ClusterQueueList"]["x-kubernetes-group-version-kind"] == [
        {"group": "kueue.x-k8s.io", "kind": "ClusterQueueList", "version": "v1beta2"}
    ]
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schemas
    # The Workload's embedded PodSpec is inlined (CR schemas are not split into definitions).
    wl = schemas["io.x-k8s.kueue.v1beta2.Workload"]
    pod_spec = wl["properties"]["spec"]["properties"]["podSets"]["items"]["properties"]["template"]["properties"]
    assert pod_spec["spec"]["properties"]["containers"]["type"] == "array"
    assert "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{name}" in doc["paths"]
    assert "/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads/{name}/status" in doc["paths"]
    patch = _patch_op(doc, "ClusterQueue")
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert patch["operationId"] == "patchKueueXK8sIoV1beta2ClusterQueue"
    # Custom resources take no strategic merge patch.
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    _assert_refs_resolve(doc)


def test_every_served_group_version_builds() -> None:
    schemas = Schemas.load()
    by_gv: dict[tuple[str, str], list[ResourceRoute]] = defaultdict(list)
    for info in schemas.kinds():
        plural = info.plural or info.kind.lower() + "s"
        by_gv[(info.group, info.version)].append(
            ResourceRoute(info.kind, plural, info.namespaced is not False, info.subresources)
        )
    by_gv[("apps", "v1")] = [ResourceRoute("Deployment", "deployments", True, ("status", "scale"))]
    by_gv[("", "v1")] = [
        ResourceRoute("Pod", "pods", True, ("status", "binding", "log")),
        ResourceRoute("Namespace", "namespaces", False, ("status", "finalize"), ("create", "get", "list", "watch")),
    ]
    for (group, version), routes in by_gv.items():
        doc = openapi_v3_document(group, version, routes)
        _assert_refs_resolve(doc)
        for route in routes:
            gvk = [{"group": group, "kind": route.kind, "version": version}]
            assert any(s.get("x-kubernetes-group-version-kind") == gvk for s in doc["components"]["schemas"].values())
        json.dumps(doc)
    core = openapi_v3_document("", "v1", by_gv[("", "v1")])
    assert "/api/v1/namespaces/{namespace}/pods/{name}/binding" in core["paths"]
    assert "/api/v1/namespaces/{name}/finalize" in core["paths"]
    assert "delete" not in core["paths"]["/api/v1/namespaces"]
    apps = openapi_v3_document("apps", "v1", by_gv[("apps", "v1")])
    scale = apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
    assert scale["get"]["x-kubernetes-group-version-kind"] == {"group": "autoscaling", "kind": "Scale", "version": "v1"}


def test_documents_are_cached() -> None:
    assert openapi_v3_document("batch", "v1", [JOB]) is openapi_v3_document("batch", "v1", (JOB,))


def test_discovery_paths_and_stable_hashes() -> None:
    body = openapi_v3_paths([("", "v1"), ("batch", "v1"), ("kueue.x-k8s.io", "v1beta2")])
    assert set(body["paths"]) == {"api/v1", "apis/batch/v1", "apis/kueue.x-k8s.io/v1beta2"}
    url = body["paths"]["apis/batch/v1"]["serverRelativeURL"]
    assert re.fullmatch(r"/openapi/v3/apis/batch/v1\?hash=[0-9A-F]{128}", url)
    assert openapi_v3_paths([("batch", "v1")])["paths"]["apis/batch/v1"]["serverRelativeURL"] == url
    other = body["paths"]["api/v1"]["serverRelativeURL"].split("hash=")[1]
    assert other != url.split("hash=")[1]


@pytest.mark.parametrize("kind", ["Job"])
def test_explain_needs_descriptions(kind: str) -> None:
    doc = openapi_v3_document("batch", "v1", [JOB])
    spec = doc["components"]["schemas"]["io.k8s.api.batch.v1.JobSpec"]
    assert spec["properties"]["parallelism"]["description"].startswith("Specifies the maximum desired number")
    assert spec["properties"]["parallelism"]["format"] == "int32"
