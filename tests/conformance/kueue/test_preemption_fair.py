"""Kueue conformance: ``pkg/scheduler/preemption/preemption_fair_test.go`` (TestFairPreemptions): which workloads
Kueue's fair preemption evicts, and why, for a workload of ``incoming`` CPU asking a flavor in ``Preempt`` mode, against
the placement model's ``find_preemption_targets`` with fair sharing on (``FairSharingPreemptWithinNominal`` and its
other v0.17.0 gates at their defaults). Admitted workloads carry their name as UID and reserved quota at one time,
as in the Go test; the keys are ``/<name>`` (namespace "")."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from kueuebuild import NEVER_TIME, Obj, cohort_obj, cq_obj, fq, rg

from dispatcher.placement.kueue.preemption import find_preemption_targets
from dispatcher.placement.kueue.specs import ClusterQueueSpec, CohortSpec, FairSharingConfig
from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import AdmittedWorkload
from dispatcher.quantity import kueue_value

SOURCE = "pkg/scheduler/preemption/preemption_fair_test.go"


@dataclass
class FairCase:
    name: str
    cluster_queues: list[Obj]
    cohorts: list[Obj] = field(default_factory=list)
    #: (name, ClusterQueue, cpu, priority, flavor)
    admitted: list[tuple[str, str, str, int, str]] = field(default_factory=list)
    #: (name, cpu, priority)
    incoming: tuple[str, str, int] = ("incoming", "1", 0)
    target: str = ""
    flavor: str = "default"
    strategies: tuple[str, ...] = ()
    #: (workload key, the Preempted condition's reason)
    want: list[tuple[str, str]] = field(default_factory=list)


BASE_CQS: list[Obj] = [
    cq_obj(
        "a",
        rg(fq("default", ("cpu", "3"))),
        cohort="all",
        preemption={
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": -3},
        },
    ),
    cq_obj(
        "b",
        rg(fq("default", ("cpu", "3"))),
        cohort="all",
        preemption={
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": -3},
        },
    ),
    cq_obj(
        "c",
        rg(fq("default", ("cpu", "3"))),
        cohort="all",
        preemption={
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": -3},
        },
    ),
    cq_obj("preemptible", rg(fq("default", ("cpu", "0"))), cohort="all"),
]


CASES: list[FairCase] = [
    FairCase(
        "reclaim nominal from user using the most",
        BASE_CQS,
        admitted=[
            ("a1", "a", "1", 0, "default"),
            ("a2", "a", "1", 0, "default"),
            ("a3", "a", "1", 0, "default"),
            ("b1", "b", "1", 0, "default"),
            ("b2", "b", "1", 0, "default"),
            ("b3", "b", "1", 0, "default"),
            ("b4", "b", "1", 0, "default"),
            ("b5", "b", "1", 0, "default"),
            ("c1", "c", "1", 0, "default"),
        ],
        incoming=("c_incoming", "1", 0),
        target="c",
        want=[("/b1", "InCohortReclamation")],
    ),
    FairCase(
        "can reclaim from queue using less, if taking the latest workload from user using the most isn't enough",
        BASE_CQS,
        admitted=[
            ("a1", "a", "3", 0, "default"),
            ("a2", "a", "1", 0, "default"),
            ("b1", "b", "2", 0, "default"),
            ("b2", "b", "3", 0, "default"),
        ],
        incoming=("c_incoming", "3", 0),
        target="c",
        want=[("/a1", "InCohortReclamation")],
    ),
    FairCase(
        "reclaim borrowable quota from user using the most",
        BASE_CQS,
        admitted=[
            ("a1", "a", "1", 0, "default"),
            ("a2", "a", "1", 0, "default"),
            ("a3", "a", "1", 0, "default"),
            ("b1", "b", "1", 0, "default"),
            ("b2", "b", "1", 0, "default"),
            ("b3", "b", "1", 0, "default"),
            ("b4", "b", "1", 0, "default"),
            ("b5", "b", "1", 0, "default"),
            ("c1", "c", "1", 0, "default"),
        ],
        incoming=("a_incoming", "1", 0),
        target="a",
        want=[("/b1", "InCohortFairSharing")],
    ),
    FairCase(
        "preempt one from each CQ borrowing",
        BASE_CQS,
        admitted=[
            ("a1", "a", "0.5", 0, "default"),
            ("a2", "a", "0.5", 0, "default"),
            ("a3", "a", "3", 0, "default"),
            ("b1", "b", "0.5", 0, "default"),
            ("b2", "b", "0.5", 0, "default"),
            ("b3", "b", "3", 0, "default"),
        ],
        incoming=("c_incoming", "2", 0),
        target="c",
        want=[("/a1", "InCohortReclamation"), ("/b1", "InCohortReclamation")],
    ),
    FairCase(
        "can't preempt when everyone under nominal",
        BASE_CQS,
        admitted=[
            ("a1", "a", "1", 0, "default"),
            ("a2", "a", "1", 0, "default"),
            ("a3", "a", "1", 0, "default"),
            ("b1", "b", "1", 0, "default"),
            ("b2", "b", "1", 0, "default"),
            ("b3", "b", "1", 0, "default"),
            ("c1", "c", "1", 0, "default"),
            ("c2", "c", "1", 0, "default"),
            ("c3", "c", "1", 0, "default"),
        ],
        incoming=("c_incoming", "1", 0),
        target="c",
        want=[],
    ),
    FairCase(
        "can't preempt when it would switch the imbalance",
        BASE_CQS,
        admitted=[
            ("a1", "a", "1", 0, "default"),
            ("a2", "a", "1", 0, "default"),
            ("a3", "a", "1", 0, "default"),
            ("b1", "b", "1", 0, "default"),
            ("b2", "b", "1", 0, "default"),
            ("b3", "b", "1", 0, "default"),
            ("b4", "b", "1", 0, "default"),
            ("b5", "b", "1", 0, "default"),
        ],
        incoming=("a_incoming", "2", 0),
        target="a",
        want=[],
    ),
    FairCase(
        "can preempt lower priority workloads from same CQ",
        BASE_CQS,
        admitted=[
            ("a1_low", "a", "1", -1, "default"),
            ("a2_low", "a", "1", -1, "default"),
            ("a3", "a", "1", 0, "default"),
            ("a4", "a", "1", 0, "default"),
            ("b1", "b", "1", 0, "default"),
            ("b2", "b", "1", 0, "default"),
            ("b3", "b", "1", 0, "default"),
            ("b4", "b", "1", 0, "default"),
            ("b5", "b", "1", 0, "default"),
        ],
        incoming=("a_incoming", "2", 0),
        target="a",
        want=[("/a1_low", "InClusterQueue"), ("/a2_low", "InClusterQueue")],
    ),
    FairCase(
        "can preempt a combination of same CQ and highest user",
        BASE_CQS,
        admitted=[
            ("a_low", "a", "1", -1, "default"),
            ("a2", "a", "1", 0, "default"),
            ("a3", "a", "1", 0, "default"),
            ("b1", "b", "1", 0, "default"),
            ("b2", "b", "1", 0, "default"),
            ("b3", "b", "1", 0, "default"),
            ("b4", "b", "1", 0, "default"),
            ("b5", "b", "1", 0, "default"),
            ("b6", "b", "1", 0, "default"),
        ],
        incoming=("a_incoming", "2", 0),
        target="a",
        want=[("/a_low", "InClusterQueue"), ("/b1", "InCohortFairSharing")],
    ),
    FairCase(
        "preempt huge workload if there is no other option, as long as the target CQ gets a lower share",
        BASE_CQS,
        admitted=[
            ("b1", "b", "9", 0, "default"),
        ],
        incoming=("a_incoming", "2", 0),
        target="a",
        want=[("/b1", "InCohortReclamation")],
    ),
    FairCase(
        "can't preempt huge workload if the incoming is also huge",
        BASE_CQS,
        admitted=[
            ("a1", "a", "2", 0, "default"),
            ("b1", "b", "7", 0, "default"),
        ],
        incoming=("a_incoming", "5", 0),
        target="a",
        want=[],
    ),
    FairCase(
        "can't preempt 2 smaller workloads if the incoming is huge",
        BASE_CQS,
        admitted=[
            ("b1", "b", "2", 0, "default"),
            ("b2", "b", "2", 0, "default"),
            ("b3", "b", "3", 0, "default"),
        ],
        incoming=("a_incoming", "6", 0),
        target="a",
        want=[],
    ),
    FairCase(
        "preempt from target and others even if over nominal",
        BASE_CQS,
        admitted=[
            ("a1_low", "a", "2", -1, "default"),
            ("a2_low", "a", "1", -1, "default"),
            ("b1", "b", "3", 0, "default"),
            ("b2", "b", "3", 0, "default"),
        ],
        incoming=("a_incoming", "4", 0),
        target="a",
        want=[("/a1_low", "InClusterQueue"), ("/b1", "InCohortFairSharing")],
    ),
    FairCase(
        "prefer to preempt workloads that don't make the target CQ have the biggest share",
        BASE_CQS,
        admitted=[
            ("b1", "b", "2", 0, "default"),
            ("b2", "b", "1", 0, "default"),
            ("b3", "b", "2", 0, "default"),
            ("c1", "c", "1", 0, "default"),
        ],
        incoming=("a_incoming", "3.5", 0),
        target="a",
        want=[("/b2", "InCohortFairSharing")],
    ),
    FairCase(
        "preempt from different cluster queues if the end result has a smaller max share",
        BASE_CQS,
        admitted=[
            ("b1", "b", "2", 0, "default"),
            ("b2", "b", "2.5", 0, "default"),
            ("c1", "c", "2", 0, "default"),
            ("c2", "c", "2.5", 0, "default"),
        ],
        incoming=("a_incoming", "3.5", 0),
        target="a",
        want=[("/b1", "InCohortFairSharing"), ("/c1", "InCohortFairSharing")],
    ),
    FairCase(
        "scenario above does not flap",
        BASE_CQS,
        admitted=[
            ("a1", "a", "3.5", 0, "default"),
            ("b2", "b", "2.5", 0, "default"),
            ("c2", "c", "2.5", 0, "default"),
        ],
        incoming=("b_incoming", "2", 0),
        target="b",
        want=[],
    ),
    FairCase(
        "cannot preempt if it would make the candidate CQ go under nominal after preempting one element",
        BASE_CQS,
        admitted=[
            ("b1", "b", "3", 0, "default"),
            ("b2", "b", "3", 0, "default"),
            ("c1", "c", "3", 0, "default"),
        ],
        incoming=("a_incoming", "4", 0),
        target="a",
        want=[],
    ),
    FairCase(
        "workloads under priority threshold not capriciously preempted",
        BASE_CQS,
        admitted=[
            ("a1", "a", "1", 0, "default"),
            ("a2", "a", "1", 0, "default"),
            ("a3", "a", "1", 0, "default"),
            ("b1", "b", "1", 0, "default"),
            ("b2", "b", "1", 0, "default"),
            ("b3", "b", "1", 0, "default"),
            ("preemptible1", "preemptible", "1", -3, "default"),
            ("preemptible2", "preemptible", "1", -3, "default"),
            ("preemptible3", "preemptible", "1", -3, "default"),
        ],
        incoming=("a_incoming", "2", 0),
        target="a",
        want=[],
    ),
    FairCase(
        "preempt lower priority first, even if big",
        BASE_CQS,
        admitted=[
            ("a1", "a", "3", 0, "default"),
            ("b_low", "b", "5", 0, "default"),
            ("b_high", "b", "1", 1, "default"),
        ],
        incoming=("a_incoming", "1", 0),
        target="a",
        strategies=("LessThanInitialShare",),
        want=[("/b_low", "InCohortFairSharing")],
    ),
    FairCase(
        "preempt workload that doesn't transfer the imbalance, even if high priority",
        BASE_CQS,
        admitted=[
            ("a1", "a", "3", 0, "default"),
            ("b_low", "b", "5", 0, "default"),
            ("b_high", "b", "1", 1, "default"),
        ],
        incoming=("a_incoming", "1", 0),
        target="a",
        strategies=("LessThanOrEqualToFinalShare",),
        want=[("/b_high", "InCohortFairSharing")],
    ),
    FairCase(
        "CQ with higher weight can preempt more",
        [
            cq_obj(
                "a",
                rg(fq("default", ("cpu", "3"))),
                cohort="all",
                preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                weight="2",
            ),
            cq_obj(
                "b",
                rg(fq("default", ("cpu", "3"))),
                cohort="all",
                preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            ),
            cq_obj(
                "c",
                rg(fq("default", ("cpu", "3"))),
                cohort="all",
                preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            ),
        ],
        admitted=[
            ("a1", "a", "1", 0, "default"),
            ("a2", "a", "1", 0, "default"),
            ("a3", "a", "1", 0, "default"),
            ("b1", "b", "1", 0, "default"),
            ("b2", "b", "1", 0, "default"),
            ("b3", "b", "1", 0, "default"),
            ("b4", "b", "1", 0, "default"),
            ("b5", "b", "1", 0, "default"),
            ("b6", "b", "1", 0, "default"),
        ],
        incoming=("a_incoming", "2", 0),
        target="a",
        want=[("/b1", "InCohortFairSharing"), ("/b2", "InCohortFairSharing")],
    ),
    FairCase(
        "can preempt anything borrowing from CQ with 0 weight",
        [
            cq_obj(
                "a",
                rg(fq("default", ("cpu", "3"))),
                cohort="all",
                preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            ),
            cq_obj(
                "b",
                rg(fq("default", ("cpu", "3"))),
                cohort="all",
                preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                weight="0",
            ),
            cq_obj(
                "c",
                rg(fq("default", ("cpu", "3"))),
                cohort="all",
                preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            ),
        ],
        admitted=[
            ("a1", "a", "1", 0, "default"),
            ("a2", "a", "1", 0, "default"),
            ("a3", "a", "1", 0, "default"),
            ("b1", "b", "1", 0, "default"),
            ("b2", "b", "1", 0, "default"),
            ("b3", "b", "1", 0, "default"),
            ("b4", "b", "1", 0, "default"),
            ("b5", "b", "1", 0, "default"),
            ("b6", "b", "1", 0, "default"),
        ],
        incoming=("a_incoming", "3", 0),
        target="a",
        want=[("/b1", "InCohortFairSharing"), ("/b2", "InCohortFairSharing"), ("/b3", "InCohortFairSharing")],
    ),
    FairCase(
        "can't preempt nominal from CQ with 0 weight",
        [
            cq_obj(
                "a",
                rg(fq("default", ("cpu", "3"))),
                cohort="all",
                preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            ),
            cq_obj(
                "b",
                rg(fq("default", ("cpu", "3"))),
                cohort="all",
                preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                weight="0",
            ),
        ],
        admitted=[
            ("a1", "a", "1", 0, "default"),
            ("a2", "a", "1", 0, "default"),
            ("a3", "a", "1", 0, "default"),
            ("b1", "b", "1", 0, "default"),
            ("b2", "b", "1", 0, "default"),
            ("b3", "b", "1", 0, "default"),
        ],
        incoming=("a_incoming", "1", 0),
        target="a",
        want=[],
    ),
    FairCase(
        "can't preempt nominal from Cohort with 0 weight",
        [
            cq_obj(
                "left-cq", rg(fq("default", ("cpu", "0"))), cohort="root", preemption={"reclaimWithinCohort": "Any"}
            ),
            cq_obj(
                "right-cq",
                rg(fq("default", ("cpu", "0"))),
                cohort="right-cohort",
                preemption={"reclaimWithinCohort": "Any"},
                weight="0",
            ),
        ],
        cohorts=[
            cohort_obj("right-cohort", rg(fq("default", ("cpu", "1"))), parent="root", weight="0"),
        ],
        admitted=[
            ("right-1", "right-cq", "1", 0, "default"),
        ],
        incoming=("left-1", "1", 0),
        target="left-cq",
        want=[],
    ),
    FairCase(
        "can preempt within cluster queue when no cohort",
        [
            cq_obj("a", rg(fq("default", ("cpu", "1"))), preemption={"withinClusterQueue": "LowerPriority"}),
        ],
        admitted=[
            ("a1", "a", "1", 0, "default"),
        ],
        incoming=("a_incoming", "1", 1000),
        target="a",
        want=[("/a1", "InClusterQueue")],
    ),
    FairCase(
        "hierarchical preemption",
        [
            cq_obj(
                "a",
                rg(fq("default", ("cpu", "1"))),
                cohort="LEFT",
                preemption={"reclaimWithinCohort": "Any"},
                weight="2",
            ),
            cq_obj("b", rg(fq("default", ("cpu", "1"))), cohort="LEFT"),
            cq_obj("c", rg(fq("default", ("cpu", "1"))), cohort="ROOT"),
            cq_obj("d", rg(fq("default", ("cpu", "1"))), cohort="RIGHT"),
            cq_obj("e", rg(fq("default", ("cpu", "1"))), cohort="RIGHT", weight="0.99"),
        ],
        cohorts=[
            cohort_obj("ROOT", rg(fq("default", ("cpu", "5")))),
            cohort_obj("LEFT", rg(fq("default", ("cpu", "5"))), parent="ROOT", weight="2"),
            cohort_obj("RIGHT", rg(fq("default", ("cpu", "5"))), parent="ROOT"),
        ],
        admitted=[
            ("b1", "b", "1", 1, "default"),
            ("b2", "b", "1", 2, "default"),
            ("b3", "b", "1", 3, "default"),
            ("b4", "b", "1", 4, "default"),
            ("b5", "b", "1", 5, "default"),
            ("c1", "c", "1", 1, "default"),
            ("c2", "c", "1", 2, "default"),
            ("c3", "c", "1", 3, "default"),
            ("c4", "c", "1", 4, "default"),
            ("c5", "c", "1", 5, "default"),
            ("d1", "d", "1", 1, "default"),
            ("d2", "d", "1", 2, "default"),
            ("d3", "d", "1", 3, "default"),
            ("d4", "d", "1", 4, "default"),
            ("d5", "d", "1", 5, "default"),
            ("e1", "e", "1", 1, "default"),
            ("e2", "e", "1", 2, "default"),
            ("e3", "e", "1", 3, "default"),
            ("e4", "e", "1", 4, "default"),
            ("e5", "e", "1", 5, "default"),
        ],
        incoming=("unit", "5", 0),
        target="a",
        want=[
            ("/b1", "InCohortFairSharing"),
            ("/b2", "InCohortFairSharing"),
            ("/c1", "InCohortFairSharing"),
            ("/c2", "InCohortFairSharing"),
            ("/e1", "InCohortFairSharing"),
        ],
    ),
    FairCase(
        "borrowing cq in non-borrowing cohort is protected",
        [
            cq_obj(
                "a",
                rg(fq("default", ("cpu", "5"))),
                cohort="ROOT",
                preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                weight="10",
            ),
            cq_obj("b", cohort="RIGHT", weight="0.1"),
        ],
        cohorts=[
            cohort_obj("ROOT"),
            cohort_obj("RIGHT", rg(fq("default", ("cpu", "1"))), parent="ROOT", weight="0.1"),
        ],
        admitted=[
            ("a1", "a", "1", -1, "default"),
            ("a2", "a", "1", -1, "default"),
            ("a3", "a", "1", -1, "default"),
            ("b1", "b", "1", -1, "default"),
        ],
        incoming=("unit", "5", 0),
        target="a",
        want=[("/a1", "InClusterQueue"), ("/a2", "InClusterQueue"), ("/a3", "InClusterQueue")],
    ),
    FairCase(
        "forced to preempt within clusterqueue because borrowing workload too important",
        [
            cq_obj(
                "a",
                rg(fq("default", ("cpu", "5"))),
                cohort="ROOT",
                preemption={"reclaimWithinCohort": "LowerPriority", "withinClusterQueue": "LowerPriority"},
                weight="10",
            ),
            cq_obj("b", cohort="RIGHT", weight="0.1"),
        ],
        cohorts=[
            cohort_obj("ROOT"),
            cohort_obj("RIGHT", rg(fq("default", ("cpu", "3"))), parent="ROOT", weight="0.1"),
        ],
        admitted=[
            ("a1", "a", "1", -1, "default"),
            ("a2", "a", "1", -1, "default"),
            ("a3", "a", "1", -1, "default"),
            ("b1", "b", "4", 100, "default"),
        ],
        incoming=("unit", "4", 0),
        target="a",
        want=[("/a1", "InClusterQueue"), ("/a2", "InClusterQueue"), ("/a3", "InClusterQueue")],
    ),
    FairCase(
        "deep preemption",
        [
            cq_obj("a", rg(fq("default", ("cpu", "0"))), cohort="AAA", preemption={"reclaimWithinCohort": "Any"}),
            cq_obj("b", rg(fq("default", ("cpu", "0"))), cohort="BBB"),
        ],
        cohorts=[
            cohort_obj("ROOT"),
            cohort_obj("A", parent="ROOT", weight="1.01"),
            cohort_obj("AA", parent="A"),
            cohort_obj("AAA", parent="AA"),
            cohort_obj("B", parent="ROOT", weight="0.99"),
            cohort_obj("BB", parent="B"),
            cohort_obj("BBB", parent="BB"),
            cohort_obj("C", parent="ROOT"),
            cohort_obj("CC", parent="C"),
            cohort_obj("CCC", parent="CC"),
            cohort_obj("CCCC", rg(fq("default", ("cpu", "1"))), parent="CCC"),
        ],
        admitted=[
            ("b1", "b", "1", 0, "default"),
        ],
        incoming=("a1", "1", 0),
        target="a",
        want=[("/b1", "InCohortFairSharing")],
    ),
    FairCase(
        "cq with zero weight can reclaim nominal quota",
        [
            cq_obj(
                "a",
                rg(fq("default", ("cpu", "1"))),
                cohort="ROOT",
                preemption={"reclaimWithinCohort": "Any"},
                weight="0.0",
            ),
            cq_obj("b", rg(fq("default", ("cpu", "0"))), cohort="ROOT", weight="1.0"),
        ],
        admitted=[
            ("b1", "b", "1", 0, "default"),
        ],
        incoming=("a1", "1", 0),
        target="a",
        want=[("/b1", "InCohortReclamation")],
    ),
    FairCase(
        "cohort with zero weight can reclaim nominal quota",
        [
            cq_obj(
                "a",
                rg(fq("default", ("cpu", "0"))),
                cohort="A",
                preemption={"reclaimWithinCohort": "Any"},
                weight="0.0",
            ),
            cq_obj("b", rg(fq("default", ("cpu", "0"))), cohort="ROOT", weight="1.0"),
        ],
        cohorts=[
            cohort_obj("A", rg(fq("default", ("cpu", "1"))), parent="ROOT", weight="0.0"),
        ],
        admitted=[
            ("b1", "b", "1", 0, "default"),
        ],
        incoming=("a1", "1", 0),
        target="a",
        want=[("/b1", "InCohortFairSharing")],
    ),
    FairCase(
        "nominal first: workload fitting within nominal can preempt despite high aggregate DRS",
        [
            cq_obj(
                "a",
                rg(fq("premium", ("cpu", "3")), fq("cheap", ("cpu", "0"))),
                cohort="all",
                preemption={"reclaimWithinCohort": "Any"},
                fungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
            ),
            cq_obj("b", rg(fq("premium", ("cpu", "0")), fq("cheap", ("cpu", "6"))), cohort="all"),
        ],
        admitted=[
            ("a_prem1", "a", "1", 0, "premium"),
            ("a_prem2", "a", "1", 0, "premium"),
            ("a_cheap1", "a", "1", 0, "cheap"),
            ("a_cheap2", "a", "1", 0, "cheap"),
            ("a_cheap3", "a", "1", 0, "cheap"),
            ("a_cheap4", "a", "1", 0, "cheap"),
            ("a_cheap5", "a", "1", 0, "cheap"),
            ("b_prem1", "b", "1", 0, "premium"),
        ],
        incoming=("a_incoming", "1", 0),
        target="a",
        flavor="premium",
        want=[("/b_prem1", "InCohortReclamation")],
    ),
]


@pytest.mark.kueue(source=SOURCE, test="TestFairPreemptions")
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fair_preemptions(case: FairCase) -> None:
    # Kueue: pkg/scheduler/preemption/preemption_fair_test.go TestFairPreemptions
    tree = QuotaTree(
        [ClusterQueueSpec.from_object(o) for o in case.cluster_queues],
        [CohortSpec.from_object(o) for o in case.cohorts],
    )
    now = 1_700_000_000.0
    for name, cq, cpu, priority, flavor in case.admitted:
        usage = {(flavor, "cpu"): kueue_value("cpu", cpu)}
        tree.add_workload(AdmittedWorkload(f"/{name}", cq, usage, priority=priority, quota_reserved_time=now, uid=name))
    before = {cq: tree.cluster_queue_report(cq) for cq in tree.cluster_queue_names}
    _name, cpu, priority = case.incoming
    usage = {(case.flavor, "cpu"): kueue_value("cpu", cpu)}
    fair = FairSharingConfig(case.strategies) if case.strategies else FairSharingConfig()
    targets = find_preemption_targets(
        tree, case.target, usage, set(usage), priority=priority, queue_order_time=NEVER_TIME, now=now, fair_sharing=fair
    )
    assert sorted((t.workload.key, t.reason) for t in targets) == case.want
    # The snapshot is left as it was.
    assert {cq: tree.cluster_queue_report(cq) for cq in tree.cluster_queue_names} == before
