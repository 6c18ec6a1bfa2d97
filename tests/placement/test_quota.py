"""Tests for :mod:`dispatcher.placement.quota`.

Table cases marked ``Kueue:`` are ported from Kueue's own Go tests at the commit the project mirrors; the comment
names the file and the test (and the case name is kept verbatim) so a failure can be compared with the original.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from dispatcher.placement.quota import (
    EXCEEDS_MAX_QUOTA,
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAIMATION,
    NO_MATCHING_FLAVOR,
    UNLIMITED,
    WAITING_FOR_QUOTA,
    AdmittedWorkload,
    Assignment,
    ClusterQueueSpec,
    CohortSpec,
    FlavorAssignmentMode,
    FlavorFungibility,
    FlavorResource,
    PodSetRequest,
    PreemptionOracle,
    PreemptionPolicy,
    PreemptionPossibility,
    QueueingStrategy,
    QuotaTree,
    ResourceFlavorSpec,
    Taint,
    Toleration,
    assign_flavors,
    candidates_order_key,
    find_preemption_targets,
    find_untolerated_taint,
    format_amount,
    pending_order_key,
    pod_requests,
    preemption_targets,
    queue_order_timestamp,
    quota_amount,
    simulate_preemption,
    workload_pod_sets,
)
from dispatcher.quantity import kueue_value

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
) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceGroups": list(groups), "namespaceSelector": {}}
    if cohort:
        spec["cohortName"] = cohort
    if preemption is not None:
        spec["preemption"] = preemption
    if fungibility is not None:
        spec["flavorFungibility"] = fungibility
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def make_cq(name: str, *groups: dict[str, Any], **kw: Any) -> ClusterQueueSpec:
    return ClusterQueueSpec.from_object(cq_obj(name, *groups, **kw))


def make_cohort(name: str, *groups: dict[str, Any], parent: str | None = None) -> CohortSpec:
    spec: dict[str, Any] = {"resourceGroups": list(groups)}
    if parent:
        spec["parentName"] = parent
    return CohortSpec.from_object({"kind": "Cohort", "metadata": {"name": name}, "spec": spec})


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


# ---- specs ----------------------------------------------------------------------------------------------------


def test_cluster_queue_v1beta2_parsed() -> None:
    spec = make_cq(
        "team-a",
        rg(fq("a100", ("nvidia.com/gpu", "8", "4", "2"), ("cpu", "96"))),
        rg(fq("default", ("memory", "1Ti"))),
        cohort="org",
        preemption={
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        },
        fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"},
    )
    assert spec.cohort == "org"
    gpu = spec.resource_groups[0].flavors[0].resources[0]
    assert (gpu.name, gpu.nominal, gpu.borrowing_limit, gpu.lending_limit) == ("nvidia.com/gpu", 8, 4, 2)
    assert spec.resource_groups[0].flavors[0].resources[1].nominal == 96_000
    assert spec.resource_groups[1].flavors[0].resources[0].nominal == 2**40
    assert spec.resource_groups[0].covered_resources == ("nvidia.com/gpu", "cpu")
    assert spec.preemption.within_cluster_queue is PreemptionPolicy.LOWER_PRIORITY
    assert spec.preemption.reclaim_within_cohort is PreemptionPolicy.ANY
    assert spec.preemption.borrow_within_cohort is not None
    assert spec.preemption.borrow_within_cohort.max_priority_threshold == 100
    assert spec.flavor_fungibility == FlavorFungibility("TryNextFlavor", "MayStopSearch")
    assert spec.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO
    assert not spec.is_stopped
    assert spec.matches_namespace({"anything": "x"})


def test_cluster_queue_defaults_match_kueue() -> None:
    spec = ClusterQueueSpec.from_object({"metadata": {"name": "q"}, "spec": {}})
    assert spec.cohort is None
    assert spec.preemption.within_cluster_queue is PreemptionPolicy.NEVER
    assert spec.preemption.reclaim_within_cohort is PreemptionPolicy.NEVER
    assert spec.preemption.borrow_within_cohort is None
    # defaultFlavorFungibility in pkg/cache/scheduler/clusterqueue.go
    assert spec.flavor_fungibility == FlavorFungibility("MayStopSearch", "TryNextFlavor")
    # A nil namespaceSelector is labels.Nothing().
    assert not spec.matches_namespace({})


def test_cluster_queue_v1beta1_spellings_parsed() -> None:
    obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "old"},
        "spec": {
            "cohort": "legacy",
            "queueingStrategy": "StrictFIFO",
            "stopPolicy": "Hold",
            "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
            "admissionChecks": ["mk"],
            "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]},
            "resourceGroups": [rg(fq("default", ("cpu", "500m")))],
        },
    }
    spec = ClusterQueueSpec.from_object(obj)
    assert spec.cohort == "legacy"
    assert spec.flavor_fungibility == FlavorFungibility("MayStopSearch", "MayStopSearch")
    assert spec.queueing_strategy is QueueingStrategy.STRICT_FIFO
    assert spec.queueing_strategy.head_blocks
    assert spec.is_stopped
    assert spec.admission_checks == ("mk",)
    assert spec.matches_namespace({"team": "a"})
    assert not spec.matches_namespace({"team": "b"})
    assert spec.resource_groups[0].flavors[0].resources[0].nominal == 500


def test_admission_checks_strategy_parsed() -> None:
    obj = cq_obj("q")
    obj["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov", "onFlavors": ["a"]}]}
    assert ClusterQueueSpec.from_object(obj).admission_checks == ("prov",)


def test_cohort_and_flavor_parsed() -> None:
    cohort = make_cohort("child", rg(fq("default", ("cpu", "4", "", "2"))), parent="root")
    assert cohort.parent == "root"
    assert cohort.resource_groups[0].flavors[0].resources[0].lending_limit == 2000
    legacy = CohortSpec.from_object({"metadata": {"name": "c"}, "spec": {"parent": "p"}})
    assert legacy.parent == "p"
    flavor = make_rf(
        "spot",
        labels={"cloud.com/spot": "true"},
        taints=[SPOT_TAINT],
        tolerations=[SPOT_TOLERATION],
    )
    assert flavor.node_labels == {"cloud.com/spot": "true"}
    assert flavor.node_taints == (Taint("instance", "spot", "NoSchedule"),)
    assert flavor.tolerations == (Toleration("instance", "Equal", "spot", "NoSchedule"),)
    with pytest.raises(ValueError, match=r"metadata\.name"):
        ClusterQueueSpec.from_object({"spec": {}})


def test_quota_amounts_saturate_like_kueue() -> None:
    # Kueue: pkg/resources/amount.go AmountFromQuantity.
    assert quota_amount("cpu", "1E") == UNLIMITED
    assert quota_amount("memory", "10E") == UNLIMITED
    assert quota_amount("cpu", "1.5") == 1500
    assert quota_amount("memory", "1Ki") == 1024


def test_unlimited_quota_admits_anything() -> None:
    tree = QuotaTree(
        [make_cq("a", rg(fq("f", ("cpu", "1E"))), cohort="c"), make_cq("b", rg(fq("f", ("cpu", "1"))), cohort="c")]
    )
    assert tree.available("a", "f", "cpu") == UNLIMITED
    assert tree.available("b", "f", "cpu") == UNLIMITED
    tree.add_usage("a", {("f", "cpu"): 10**12})
    assert tree.available("b", "f", "cpu") == UNLIMITED
    assert tree.potential_available("b", "f", "cpu") == UNLIMITED


@pytest.mark.parametrize(
    ("resource", "value", "text"),
    [
        ("cpu", 1500, "1500m"),
        ("cpu", 2000, "2"),
        ("memory", 10 * Mi, "10Mi"),
        ("memory", 1_000_000, "1M"),
        ("memory", 1536, "1536"),
        ("memory", 1000, "1k"),
        ("nvidia.com/gpu", 16, "16"),
        ("cpu", UNLIMITED, "<unlimited>"),
    ],
)
def test_format_amount(resource: str, value: int, text: str) -> None:
    assert format_amount(resource, value) == text


def test_tolerations_and_taints() -> None:
    taint = Taint("gpu", "true", "NoSchedule")
    assert find_untolerated_taint([taint], []) == taint
    assert find_untolerated_taint([taint], [Toleration("gpu", "Exists")]) is None
    assert find_untolerated_taint([taint], [Toleration("gpu", "Equal", "false")]) == taint
    assert find_untolerated_taint([taint], [Toleration(operator="Exists")]) is None
    assert find_untolerated_taint([Taint("x", "y", "PreferNoSchedule")], []) is None
    assert find_untolerated_taint([taint], [Toleration("gpu", "Exists", effect="NoExecute")]) == taint
    level = Taint("level", "5", "NoSchedule")
    assert find_untolerated_taint([level], [Toleration("level", "Gt", "3")]) is None
    assert find_untolerated_taint([level], [Toleration("level", "Lt", "3")]) == level
    assert str(taint) == "{gpu true NoSchedule <nil>}"


def test_pod_requests_follow_kubernetes_rules() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}},
        ],
        "initContainers": [
            {"name": "init", "resources": {"requests": {"cpu": "4"}}},
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    assert pod_requests(spec) == {"cpu": 4100, "memory": 2 * Gi, "nvidia.com/gpu": 1}


# ---- quota tree -------------------------------------------------------------------------------------------------

RED_CPU = ("red", "cpu")


@dataclass
class _AvailableCase:
    cluster_queues: list[ClusterQueueSpec]
    cohorts: list[CohortSpec]
    usage: dict[str, dict[FlavorResource, int]]
    want_available: dict[str, dict[FlavorResource, int]]
    want_potential: dict[str, dict[FlavorResource, int]]


# Kueue: pkg/cache/scheduler/resource_test.go TestAvailable
_AVAILABLE_CASES = {
    "base cqs": _AvailableCase(
        [
            make_cq("cq1", rg(fq("red", ("cpu", "0")))),
            make_cq("cq2", rg(fq("red", ("cpu", "5")), fq("blue", ("cpu", "10")))),
        ],
        [],
        {"cq1": {RED_CPU: 1000}, "cq2": {RED_CPU: 2_500, ("blue", "cpu"): 1_000}},
        {"cq1": {RED_CPU: 0}, "cq2": {RED_CPU: 2_500, ("blue", "cpu"): 9_000}},
        {"cq1": {RED_CPU: 0}, "cq2": {RED_CPU: 5_000, ("blue", "cpu"): 10_000}},
    ),
    "cqs with cohort": _AvailableCase(
        [
            make_cq("cq1", rg(fq("red", ("cpu", "10"))), cohort="cohort"),
            make_cq("cq2", rg(fq("red", ("cpu", "10", "", "9"))), cohort="cohort"),
        ],
        [make_cohort("cohort", rg(fq("red", ("cpu", "10"))))],
        {"cq1": {RED_CPU: 1000}, "cq2": {RED_CPU: 500}},
        {"cq1": {RED_CPU: 28_000}, "cq2": {RED_CPU: 28_500}},
        {"cq1": {RED_CPU: 29_000}, "cq2": {RED_CPU: 30_000}},
    ),
    "cq borrows from cohort": _AvailableCase(
        [make_cq("cq1", rg(fq("red", ("cpu", "10"))), cohort="cohort")],
        [make_cohort("cohort", rg(fq("red", ("cpu", "10"))))],
        {"cq1": {RED_CPU: 11_000}},
        {"cq1": {RED_CPU: 9_000}},
        {"cq1": {RED_CPU: 20_000}},
    ),
    "cq oversubscription spills into cohort": _AvailableCase(
        [
            make_cq("cq1", rg(fq("red", ("cpu", "10"))), cohort="cohort"),
            make_cq("cq2", rg(fq("red", ("cpu", "10", "0", "0"))), cohort="cohort"),
        ],
        [make_cohort("cohort", rg(fq("red", ("cpu", "10"))))],
        {"cq1": {RED_CPU: 31_000}},
        {"cq1": {RED_CPU: 0}, "cq2": {RED_CPU: 0}},
        {"cq1": {RED_CPU: 20_000}, "cq2": {RED_CPU: 10_000}},
    ),
    "lending and borrowing limits respected": _AvailableCase(
        [
            make_cq("cq1", rg(fq("red", ("cpu", "10"))), cohort="cohort"),
            make_cq("cq2", rg(fq("red", ("cpu", "10", "2"))), cohort="cohort"),
            make_cq("cq3", rg(fq("red", ("cpu", "10", "", "5"))), cohort="cohort"),
        ],
        [make_cohort("cohort", rg(fq("red", ("cpu", "10"))))],
        {"cq1": {RED_CPU: 20_000}, "cq2": {RED_CPU: 10_000}, "cq3": {RED_CPU: 6_000}},
        {"cq1": {RED_CPU: 4_000}, "cq2": {RED_CPU: 2_000}, "cq3": {RED_CPU: 4_000}},
        {"cq1": {RED_CPU: 35_000}, "cq2": {RED_CPU: 12_000}, "cq3": {RED_CPU: 40_000}},
    ),
    "hierarchical cohort": _AvailableCase(
        [
            make_cq("cq1", rg(fq("red", ("cpu", "10"))), cohort="left"),
            make_cq("cq2", rg(fq("red", ("cpu", "10", "", "0"))), cohort="right"),
        ],
        [
            make_cohort("root"),
            make_cohort("left", rg(fq("red", ("cpu", "10"))), parent="root"),
            make_cohort("right", rg(fq("red", ("cpu", "10"))), parent="root"),
        ],
        {"cq1": {RED_CPU: 10_000}, "cq2": {RED_CPU: 5_000}},
        {"cq1": {RED_CPU: 20_000}, "cq2": {RED_CPU: 25_000}},
        {"cq1": {RED_CPU: 30_000}, "cq2": {RED_CPU: 40_000}},
    ),
    "hierarchical cohort respects borrowing limit": _AvailableCase(
        [
            make_cq("left-cq1", rg(fq("red", ("cpu", "10"))), cohort="left"),
            make_cq("left-cq2", rg(fq("red", ("cpu", "10", "5"))), cohort="left"),
            make_cq("right-cq", rg(fq("red", ("cpu", "10"))), cohort="right"),
        ],
        [
            make_cohort("root"),
            make_cohort("left", rg(fq("red", ("cpu", "10", "5"))), parent="root"),
            make_cohort("right", rg(fq("red", ("cpu", "10"))), parent="root"),
        ],
        {},
        {"left-cq1": {RED_CPU: 35_000}, "left-cq2": {RED_CPU: 15_000}, "right-cq": {RED_CPU: 50_000}},
        {"left-cq1": {RED_CPU: 35_000}, "left-cq2": {RED_CPU: 15_000}, "right-cq": {RED_CPU: 50_000}},
    ),
    "hierarchical cohort respects lending limit": _AvailableCase(
        [
            make_cq("left-cq1", rg(fq("red", ("cpu", "10", "", "5"))), cohort="left"),
            make_cq("left-cq2", rg(fq("red", ("cpu", "10"))), cohort="left"),
            make_cq("right-cq", rg(fq("red", ("cpu", "0"))), cohort="right"),
            make_cq("root-cq", rg(fq("red", ("cpu", "0"))), cohort="root"),
        ],
        [
            make_cohort("root"),
            make_cohort("left", rg(fq("red", ("cpu", "0", "", "5"))), parent="root"),
            make_cohort("right", rg(fq("red", ("cpu", "0"))), parent="root"),
        ],
        {},
        {
            "left-cq1": {RED_CPU: 20_000},
            "left-cq2": {RED_CPU: 15_000},
            "right-cq": {RED_CPU: 5_000},
            "root-cq": {RED_CPU: 5_000},
        },
        {
            "left-cq1": {RED_CPU: 20_000},
            "left-cq2": {RED_CPU: 15_000},
            "right-cq": {RED_CPU: 5_000},
            "root-cq": {RED_CPU: 5_000},
        },
    ),
}


def _snapshot(
    tree: QuotaTree, frs: Mapping[str, Mapping[FlavorResource, int]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    available = {cq: {fr: tree.available(cq, *fr) for fr in want} for cq, want in frs.items()}
    potential = {cq: {fr: tree.potential_available(cq, *fr) for fr in want} for cq, want in frs.items()}
    return available, potential


@pytest.mark.parametrize("name", list(_AVAILABLE_CASES))
def test_available_kueue_table(name: str) -> None:
    case = _AVAILABLE_CASES[name]
    for build in ("cohorts first", "cluster queues first"):
        tree = QuotaTree(case.cluster_queues, case.cohorts) if build == "cohorts first" else QuotaTree()
        if build != "cohorts first":
            for spec in case.cluster_queues:
                tree.set_cluster_queue(spec)
            for cohort in case.cohorts:
                tree.set_cohort(cohort)
        # Before usage, available == potentially available.
        assert _snapshot(tree, case.want_potential) == (case.want_potential, case.want_potential), build
        for cq, usage in case.usage.items():
            tree.add_usage(cq, usage)
        assert _snapshot(tree, case.want_potential) == (case.want_available, case.want_potential), build
        # Rebuilding from specs keeps the usage and gives the same answers as incremental updates.
        tree.set_cohort(make_cohort("unrelated-cohort"))
        assert _snapshot(tree, case.want_potential) == (case.want_available, case.want_potential), build
        for cq, usage in case.usage.items():
            tree.remove_usage(cq, usage)
        assert _snapshot(tree, case.want_potential) == (case.want_potential, case.want_potential), build


def test_lending_limit_add_remove_workloads() -> None:
    # Kueue: pkg/cache/scheduler/snapshot_test.go TestSnapshotAddRemoveWorkloadWithLendingLimit
    tree = QuotaTree(
        [
            make_cq("lend-a", rg(fq("default", ("cpu", "10", "", "4"))), cohort="lend"),
            make_cq("lend-b", rg(fq("default", ("cpu", "10", "", "6"))), cohort="lend"),
        ]
    )
    fr = ("default", "cpu")
    for key, cq, cpu in (
        ("lend-a-1", "lend-a", 1),
        ("lend-a-2", "lend-a", 9),
        ("lend-a-3", "lend-a", 6),
        ("lend-b-1", "lend-b", 4),
    ):
        tree.add_workload(AdmittedWorkload(key, cq, {fr: cpu * 1000}))
    assert tree.cohort_usage("lend", *fr) == (10_000, 10_000)
    tree.remove_workload("lend-a", "lend-a-2")
    assert (tree.usage("lend-a", *fr), tree.usage("lend-b", *fr)) == (7_000, 4_000)
    assert tree.cohort_usage("lend", *fr) == (10_000, 1_000)
    tree.remove_workload("lend-a", "lend-a-1")
    assert tree.cohort_usage("lend", *fr) == (10_000, 0)
    for key in ("lend-a-3",):
        tree.remove_workload("lend-a", key)
    tree.remove_workload("lend-b", "lend-b-1")
    assert tree.cohort_usage("lend", *fr) == (10_000, 0)
    assert tree.usage("lend-a", *fr) == 0


def test_within_nominal_fits_and_beyond_nominal_borrows_within_limit() -> None:
    tree = QuotaTree(
        [
            make_cq("a", rg(fq("gpu", ("nvidia.com/gpu", "4", "2"))), cohort="org"),
            make_cq("b", rg(fq("gpu", ("nvidia.com/gpu", "8"))), cohort="org"),
        ]
    )
    g = ("gpu", "nvidia.com/gpu")
    assert tree.available("a", *g) == 6  # 4 own + borrowing limit 2
    tree.add_usage("a", {g: 3})
    assert tree.available("a", *g) == 3
    assert not tree.is_borrowing("a", *g)
    tree.add_usage("a", {g: 2})
    assert tree.is_borrowing("a", *g)
    assert tree.borrowing("a", *g) == 1
    assert tree.available("a", *g) == 1
    assert tree.available("b", *g) == 7  # b lends one of its 8 to a
    tree.add_usage("b", {g: 7})
    assert tree.available("a", *g) == 0  # the cohort is full even though a's limit would allow 1 more
    report = {r.resource: r for r in tree.cluster_queue_report("a")}["nvidia.com/gpu"]
    assert (report.nominal, report.used, report.borrowed, report.available, report.potential_available) == (
        4,
        5,
        1,
        0,
        6,
    )
    assert report.free_nominal == 0


def test_lending_limit_caps_what_others_borrow() -> None:
    tree = QuotaTree(
        [
            make_cq("lender", rg(fq("f", ("cpu", "10", "", "3"))), cohort="c"),
            make_cq("borrower", rg(fq("f", ("cpu", "0"))), cohort="c"),
        ]
    )
    assert tree.available("borrower", "f", "cpu") == 3_000
    assert tree.potential_available("borrower", "f", "cpu") == 3_000
    # The lender keeps 7 for itself and still reaches the lent part while nobody uses it.
    assert tree.available("lender", "f", "cpu") == 10_000
    tree.add_usage("borrower", {("f", "cpu"): 2_000})
    assert tree.available("lender", "f", "cpu") == 8_000
    tree.add_usage("lender", {("f", "cpu"): 6_000})  # within its guaranteed 7
    assert tree.available("borrower", "f", "cpu") == 1_000
    assert tree.cohort_usage("c", "f", "cpu") == (3_000, 2_000)


def test_hierarchical_cohort_with_parent_quota() -> None:
    tree = QuotaTree(
        [
            make_cq("ml-a", rg(fq("h100", ("nvidia.com/gpu", "2"))), cohort="ml"),
            make_cq("web", rg(fq("h100", ("nvidia.com/gpu", "0"))), cohort="apps"),
        ],
        [
            make_cohort("org", rg(fq("h100", ("nvidia.com/gpu", "8")))),
            make_cohort("ml", rg(fq("h100", ("nvidia.com/gpu", "4", "1"))), parent="org"),
            make_cohort("apps", parent="org"),
        ],
    )
    g = ("h100", "nvidia.com/gpu")
    # "ml" may take at most 1 from "org" beyond what its subtree contributes (its own 4 and ml-a's 2).
    assert tree.available("ml-a", *g) == 6 + 1
    assert tree.potential_available("ml-a", *g) == 6 + 1
    assert tree.available("web", *g) == 8 + 4 + 2
    tree.add_usage("web", {g: 9})
    assert tree.available("ml-a", *g) == 5  # ml's subtree (6) minus what web took beyond org's 8 (1)
    assert tree.root_cohort("ml-a") == "org"
    assert tree.parent_cohort("ml-a") == "ml"
    assert sorted(tree.cluster_queues_in_tree("web")) == ["ml-a", "web"]
    assert tree.cohort_spec("apps") is not None


def test_implicit_cohort_forms_without_object() -> None:
    tree = QuotaTree(
        [
            make_cq("a", rg(fq("f", ("cpu", "1"))), cohort="ghost"),
            make_cq("b", rg(fq("f", ("cpu", "2"))), cohort="ghost"),
        ]
    )
    assert tree.cohort_names == ["ghost"]
    assert tree.cohort_spec("ghost") is None
    assert tree.available("a", "f", "cpu") == 3_000
    tree.set_cohort(make_cohort("ghost", rg(fq("f", ("cpu", "5")))))
    assert tree.available("a", "f", "cpu") == 8_000
    tree.delete_cohort("ghost")  # back to implicit
    assert tree.available("a", "f", "cpu") == 3_000
    tree.delete_cluster_queue("b")
    tree.delete_cluster_queue("a")
    assert tree.cohort_names == []


def test_structure_changes_keep_usage() -> None:
    tree = QuotaTree([make_cq("a", rg(fq("f", ("cpu", "4"))), cohort="c")])
    tree.add_workload(AdmittedWorkload("ns/w", "a", {("f", "cpu"): 3_000}))
    tree.set_cluster_queue(make_cq("b", rg(fq("f", ("cpu", "4"))), cohort="c"))
    assert tree.available("b", "f", "cpu") == 5_000
    tree.set_cluster_queue(make_cq("a", rg(fq("f", ("cpu", "2"))), cohort="c"))  # a now over its nominal
    assert tree.available("b", "f", "cpu") == 3_000
    assert tree.remove_workload("a", "ns/w") is not None
    assert tree.available("b", "f", "cpu") == 6_000
    assert tree.remove_workload("a", "ns/w") is None


def test_clone_is_independent() -> None:
    tree = QuotaTree([make_cq("a", rg(fq("f", ("cpu", "4"))))])
    tree.add_usage("a", {("f", "cpu"): 1_000})
    copy = tree.clone()
    copy.add_usage("a", {("f", "cpu"): 2_000})
    assert tree.available("a", "f", "cpu") == 3_000
    assert copy.available("a", "f", "cpu") == 1_000


def test_cohort_cycle_detaches_cluster_queues() -> None:
    tree = QuotaTree(
        [make_cq("a", rg(fq("f", ("cpu", "1"))), cohort="x")],
        [make_cohort("x", parent="y"), make_cohort("y", parent="x")],
    )
    assert tree.cycle_cluster_queues == frozenset({"a"})
    assert tree.cohort_names == []
    assert tree.parent_cohort("a") is None
    assert tree.available("a", "f", "cpu") == 1_000


def test_flavors_reservation_status_shape() -> None:
    tree = QuotaTree(
        [
            make_cq("a", rg(fq("f", ("memory", "1Gi"), ("cpu", "1"))), cohort="c"),
            make_cq("b", rg(fq("f", ("memory", "1Gi"), ("cpu", "1"))), cohort="c"),
        ]
    )
    tree.add_usage("a", {("f", "cpu"): 1_500, ("f", "memory"): 512 * Mi})
    assert tree.flavors_reservation("a") == [
        {
            "name": "f",
            "resources": [
                {"name": "cpu", "total": "1500m", "borrowed": "500m"},
                {"name": "memory", "total": "512Mi", "borrowed": "0"},
            ],
        }
    ]
    standalone = QuotaTree([make_cq("s", rg(fq("f", ("cpu", "1"))))])
    standalone.add_usage("s", {("f", "cpu"): 2_000})
    assert standalone.cluster_queue_report("s")[0].borrowed == 0  # Kueue reports no borrowing outside a cohort
    assert standalone.fits("s", {("f", "cpu"): 0})
    assert not standalone.fits("s", {("f", "cpu"): 1})


# ---- flavor assignment ----------------------------------------------------------------------------------------

FLAVORS = {
    f.name: f
    for f in (
        make_rf("default"),
        make_rf("one", {"type": "one"}),
        make_rf("two", {"type": "two"}),
        make_rf("b_one", {"b_type": "one"}),
        make_rf("b_two", {"b_type": "two"}),
        make_rf("tainted", taints=[SPOT_TAINT]),
        make_rf("taint_and_toleration", taints=[SPOT_TAINT], tolerations=[SPOT_TOLERATION]),
        make_rf("label-x-a", {"x": "a"}),
        make_rf("label-xy-b", {"x": "b", "y": "k"}),
    )
}

Flavors = dict[str, dict[str, tuple[str, FlavorAssignmentMode]]]


@dataclass
class _AssignCase:
    pod_sets: list[PodSetRequest]
    cq: ClusterQueueSpec
    want_mode: FlavorAssignmentMode
    want_flavors: Flavors
    want_usage: dict[FlavorResource, int]
    want_reasons: dict[str, list[str]] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    secondary: ClusterQueueSpec | None = None
    secondary_usage: dict[FlavorResource, int] = field(default_factory=dict)
    simulation: dict[FlavorResource, tuple[PreemptionPossibility, int]] = field(default_factory=dict)
    want_borrowing: int = 0
    want_no_fit_reason: str = ""
    want_tried: dict[str, dict[str, int]] | None = None
    want_attempts: dict[str, list[tuple[str, FlavorAssignmentMode, int, list[str]]]] | None = None


def _max_capacity(res: str, flavor: str, prev: str, cur: str, cap: str) -> str:
    return (
        f"insufficient quota for {res} in flavor {flavor}, previously considered podsets requests ({prev}) + "
        f"current podset request ({cur}) > maximum capacity ({cap})"
    )


def _unused(res: str, flavor: str, more: str) -> str:
    return f"insufficient unused quota for {res} in flavor {flavor}, {more} more needed"


TAINTED = "untolerated taint {instance spot NoSchedule <nil>} in flavor tainted"
PREEMPT_LOWER_WITH_BORROW = {
    "reclaimWithinCohort": "LowerPriority",
    "borrowWithinCohort": {"policy": "LowerPriority"},
}
ONE_CPU = ("one", "cpu")

# Kueue: pkg/scheduler/flavorassigner/flavorassigner_test.go TestAssignFlavors
_ASSIGN_CASES: dict[str, _AssignCase] = {
    "single flavor, fits": _AssignCase(
        [ps(requests={"cpu": "1", "memory": "1Mi"})],
        make_cq("test-clusterqueue", rg(fq("default", ("cpu", "1"), ("memory", "2Mi")))),
        FIT,
        {"main": {"cpu": ("default", FIT), "memory": ("default", FIT)}},
        {("default", "cpu"): 1_000, ("default", "memory"): Mi},
        want_tried={"main": {"cpu": -1, "memory": -1}},
        want_attempts={"main": [("default", FIT, 0, [])]},
    ),
    "single flavor, fits tainted flavor": _AssignCase(
        [ps(requests={"cpu": "1"}, tolerations=[SPOT_TOLERATION])],
        make_cq("test-clusterqueue", rg(fq("tainted", ("cpu", "4")))),
        FIT,
        {"main": {"cpu": ("tainted", FIT)}},
        {("tainted", "cpu"): 1_000},
    ),
    "single flavor, fits tainted flavor with toleration": _AssignCase(
        [ps(requests={"cpu": "1"})],
        make_cq("test-clusterqueue", rg(fq("taint_and_toleration", ("cpu", "4")))),
        FIT,
        {"main": {"cpu": ("taint_and_toleration", FIT)}},
        {("taint_and_toleration", "cpu"): 1_000},
    ),
    "single flavor, used resources, doesn't fit": _AssignCase(
        [ps(requests={"cpu": "2"})],
        make_cq("test-clusterqueue", rg(fq("default", ("cpu", "4")))),
        PREEMPT,
        {"main": {"cpu": ("default", PREEMPT)}},
        {("default", "cpu"): 2_000},
        want_reasons={"main": [_unused("cpu", "default", "1")]},
        usage={("default", "cpu"): 3_000},
        want_attempts={"main": [("default", PREEMPT, 0, [_unused("cpu", "default", "1")])]},
    ),
    "multiple resource groups, fits": _AssignCase(
        [ps(requests={"cpu": "3", "memory": "10Mi"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("cpu", "2")), fq("two", ("cpu", "4"))),
            rg(fq("b_one", ("memory", "1Gi")), fq("b_two", ("memory", "5Gi"))),
        ),
        FIT,
        {"main": {"cpu": ("two", FIT), "memory": ("b_one", FIT)}},
        {("two", "cpu"): 3_000, ("b_one", "memory"): 10 * Mi},
        want_tried={"main": {"cpu": -1, "memory": 0}},
    ),
    "multiple flavors, leader worker set, leader and workers request the same resources fits": _AssignCase(
        [
            ps("worker", 4, {"cpu": "2"}, group="group1"),
            ps("leader", 1, {"cpu": "1"}, group="group1"),
        ],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "4")), fq("two", ("cpu", "9")))),
        FIT,
        {"worker": {"cpu": ("two", FIT)}, "leader": {"cpu": ("two", FIT)}},
        {("two", "cpu"): 9_000},
        want_attempts={
            "worker": [("one", NO_FIT, 0, [_max_capacity("cpu", "one", "0", "9", "4")]), ("two", FIT, 0, [])],
            "leader": [("one", NO_FIT, 0, [_max_capacity("cpu", "one", "0", "9", "4")]), ("two", FIT, 0, [])],
        },
    ),
    "multiple flavors, leader worker set, workers request GPU, leader does not request GPU, fits": _AssignCase(
        [
            ps("worker", 4, {"cpu": "1", "memory": "1", GPU: "1"}, group="group1"),
            ps("leader", 1, {"cpu": "1", "memory": "1"}, group="group1"),
        ],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("cpu", "10"), ("memory", "10"))),
            rg(fq("two", ("cpu", "5"), ("memory", "5"), (GPU, "4"))),
        ),
        FIT,
        {
            "worker": {"cpu": ("two", FIT), "memory": ("two", FIT), GPU: ("two", FIT)},
            "leader": {"cpu": ("two", FIT), "memory": ("two", FIT)},
        },
        {("two", "cpu"): 5_000, ("two", "memory"): 5, ("two", GPU): 4},
    ),
    "multiple flavors, leader worker set, workers request GPU, leader does not request GPU, does not fit, "
    "without group it would fit": _AssignCase(
        [
            ps("worker", 4, {"cpu": "1", GPU: "1"}, group="group1"),
            ps("leader", 1, {"cpu": "1"}, group="group1"),
        ],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "4"), (GPU, "4")), fq("two", ("cpu", "5"), (GPU, "0")))),
        NO_FIT,
        {"worker": {}, "leader": {}},
        {},
        want_reasons={
            "worker": [_max_capacity("cpu", "one", "0", "5", "4"), _max_capacity(GPU, "two", "0", "4", "0")],
            "leader": [_max_capacity("cpu", "one", "0", "5", "4"), _max_capacity(GPU, "two", "0", "4", "0")],
        },
        want_no_fit_reason=EXCEEDS_MAX_QUOTA,
    ),
    "multiple resource groups, one could fit with preemption, other doesn't fit": _AssignCase(
        [ps(requests={"cpu": "3", "memory": "10Mi"})],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "3"))), rg(fq("b_one", ("memory", "1Mi")))),
        NO_FIT,
        {"main": {}},
        {},
        want_reasons={"main": [_max_capacity("memory", "b_one", "0", "10Mi", "1Mi")]},
        usage={ONE_CPU: 1_000},
        want_no_fit_reason=EXCEEDS_MAX_QUOTA,
    ),
    "multiple resource groups with multiple resources, fits": _AssignCase(
        [ps(requests={"cpu": "3", "memory": "10Mi", GPU: "3"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("cpu", "2"), ("memory", "1Gi")), fq("two", ("cpu", "4"), ("memory", "15Mi"))),
            rg(fq("b_one", (GPU, "4")), fq("b_two", (GPU, "2"))),
        ),
        FIT,
        {"main": {"cpu": ("two", FIT), "memory": ("two", FIT), GPU: ("b_one", FIT)}},
        {("two", "cpu"): 3_000, ("two", "memory"): 10 * Mi, ("b_one", GPU): 3},
        want_tried={"main": {"cpu": -1, "memory": -1, GPU: 0}},
        want_attempts={
            "main": [
                ("b_one", FIT, 0, []),
                ("one", NO_FIT, 0, [_max_capacity("cpu", "one", "0", "3", "2")]),
                ("two", FIT, 0, []),
            ]
        },
    ),
    "multiple resource groups with multiple resources, fits with different modes": _AssignCase(
        [ps(requests={"cpu": "3", "memory": "10Mi", GPU: "3"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("cpu", "2"), ("memory", "1Gi")), fq("two", ("cpu", "4"), ("memory", "15Mi"))),
            rg(fq("b_one", (GPU, "4"))),
            cohort="test-cohort",
        ),
        PREEMPT,
        {"main": {"cpu": ("two", FIT), "memory": ("two", PREEMPT), GPU: ("b_one", PREEMPT)}},
        {("two", "cpu"): 3_000, ("two", "memory"): 10 * Mi, ("b_one", GPU): 3},
        want_reasons={
            "main": [
                _max_capacity("cpu", "one", "0", "3", "2"),
                _unused("memory", "two", "5Mi"),
                _unused(GPU, "b_one", "1"),
            ]
        },
        usage={("two", "memory"): 10 * Mi},
        secondary=make_cq("test-secondary-clusterqueue", rg(fq("b_one", (GPU, "0"))), cohort="test-cohort"),
        secondary_usage={("b_one", GPU): 2},
        simulation={("two", "memory"): (PreemptionPossibility.PREEMPT, 1)},
        want_borrowing=1,
        want_attempts={
            "main": [
                ("b_one", PREEMPT, 0, [_unused(GPU, "b_one", "1")]),
                ("one", NO_FIT, 0, [_max_capacity("cpu", "one", "0", "3", "2")]),
                ("two", PREEMPT, 1, [_unused("memory", "two", "5Mi")]),
            ]
        },
    ),
    "multiple resources in a group, doesn't fit": _AssignCase(
        [ps(requests={"cpu": "3", "memory": "10Mi"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("cpu", "2"), ("memory", "1Gi")), fq("two", ("cpu", "4"), ("memory", "5Mi"))),
        ),
        NO_FIT,
        {"main": {}},
        {},
        want_reasons={
            "main": [_max_capacity("cpu", "one", "0", "3", "2"), _max_capacity("memory", "two", "0", "10Mi", "5Mi")]
        },
        want_no_fit_reason=EXCEEDS_MAX_QUOTA,
    ),
    "multiple flavors, fits while skipping tainted flavor": _AssignCase(
        [ps(requests={"cpu": "3"})],
        make_cq("test-clusterqueue", rg(fq("tainted", ("cpu", "4")), fq("two", ("cpu", "4")))),
        FIT,
        {"main": {"cpu": ("two", FIT)}},
        {("two", "cpu"): 3_000},
        want_attempts={"main": [("tainted", NO_FIT, 0, [TAINTED]), ("two", FIT, 0, [])]},
    ),
    "multiple flavors, fits a node selector": _AssignCase(
        [
            ps(
                requests={"cpu": "1"},
                node_selector={"type": "two", "ignored1": "foo"},
                affinity=[[("ignored2", "In", ["bar"])]],
            )
        ],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "4")), fq("two", ("cpu", "4")))),
        FIT,
        {"main": {"cpu": ("two", FIT)}},
        {("two", "cpu"): 1_000},
        want_attempts={"main": [("one", NO_FIT, 0, ["flavor one doesn't match node affinity"]), ("two", FIT, 0, [])]},
    ),
    "multiple flavors, fits with node affinity": _AssignCase(
        [
            ps(
                requests={"cpu": "1", "memory": "1Mi"},
                node_selector={"ignored1": "foo"},
                affinity=[[("type", "In", ["two"])]],
            )
        ],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("cpu", "4"), ("memory", "1Gi")), fq("two", ("cpu", "4"), ("memory", "1Gi"))),
        ),
        FIT,
        {"main": {"cpu": ("two", FIT), "memory": ("two", FIT)}},
        {("two", "cpu"): 1_000, ("two", "memory"): Mi},
    ),
    "multiple flavors, node affinity fits any flavor": _AssignCase(
        [ps(requests={"cpu": "1"}, affinity=[[("ignored2", "In", ["bar"])], [("cpuType", "In", ["two"])]])],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "4")), fq("two", ("cpu", "4")))),
        FIT,
        {"main": {"cpu": ("one", FIT)}},
        {("one", "cpu"): 1_000},
        want_tried={"main": {"cpu": 0}},
    ),
    "multiple flavors with different label keys, selector only uses flavor's own keys": _AssignCase(
        [ps(requests={"cpu": "1"}, node_selector={"x": "a", "y": "g"})],
        make_cq("test-clusterqueue", rg(fq("label-x-a", ("cpu", "4")), fq("label-xy-b", ("cpu", "4")))),
        FIT,
        {"main": {"cpu": ("label-x-a", FIT)}},
        {("label-x-a", "cpu"): 1_000},
    ),
    "labelless flavor in group with labeled flavor, workload uses labeled selector": _AssignCase(
        [ps(requests={"cpu": "1"}, node_selector={"type": "two"})],
        make_cq("test-clusterqueue", rg(fq("default", ("cpu", "4")), fq("two", ("cpu", "4")))),
        FIT,
        {"main": {"cpu": ("default", FIT)}},
        {("default", "cpu"): 1_000},
    ),
    "multiple flavors, doesn't fit node affinity": _AssignCase(
        [ps(requests={"cpu": "1"}, affinity=[[("type", "In", ["three"])]])],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "4")), fq("two", ("cpu", "4")))),
        NO_FIT,
        {"main": {}},
        {},
        want_reasons={"main": ["flavor one doesn't match node affinity", "flavor two doesn't match node affinity"]},
        want_no_fit_reason=NO_MATCHING_FLAVOR,
    ),
    "multiple specs, fit different flavors": _AssignCase(
        [ps("driver", 1, {"cpu": "5"}), ps("worker", 1, {"cpu": "3"})],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "4")), fq("two", ("cpu", "10")))),
        FIT,
        {"driver": {"cpu": ("two", FIT)}, "worker": {"cpu": ("one", FIT)}},
        {("one", "cpu"): 3_000, ("two", "cpu"): 5_000},
        want_tried={"driver": {"cpu": -1}, "worker": {"cpu": 0}},
    ),
    "multiple specs, fits borrowing": _AssignCase(
        [ps("driver", 1, {"cpu": "4", "memory": "1Gi"}), ps("worker", 1, {"cpu": "6", "memory": "4Gi"})],
        make_cq("test-clusterqueue", rg(fq("default", ("cpu", "2", "98"), ("memory", "2Gi"))), cohort="test-cohort"),
        FIT,
        {
            "driver": {"cpu": ("default", FIT), "memory": ("default", FIT)},
            "worker": {"cpu": ("default", FIT), "memory": ("default", FIT)},
        },
        {("default", "cpu"): 10_000, ("default", "memory"): 5 * Gi},
        secondary=make_cq(
            "test-secondary-clusterqueue",
            rg(fq("default", ("cpu", "198"), ("memory", "198Gi"))),
            cohort="test-cohort",
        ),
        want_borrowing=1,
        want_attempts={"driver": [("default", FIT, 1, [])], "worker": [("default", FIT, 1, [])]},
    ),
    "not enough space to borrow": _AssignCase(
        [ps(requests={"cpu": "2"})],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "1"))), cohort="test-cohort"),
        NO_FIT,
        {"main": {}},
        {},
        want_reasons={"main": [_max_capacity("cpu", "one", "0", "2", "1")]},
        secondary=make_cq("test-secondary-clusterqueue", rg(fq("one", ("cpu", "10", "", "0"))), cohort="test-cohort"),
        secondary_usage={ONE_CPU: 9_000},
        want_no_fit_reason=EXCEEDS_MAX_QUOTA,
    ),
    "past max, but can preempt in ClusterQueue": _AssignCase(
        [ps(requests={"cpu": "2"})],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "2", "8"))), cohort="test-cohort"),
        PREEMPT,
        {"main": {"cpu": ("one", PREEMPT)}},
        {ONE_CPU: 2_000},
        want_reasons={"main": [_unused("cpu", "one", "1")]},
        usage={ONE_CPU: 9_000},
        secondary=make_cq("test-secondary-clusterqueue", rg(fq("one", ("cpu", "98"))), cohort="test-cohort"),
        secondary_usage={ONE_CPU: 9_000},
        simulation={ONE_CPU: (PreemptionPossibility.PREEMPT, 1)},
        want_borrowing=1,
        want_tried={"main": {"cpu": -1}},
    ),
    "past min, but can preempt in ClusterQueue": _AssignCase(
        [ps(requests={"cpu": "2"})],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "2")))),
        PREEMPT,
        {"main": {"cpu": ("one", PREEMPT)}},
        {ONE_CPU: 2_000},
        want_reasons={"main": [_unused("cpu", "one", "1")]},
        usage={ONE_CPU: 1_000},
    ),
    "past min, but can preempt in cohort and ClusterQueue": _AssignCase(
        [ps(requests={"cpu": "2"})],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "3"))), cohort="test-cohort"),
        PREEMPT,
        {"main": {"cpu": ("one", PREEMPT)}},
        {ONE_CPU: 2_000},
        want_reasons={"main": [_unused("cpu", "one", "2")]},
        usage={ONE_CPU: 2_000},
        secondary=make_cq("test-secondary-clusterqueue", rg(fq("one", ("cpu", "7"))), cohort="test-cohort"),
        secondary_usage={ONE_CPU: 8_000},
        simulation={ONE_CPU: (PreemptionPossibility.PREEMPT, 1)},
        want_borrowing=1,
    ),
    "can only preempt flavors that match affinity": _AssignCase(
        [ps(requests={"cpu": "2"}, node_selector={"type": "two"})],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "4")), fq("two", ("cpu", "4")))),
        PREEMPT,
        {"main": {"cpu": ("two", PREEMPT)}},
        {("two", "cpu"): 2_000},
        want_reasons={"main": ["flavor one doesn't match node affinity", _unused("cpu", "two", "1")]},
        usage={ONE_CPU: 3_000, ("two", "cpu"): 3_000},
    ),
    "each podset requires preemption on a different flavor": _AssignCase(
        [ps("launcher", 1, {"cpu": "2"}), ps("workers", 10, {"cpu": "1"}, tolerations=[SPOT_TOLERATION])],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "4")), fq("tainted", ("cpu", "10")))),
        PREEMPT,
        {"launcher": {"cpu": ("one", PREEMPT)}, "workers": {"cpu": ("tainted", PREEMPT)}},
        {ONE_CPU: 2_000, ("tainted", "cpu"): 10_000},
        want_reasons={
            "launcher": [_unused("cpu", "one", "1"), TAINTED],
            "workers": [_max_capacity("cpu", "one", "2", "10", "4"), _unused("cpu", "tainted", "3")],
        },
        usage={ONE_CPU: 3_000, ("tainted", "cpu"): 3_000},
    ),
    "resource not listed in clusterQueue": _AssignCase(
        [ps(requests={GPU: "2"})],
        make_cq("test-clusterqueue", rg(fq("one", ("cpu", "4")))),
        NO_FIT,
        {"main": {}},
        {},
        want_reasons={"main": ["resource example.com/gpu unavailable in ClusterQueue"]},
        want_no_fit_reason=NO_MATCHING_FLAVOR,
    ),
    "zero resource request not in clusterQueue should succeed": _AssignCase(
        [ps(requests={"cpu": "1", GPU: "0"})],
        make_cq("test-clusterqueue", rg(fq("default", ("cpu", "4")))),
        FIT,
        {"main": {"cpu": ("default", FIT)}},
        {("default", "cpu"): 1_000},
    ),
    "zero resource request defined in clusterQueue should get flavor assigned": _AssignCase(
        [ps(requests={"cpu": "1", GPU: "0"})],
        make_cq("test-clusterqueue", rg(fq("default", ("cpu", "4"), (GPU, "4")))),
        FIT,
        {"main": {"cpu": ("default", FIT), GPU: ("default", FIT)}},
        {("default", "cpu"): 1_000, ("default", GPU): 0},
    ),
    "num pods fit": _AssignCase(
        [ps(count=3, requests={"cpu": "1"})],
        make_cq("test-clusterqueue", rg(fq("default", ("pods", "3"), ("cpu", "10")))),
        FIT,
        {"main": {"cpu": ("default", FIT), "pods": ("default", FIT)}},
        {("default", "pods"): 3, ("default", "cpu"): 3_000},
    ),
    "num pods don't fit": _AssignCase(
        [ps(count=3, requests={"cpu": "1"})],
        make_cq("test-clusterqueue", rg(fq("default", ("pods", "2"), ("cpu", "10")))),
        NO_FIT,
        {"main": {}},
        {},
        want_reasons={"main": [_max_capacity("pods", "default", "0", "3", "2")]},
        want_no_fit_reason=EXCEEDS_MAX_QUOTA,
    ),
    "preempt before try next flavor": _AssignCase(
        [ps(requests={"cpu": "9"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("pods", "10"), ("cpu", "10")), fq("two", ("pods", "10"), ("cpu", "10"))),
            fungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
        ),
        PREEMPT,
        {"main": {"cpu": ("one", PREEMPT), "pods": ("one", FIT)}},
        {ONE_CPU: 9_000, ("one", "pods"): 1},
        want_reasons={"main": [_unused("cpu", "one", "1")]},
        usage={ONE_CPU: 2_000},
        want_tried={"main": {"cpu": 0, "pods": 0}},
    ),
    "preempt try next flavor": _AssignCase(
        [ps(requests={"cpu": "9"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("pods", "10"), ("cpu", "10")), fq("two", ("pods", "10"), ("cpu", "10"))),
        ),
        FIT,
        {"main": {"cpu": ("two", FIT), "pods": ("two", FIT)}},
        {("two", "cpu"): 9_000, ("two", "pods"): 1},
        usage={ONE_CPU: 2_000},
        want_tried={"main": {"cpu": -1, "pods": -1}},
        want_attempts={"main": [("one", PREEMPT, 0, [_unused("cpu", "one", "1")]), ("two", FIT, 0, [])]},
    ),
    "borrow try next flavor, found the first flavor": _AssignCase(
        [ps(requests={"cpu": "9"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("pods", "10"), ("cpu", "10", "1")), fq("two", ("pods", "10"), ("cpu", "1"))),
            cohort="test-cohort",
            fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
        ),
        FIT,
        {"main": {"cpu": ("one", FIT), "pods": ("one", FIT)}},
        {ONE_CPU: 9_000, ("one", "pods"): 1},
        usage={ONE_CPU: 2_000},
        secondary=make_cq("test-secondary-clusterqueue", rg(fq("one", ("cpu", "1"))), cohort="test-cohort"),
        want_borrowing=1,
        want_tried={"main": {"cpu": -1, "pods": -1}},
    ),
    "borrow try next flavor, found the second flavor": _AssignCase(
        [ps(requests={"cpu": "9"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("pods", "10"), ("cpu", "10", "1")), fq("two", ("pods", "10"), ("cpu", "10"))),
            cohort="test-cohort",
            fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
        ),
        FIT,
        {"main": {"cpu": ("two", FIT), "pods": ("two", FIT)}},
        {("two", "cpu"): 9_000, ("two", "pods"): 1},
        usage={ONE_CPU: 2_000},
        secondary=make_cq("test-secondary-clusterqueue", rg(fq("one", ("cpu", "1"))), cohort="test-cohort"),
        want_attempts={"main": [("one", FIT, 1, []), ("two", FIT, 0, [])]},
    ),
    "borrow before try next flavor": _AssignCase(
        [ps(requests={"cpu": "9"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("pods", "10"), ("cpu", "10", "1")), fq("two", ("pods", "10"), ("cpu", "10"))),
            cohort="test-cohort",
        ),
        FIT,
        {"main": {"cpu": ("one", FIT), "pods": ("one", FIT)}},
        {ONE_CPU: 9_000, ("one", "pods"): 1},
        usage={ONE_CPU: 2_000},
        secondary=make_cq("test-secondary-clusterqueue", rg(fq("one", ("cpu", "1"))), cohort="test-cohort"),
        want_borrowing=1,
        want_tried={"main": {"cpu": 0, "pods": 0}},
    ),
    "when borrowing while preemption is needed for flavor one; WhenCanBorrow=MayStopSearch": _AssignCase(
        [ps(requests={"cpu": "12"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("cpu", "0", "12")), fq("two", ("cpu", "12"))),
            cohort="test-cohort",
            preemption=PREEMPT_LOWER_WITH_BORROW,
            fungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
        ),
        PREEMPT,
        {"main": {"cpu": ("one", PREEMPT)}},
        {ONE_CPU: 12_000},
        want_reasons={"main": [_unused("cpu", "one", "10")]},
        secondary=make_cq("test-secondary-clusterqueue", rg(fq("one", ("cpu", "12"))), cohort="test-cohort"),
        secondary_usage={ONE_CPU: 10_000},
        simulation={ONE_CPU: (PreemptionPossibility.PREEMPT, 1)},
        want_borrowing=1,
        want_tried={"main": {"cpu": 0}},
    ),
    "when borrowing while preemption is needed for flavor one; WhenCanBorrow=TryNextFlavor": _AssignCase(
        [ps(requests={"cpu": "12"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("cpu", "0", "12")), fq("two", ("cpu", "12"))),
            cohort="test-cohort",
            preemption=PREEMPT_LOWER_WITH_BORROW,
            fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"},
        ),
        FIT,
        {"main": {"cpu": ("two", FIT)}},
        {("two", "cpu"): 12_000},
        secondary=make_cq("test-secondary-clusterqueue", rg(fq("one", ("cpu", "12"))), cohort="test-cohort"),
        want_attempts={"main": [("one", FIT, 1, []), ("two", FIT, 0, [])]},
    ),
    "when borrowing while preemption is needed, but borrowingLimit exceeds the quota available in the cohort": _AssignCase(  # noqa: E501
        [ps(requests={"cpu": "12"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("cpu", "0", "12"))),
            cohort="test-cohort",
            preemption=PREEMPT_LOWER_WITH_BORROW,
        ),
        NO_FIT,
        {"main": {}},
        {},
        want_reasons={"main": [_max_capacity("cpu", "one", "0", "12", "11")]},
        secondary=make_cq("test-secondary-clusterqueue", rg(fq("one", ("cpu", "11"))), cohort="test-cohort"),
        secondary_usage={ONE_CPU: 10_000},
        want_no_fit_reason=EXCEEDS_MAX_QUOTA,
    ),
    "lend try next flavor, found the second flavor": _AssignCase(
        [ps(requests={"cpu": "9"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("pods", "10"), ("cpu", "10", "", "1")), fq("two", ("pods", "10"), ("cpu", "10", "", "0"))),
            cohort="test-cohort",
            fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
        ),
        FIT,
        {"main": {"cpu": ("two", FIT), "pods": ("two", FIT)}},
        {("two", "cpu"): 9_000, ("two", "pods"): 1},
        usage={ONE_CPU: 2_000},
        secondary=make_cq("test-secondary-clusterqueue", rg(fq("one", ("cpu", "1"))), cohort="test-cohort"),
        want_attempts={"main": [("one", FIT, 1, []), ("two", FIT, 0, [])]},
    ),
    "lend try next flavor, found the first flavor": _AssignCase(
        [ps(requests={"cpu": "9"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("pods", "10"), ("cpu", "10", "", "1")), fq("two", ("pods", "10"), ("cpu", "1", "", "0"))),
            cohort="test-cohort",
            fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
        ),
        FIT,
        {"main": {"cpu": ("one", FIT), "pods": ("one", FIT)}},
        {ONE_CPU: 9_000, ("one", "pods"): 1},
        usage={ONE_CPU: 2_000},
        secondary=make_cq("test-secondary-clusterqueue", rg(fq("one", ("cpu", "1"))), cohort="test-cohort"),
        want_borrowing=1,
    ),
    "cannot preempt in cohort (oracle returns None) for the first flavor, tries the second flavor (which fits)": _AssignCase(  # noqa: E501
        [ps(requests={"cpu": "2"})],
        make_cq(
            "test-clusterqueue",
            rg(fq("one", ("cpu", "0", "2")), fq("two", ("cpu", "0", "2"))),
            cohort="test-cohort",
            preemption=PREEMPT_LOWER_WITH_BORROW,
            fungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
        ),
        FIT,
        {"main": {"cpu": ("two", FIT)}},
        {("two", "cpu"): 2_000},
        secondary=make_cq(
            "test-secondary-clusterqueue", rg(fq("one", ("cpu", "2")), fq("two", ("cpu", "2"))), cohort="test-cohort"
        ),
        secondary_usage={ONE_CPU: 2_000},
        simulation={ONE_CPU: (PreemptionPossibility.NO_CANDIDATES, 0)},
        want_borrowing=1,
        want_tried={"main": {"cpu": -1}},
        want_attempts={"main": [("one", PREEMPT, 0, [_unused("cpu", "one", "2")]), ("two", FIT, 1, [])]},
    ),
    "quota exhausted, but can preempt in cohort and ClusterQueue": _AssignCase(
        [ps(requests={"cpu": "9"})],
        make_cq("test-clusterqueue", rg(fq("one", ("pods", "10"), ("cpu", "10", "", "0"))), cohort="test-cohort"),
        PREEMPT,
        {"main": {"cpu": ("one", PREEMPT), "pods": ("one", FIT)}},
        {ONE_CPU: 9_000, ("one", "pods"): 1},
        want_reasons={"main": [_unused("cpu", "one", "1")]},
        usage={ONE_CPU: 2_000},
        secondary=make_cq(
            "test-secondary-clusterqueue", rg(fq("one", ("pods", "0"), ("cpu", "0"))), cohort="test-cohort"
        ),
        simulation={ONE_CPU: (PreemptionPossibility.PREEMPT, 1)},
        want_borrowing=1,
    ),
}


def _assign_case_tree(case: _AssignCase) -> QuotaTree:
    specs = [case.cq] + ([case.secondary] if case.secondary else [])
    cohorts = [make_cohort(case.cq.cohort)] if case.cq.cohort else []
    tree = QuotaTree(specs, cohorts)
    if case.usage:
        tree.add_usage(case.cq.name, case.usage)
    if case.secondary is not None and case.secondary_usage:
        tree.add_usage(case.secondary.name, case.secondary_usage)
    return tree


@pytest.mark.parametrize("name", list(_ASSIGN_CASES))
def test_assign_flavors_kueue_table(name: str) -> None:
    case = _ASSIGN_CASES[name]
    tree = _assign_case_tree(case)
    a = assign_flavors(tree, case.cq.name, case.pod_sets, FLAVORS, oracle=fixed_oracle(case.simulation))
    assert a.mode is case.want_mode
    assert flavors_of(a) == case.want_flavors
    assert a.usage == case.want_usage
    assert a.borrowing == case.want_borrowing
    assert a.borrows is (case.want_borrowing > 0)
    assert a.no_fit_reason == case.want_no_fit_reason
    for p in a.pod_sets:
        assert sorted(p.reasons) == sorted(case.want_reasons.get(p.name, [])), p.name
    if case.want_tried is not None:
        got = {p.name: {r: fa.tried_flavor_idx for r, fa in p.flavors.items()} for p in a.pod_sets}
        assert got == case.want_tried
    if case.want_attempts is not None:
        got_attempts = {p.name: [(at.flavor, at.mode, at.borrow, at.reasons) for at in p.attempts] for p in a.pod_sets}
        assert got_attempts == case.want_attempts


def test_reclaimable_pods_reduce_the_count() -> None:
    # Kueue: flavorassigner_test.go TestAssignFlavors "with reclaimable pods; reclaimablePods on"
    wl = {
        "spec": {"podSets": [podset_obj("main", 5, {"cpu": "1"})]},
        "status": {"reclaimablePods": [{"name": "main", "count": 2}]},
    }
    cq = make_cq("test-clusterqueue", rg(fq("default", ("pods", "3"), ("cpu", "10"))))
    a = assign_flavors(QuotaTree([cq]), cq.name, workload_pod_sets(wl), FLAVORS, oracle=fixed_oracle())
    assert a.mode is FIT
    assert a.usage == {("default", "pods"): 3, ("default", "cpu"): 3_000}


def test_deleted_flavors() -> None:
    # Kueue: flavorassigner_test.go TestDeletedFlavors
    flavors = {"flavor": make_rf("flavor")}
    cq = make_cq("test-clusterqueue", rg(fq("deleted-flavor", ("cpu", "4")), fq("flavor", ("cpu", "4"))))
    a = assign_flavors(QuotaTree([cq]), cq.name, [ps(requests={"cpu": "3"})], flavors, oracle=fixed_oracle())
    assert flavors_of(a) == {"main": {"cpu": ("flavor", FIT)}}
    first = a.pod_sets[0].attempts[0]
    assert (first.flavor, first.reasons, first.no_fit_reason) == (
        "deleted-flavor",
        ["flavor deleted-flavor not found"],
        NO_MATCHING_FLAVOR,
    )
    cq = make_cq("test-clusterqueue", rg(fq("deleted-flavor", ("cpu", "4"))))
    a = assign_flavors(QuotaTree([cq]), cq.name, [ps(requests={"cpu": "1"})], flavors, oracle=fixed_oracle())
    assert a.mode is NO_FIT
    assert a.pod_sets[0].reasons == ["flavor deleted-flavor not found"]
    assert a.no_fit_reason == NO_MATCHING_FLAVOR
    assert a.message() == "couldn't assign flavors to pod set main: flavor deleted-flavor not found"


def _three_flavor_cohort(
    usage: Mapping[FlavorResource, int], other: Mapping[FlavorResource, int], fungibility: dict[str, Any] | None = None
) -> QuotaTree:
    test_cq = make_cq(
        "test-clusterqueue",
        rg(*(fq(f, ("compute", "10"), ("gpu", "10")) for f in ("uno", "due", "tre"))),
        cohort="cohort",
        preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"},
        fungibility=fungibility or {"whenCanPreempt": "TryNextFlavor"},
    )
    other_cq = make_cq(
        "other-clusterqueue",
        rg(*(fq(f, ("compute", "0"), ("gpu", "0")) for f in ("uno", "due", "tre"))),
        cohort="cohort",
    )
    tree = QuotaTree([test_cq, other_cq])
    tree.add_usage("other-clusterqueue", other)
    tree.add_usage("test-clusterqueue", usage)
    return tree


_P, _R = PreemptionPossibility.PREEMPT, PreemptionPossibility.RECLAIM


# Kueue: flavorassigner_test.go TestReclaimBeforePriorityPreemption
@pytest.mark.parametrize(
    ("name", "requests", "usage", "other", "fungibility", "simulation", "want_mode", "want"),
    [
        (
            "Select first flavor which fits",
            {"gpu": "10"},
            {("uno", "gpu"): 1},
            {("due", "gpu"): 1},
            None,
            {},
            FIT,
            {"gpu": "tre"},
        ),
        (
            "Select first flavor where gpu reclamation is possible",
            {"gpu": "10"},
            {("uno", "gpu"): 1},
            {("due", "gpu"): 1, ("tre", "gpu"): 1},
            None,
            {("uno", "gpu"): (_P, 0), ("due", "gpu"): (_R, 0)},
            PREEMPT,
            {"gpu": "due"},
        ),
        (
            "Select first flavor when flavor fungibility is disabled",
            {"gpu": "10"},
            {("uno", "gpu"): 1},
            {("due", "gpu"): 1, ("tre", "gpu"): 1},
            {"whenCanPreempt": "MayStopSearch"},
            {},
            PREEMPT,
            {"gpu": "uno"},
        ),
        (
            "Select first flavor where priority based preemption is possible",
            {"gpu": "10"},
            {("uno", "gpu"): 1, ("due", "gpu"): 1, ("tre", "gpu"): 1},
            {},
            None,
            {},
            PREEMPT,
            {"gpu": "uno"},
        ),
        (
            "Select second flavor where gpu reclamation is possible, as compute Fits",
            {"gpu": "10", "compute": "10"},
            {("uno", "gpu"): 1, ("uno", "compute"): 1, ("due", "compute"): 1},
            {("due", "gpu"): 1, ("tre", "gpu"): 1},
            None,
            {("uno", "gpu"): (_P, 0), ("due", "gpu"): (_R, 0), ("tre", "gpu"): (_R, 0)},
            PREEMPT,
            {"gpu": "tre", "compute": "tre"},
        ),
    ],
)
def test_reclaim_before_priority_preemption(
    name: str,
    requests: dict[str, str],
    usage: dict[FlavorResource, int],
    other: dict[FlavorResource, int],
    fungibility: dict[str, Any] | None,
    simulation: dict[FlavorResource, tuple[PreemptionPossibility, int]],
    want_mode: FlavorAssignmentMode,
    want: dict[str, str],
) -> None:
    tree = _three_flavor_cohort(usage, other, fungibility)
    flavors = {f: make_rf(f) for f in ("uno", "due", "tre")}
    a = assign_flavors(tree, "test-clusterqueue", [ps(requests=requests)], flavors, oracle=fixed_oracle(simulation))
    assert a.mode is want_mode, name
    assert {r: fa.flavor for r, fa in a.pod_sets[0].flavors.items()} == want, name


# Kueue: flavorassigner_test.go TestHierarchical
@pytest.mark.parametrize(
    ("name", "test_flavors", "usage", "other", "fungibility", "simulation", "want_mode", "want"),
    [
        ("Select the top flavor", None, {("one", "cpu"): 4_000}, {("two", "cpu"): 4_000}, None, {}, FIT, "three"),
        ("Select the first flavor which fits", None, {("one", "cpu"): 4_000}, {}, None, {}, FIT, "two"),
        (
            "Select deeper-borrowing flavor that fits when shallower-borrowing flavor has no preemption candidates",
            [fq("one", ("cpu", "4", "0")), fq("two", ("cpu", "0")), fq("three", ("cpu", "0"))],
            {("one", "cpu"): 4_000},
            {},
            {
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "PreemptionOverBorrowing",
            },
            {("one", "cpu"): (PreemptionPossibility.NO_CANDIDATES, 1)},
            FIT,
            "two",
        ),
    ],
)
def test_hierarchical_flavor_assignment(
    name: str,
    test_flavors: list[dict[str, Any]] | None,
    usage: dict[FlavorResource, int],
    other: dict[FlavorResource, int],
    fungibility: dict[str, Any] | None,
    simulation: dict[FlavorResource, tuple[PreemptionPossibility, int]],
    want_mode: FlavorAssignmentMode,
    want: str,
) -> None:
    default = [fq(f, ("cpu", "0")) for f in ("one", "two", "three")]
    cohorts = [
        make_cohort("three", rg(fq("three", ("cpu", "4")))),
        make_cohort("two", rg(fq("two", ("cpu", "4"))), parent="three"),
        make_cohort("one", rg(fq("one", ("cpu", "4"))), parent="two"),
    ]
    test_cq = make_cq(
        "test-clusterqueue",
        rg(*(test_flavors or default)),
        cohort="one",
        preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"},
        fungibility=fungibility or {"whenCanPreempt": "TryNextFlavor"},
    )
    other_cq = make_cq("other-clusterqueue", rg(*default), cohort="two")
    tree = QuotaTree([test_cq, other_cq], cohorts)
    tree.add_usage("other-clusterqueue", other)
    tree.add_usage("test-clusterqueue", usage)
    flavors = {f: make_rf(f) for f in ("one", "two", "three")}
    a = assign_flavors(tree, "test-clusterqueue", [ps(requests={"cpu": "4"})], flavors, oracle=fixed_oracle(simulation))
    assert a.mode is want_mode, name
    assert a.pod_sets[0].flavors["cpu"].flavor == want, name


def test_is_preferred_kueue_table() -> None:
    # Kueue: flavorassigner_test.go TestIsPreferred, over (preemption mode, borrowing level).
    from dispatcher.placement.quota import _is_preferred  # the ordering has no public surface of its own

    no_fit, no_cand, preempt, _reclaim, fit = range(5)
    pob = "PreemptionOverBorrowing"
    bop = "BorrowingOverPreemption"
    cases = [
        ((fit, 0), (preempt, 0), None, True),
        ((preempt, 1), (fit, 2), bop, False),
        ((preempt, 1), (fit, 2), pob, True),
        ((preempt, 1), (fit, 1), pob, False),
        ((no_cand, 1), (fit, 2), pob, False),
        ((fit, 2), (no_cand, 1), pob, True),
        ((no_cand, 1), (no_fit, 0), None, True),
        ((no_fit, 0), (no_cand, 1), None, False),
        ((no_cand, 1), (no_cand, 2), pob, True),
        ((no_cand, 2), (no_cand, 1), pob, False),
    ]
    for a, b, preference, want in cases:
        assert _is_preferred(a, b, preference) is want, (a, b, preference)


def _gpu_cq(**kw: Any) -> ClusterQueueSpec:
    return make_cq(
        "team",
        rg(fq("a100", ("cpu", "16"), ("nvidia.com/gpu", "4")), fq("h100", ("cpu", "16"), ("nvidia.com/gpu", "8"))),
        **kw,
    )


GPU_FLAVORS = {
    "a100": make_rf("a100", {"gpu": "a100"}),
    "h100": make_rf("h100", {"gpu": "h100"}, taints=[{"key": "h100", "value": "true", "effect": "NoSchedule"}]),
}


def test_second_flavor_tried_when_first_is_full() -> None:
    tree = QuotaTree([_gpu_cq()])
    tree.add_usage("team", {("a100", "nvidia.com/gpu"): 4})
    h100_toleration = {"key": "h100", "operator": "Exists"}
    a = assign_flavors(
        tree, "team", [ps(requests={"cpu": "2", "nvidia.com/gpu": "2"}, tolerations=[h100_toleration])], GPU_FLAVORS
    )
    assert a.mode is FIT
    assert flavors_of(a) == {"main": {"cpu": ("h100", FIT), "nvidia.com/gpu": ("h100", FIT)}}
    assert a.usage == {("h100", "cpu"): 2_000, ("h100", "nvidia.com/gpu"): 2}
    assert a.last_tried_flavor_idx == [{"cpu": -1, "nvidia.com/gpu": -1}]
    # Without the toleration the tainted h100 is not a candidate: the a100 needs preemption, and the
    # default oracle finds nothing to preempt (no workloads recorded, withinClusterQueue: Never).
    a = assign_flavors(tree, "team", [ps(requests={"cpu": "2", "nvidia.com/gpu": "2"})], GPU_FLAVORS)
    assert a.mode is PREEMPT
    assert sorted(a.pod_sets[0].reasons) == [
        "insufficient unused quota for nvidia.com/gpu in flavor a100, 2 more needed",
        "untolerated taint {h100 true NoSchedule <nil>} in flavor h100",
    ]
    assert a.pod_sets[0].attempts[0].preemption_possibility is PreemptionPossibility.NO_CANDIDATES
    assert preemption_targets(tree, a) == []


def test_node_selector_mismatch_and_request_over_maximum() -> None:
    tree = QuotaTree([_gpu_cq()])
    tolerate_h100 = [{"key": "h100", "operator": "Exists"}]
    pod_sets = [ps(requests={"nvidia.com/gpu": "16"}, node_selector={"gpu": "a100"}, tolerations=tolerate_h100)]
    a = assign_flavors(tree, "team", pod_sets, GPU_FLAVORS)
    assert a.mode is NO_FIT
    assert sorted(a.pod_sets[0].reasons) == [
        "flavor h100 doesn't match node affinity",
        "insufficient quota for nvidia.com/gpu in flavor a100, previously considered podsets requests (0) + "
        "current podset request (16) > maximum capacity (4)",
    ]
    # Per resource group the least severe blocker wins: a100 could exist but is too small.
    assert a.no_fit_reason == EXCEEDS_MAX_QUOTA
    assert a.message().startswith("couldn't assign flavors to pod set main: flavor h100 doesn't match")


def test_uncovered_resource_is_no_fit_unless_ignored() -> None:
    tree = QuotaTree([_gpu_cq()])
    pod_sets = [ps(requests={"cpu": "1", "example.com/fpga": "1"})]
    a = assign_flavors(tree, "team", pod_sets, GPU_FLAVORS)
    assert a.mode is NO_FIT
    assert a.message() == (
        "couldn't assign flavors to pod set main: resource example.com/fpga unavailable in ClusterQueue"
    )
    assert a.no_fit_reason == NO_MATCHING_FLAVOR
    a = assign_flavors(tree, "team", pod_sets, GPU_FLAVORS, ignore_undeclared_resources=True)
    assert a.mode is FIT
    assert a.usage == {("a100", "cpu"): 1_000}


def test_waiting_for_quota_when_cohort_is_used_by_others() -> None:
    tree = QuotaTree(
        [
            make_cq("borrower", rg(fq("f", ("cpu", "0"))), cohort="c"),
            make_cq("owner", rg(fq("f", ("cpu", "4"))), cohort="c"),
        ]
    )
    tree.add_usage("owner", {("f", "cpu"): 4_000})
    a = assign_flavors(tree, "borrower", [ps(requests={"cpu": "2"})], {"f": make_rf("f")})
    assert a.mode is NO_FIT
    assert a.pod_sets[0].reasons == ["insufficient unused quota for cpu in flavor f, 2 more needed"]
    assert a.no_fit_reason == WAITING_FOR_QUOTA


def _borrowing_tree(fungibility: dict[str, Any]) -> QuotaTree:
    team = make_cq(
        "team",
        rg(fq("spot", ("cpu", "4")), fq("on-demand", ("cpu", "8"))),
        cohort="org",
        fungibility=fungibility,
    )
    other = make_cq("other", rg(fq("spot", ("cpu", "8"))), cohort="org")
    tree = QuotaTree([team, other])
    return tree


def test_when_can_borrow_may_stop_search_vs_try_next_flavor() -> None:
    flavors = {"spot": make_rf("spot"), "on-demand": make_rf("on-demand")}
    pod_sets = [ps(requests={"cpu": "6"})]
    stop = assign_flavors(_borrowing_tree({"whenCanBorrow": "MayStopSearch"}), "team", pod_sets, flavors)
    assert flavors_of(stop) == {"main": {"cpu": ("spot", FIT)}}
    assert stop.borrowing == 1
    assert stop.borrows
    nxt = assign_flavors(_borrowing_tree({"whenCanBorrow": "TryNextFlavor"}), "team", pod_sets, flavors)
    assert flavors_of(nxt) == {"main": {"cpu": ("on-demand", FIT)}}
    assert nxt.borrowing == 0
    # Resuming a scan from the recorded index skips the flavors already tried (LastAssignment in Kueue).
    resumed = assign_flavors(
        _borrowing_tree({"whenCanBorrow": "MayStopSearch"}),
        "team",
        pod_sets,
        flavors,
        last_tried_flavor_idx=[{"cpu": 0}],
    )
    assert flavors_of(resumed) == {"main": {"cpu": ("on-demand", FIT)}}


def test_assignment_to_admission() -> None:
    tree = QuotaTree([make_cq("q", rg(fq("default", ("cpu", "8"), ("memory", "8Gi"))))])
    a = assign_flavors(tree, "q", [ps("workers", 3, {"cpu": "500m", "memory": "1Gi"})], {"default": make_rf("default")})
    assert a.to_admission() == [
        {
            "name": "workers",
            "flavors": {"cpu": "default", "memory": "default"},
            "resourceUsage": {"cpu": "1500m", "memory": "3Gi"},
            "count": 3,
        }
    ]
    assert a.message() == ""
    assert str(a.mode) == "Fit"


# ---- preemption -------------------------------------------------------------------------------------------------


def _wl(
    key: str, cq: str, priority: int, usage: dict[FlavorResource, int], reserved: float = 0.0, created: float = 0.0
) -> AdmittedWorkload:
    return AdmittedWorkload(key, cq, usage, priority=priority, queue_order_time=created, quota_reserved_time=reserved)


def test_preemption_chooses_lowest_priority_newest_and_minimal_set() -> None:
    cq = make_cq("q", rg(fq("f", ("cpu", "6"))), preemption={"withinClusterQueue": "LowerPriority"})
    tree = QuotaTree([cq])
    fr = ("f", "cpu")
    for wl in (
        _wl("old-low", "q", 1, {fr: 2_000}, reserved=10),
        _wl("new-low", "q", 1, {fr: 2_000}, reserved=20),
        _wl("high", "q", 5, {fr: 2_000}, reserved=5),
    ):
        tree.add_workload(wl)
    before = tree.available("q", *fr)
    targets = find_preemption_targets(tree, "q", {fr: 2_000}, {fr}, priority=3)
    assert [(t.workload.key, t.reason) for t in targets] == [("new-low", IN_CLUSTER_QUEUE)]
    assert tree.available("q", *fr) == before  # the simulation leaves the tree as it was
    targets = find_preemption_targets(tree, "q", {fr: 4_000}, {fr}, priority=3)
    assert sorted(t.workload.key for t in targets) == ["new-low", "old-low"]
    # Even preempting every lower-priority workload would not make room for 6.
    assert find_preemption_targets(tree, "q", {fr: 6_000}, {fr}, priority=3) == []


def test_minimal_set_gives_back_unneeded_victims() -> None:
    # Kueue's heuristic: take candidates until it fits, then re-add them newest-choice-first if still fitting.
    cq = make_cq("q", rg(fq("f", ("cpu", "10"))), preemption={"withinClusterQueue": "LowerPriority"})
    tree = QuotaTree([cq])
    fr = ("f", "cpu")
    tree.add_workload(_wl("small", "q", 0, {fr: 1_000}))
    tree.add_workload(_wl("big", "q", 1, {fr: 6_000}))
    tree.add_workload(_wl("top", "q", 9, {fr: 3_000}))
    targets = find_preemption_targets(tree, "q", {fr: 6_000}, {fr}, priority=5)
    assert [t.workload.key for t in targets] == ["big"]


def test_no_preemption_when_policy_never() -> None:
    cq = make_cq("q", rg(fq("f", ("cpu", "4"))))
    tree = QuotaTree([cq])
    fr = ("f", "cpu")
    tree.add_workload(_wl("low", "q", -10, {fr: 4_000}))
    assert find_preemption_targets(tree, "q", {fr: 1_000}, {fr}, priority=100) == []
    a = assign_flavors(tree, "q", [ps(requests={"cpu": "1"})], {"f": make_rf("f")}, priority=100)
    assert a.mode is PREEMPT
    assert a.pod_sets[0].attempts[0].preemption_possibility is PreemptionPossibility.NO_CANDIDATES


def test_reclaim_within_cohort_reclaims_from_borrowing_queue() -> None:
    mine = make_cq("mine", rg(fq("f", ("cpu", "4"))), cohort="c", preemption={"reclaimWithinCohort": "Any"})
    theirs = make_cq("theirs", rg(fq("f", ("cpu", "4"))), cohort="c")
    tree = QuotaTree([mine, theirs])
    fr = ("f", "cpu")
    tree.add_workload(_wl("theirs-1", "theirs", 100, {fr: 3_000}, reserved=1))
    tree.add_workload(_wl("theirs-2", "theirs", 100, {fr: 3_000}, reserved=2))  # borrows 2 of mine
    a = assign_flavors(tree, "mine", [ps(requests={"cpu": "4"})], {"f": make_rf("f")}, priority=0)
    assert a.mode is PREEMPT
    assert a.pod_sets[0].attempts[0].preemption_possibility is PreemptionPossibility.RECLAIM
    targets = preemption_targets(tree, a, priority=0)
    assert [(t.workload.key, t.reason) for t in targets] == [("theirs-2", IN_COHORT_RECLAIMATION)]
    # Once "theirs" no longer borrows, nothing of it can be reclaimed.
    tree.remove_workload("theirs", "theirs-2")
    tree.add_usage("mine", {fr: 2_000})
    assert preemption_targets(tree, a, priority=0) == []


def test_simulate_preemption_reports_borrowing_after_preemption() -> None:
    cq = make_cq("q", rg(fq("f", ("cpu", "2", "4"))), cohort="c", preemption={"withinClusterQueue": "Any"})
    other = make_cq("o", rg(fq("f", ("cpu", "4"))), cohort="c")
    tree = QuotaTree([cq, other])
    fr = ("f", "cpu")
    tree.add_workload(_wl("mine", "q", 0, {fr: 2_000}))
    tree.add_workload(_wl("theirs", "o", 0, {fr: 4_000}))
    assert simulate_preemption(tree, "q", fr, 2_000) == (PreemptionPossibility.PREEMPT, 0)


def test_candidates_ordering() -> None:
    # Kueue: pkg/scheduler/preemption/preemption_test.go TestCandidatesOrdering
    now = 1000.0
    evicted = AdmittedWorkload("evicted", "preemptor", {}, priority=10, evicted=True)
    other_cq = AdmittedWorkload("other", "other", {}, priority=10, quota_reserved_time=now)
    high = AdmittedWorkload("high", "preemptor", {}, priority=10, quota_reserved_time=now)
    low = AdmittedWorkload("low", "preemptor", {}, priority=-10, quota_reserved_time=now)
    older = AdmittedWorkload("older", "preemptor", {}, quota_reserved_time=now - 1)
    younger = AdmittedWorkload("younger", "preemptor", {}, quota_reserved_time=now + 1)
    current = AdmittedWorkload("current", "preemptor", {}, quota_reserved_time=now)

    def order(*wls: AdmittedWorkload) -> list[str]:
        return [w.key for w in sorted(wls, key=lambda w: candidates_order_key(w, "preemptor", now))]

    assert order(high, low) == ["low", "high"]
    assert order(high, evicted) == ["evicted", "high"]
    assert order(high, other_cq) == ["other", "high"]
    assert order(older, younger, current) == ["younger", "current", "older"]


def test_lower_or_newer_equal_priority() -> None:
    cq = make_cq("q", rg(fq("f", ("cpu", "2"))), preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"})
    tree = QuotaTree([cq])
    fr = ("f", "cpu")
    tree.add_workload(_wl("same-older", "q", 1, {fr: 1_000}, created=5))
    tree.add_workload(_wl("same-newer", "q", 1, {fr: 1_000}, created=15))
    targets = find_preemption_targets(tree, "q", {fr: 1_000}, {fr}, priority=1, queue_order_time=10)
    assert [t.workload.key for t in targets] == ["same-newer"]


_NEVER_TIME = -62135596800.0  # Go's zero time.Time, the creation timestamp of Kueue's test workloads


@dataclass
class _PreemptionCase:
    name: str
    target: str
    admitted: list[tuple[str, str, int, dict[FlavorResource, str], float, float | None]]
    priority: int
    created: float | None
    usage: dict[FlavorResource, str]
    frs: list[FlavorResource]
    want: dict[str, str]


def _default_preemption_cluster_queues() -> tuple[list[ClusterQueueSpec], list[CohortSpec]]:
    """``defaultClusterQueues`` of Kueue's TestPreemption, plus the cohorts of "long range preemption"."""
    lower = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}
    any_ = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Any"}
    bwc = {"policy": "LowerPriority", "maxPriorityThreshold": 0}
    cqs = [
        make_cq(
            "standalone",
            rg(fq("default", ("cpu", "6"))),
            rg(fq("alpha", ("memory", "3Gi")), fq("beta", ("memory", "3Gi"))),
            preemption={"withinClusterQueue": "LowerPriority"},
        ),
        make_cq(
            "c1", rg(fq("default", ("cpu", "6", "6"), ("memory", "3Gi", "3Gi"))), cohort="cohort", preemption=lower
        ),
        make_cq("c2", rg(fq("default", ("cpu", "6", "6"), ("memory", "3Gi", "3Gi"))), cohort="cohort", preemption=any_),
        make_cq("d1", rg(fq("default", ("cpu", "6"), ("memory", "3Gi"))), cohort="cohort-no-limits", preemption=lower),
        make_cq("d2", rg(fq("default", ("cpu", "6"), ("memory", "3Gi"))), cohort="cohort-no-limits", preemption=any_),
        make_cq(
            "l1", rg(fq("default", ("cpu", "6", "12"), ("memory", "3Gi", "6Gi"))), cohort="legion", preemption=lower
        ),
        make_cq(
            "preventStarvation",
            rg(fq("default", ("cpu", "6"))),
            preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"},
        ),
        make_cq(
            "a_standard",
            rg(fq("default", ("cpu", "1", "12"))),
            cohort="with_shared_cq",
            preemption={
                "withinClusterQueue": "Never",
                "reclaimWithinCohort": "LowerPriority",
                "borrowWithinCohort": bwc,
            },
        ),
        make_cq(
            "b_standard",
            rg(fq("default", ("cpu", "1", "12"))),
            cohort="with_shared_cq",
            preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any", "borrowWithinCohort": bwc},
        ),
        make_cq(
            "a_best_effort",
            rg(fq("default", ("cpu", "1", "12"))),
            cohort="with_shared_cq",
            preemption={
                "withinClusterQueue": "Never",
                "reclaimWithinCohort": "LowerPriority",
                "borrowWithinCohort": bwc,
            },
        ),
        make_cq(
            "b_best_effort",
            rg(fq("default", ("cpu", "0", "13"))),
            cohort="with_shared_cq",
            preemption={
                "withinClusterQueue": "Never",
                "reclaimWithinCohort": "LowerPriority",
                "borrowWithinCohort": bwc,
            },
        ),
        make_cq("shared", rg(fq("default", ("cpu", "10"))), cohort="with_shared_cq"),
        make_cq("lend1", rg(fq("default", ("cpu", "6", "", "4"))), cohort="cohort-lend", preemption=lower),
        make_cq("lend2", rg(fq("default", ("cpu", "6", "", "2"))), cohort="cohort-lend", preemption=lower),
        make_cq(
            "a",
            rg(fq("default", ("cpu", "2"), ("memory", "2"))),
            cohort="cohort-three",
            preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        ),
        make_cq("b", rg(fq("default", ("cpu", "2"), ("memory", "2"))), cohort="cohort-three"),
        make_cq("c", rg(fq("default", ("cpu", "2"), ("memory", "2"))), cohort="cohort-three"),
        # "long range preemption"
        make_cq(
            "cq-left", rg(fq("default", ("cpu", "10"))), cohort="cohort-left", preemption={"reclaimWithinCohort": "Any"}
        ),
        make_cq("cq-right", rg(fq("default", ("cpu", "0"))), cohort="cohort-right"),
    ]
    cohorts = [make_cohort("cohort-left", parent="root"), make_cohort("cohort-right", parent="root")]
    return cqs, cohorts


# Kueue: pkg/scheduler/preemption/preemption_test.go TestPreemption. Usage strings are Kueue quantities; times
# are seconds from the test's ``now`` (None: the workload has no explicit creation timestamp).
_PREEMPTION_CASES = [
    _PreemptionCase(
        "preempt lowest priority",
        "standalone",
        [
            ("low", "standalone", -1, {("default", "cpu"): "2000m"}, 0, None),
            ("mid", "standalone", 0, {("default", "cpu"): "2000m"}, 0, None),
            ("high", "standalone", 1, {("default", "cpu"): "2000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {"low": "InClusterQueue"},
    ),
    _PreemptionCase(
        "preempt multiple",
        "standalone",
        [
            ("low", "standalone", -1, {("default", "cpu"): "2000m"}, 0, None),
            ("mid", "standalone", 0, {("default", "cpu"): "2000m"}, 0, None),
            ("high", "standalone", 1, {("default", "cpu"): "2000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "3"},
        [("default", "cpu")],
        {"low": "InClusterQueue", "mid": "InClusterQueue"},
    ),
    _PreemptionCase(
        "no preemption for low priority",
        "standalone",
        [
            ("low", "standalone", -1, {("default", "cpu"): "3000m"}, 0, None),
            ("mid", "standalone", 0, {("default", "cpu"): "3000m"}, 0, None),
        ],
        -1,
        None,
        {("default", "cpu"): "1"},
        [("default", "cpu")],
        {},
    ),
    _PreemptionCase(
        "not enough low priority workloads",
        "standalone",
        [
            ("low", "standalone", -1, {("default", "cpu"): "3000m"}, 0, None),
            ("mid", "standalone", 0, {("default", "cpu"): "3000m"}, 0, None),
        ],
        0,
        None,
        {("default", "cpu"): "4"},
        [("default", "cpu")],
        {},
    ),
    _PreemptionCase(
        "some free quota, preempt low priority",
        "standalone",
        [
            ("low", "standalone", -1, {("default", "cpu"): "1000m"}, 0, None),
            ("mid", "standalone", 0, {("default", "cpu"): "1000m"}, 0, None),
            ("high", "standalone", 1, {("default", "cpu"): "3000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {"low": "InClusterQueue"},
    ),
    _PreemptionCase(
        "minimal set excludes low priority",
        "standalone",
        [
            ("low", "standalone", -1, {("default", "cpu"): "1000m"}, 0, None),
            ("mid", "standalone", 0, {("default", "cpu"): "2000m"}, 0, None),
            ("high", "standalone", 1, {("default", "cpu"): "3000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {"mid": "InClusterQueue"},
    ),
    _PreemptionCase(
        "only preempt workloads using the chosen flavor",
        "standalone",
        [
            ("low", "standalone", -1, {("alpha", "memory"): "2Gi"}, 0, None),
            ("mid", "standalone", 0, {("beta", "memory"): "1Gi"}, 0, None),
            ("high", "standalone", 1, {("beta", "memory"): "1Gi"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "1", ("beta", "memory"): "2Gi"},
        [("beta", "memory")],
        {"mid": "InClusterQueue"},
    ),
    _PreemptionCase(
        "reclaim quota from borrower",
        "c1",
        [
            ("c1-low", "c1", -1, {("default", "cpu"): "3000m"}, 0, None),
            ("c2-mid", "c2", 0, {("default", "cpu"): "3000m"}, 0, None),
            ("c2-high", "c2", 1, {("default", "cpu"): "6000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "3"},
        [("default", "cpu")],
        {"c2-mid": "InCohortReclamation"},
    ),
    _PreemptionCase(
        "reclaim quota if workload requests 0 resources for a resource at nominal quota",
        "c1",
        [
            ("c1-low", "c1", -1, {("default", "cpu"): "3", ("default", "memory"): "3Gi"}, 0, None),
            ("c2-mid", "c2", 0, {("default", "cpu"): "3"}, 0, None),
            ("c2-high", "c2", 1, {("default", "cpu"): "6"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "3"},
        [("default", "cpu")],
        {"c2-mid": "InCohortReclamation"},
    ),
    _PreemptionCase(
        "no workloads borrowing",
        "c1",
        [
            ("c1-high", "c1", 1, {("default", "cpu"): "4000m"}, 0, None),
            ("c2-low-1", "c2", -1, {("default", "cpu"): "4000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "4"},
        [("default", "cpu")],
        {},
    ),
    _PreemptionCase(
        "not enough workloads borrowing",
        "c1",
        [
            ("c1-high", "c1", 1, {("default", "cpu"): "4000m"}, 0, None),
            ("c2-low-1", "c2", -1, {("default", "cpu"): "4000m"}, 0, None),
            ("c2-low-2", "c2", -1, {("default", "cpu"): "4000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "4"},
        [("default", "cpu")],
        {},
    ),
    _PreemptionCase(
        "preempting locally and borrowing other resources in cohort, without cohort candidates",
        "c1",
        [
            ("c1-low", "c1", -1, {("default", "cpu"): "4000m"}, 0, None),
            ("c2-low-1", "c2", -1, {("default", "cpu"): "4000m"}, 0, None),
            ("c2-high-2", "c2", 1, {("default", "cpu"): "4000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "4", ("default", "memory"): "5Gi"},
        [("default", "cpu"), ("default", "memory")],
        {"c1-low": "InClusterQueue"},
    ),
    _PreemptionCase(
        "preempting locally and borrowing same resource in cohort",
        "c1",
        [
            ("c1-med", "c1", 0, {("default", "cpu"): "4000m"}, 0, None),
            ("c1-low", "c1", -1, {("default", "cpu"): "4000m"}, 0, None),
            ("c2-low-1", "c2", -1, {("default", "cpu"): "4000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "4"},
        [("default", "cpu")],
        {"c1-low": "InClusterQueue"},
    ),
    _PreemptionCase(
        "preempting locally and borrowing same resource in cohort; no borrowing limit in the cohort",
        "d1",
        [
            ("d1-med", "d1", 0, {("default", "cpu"): "4"}, 0, None),
            ("d1-low", "d1", -1, {("default", "cpu"): "4"}, 0, None),
            ("d2-low-1", "d2", -1, {("default", "cpu"): "4"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "4"},
        [("default", "cpu")],
        {"d1-low": "InClusterQueue"},
    ),
    _PreemptionCase(
        "preempting locally and borrowing other resources in cohort, with cohort candidates",
        "c1",
        [
            ("c1-med", "c1", 0, {("default", "cpu"): "4000m"}, 0, None),
            ("c2-low-1", "c2", -1, {("default", "cpu"): "5000m"}, 0, None),
            ("c2-low-2", "c2", -1, {("default", "cpu"): "1000m"}, 0, None),
            ("c2-low-3", "c2", -1, {("default", "cpu"): "1000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "2", ("default", "memory"): "5Gi"},
        [("default", "cpu"), ("default", "memory")],
        {"c1-med": "InClusterQueue"},
    ),
    _PreemptionCase(
        "preempting locally and not borrowing same resource in 1-queue cohort",
        "l1",
        [
            ("l1-med", "l1", 0, {("default", "cpu"): "4000m"}, 0, None),
            ("l1-low", "l1", -1, {("default", "cpu"): "2000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "4"},
        [("default", "cpu")],
        {"l1-med": "InClusterQueue"},
    ),
    _PreemptionCase(
        "do not reclaim borrowed quota from same priority for withinCohort=ReclaimFromLowerPriority",
        "c1",
        [
            ("c1", "c1", 0, {("default", "cpu"): "2000m"}, 0, None),
            ("c2-1", "c2", 0, {("default", "cpu"): "4000m"}, 0, None),
            ("c2-2", "c2", 0, {("default", "cpu"): "4000m"}, 0, None),
        ],
        0,
        None,
        {("default", "cpu"): "4"},
        [("default", "cpu")],
        {},
    ),
    _PreemptionCase(
        "reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny",
        "c2",
        [
            ("c1-1", "c1", 0, {("default", "cpu"): "4000m"}, 0, None),
            ("c1-2", "c1", 1, {("default", "cpu"): "4000m"}, 0, None),
            ("c2", "c2", 0, {("default", "cpu"): "2000m"}, 0, None),
        ],
        0,
        None,
        {("default", "cpu"): "4"},
        [("default", "cpu")],
        {"c1-1": "InCohortReclamation"},
    ),
    _PreemptionCase(
        "preempt from all ClusterQueues in cohort",
        "c1",
        [
            ("c1-low", "c1", -1, {("default", "cpu"): "3000m"}, 0, None),
            ("c1-mid", "c1", 0, {("default", "cpu"): "2000m"}, 0, None),
            ("c2-low", "c2", -1, {("default", "cpu"): "3000m"}, 0, None),
            ("c2-mid", "c2", 0, {("default", "cpu"): "4000m"}, 0, None),
        ],
        0,
        None,
        {("default", "cpu"): "4"},
        [("default", "cpu")],
        {"c1-low": "InClusterQueue", "c2-low": "InCohortReclamation"},
    ),
    _PreemptionCase(
        "can't preempt workloads in ClusterQueue for withinClusterQueue=Never",
        "c2",
        [
            ("c2-low", "c2", -1, {("default", "cpu"): "3000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "4"},
        [("default", "cpu")],
        {},
    ),
    _PreemptionCase(
        "each podset preempts a different flavor",
        "standalone",
        [
            ("low-alpha", "standalone", -1, {("alpha", "memory"): "2Gi"}, 0, None),
            ("low-beta", "standalone", -1, {("beta", "memory"): "2Gi"}, 0, None),
        ],
        0,
        None,
        {("alpha", "memory"): "2Gi", ("beta", "memory"): "2Gi"},
        [("alpha", "memory"), ("beta", "memory")],
        {"low-alpha": "InClusterQueue", "low-beta": "InClusterQueue"},
    ),
    _PreemptionCase(
        "preempt newer workloads with the same priority",
        "preventStarvation",
        [
            ("wl1", "preventStarvation", 2, {("default", "cpu"): "2"}, 0, None),
            ("wl2", "preventStarvation", 1, {("default", "cpu"): "2"}, 1, 0),
            ("wl3", "preventStarvation", 1, {("default", "cpu"): "2"}, 0, 0),
        ],
        1,
        -15,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {"wl2": "InClusterQueue"},
    ),
    _PreemptionCase(
        "use BorrowWithinCohort; allow preempting a lower-priority workload from another ClusterQueue while borrowing",
        "a_standard",
        [
            ("a_best_effort_low", "a_best_effort", -1, {("default", "cpu"): "10"}, 0, None),
            ("b_best_effort_low", "b_best_effort", -1, {("default", "cpu"): "1"}, 0, None),
        ],
        0,
        None,
        {("default", "cpu"): "10"},
        [("default", "cpu")],
        {"a_best_effort_low": "InCohortReclaimWhileBorrowing"},
    ),
    _PreemptionCase(
        (
            "use BorrowWithinCohort; don't allow preempting a lower-priority workload with priority above "
            "MaxPriorityThreshold, if borrowing is required even after the preemption"
        ),
        "a_standard",
        [
            ("b_standard", "b_standard", 1, {("default", "cpu"): "10000m"}, 0, None),
        ],
        2,
        None,
        {("default", "cpu"): "10"},
        [("default", "cpu")],
        {},
    ),
    _PreemptionCase(
        (
            "use BorrowWithinCohort; allow preempting a lower-priority workload with priority above "
            "MaxPriorityThreshold, if borrowing is not required after the preemption"
        ),
        "a_standard",
        [
            ("b_standard", "b_standard", 1, {("default", "cpu"): "13000m"}, 0, None),
        ],
        2,
        None,
        {("default", "cpu"): "1"},
        [("default", "cpu")],
        {"b_standard": "InCohortReclamation"},
    ),
    _PreemptionCase(
        "use BorrowWithinCohort; don't allow for preemption of lower-priority workload from the same ClusterQueue",
        "a_standard",
        [
            ("a_standard", "a_standard", 1, {("default", "cpu"): "13000m"}, 0, None),
        ],
        2,
        None,
        {("default", "cpu"): "1"},
        [("default", "cpu")],
        {},
    ),
    _PreemptionCase(
        "use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and already above nominal",
        "b_standard",
        [
            ("a_standard_1", "a_standard", 1, {("default", "cpu"): "10"}, 0, None),
            ("a_standard_2", "a_standard", 1, {("default", "cpu"): "1"}, 0, None),
            ("b_standard_1", "b_standard", 1, {("default", "cpu"): "1"}, 0, None),
            ("b_standard_2", "b_standard", 2, {("default", "cpu"): "1"}, 0, None),
        ],
        3,
        None,
        {("default", "cpu"): "1"},
        [("default", "cpu")],
        {"b_standard_1": "InClusterQueue"},
    ),
    _PreemptionCase(
        "use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below threshold",
        "b_standard",
        [
            ("b_standard_high", "b_standard", 2, {("default", "cpu"): "10"}, 0, None),
            ("b_standard_mid", "b_standard", 1, {("default", "cpu"): "1"}, 0, None),
            ("a_best_effort_low", "a_best_effort", -1, {("default", "cpu"): "1"}, 0, None),
            ("a_best_effort_lower", "a_best_effort", -2, {("default", "cpu"): "1"}, 0, None),
        ],
        2,
        None,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {"a_best_effort_lower": "InCohortReclaimWhileBorrowing", "b_standard_mid": "InClusterQueue"},
    ),
    _PreemptionCase(
        "reclaim quota from lender",
        "lend1",
        [
            ("lend1-low", "lend1", -1, {("default", "cpu"): "3000m"}, 0, None),
            ("lend2-mid", "lend2", 0, {("default", "cpu"): "3000m"}, 0, None),
            ("lend2-high", "lend2", 1, {("default", "cpu"): "4000m"}, 0, None),
        ],
        1,
        None,
        {("default", "cpu"): "3"},
        [("default", "cpu")],
        {"lend2-mid": "InCohortReclamation"},
    ),
    _PreemptionCase(
        "preempt from all ClusterQueues in cohort-lend",
        "lend1",
        [
            ("lend1-low", "lend1", -1, {("default", "cpu"): "3000m"}, 0, None),
            ("lend1-mid", "lend1", 0, {("default", "cpu"): "2000m"}, 0, None),
            ("lend2-low", "lend2", -1, {("default", "cpu"): "3000m"}, 0, None),
            ("lend2-mid", "lend2", 0, {("default", "cpu"): "4000m"}, 0, None),
        ],
        0,
        None,
        {("default", "cpu"): "4"},
        [("default", "cpu")],
        {"lend1-low": "InClusterQueue", "lend2-low": "InCohortReclamation"},
    ),
    _PreemptionCase(
        "cannot preempt from other ClusterQueues if exceeds requestable quota including lending limit",
        "lend1",
        [
            ("lend2-low", "lend2", -1, {("default", "cpu"): "10"}, 0, None),
        ],
        0,
        None,
        {("default", "cpu"): "9"},
        [("default", "cpu")],
        {},
    ),
    _PreemptionCase(
        "preemptions from cq when target queue is exhausted for the single requested resource",
        "a",
        [
            ("a1", "a", -2, {("default", "cpu"): "1"}, 0, None),
            ("a2", "a", -2, {("default", "cpu"): "1"}, 0, None),
            ("a3", "a", -1, {("default", "cpu"): "1"}, 0, None),
            ("b1", "b", 0, {("default", "cpu"): "1"}, 0, None),
            ("b2", "b", 0, {("default", "cpu"): "1"}, 0, None),
            ("b3", "b", 0, {("default", "cpu"): "1"}, 0, None),
        ],
        0,
        None,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {"a1": "InClusterQueue", "a2": "InClusterQueue"},
    ),
    _PreemptionCase(
        "preemptions from cq when target queue is exhausted for two requested resources",
        "a",
        [
            ("a1", "a", -2, {("default", "cpu"): "1", ("default", "memory"): "1"}, 0, None),
            ("a2", "a", -2, {("default", "cpu"): "1", ("default", "memory"): "1"}, 0, None),
            ("a3", "a", -1, {("default", "cpu"): "1", ("default", "memory"): "1"}, 0, None),
            ("b1", "b", 0, {("default", "cpu"): "1", ("default", "memory"): "1"}, 0, None),
            ("b2", "b", 0, {("default", "cpu"): "1", ("default", "memory"): "1"}, 0, None),
            ("b3", "b", 0, {("default", "cpu"): "1", ("default", "memory"): "1"}, 0, None),
        ],
        0,
        None,
        {("default", "cpu"): "2", ("default", "memory"): "2"},
        [("default", "cpu"), ("default", "memory")],
        {"a1": "InClusterQueue", "a2": "InClusterQueue"},
    ),
    _PreemptionCase(
        "preemptions from cq when target queue is exhausted for one requested resource, but not the other",
        "a",
        [
            ("a1", "a", -2, {("default", "cpu"): "1"}, 0, None),
            ("a2", "a", -2, {("default", "cpu"): "1"}, 0, None),
            ("a3", "a", -1, {("default", "cpu"): "1"}, 0, None),
            ("b1", "b", 0, {("default", "cpu"): "1"}, 0, None),
            ("b2", "b", 0, {("default", "cpu"): "1"}, 0, None),
            ("b3", "b", 0, {("default", "cpu"): "1"}, 0, None),
        ],
        0,
        None,
        {("default", "cpu"): "2", ("default", "memory"): "2"},
        [("default", "cpu"), ("default", "memory")],
        {"a1": "InClusterQueue", "a2": "InClusterQueue"},
    ),
    _PreemptionCase(
        "allow preemption from other cluster queues if target cq is not exhausted for the requested resource",
        "a",
        [
            ("a1", "a", -1, {("default", "cpu"): "1"}, 0, None),
            ("b1", "b", 0, {("default", "cpu"): "1"}, 0, None),
            ("b2", "b", 0, {("default", "cpu"): "1"}, 0, None),
            ("b3", "b", 0, {("default", "cpu"): "1"}, 0, None),
            ("b4", "b", 0, {("default", "cpu"): "1"}, 0, None),
            ("b5", "b", -1, {("default", "cpu"): "1"}, 0, None),
        ],
        0,
        None,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {"a1": "InClusterQueue", "b5": "InCohortReclamation"},
    ),
    _PreemptionCase(
        "long range preemption",
        "cq-left",
        [
            ("to-be-preempted", "cq-right", 0, {("default", "cpu"): "5"}, 0, None),
        ],
        0,
        None,
        {("default", "cpu"): "8"},
        [("default", "cpu")],
        {"to-be-preempted": "InCohortReclamation"},
    ),
]


@pytest.mark.parametrize("case", _PREEMPTION_CASES, ids=[c.name for c in _PREEMPTION_CASES])
def test_preemption_kueue_table(case: _PreemptionCase) -> None:
    cqs, cohorts = _default_preemption_cluster_queues()
    tree = QuotaTree(cqs, cohorts)
    for key, cq, priority, admitted_usage, reserved, created in case.admitted:
        tree.add_workload(
            AdmittedWorkload(
                key,
                cq,
                {fr: kueue_value(fr[1], q) for fr, q in admitted_usage.items()},
                priority=priority,
                queue_order_time=_NEVER_TIME if created is None else created,
                quota_reserved_time=reserved,
            )
        )
    usage = {fr: kueue_value(fr[1], q) for fr, q in case.usage.items()}
    before = {cq.name: tree.cluster_queue_report(cq.name) for cq in cqs}
    targets = find_preemption_targets(
        tree,
        case.target,
        usage,
        set(case.frs),
        priority=case.priority,
        queue_order_time=_NEVER_TIME if case.created is None else case.created,
        now=0.0,
    )
    assert {t.workload.key: t.reason for t in targets} == case.want
    assert {cq.name: tree.cluster_queue_report(cq.name) for cq in cqs} == before


@dataclass
class _HierarchicalCase:
    name: str
    cohorts: list[tuple[str, str | None, list[tuple[str, ...]]]]
    cluster_queues: list[tuple[str, str | None, list[tuple[str, ...]], dict[str, Any]]]
    target: str
    admitted: list[tuple[str, str, int, dict[FlavorResource, str], float, float | None, bool]]
    priority: int
    created: float | None
    usage: dict[FlavorResource, str]
    frs: list[FlavorResource]
    want: dict[str, str]


# Kueue: pkg/scheduler/preemption/preemption_hierarchical_test.go TestHierarchicalPreemptions (one flavor,
# "default"). Cohorts: (name, parent, quotas); ClusterQueues: (name, cohort, quotas, preemption).
_HIERARCHICAL_CASES = [
    _HierarchicalCase(
        "preempt with hierarchical advantage",
        [("r", None, []), ("c", "r", [("cpu", "2")])],
        [
            ("q", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_borrowing", "r", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted2", "q_borrowing", 0, {("default", "cpu"): "2"}, 0, None, False),
        ],
        0,
        None,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {"admitted2": "InCohortReclamation"},
    ),
    _HierarchicalCase(
        "avoid queues within nominal quota",
        [("r", None, []), ("c", "r", [("cpu", "2")])],
        [
            ("q_nominal", "r", [("cpu", "2")], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_borrowing", "r", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted1", "q_nominal", -10, {("default", "cpu"): "2"}, 0, None, False),
            ("admitted2", "q_borrowing", 0, {("default", "cpu"): "2"}, 0, None, False),
        ],
        0,
        None,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {"admitted2": "InCohortReclamation"},
    ),
    _HierarchicalCase(
        "preempt multiple with hierarchical advantage",
        [("r", None, []), ("c", "r", [("cpu", "2")])],
        [
            ("q", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_borrowing", "r", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted1", "q_borrowing", 1, {("default", "cpu"): "1"}, 0, None, False),
            ("admitted2", "q_borrowing", 2, {("default", "cpu"): "1"}, 0, None, False),
        ],
        0,
        None,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {"admitted1": "InCohortReclamation", "admitted2": "InCohortReclamation"},
    ),
    _HierarchicalCase(
        "preempt in cohort and own CQ",
        [("r", None, []), ("c", "r", [("cpu", "3")])],
        [
            (
                "q",
                "c",
                [],
                {
                    "withinClusterQueue": "LowerPriority",
                    "reclaimWithinCohort": "Any",
                    "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 0},
                },
            ),
            ("q_same_cohort", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted_not_preemptible", "q_same_cohort", 1, {("default", "cpu"): "1"}, 0, None, False),
            ("admitted_preemptible", "q_same_cohort", 0, {("default", "cpu"): "2"}, 0, None, False),
            ("admitted_own_queue", "q", -1, {("default", "cpu"): "1"}, 0, None, False),
        ],
        1,
        None,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {"admitted_own_queue": "InClusterQueue", "admitted_preemptible": "InCohortReclaimWhileBorrowing"},
    ),
    _HierarchicalCase(
        "prefer to preempt hierarchical candidate",
        [("r", None, []), ("c", "r", [("cpu", "2")])],
        [
            ("q", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_borrowing", "r", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted_borrowing", "q_borrowing", 1, {("default", "cpu"): "1"}, 0, None, False),
            ("admitted_same_queue", "q", -2, {("default", "cpu"): "1"}, 0, None, False),
        ],
        0,
        None,
        {("default", "cpu"): "1"},
        [("default", "cpu")],
        {"admitted_borrowing": "InCohortReclamation"},
    ),
    _HierarchicalCase(
        "forced to preempt priority candidate",
        [("r", None, []), ("c", "r", [("cpu", "2")])],
        [
            (
                "q",
                "c",
                [],
                {
                    "withinClusterQueue": "LowerPriority",
                    "reclaimWithinCohort": "Any",
                    "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 0},
                },
            ),
            ("q_nominal", "r", [("cpu", "2")], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_same_cohort", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted_nominal", "q_nominal", -10, {("default", "cpu"): "2"}, 0, None, False),
            ("admitted_same_cohort", "q_same_cohort", -1, {("default", "cpu"): "2"}, 0, None, False),
        ],
        0,
        None,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {"admitted_same_cohort": "InCohortReclaimWhileBorrowing"},
    ),
    _HierarchicalCase(
        "incoming workload fits in CQ nominal quota",
        [("r", None, []), ("c", "r", [("cpu", "2")])],
        [
            ("q", "c", [("cpu", "4")], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_borrowing", "r", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_same_cohort", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted_borrowing", "q_borrowing", 10, {("default", "cpu"): "3"}, 0, None, False),
            ("admitted_same_cohort", "q_same_cohort", 10, {("default", "cpu"): "3"}, 0, None, False),
        ],
        0,
        None,
        {("default", "cpu"): "4"},
        [("default", "cpu")],
        {"admitted_borrowing": "InCohortReclamation", "admitted_same_cohort": "InCohortReclamation"},
    ),
    _HierarchicalCase(
        "preempt hierarchical and priority candidates",
        [("r", None, [("cpu", "1")]), ("c", "r", [("cpu", "4")])],
        [
            (
                "q",
                "c",
                [],
                {
                    "withinClusterQueue": "LowerPriority",
                    "reclaimWithinCohort": "LowerPriority",
                    "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 0},
                },
            ),
            ("q_borrowing", "r", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_same_cohort", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted_borrowing", "q_borrowing", -1, {("default", "cpu"): "2"}, 0, None, False),
            ("admitted_same_cohort_preemptible", "q_same_cohort", -1, {("default", "cpu"): "1"}, 0, None, False),
            ("admitted_borrowing_not_preemptible", "q_borrowing", 1, {("default", "cpu"): "2"}, 0, None, False),
        ],
        0,
        None,
        {("default", "cpu"): "3"},
        [("default", "cpu")],
        {
            "admitted_borrowing": "InCohortReclamation",
            "admitted_same_cohort_preemptible": "InCohortReclaimWhileBorrowing",
        },
    ),
    _HierarchicalCase(
        "preempt hierarchical candidates and inside CQ",
        [("r", None, [("cpu", "1")]), ("c", "r", [("cpu", "4")])],
        [
            (
                "q",
                "c",
                [],
                {
                    "withinClusterQueue": "LowerPriority",
                    "reclaimWithinCohort": "LowerPriority",
                    "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 0},
                },
            ),
            ("q_borrowing", "r", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_same_cohort", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted_borrowing", "q_borrowing", -1, {("default", "cpu"): "2"}, 0, None, False),
            ("admitted_same_queue_preemptible", "q", -1, {("default", "cpu"): "1"}, 0, None, False),
            ("admitted_borrowing_not_preemptible", "q_borrowing", 1, {("default", "cpu"): "2"}, 0, None, False),
        ],
        0,
        None,
        {("default", "cpu"): "3"},
        [("default", "cpu")],
        {"admitted_borrowing": "InCohortReclamation", "admitted_same_queue_preemptible": "InClusterQueue"},
    ),
    _HierarchicalCase(
        "reclaim nominal quota from lowest priority workload, excluding non-borrowing",
        [("r", None, []), ("c", "r", [("cpu", "3")])],
        [
            ("q", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_borrowing", "r", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_nominal", "r", [("cpu", "2")], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted_borrowing_prio_8", "q_borrowing", 8, {("default", "cpu"): "1"}, 0, None, False),
            ("admitted_borrowing_prio_9", "q_borrowing", 9, {("default", "cpu"): "1"}, 0, None, False),
            ("admitted_borrowing_prio_10", "q_borrowing", 9, {("default", "cpu"): "1"}, 0, None, False),
            ("admitted_nominal", "q_nominal", -2, {("default", "cpu"): "2"}, 0, None, False),
        ],
        0,
        None,
        {("default", "cpu"): "1"},
        [("default", "cpu")],
        {"admitted_borrowing_prio_8": "InCohortReclamation"},
    ),
    _HierarchicalCase(
        "infeasible preemption all available workloads in pruned subtrees",
        [("r", None, []), ("c", "r", [("cpu", "2")]), ("c_other", "r", [("cpu", "2")])],
        [
            ("q_other", "c_other", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_same_cohort", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted_other_1", "q_other", -10, {("default", "cpu"): "1"}, 0, None, False),
            ("admitted_other_2", "q_other", -10, {("default", "cpu"): "1"}, 0, None, False),
            ("admitted_same_cohort", "q_same_cohort", 0, {("default", "cpu"): "2"}, 0, None, False),
        ],
        0,
        None,
        {("default", "cpu"): "2"},
        [("default", "cpu")],
        {},
    ),
    _HierarchicalCase(
        "hiearchical preemption with multiple resources",
        [("r", None, [("cpu", "3")]), ("c", "r", [("cpu", "4"), ("memory", "4Gi")])],
        [
            ("q", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_borrowing", "r", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_same_cohort", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            (
                "admitted_borrowing",
                "q_borrowing",
                0,
                {("default", "cpu"): "3", ("default", "memory"): "1Gi"},
                0,
                None,
                False,
            ),
            (
                "admitted_same_cohort",
                "q_same_cohort",
                -2,
                {("default", "cpu"): "1", ("default", "memory"): "3Gi"},
                0,
                None,
                False,
            ),
        ],
        -2,
        None,
        {("default", "cpu"): "2", ("default", "memory"): "1Gi"},
        [("default", "cpu"), ("default", "memory")],
        {"admitted_borrowing": "InCohortReclamation"},
    ),
    _HierarchicalCase(
        "prefer to preempt evicted workloads",
        [("r", None, []), ("c", "r", [("cpu", "2")])],
        [
            (
                "q",
                "c",
                [],
                {
                    "withinClusterQueue": "LowerPriority",
                    "reclaimWithinCohort": "Any",
                    "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 0},
                },
            ),
            ("q_borrowing", "r", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_same_cohort", "c", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted_borrowing", "q_borrowing", -10, {("default", "cpu"): "1"}, 0, None, False),
            ("evicted_same_cohort", "q_same_cohort", -1, {("default", "cpu"): "1"}, 0, None, True),
        ],
        0,
        None,
        {("default", "cpu"): "1"},
        [("default", "cpu")],
        {"evicted_same_cohort": "InCohortReclaimWhileBorrowing"},
    ),
    _HierarchicalCase(
        "respect lending limits",
        [("r", None, []), ("c", "r", [("cpu", "2")])],
        [
            ("q", "c", [("cpu", "3", "", "2")], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q_borrowing", "r", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q",
        [
            ("admitted_borrowing", "q_borrowing", 0, {("default", "cpu"): "4"}, 0, None, False),
        ],
        -2,
        None,
        {("default", "cpu"): "5"},
        [("default", "cpu")],
        {"admitted_borrowing": "InCohortReclamation"},
    ),
    _HierarchicalCase(
        "reclaim in complex hierarchy",
        [
            ("r", None, []),
            ("c11", "r", [("cpu", "4")]),
            ("c12", "r", [("cpu", "4")]),
            ("c21", "c11", [("cpu", "4")]),
            ("c22", "c11", [("cpu", "4")]),
            ("c23", "c11", [("cpu", "4")]),
            ("c31", "c21", [("cpu", "4")]),
            ("c32", "c21", [("cpu", "4")]),
        ],
        [
            ("q1", "c12", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q2", "c23", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q3", "c22", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q4", "c32", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            ("q5", "c31", [], {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        ],
        "q5",
        [
            ("admitted_borrowing_1", "q1", -6, {("default", "cpu"): "4"}, 0, None, False),
            ("admitted_borrowing_2", "q1", -5, {("default", "cpu"): "4"}, 0, None, False),
            ("admitted_borrowing_3", "q2", -9, {("default", "cpu"): "4"}, 0, None, False),
            ("admitted_borrowing_4", "q2", -10, {("default", "cpu"): "4"}, 0, None, False),
            ("admitted_borrowing_5", "q3", -4, {("default", "cpu"): "4"}, 0, None, False),
            ("admitted_borrowing_6", "q3", -3, {("default", "cpu"): "3"}, 0, None, False),
            ("admitted_borrowing_7", "q4", 4, {("default", "cpu"): "2"}, 0, None, False),
            ("admitted_borrowing_8", "q4", 2, {("default", "cpu"): "3"}, 0, None, False),
        ],
        -2,
        None,
        {("default", "cpu"): "7"},
        [("default", "cpu")],
        {"admitted_borrowing_1": "InCohortReclamation", "admitted_borrowing_4": "InCohortReclamation"},
    ),
]


@pytest.mark.parametrize("case", _HIERARCHICAL_CASES, ids=[c.name for c in _HIERARCHICAL_CASES])
def test_hierarchical_preemption_kueue_table(case: _HierarchicalCase) -> None:
    cohorts = [
        make_cohort(name, *([rg(fq("default", *q))] if q else []), parent=parent) for name, parent, q in case.cohorts
    ]
    cqs = [
        make_cq(name, rg(fq("default", *q)), cohort=cohort, preemption=pre)
        for name, cohort, q, pre in case.cluster_queues
    ]
    tree = QuotaTree(cqs, cohorts)
    for key, cq, priority, admitted_usage, reserved, created, evicted in case.admitted:
        tree.add_workload(
            AdmittedWorkload(
                key,
                cq,
                {fr: kueue_value(fr[1], q) for fr, q in admitted_usage.items()},
                priority=priority,
                queue_order_time=_NEVER_TIME if created is None else created,
                quota_reserved_time=reserved,
                evicted=evicted,
            )
        )
    targets = find_preemption_targets(
        tree,
        case.target,
        {fr: kueue_value(fr[1], q) for fr, q in case.usage.items()},
        set(case.frs),
        priority=case.priority,
        queue_order_time=_NEVER_TIME if case.created is None else case.created,
        now=0.0,
    )
    assert {t.workload.key: t.reason for t in targets} == case.want


# ---- objects and ordering ---------------------------------------------------------------------------------------


def test_admitted_workload_from_object() -> None:
    wl = {
        "metadata": {"name": "job-1", "namespace": "ns", "uid": "u-1", "creationTimestamp": "2024-05-01T10:00:00Z"},
        "spec": {"priority": 7, "podSets": [podset_obj("workers", 4, {"cpu": "1"})]},
        "status": {
            "admission": {
                "clusterQueue": "team",
                "podSetAssignments": [
                    {
                        "name": "workers",
                        "flavors": {"cpu": "default", "nvidia.com/gpu": "a100"},
                        "resourceUsage": {"cpu": "4", "nvidia.com/gpu": "4"},
                        "count": 4,
                    }
                ],
            },
            "reclaimablePods": [{"name": "workers", "count": 1}],
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2024-05-01T10:05:00Z"},
            ],
        },
    }
    got = AdmittedWorkload.from_object(wl)
    assert got.key == "ns/job-1"
    assert got.cluster_queue == "team"
    assert got.priority == 7
    assert got.usage == {("default", "cpu"): 3_000, ("a100", "nvidia.com/gpu"): 3}
    assert got.quota_reserved_time is not None
    assert got.quota_reserved_time - got.queue_order_time == 300
    assert not got.evicted
    assert got.uid == "u-1"


def test_queue_order_timestamp_uses_admission_check_eviction() -> None:
    wl: dict[str, Any] = {"metadata": {"creationTimestamp": "2024-05-01T10:00:00Z"}, "status": {"conditions": []}}
    created = queue_order_timestamp(wl)
    wl["status"]["conditions"].append(
        {
            "type": "Evicted",
            "status": "True",
            "reason": "PodsReadyTimeout",
            "lastTransitionTime": "2024-05-01T11:00:00Z",
        }
    )
    assert queue_order_timestamp(wl) == created
    assert queue_order_timestamp(wl, pods_ready_eviction_timestamp=True) == created + 3600
    wl["status"]["conditions"][0]["reason"] = "AdmissionCheck"
    assert queue_order_timestamp(wl) == created + 3600


def test_pending_order_and_queueing_strategies() -> None:
    pending = [("a", 0, 5.0), ("b", 10, 9.0), ("c", 10, 1.0), ("d", 0, 1.0)]
    ordered = sorted(pending, key=lambda p: pending_order_key(p[1], p[2], p[0]))
    assert [p[0] for p in ordered] == ["c", "b", "d", "a"]
    assert QueueingStrategy("StrictFIFO").head_blocks
    assert not QueueingStrategy("BestEffortFIFO").head_blocks
    assert math.isinf(candidates_order_key(AdmittedWorkload("x", "q", {}), "q")[3])
