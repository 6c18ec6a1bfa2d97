"""The simulated Kueue end to end, in process: Jobs through the API, the kube controllers running pods.

Every test builds a SimCluster with its own Kueue objects, creates Jobs through the same API a client uses,
and waits (polling the store with short sleeps, bounded by a timeout) for what a real cluster would show.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from simclient import wait_for

from kubesim.cluster import ClusterOptions, SimCluster
from kubesim.constants import RUN_SECONDS
from kubesim.controllers.kueue import KueueController
from kubesim.topology import HAMI_KUEUE_CONFIG, NodeGroup

Obj = dict[str, Any]
WL = "workloads.kueue.x-k8s.io"


# ---- helpers ---------------------------------------------------------------------------------------------------


def flavor(name: str, labels: dict[str, str] | None = None, tolerations: list[Obj] | None = None) -> Obj:
    spec: Obj = {}
    if labels:
        spec["nodeLabels"] = labels
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(
    name: str,
    quotas: dict[str, str],
    *,
    flavor_name: str = "default-flavor",
    cohort: str | None = None,
    strategy: str = "BestEffortFIFO",
    preemption: Obj | None = None,
    stop_policy: str | None = None,
    namespace_selector: Obj | None = None,
) -> Obj:
    spec: Obj = {
        "namespaceSelector": {} if namespace_selector is None else namespace_selector,
        "queueingStrategy": strategy,
        "resourceGroups": [
            {
                "coveredResources": list(quotas),
                "flavors": [
                    {"name": flavor_name, "resources": [{"name": r, "nominalQuota": q} for r, q in quotas.items()]}
                ],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = preemption
    if stop_policy:
        spec["stopPolicy"] = stop_policy
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(namespace: str, name: str, cq: str) -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def priority_class(name: str, value: int) -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def job(
    name: str,
    *,
    queue: str | None = "user-queue",
    namespace: str = "default",
    cpu: str = "1",
    run_seconds: float = 0.2,
    parallelism: int = 1,
    priority: str | None = None,
    extra_requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
) -> Obj:
    labels: dict[str, str] = {}
    if queue:
        labels["kueue.x-k8s.io/queue-name"] = queue
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    resources: Obj = {"requests": {"cpu": cpu, **(extra_requests or {})}}
    if limits:
        resources["limits"] = limits
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "metadata": {"annotations": {RUN_SECONDS: str(run_seconds)}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "resources": resources}],
                },
            },
        },
    }


class Sim:
    """A started SimCluster with shortcuts to its store."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.client = cluster.client

    @property
    def kueue(self) -> KueueController:
        controller = self.cluster.controllers["kueue"]
        assert isinstance(controller, KueueController)
        return controller

    def apply(self, *objs: Obj) -> None:
        for obj in objs:
            self.cluster.apply(obj)

    def job(self, name: str, namespace: str = "default") -> Obj | None:
        return self.store.get("jobs.batch", namespace, name)

    def workload_of(self, name: str, namespace: str = "default") -> Obj | None:
        j = self.job(name, namespace)
        uid = j["metadata"]["uid"] if j else None
        for wl in self.store.list(WL, namespace):
            for ref in wl["metadata"].get("ownerReferences") or ():
                if ref.get("name") == name and (uid is None or ref.get("uid") == uid):
                    return wl
        return None

    def cq(self, name: str) -> Obj | None:
        return self.store.get("clusterqueues.kueue.x-k8s.io", "", name)

    def lq(self, namespace: str, name: str) -> Obj | None:
        return self.store.get("localqueues.kueue.x-k8s.io", namespace, name)


def cond(obj: Obj | None, ctype: str) -> Obj | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype:
            return c  # type: ignore[no-any-return]
    return None


def is_true(obj: Obj | None, ctype: str) -> bool:
    c = cond(obj, ctype)
    return c is not None and c.get("status") == "True"


def admitted(sim: Sim, name: str, namespace: str = "default") -> bool:
    return is_true(sim.workload_of(name, namespace), "Admitted")


def running(sim: Sim, name: str, namespace: str = "default") -> bool:
    j = sim.job(name, namespace)
    return bool(j and not j["spec"].get("suspend") and (j.get("status") or {}).get("active"))


def completed(sim: Sim, name: str, namespace: str = "default") -> bool:
    return is_true(sim.job(name, namespace), "Complete")


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    cluster = SimCluster("worker", ClusterOptions(default_run_seconds=0.2))
    cluster.add_nodes(NodeGroup(prefix="cpu", count=4, cpu="8", memory="32Gi"))
    cluster.apply(flavor("default-flavor"))
    await cluster.start()
    try:
        yield Sim(cluster)
    finally:
        await cluster.stop()


# ---- tests -----------------------------------------------------------------------------------------------------


async def test_admits_within_quota_and_job_runs_to_completion(sim: Sim) -> None:
    sim.apply(cluster_queue("cq", {"cpu": "4", "memory": "8Gi"}), local_queue("default", "user-queue", "cq"))
    created = sim.client.create(job("j1", cpu="1"))
    # The webhook suspended it at creation.
    assert created["spec"]["suspend"] is True
    wl = await wait_for(lambda: sim.workload_of("j1"), "the Workload")
    uid = created["metadata"]["uid"]
    assert wl["metadata"]["name"].startswith("job-j1-") and len(wl["metadata"]["name"]) == len("job-j1-") + 5
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == uid
    assert wl["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "j1",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert wl["spec"]["queueName"] == "user-queue"
    assert wl["spec"]["podSets"][0]["name"] == "main" and wl["spec"]["podSets"][0]["count"] == 1
    assert wl["spec"]["priority"] == 0
    await wait_for(lambda: admitted(sim, "j1"), "admission")
    wl = sim.workload_of("j1")
    assert wl is not None
    assert wl["status"]["admission"] == {
        "clusterQueue": "cq",
        "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": "1"}, "count": 1}
        ],
    }
    qr = cond(wl, "QuotaReserved")
    assert qr is not None and (qr["reason"], qr["message"]) == ("QuotaReserved", "Quota reserved in ClusterQueue cq")
    ad = cond(wl, "Admitted")
    assert ad is not None and (ad["reason"], ad["message"]) == ("Admitted", "The workload is admitted")
    await wait_for(lambda: completed(sim, "j1"), "the Job to complete")
    fin = await wait_for(lambda: cond(sim.workload_of("j1"), "Finished"), "Finished")
    assert (fin["status"], fin["reason"], fin["message"]) == (
        "True",
        "Succeeded",
        "Reached expected number of succeeded pods",
    )
    # The started Job carried Kueue's pod set info.
    labels = sim.job("j1")["spec"]["template"]["metadata"]["labels"]  # type: ignore[index]
    assert labels["kueue.x-k8s.io/podset"] == "main"
    assert labels["kueue.x-k8s.io/local-queue-name"] == "user-queue"
    assert labels["kueue.x-k8s.io/cluster-queue-name"] == "cq"
    # The finalizer is gone once finished, and the quota is free again.
    await wait_for(lambda: not sim.workload_of("j1")["metadata"].get("finalizers"), "finalizer removal")  # type: ignore[index]
    await wait_for(lambda: (sim.cq("cq") or {}).get("status", {}).get("reservingWorkloads") == 0, "cq status")


async def test_queues_beyond_quota_and_admits_when_quota_frees(sim: Sim) -> None:
    sim.apply(cluster_queue("cq", {"cpu": "2"}), local_queue("default", "user-queue", "cq"))
    for name in ("a", "b", "c"):
        sim.client.create(job(name, cpu="1", run_seconds=0.5))
        await wait_for(lambda n=name: sim.workload_of(n), f"workload {name}")  # type: ignore[misc]
    await wait_for(lambda: admitted(sim, "a") and admitted(sim, "b"), "a and b admitted")
    pending = await wait_for(lambda: cond(sim.workload_of("c"), "QuotaReserved"), "c pending condition")
    assert pending["status"] == "False"
    assert pending["reason"] == "Pending"
    assert pending["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, "
        "1 more needed"
    )
    assert sim.job("c")["spec"]["suspend"] is True  # type: ignore[index]
    assert sim.workload_of("c")["status"]["resourceRequests"] == [{"name": "main", "resources": {"cpu": "1"}}]  # type: ignore[index]
    # As soon as a or b finishes, c gets its quota.
    await wait_for(lambda: admitted(sim, "c"), "c admitted after quota frees", timeout=10)
    await wait_for(lambda: completed(sim, "c"), "c completes")


async def test_borrows_inside_a_cohort(sim: Sim) -> None:
    sim.apply(
        cluster_queue("cq-a", {"cpu": "2"}, cohort="org"),
        cluster_queue("cq-b", {"cpu": "2"}, cohort="org"),
        local_queue("default", "user-queue", "cq-a"),
    )
    sim.client.create(job("big", cpu="3", run_seconds=1.0))
    await wait_for(lambda: admitted(sim, "big"), "borrowing admission")
    await wait_for(lambda: running(sim, "big"), "the borrowing job runs")
    status = await wait_for(
        lambda: (sim.cq("cq-a") or {}).get("status", {}).get("reservingWorkloads") == 1 and sim.cq("cq-a"),
        "cq-a status",
    )
    assert status["status"]["flavorsReservation"] == [
        {"name": "default-flavor", "resources": [{"name": "cpu", "total": "3", "borrowed": "1"}]}
    ]
    # Beyond what the cohort has, nothing more is admitted.
    sim.client.create(job("more", cpu="2"))
    pending = await wait_for(lambda: cond(sim.workload_of("more"), "QuotaReserved"), "pending")
    assert pending["reason"] == "Pending"
    assert "insufficient unused quota for cpu in flavor default-flavor, 1 more needed" in pending["message"]


async def test_releases_quota_when_the_job_is_deleted(sim: Sim) -> None:
    sim.apply(cluster_queue("cq", {"cpu": "1"}), local_queue("default", "user-queue", "cq"))
    sim.client.create(job("long", cpu="1", run_seconds=60))
    await wait_for(lambda: running(sim, "long"), "long runs")
    sim.client.create(job("next", cpu="1"))
    await wait_for(lambda: cond(sim.workload_of("next"), "QuotaReserved"), "next is pending")
    assert not admitted(sim, "next")
    rt = sim.client.rt("batch", "Job")
    sim.client.delete(rt, "default", "long", propagation="Background")
    await wait_for(lambda: admitted(sim, "next"), "next admitted after the delete")
    await wait_for(
        lambda: (
            not any(
                ref.get("name") == "long"
                for wl in sim.store.list(WL, "default")
                for ref in wl["metadata"]["ownerReferences"]
            )
        ),
        "the deleted job's workload to go",
    )


async def test_orphan_delete_of_a_job_finishes_its_workload(sim: Sim) -> None:
    """A Job deleted without a body is orphan-deleted (batch/v1's default): the Workload loses its owner and
    Kueue finishes it (OwnerNotFound), releasing the quota."""
    sim.apply(cluster_queue("cq", {"cpu": "1"}), local_queue("default", "user-queue", "cq"))
    sim.client.create(job("long", cpu="1", run_seconds=60))
    await wait_for(lambda: running(sim, "long"), "long runs")
    wl_name = sim.workload_of("long")["metadata"]["name"]  # type: ignore[index]
    sim.cluster.api.delete(sim.client.rt("batch", "Job"), "v1", "default", "long", None)
    sim.client.create(job("next", cpu="1"))
    await wait_for(lambda: admitted(sim, "next"), "next admitted")
    orphan = sim.store.get(WL, "default", wl_name)
    assert orphan is not None
    fin = cond(orphan, "Finished")
    assert fin is not None and (fin["reason"], fin["message"]) == (
        "OwnerNotFound",
        "The workload's owner no longer exists",
    )


async def test_preempts_lower_priority_and_readmits_it_later(sim: Sim) -> None:
    sim.apply(
        priority_class("low", 100),
        priority_class("high", 1000),
        cluster_queue("cq", {"cpu": "2"}, preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue("default", "user-queue", "cq"),
    )
    sim.client.create(job("low", cpu="2", run_seconds=0.5, priority="low"))
    await wait_for(lambda: running(sim, "low"), "low runs")
    low_wl = sim.workload_of("low")
    assert low_wl is not None and low_wl["spec"]["priority"] == 100
    assert low_wl["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "low",
    }
    sim.client.create(job("high", cpu="2", run_seconds=0.5, priority="high"))
    high_uid = (await wait_for(lambda: sim.workload_of("high"), "high workload"))["metadata"]["uid"]
    evicted = await wait_for(lambda: cond(sim.workload_of("low"), "Evicted"), "low evicted")
    preempted = cond(sim.workload_of("low"), "Preempted")
    assert evicted["reason"] == "Preempted"
    assert preempted is not None and preempted["reason"] == "InClusterQueue"
    high_job_uid = sim.job("high")["metadata"]["uid"]  # type: ignore[index]
    assert preempted["message"] == (
        f"Preempted to accommodate a workload (UID: {high_uid}, JobUID: {high_job_uid}) due to prioritization in "
        "the ClusterQueue; preemptor path: /cq; preemptee path: /cq"
    )
    await wait_for(lambda: sim.job("low")["spec"]["suspend"] is True, "low suspended again")  # type: ignore[index]
    await wait_for(lambda: admitted(sim, "high"), "high admitted")
    low = sim.workload_of("low")
    requeued = cond(low, "Requeued")
    assert requeued is not None and (requeued["status"], requeued["reason"]) == ("True", "Preempted")
    # The preempted Job's template was restored (no Kueue labels) while it waits.
    template_labels = sim.job("low")["spec"]["template"]["metadata"].get("labels") or {}  # type: ignore[index]
    assert "kueue.x-k8s.io/podset" not in template_labels
    await wait_for(lambda: completed(sim, "high"), "high completes")
    await wait_for(lambda: admitted(sim, "low"), "low readmitted")
    await wait_for(lambda: completed(sim, "low"), "low completes", timeout=15)
    assert cond(sim.workload_of("low"), "Evicted")["status"] == "False"  # type: ignore[index]


async def test_strict_fifo_head_blocks_but_best_effort_does_not(sim: Sim) -> None:
    sim.apply(
        cluster_queue("strict", {"cpu": "2"}, strategy="StrictFIFO"),
        cluster_queue("besteffort", {"cpu": "2"}, strategy="BestEffortFIFO"),
        local_queue("default", "strict-q", "strict"),
        local_queue("default", "be-q", "besteffort"),
    )
    for q in ("strict-q", "be-q"):
        sim.client.create(job(f"{q}-running", queue=q, cpu="1", run_seconds=3))
        await wait_for(lambda q=q: admitted(sim, f"{q}-running"), "first admitted")  # type: ignore[misc]
        sim.client.create(job(f"{q}-big", queue=q, cpu="2", run_seconds=0.2))
        await wait_for(lambda q=q: cond(sim.workload_of(f"{q}-big"), "QuotaReserved"), "big pending")  # type: ignore[misc]
        sim.client.create(job(f"{q}-small", queue=q, cpu="1", run_seconds=0.2))
    await wait_for(lambda: admitted(sim, "be-q-small"), "best effort admits the small job behind the big one")
    await asyncio.sleep(0.3)
    assert not admitted(sim, "strict-q-small"), "StrictFIFO must not admit past its head"
    assert not admitted(sim, "strict-q-big")
    # Once the running job ends, the strict head goes first, then the small one.
    await wait_for(lambda: admitted(sim, "strict-q-big"), "strict head admitted", timeout=10)
    await wait_for(lambda: admitted(sim, "strict-q-small"), "strict small admitted", timeout=10)


async def test_missing_local_queue_is_misconfigured_until_created(sim: Sim) -> None:
    sim.apply(cluster_queue("cq", {"cpu": "2"}))
    sim.client.create(job("orphan", queue="nope"))
    pending = await wait_for(lambda: cond(sim.workload_of("orphan"), "QuotaReserved"), "inadmissible condition")
    assert (pending["status"], pending["reason"], pending["message"]) == (
        "False",
        "Inadmissible",
        "LocalQueue nope doesn't exist",
    )
    sim.apply(local_queue("default", "nope", "cq"))
    await wait_for(lambda: admitted(sim, "orphan"), "admitted once the LocalQueue exists")


async def test_inactive_and_stopped_cluster_queues(sim: Sim) -> None:
    sim.apply(
        cluster_queue("nofl", {"cpu": "2"}, flavor_name="missing"),
        cluster_queue("held", {"cpu": "2"}, stop_policy="Hold"),
        local_queue("default", "nofl-q", "nofl"),
        local_queue("default", "held-q", "held"),
    )
    status = await wait_for(lambda: cond(sim.cq("nofl"), "Active"), "cq Active condition")
    assert (status["status"], status["reason"], status["message"]) == (
        "False",
        "FlavorNotFound",
        "Can't admit new workloads: references missing ResourceFlavor(s): missing.",
    )
    held = await wait_for(lambda: cond(sim.cq("held"), "Active"), "held Active condition")
    assert (held["reason"], held["message"]) == ("Stopped", "Can't admit new workloads: is stopped.")
    sim.client.create(job("j-nofl", queue="nofl-q"))
    sim.client.create(job("j-held", queue="held-q"))
    c = await wait_for(lambda: cond(sim.workload_of("j-nofl"), "QuotaReserved"), "inactive condition")
    assert (c["reason"], c["message"]) == ("Inadmissible", "ClusterQueue nofl is inactive")  # Kueue v0.17
    lq_active = await wait_for(lambda: cond(sim.lq("default", "nofl-q"), "Active"), "lq Active")
    assert (lq_active["status"], lq_active["reason"]) == ("False", "ClusterQueueIsInactive")
    # Creating the flavor activates the queue and admits the job; releasing the hold does the same.
    sim.apply(flavor("missing"))
    await wait_for(lambda: admitted(sim, "j-nofl"), "admitted once the flavor exists")
    cqobj = sim.cq("held")
    assert cqobj is not None
    cqobj = {**cqobj, "spec": {**cqobj["spec"], "stopPolicy": "None"}}
    sim.client.update(cqobj)
    await wait_for(lambda: admitted(sim, "j-held"), "admitted once the hold is released")


async def test_namespace_selector_mismatch(sim: Sim) -> None:
    sim.apply(
        cluster_queue("cq", {"cpu": "2"}, namespace_selector={"matchLabels": {"team": "x"}}),
        local_queue("default", "user-queue", "cq"),
    )
    sim.client.create(job("j"))
    c = await wait_for(lambda: cond(sim.workload_of("j"), "QuotaReserved"), "namespace mismatch")
    # Kueue v0.17's scheduler: Pending, and a capital W (the newer granular reasons say Misconfigured).
    assert (c["reason"], c["message"]) == ("Pending", "Workload namespace doesn't match ClusterQueue selector")


async def test_hami_resource_transformation_from_the_configmap(sim: Sim) -> None:
    gpu_quota = {"cpu": "8", "nvidia.com/gpu": "4", "nvidia.com/total-gpumem": "4000"}
    sim.apply(cluster_queue("cq", gpu_quota), local_queue("default", "user-queue", "cq"))
    sim.cluster.set_kueue_config(HAMI_KUEUE_CONFIG)
    req = {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000"}
    sim.client.create(job("gpu", cpu="1", extra_requests=req, limits=req))
    await wait_for(lambda: admitted(sim, "gpu"), "gpu job admitted")
    psa = sim.workload_of("gpu")["status"]["admission"]["podSetAssignments"][0]  # type: ignore[index]
    # 2 GPUs x 1000 gpumem = 2000 total-gpumem, printed as Kueue's canonical quantity.
    assert psa["resourceUsage"] == {"cpu": "1", "nvidia.com/gpu": "2", "nvidia.com/total-gpumem": "2k"}
    assert "nvidia.com/gpumem" not in psa["flavors"]
    # A second one would need 4000 in total: exactly the quota; a third does not fit.
    sim.client.create(job("gpu2", cpu="1", extra_requests=req, limits=req, run_seconds=5))
    sim.client.create(job("gpu3", cpu="1", extra_requests=req, limits=req, run_seconds=5))
    pending = await wait_for(lambda: cond(sim.workload_of("gpu3"), "QuotaReserved"), "gpu3 pending")
    assert pending["status"] == "False"
    assert "nvidia.com/gpu" in pending["message"] or "total-gpumem" in pending["message"]
    # Without the transformation the same Job asks for nvidia.com/gpumem, which no queue covers.
    sim.cluster.set_kueue_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"})
    sim.client.create(job("gpu4", cpu="1", extra_requests=req, limits=req))
    nofit = await wait_for(
        lambda: (c := cond(sim.workload_of("gpu4"), "QuotaReserved")) and "gpumem" in c["message"] and c,
        "gpu4 needs an uncovered resource",
    )
    assert "resource nvidia.com/gpumem unavailable in ClusterQueue" in nofit["message"]


async def test_queue_status_numbers(sim: Sim) -> None:
    sim.apply(cluster_queue("cq", {"cpu": "2"}), local_queue("default", "user-queue", "cq"))
    for name in ("s1", "s2", "s3"):
        sim.client.create(job(name, cpu="1", run_seconds=30))

    def cq_settled() -> Obj | None:
        obj = sim.cq("cq")
        st = (obj or {}).get("status") or {}
        return obj if (st.get("reservingWorkloads"), st.get("pendingWorkloads")) == (2, 1) else None

    obj = await wait_for(cq_settled, "ClusterQueue status")
    st = obj["status"]
    assert st["admittedWorkloads"] == 2
    assert st["flavorsReservation"] == [
        {"name": "default-flavor", "resources": [{"name": "cpu", "total": "2", "borrowed": "0"}]}
    ]
    assert st["flavorsUsage"] == st["flavorsReservation"]
    active = cond(obj, "Active")
    assert active is not None and (active["status"], active["reason"], active["message"]) == (
        "True",
        "Ready",
        "Can admit new workloads",
    )
    assert "kueue.x-k8s.io/resource-in-use" in obj["metadata"]["finalizers"]

    def lq_settled() -> Obj | None:
        lq = sim.lq("default", "user-queue")
        st = (lq or {}).get("status") or {}
        return lq if (st.get("reservingWorkloads"), st.get("pendingWorkloads")) == (2, 1) else None

    lq = await wait_for(lq_settled, "LocalQueue status")
    assert lq["status"]["admittedWorkloads"] == 2
    assert lq["status"]["flavorsReservation"] == [
        {"name": "default-flavor", "resources": [{"name": "cpu", "total": "2"}]}
    ]
    lq_active = cond(lq, "Active")
    assert lq_active is not None and (lq_active["reason"], lq_active["message"]) == (
        "Ready",
        "Can submit new workloads to localQueue",
    )


async def test_flavor_node_labels_and_tolerations_are_injected_and_restored(sim: Sim) -> None:
    toleration = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
    sim.apply(
        flavor("labelled", {"pool": "batch"}, [toleration]),
        cluster_queue("cq", {"cpu": "2"}, flavor_name="labelled", preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue("default", "user-queue", "cq"),
        priority_class("high", 1000),
    )
    sim.client.create(job("victim", cpu="2", run_seconds=60))
    await wait_for(lambda: admitted(sim, "victim"), "victim admitted")
    j = await wait_for(lambda: (j := sim.job("victim")) and not j["spec"]["suspend"] and j, "victim started")
    tmpl = j["spec"]["template"]
    assert tmpl["spec"]["nodeSelector"] == {"pool": "batch"}
    assert toleration in tmpl["spec"]["tolerations"]
    assert tmpl["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == sim.workload_of("victim")["metadata"]["name"]  # type: ignore[index]
    # Preempt it: the template goes back to what the Job had (restored once startTime is cleared).
    sim.client.create(job("preemptor", cpu="2", priority="high"))

    def restored() -> Obj | None:
        v = sim.job("victim")
        if not v or not v["spec"].get("suspend") or (v.get("status") or {}).get("startTime"):
            return None
        t = v["spec"]["template"]
        return v if "nodeSelector" not in t["spec"] and "tolerations" not in t["spec"] else None

    v = await wait_for(restored, "victim template restored")
    assert "kueue.x-k8s.io/stopping" not in (v["metadata"].get("annotations") or {})
    assert v["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "victim"


async def test_a_burst_of_jobs_is_all_admitted(sim: Sim) -> None:
    """A burst is admitted in full (the speed of it is measured in bench/, not asserted here)."""
    sim.apply(cluster_queue("cq", {"cpu": "10000"}), local_queue("default", "user-queue", "cq"))
    n = 1000
    for i in range(n):
        sim.client.create(job(f"burst-{i}", cpu="100m", run_seconds=30))
    await wait_for(lambda: sim.kueue.admissions >= n, f"{n} admissions", timeout=120)
    assert sim.kueue.admissions == n


async def test_partial_admission_lowers_parallelism_and_eviction_restores_it(sim: Sim) -> None:
    """``kueue.x-k8s.io/job-min-parallelism``: 8 pods do not fit in 6 CPUs, so Kueue admits 6 (the largest count
    its PodSetReducer finds) and runs the Job with parallelism 6; evicted, the Job gets its parallelism back."""
    sim.apply(cluster_queue("cq", {"cpu": "6"}), local_queue("default", "user-queue", "cq"))
    obj = job("wide", cpu="1", parallelism=8, run_seconds=60)
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "4"}
    sim.client.create(obj)
    wl = await wait_for(lambda: sim.workload_of("wide"), "the Workload")
    assert wl["spec"]["podSets"][0]["count"] == 8 and wl["spec"]["podSets"][0]["minCount"] == 4
    await wait_for(lambda: admitted(sim, "wide"), "partial admission")
    wl = sim.workload_of("wide")
    assert wl is not None
    assert wl["status"]["admission"]["podSetAssignments"] == [
        {"name": "main", "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": "6"}, "count": 6}
    ]
    started = await wait_for(lambda: running(sim, "wide") and sim.job("wide"), "the Job runs")
    assert (started["spec"]["parallelism"], started["spec"]["completions"]) == (6, 8)
    cqobj = sim.cq("cq")
    assert cqobj is not None
    sim.client.update({**cqobj, "spec": {**cqobj["spec"], "stopPolicy": "HoldAndDrain"}})
    stopped = await wait_for(
        lambda: (j := sim.job("wide")) is not None and j["spec"]["suspend"] and j["spec"]["parallelism"] == 8 and j,
        "the Job suspended with its parallelism restored",
    )
    assert stopped["spec"]["completions"] == 8
