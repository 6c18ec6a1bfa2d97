"""Kueue conformance: ``pkg/scheduler/preemption/preemption_hierarchical_test.go`` (TestHierarchicalPreemptions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from kueuebuild import NEVER_TIME, fq, make_cohort, make_cq, rg

from dispatcher.placement.kueue.amounts import FlavorResource
from dispatcher.placement.kueue.preemption import find_preemption_targets
from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import AdmittedWorkload
from dispatcher.quantity import kueue_value

SOURCE = "pkg/scheduler/preemption/preemption_hierarchical_test.go"


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
@pytest.mark.kueue(source=SOURCE, test="TestHierarchicalPreemptions")
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
                queue_order_time=NEVER_TIME if created is None else created,
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
        queue_order_time=NEVER_TIME if case.created is None else case.created,
        now=0.0,
    )
    assert {t.workload.key: t.reason for t in targets} == case.want
