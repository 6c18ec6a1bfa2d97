"""Tests for :mod:`dispatcher.placement.kueue.flavors` and :mod:`~dispatcher.placement.kueue.assignment`.

The cases ported from Kueue's own Go tests are in tests/conformance/kueue/ (one file per Kueue test file); the
builders they share with these tests (``make_cq``, ``fq``, ``ps``, ...) are in tests/conformance/kueue/kueuebuild.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from kueuebuild import FIT, NO_FIT, PREEMPT, flavors_of, fq, make_cq, make_rf, ps, rg

from dispatcher.placement.kueue.assignment import (
    EXCEEDS_MAX_QUOTA,
    NO_MATCHING_FLAVOR,
    WAITING_FOR_QUOTA,
    preemption_targets,
)
from dispatcher.placement.kueue.flavors import _in_resource_order, assign_flavors
from dispatcher.placement.kueue.preemption import PreemptionPossibility
from dispatcher.placement.kueue.specs import ClusterQueueSpec
from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import AdmittedWorkload


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


# ---- Kueue v0.17.0, the release the real rig runs -----------------------------------------------------------------

ZONE = "example.com/zone"
_LABELLED = {
    "zone-a": make_rf("zone-a", {ZONE: "a"}),
    "plain": make_rf("plain"),
    "label-x-a": make_rf("label-x-a", {"x": "a"}),
    "label-xy-b": make_rf("label-xy-b", {"x": "b", "y": "k"}),
    "type-two": make_rf("type-two", {"type": "two"}),
}


@pytest.mark.parametrize(
    ("flavors", "cpu", "constraints", "want"),
    [
        # The finding: plain has no zone label, but zone-a gives the group the key, so plain is rejected.
        (
            [("zone-a", "1"), ("plain", "4")],
            "2",
            {"node_selector": {ZONE: "a"}},
            [
                "flavor plain doesn't match node affinity",
                "insufficient quota for cpu in flavor zone-a, previously considered podsets requests (0) + "
                "current podset request (2) > maximum capacity (1)",
            ],
        ),
        ([("zone-a", "1"), ("plain", "4")], "1", {"node_selector": {ZONE: "a"}}, "zone-a"),
        ([("plain", "4"), ("zone-a", "1")], "1", {"node_selector": {ZONE: "a"}}, "zone-a"),
        # Required affinity is reduced to the group's keys too: In needs the label, NotIn is met without it.
        (
            [("plain", "4"), ("zone-a", "4")],
            "1",
            {"affinity": [[(ZONE, "In", ["a"])]]},
            "zone-a",
        ),
        ([("zone-a", "4"), ("plain", "4")], "1", {"affinity": [[(ZONE, "NotIn", ["a"])]]}, "plain"),
        # A term left with no expression of the group's keys matches any flavor (terms are ORed).
        (
            [("zone-a", "4"), ("plain", "4")],
            "1",
            {"affinity": [[("other", "In", ["x"])], [(ZONE, "In", ["b"])]]},
            "zone-a",
        ),
        # Keys no flavor of the group defines are ignored.
        ([("plain", "4"), ("zone-a", "4")], "1", {"node_selector": {"other": "x"}}, "plain"),
        # Kueue (main, v0.17.6+) cases "multiple flavors with different label keys, selector only uses flavor's own
        # keys" and "labelless flavor in group with labeled flavor, workload uses labeled selector", as v0.17.0 decides.
        (
            [("label-x-a", "4"), ("label-xy-b", "4")],
            "1",
            {"node_selector": {"x": "a", "y": "g"}},
            ["flavor label-x-a doesn't match node affinity", "flavor label-xy-b doesn't match node affinity"],
        ),
        ([("plain", "4"), ("type-two", "4")], "1", {"node_selector": {"type": "two"}}, "type-two"),
    ],
    ids=[
        "plain rejected for a key only zone-a labels",
        "zone-a fits",
        "zone-a fits after plain",
        "affinity In needs the label",
        "affinity NotIn is met without the label",
        "a term with no key of the group matches any flavor",
        "keys of no flavor are ignored",
        "different label keys: neither flavor matches",
        "labelless flavor rejected for another flavor's key",
    ],
)
def test_node_selector_and_affinity_use_the_label_keys_of_the_whole_resource_group(
    flavors: list[tuple[str, str]], cpu: str, constraints: dict[str, Any], want: str | list[str]
) -> None:
    """v0.17.0 ``findFlavorForPodSets``: ``flavorSelector(spec, resourceGroup.LabelKeys)``, the label keys of every
    flavor of the group (``clusterQueue.updateLabelKeys``), not only those of the flavor being checked."""
    cq = make_cq("q", rg(*(fq(f, ("cpu", n)) for f, n in flavors)))
    a = assign_flavors(QuotaTree([cq]), "q", [ps(requests={"cpu": cpu}, **constraints)], _LABELLED)
    if isinstance(want, str):
        assert flavors_of(a) == {"main": {"cpu": (want, FIT)}}
    else:
        assert a.mode is NO_FIT
        assert sorted(a.pod_sets[0].reasons) == want


def test_flavors_that_do_not_exist_give_the_group_no_label_keys() -> None:
    """``updateLabelKeys`` takes keys from the flavors that exist only."""
    cq = make_cq("q", rg(fq("missing", ("cpu", "4")), fq("plain", ("cpu", "4"))))
    a = assign_flavors(QuotaTree([cq]), "q", [ps(requests={"cpu": "1"}, node_selector={ZONE: "a"})], _LABELLED)
    assert flavors_of(a) == {"main": {"cpu": ("plain", FIT)}}


def _pob_tree() -> QuotaTree:
    """A ClusterQueue preferring PreemptionOverBorrowing: its own f1 (borrowing 0) is lent to b, whose workload it
    may not reclaim (``reclaimWithinCohort: LowerPriority``, and that workload has a higher priority); f2 it can only
    borrow (borrowing 1)."""
    a = make_cq(
        "a",
        rg(fq("f1", ("cpu", "4")), fq("f2", ("cpu", "0"))),
        cohort="co",
        preemption={
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "LowerPriority",
            "borrowWithinCohort": {"policy": "LowerPriority"},
        },
        fungibility={
            "whenCanBorrow": "TryNextFlavor",
            "whenCanPreempt": "TryNextFlavor",
            "preference": "PreemptionOverBorrowing",
        },
    )
    b = make_cq("b", rg(fq("f1", ("cpu", "0")), fq("f2", ("cpu", "2"))), cohort="co")
    tree = QuotaTree([a, b])
    tree.add_workload(AdmittedWorkload("ns/b1", "b", {("f1", "cpu"): 4_000}, 1000, 1.0, 2.0))
    return tree


@pytest.mark.parametrize(
    "f2_user",
    [None, ("ns/low", "a", 0)],
    ids=["f2 fits while borrowing", "f2 could preempt while borrowing"],
)
def test_preemption_over_borrowing_keeps_a_flavor_without_candidates(f2_user: tuple[str, str, int] | None) -> None:
    """v0.17 ``isPreferred``: with ``PreemptionOverBorrowing`` the borrowing level decides first, and a flavor whose
    preemption simulation found no candidates is not ranked below the others (Kueue main, #13616, does that). So
    the Workload stays on f1 in Preempt mode with no victims: pending. (tests/sim/test_kueue_rules.py has the same
    case for the simulator.)"""
    tree = _pob_tree()
    if f2_user is not None:
        key, cq, priority = f2_user
        tree.add_workload(AdmittedWorkload(key, cq, {("f2", "cpu"): 2_000}, priority, 3.0, 4.0))
    flavors = {f: make_rf(f) for f in ("f1", "f2")}
    a = assign_flavors(tree, "a", [ps(requests={"cpu": "2"})], flavors, priority=100, queue_order_time=10, now=100)
    assert flavors_of(a) == {"main": {"cpu": ("f1", PREEMPT)}}
    f1, f2 = a.pod_sets[0].attempts
    assert (f1.preemption_possibility, f1.borrow) == (PreemptionPossibility.NO_CANDIDATES, 0)
    if f2_user is None:
        assert (f2.mode, f2.borrow) == (FIT, 1)
    else:
        assert (f2.preemption_possibility, f2.borrow) == (PreemptionPossibility.PREEMPT, 1)
    assert preemption_targets(tree, a, priority=100, queue_order_time=10, now=100) == []


@pytest.mark.parametrize(
    ("a", "b", "preference", "want"),
    [
        ((1, 1), (4, 2), "PreemptionOverBorrowing", True),  # no candidates at 1 beats a fit at 2
        ((4, 2), (1, 1), "PreemptionOverBorrowing", False),
        ((1, 0), (2, 1), "PreemptionOverBorrowing", True),
        ((2, 0), (1, 0), "PreemptionOverBorrowing", True),  # same borrowing: the better preemption mode
        ((1, 0), (4, 1), "BorrowingOverPreemption", False),
        ((1, 0), (0, 0), None, True),
    ],
    ids=[
        "POB no candidates at 1 beats fit at 2",
        "POB fit at 2 loses to no candidates at 1",
        "POB no candidates at 0 beats preempt at 1",
        "POB same borrowing preempt beats no candidates",
        "BOP fit beats no candidates",
        "no candidates beats no fit",
    ],
)
def test_is_preferred_v017(a: tuple[int, int], b: tuple[int, int], preference: str | None, want: bool) -> None:
    """``isPreferred`` of v0.17 over (preemptionMode: 0 noFit, 1 noCandidates, 2 preempt, 3 reclaim, 4 fit,
    borrowing level)."""
    from dispatcher.placement.kueue.flavors import _is_preferred

    assert _is_preferred(a, b, preference) is want


def test_a_flavor_stops_at_its_first_resource_that_does_not_fit() -> None:
    """v0.17 ``findFlavorForPodSets`` breaks out of a flavor's resources at the first one that makes it NoFit (in Go's
    map order; here Kueue's resource order), so the reasons name that resource only; newer Kueue checks them all."""
    cq = make_cq("q", rg(fq("f", ("cpu", "1"), ("memory", "1Gi"), ("example.com/gpu", "1"))))
    a = assign_flavors(
        QuotaTree([cq]), "q", [ps(requests={"cpu": "2", "memory": "2Gi", "example.com/gpu": "2"})], {"f": make_rf("f")}
    )
    assert a.mode is NO_FIT
    [reason] = a.pod_sets[0].reasons
    [attempt] = a.pod_sets[0].attempts
    assert attempt.reasons == [reason]
    first = next(iter(_in_resource_order({"cpu": 1, "memory": 1, "example.com/gpu": 1})))
    assert reason.startswith(f"insufficient quota for {first} in flavor f,")
