"""Tests for :mod:`dispatcher.placement.kueue.flavors` and :mod:`~dispatcher.placement.kueue.assignment`.

The cases ported from Kueue's own Go tests are in tests/conformance/kueue/ (one file per Kueue test file); the
builders they share with these tests (``make_cq``, ``fq``, ``ps``, ...) are in tests/conformance/kueue/kueuebuild.py.
"""

from __future__ import annotations

from typing import Any

from kueuebuild import FIT, NO_FIT, PREEMPT, flavors_of, fq, make_cq, make_rf, ps, rg

from dispatcher.placement.kueue.assignment import (
    EXCEEDS_MAX_QUOTA,
    NO_MATCHING_FLAVOR,
    WAITING_FOR_QUOTA,
    preemption_targets,
)
from dispatcher.placement.kueue.flavors import assign_flavors
from dispatcher.placement.kueue.preemption import PreemptionPossibility
from dispatcher.placement.kueue.specs import ClusterQueueSpec
from dispatcher.placement.kueue.tree import QuotaTree


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
