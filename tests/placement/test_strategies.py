"""The MultiKueue strategy modules (no I/O): which workers get copies, round by round; the race gate."""

from __future__ import annotations

from typing import Any

import pytest

from dispatcher import labels as L
from dispatcher.adapters.jobset import JobSetAdapter
from dispatcher.config import Policy
from dispatcher.copies import gate_pod_templates
from dispatcher.placement import allatonce, incremental
from dispatcher.placement.engine import Decision, PlacementEngine
from dispatcher.placement.verdicts import Verdict
from dispatcher.placement.worker import WorkerCapacity
from dispatcher.placement.workload import PendingWorkload


def _worker(name: str, *, health: str = "Ready", cordoned: bool = False) -> WorkerCapacity:
    w = WorkerCapacity(name)
    w.health, w.synced, w.cordoned = health, True, cordoned
    return w


def _decision(verdicts: list[Verdict]) -> Decision:
    wl = PendingWorkload(id=1, uid="u", namespace="ns", name="j", queue="q", priority=0, created=0.0, generation=1,
                         pod_sets=(), selector=None, excluded=frozenset())  # fmt: skip
    return Decision(wl, verdicts, None, "")


def test_all_at_once_copies_on_every_usable_worker_quota_or_not() -> None:
    workers = [_worker("w3"), _worker("w1"), _worker("w2"), _worker("w4", health="Lost"), _worker("w5", cordoned=True)]
    decision = _decision(
        [
            Verdict("w3", True),
            Verdict("w1", False, "ClusterQueue q: cpu requested 4, free 0"),  # full now: MultiKueue copies anyway
            Verdict("w2", False, "no LocalQueue q in namespace ns", transient=False),  # never admits it
            Verdict("w4", False, "cluster is Lost, not Ready"),
            Verdict("w5", False, "cluster is cordoned (no new placements)"),
        ]
    )
    assert allatonce.nominate(decision, workers) == ["w1", "w3"]


def test_all_at_once_with_the_real_engine_leaves_out_unready_and_unsynced_workers() -> None:
    engine = PlacementEngine(Policy(strategy="allAtOnce"))
    ready, unsynced = _worker("a"), _worker("b")
    unsynced.synced = False
    wl = _decision([]).workload
    decision = engine.decide(wl, [ready, unsynced])
    assert allatonce.eligible(decision, [ready, unsynced]) == []  # "a" has no LocalQueue: permanent


def test_incremental_rounds_add_per_round_workers_in_name_order() -> None:
    candidates = ["w5", "w1", "w4", "w2", "w3"]
    first = incremental.next_round(candidates, [], 3)
    assert first == ["w1", "w2", "w3"]
    second = incremental.next_round(candidates, first, 3)
    assert second == ["w4", "w5"]
    assert incremental.next_round(candidates, first + second, 3) == []
    with pytest.raises(ValueError, match="workersPerRound"):
        incremental.next_round(candidates, [], 0)


def test_incremental_nominate_uses_all_at_once_eligibility() -> None:
    workers = [_worker("a"), _worker("b"), _worker("c", health="Suspect")]
    decision = _decision([Verdict("a", True), Verdict("b", True), Verdict("c", False, "cluster is Suspect, not Ready")])
    assert incremental.nominate(decision, workers, ["a"], 3) == ["b"]


def test_gate_reaches_every_pod_template_of_a_kind() -> None:
    template: dict[str, Any] = {"spec": {"containers": [{"name": "c"}], "schedulingGates": [{"name": "other"}]}}
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {
            "replicatedJobs": [
                {"name": "a", "template": {"spec": {"template": template}}},
                {"name": "b", "template": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}},
            ]
        },
    }
    assert JobSetAdapter.kind == "JobSet"
    assert gate_pod_templates(jobset, "manager", "uid-1", 3) == 2
    for rj in jobset["spec"]["replicatedJobs"]:
        pod = rj["template"]["spec"]["template"]
        assert {"name": L.RACE_GATE} in pod["spec"]["schedulingGates"]
        assert pod["metadata"]["labels"] == {L.RACE_GATE: "manager", L.WORKLOAD_UID: "uid-1", L.GENERATION: "3"}
    assert template["spec"]["schedulingGates"][0] == {"name": "other"}, "other gates are kept"
