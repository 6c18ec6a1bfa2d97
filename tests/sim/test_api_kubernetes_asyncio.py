"""The simulated API server as kubernetes_asyncio sees it, held to what a real kube-apiserver answers.

Every test talks HTTP to a started ``SimCluster`` through a client built from its kubeconfig: typed APIs
(CoreV1Api, BatchV1Api, CustomObjectsApi, Watch) where they can express the request, raw requests where
they cannot (ill-typed bodies, exact Status bodies, response headers).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException
from simclient import Obj, kube_configuration, raw_request, wait_for

from kubesim.cluster import SimCluster

NS = "default"
KUEUE = "kueue.x-k8s.io"

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


# ---- helpers ---------------------------------------------------------------------------------------------------


@pytest.fixture
def core(api_client: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(api_client)


@pytest.fixture
def batch(api_client: k8s.ApiClient) -> k8s.BatchV1Api:
    return k8s.BatchV1Api(api_client)


@pytest.fixture
def custom(api_client: k8s.ApiClient) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api_client)


def status_of(exc: ApiException) -> Obj:
    """The Status body of an error answer."""
    body = json.loads(exc.body)
    assert isinstance(body, dict)
    return body


def configmap(name: str, labels: dict[str, str] | None = None, data: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": data or {},
    }


def job_body(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}],
                }
            },
            **spec,
        },
    }


def pod_body(name: str, *, owner: Obj | None = None, containers: list[Obj] | None = None) -> Obj:
    meta: Obj = {"name": name, "labels": {"app": name}}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": containers or [{"name": "main", "image": "busybox:1.36"}]},
    }


def flavor(name: str) -> Obj:
    return {"apiVersion": f"{KUEUE}/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


def cluster_queue(name: str, quota: Any = "4", **extra: Any) -> Obj:
    return {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": quota}]}],
                }
            ],
            **extra,
        },
    }


def workload(name: str) -> Obj:
    return {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "queueName": "user-queue",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
                        }
                    },
                }
            ],
        },
    }


class EventCollector:
    """Runs a kubernetes_asyncio watch in a task and keeps every event it yields (raw dicts)."""

    def __init__(self, func: Callable[..., Any], **kwargs: Any) -> None:
        self.events: list[Obj] = []
        self.error: BaseException | None = None
        self.done = asyncio.Event()
        self._watch = watch.Watch()
        self._task = asyncio.create_task(self._run(func, kwargs))

    async def _run(self, func: Callable[..., Any], kwargs: dict[str, Any]) -> None:
        try:
            async for event in self._watch.stream(func, **kwargs):
                self.events.append({"type": event["type"], "object": event["raw_object"]})
        except Exception as exc:  # the test inspects what ended the watch
            self.error = exc
        finally:
            self.done.set()

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def named(self, name: str) -> list[Obj]:
        return [e for e in self.events if e["object"].get("metadata", {}).get("name") == name]

    async def close(self) -> None:
        self._watch.stop()
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self._watch.close()


@pytest.fixture
async def watches() -> AsyncIterator[list[EventCollector]]:
    """Collectors registered here are closed after the test."""
    opened: list[EventCollector] = []
    yield opened
    for w in opened:
        await w.close()


# ---- discovery -------------------------------------------------------------------------------------------------


async def test_version_and_health_endpoints(api_client: k8s.ApiClient) -> None:
    info = await k8s.VersionApi(api_client).get_code()
    assert (info.major, info.minor) == ("1", "36")
    assert info.git_version.startswith("v1.36")
    for path in ("/healthz", "/readyz", "/livez"):
        resp = await raw_request(api_client, "GET", path)
        assert resp.status == 200
        assert resp.body == "ok"


async def test_core_v1_resource_list(core: k8s.CoreV1Api) -> None:
    resources = {r.name: r for r in (await core.get_api_resources()).resources}
    pods = resources["pods"]
    assert (pods.kind, pods.namespaced, pods.singular_name) == ("Pod", True, "pod")
    assert {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"} <= set(pods.verbs)
    assert pods.short_names == ["po"]
    assert resources["pods/status"].kind == "Pod"
    assert set(resources["pods/status"].verbs) == {"get", "patch", "update"}
    assert resources["pods/binding"].verbs == ["create"]
    assert resources["namespaces"].namespaced is False
    assert resources["namespaces"].short_names == ["ns"]
    assert "deletecollection" not in resources["namespaces"].verbs
    assert resources["nodes"].namespaced is False
    for name in ("secrets", "configmaps", "events"):
        assert resources[name].namespaced is True
    assert resources["configmaps"].short_names == ["cm"]


async def test_group_discovery(api_client: k8s.ApiClient) -> None:
    groups = {g.name: g for g in (await k8s.ApisApi(api_client).get_api_versions()).groups}
    assert {"batch", "coordination.k8s.io", KUEUE} <= set(groups)
    kueue_versions = [v.version for v in groups[KUEUE].versions]
    assert {"v1beta1", "v1beta2"} <= set(kueue_versions)
    assert groups[KUEUE].preferred_version.version == "v1beta2"
    batch_group = await k8s.BatchApi(api_client).get_api_group()
    assert batch_group.preferred_version.group_version == "batch/v1"
    core_versions = await k8s.CoreApi(api_client).get_api_versions()
    assert core_versions.versions == ["v1"]


async def test_batch_and_coordination_resource_lists(api_client: k8s.ApiClient) -> None:
    jobs = {r.name: r for r in (await k8s.BatchV1Api(api_client).get_api_resources()).resources}
    assert (jobs["jobs"].kind, jobs["jobs"].namespaced) == ("Job", True)
    assert "jobs/status" in jobs
    assert "watch" in jobs["jobs"].verbs
    leases = {r.name: r for r in (await k8s.CoordinationV1Api(api_client).get_api_resources()).resources}
    assert leases["leases"].kind == "Lease"


async def test_kueue_resource_list(custom: k8s.CustomObjectsApi) -> None:
    listing = await custom.get_api_resources(KUEUE, "v1beta2")
    resources = {r.name: r for r in listing.resources}
    cq = resources["clusterqueues"]
    assert (cq.kind, cq.namespaced) == ("ClusterQueue", False)
    assert "cq" in (cq.short_names or [])
    assert {"get", "list", "watch", "create", "update", "patch", "delete"} <= set(cq.verbs)
    assert "clusterqueues/status" in resources
    wl = resources["workloads"]
    assert (wl.kind, wl.namespaced) == ("Workload", True)
    assert "workloads/status" in resources
    assert resources["localqueues"].namespaced is True
    assert resources["resourceflavors"].namespaced is False
    old = {r.name for r in (await custom.get_api_resources(KUEUE, "v1beta1")).resources}
    assert {"clusterqueues", "workloads", "localqueues"} <= old


async def test_openapi_v3_lists_paths(api_client: k8s.ApiClient) -> None:
    index = await raw_request(api_client, "GET", "/openapi/v3")
    assert index.status == 200
    paths = index.body["paths"]
    for key in ("api/v1", "apis/batch/v1", f"apis/{KUEUE}/v1beta2"):
        assert key in paths, key
        assert paths[key]["serverRelativeURL"].startswith(f"/openapi/v3/{key}")
    doc = await raw_request(api_client, "GET", paths["apis/batch/v1"]["serverRelativeURL"].split("?")[0])
    assert doc.status == 200
    assert doc.body["openapi"].startswith("3.")
    assert "/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status" in doc.body["paths"]
    assert "io.k8s.api.batch.v1.Job" in doc.body["components"]["schemas"]


# ---- CRUD ------------------------------------------------------------------------------------------------------


async def test_configmap_crud(core: k8s.CoreV1Api) -> None:
    created = await core.create_namespaced_config_map(NS, configmap("cfg", {"app": "x"}, {"a": "1"}))
    meta = created.metadata
    assert meta.uid and meta.resource_version and meta.creation_timestamp is not None
    assert meta.namespace == NS
    got = await core.read_namespaced_config_map("cfg", NS)
    assert got.data == {"a": "1"}
    assert got.metadata.resource_version == meta.resource_version
    got.data["b"] = "2"
    replaced = await core.replace_namespaced_config_map("cfg", NS, got)
    assert replaced.data == {"a": "1", "b": "2"}
    assert int(replaced.metadata.resource_version) > int(meta.resource_version)
    assert replaced.metadata.uid == meta.uid
    listed = await core.list_namespaced_config_map(NS)
    assert "cfg" in [i.metadata.name for i in listed.items]
    assert int(listed.metadata.resource_version) >= int(replaced.metadata.resource_version)
    await core.delete_namespaced_config_map("cfg", NS)
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_config_map("cfg", NS)
    assert err.value.status == 404


async def test_generate_name(core: k8s.CoreV1Api) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}, "data": {}}
    a = await core.create_namespaced_config_map(NS, body)
    b = await core.create_namespaced_config_map(NS, body)
    for obj in (a, b):
        assert obj.metadata.name.startswith("gen-")
        assert len(obj.metadata.name) == len("gen-") + 5
        assert obj.metadata.generate_name == "gen-"
    assert a.metadata.name != b.metadata.name
    assert a.metadata.uid != b.metadata.uid
    got = await core.read_namespaced_config_map(a.metadata.name, NS)
    assert got.metadata.uid == a.metadata.uid


async def test_cluster_scoped_and_other_core_kinds(api_client: k8s.ApiClient, core: k8s.CoreV1Api) -> None:
    ns = await core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert ns.status.phase == "Active"
    assert ns.metadata.labels["kubernetes.io/metadata.name"] == "team-a"
    node = await core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    assert node.metadata.namespace is None
    assert (await core.read_node("n1")).metadata.uid == node.metadata.uid
    secret = await core.create_namespaced_secret(
        "team-a", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}}
    )
    assert secret.data == {"k": "dg=="}
    assert secret.type == "Opaque"
    event = await core.create_namespaced_event(
        "team-a",
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Secret", "name": "s", "namespace": "team-a"},
            "reason": "Tested",
            "message": "hello",
            "type": "Normal",
        },
    )
    assert event.reason == "Tested"
    events = await core.list_namespaced_event("team-a", field_selector="involvedObject.name=s")
    assert [e.metadata.name for e in events.items] == ["e1"]
    assert (await core.list_namespaced_event("team-a", field_selector="involvedObject.name=t")).items == []
    coord = k8s.CoordinationV1Api(api_client)
    lease = await coord.create_namespaced_lease(
        "team-a",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "leader"},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15},
        },
    )
    assert lease.spec.holder_identity == "me"
    lease.spec.holder_identity = "you"
    renewed = await coord.replace_namespaced_lease("leader", "team-a", lease)
    assert renewed.spec.holder_identity == "you"
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_config_map("missing-ns", configmap("x"))
    assert err.value.status == 404
    assert status_of(err.value)["details"] == {"name": "missing-ns", "kind": "namespaces"}


async def test_job_defaults_on_create(batch: k8s.BatchV1Api, api_client: k8s.ApiClient) -> None:
    resp = await raw_request(api_client, "POST", f"/apis/batch/v1/namespaces/{NS}/jobs", job_body("j1"))
    assert resp.status == 201
    job = resp.body
    spec, meta = job["spec"], job["metadata"]
    uid = meta["uid"]
    assert meta["generation"] == 1
    assert (spec["parallelism"], spec["completions"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["completionMode"] == "NonIndexed"
    assert spec["manualSelector"] is False
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "j1",
        "controller-uid": uid,
        "job-name": "j1",
    }
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert spec["template"]["metadata"]["labels"] == labels
    assert meta["labels"] == labels
    pod_spec = spec["template"]["spec"]
    assert pod_spec["dnsPolicy"] == "ClusterFirst"
    assert pod_spec["schedulerName"] == "default-scheduler"
    assert pod_spec["terminationGracePeriodSeconds"] == 30
    container = pod_spec["containers"][0]
    assert container["imagePullPolicy"] == "Always"
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "File"
    assert job["status"] == {}
    only_parallelism = await batch.create_namespaced_job(NS, job_body("j2", parallelism=3))
    assert only_parallelism.spec.parallelism == 3
    assert only_parallelism.spec.completions is None


async def test_kueue_custom_objects_crud(custom: k8s.CustomObjectsApi) -> None:
    await custom.create_cluster_custom_object(KUEUE, "v1beta2", "resourceflavors", flavor("default-flavor"))
    cq, code, headers = await custom.create_cluster_custom_object_with_http_info(
        KUEUE, "v1beta2", "clusterqueues", cluster_queue("cq1", bogusField=1)
    )
    assert code == 201
    assert "bogusField" not in cq["spec"]
    assert headers["Warning"] == '299 - "unknown field \\"spec.bogusField\\""'
    assert cq["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert cq["spec"]["stopPolicy"] == "None"
    assert "flavorFungibility" in cq["spec"]
    assert cq["spec"]["preemption"]["reclaimWithinCohort"] == "Never"
    assert cq["metadata"]["generation"] == 1
    got = await custom.get_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", "cq1")
    assert got["metadata"]["uid"] == cq["metadata"]["uid"]
    # The same object is served in the older version too.
    old = await custom.get_cluster_custom_object(KUEUE, "v1beta1", "clusterqueues", "cq1")
    assert old["apiVersion"] == f"{KUEUE}/v1beta1"
    assert old["metadata"]["uid"] == cq["metadata"]["uid"]
    listed = await custom.list_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["cq1"]
    wl = await custom.create_namespaced_custom_object(KUEUE, "v1beta2", NS, "workloads", workload("wl1"))
    assert wl["metadata"]["namespace"] == NS
    patched = await custom.patch_namespaced_custom_object(
        KUEUE, "v1beta2", NS, "workloads", "wl1", {"metadata": {"labels": {"x": "y"}}}, _content_type=MERGE
    )
    assert patched["metadata"]["labels"] == {"x": "y"}
    assert patched["metadata"]["generation"] == 1
    await custom.delete_namespaced_custom_object(KUEUE, "v1beta2", NS, "workloads", "wl1")
    with pytest.raises(ApiException) as err:
        await custom.get_namespaced_custom_object(KUEUE, "v1beta2", NS, "workloads", "wl1")
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'workloads.kueue.x-k8s.io "wl1" not found'
    await custom.delete_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", "cq1")
    assert (await custom.list_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues"))["items"] == []


# ---- lists and selectors ---------------------------------------------------------------------------------------


async def test_list_paging_with_limit_and_continue(core: k8s.CoreV1Api) -> None:
    names = [f"page-{i}" for i in range(7)]
    for name in names:
        await core.create_namespaced_config_map(NS, configmap(name, {"paged": "yes"}))
    await core.create_namespaced_config_map(NS, configmap("other"))
    first = await core.list_namespaced_config_map(NS, label_selector="paged=yes", limit=3)
    assert [i.metadata.name for i in first.items] == names[:3]
    assert first.metadata._continue
    # kube-apiserver counts what is left only for an unfiltered list (tests/differential/test_apiserver.py).
    assert first.metadata.remaining_item_count is None
    unfiltered = await core.list_namespaced_config_map(NS, limit=3)
    assert unfiltered.metadata.remaining_item_count == 5  # 8 ConfigMaps, 3 on this page
    seen = [i.metadata.name for i in first.items]
    token = first.metadata._continue
    pages = 1
    while token:
        page = await core.list_namespaced_config_map(NS, label_selector="paged=yes", limit=3, _continue=token)
        seen += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        pages += 1
    assert seen == names
    assert pages == 3
    everything = await core.list_namespaced_config_map(NS, label_selector="paged=yes")
    assert everything.metadata._continue is None
    assert len(everything.items) == 7
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_config_map(NS, limit=3, _continue="not-a-token")
    assert err.value.status == 400


async def test_paged_list_version_lets_a_watch_catch_up(core: k8s.CoreV1Api) -> None:
    for name in ("m-1", "m-2", "m-3", "m-4"):
        await core.create_namespaced_config_map(NS, configmap(name, {"set": "m"}))
    first = await core.list_namespaced_config_map(NS, label_selector="set=m", limit=2)
    # Created while paging, before the cursor: the pages miss it...
    await core.create_namespaced_config_map(NS, configmap("m-0", {"set": "m"}))
    second = await core.list_namespaced_config_map(
        NS, label_selector="set=m", limit=2, _continue=first.metadata._continue
    )
    names = [i.metadata.name for i in first.items + second.items]
    assert names == ["m-1", "m-2", "m-3", "m-4"]
    # ...so the list's version is that of its first page, and a watch from it replays the creation.
    assert second.metadata.resource_version == first.metadata.resource_version
    w = watch.Watch()
    replayed = [
        (e["type"], e["object"].metadata.name)
        async for e in w.stream(
            core.list_namespaced_config_map,
            NS,
            label_selector="set=m",
            resource_version=second.metadata.resource_version,
            timeout_seconds=1,
        )
    ]
    await w.close()
    assert replayed == [("ADDED", "m-0")]


async def test_continue_token_expires_after_compaction(sim_cluster: SimCluster, core: k8s.CoreV1Api) -> None:
    for i in range(4):
        await core.create_namespaced_config_map(NS, configmap(f"exp-{i}"))
    first = await core.list_namespaced_config_map(NS, limit=2)
    token = first.metadata._continue
    assert token
    await core.create_namespaced_config_map(NS, configmap("exp-later"))
    sim_cluster.compact()
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_config_map(NS, limit=2, _continue=token)
    assert err.value.status == 410
    body = status_of(err.value)
    assert body["reason"] == "Expired"
    assert "continue parameter is too old" in body["message"]


async def test_label_selectors(core: k8s.CoreV1Api) -> None:
    specs = {
        "a1": {"app": "a", "tier": "web"},
        "a2": {"app": "a"},
        "b1": {"app": "b", "tier": "db"},
        "c1": {"app": "c"},
        "none": {},
    }
    for name, labels in specs.items():
        await core.create_namespaced_config_map(NS, configmap(name, labels))

    async def names(selector: str) -> set[str]:
        listed = await core.list_namespaced_config_map(NS, label_selector=selector)
        return {i.metadata.name for i in listed.items} & set(specs)

    assert await names("app=a") == {"a1", "a2"}
    assert await names("app==a") == {"a1", "a2"}
    assert await names("app!=a") == {"b1", "c1", "none"}
    assert await names("app in (a,b)") == {"a1", "a2", "b1"}
    assert await names("app notin (a, b)") == {"c1", "none"}
    assert await names("!tier") == {"a2", "c1", "none"}
    assert await names("tier") == {"a1", "b1"}
    assert await names("app in (a,b),!tier") == {"a2"}
    assert await names("app=a,tier=web") == {"a1"}
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_config_map(NS, label_selector="app in (a")
    assert err.value.status == 400


async def test_field_selectors(core: k8s.CoreV1Api, batch: k8s.BatchV1Api) -> None:
    await core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    await core.create_namespaced_config_map(NS, configmap("same"))
    await core.create_namespaced_config_map("other", configmap("same"))
    await core.create_namespaced_config_map("other", configmap("different"))
    by_name = await core.list_config_map_for_all_namespaces(field_selector="metadata.name=same")
    assert sorted(i.metadata.namespace for i in by_name.items) == [NS, "other"]
    by_ns = await core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=other")
    assert sorted(i.metadata.name for i in by_ns.items) == ["different", "same"]
    both = await core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=other,metadata.name!=same")
    assert [i.metadata.name for i in both.items] == ["different"]
    in_ns = await core.list_namespaced_config_map("other", field_selector="metadata.name=same")
    assert [(i.metadata.namespace, i.metadata.name) for i in in_ns.items] == [("other", "same")]
    # Kind-specific fields; an unset field compares as Go's zero value, as the server's field sets hold it.
    await core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "open"}})
    await core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cordoned"}})
    await core.patch_node("cordoned", {"spec": {"unschedulable": True}}, _content_type=MERGE)
    schedulable = await core.list_node(field_selector="spec.unschedulable=false")
    assert [n.metadata.name for n in schedulable.items] == ["open"]
    cordoned = await core.list_node(field_selector="spec.unschedulable=true")
    assert [n.metadata.name for n in cordoned.items] == ["cordoned"]
    await batch.create_namespaced_job(NS, job_body("fresh"))
    unfinished = await batch.list_namespaced_job(NS, field_selector="status.successful=0")
    assert [j.metadata.name for j in unfinished.items] == ["fresh"]
    await core.create_namespaced_pod(NS, pod_body("unbound"))
    unbound = await core.list_namespaced_pod(NS, field_selector="spec.nodeName=,status.phase=Pending")
    assert [p.metadata.name for p in unbound.items] == ["unbound"]
    assert (await core.list_namespaced_pod(NS, field_selector="spec.hostNetwork=false")).items
    with pytest.raises(ApiException) as err:
        await batch.list_namespaced_job(NS, field_selector="spec.parallelism=1")
    assert err.value.status == 400
    body = status_of(err.value)
    assert body["reason"] == "BadRequest"
    assert body["message"] == 'field label "spec.parallelism" not supported for Job'


# ---- watch -----------------------------------------------------------------------------------------------------


async def test_watch_from_resource_version_sees_added_modified_deleted(
    core: k8s.CoreV1Api, watches: list[EventCollector]
) -> None:
    await core.create_namespaced_config_map(NS, configmap("before"))
    start = (await core.list_namespaced_config_map(NS)).metadata.resource_version
    w = EventCollector(core.list_namespaced_config_map, namespace=NS, resource_version=start, timeout_seconds=30)
    watches.append(w)
    created = await core.create_namespaced_config_map(NS, configmap("w1", data={"a": "1"}))
    patched = await core.patch_namespaced_config_map("w1", NS, {"data": {"a": "2"}}, _content_type=MERGE)
    await core.delete_namespaced_config_map("w1", NS)
    await wait_for(lambda: len(w.named("w1")) >= 3, "ADDED, MODIFIED and DELETED of w1")
    events = w.named("w1")
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[0]["object"]["metadata"]["resourceVersion"] == created.metadata.resource_version
    assert events[1]["object"]["data"] == {"a": "2"}
    assert events[1]["object"]["metadata"]["resourceVersion"] == patched.metadata.resource_version
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3
    assert w.named("before") == []  # created before the watch's resourceVersion: not replayed
    assert w.error is None


async def test_watch_replays_history_after_resource_version(core: k8s.CoreV1Api) -> None:
    start = (await core.list_namespaced_config_map(NS)).metadata.resource_version
    await core.create_namespaced_config_map(NS, configmap("r1", {"keep": "yes"}))
    await core.create_namespaced_config_map(NS, configmap("r2", {"keep": "no"}))
    await core.patch_namespaced_config_map("r1", NS, {"metadata": {"labels": {"keep": "no"}}}, _content_type=MERGE)
    seen: list[tuple[str, str]] = []
    w = watch.Watch()
    async for event in w.stream(
        core.list_namespaced_config_map, NS, resource_version=start, label_selector="keep=yes", timeout_seconds=1
    ):
        seen.append((event["type"], event["object"].metadata.name))
    await w.close()
    # r1 matched, then stopped matching: a selector watch shows that as DELETED; r2 never matched.
    assert seen == [("ADDED", "r1"), ("DELETED", "r1")]


async def test_watch_without_version_starts_with_current_state(core: k8s.CoreV1Api) -> None:
    await core.create_namespaced_config_map(NS, configmap("existing"))
    w = watch.Watch()
    events = []
    started = asyncio.get_running_loop().time()
    async for event in w.stream(core.list_namespaced_config_map, NS, timeout_seconds=1):
        events.append((event["type"], event["object"].metadata.name))
    elapsed = asyncio.get_running_loop().time() - started
    await w.close()
    # timeoutSeconds: the server ends the stream after about that long.
    assert 0.9 <= elapsed < 5
    assert ("ADDED", "existing") in events
    assert all(t == "ADDED" for t, _ in events)


async def test_watch_bookmarks_only_when_allowed(core: k8s.CoreV1Api, watches: list[EventCollector]) -> None:
    await core.create_namespaced_config_map(NS, configmap("bm"))
    start = (await core.list_namespaced_config_map(NS)).metadata.resource_version
    w = EventCollector(
        core.list_namespaced_config_map,
        namespace=NS,
        resource_version=start,
        allow_watch_bookmarks=True,
        timeout_seconds=30,
    )
    watches.append(w)
    await wait_for(lambda: "BOOKMARK" in w.types(), "a BOOKMARK event")
    bookmark = next(e for e in w.events if e["type"] == "BOOKMARK")["object"]
    assert bookmark["kind"] == "ConfigMap"
    assert bookmark["apiVersion"] == "v1"
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(start)
    # A bookmark's version is a valid place to resume from.
    await core.create_namespaced_config_map(NS, configmap("after-bookmark"))
    resumed = watch.Watch()
    async for event in resumed.stream(
        core.list_namespaced_config_map,
        NS,
        resource_version=bookmark["metadata"]["resourceVersion"],
        timeout_seconds=1,
    ):
        assert event["type"] != "BOOKMARK"
        if event["object"].metadata.name == "after-bookmark":
            resumed.stop()
    await resumed.close()
    plain = watch.Watch()
    types = [
        e["type"]
        async for e in plain.stream(core.list_namespaced_config_map, NS, resource_version=start, timeout_seconds=1)
    ]
    await plain.close()
    assert "BOOKMARK" not in types


async def test_watch_too_old_resource_version_is_410_then_relist_works(
    sim_cluster: SimCluster, core: k8s.CoreV1Api, api_client: k8s.ApiClient, watches: list[EventCollector]
) -> None:
    old = (await core.create_namespaced_config_map(NS, configmap("c1"))).metadata.resource_version
    await core.create_namespaced_config_map(NS, configmap("c2"))
    sim_cluster.compact()
    # The raw answer: 200, then one ERROR event carrying a 410 Expired Status.
    resp = await raw_request(
        api_client, "GET", f"/api/v1/namespaces/{NS}/configmaps", query={"watch": "true", "resourceVersion": old}
    )
    assert resp.status == 200
    assert resp.body["type"] == "ERROR"
    status = resp.body["object"]
    assert (status["kind"], status["status"], status["code"], status["reason"]) == ("Status", "Failure", 410, "Expired")
    assert "too old resource version" in status["message"]
    # kubernetes_asyncio turns it into ApiException(410) when it is not watching forever.
    w = watch.Watch()
    with pytest.raises(ApiException) as err:
        async for _ in w.stream(core.list_namespaced_config_map, NS, resource_version=old, timeout_seconds=5):
            pass
    await w.close()
    assert err.value.status == 410
    # Relist, then watch from the list's version.
    listed = await core.list_namespaced_config_map(NS)
    assert {i.metadata.name for i in listed.items} >= {"c1", "c2"}
    fresh = EventCollector(
        core.list_namespaced_config_map,
        namespace=NS,
        resource_version=listed.metadata.resource_version,
        timeout_seconds=30,
    )
    watches.append(fresh)
    await core.create_namespaced_config_map(NS, configmap("c3"))
    await wait_for(lambda: fresh.named("c3"), "ADDED c3 after relist")
    assert fresh.named("c3")[0]["type"] == "ADDED"
    assert fresh.named("c1") == [] and fresh.error is None


async def test_watch_custom_objects(custom: k8s.CustomObjectsApi, watches: list[EventCollector]) -> None:
    listed = await custom.list_namespaced_custom_object(KUEUE, "v1beta2", NS, "workloads")
    w = EventCollector(
        custom.list_namespaced_custom_object,
        group=KUEUE,
        version="v1beta2",
        namespace=NS,
        plural="workloads",
        resource_version=listed["metadata"]["resourceVersion"],
        timeout_seconds=30,
    )
    watches.append(w)
    await custom.create_namespaced_custom_object(KUEUE, "v1beta2", NS, "workloads", workload("wlw"))
    await custom.patch_namespaced_custom_object(
        KUEUE, "v1beta2", NS, "workloads", "wlw", {"spec": {"priority": 5}}, _content_type=MERGE
    )
    await custom.delete_namespaced_custom_object(KUEUE, "v1beta2", NS, "workloads", "wlw")
    await wait_for(lambda: len(w.events) >= 3, "three workload events")
    assert w.types() == ["ADDED", "MODIFIED", "DELETED"]
    assert w.events[1]["object"]["spec"]["priority"] == 5
    assert all(e["object"]["apiVersion"] == f"{KUEUE}/v1beta2" for e in w.events)


# ---- writes: conflicts, errors ---------------------------------------------------------------------------------


async def test_stale_put_is_409_conflict(batch: k8s.BatchV1Api) -> None:
    created = await batch.create_namespaced_job(NS, job_body("stale"))
    await batch.patch_namespaced_job("stale", NS, {"metadata": {"labels": {"x": "1"}}}, _content_type=MERGE)
    created.metadata.labels["y"] = "2"
    with pytest.raises(ApiException) as err:
        await batch.replace_namespaced_job("stale", NS, created)
    assert err.value.status == 409
    body = status_of(err.value)
    assert body["reason"] == "Conflict"
    assert body["details"] == {"name": "stale", "group": "batch", "kind": "jobs"}
    assert body["message"] == (
        'Operation cannot be fulfilled on jobs.batch "stale": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    # Re-read and retry: accepted.
    fresh = await batch.read_namespaced_job("stale", NS)
    fresh.metadata.labels["y"] = "2"
    updated = await batch.replace_namespaced_job("stale", NS, fresh)
    assert updated.metadata.labels["y"] == "2" and updated.metadata.labels["x"] == "1"


async def test_error_status_bodies(api_client: k8s.ApiClient, batch: k8s.BatchV1Api) -> None:
    missing = await raw_request(api_client, "GET", f"/apis/batch/v1/namespaces/{NS}/jobs/q1")
    assert missing.status == 404
    assert missing.body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'jobs.batch "q1" not found',
        "reason": "NotFound",
        "details": {"name": "q1", "group": "batch", "kind": "jobs"},
        "code": 404,
    }
    await batch.create_namespaced_job(NS, job_body("dup"))
    with pytest.raises(ApiException) as err:
        await batch.create_namespaced_job(NS, job_body("dup"))
    exists = status_of(err.value)
    assert (err.value.status, exists["code"], exists["reason"]) == (409, 409, "AlreadyExists")
    assert exists["details"] == {"name": "dup", "group": "batch", "kind": "jobs"}
    assert exists["message"] == 'jobs.batch "dup" already exists'
    with pytest.raises(ApiException) as err:
        await batch.create_namespaced_job(NS, job_body("bad", parallelism=-1))
    invalid = status_of(err.value)
    assert (err.value.status, invalid["reason"]) == (422, "Invalid")
    assert invalid["details"]["kind"] == "Job"
    assert invalid["details"]["group"] == "batch"
    assert invalid["details"]["name"] == "bad"
    assert invalid["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: -1: must be greater than or equal to 0",
            "field": "spec.parallelism",
        }
    ]
    # The server's own words (kubectl reprints them as 'The Job "bad" is invalid: ...').
    assert invalid["message"] == (
        'Job.batch "bad" is invalid: spec.parallelism: Invalid value: -1: must be greater than or equal to 0'
    )
    no_containers = job_body("empty")
    no_containers["spec"]["template"]["spec"]["containers"] = []
    with pytest.raises(ApiException) as err:
        await batch.create_namespaced_job(NS, no_containers)
    assert err.value.status == 422
    fields = [c["field"] for c in status_of(err.value)["details"]["causes"]]
    assert "spec.template.spec.containers" in fields


async def test_create_with_resource_version_is_refused(api_client: k8s.ApiClient, core: k8s.CoreV1Api) -> None:
    read = await core.create_namespaced_config_map(NS, configmap("orig"))
    copy = api_client.sanitize_for_serialization(read)
    copy["metadata"]["name"] = "copy"
    resp = await raw_request(api_client, "POST", f"/api/v1/namespaces/{NS}/configmaps", copy)
    assert resp.status == 500
    assert resp.body["status"] == "Failure"
    assert resp.body["message"] == "resourceVersion should not be set on objects to be created"
    assert (await raw_request(api_client, "GET", f"/api/v1/namespaces/{NS}/configmaps/copy")).status == 404
    del copy["metadata"]["resourceVersion"]
    assert (await raw_request(api_client, "POST", f"/api/v1/namespaces/{NS}/configmaps", copy)).status == 201


async def test_uid_is_a_precondition_of_put_and_immutable_in_patch(
    api_client: k8s.ApiClient, core: k8s.CoreV1Api
) -> None:
    old = await core.create_namespaced_config_map(NS, configmap("reborn", data={"v": "1"}))
    await core.delete_namespaced_config_map("reborn", NS)
    new = await core.create_namespaced_config_map(NS, configmap("reborn", data={"v": "2"}))
    stale = api_client.sanitize_for_serialization(old)
    del stale["metadata"]["resourceVersion"]  # an unconditional PUT, but of the object before the re-create
    path = f"/api/v1/namespaces/{NS}/configmaps/reborn"
    resp = await raw_request(api_client, "PUT", path, stale)
    assert resp.status == 409
    assert resp.body["reason"] == "Conflict"
    assert resp.body["message"] == (
        f'Operation cannot be fulfilled on configmaps "reborn": Precondition failed: '
        f"UID in precondition: {old.metadata.uid}, UID in object meta: {new.metadata.uid}"
    )
    resp = await raw_request(api_client, "PATCH", path, {"metadata": {"uid": old.metadata.uid}}, content_type=MERGE)
    assert resp.status == 422
    assert resp.body["details"]["causes"][0]["field"] == "metadata.uid"
    assert "field is immutable" in resp.body["message"]
    assert (await core.read_namespaced_config_map("reborn", NS)).data == {"v": "2"}


async def test_delete_preconditions_and_dry_run(api_client: k8s.ApiClient, core: k8s.CoreV1Api) -> None:
    cm = await core.create_namespaced_config_map(NS, configmap("pre"))
    path = f"/api/v1/namespaces/{NS}/configmaps/pre"
    resp = await raw_request(api_client, "DELETE", path, {"preconditions": {"uid": "not-the-uid"}})
    assert resp.status == 409
    assert resp.body["reason"] == "Conflict"
    assert "Precondition failed: UID in precondition: not-the-uid" in resp.body["message"]
    resp = await raw_request(api_client, "DELETE", path, {"preconditions": {"resourceVersion": "1"}})
    assert resp.status == 409
    resp = await raw_request(api_client, "DELETE", path, query={"dryRun": "All"})
    assert resp.status == 200
    assert (await core.read_namespaced_config_map("pre", NS)).metadata.uid == cm.metadata.uid
    dry = await core.create_namespaced_config_map(NS, configmap("dry"), dry_run="All")
    assert dry.metadata.name == "dry"
    assert (await raw_request(api_client, "GET", f"/api/v1/namespaces/{NS}/configmaps/dry")).status == 404
    ok = {"preconditions": {"uid": cm.metadata.uid, "resourceVersion": cm.metadata.resource_version}}
    assert (await raw_request(api_client, "DELETE", path, ok)).status == 200
    assert (await raw_request(api_client, "GET", path)).status == 404


async def test_unauthorized_without_token(sim_cluster: SimCluster, tmp_path: Path) -> None:
    conf = await kube_configuration(sim_cluster, tmp_path, with_token=False)
    async with k8s.ApiClient(conf) as anonymous:
        with pytest.raises(ApiException) as err:
            await k8s.CoreV1Api(anonymous).list_namespace()
        assert err.value.status == 401
        body = status_of(err.value)
        assert body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }
        # The public endpoints answer without a token.
        assert (await k8s.VersionApi(anonymous).get_code()).major == "1"
    conf.api_key = {"authorization": "Bearer wrong-token"}
    async with k8s.ApiClient(conf) as wrong:
        with pytest.raises(ApiException) as err:
            await k8s.CoreV1Api(wrong).list_namespace()
        assert err.value.status == 401


# ---- validation ------------------------------------------------------------------------------------------------


async def test_job_with_ill_typed_field_is_400(api_client: k8s.ApiClient) -> None:
    body = job_body("typed", parallelism="two")
    resp = await raw_request(api_client, "POST", f"/apis/batch/v1/namespaces/{NS}/jobs", body)
    assert resp.status == 400
    assert resp.body["reason"] == "BadRequest"
    assert resp.body["message"] == (
        'Job in version "v1" cannot be handled as a Job: json: cannot unmarshal string into Go struct field '
        "JobSpec.spec.parallelism of type int32"
    )
    assert "causes" not in (resp.body.get("details") or {})
    assert (await raw_request(api_client, "GET", f"/apis/batch/v1/namespaces/{NS}/jobs/typed")).status == 404


async def test_job_with_malformed_quantity_is_400(api_client: k8s.ApiClient) -> None:
    body = job_body("qty")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1.5.3"}}
    resp = await raw_request(api_client, "POST", f"/apis/batch/v1/namespaces/{NS}/jobs", body)
    assert resp.status == 400
    assert resp.body["reason"] == "BadRequest"
    assert resp.body["message"] == (
        'Job in version "v1" cannot be handled as a Job: quantities must match the regular expression '
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )


async def test_custom_resource_type_error_is_422(api_client: k8s.ApiClient) -> None:
    resp = await raw_request(
        api_client, "POST", f"/apis/{KUEUE}/v1beta2/clusterqueues", cluster_queue("cq-bad", quota={"x": 1})
    )
    assert resp.status == 422
    assert resp.body["reason"] == "Invalid"
    assert resp.body["details"]["kind"] == "ClusterQueue"
    assert resp.body["details"]["group"] == KUEUE
    field = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
    assert field in [c["field"] for c in resp.body["details"]["causes"]]
    assert resp.body["message"].startswith(f'ClusterQueue.{KUEUE} "cq-bad" is invalid: ')
    assert "must be of type integer,string" in resp.body["message"]


async def test_unknown_fields_are_pruned_with_a_warning(api_client: k8s.ApiClient) -> None:
    cq = cluster_queue("cq-prune", bogusField=True)
    cq["spec"]["resourceGroups"][0]["extra"] = "x"
    resp = await raw_request(api_client, "POST", f"/apis/{KUEUE}/v1beta2/clusterqueues", cq)
    assert resp.status == 201
    assert "bogusField" not in resp.body["spec"]
    assert "extra" not in resp.body["spec"]["resourceGroups"][0]
    joined = " ".join(resp.warnings)
    assert 'unknown field \\"spec.bogusField\\"' in joined
    assert 'unknown field \\"spec.resourceGroups[0].extra\\"' in joined
    stored = await raw_request(api_client, "GET", f"/apis/{KUEUE}/v1beta2/clusterqueues/cq-prune")
    assert "bogusField" not in stored.body["spec"]
    strict = await raw_request(
        api_client,
        "POST",
        f"/apis/{KUEUE}/v1beta2/clusterqueues",
        cluster_queue("cq-strict", bogusField=True),
        query={"fieldValidation": "Strict"},
    )
    assert strict.status == 400
    assert 'unknown field "spec.bogusField"' in strict.body["message"]


# ---- patches ---------------------------------------------------------------------------------------------------


async def test_merge_patch(core: k8s.CoreV1Api) -> None:
    await core.create_namespaced_config_map(NS, configmap("mp", {"a": "1"}, {"x": "1", "y": "2"}))
    patched = await core.patch_namespaced_config_map(
        "mp", NS, {"metadata": {"labels": {"b": "2"}}, "data": {"x": None, "z": "3"}}, _content_type=MERGE
    )
    assert patched.data == {"y": "2", "z": "3"}
    assert patched.metadata.labels == {"a": "1", "b": "2"}


async def test_json_patch(core: k8s.CoreV1Api) -> None:
    await core.create_namespaced_config_map(NS, configmap("jp", data={"x": "1", "y": "2"}))
    ops = [
        {"op": "test", "path": "/data/x", "value": "1"},
        {"op": "replace", "path": "/data/x", "value": "10"},
        {"op": "remove", "path": "/data/y"},
        {"op": "add", "path": "/metadata/labels", "value": {"k": "v"}},
    ]
    patched = await core.patch_namespaced_config_map("jp", NS, ops)  # a list body is sent as json-patch
    assert patched.data == {"x": "10"}
    assert patched.metadata.labels == {"k": "v"}
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_config_map("jp", NS, [{"op": "test", "path": "/data/x", "value": "nope"}])
    assert err.value.status == 422
    unchanged = await core.read_namespaced_config_map("jp", NS)
    assert unchanged.metadata.resource_version == patched.metadata.resource_version


async def test_strategic_merge_patch_merges_containers_by_name(core: k8s.CoreV1Api) -> None:
    containers = [{"name": "a", "image": "busybox:1"}, {"name": "b", "image": "busybox:1"}]
    await core.create_namespaced_pod(NS, pod_body("smp", containers=containers))
    patch = {"metadata": {"labels": {"extra": "1"}}, "spec": {"containers": [{"name": "b", "image": "busybox:2"}]}}
    patched = await core.patch_namespaced_pod("smp", NS, patch, _content_type=STRATEGIC)
    assert [(c.name, c.image) for c in patched.spec.containers] == [("a", "busybox:1"), ("b", "busybox:2")]
    assert patched.metadata.labels == {"app": "smp", "extra": "1"}
    # The same body as a merge patch replaces the whole list, which a pod update may not do.
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod("smp", NS, patch, _content_type=MERGE)
    assert err.value.status == 422
    assert status_of(err.value)["details"]["causes"][0]["field"] == "spec"
    # null deletes a map key.
    body = {"metadata": {"labels": {"extra": None}}}
    dropped = await core.patch_namespaced_pod("smp", NS, body, _content_type=STRATEGIC)
    assert dropped.metadata.labels == {"app": "smp"}


async def test_strategic_merge_patch_list_directives(core: k8s.CoreV1Api) -> None:
    owners = [await core.create_namespaced_config_map(NS, configmap(f"owner-{i}")) for i in range(3)]
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": o.metadata.name, "uid": o.metadata.uid} for o in owners]
    body = configmap("dependent")
    body["metadata"]["ownerReferences"] = refs[:2]
    await core.create_namespaced_config_map(NS, body)
    # ownerReferences merge by uid: a new entry is added, "$patch: delete" removes one by its key.
    patch = {"metadata": {"ownerReferences": [refs[2], {"uid": refs[0]["uid"], "$patch": "delete"}]}}
    patched = await core.patch_namespaced_config_map("dependent", NS, patch, _content_type=STRATEGIC)
    assert [r.name for r in patched.metadata.owner_references] == ["owner-1", "owner-2"]
    # The same list as a merge patch replaces it.
    merged = await core.patch_namespaced_config_map(
        "dependent", NS, {"metadata": {"ownerReferences": [refs[0]]}}, _content_type=MERGE
    )
    assert [r.name for r in merged.metadata.owner_references] == ["owner-0"]


async def test_strategic_merge_patch_on_custom_resource_is_415(custom: k8s.CustomObjectsApi) -> None:
    await custom.create_cluster_custom_object(KUEUE, "v1beta2", "resourceflavors", flavor("f1"))
    with pytest.raises(ApiException) as err:
        await custom.patch_cluster_custom_object(
            KUEUE, "v1beta2", "resourceflavors", "f1", {"metadata": {"labels": {"a": "b"}}}, _content_type=STRATEGIC
        )
    assert err.value.status == 415
    assert status_of(err.value)["reason"] == "UnsupportedMediaType"


async def test_server_side_apply_ownership_and_conflicts(core: k8s.CoreV1Api, api_client: k8s.ApiClient) -> None:
    path = f"/api/v1/namespaces/{NS}/configmaps/ssa"
    applied = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1", "b": "1"}}
    first = await raw_request(api_client, "PATCH", path, applied, content_type=APPLY, query={"fieldManager": "one"})
    assert first.status == 201
    managers = {m["manager"]: m for m in first.body["metadata"]["managedFields"]}
    assert managers["one"]["operation"] == "Apply"
    assert managers["one"]["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}}}
    # Another manager changing a field "one" owns: 409 naming the field.
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "2"}}
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_config_map("ssa", NS, other, field_manager="two", _content_type=APPLY)
    assert err.value.status == 409
    conflict = status_of(err.value)
    assert conflict["reason"] == "Conflict"
    assert [c["field"] for c in conflict["details"]["causes"]] == [".data.a"]
    assert conflict["details"]["causes"][0]["reason"] == "FieldManagerConflict"
    assert 'conflict with "one"' in conflict["message"]
    # Applying the same value is no conflict (shared ownership); force takes the field over.
    same = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"b": "1"}}
    shared = await core.patch_namespaced_config_map("ssa", NS, same, field_manager="two", _content_type=APPLY)
    assert shared.data == {"a": "1", "b": "1"}
    forced = await core.patch_namespaced_config_map(
        "ssa", NS, other, field_manager="two", force=True, _content_type=APPLY
    )
    assert forced.data == {"a": "2", "b": "1"}
    owners = {m.manager: m.fields_v1 for m in forced.metadata.managed_fields}
    assert "f:a" in owners["two"]["f:data"]
    assert "f:a" not in owners["one"]["f:data"]
    # "one" re-applies with neither "a" nor "b": "a" stays ("two" owns it now), "b" goes (only "one" applied it
    # still; "two"'s last apply dropped it).
    again = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"c": "3"}}
    last = await core.patch_namespaced_config_map("ssa", NS, again, field_manager="one", _content_type=APPLY)
    assert last.data == {"a": "2", "c": "3"}
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_config_map("ssa", NS, again, _content_type=APPLY)
    assert err.value.status == 422  # apply needs a field manager


# ---- status subresource and generation ------------------------------------------------------------------------


async def test_status_subresource_and_generation(batch: k8s.BatchV1Api, api_client: k8s.ApiClient) -> None:
    job = await batch.create_namespaced_job(NS, job_body("st", parallelism=2, completions=4))
    assert job.metadata.generation == 1
    base = f"/apis/batch/v1/namespaces/{NS}/jobs/st"
    # A status write ignores spec and leaves the generation.
    resp = await raw_request(
        api_client,
        "PATCH",
        f"{base}/status",
        {"spec": {"parallelism": 3}, "status": {"active": 2}},
        content_type=MERGE,
    )
    assert resp.status == 200
    assert resp.body["status"]["active"] == 2
    assert resp.body["spec"]["parallelism"] == 2
    assert resp.body["metadata"]["generation"] == 1
    # A main-resource write ignores status; labels leave the generation.
    resp = await raw_request(
        api_client,
        "PATCH",
        base,
        {"metadata": {"labels": {"seen": "yes"}}, "status": {"active": 0, "succeeded": 9}},
        content_type=MERGE,
    )
    assert resp.body["status"] == {"active": 2}
    assert resp.body["metadata"]["labels"]["seen"] == "yes"
    assert resp.body["metadata"]["generation"] == 1
    # A spec change moves the generation.
    resp = await raw_request(api_client, "PATCH", base, {"spec": {"parallelism": 3}}, content_type=MERGE)
    assert resp.body["spec"]["parallelism"] == 3
    assert resp.body["metadata"]["generation"] == 2
    # PUT on /status with the typed client: same rules.
    current = await batch.read_namespaced_job_status("st", NS)
    current.spec.parallelism = 1
    current.status.active = 1
    updated = await batch.replace_namespaced_job_status("st", NS, current)
    assert (updated.spec.parallelism, updated.status.active, updated.metadata.generation) == (3, 1, 2)
    # Job status rules: Complete=True needs SuccessCriteriaMet=True, startTime and completionTime.
    bad = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    resp = await raw_request(api_client, "PATCH", f"{base}/status", bad, content_type=MERGE)
    assert resp.status == 422
    needs = "cannot set Complete=True condition without the SuccessCriteriaMet=true condition"
    assert any(needs in c["message"] for c in resp.body["details"]["causes"])
    assert "status.startTime" in [c["field"] for c in resp.body["details"]["causes"]]
    assert "status.completionTime" in [c["field"] for c in resp.body["details"]["causes"]]
    bad = {"status": {"conditions": [{"type": "Failed", "status": "True"}], "startTime": "2026-01-01T00:00:00Z"}}
    resp = await raw_request(api_client, "PATCH", f"{base}/status", bad, content_type=MERGE)
    assert resp.status == 422
    assert "cannot set Failed=True condition without the FailureTarget=true condition" in resp.body["message"]
    # In an order the server accepts: SuccessCriteriaMet first, then Complete with the times.
    started, done = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"
    criteria = {"type": "SuccessCriteriaMet", "status": "True"}
    step1 = {"status": {"conditions": [criteria], "startTime": started}}
    assert (await raw_request(api_client, "PATCH", f"{base}/status", step1, content_type=MERGE)).status == 200
    complete = {"type": "Complete", "status": "True"}
    # (A finished Job counts no active pods: the real server refuses active>0 with Complete.)
    step2 = {"status": {"conditions": [criteria, complete], "completionTime": done, "active": 0}}
    resp = await raw_request(api_client, "PATCH", f"{base}/status", step2, content_type=MERGE)
    assert resp.status == 200
    assert [c["type"] for c in resp.body["status"]["conditions"]] == ["SuccessCriteriaMet", "Complete"]


async def test_job_managed_by_is_immutable(batch: k8s.BatchV1Api, api_client: k8s.ApiClient) -> None:
    await batch.create_namespaced_job(NS, job_body("mb", managedBy="example.com/dispatcher"))
    resp = await raw_request(
        api_client,
        "PATCH",
        f"/apis/batch/v1/namespaces/{NS}/jobs/mb",
        {"spec": {"managedBy": "other.io/x"}},
        content_type=MERGE,
    )
    assert resp.status == 422
    assert resp.body["details"]["causes"][0]["field"] == "spec.managedBy"
    assert 'spec.managedBy: Invalid value: "other.io/x": field is immutable' in resp.body["message"]


async def test_custom_resource_status_subresource(custom: k8s.CustomObjectsApi) -> None:
    await custom.create_namespaced_custom_object(KUEUE, "v1beta2", NS, "workloads", workload("wls"))
    cond = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": "waiting",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    patched = await custom.patch_namespaced_custom_object_status(
        KUEUE,
        "v1beta2",
        NS,
        "workloads",
        "wls",
        {"spec": {"queueName": "elsewhere"}, "status": {"conditions": [cond]}},
        _content_type=MERGE,
    )
    assert patched["spec"]["queueName"] == "user-queue"
    assert patched["status"]["conditions"][0]["reason"] == "Pending"
    assert patched["metadata"]["generation"] == 1
    main = await custom.patch_namespaced_custom_object(
        KUEUE,
        "v1beta2",
        NS,
        "workloads",
        "wls",
        {"spec": {"queueName": "elsewhere"}, "status": None},
        _content_type=MERGE,
    )
    assert main["spec"]["queueName"] == "elsewhere"
    assert main["status"]["conditions"][0]["reason"] == "Pending"
    assert main["metadata"]["generation"] == 2


# ---- delete ----------------------------------------------------------------------------------------------------


async def test_delete_with_finalizer_waits_for_it(
    core: k8s.CoreV1Api, api_client: k8s.ApiClient, watches: list[EventCollector]
) -> None:
    body = configmap("fin")
    body["metadata"]["finalizers"] = ["example.com/keep"]
    created = await core.create_namespaced_config_map(NS, body)
    w = EventCollector(
        core.list_namespaced_config_map,
        namespace=NS,
        resource_version=created.metadata.resource_version,
        timeout_seconds=30,
    )
    watches.append(w)
    resp = await raw_request(api_client, "DELETE", f"/api/v1/namespaces/{NS}/configmaps/fin")
    assert resp.status == 200
    assert resp.body["kind"] == "ConfigMap"
    assert resp.body["metadata"]["deletionTimestamp"]
    assert resp.body["metadata"]["finalizers"] == ["example.com/keep"]
    still = await core.read_namespaced_config_map("fin", NS)
    assert still.metadata.deletion_timestamp is not None
    # Adding a finalizer to an object being deleted is forbidden.
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_config_map(
            "fin", NS, {"metadata": {"finalizers": ["example.com/keep", "example.com/more"]}}, _content_type=MERGE
        )
    assert err.value.status == 422
    await core.patch_namespaced_config_map("fin", NS, {"metadata": {"finalizers": None}}, _content_type=MERGE)
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_config_map("fin", NS)
    assert err.value.status == 404
    await wait_for(lambda: [e["type"] for e in w.named("fin")] == ["MODIFIED", "DELETED"], "MODIFIED then DELETED")


async def _job_with_pods(batch: k8s.BatchV1Api, core: k8s.CoreV1Api, name: str) -> Obj:
    job = await batch.api_client.call_api(
        f"/apis/batch/v1/namespaces/{NS}/jobs",
        "POST",
        body=job_body(name),
        header_params={"Content-Type": "application/json"},
        auth_settings=["BearerToken"],
        response_types_map={201: "object"},
        _return_http_data_only=True,
    )
    assert isinstance(job, dict)
    for i in range(2):
        await core.create_namespaced_pod(NS, pod_body(f"{name}-pod-{i}", owner=job))
    return job


async def _pod_names(core: k8s.CoreV1Api, prefix: str) -> set[str]:
    pods = await core.list_namespaced_pod(NS)
    return {p.metadata.name for p in pods.items if p.metadata.name.startswith(prefix)}


async def _exists(call: Any) -> bool:
    try:
        await call
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


async def test_job_delete_default_orphans_pods(
    batch: k8s.BatchV1Api, core: k8s.CoreV1Api, api_client: k8s.ApiClient, watches: list[EventCollector]
) -> None:
    job = await _job_with_pods(batch, core, "orph")
    w = EventCollector(
        batch.list_namespaced_job,
        namespace=NS,
        resource_version=job["metadata"]["resourceVersion"],
        timeout_seconds=30,
    )
    watches.append(w)
    resp = await raw_request(api_client, "DELETE", f"/apis/batch/v1/namespaces/{NS}/jobs/orph")
    assert resp.status == 200
    assert resp.body["kind"] == "Job"
    assert resp.body["metadata"]["deletionTimestamp"]
    assert "orphan" in resp.body["metadata"]["finalizers"]

    async def job_gone() -> bool:
        return not await _exists(batch.read_namespaced_job("orph", NS))

    await _wait_async(job_gone, "the orphaned job to go")
    pods = [p for p in (await core.list_namespaced_pod(NS)).items if p.metadata.name.startswith("orph-pod-")]
    assert len(pods) == 2
    assert all(not p.metadata.owner_references for p in pods)
    await wait_for(lambda: "DELETED" in w.types(), "the DELETED event of the job")
    assert w.types() == ["MODIFIED", "DELETED"]
    assert "orphan" in w.events[0]["object"]["metadata"]["finalizers"]


async def test_job_delete_background_removes_pods(
    batch: k8s.BatchV1Api, core: k8s.CoreV1Api, api_client: k8s.ApiClient
) -> None:
    job = await _job_with_pods(batch, core, "bg")
    resp = await raw_request(
        api_client, "DELETE", f"/apis/batch/v1/namespaces/{NS}/jobs/bg", {"propagationPolicy": "Background"}
    )
    assert resp.status == 200
    assert resp.body["kind"] == "Status"
    assert resp.body["status"] == "Success"
    assert resp.body["details"] == {"name": "bg", "group": "batch", "kind": "jobs", "uid": job["metadata"]["uid"]}
    assert not await _exists(batch.read_namespaced_job("bg", NS))

    async def pods_gone() -> bool:
        return not await _pod_names(core, "bg-pod-")

    await _wait_async(pods_gone, "the job's pods to be deleted")


async def test_job_delete_foreground_removes_pods_first(
    batch: k8s.BatchV1Api, core: k8s.CoreV1Api, api_client: k8s.ApiClient
) -> None:
    await _job_with_pods(batch, core, "fg")
    body = k8s.V1DeleteOptions(propagation_policy="Foreground")
    resp = await raw_request(
        api_client, "DELETE", f"/apis/batch/v1/namespaces/{NS}/jobs/fg", api_client.sanitize_for_serialization(body)
    )
    assert resp.status == 200
    assert resp.body["kind"] == "Job"
    assert resp.body["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in resp.body["metadata"]["finalizers"]

    async def all_gone() -> bool:
        return not await _pod_names(core, "fg-pod-") and not await _exists(batch.read_namespaced_job("fg", NS))

    await _wait_async(all_gone, "pods and then the job to go")


async def test_job_delete_orphan_via_typed_client_keeps_pods(batch: k8s.BatchV1Api, core: k8s.CoreV1Api) -> None:
    await _job_with_pods(batch, core, "keep")
    await batch.delete_namespaced_job("keep", NS, propagation_policy="Orphan")

    async def job_gone() -> bool:
        return not await _exists(batch.read_namespaced_job("keep", NS))

    await _wait_async(job_gone, "the job to go")
    assert await _pod_names(core, "keep-pod-") == {"keep-pod-0", "keep-pod-1"}


async def test_delete_collection(core: k8s.CoreV1Api) -> None:
    for i in range(3):
        await core.create_namespaced_config_map(NS, configmap(f"dc-{i}", {"group": "drop"}))
    await core.create_namespaced_config_map(NS, configmap("dc-keep", {"group": "keep"}))
    await core.delete_collection_namespaced_config_map(NS, label_selector="group=drop")
    left = await core.list_namespaced_config_map(NS, label_selector="group")
    assert [i.metadata.name for i in left.items] == ["dc-keep"]
    # Namespaces do not offer deletecollection.
    with pytest.raises(ApiException) as err:
        await core.api_client.call_api("/api/v1/namespaces", "DELETE", auth_settings=["BearerToken"])
    assert err.value.status == 405
    assert status_of(err.value)["reason"] == "MethodNotAllowed"
    assert (await core.read_namespace(NS)).status.phase == "Active"


async def _wait_async(predicate: Callable[[], Any], what: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)
