"""Kueue conformance: ``pkg/scheduler/preemption/preemption_test.go`` (TestPreemption, TestCandidatesOrdering)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from kueuebuild import NEVER_TIME, fq, make_cohort, make_cq, rg

from dispatcher.placement.kueue.amounts import FlavorResource
from dispatcher.placement.kueue.preemption import candidates_order_key, find_preemption_targets
from dispatcher.placement.kueue.specs import ClusterQueueSpec, CohortSpec
from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import AdmittedWorkload
from dispatcher.quantity import kueue_value

SOURCE = "pkg/scheduler/preemption/preemption_test.go"


@pytest.mark.kueue(source=SOURCE, test="TestCandidatesOrdering")
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
@pytest.mark.kueue(source=SOURCE, test="TestPreemption")
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
                queue_order_time=NEVER_TIME if created is None else created,
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
        queue_order_time=NEVER_TIME if case.created is None else case.created,
        now=0.0,
    )
    assert {t.workload.key: t.reason for t in targets} == case.want
    assert {cq.name: tree.cluster_queue_report(cq.name) for cq in cqs} == before
