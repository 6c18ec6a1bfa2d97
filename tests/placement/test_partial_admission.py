"""Partial admission (``minCount``): the reduction of ``PodSetReducer``, the quota model's reduced admission, the
engine's verdicts and explanations, and the Job adapter's ``minCount``.

Kueue's own cases (podset_reducer_test.go TestSearch, scheduler_test.go TestSchedule) are in tests/conformance/kueue/.
"""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

import pytest
from kueuebuild import admit_or_reduce, fq, make_cq, partial_pod_set, rg, schedule_tree

from dispatcher.adapters.job import JobAdapter
from dispatcher.config import Policy
from dispatcher.explain import render_decision
from dispatcher.placement.engine import Decision, PlacementEngine
from dispatcher.placement.kueue.assignment import Assignment, FlavorAssignmentMode
from dispatcher.placement.kueue.flavors import assign_flavors
from dispatcher.placement.kueue.workloads import PodSetRequest, workload_pod_sets
from dispatcher.placement.partial import (
    PartialAdmission,
    can_be_partially_admitted,
    partial_counts,
    reduced_counts,
    search_counts,
)
from dispatcher.placement.worker import WorkerCapacity
from dispatcher.placement.workload import PendingWorkload, PodSetSpec
from dispatcher.resources import InvalidRequest

Obj = dict[str, Any]


# ---- PodSetReducer.Search -------------------------------------------------------------------------------------


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


def test_even_min_count_not_fitting_is_no_partial_admission() -> None:
    tree, flavors = schedule_tree()
    _, partial = admit_or_reduce(tree, flavors, "sales", [partial_pod_set("one", 40, "cpu", "2", min_count=30)])
    assert partial is None


def _reclaim_case(reclaimable: int, cpu: str) -> tuple[Any, list[PodSetRequest]]:
    """Two pod sets of 1 cpu per pod, 4 pods each, minCount 2, in a ClusterQueue of ``cpu``; the first pod set's
    ``status.reclaimablePods`` (pods that already succeeded) lowers its count."""
    tree, flavors = schedule_tree()
    wl = {
        "spec": {
            "podSets": [
                partial_pod_set("first", 4, "cpu", "1", min_count=2),
                partial_pod_set("second", 4, "cpu", "1", min_count=2),
            ]
        },
        "status": {"reclaimablePods": [{"name": "first", "count": reclaimable}]},
    }
    cq = make_cq("small", rg(fq("default", ("cpu", cpu))))
    tree.set_cluster_queue(cq)
    return (tree, flavors), workload_pod_sets(wl)


@pytest.mark.parametrize(
    ("reclaimable", "cpu", "want_counts", "want_assigned"),
    [
        # Spec counts [4, 4] shrink together: [3, 3] is 6 cpu, [2, 2] fits in 5. (From the counts after reclaim,
        # [2, 4], only the second could shrink, to [2, 3].)
        (2, "5", (2, 2), [2, 2]),
        # A pod set with no pod left keeps its count of 0 whatever the search index (PodSetResources.ScaledTo): the
        # search passes at index 2 of 4, counts [3, 3], of which the second's 3 pods are assigned.
        (4, "3", (3, 3), [0, 3]),
    ],
    ids=["reduced from the spec counts", "a pod set without pods stays at 0"],
)
def test_partial_admission_reduces_the_spec_counts(
    reclaimable: int, cpu: str, want_counts: tuple[int, ...], want_assigned: list[int]
) -> None:
    """Kueue v0.17 ``getInitialAssignments``: ``NewPodSetReducer(wl.Obj.Spec.PodSets, ...)`` walks down from the spec
    counts to ``minCount``, not from the counts after ``status.reclaimablePods`` that the full assignment uses."""
    (tree, flavors), pod_sets = _reclaim_case(reclaimable, cpu)
    full = assign_flavors(tree, "small", pod_sets, flavors)
    assert full.mode is not FlavorAssignmentMode.FIT
    assert can_be_partially_admitted(pod_sets)
    partial = partial_counts(tree, "small", pod_sets, flavors)
    assert partial is not None
    assert partial.counts == want_counts
    assert [p.count for p in partial.assignment.pod_sets] == want_assigned
    assert partial.assignment.usage == {("default", "cpu"): 1000 * sum(want_assigned)}


def test_partial_admission_is_possible_when_reclaimed_pods_leave_only_min_count() -> None:
    """``CanBePartiallyAdmitted`` looks at the spec count: 4 pods, minCount 2, 2 already succeeded."""
    pod_sets = workload_pod_sets(
        {
            "spec": {"podSets": [partial_pod_set("main", 4, "cpu", "1", min_count=2)]},
            "status": {"reclaimablePods": [{"name": "main", "count": 2}]},
        }
    )
    assert [(p.count, p.spec_count) for p in pod_sets] == [(2, 4)]
    assert can_be_partially_admitted(pod_sets)


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
