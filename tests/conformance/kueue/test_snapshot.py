"""Kueue conformance: ``pkg/cache/scheduler/snapshot_test.go`` (TestSnapshotAddRemoveWorkloadWithLendingLimit)."""

from __future__ import annotations

import pytest
from kueuebuild import fq, make_cq, rg

from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import AdmittedWorkload

SOURCE = "pkg/cache/scheduler/snapshot_test.go"


@pytest.mark.kueue(source=SOURCE, test="TestSnapshotAddRemoveWorkloadWithLendingLimit")
def test_lending_limit_add_remove_workloads() -> None:
    # Kueue: pkg/cache/scheduler/snapshot_test.go TestSnapshotAddRemoveWorkloadWithLendingLimit
    tree = QuotaTree(
        [
            make_cq("lend-a", rg(fq("default", ("cpu", "10", "", "4"))), cohort="lend"),
            make_cq("lend-b", rg(fq("default", ("cpu", "10", "", "6"))), cohort="lend"),
        ]
    )
    fr = ("default", "cpu")
    for key, cq, cpu in (
        ("lend-a-1", "lend-a", 1),
        ("lend-a-2", "lend-a", 9),
        ("lend-a-3", "lend-a", 6),
        ("lend-b-1", "lend-b", 4),
    ):
        tree.add_workload(AdmittedWorkload(key, cq, {fr: cpu * 1000}))
    assert tree.cohort_usage("lend", *fr) == (10_000, 10_000)
    tree.remove_workload("lend-a", "lend-a-2")
    assert (tree.usage("lend-a", *fr), tree.usage("lend-b", *fr)) == (7_000, 4_000)
    assert tree.cohort_usage("lend", *fr) == (10_000, 1_000)
    tree.remove_workload("lend-a", "lend-a-1")
    assert tree.cohort_usage("lend", *fr) == (10_000, 0)
    for key in ("lend-a-3",):
        tree.remove_workload("lend-a", key)
    tree.remove_workload("lend-b", "lend-b-1")
    assert tree.cohort_usage("lend", *fr) == (10_000, 0)
    assert tree.usage("lend-a", *fr) == 0
