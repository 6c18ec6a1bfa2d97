"""Tests for :mod:`dispatcher.placement.kueue.preemption`: classical preemption.

The cases ported from Kueue's own Go tests are in tests/conformance/kueue/ (one file per Kueue test file); the
builders they share with these tests (``make_cq``, ``fq``, ``ps``, ...) are in tests/conformance/kueue/kueuebuild.py.
"""

from __future__ import annotations

from kueuebuild import PREEMPT, fq, make_cq, make_rf, ps, rg

from dispatcher.placement.kueue.amounts import FlavorResource
from dispatcher.placement.kueue.assignment import preemption_targets
from dispatcher.placement.kueue.flavors import assign_flavors
from dispatcher.placement.kueue.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAIMATION,
    PreemptionPossibility,
    find_preemption_targets,
    simulate_preemption,
)
from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import AdmittedWorkload


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
