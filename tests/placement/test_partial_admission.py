"""Partial admission (``minCount``): Kueue's ``PodSetReducer`` search, the quota model's reduced admission, the
engine's verdicts and explanations, and the Job adapter's ``minCount``.

Cases marked ``Kueue:`` are ported from Kueue v0.17's Go tests; the comment names the file and the test, and the
case name is kept verbatim, so that a failure can be compared with the original.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pytest

from dispatcher.adapters.job import JobAdapter
from dispatcher.config import Policy
from dispatcher.explain import render_decision
from dispatcher.placement.engine import Decision, PendingWorkload, PlacementEngine, PodSetSpec
from dispatcher.placement.partial import PartialAdmission, partial_counts, reduced_counts, search_counts
from dispatcher.placement.quota import (
    AdmittedWorkload,
    Assignment,
    ClusterQueueSpec,
    CohortSpec,
    FlavorAssignmentMode,
    PodSetRequest,
    QuotaTree,
    ResourceFlavorSpec,
    assign_flavors,
    preemption_targets,
    workload_pod_sets,
)
from dispatcher.placement.worker import WorkerCapacity
from dispatcher.resources import InvalidRequest

Obj = dict[str, Any]


# ---- PodSetReducer.Search -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _SearchCase:
    #: (count, minCount or None) per pod set: ``MakePodSet(name, count).SetMinimumCount(min)``
    pod_sets: Sequence[tuple[int, int | None]]
    count_limit: int
    want_count: int
    want_found: bool


_FOUR = [(5, 3), (5, 4), (5, 1), (5, 2)]

# Kueue: pkg/scheduler/flavorassigner/podset_reducer_test.go, TestSearch. The fits function there passes when the
# counts sum to at most countLimit and returns that sum.
SEARCH_CASES = {
    "empty": _SearchCase([], 10, 0, False),
    "partial not available": _SearchCase([(1, None), (2, 2)], 2, 0, False),
    "partial available": _SearchCase(_FOUR, 15, 15, True),
    "one partial available": _SearchCase([(5, 3), (5, None), (5, None), (5, None)], 19, 19, True),
    "to min": _SearchCase(_FOUR, 10, 10, True),
    "to max": _SearchCase(_FOUR, 20, 20, True),
    "no overflow": _SearchCase([(150_000, 1)] * 8, 150_000, 150_000, True),
    "max pods on 1.27": _SearchCase([(150_000, 1)] + [(1, None)] * 7, 150_000, 150_000, True),
    "podset with replica count 0": _SearchCase([(0, 0)], 0, 0, False),
}


@pytest.mark.parametrize("name", sorted(SEARCH_CASES))
def test_search_kueue_table(name: str) -> None:
    case = SEARCH_CASES[name]
    calls: list[list[int]] = []

    def fits(counts: list[int]) -> tuple[int | None, bool]:
        calls.append(counts)
        total = sum(counts)
        return total, total <= case.count_limit

    count, found = search_counts([c for c, _ in case.pod_sets], [m for _, m in case.pod_sets], fits)
    assert (count or 0, found) == (case.want_count, case.want_found)
    if sum(c - (c if m is None else m) for c, m in case.pod_sets) == 0:
        assert calls == []  # nothing to give up: Kueue does not even try


def test_reduction_is_proportional_and_rounds_down() -> None:
    """``fillPodSetSizesForSearchIndex``: each pod set gives up ``delta * i // total`` pods."""
    full, deltas = [5, 5, 5, 5], [2, 1, 4, 3]
    assert reduced_counts(full, deltas, 0, 10) == full
    assert reduced_counts(full, deltas, 10, 10) == [3, 4, 1, 2]
    assert reduced_counts(full, deltas, 5, 10) == [4, 5, 3, 4]  # 1, 0.5, 2, 1.5 given up, rounded down


def test_search_follows_go_sort_search_when_fits_is_not_monotonic() -> None:
    """Kueue's answer is whatever ``sort.Search`` lands on; here index 1 alone passes and is never probed."""

    def fits(counts: list[int]) -> tuple[list[int] | None, bool]:
        return counts, counts == [9]

    assert search_counts([10], [0], fits) == (None, False)


# ---- partial_counts against the quota model ----------------------------------------------------------------------


def _tree() -> tuple[QuotaTree, dict[str, ResourceFlavorSpec]]:
    """The ClusterQueues of Kueue's scheduler_test.go (TestSchedule) that its partial admission cases use."""

    def cq(name: str, groups: list[Obj], **extra: Any) -> ClusterQueueSpec:
        return ClusterQueueSpec.from_object({"metadata": {"name": name}, "spec": {"resourceGroups": groups, **extra}})

    def group(flavor: str, resource: str, nominal: str, borrowing: str | None = None) -> Obj:
        quota: Obj = {"name": resource, "nominalQuota": nominal}
        if borrowing is not None:
            quota["borrowingLimit"] = borrowing
        return {"coveredResources": [resource], "flavors": [{"name": flavor, "resources": [quota]}]}

    cqs = [
        cq("sales", [group("default", "cpu", "50", "0")]),
        cq("eng-alpha", [group("on-demand", "cpu", "50", "50")], cohort="eng"),
        cq(
            "eng-beta",
            [group("on-demand", "cpu", "50", "10"), group("model-a", "example.com/gpu", "20", "0")],
            cohort="eng",
            preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        ),
    ]
    flavors = {
        f: ResourceFlavorSpec.from_object({"metadata": {"name": f}, "spec": {}})
        for f in ("default", "on-demand", "model-a")
    }
    return QuotaTree(cqs, [CohortSpec.from_object({"metadata": {"name": "eng"}, "spec": {}})]), flavors


def _pod_set(name: str, count: int, resource: str, amount: str, min_count: int | None = None) -> Obj:
    ps: Obj = {
        "name": name,
        "count": count,
        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {resource: amount}}}]}},
    }
    if min_count is not None:
        ps["minCount"] = min_count
    return ps


def _old_gpu_workload(tree: QuotaTree) -> None:
    """``old``: 10 GPUs of model-a at priority -4 in eng-beta."""
    tree.add_workload(AdmittedWorkload("eng-beta/old", "eng-beta", {("model-a", "example.com/gpu"): 10}, priority=-4))


def _admit(
    tree: QuotaTree, flavors: dict[str, ResourceFlavorSpec], cq: str, pod_sets: list[Obj], priority: int = 0
) -> tuple[Assignment, PartialAdmission | None]:
    """Kueue's ``getInitialAssignments``: the full counts if they fit or preempt with targets, else partial."""
    requests = workload_pod_sets({"spec": {"podSets": pod_sets}})
    full = assign_flavors(tree, cq, requests, flavors, priority=priority)
    if full.mode is FlavorAssignmentMode.FIT:
        return full, None
    return full, partial_counts(tree, cq, requests, flavors, priority=priority)


def test_partial_admission_single_variable_pod_set() -> None:
    # Kueue: pkg/scheduler/scheduler_test.go, TestSchedule "partial admission single variable pod set"
    tree, flavors = _tree()
    full, partial = _admit(tree, flavors, "sales", [_pod_set("one", 50, "cpu", "2", min_count=20)])
    assert full.mode is FlavorAssignmentMode.NO_FIT
    assert partial is not None and partial.counts == (25,) and not partial.targets
    assert partial.assignment.to_admission() == [
        {"name": "one", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "50"}, "count": 25}
    ]


def test_partial_admission_single_variable_pod_set_preempt_first() -> None:
    # Kueue: pkg/scheduler/scheduler_test.go, TestSchedule "partial admission single variable pod set, preempt
    # first": the full count preempts ``old``, so no reduction is tried (Kueue admits all 20 after the preemption).
    tree, flavors = _tree()
    _old_gpu_workload(tree)
    requests = workload_pod_sets({"spec": {"podSets": [_pod_set("one", 20, "example.com/gpu", "1", min_count=10)]}})
    full = assign_flavors(tree, "eng-beta", requests, flavors, priority=4)
    assert full.mode is FlavorAssignmentMode.PREEMPT
    assert [t.workload.key for t in preemption_targets(tree, full, priority=4)] == ["eng-beta/old"]


def test_partial_admission_single_variable_pod_set_preempt_with_partial_admission() -> None:
    # Kueue: pkg/scheduler/scheduler_test.go, TestSchedule "partial admission single variable pod set, preempt with
    # partial admission": 30 GPUs never fit in 20; 20 do once ``old`` is preempted.
    tree, flavors = _tree()
    _old_gpu_workload(tree)
    full, partial = _admit(
        tree, flavors, "eng-beta", [_pod_set("one", 30, "example.com/gpu", "1", min_count=10)], priority=4
    )
    assert full.mode is FlavorAssignmentMode.NO_FIT
    assert partial is not None and partial.counts == (20,)
    assert partial.assignment.mode is FlavorAssignmentMode.PREEMPT
    assert [t.workload.key for t in partial.targets] == ["eng-beta/old"]


def test_partial_admission_multiple_variable_pod_sets() -> None:
    # Kueue: pkg/scheduler/scheduler_test.go, TestSchedule "partial admission multiple variable pod sets"
    tree, flavors = _tree()
    pod_sets = [
        _pod_set("one", 20, "cpu", "1"),
        _pod_set("two", 30, "cpu", "1", min_count=10),
        _pod_set("three", 15, "cpu", "1", min_count=5),
    ]
    _, partial = _admit(tree, flavors, "sales", pod_sets)
    assert partial is not None and partial.counts == (20, 20, 10)
    assert [a["resourceUsage"] for a in partial.assignment.to_admission()] == [
        {"cpu": "20"},
        {"cpu": "20"},
        {"cpu": "10"},
    ]


def test_partial_admission_disabled_multiple_variable_pod_sets() -> None:
    # Kueue: pkg/scheduler/scheduler_test.go, TestSchedule "partial admission disabled, multiple variable pod sets":
    # without minCount (the feature off drops it) nothing is reduced and the workload stays pending.
    tree, flavors = _tree()
    pod_sets = [_pod_set("one", 20, "cpu", "1"), _pod_set("two", 30, "cpu", "1"), _pod_set("three", 15, "cpu", "1")]
    full, partial = _admit(tree, flavors, "sales", pod_sets)
    assert full.mode is FlavorAssignmentMode.NO_FIT and partial is None


def test_even_min_count_not_fitting_is_no_partial_admission() -> None:
    tree, flavors = _tree()
    _, partial = _admit(tree, flavors, "sales", [_pod_set("one", 40, "cpu", "2", min_count=30)])
    assert partial is None


def test_describe_names_pod_sets_of_a_gang() -> None:
    requests = [
        PodSetRequest("one", 20, {"cpu": 1000}),
        PodSetRequest("two", 30, {"cpu": 1000}, min_count=10),
    ]
    pa = PartialAdmission((20, 20), Assignment("x", [], {}))
    assert pa.describe(requests) == "pod set two fits 20 of 30 pods (minCount 10)"


# ---- the engine ----------------------------------------------------------------------------------------------


def _engine_worker(name: str, cpu: str, *, node_cpu: str = "16") -> WorkerCapacity:
    """A worker whose ClusterQueue ``team`` has ``cpu`` of one flavor (no cohort) and one node of ``node_cpu``."""
    w = WorkerCapacity(name, max_in_flight=12)
    w.set_flavor({"metadata": {"name": "default-flavor"}, "spec": {}})
    w.set_cluster_queue(
        {
            "metadata": {"name": "team"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                    }
                ]
            },
        }
    )
    w.set_local_queue({"metadata": {"name": "user-queue", "namespace": "default"}, "spec": {"clusterQueue": "team"}})
    w.node_event(
        "ADDED",
        {"metadata": {"name": f"{name}-n", "labels": {}}, "spec": {}, "status": {"allocatable": {"cpu": node_cpu}}},
    )
    w.health = "Ready"
    w.synced = True
    return w


def _pending(count: int = 8, min_count: int | None = 4, uid: str = "u1") -> PendingWorkload:
    ps = PodSetSpec("main", count, {"cpu": Fraction(1)}, min_count=min_count)
    return PendingWorkload(
        id=1, uid=uid, namespace="default", name="j", queue="user-queue", priority=0, created=0.0, generation=1,
        pod_sets=(ps,),
    )  # fmt: skip


def _admitted_usage(w: WorkerCapacity, name: str, cpu: int) -> None:
    w.workload_event(
        "ADDED",
        {
            "metadata": {"name": name, "namespace": "default", "ownerReferences": [{"uid": name, "controller": True}]},
            "spec": {"queueName": "user-queue"},
            "status": {
                "conditions": [{"type": "QuotaReserved", "status": "True"}],
                "admission": {
                    "clusterQueue": "team",
                    "podSetAssignments": [
                        {"name": "main", "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": str(cpu)}}
                    ],
                },
            },
        },
    )


def test_engine_places_a_partial_admission_and_explains_it() -> None:
    engine = PlacementEngine(Policy())
    w1, w2 = _engine_worker("worker-1", "4"), _engine_worker("worker-2", "6")
    decision = engine.decide(_pending(), [w1, w2])
    assert decision.chosen is not None and decision.chosen.cluster == "worker-2"
    assert decision.chosen.reduced == "fits 6 of 8 pods (minCount 4)"
    assert decision.chosen.usage == {("default-flavor", "cpu"): 6000}  # what the reservation holds
    assert "partial admission: fits 6 of 8 pods (minCount 4) on worker-2" in decision.summary
    workers = {w["cluster"]: w for w in decision.explanation()["workers"]}
    assert workers["worker-1"]["feasible"] and workers["worker-1"]["partial"] == "fits 4 of 8 pods (minCount 4)"
    assert workers["worker-2"]["score"] > workers["worker-1"]["score"]  # more of the pods
    rendered = "\n".join(render_decision(decision.explanation()))
    assert "fits 6 of 8 pods (minCount 4)" in rendered  # dispatcher explain


def test_engine_prefers_the_full_count_over_a_partial_admission() -> None:
    engine = PlacementEngine(Policy())
    partial_w, full_w = _engine_worker("worker-2", "6"), _engine_worker("worker-3", "8")
    decision = engine.decide(_pending(), [partial_w, full_w])
    assert decision.chosen is not None and decision.chosen.cluster == "worker-3" and not decision.chosen.reduced
    by_name = {v.cluster: v for v in decision.verdicts}
    assert by_name["worker-2"].feasible and by_name["worker-2"].score < by_name["worker-3"].score
    assert "partial" not in decision.summary


def test_engine_without_min_count_does_not_reduce() -> None:
    decision = PlacementEngine(Policy()).decide(_pending(min_count=None), [_engine_worker("worker-2", "6")])
    assert decision.chosen is None
    assert "fewer pods" not in decision.verdicts[0].reason


def test_engine_min_count_that_can_never_fit_stays_never_fits() -> None:
    decision = PlacementEngine(Policy()).decide(_pending(), [_engine_worker("worker-1", "3")])
    v = decision.verdicts[0]
    assert not v.feasible and not v.transient
    assert "can never admit pod set main" in v.reason and "(at its minCount of 4 pods)" in v.reason
    assert decision.permanent_block is not None


def test_engine_min_count_that_fits_later_waits() -> None:
    """The quota could hold minCount pods but is in use: the verdict is transient and says partial was tried."""
    w = _engine_worker("worker-1", "6")
    _admitted_usage(w, "other", 3)
    v = PlacementEngine(Policy()).decide(_pending(), [w]).verdicts[0]
    assert not v.feasible and v.transient
    assert v.reason.endswith("; fewer pods, down to minCount, do not fit either")


# ---- the Job adapter -----------------------------------------------------------------------------------------


def _job(parallelism: int, annotation: str | None) -> Obj:
    meta: Obj = {"name": "j", "namespace": "default"}
    if annotation is not None:
        meta["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": annotation}
    return {
        "metadata": meta,
        "spec": {
            "parallelism": parallelism,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
        },
    }


def test_job_adapter_keeps_min_count_through_sql_json() -> None:
    (ps,) = JobAdapter().pod_sets(_job(8, "4"))
    assert ps.min_count == 4 and ps.to_json()["minCount"] == 4
    spec = PodSetSpec.from_json({**ps.to_json(), "template": ps.template})
    assert (spec.count, spec.min_count) == (8, 4)
    (plain,) = JobAdapter().pod_sets(_job(8, None))
    assert plain.min_count is None and "minCount" not in plain.to_json()


@pytest.mark.parametrize("value", ["0", "8", "9", "-1", "four"])
def test_job_adapter_rejects_what_kueues_webhook_rejects(value: str) -> None:
    with pytest.raises(InvalidRequest, match="job-min-parallelism"):
        JobAdapter().pod_sets(_job(8, value))


def _snapshot(d: Decision) -> tuple[Any, ...]:
    return (
        d.chosen.cluster if d.chosen else None,
        d.summary,
        [(v.cluster, v.feasible, v.reason, round(v.score, 12), v.usage, v.reduced) for v in d.verdicts],
    )


@pytest.mark.parametrize("seed", range(4))
def test_cached_partial_verdicts_decide_as_a_fresh_engine(seed: int) -> None:
    """A long-lived engine (verdicts kept per shape, Fit verdicts re-validated after reservations) decides partial
    admissions exactly as an engine without memory, while reservations and admissions come and go."""
    rng = random.Random(seed)
    workers = [_engine_worker("worker-1", "6"), _engine_worker("worker-2", "10"), _engine_worker("worker-3", "8")]
    by_name = {w.name: w for w in workers}
    engine = PlacementEngine(Policy())
    held: list[tuple[str, str]] = []
    partial_seen = 0
    for step in range(150):
        roll = rng.random()
        if roll < 0.6:
            count = rng.choice([2, 4, 8])
            wl = _pending(count, rng.choice([None, 1, count // 2]), uid=f"u{step}")
            got = engine.decide(wl, workers)
            assert _snapshot(got) == _snapshot(PlacementEngine(Policy()).decide(wl, workers)), f"step {step}"
            partial_seen += bool(got.chosen is not None and got.chosen.reduced)
            if got.chosen is not None and rng.random() < 0.7:
                engine.reserve(got, by_name)
                held.append((got.chosen.cluster, wl.uid))
        elif roll < 0.85 and held:
            cluster, uid = held.pop(rng.randrange(len(held)))
            by_name[cluster].release(uid)
        else:
            _admitted_usage(rng.choice(workers), f"adm-{step}", rng.choice([1, 2]))
    assert partial_seen > 3
