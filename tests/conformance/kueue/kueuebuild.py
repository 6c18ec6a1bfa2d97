"""Builders for the Kueue conformance suite, mirroring Kueue's test wrappers (``MakeClusterQueue``,
``MakeFlavorQuotas``, ...); tests/placement uses them too (the root conftest puts this directory on ``sys.path``).

The suite (tests/conformance/kueue/test_*.py, one file per Kueue test file) holds cases ported from Kueue's Go tests
(v0.17), their inputs and expected outcomes written as data in those files and run against the placement model.
Every test carries ``@pytest.mark.kueue(source=<Kueue test file>, test=<Test function>)``, and parametrized ids
keep Kueue's case names verbatim, so a failure can be compared with the original; the pytest summary counts the
cases per Kueue source file (tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dispatcher.placement.kueue.amounts import FlavorResource
from dispatcher.placement.kueue.assignment import Assignment, FlavorAssignmentMode
from dispatcher.placement.kueue.flavors import assign_flavors
from dispatcher.placement.kueue.preemption import PreemptionOracle, PreemptionPossibility
from dispatcher.placement.kueue.specs import ClusterQueueSpec, CohortSpec, ResourceFlavorSpec
from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import PodSetRequest, workload_pod_sets
from dispatcher.placement.partial import PartialAdmission, partial_counts

Obj = dict[str, Any]
FIT = FlavorAssignmentMode.FIT
PREEMPT = FlavorAssignmentMode.PREEMPT
NO_FIT = FlavorAssignmentMode.NO_FIT
Mi = 2**20
Gi = 2**30
GPU = "example.com/gpu"


# ---- builders mirroring Kueue's test wrappers (MakeClusterQueue, MakeFlavorQuotas, ...) -------------------------


def fq(flavor: str, *resources: tuple[str, ...]) -> dict[str, Any]:
    """``MakeFlavorQuotas(flavor).Resource(name, nominal, borrowingLimit, lendingLimit)``; "" leaves a limit unset."""
    out = []
    for r in resources:
        entry: dict[str, Any] = {"name": r[0], "nominalQuota": r[1]}
        if len(r) > 2 and r[2]:
            entry["borrowingLimit"] = r[2]
        if len(r) > 3 and r[3]:
            entry["lendingLimit"] = r[3]
        out.append(entry)
    return {"name": flavor, "resources": out}


def rg(*flavors: dict[str, Any]) -> dict[str, Any]:
    return {"coveredResources": [r["name"] for r in flavors[0]["resources"]], "flavors": list(flavors)}


def cq_obj(
    name: str,
    *groups: dict[str, Any],
    cohort: str | None = None,
    preemption: dict[str, Any] | None = None,
    fungibility: dict[str, Any] | None = None,
    weight: str | None = None,
) -> dict[str, Any]:
    """``MakeClusterQueue(name).ResourceGroup(...).Cohort(...).Preemption(...).FairWeight(weight)``."""
    spec: dict[str, Any] = {"resourceGroups": list(groups), "namespaceSelector": {}}
    if cohort:
        spec["cohortName"] = cohort
    if preemption is not None:
        spec["preemption"] = preemption
    if fungibility is not None:
        spec["flavorFungibility"] = fungibility
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def make_cq(name: str, *groups: dict[str, Any], **kw: Any) -> ClusterQueueSpec:
    return ClusterQueueSpec.from_object(cq_obj(name, *groups, **kw))


def cohort_obj(name: str, *groups: dict[str, Any], parent: str | None = None, weight: str | None = None) -> Obj:
    """``MakeCohort(name).ResourceGroup(...).Parent(parent).FairWeight(weight)``."""
    spec: dict[str, Any] = {"resourceGroups": list(groups)}
    if parent:
        spec["parentName"] = parent
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def make_cohort(name: str, *groups: dict[str, Any], parent: str | None = None) -> CohortSpec:
    return CohortSpec.from_object(cohort_obj(name, *groups, parent=parent))


def make_rf(
    name: str,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    tolerations: Sequence[Mapping[str, str]] = (),
) -> ResourceFlavorSpec:
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = dict(labels)
    if taints:
        spec["nodeTaints"] = [dict(t) for t in taints]
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    return ResourceFlavorSpec.from_object({"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec})


SPOT_TAINT = {"key": "instance", "value": "spot", "effect": "NoSchedule"}
SPOT_TOLERATION = {"key": "instance", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}


def podset_obj(
    name: str = "main",
    count: int = 1,
    requests: Mapping[str, str] | None = None,
    *,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
    affinity: Sequence[Sequence[tuple[str, str, Sequence[str]]]] | None = None,
    group: str | None = None,
) -> dict[str, Any]:
    """A Workload ``spec.podSets[]`` entry with a single container (``MakePodSet(...).Request(...)``)."""
    pod: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": dict(requests or {})}}]}
    if node_selector:
        pod["nodeSelector"] = dict(node_selector)
    if tolerations:
        pod["tolerations"] = [dict(t) for t in tolerations]
    if affinity is not None:
        pod["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": k, "operator": op, "values": list(v)} for k, op, v in term]}
                        for term in affinity
                    ]
                }
            }
        }
    obj: dict[str, Any] = {"name": name, "count": count, "template": {"spec": pod}}
    if group:
        obj["topologyRequest"] = {"podSetGroupName": group}
    return obj


def ps(name: str = "main", count: int = 1, requests: Mapping[str, str] | None = None, **kw: Any) -> PodSetRequest:
    return PodSetRequest.from_object(podset_obj(name, count, requests, **kw))


def fixed_oracle(results: Mapping[FlavorResource, tuple[PreemptionPossibility, int]] | None = None) -> PreemptionOracle:
    """Kueue's ``testOracle``: the given results, ``Preempt`` with no borrowing for anything else."""
    table = dict(results or {})

    def oracle(_tree: QuotaTree, _cq: str, fr: FlavorResource, _qty: int) -> tuple[PreemptionPossibility, int]:
        return table.get(fr, (PreemptionPossibility.PREEMPT, 0))

    return oracle


def flavors_of(assignment: Assignment) -> dict[str, dict[str, tuple[str, FlavorAssignmentMode]]]:
    return {p.name: {r: (a.flavor, a.mode) for r, a in p.flavors.items()} for p in assignment.pod_sets}


NEVER_TIME = -62135596800.0  # Go's zero time.Time, the creation timestamp of Kueue's test workloads


# ---- partial admission (scheduler_test.go TestSchedule) ---------------------------------------------------------


def schedule_tree() -> tuple[QuotaTree, dict[str, ResourceFlavorSpec]]:
    """The ClusterQueues of Kueue's scheduler_test.go (TestSchedule) that its partial admission cases use, and
    their flavors."""

    def cq(name: str, groups: list[Obj], **extra: Any) -> ClusterQueueSpec:
        return ClusterQueueSpec.from_object({"metadata": {"name": name}, "spec": {"resourceGroups": groups, **extra}})

    def group(flavor: str, resource: str, nominal: str, borrowing: str | None = None) -> Obj:
        quota: Obj = {"name": resource, "nominalQuota": nominal}
        if borrowing is not None:
            quota["borrowingLimit"] = borrowing
        return {"coveredResources": [resource], "flavors": [{"name": flavor, "resources": [quota]}]}

    cqs = [
        cq("sales", [group("default", "cpu", "50", "0")]),
        cq("eng-alpha", [group("on-demand", "cpu", "50", "50")], cohort="eng"),
        cq(
            "eng-beta",
            [group("on-demand", "cpu", "50", "10"), group("model-a", "example.com/gpu", "20", "0")],
            cohort="eng",
            preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        ),
    ]
    flavors = {
        f: ResourceFlavorSpec.from_object({"metadata": {"name": f}, "spec": {}})
        for f in ("default", "on-demand", "model-a")
    }
    return QuotaTree(cqs, [CohortSpec.from_object({"metadata": {"name": "eng"}, "spec": {}})]), flavors


def partial_pod_set(name: str, count: int, resource: str, amount: str, min_count: int | None = None) -> Obj:
    """A pod set of ``count`` pods requesting ``amount`` of one resource each, with ``minCount`` when given."""
    obj: Obj = {
        "name": name,
        "count": count,
        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {resource: amount}}}]}},
    }
    if min_count is not None:
        obj["minCount"] = min_count
    return obj


def admit_or_reduce(
    tree: QuotaTree, flavors: dict[str, ResourceFlavorSpec], cq: str, pod_sets: list[Obj], priority: int = 0
) -> tuple[Assignment, PartialAdmission | None]:
    """Kueue's ``getInitialAssignments``: the full counts if they fit or preempt with targets, else partial."""
    requests = workload_pod_sets({"spec": {"podSets": pod_sets}})
    full = assign_flavors(tree, cq, requests, flavors, priority=priority)
    if full.mode is FlavorAssignmentMode.FIT:
        return full, None
    return full, partial_counts(tree, cq, requests, flavors, priority=priority)
