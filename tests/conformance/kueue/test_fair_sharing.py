"""Kueue conformance: ``pkg/cache/scheduler/fair_sharing_test.go`` (TestDominantResourceShare, TestIsBorrowingOn): the
dominant resource share of every ClusterQueue and Cohort (rounded up, with its resource and whether it borrows) after
the ``usage`` admitted to ClusterQueue ``cq`` and with ``requests`` added, against the placement model's
``dominant_resource_share``."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from kueuebuild import Obj, cohort_obj, cq_obj, fq, rg

from dispatcher.placement.kueue.amounts import FlavorResource
from dispatcher.placement.kueue.fairsharing import dominant_resource_share
from dispatcher.placement.kueue.specs import ClusterQueueSpec, CohortSpec
from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import AdmittedWorkload

SOURCE = "pkg/cache/scheduler/fair_sharing_test.go"
CQ, COHORT = "cq", "cohort"


@dataclass
class DrsCase:
    name: str
    cluster_queue: Obj
    lending: Obj | None = None
    cohorts: list[Obj] = field(default_factory=list)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    requests: dict[FlavorResource, int] = field(default_factory=dict)
    #: (node, kind, rounded weighted share, dominant resource, borrowing)
    want: list[tuple[str, str, int, str, bool]] = field(default_factory=list)


DRS_CASES: list[DrsCase] = [
    DrsCase(
        "no cohort",
        cq_obj("cq", rg(fq("default", ("cpu", "2000"), ("example.com/gpu", "5")))),
        usage={("default", "cpu"): 1000, ("default", "example.com/gpu"): 2},
        want=[
            ("cq", CQ, 0, "", False),
        ],
    ),
    DrsCase(
        "usage below nominal",
        cq_obj("cq", rg(fq("default", ("cpu", "2"), ("example.com/gpu", "5"))), cohort="test-cohort", weight="1"),
        lending=cq_obj(
            "lending-cq", rg(fq("default", ("cpu", "8"), ("example.com/gpu", "5"))), cohort="test-cohort", weight="1"
        ),
        usage={("default", "cpu"): 1000, ("default", "example.com/gpu"): 2},
        want=[
            ("cq", CQ, 0, "", False),
            ("lending-cq", CQ, 0, "", False),
            ("test-cohort", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "usage above nominal",
        cq_obj("cq", rg(fq("default", ("cpu", "2"), ("example.com/gpu", "5"))), cohort="test-cohort", weight="1"),
        lending=cq_obj(
            "lending-cq", rg(fq("default", ("cpu", "8"), ("example.com/gpu", "5"))), cohort="test-cohort", weight="1"
        ),
        usage={("default", "cpu"): 3000, ("default", "example.com/gpu"): 7},
        want=[
            ("cq", CQ, 200, "example.com/gpu", True),
            ("lending-cq", CQ, 0, "", False),
            ("test-cohort", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "usage slightly above nominal in a cohort with large quotas",
        cq_obj("cq", rg(fq("default", ("example.com/gpu", "500"))), cohort="test-cohort", weight="1"),
        lending=cq_obj(
            "lending-cq", rg(fq("default", ("example.com/gpu", "1000"))), cohort="test-cohort", weight="300"
        ),
        usage={("default", "example.com/gpu"): 501},
        want=[
            ("cq", CQ, 1, "example.com/gpu", True),
            ("lending-cq", CQ, 0, "", False),
            ("test-cohort", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "usage way above nominal in a cohort with large quotas and weights",
        cq_obj("cq", rg(fq("default", ("example.com/gpu", "500"))), cohort="test-cohort", weight="300"),
        lending=cq_obj(
            "lending-cq", rg(fq("default", ("example.com/gpu", "1000"))), cohort="test-cohort", weight="300"
        ),
        usage={("default", "example.com/gpu"): 800},
        want=[
            ("cq", CQ, 1, "example.com/gpu", True),
            ("lending-cq", CQ, 0, "", False),
            ("test-cohort", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "one resource above nominal",
        cq_obj("cq", rg(fq("default", ("cpu", "2"), ("example.com/gpu", "5"))), cohort="test-cohort", weight="1"),
        lending=cq_obj(
            "lending-cq", rg(fq("default", ("cpu", "8"), ("example.com/gpu", "5"))), cohort="test-cohort", weight="1"
        ),
        usage={("default", "cpu"): 3000, ("default", "example.com/gpu"): 3},
        want=[
            ("cq", CQ, 100, "cpu", True),
            ("lending-cq", CQ, 0, "", False),
            ("test-cohort", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "usage with workload above nominal",
        cq_obj("cq", rg(fq("default", ("cpu", "2"), ("example.com/gpu", "5"))), cohort="test-cohort", weight="1"),
        lending=cq_obj(
            "lending-cq", rg(fq("default", ("cpu", "8"), ("example.com/gpu", "5"))), cohort="test-cohort", weight="1"
        ),
        usage={("default", "cpu"): 1000, ("default", "example.com/gpu"): 2},
        requests={("default", "cpu"): 4000, ("default", "example.com/gpu"): 4},
        want=[
            ("cq", CQ, 300, "cpu", True),
            ("lending-cq", CQ, 0, "", False),
            ("test-cohort", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "A resource with zero lendable",
        cq_obj(
            "cq", rg(fq("default", ("cpu", "2"), ("example.com/gpu", "2", "", "0"))), cohort="test-cohort", weight="1"
        ),
        lending=cq_obj(
            "lending-cq",
            rg(fq("default", ("cpu", "8"), ("example.com/gpu", "64", "", "0"))),
            cohort="test-cohort",
            weight="1",
        ),
        usage={("default", "cpu"): 1000, ("default", "example.com/gpu"): 1},
        requests={("default", "cpu"): 4000, ("default", "example.com/gpu"): 4},
        want=[
            ("cq", CQ, 300, "cpu", True),
            ("lending-cq", CQ, 0, "", False),
            ("test-cohort", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "multiple flavors",
        cq_obj("cq", rg(fq("on-demand", ("cpu", "20")), fq("spot", ("cpu", "80"))), cohort="test-cohort", weight="1"),
        lending=cq_obj("lending-cq", rg(fq("default", ("cpu", "100"))), cohort="test-cohort", weight="1"),
        usage={("on-demand", "cpu"): 15000, ("spot", "cpu"): 5000},
        requests={("on-demand", "cpu"): 10000},
        want=[
            ("cq", CQ, 25, "cpu", True),
            ("lending-cq", CQ, 0, "", False),
            ("test-cohort", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "above nominal with integer weight",
        cq_obj("cq", rg(fq("default", ("example.com/gpu", "5"))), cohort="test-cohort", weight="2"),
        lending=cq_obj("lending-cq", rg(fq("default", ("example.com/gpu", "5"))), cohort="test-cohort", weight="1"),
        usage={("default", "example.com/gpu"): 7},
        want=[
            ("cq", CQ, 100, "example.com/gpu", True),
            ("lending-cq", CQ, 0, "", False),
            ("test-cohort", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "above nominal with decimal weight",
        cq_obj("cq", rg(fq("default", ("example.com/gpu", "5"))), cohort="test-cohort", weight="0.5"),
        lending=cq_obj("lending-cq", rg(fq("default", ("example.com/gpu", "5"))), cohort="test-cohort", weight="1"),
        usage={("default", "example.com/gpu"): 7},
        want=[
            ("cq", CQ, 400, "example.com/gpu", True),
            ("lending-cq", CQ, 0, "", False),
            ("test-cohort", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "above nominal with zero weight",
        cq_obj("cq", rg(fq("default", ("example.com/gpu", "5"))), cohort="test-cohort", weight="0"),
        lending=cq_obj("lending-cq", rg(fq("default", ("example.com/gpu", "10"))), cohort="test-cohort", weight="1"),
        usage={("default", "example.com/gpu"): 7},
        want=[
            ("cq", CQ, 9223372036854775807, "example.com/gpu", True),
            ("lending-cq", CQ, 0, "", False),
            ("test-cohort", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "cohort has resource share",
        cq_obj("cq", rg(fq("default", ("example.com/gpu", "5"))), cohort="child-cohort", weight="1"),
        cohorts=[
            cohort_obj("child-cohort", parent="root", weight="2"),
            cohort_obj("root", rg(fq("default", ("example.com/gpu", "45")))),
        ],
        usage={("default", "example.com/gpu"): 10},
        want=[
            ("cq", CQ, 100, "example.com/gpu", True),
            ("child-cohort", COHORT, 50, "example.com/gpu", True),
            ("root", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "resource share defined for resources only available at the root cohort",
        cq_obj("cq", rg(fq("default", ("example.com/gpu", "0"))), cohort="child-cohort", weight="1"),
        cohorts=[
            cohort_obj("child-cohort", parent="root", weight="2"),
            cohort_obj("root", rg(fq("default", ("example.com/gpu", "50")))),
        ],
        usage={("default", "example.com/gpu"): 10},
        want=[
            ("cq", CQ, 200, "example.com/gpu", True),
            ("child-cohort", COHORT, 100, "example.com/gpu", True),
            ("root", COHORT, 0, "", False),
        ],
    ),
    DrsCase(
        "resource share affected by borrowing limit",
        cq_obj("cq", rg(fq("default", ("example.com/gpu", "0"))), cohort="child-cohort"),
        cohorts=[
            cohort_obj("child-cohort", rg(fq("default", ("example.com/gpu", "0", "10"))), parent="root"),
            cohort_obj("root", rg(fq("default", ("example.com/gpu", "50")))),
        ],
        usage={("default", "example.com/gpu"): 10},
        want=[
            ("cq", CQ, 1000, "example.com/gpu", True),
            ("child-cohort", COHORT, 200, "example.com/gpu", True),
            ("root", COHORT, 0, "", False),
        ],
    ),
]


BORROWING_ON_CASES: list[tuple[str, dict[FlavorResource, int], dict[FlavorResource, int] | None, bool, bool]] = [
    ("borrows on requested flavor", {("default", "cpu"): 3000}, {("default", "cpu"): 1000}, True, True),
    (
        "borrows on unrequested flavor only",
        {("default", "cpu"): 1000, ("default", "example.com/gpu"): 7},
        {("default", "cpu"): 1000},
        False,
        True,
    ),
    (
        "borrows on both, requests one",
        {("default", "cpu"): 3000, ("default", "example.com/gpu"): 7},
        {("default", "example.com/gpu"): 1},
        True,
        True,
    ),
    (
        "no borrowing",
        {("default", "cpu"): 1000, ("default", "example.com/gpu"): 2},
        {("default", "cpu"): 1000},
        False,
        False,
    ),
    ("nil requestedFRs", {("default", "cpu"): 3000}, None, False, True),
]


def _tree(case: DrsCase) -> QuotaTree:
    cqs = [ClusterQueueSpec.from_object(case.cluster_queue)]
    if case.lending is not None:
        cqs.append(ClusterQueueSpec.from_object(case.lending))
    tree = QuotaTree(cqs, [CohortSpec.from_object(o) for o in case.cohorts])
    for i, (fr, value) in enumerate(case.usage.items()):
        tree.add_workload(AdmittedWorkload(f"workload-{i}", "cq", {fr: value}))
    return tree


@pytest.mark.kueue(source=SOURCE, test="TestDominantResourceShare")
@pytest.mark.parametrize("case", DRS_CASES, ids=[c.name for c in DRS_CASES])
def test_dominant_resource_share(case: DrsCase) -> None:
    # Kueue: pkg/cache/scheduler/fair_sharing_test.go TestDominantResourceShare (the snapshot's values; the cache's
    # are the same nodes)
    tree = _tree(case)
    got = []
    for name in tree.cluster_queue_names:
        drs = dominant_resource_share(tree, tree._cqs[name], case.requests)
        got.append((name, CQ, drs.rounded(), drs.resource, drs.borrowing))
    for name in tree.cohort_names:
        drs = dominant_resource_share(tree, tree._cohorts[name], case.requests)
        got.append((name, COHORT, drs.rounded(), drs.resource, drs.borrowing))
    assert sorted(got) == sorted(case.want)


@pytest.mark.kueue(source=SOURCE, test="TestIsBorrowingOn")
@pytest.mark.parametrize(
    ("name", "usage", "requested", "want_on", "want_borrowing"),
    BORROWING_ON_CASES,
    ids=[c[0] for c in BORROWING_ON_CASES],
)
def test_is_borrowing_on(
    name: str,
    usage: dict[FlavorResource, int],
    requested: dict[FlavorResource, int] | None,
    want_on: bool,
    want_borrowing: bool,
) -> None:
    # Kueue: pkg/cache/scheduler/fair_sharing_test.go TestIsBorrowingOn
    cq = cq_obj("cq", rg(fq("default", ("cpu", "2"), ("example.com/gpu", "5"))), cohort="cohort", weight="1")
    lending = cq_obj("lending-cq", rg(fq("default", ("cpu", "8"), ("example.com/gpu", "5"))), cohort="cohort")
    tree = _tree(DrsCase(name, cq, lending, usage=usage))
    drs = dominant_resource_share(tree, tree._cqs["cq"])
    assert drs.borrowing is want_borrowing
    assert drs.borrowing_on(requested or {}) is want_on
