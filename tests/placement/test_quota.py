"""Tests for :mod:`dispatcher.placement.quota`.

The cases ported from Kueue's own Go tests are in tests/conformance/kueue/ (one file per Kueue test file); the
builders they share with these tests (``make_cq``, ``fq``, ``ps``, ...) are in tests/conformance/kueue/kueuebuild.py.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from kueuebuild import (
    FIT,
    NO_FIT,
    PREEMPT,
    SPOT_TAINT,
    SPOT_TOLERATION,
    Gi,
    Mi,
    cq_obj,
    flavors_of,
    fq,
    make_cohort,
    make_cq,
    make_rf,
    podset_obj,
    ps,
    rg,
)

from dispatcher.placement.kueue.amounts import UNLIMITED, FlavorResource, format_amount, quota_amount
from dispatcher.placement.kueue.assignment import (
    EXCEEDS_MAX_QUOTA,
    NO_MATCHING_FLAVOR,
    WAITING_FOR_QUOTA,
    preemption_targets,
)
from dispatcher.placement.kueue.flavors import assign_flavors
from dispatcher.placement.kueue.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAIMATION,
    PreemptionPossibility,
    candidates_order_key,
    find_preemption_targets,
    simulate_preemption,
)
from dispatcher.placement.kueue.specs import (
    ClusterQueueSpec,
    CohortSpec,
    FlavorFungibility,
    PreemptionPolicy,
    QueueingStrategy,
    Taint,
    Toleration,
    find_untolerated_taint,
)
from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import (
    AdmittedWorkload,
    pending_order_key,
    pod_requests,
    queue_order_timestamp,
)

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


def test_lower_or_newer_equal_priority() -> None:
    cq = make_cq("q", rg(fq("f", ("cpu", "2"))), preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"})
    tree = QuotaTree([cq])
    fr = ("f", "cpu")
    tree.add_workload(_wl("same-older", "q", 1, {fr: 1_000}, created=5))
    tree.add_workload(_wl("same-newer", "q", 1, {fr: 1_000}, created=15))
    targets = find_preemption_targets(tree, "q", {fr: 1_000}, {fr}, priority=1, queue_order_time=10)
    assert [t.workload.key for t in targets] == ["same-newer"]


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
