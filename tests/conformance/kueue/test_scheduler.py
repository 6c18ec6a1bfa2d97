"""Kueue conformance: ``pkg/scheduler/scheduler_test.go`` (TestSchedule), its partial admission cases, on the quota
model and :func:`dispatcher.placement.partial.partial_counts`."""

from __future__ import annotations

import pytest
from kueuebuild import admit_or_reduce, partial_pod_set, schedule_tree

from dispatcher.placement.kueue.assignment import FlavorAssignmentMode, preemption_targets
from dispatcher.placement.kueue.flavors import assign_flavors
from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import AdmittedWorkload, workload_pod_sets

SOURCE = "pkg/scheduler/scheduler_test.go"


def _old_gpu_workload(tree: QuotaTree) -> None:
    """``old``: 10 GPUs of model-a at priority -4 in eng-beta."""
    tree.add_workload(AdmittedWorkload("eng-beta/old", "eng-beta", {("model-a", "example.com/gpu"): 10}, priority=-4))


@pytest.mark.kueue(source=SOURCE, test="TestSchedule")
def test_partial_admission_single_variable_pod_set() -> None:
    # Kueue: pkg/scheduler/scheduler_test.go, TestSchedule "partial admission single variable pod set"
    tree, flavors = schedule_tree()
    full, partial = admit_or_reduce(tree, flavors, "sales", [partial_pod_set("one", 50, "cpu", "2", min_count=20)])
    assert full.mode is FlavorAssignmentMode.NO_FIT
    assert partial is not None and partial.counts == (25,) and not partial.targets
    assert partial.assignment.to_admission() == [
        {"name": "one", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "50"}, "count": 25}
    ]


@pytest.mark.kueue(source=SOURCE, test="TestSchedule")
def test_partial_admission_single_variable_pod_set_preempt_first() -> None:
    # Kueue: pkg/scheduler/scheduler_test.go, TestSchedule "partial admission single variable pod set, preempt
    # first": the full count preempts ``old``, so no reduction is tried (Kueue admits all 20 after the preemption).
    tree, flavors = schedule_tree()
    _old_gpu_workload(tree)
    requests = workload_pod_sets(
        {"spec": {"podSets": [partial_pod_set("one", 20, "example.com/gpu", "1", min_count=10)]}}
    )
    full = assign_flavors(tree, "eng-beta", requests, flavors, priority=4)
    assert full.mode is FlavorAssignmentMode.PREEMPT
    assert [t.workload.key for t in preemption_targets(tree, full, priority=4)] == ["eng-beta/old"]


@pytest.mark.kueue(source=SOURCE, test="TestSchedule")
def test_partial_admission_single_variable_pod_set_preempt_with_partial_admission() -> None:
    # Kueue: pkg/scheduler/scheduler_test.go, TestSchedule "partial admission single variable pod set, preempt with
    # partial admission": 30 GPUs never fit in 20; 20 do once ``old`` is preempted.
    tree, flavors = schedule_tree()
    _old_gpu_workload(tree)
    full, partial = admit_or_reduce(
        tree, flavors, "eng-beta", [partial_pod_set("one", 30, "example.com/gpu", "1", min_count=10)], priority=4
    )
    assert full.mode is FlavorAssignmentMode.NO_FIT
    assert partial is not None and partial.counts == (20,)
    assert partial.assignment.mode is FlavorAssignmentMode.PREEMPT
    assert [t.workload.key for t in partial.targets] == ["eng-beta/old"]


@pytest.mark.kueue(source=SOURCE, test="TestSchedule")
def test_partial_admission_multiple_variable_pod_sets() -> None:
    # Kueue: pkg/scheduler/scheduler_test.go, TestSchedule "partial admission multiple variable pod sets"
    tree, flavors = schedule_tree()
    pod_sets = [
        partial_pod_set("one", 20, "cpu", "1"),
        partial_pod_set("two", 30, "cpu", "1", min_count=10),
        partial_pod_set("three", 15, "cpu", "1", min_count=5),
    ]
    _, partial = admit_or_reduce(tree, flavors, "sales", pod_sets)
    assert partial is not None and partial.counts == (20, 20, 10)
    assert [a["resourceUsage"] for a in partial.assignment.to_admission()] == [
        {"cpu": "20"},
        {"cpu": "20"},
        {"cpu": "10"},
    ]


@pytest.mark.kueue(source=SOURCE, test="TestSchedule")
def test_partial_admission_disabled_multiple_variable_pod_sets() -> None:
    # Kueue: pkg/scheduler/scheduler_test.go, TestSchedule "partial admission disabled, multiple variable pod sets":
    # without minCount (the feature off drops it) nothing is reduced and the workload stays pending.
    tree, flavors = schedule_tree()
    pod_sets = [
        partial_pod_set("one", 20, "cpu", "1"),
        partial_pod_set("two", 30, "cpu", "1"),
        partial_pod_set("three", 15, "cpu", "1"),
    ]
    full, partial = admit_or_reduce(tree, flavors, "sales", pod_sets)
    assert full.mode is FlavorAssignmentMode.NO_FIT and partial is None
