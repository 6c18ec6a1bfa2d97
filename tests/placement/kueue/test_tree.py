"""Tests for :mod:`dispatcher.placement.kueue.tree`: the quota tree with borrowing and lending.

The cases ported from Kueue's own Go tests are in tests/conformance/kueue/ (one file per Kueue test file); the
builders they share with these tests (``make_cq``, ``fq``, ``ps``, ...) are in tests/conformance/kueue/kueuebuild.py.
"""

from __future__ import annotations

from kueuebuild import Mi, fq, make_cohort, make_cq, rg

from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import AdmittedWorkload


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
