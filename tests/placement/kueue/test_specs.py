"""Tests for :mod:`dispatcher.placement.kueue.specs`: ClusterQueue, Cohort, ResourceFlavor, taints.

The cases ported from Kueue's own Go tests are in tests/conformance/kueue/ (one file per Kueue test file); the
builders they share with these tests (``make_cq``, ``fq``, ``ps``, ...) are in tests/conformance/kueue/kueuebuild.py.
"""

from __future__ import annotations

import pytest
from kueuebuild import SPOT_TAINT, SPOT_TOLERATION, cq_obj, fq, make_cohort, make_cq, make_rf, rg

from dispatcher.placement.kueue.specs import (
    ClusterQueueSpec,
    CohortSpec,
    FlavorFungibility,
    PreemptionPolicy,
    QueueingStrategy,
    Taint,
    Toleration,
    find_untolerated_taint,
)


def test_cluster_queue_v1beta2_parsed() -> None:
    spec = make_cq(
        "team-a",
        rg(fq("a100", ("nvidia.com/gpu", "8", "4", "2"), ("cpu", "96"))),
        rg(fq("default", ("memory", "1Ti"))),
        cohort="org",
        preemption={
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        },
        fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"},
    )
    assert spec.cohort == "org"
    gpu = spec.resource_groups[0].flavors[0].resources[0]
    assert (gpu.name, gpu.nominal, gpu.borrowing_limit, gpu.lending_limit) == ("nvidia.com/gpu", 8, 4, 2)
    assert spec.resource_groups[0].flavors[0].resources[1].nominal == 96_000
    assert spec.resource_groups[1].flavors[0].resources[0].nominal == 2**40
    assert spec.resource_groups[0].covered_resources == ("nvidia.com/gpu", "cpu")
    assert spec.preemption.within_cluster_queue is PreemptionPolicy.LOWER_PRIORITY
    assert spec.preemption.reclaim_within_cohort is PreemptionPolicy.ANY
    assert spec.preemption.borrow_within_cohort is not None
    assert spec.preemption.borrow_within_cohort.max_priority_threshold == 100
    assert spec.flavor_fungibility == FlavorFungibility("TryNextFlavor", "MayStopSearch")
    assert spec.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO
    assert not spec.is_stopped
    assert spec.matches_namespace({"anything": "x"})


def test_cluster_queue_defaults_match_kueue() -> None:
    spec = ClusterQueueSpec.from_object({"metadata": {"name": "q"}, "spec": {}})
    assert spec.cohort is None
    assert spec.preemption.within_cluster_queue is PreemptionPolicy.NEVER
    assert spec.preemption.reclaim_within_cohort is PreemptionPolicy.NEVER
    assert spec.preemption.borrow_within_cohort is None
    # defaultFlavorFungibility in pkg/cache/scheduler/clusterqueue.go
    assert spec.flavor_fungibility == FlavorFungibility("MayStopSearch", "TryNextFlavor")
    # A nil namespaceSelector is labels.Nothing().
    assert not spec.matches_namespace({})


def test_cluster_queue_v1beta1_spellings_parsed() -> None:
    obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "old"},
        "spec": {
            "cohort": "legacy",
            "queueingStrategy": "StrictFIFO",
            "stopPolicy": "Hold",
            "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
            "admissionChecks": ["mk"],
            "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]},
            "resourceGroups": [rg(fq("default", ("cpu", "500m")))],
        },
    }
    spec = ClusterQueueSpec.from_object(obj)
    assert spec.cohort == "legacy"
    assert spec.flavor_fungibility == FlavorFungibility("MayStopSearch", "MayStopSearch")
    assert spec.queueing_strategy is QueueingStrategy.STRICT_FIFO
    assert spec.queueing_strategy.head_blocks
    assert spec.is_stopped
    assert spec.admission_checks == ("mk",)
    assert spec.matches_namespace({"team": "a"})
    assert not spec.matches_namespace({"team": "b"})
    assert spec.resource_groups[0].flavors[0].resources[0].nominal == 500


def test_admission_checks_strategy_parsed() -> None:
    obj = cq_obj("q")
    obj["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov", "onFlavors": ["a"]}]}
    assert ClusterQueueSpec.from_object(obj).admission_checks == ("prov",)


def test_cohort_and_flavor_parsed() -> None:
    cohort = make_cohort("child", rg(fq("default", ("cpu", "4", "", "2"))), parent="root")
    assert cohort.parent == "root"
    assert cohort.resource_groups[0].flavors[0].resources[0].lending_limit == 2000
    legacy = CohortSpec.from_object({"metadata": {"name": "c"}, "spec": {"parent": "p"}})
    assert legacy.parent == "p"
    flavor = make_rf(
        "spot",
        labels={"cloud.com/spot": "true"},
        taints=[SPOT_TAINT],
        tolerations=[SPOT_TOLERATION],
    )
    assert flavor.node_labels == {"cloud.com/spot": "true"}
    assert flavor.node_taints == (Taint("instance", "spot", "NoSchedule"),)
    assert flavor.tolerations == (Toleration("instance", "Equal", "spot", "NoSchedule"),)
    with pytest.raises(ValueError, match=r"metadata\.name"):
        ClusterQueueSpec.from_object({"spec": {}})


def test_tolerations_and_taints() -> None:
    taint = Taint("gpu", "true", "NoSchedule")
    assert find_untolerated_taint([taint], []) == taint
    assert find_untolerated_taint([taint], [Toleration("gpu", "Exists")]) is None
    assert find_untolerated_taint([taint], [Toleration("gpu", "Equal", "false")]) == taint
    assert find_untolerated_taint([taint], [Toleration(operator="Exists")]) is None
    assert find_untolerated_taint([Taint("x", "y", "PreferNoSchedule")], []) is None
    assert find_untolerated_taint([taint], [Toleration("gpu", "Exists", effect="NoExecute")]) == taint
    level = Taint("level", "5", "NoSchedule")
    assert find_untolerated_taint([level], [Toleration("level", "Gt", "3")]) is None
    assert find_untolerated_taint([level], [Toleration("level", "Lt", "3")]) == level
    assert str(taint) == "{gpu true NoSchedule <nil>}"
