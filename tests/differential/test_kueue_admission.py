"""Kueue admission, differential: the same ClusterQueue/cohort/flavor setups and Job streams admitted by real Kueue
(the real rig's worker-2) and by the simulator's Kueue, and the product's quota model asked, before each Job, what
real Kueue will do with it.

Each scenario is submitted one Job at a time; after each, Kueue is left to settle and the outcome recorded: admitted
(with the flavors it assigned and, for TAS, the nodes its topology assignment names, once the pods run there) or
pending, and which running workloads it preempted. The real rig's outcomes are the truth: the simulator must match
them step by step, and so must the quota model's prediction (``Fit``: admitted with those flavors and no preemption;
``Preempt``: admitted after preempting; ``NoFit``: pending).

Fair sharing scenarios turn on ``fairSharing`` in the worker's Kueue Configuration for their run (the simulator reads
its ConfigMap; the real rig's worker Kueue restarts with it, through the rig's admin endpoint) and back off after.
TAS scenarios use the shared topology of kubesim/topology.py: Topology ``default`` over the CPU nodes' block and rack
labels (racks of two 8-CPU nodes), a TAS flavor naming it, and Jobs with the podset topology annotations.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from realrig import RealRig, clean

from dispatcher.config import KubeconfigRef
from dispatcher.kube.client import ClusterClient, KubeError, Resource, connect
from dispatcher.placement.kueue.assignment import FlavorAssignmentMode, preemption_targets
from dispatcher.placement.kueue.flavors import assign_flavors
from dispatcher.placement.kueue.specs import ClusterQueueSpec, CohortSpec, FairSharingConfig, ResourceFlavorSpec
from dispatcher.placement.kueue.tas import TASCache, node_from_object, non_tas_pod_usage
from dispatcher.placement.kueue.topology import TopologySpec, decode_assignment
from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import AdmittedWorkload, pod_requests, workload_pod_sets
from dispatcher.placement.partial import partial_counts
from kubesim.topology import (
    BLOCK_LABEL,
    KUEUE_CONFIG_KEY,
    KUEUE_CONFIG_NAME,
    KUEUE_CONFIG_NAMESPACE,
    RACK_LABEL,
    TOPOLOGY_NAME,
)

Obj = dict[str, Any]
KUEUE = "kueue.x-k8s.io"
FLAVORS = Resource(KUEUE, "v1beta2", "resourceflavors", "ResourceFlavor", namespaced=False)
CQS = Resource(KUEUE, "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
COHORTS = Resource(KUEUE, "v1beta2", "cohorts", "Cohort", namespaced=False)
LQS = Resource(KUEUE, "v1beta2", "localqueues", "LocalQueue")
WORKLOADS = Resource(KUEUE, "v1beta2", "workloads", "Workload")
JOBS = Resource("batch", "v1", "jobs", "Job")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
TOPOLOGIES = Resource(KUEUE, "v1beta2", "topologies", "Topology", namespaced=False)
PRIORITY = {"low": 100, "high": 1000}
REQUIRED = f"{KUEUE}/podset-required-topology"
PREFERRED = f"{KUEUE}/podset-preferred-topology"
UNCONSTRAINED = f"{KUEUE}/podset-unconstrained-topology"
#: Fair sharing as a v1beta2 Kueue Configuration turns it on (strategies are required there).
FAIR_SHARING: Obj = {"fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}


@dataclass(frozen=True)
class Step:
    queue: str  # "a" or "b": the LocalQueue (and ClusterQueue) of the scenario
    cpu: str  # per pod
    priority: str | None = None
    parallelism: int = 1  # pods (and completions)
    min_parallelism: int | None = None  # kueue.x-k8s.io/job-min-parallelism: partial admission down to that
    node_selector: dict[str, str] | None = None  # the pod template's nodeSelector
    topology: dict[str, str] | None = None  # the pod template's kueue.x-k8s.io/podset-*-topology annotations


@dataclass(frozen=True)
class Scenario:
    name: str
    #: ClusterQueue "a"/"b": list of (flavor, nominal, borrowingLimit, lendingLimit) and extra spec fields.
    queues: dict[str, tuple[list[tuple[str, str, str | None, str | None]], Obj]]
    steps: list[Step]
    flavors: tuple[str, ...] = ("f1",)
    cohort: Obj = field(default_factory=dict)  # the Cohort's spec (its own quota, hierarchical cohorts)
    flavor_labels: dict[str, dict[str, str]] = field(default_factory=dict)  # ResourceFlavor nodeLabels per flavor
    tas_flavors: tuple[str, ...] = ()  # flavors with spec.topologyName: the shared Topology "default"
    kueue_config: Obj | None = None  # merged into the worker's Kueue Configuration for the run (fair sharing)

    @property
    def uses_tas(self) -> bool:
        return bool(self.tas_flavors)


def _resources(nominal: str, borrowing: str | None, lending: str | None) -> Obj:
    r: Obj = {"name": "cpu", "nominalQuota": nominal}
    if borrowing is not None:
        r["borrowingLimit"] = borrowing
    if lending is not None:
        r["lendingLimit"] = lending
    return r


ZONE = "diff.kueue-dispatcher.io/zone"
POB_A = {
    "preemption": {
        "withinClusterQueue": "LowerPriority",
        "reclaimWithinCohort": "LowerPriority",
        "borrowWithinCohort": {"policy": "LowerPriority"},
    },
    "flavorFungibility": {
        "whenCanBorrow": "TryNextFlavor",
        "whenCanPreempt": "TryNextFlavor",
        "preference": "PreemptionOverBorrowing",
    },
}

SCENARIOS = [
    Scenario(
        "borrow",  # borrowing up to a's borrowingLimit; b gets what is left; no reclaim
        {"a": ([("f1", "4", "2", None)], {}), "b": ([("f1", "4", None, None)], {})},
        [Step("a", "3"), Step("a", "3"), Step("a", "1"), Step("b", "3"), Step("b", "2")],
    ),
    Scenario(
        "lend",  # a lends at most 1 of its 4; b borrows it; a cannot take back what b holds without reclaim
        {"a": ([("f1", "4", None, "1")], {}), "b": ([("f1", "4", None, None)], {})},
        [Step("b", "5"), Step("b", "1"), Step("a", "3"), Step("a", "1")],
    ),
    Scenario(
        "preempt",  # within the ClusterQueue, a higher priority preempts a lower one
        {
            "a": ([("f1", "4", None, None)], {"preemption": {"withinClusterQueue": "LowerPriority"}}),
            "b": ([("f1", "4", None, None)], {}),
        },
        [Step("a", "3", "low"), Step("a", "1", "low"), Step("a", "3", "high"), Step("a", "2", "low")],
    ),
    Scenario(
        "reclaim",  # b takes back its nominal quota from a workload of a that borrowed it
        {
            "a": ([("f1", "4", None, None)], {}),
            "b": ([("f1", "4", None, None)], {"preemption": {"reclaimWithinCohort": "Any"}}),
        },
        [Step("a", "4"), Step("a", "3"), Step("b", "3"), Step("b", "2")],
    ),
    Scenario(
        "fungible",  # two flavors in one resource group: the first that fits, then the next
        {"a": ([("f1", "2", None, None), ("f2", "3", None, None)], {}), "b": ([("f1", "0", None, None)], {})},
        [Step("a", "2"), Step("a", "2"), Step("a", "1"), Step("a", "1")],
        flavors=("f1", "f2"),
    ),
    Scenario(
        "trynext",  # whenCanBorrow: TryNextFlavor: a flavor without borrowing beats borrowing in the first one
        {
            "a": (
                [("f1", "2", None, None), ("f2", "4", None, None)],
                {"flavorFungibility": {"whenCanBorrow": "TryNextFlavor"}},
            ),
            "b": ([("f1", "4", None, None), ("f2", "0", None, None)], {}),
        },
        [Step("a", "2"), Step("a", "2"), Step("a", "3"), Step("a", "1"), Step("a", "2")],
        flavors=("f1", "f2"),
    ),
    Scenario(
        "cohortquota",  # the Cohort's own quota, shared by its ClusterQueues
        {"a": ([("f1", "1", None, None)], {}), "b": ([("f1", "1", None, None)], {})},
        [Step("a", "3"), Step("b", "3"), Step("a", "1"), Step("b", "1")],
        cohort={
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "diff-f1", "resources": [_resources("4", None, None)]}],
                }
            ]
        },
    ),
    Scenario(
        "reclaimlow",  # reclaimWithinCohort: LowerPriority takes back only from lower priorities
        {
            "a": ([("f1", "4", None, None)], {}),
            "b": ([("f1", "4", None, None)], {"preemption": {"reclaimWithinCohort": "LowerPriority"}}),
        },
        [Step("a", "4", "high"), Step("a", "3", "low"), Step("b", "3"), Step("b", "3", "high")],
    ),
    Scenario(
        "partial",  # job-min-parallelism: the largest count that fits (Kueue's PodSetReducer), never below minCount
        {"a": ([("f1", "5", "0", None)], {}), "b": ([("f1", "2", None, None)], {})},
        [
            Step("a", "1"),
            Step("a", "1", parallelism=8, min_parallelism=2),  # 4 of 8: a has 4 left and may not borrow
            Step("a", "1", parallelism=3, min_parallelism=2),  # nothing left: pending, even at minCount
            Step("b", "1", parallelism=3, min_parallelism=1),  # 2 of 3: b's own quota, a lends nothing
        ],
    ),
    Scenario(
        "partialpreempt",  # 6 pods never fit in 4; 4 do once the lower priority Job is preempted
        {
            "a": ([("f1", "4", "0", None)], {"preemption": {"withinClusterQueue": "LowerPriority"}}),
            "b": ([("f1", "0", None, None)], {}),
        },
        [
            Step("a", "1", "low", parallelism=2),
            Step("a", "1", "high", parallelism=6, min_parallelism=2),
        ],
    ),
    Scenario(
        "nodeselector",  # v0.17.0 reduces a node selector to the label keys of all the resource group's flavors
        {"a": ([("zone-a", "1", None, None), ("plain", "4", None, None)], {})},
        [
            Step("a", "2", node_selector={ZONE: "a"}),  # zone-a too small; plain has no zone label: pending
            Step("a", "1", node_selector={ZONE: "a"}),  # zone-a
            Step("a", "2"),  # no selector: zone-a is full, plain
            Step("a", "1", node_selector={"diff.kueue-dispatcher.io/other": "x"}),  # a key no flavor labels: plain
        ],
        flavors=("zone-a", "plain"),
        flavor_labels={"zone-a": {ZONE: "a"}},
    ),
    Scenario(
        "preemptoverborrowing",  # v0.17 isPreferred: no candidates at borrowing 0 beats a fit at borrowing 1
        {
            "a": ([("f1", "4", None, None), ("f2", "0", None, None)], POB_A),
            "b": ([("f1", "0", None, None), ("f2", "2", None, None)], {}),
        },
        [
            Step("b", "4", "high"),  # b borrows all of a's f1
            # a's f1 is lent to a higher priority: no candidates, borrowing 0; f2 fits borrowing 1: f1 kept, pending
            # (Kueue main, kueue#13616, admits it in f2)
            Step("a", "2", "low"),
        ],
        flavors=("f1", "f2"),
    ),
    Scenario(
        "fairshare",  # fair sharing: a borrowing ClusterQueue preempts one whose share is higher (classical: none)
        {
            "a": ([("f1", "4", None, None)], {"preemption": {"reclaimWithinCohort": "Any"}}),
            "b": ([("f1", "4", None, None)], {"preemption": {"reclaimWithinCohort": "Any"}}),
        },
        [
            Step("b", "7"),  # b borrows 3 of a's 4
            Step("a", "1"),  # a's last free CPU
            # a would borrow 1 (share 125) against b's 3 (share 375): LessThanInitialShare lets it preempt b's Job
            Step("a", "4"),
        ],
        kueue_config=FAIR_SHARING,
    ),
    Scenario(
        "fairweight",  # fair sharing weights: b (weight 4) keeps what it borrows from a (weight 1)
        {
            "a": ([("f1", "4", None, None)], {"preemption": {"reclaimWithinCohort": "Any"}}),
            "b": (
                [("f1", "4", None, None)],
                {"preemption": {"reclaimWithinCohort": "Any"}, "fairSharing": {"weight": "4"}},
            ),
        },
        [
            Step("b", "6"),  # b borrows 2 of the 8 the cohort could lend: share 250, weighted 62.5
            Step("a", "1"),
            # a would borrow 1 (share 125 > b's 62.5 and > b's 0 without the Job): no strategy lets it preempt
            Step("a", "4"),
        ],
        kueue_config=FAIR_SHARING,
    ),
    Scenario(
        "tas",  # topology aware scheduling over two racks of two 8-CPU nodes (kubesim/topology.py)
        {"a": ([("tas", "64", None, None)], {})},
        [
            Step("a", "2", parallelism=6, topology={REQUIRED: RACK_LABEL}),  # one rack: 4 + 2 pods
            Step("a", "2", parallelism=6, topology={REQUIRED: RACK_LABEL}),  # the other rack
            Step("a", "2", parallelism=3, topology={REQUIRED: RACK_LABEL}),  # 2 pods left per rack: pending
            Step("a", "2", parallelism=3, topology={PREFERRED: RACK_LABEL}),  # spread over the racks of the block
            Step("a", "1", parallelism=1, topology={UNCONSTRAINED: "true"}),  # the node with the least room
        ],
        flavors=("tas",),
        flavor_labels={"tas": {BLOCK_LABEL: "b1"}},  # Kueue requires node labels on a TAS flavor: block b1's nodes
        tas_flavors=("tas",),
    ),
    Scenario(
        "impliedtas",  # a ClusterQueue whose only flavor is a TAS flavor: every Job gets TAS (unconstrained)
        {"a": ([("tas", "64", None, None)], {})},
        [
            Step("a", "3", parallelism=4),  # 4 pods of 3 CPU, least free capacity first: two on each of rack r1's nodes
            Step("a", "4", parallelism=3),  # r1's nodes have 2 CPU left: rack r2's nodes take 2 + 1
            Step("a", "2", parallelism=4, topology={REQUIRED: RACK_LABEL}),  # 2 pods left per rack: pending
        ],
        flavors=("tas",),
        flavor_labels={"tas": {BLOCK_LABEL: "b1"}},
        tas_flavors=("tas",),
    ),
]


@dataclass
class Outcome:
    admitted: bool
    flavors: dict[str, str] = field(default_factory=dict)
    preempted: list[str] = field(default_factory=list)
    predicted: str = ""
    #: The admitted pod count (``podSetAssignments[0].count``), and for a Job allowing partial admission its
    #: ``spec.parallelism`` once Kueue started it.
    count: int | None = None
    parallelism: int | None = None
    #: TAS: the nodes of the topology assignment and their pods (node names without the cluster's prefix).
    topology: list[tuple[str, int]] | None = None

    def shown(self) -> tuple[bool, dict[str, str], list[str], int | None, int | None, list[tuple[str, int]] | None]:
        return self.admitted, self.flavors, self.preempted, self.count, self.parallelism, self.topology


def _cq(sc: Scenario, q: str) -> Obj:
    flavors, extra = sc.queues[q]
    return {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": f"diff-{sc.name}-{q}"},
        "spec": {
            "cohortName": f"diff-{sc.name}",
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": f"diff-{f}", "resources": [_resources(n, b, lend)]} for f, n, b, lend in flavors
                    ],
                }
            ],
            **extra,
        },
    }


def _job(sc: Scenario, i: int, step: Step) -> Obj:
    labels = {f"{KUEUE}/queue-name": step.queue}
    if step.priority:
        labels[f"{KUEUE}/priority-class"] = step.priority
    meta: Obj = {"name": f"j{i}", "namespace": f"diff-{sc.name}", "labels": labels}
    if step.min_parallelism is not None:
        meta["annotations"] = {f"{KUEUE}/job-min-parallelism": str(step.min_parallelism)}
    template_annotations = {"sim.dispatcher.io/run-seconds": "3600", **(step.topology or {})}
    pod: Obj = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": step.cpu}}}],
    }
    if step.node_selector:
        pod["nodeSelector"] = dict(step.node_selector)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "suspend": True,
            "parallelism": step.parallelism,
            "completions": step.parallelism,
            "template": {"metadata": {"annotations": template_annotations}, "spec": pod},
        },
    }


def _cond(obj: Obj, ctype: str) -> Obj | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None)


def _true(obj: Obj, ctype: str) -> bool:
    c = _cond(obj, ctype)
    return c is not None and c.get("status") == "True"


async def _create(client: ClusterClient, res: Resource, namespace: str | None, obj: Obj) -> None:
    try:
        await client.create(res, namespace, obj)
    except KubeError as exc:
        if not exc.already_exists:
            raise


async def _eventually(probe: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = await probe()
        if got:
            return got
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def _into_next_second() -> None:
    """Let the next admission fall in a later second than this one.

    Kueue orders preemption candidates by their QuotaReserved time, which the API keeps to the second; two workloads
    admitted within one second tie there, and Kueue's in-memory cache may still order them by the sub-second time
    it assumed, which no client can read. A real cluster cannot predict that either, so the scenarios keep their
    admissions a second apart (CI once saw Kueue preempt the later of two same-second workloads, the model the other
    by UID)."""
    now = time.time()
    await asyncio.sleep(math.floor(now) + 1.05 - now)


async def _setup(client: ClusterClient, sc: Scenario) -> None:
    ns = f"diff-{sc.name}"
    await _create(client, NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    if sc.uses_tas:
        # Kueue counts every pod bound to a node outside TAS against it: wait for earlier scenarios' pods to go.
        async def nodes_free() -> bool:
            pods = (await client.list(PODS)).get("items") or []
            return not any(
                p["metadata"]["namespace"].startswith("diff-")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                for p in pods
            )

        await _eventually(nodes_free, "earlier scenarios' pods gone", timeout=120)
    for f in sc.flavors:
        spec: Obj = {"nodeLabels": dict(sc.flavor_labels[f])} if f in sc.flavor_labels else {}
        if f in sc.tas_flavors:
            spec["topologyName"] = TOPOLOGY_NAME
        await _create(
            client,
            FLAVORS,
            None,
            {
                "apiVersion": f"{KUEUE}/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": f"diff-{f}"},
                "spec": spec,
            },
        )
    await _create(
        client,
        COHORTS,
        None,
        {
            "apiVersion": f"{KUEUE}/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": f"diff-{sc.name}"},
            "spec": sc.cohort,
        },
    )
    for q in sc.queues:
        await _create(client, CQS, None, _cq(sc, q))
        await _create(
            client,
            LQS,
            ns,
            {
                "apiVersion": f"{KUEUE}/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": q, "namespace": ns},
                "spec": {"clusterQueue": f"diff-{sc.name}-{q}"},
            },
        )

    async def active() -> bool:
        for q in sc.queues:
            obj = await client.get(CQS, None, f"diff-{sc.name}-{q}")
            if obj is None or not _true(obj, "Active"):
                return False
        return True

    await _eventually(active, f"{sc.name}'s ClusterQueues Active")


async def _teardown(client: ClusterClient, sc: Scenario) -> None:
    ns = f"diff-{sc.name}"
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    await client.request("DELETE", JOBS.path(ns), body=body)

    async def no_workloads() -> bool:
        return not (await client.list(WORKLOADS, ns)).get("items")

    await _eventually(no_workloads, f"{sc.name}'s Workloads deleted", timeout=60)
    for q in sc.queues:
        await client.delete(LQS, ns, q)
        await client.delete(CQS, None, f"diff-{sc.name}-{q}")
    await client.delete(COHORTS, None, f"diff-{sc.name}")


def _host(name: str) -> str:
    """A node name without its cluster's prefix (``worker-2-cpu-3`` is ``cpu-3``), as rigs name nodes alike."""
    return re.sub(r"^worker-\d+-", "", name)


def _tas_cache(cluster: ClusterView, admitted: list[Obj]) -> TASCache:
    """Kueue's TAS view of the cluster, as the dispatcher's capacity view builds it."""
    tas = TASCache()
    for topo in cluster.topologies:
        tas.set_topology(TopologySpec.from_object(topo))
    for node in cluster.nodes:
        tas.set_node(*node_from_object(node))
    for pod in cluster.pods:
        meta = pod["metadata"]
        usage = non_tas_pod_usage(pod, pod_requests(pod.get("spec") or {}, limits_as_requests=False))
        tas.set_pod(f"{meta['namespace']}/{meta['name']}", usage)
    for wl in admitted:
        info = AdmittedWorkload.from_object(wl)
        tas.add_workload(info.key, info.tas_usage)
    return tas


@dataclass
class ClusterView:
    """What of the cluster the prediction reads besides the scenario's own objects."""

    nodes: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    topologies: list[Obj] = field(default_factory=list)


def _predict(
    cqs: list[Obj],
    cohorts: list[Obj],
    flavors: list[Obj],
    admitted: list[Obj],
    job: Obj,
    sc: Scenario,
    step: Step,
    cluster: ClusterView | None = None,
) -> str:
    """What the product's quota model says Kueue will do with ``job``: ``FIT {flavors} x<pods>`` (with the nodes of a
    topology assignment), ``PREEMPT [victims]`` (the Jobs of the workloads Kueue's preemptor would evict; none: the
    workload waits) or ``NOFIT``. When the full count neither fits nor preempts, fewer pods down to ``minCount``
    (:func:`partial_counts`). Fair sharing and TAS as the scenario's worker has them."""
    tree = QuotaTree([ClusterQueueSpec.from_object(c) for c in cqs], [CohortSpec.from_object(c) for c in cohorts])
    owners = {}
    for wl in admitted:
        tree.add_workload(AdmittedWorkload.from_object(wl))
        owners[wl["metadata"]["name"]] = wl["metadata"]["ownerReferences"][0]["name"]
    template = job["spec"]["template"]
    pod_set: Obj = {"name": "main", "count": step.parallelism, "template": template}
    if step.min_parallelism is not None:
        pod_set["minCount"] = step.min_parallelism
    if step.topology:
        key = {REQUIRED: "required", PREFERRED: "preferred", UNCONSTRAINED: "unconstrained"}
        pod_set["topologyRequest"] = {
            key[k]: (v == "true" if k == UNCONSTRAINED else v) for k, v in step.topology.items()
        }
    wl = {"metadata": {"name": "new"}, "spec": {"podSets": [pod_set]}}
    priority = PRIORITY.get(step.priority or "", 0)
    now = time.time()
    cq = f"diff-{sc.name}-{step.queue}"
    pod_sets = workload_pod_sets(wl)
    rfs = {f["metadata"]["name"]: ResourceFlavorSpec.from_object(f) for f in flavors}
    fair = FairSharingConfig.from_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", **(sc.kueue_config or {})})
    tas = _tas_cache(cluster, admitted) if cluster is not None and sc.uses_tas else None
    kw: Any = {"priority": priority, "queue_order_time": now, "now": now, "fair_sharing": fair, "tas": tas}
    assignment = assign_flavors(tree, cq, pod_sets, rfs, **kw)
    targets = []
    if assignment.mode == FlavorAssignmentMode.PREEMPT:
        targets = preemption_targets(tree, assignment, **kw)
    if assignment.mode != FlavorAssignmentMode.FIT and not targets:
        partial = partial_counts(tree, cq, pod_sets, rfs, **kw)
        if partial is not None:
            assignment, targets = partial.assignment, partial.targets
    if assignment.mode == FlavorAssignmentMode.FIT:
        flavors_of = {r: a.flavor for ps in assignment.pod_sets for r, a in ps.flavors.items()}
        placed = assignment.topology.get("main")
        where = "" if placed is None else f" @{sorted((_host(d.values[-1]), d.count) for d in placed.domains)}"
        return f"FIT {flavors_of} x{assignment.pod_sets[0].count}{where}"
    if assignment.mode == FlavorAssignmentMode.PREEMPT:
        return f"PREEMPT {sorted(owners.get(t.workload.key.split('/')[-1], t.workload.key) for t in targets)}"
    return "NOFIT"


async def _run(client: ClusterClient, sc: Scenario) -> tuple[list[Outcome], dict[str, dict[str, str]]]:
    """The scenario's steps on one cluster; returns each step's outcome and the final admitted set."""
    ns = f"diff-{sc.name}"
    await _setup(client, sc)
    outcomes: list[Outcome] = []
    try:
        for i, step in enumerate(sc.steps):
            workloads = (await client.list(WORKLOADS, ns)).get("items") or []
            evicted_before = {w["metadata"]["name"] for w in workloads if _true(w, "Evicted")}
            cqs = [o for o in (await client.list(CQS)).get("items") or [] if o["metadata"]["name"].startswith(ns)]
            cohorts = [o for o in (await client.list(COHORTS)).get("items") or [] if o["metadata"]["name"] == ns]
            flavors = (await client.list(FLAVORS)).get("items") or []
            admitted = [w for w in workloads if _true(w, "QuotaReserved")]
            view = None
            if sc.uses_tas:
                pods = (await client.list(PODS)).get("items") or []
                view = ClusterView(
                    nodes=(await client.list(NODES)).get("items") or [],
                    pods=[p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")],
                    topologies=(await client.list(TOPOLOGIES)).get("items") or [],
                )
            job = _job(sc, i, step)
            job_name = job["metadata"]["name"]
            predicted = _predict(cqs, cohorts, flavors, admitted, job, sc, step, view)
            created = await client.create(JOBS, ns, job)
            uid = created["metadata"]["uid"]

            async def settled(
                uid: str = uid, evicted_before: set[str] = evicted_before, step: Step = step, name: str = job_name
            ) -> Outcome | None:
                items = (await client.list(WORKLOADS, ns)).get("items") or []
                mine = [
                    w for w in items if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or [])
                ]
                if not mine:
                    return None
                wl = mine[0]
                victims = sorted(
                    w["metadata"]["ownerReferences"][0]["name"]
                    for w in items
                    if _true(w, "Evicted") and w["metadata"]["name"] not in evicted_before
                )
                # A preemption in flight: a victim still holds its quota.
                if any(_true(w, "Evicted") and _true(w, "QuotaReserved") for w in items):
                    return None
                if _true(wl, "QuotaReserved"):
                    assignment = ((wl["status"].get("admission") or {}).get("podSetAssignments") or [{}])[0]
                    parallelism = None
                    if step.min_parallelism is not None:
                        # Kueue lowers a partially admissible Job's parallelism to the count when it starts it.
                        started = await client.get(JOBS, ns, name)
                        if started is None or started["spec"].get("suspend"):
                            return None
                        parallelism = started["spec"].get("parallelism")
                    flavors = dict(assignment.get("flavors") or {})
                    topology = None
                    placed = decode_assignment(assignment.get("topologyAssignment"))
                    if placed is not None:
                        topology = sorted((_host(d.values[-1]), d.count) for d in placed.domains)
                        # The pods leave the topology gate and run on those nodes.
                        if not await _pods_on(client, ns, name, dict(topology)):
                            return None
                    return Outcome(
                        True,
                        flavors,
                        victims,
                        count=assignment.get("count"),
                        parallelism=parallelism,
                        topology=topology,
                    )
                pending = _cond(wl, "QuotaReserved")
                if pending is not None and pending.get("reason") == "Pending":
                    return Outcome(False, {}, victims)
                return None

            outcome = await _eventually(settled, f"{sc.name} step {i} settled")
            # A pending verdict may still turn: give Kueue another moment and read it again.
            if not outcome.admitted:
                await asyncio.sleep(1.5)
                outcome = await _eventually(settled, f"{sc.name} step {i} settled")
            outcome.predicted = predicted
            outcomes.append(outcome)
            if outcome.admitted:
                await _into_next_second()
        final: dict[str, dict[str, str]] = {}
        for w in (await client.list(WORKLOADS, ns)).get("items") or []:
            if _true(w, "QuotaReserved"):
                a = ((w["status"].get("admission") or {}).get("podSetAssignments") or [{}])[0]
                final[w["metadata"]["ownerReferences"][0]["name"]] = dict(a.get("flavors") or {})
        return outcomes, final
    finally:
        await _teardown(client, sc)


async def _pods_on(client: ClusterClient, ns: str, job: str, nodes: dict[str, int]) -> bool:
    """The Job's pods all run, ungated, on the nodes of its topology assignment, as many on each as it says."""
    pods = (await client.list(PODS, ns)).get("items") or []
    mine = [p for p in pods if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == job]
    placed: dict[str, int] = {}
    for p in mine:
        spec = p.get("spec") or {}
        if spec.get("schedulingGates") or not spec.get("nodeName"):
            return False
        host = _host(spec["nodeName"])
        placed[host] = placed.get(host, 0) + 1
    return placed == nodes


async def _kueue_config(client: ClusterClient, real_rig: RealRig | None, extra: Obj | None) -> None:
    """Merge ``extra`` into the worker's Kueue Configuration (``None``: back to the rig's own). The real rig restarts
    the worker's Kueue with it (its admin endpoint writes the file and the ConfigMap); the simulated Kueue reads the
    ConfigMap."""
    if real_rig is not None:
        await real_rig.post("/clusters/worker-2/kueue-config", {"extra": extra or {}})
        return
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **(extra or {})}
    body: Obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": KUEUE_CONFIG_NAME, "namespace": KUEUE_CONFIG_NAMESPACE},
        "data": {KUEUE_CONFIG_KEY: yaml.safe_dump(config)},
    }
    if await client.get(CONFIGMAPS, KUEUE_CONFIG_NAMESPACE, KUEUE_CONFIG_NAME) is None:
        await client.create(CONFIGMAPS, KUEUE_CONFIG_NAMESPACE, body)
    else:
        await client.patch(CONFIGMAPS, KUEUE_CONFIG_NAMESPACE, KUEUE_CONFIG_NAME, {"data": body["data"]})
    await asyncio.sleep(0.3)  # the simulated Kueue re-reads it from its watch


def _agrees(o: Outcome) -> bool:
    """The model's prediction agrees with what Kueue did."""
    if o.predicted.startswith("FIT"):
        where = "" if o.topology is None else f" @{o.topology}"
        return o.admitted and not o.preempted and o.predicted == f"FIT {o.flavors} x{o.count}{where}"
    if o.predicted.startswith("PREEMPT"):
        victims = o.predicted.removeprefix("PREEMPT ")
        if victims == "[]":  # Preempt mode without candidates: Kueue leaves it pending
            return not o.admitted and not o.preempted
        return o.admitted and victims == str(o.preempted)
    return not o.admitted and not o.preempted


@pytest.mark.real_rig
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
async def test_kueue_admits_as_predicted(
    scenario: Scenario, backend: str, real_rig: RealRig | None, tmp_path: Path
) -> None:
    world = None
    if real_rig is not None:
        await clean(real_rig)
        client = await real_rig.client("worker-2")
    else:
        from kubesim.world import SimWorld, WorldOptions

        world = SimWorld(WorldOptions(workers=1, gpu_workers=0))
        await world.start()
        await asyncio.to_thread(world.write_files, tmp_path)
        client = await connect("sim-worker", KubeconfigRef(path=str(tmp_path / "worker-1.kubeconfig")))
    try:
        if scenario.kueue_config is not None:
            await _kueue_config(client, real_rig, scenario.kueue_config)
        try:
            outcomes, final = await _run(client, scenario)
        finally:
            if scenario.kueue_config is not None:
                await _kueue_config(client, real_rig, None)
    finally:
        await client.close()
        if world is not None:
            await world.stop()
    table = "\n".join(
        f"  step {i} {s}: admitted={o.admitted} flavors={o.flavors} preempted={o.preempted} count={o.count} "
        f"parallelism={o.parallelism} topology={o.topology} model={o.predicted}"
        for i, (s, o) in enumerate(zip(scenario.steps, outcomes, strict=True))
    )
    EXPECTED[(scenario.name, backend)] = ([o.shown() for o in outcomes], final)
    disagreements = [i for i, o in enumerate(outcomes) if not _agrees(o)]
    assert not disagreements, f"{backend} Kueue and the quota model disagree at steps {disagreements}:\n{table}"
    for s, o in zip(scenario.steps, outcomes, strict=True):
        if s.min_parallelism is not None and o.admitted:
            assert o.parallelism == o.count, f"{backend} Kueue started the Job with another parallelism:\n{table}"
    other = EXPECTED.get((scenario.name, "real" if backend == "sim" else "sim"))
    if other is not None:
        assert other == EXPECTED[(scenario.name, backend)], f"the simulator and real Kueue differ:\n{table}\n{other}"


#: Outcomes per (scenario, backend), so that whichever backend runs second compares with the first.
EXPECTED: dict[tuple[str, str], Any] = {}
