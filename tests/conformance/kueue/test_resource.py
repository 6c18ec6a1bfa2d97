"""Kueue conformance: ``pkg/cache/scheduler/resource_test.go`` (TestAvailable): what a ClusterQueue can still
use, and could use without usage, in flat and hierarchical cohorts with borrowing and lending limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from kueuebuild import fq, make_cohort, make_cq, rg

from dispatcher.placement.kueue.amounts import FlavorResource
from dispatcher.placement.kueue.specs import ClusterQueueSpec, CohortSpec
from dispatcher.placement.kueue.tree import QuotaTree

SOURCE = "pkg/cache/scheduler/resource_test.go"


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
@pytest.mark.kueue(source=SOURCE, test="TestAvailable")
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
