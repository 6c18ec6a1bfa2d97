"""Fair sharing and topology aware scheduling in the engine's verdicts: what a worker's Kueue configuration, Topologies,
node labels and pods make the engine predict, score and say."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from dispatcher.config import Policy
from dispatcher.explain import render_decision
from dispatcher.placement.engine import PlacementEngine
from dispatcher.placement.kueue.specs import FairSharingConfig
from dispatcher.placement.kueue.topology import TopologyRequest, topology_request
from dispatcher.placement.worker import WorkerCapacity
from dispatcher.placement.workload import PendingWorkload, PodSetSpec

Obj = dict[str, Any]
BLOCK, RACK, HOST = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
_ids = itertools.count(1)


def _node(name: str, rack: str, cpu: str = "1") -> Obj:
    return {
        "metadata": {"name": name, "labels": {BLOCK: "b1", RACK: rack, HOST: name}},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _tas_worker(name: str, racks: dict[str, int], *, topology: bool = True) -> WorkerCapacity:
    """A worker whose ClusterQueue ``team`` uses TAS flavor ``tas``: ``racks`` maps a rack to its 1-CPU nodes."""
    w = WorkerCapacity(name)
    if topology:
        levels = [{"nodeLabel": k} for k in (BLOCK, RACK, HOST)]
        w.set_topology({"metadata": {"name": "gpu-topology"}, "spec": {"levels": levels}})
    w.set_flavor({"metadata": {"name": "tas"}, "spec": {"topologyName": "gpu-topology"}})
    quota = {"name": "cpu", "nominalQuota": "100"}
    w.set_cluster_queue(
        {
            "metadata": {"name": "team"},
            "spec": {
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "tas", "resources": [quota]}]}]
            },
        }
    )
    w.set_local_queue({"metadata": {"name": "q", "namespace": "default"}, "spec": {"clusterQueue": "team"}})
    for rack, n in racks.items():
        for i in range(n):
            w.node_event("ADDED", _node(f"{name}-{rack}-{i}", rack))
    w.health, w.synced = "Ready", True
    return w


def _workload(count: int, **annotations: str) -> PendingWorkload:
    template: Obj = {
        "metadata": {"annotations": annotations},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }
    ps = PodSetSpec.from_json({"name": "main", "count": count, "requests": {"cpu": "1"}, "template": template})
    n = next(_ids)
    return PendingWorkload(n, f"uid-{n}", "default", f"wl-{n}", "q", 0, float(n), 1, (ps,))


def test_a_required_rack_larger_than_every_free_rack_is_explained_in_racks() -> None:
    workers = [_tas_worker("worker-1", {"r1": 8, "r2": 2}), _tas_worker("worker-2", {"r1": 6, "r2": 6})]
    engine = PlacementEngine(Policy())
    d = engine.decide(_workload(8, **{REQUIRED: RACK}), workers)
    assert d.chosen is not None and d.chosen.cluster == "worker-1"
    assert d.chosen.topology == "pod set main: 8 pods in one rack"
    why = next(v.reason for v in d.verdicts if v.cluster == "worker-2")
    assert why.startswith(
        "ClusterQueue team: pod set main needs 8 pods in one rack; largest free rack on worker-2 holds 6"
    )
    assert 'topology "gpu-topology" allows to fit only 6 out of 8 pod(s)' in why


def test_pods_outside_tas_and_reservations_take_rack_capacity() -> None:
    w1 = _tas_worker("worker-1", {"r1": 4})
    engine = PlacementEngine(Policy())
    first = engine.decide(_workload(3, **{REQUIRED: RACK}), [w1])
    assert first.chosen is not None
    engine.reserve(first, {"worker-1": w1})
    # The reservation holds 3 of the rack's 4 nodes until the worker's Kueue admits the copy.
    second = engine.decide(_workload(2, **{REQUIRED: RACK}), [w1])
    assert second.chosen is None and "largest free rack on worker-1 holds 1" in second.verdicts[0].reason
    w1.release(first.workload.uid)
    # A pod outside TAS bound to a node takes it.
    w1.pod_event(
        "ADDED",
        {
            "metadata": {"name": "daemon", "namespace": "kube-system"},
            "spec": {
                "nodeName": "worker-1-r1-0",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
            "status": {"phase": "Running"},
        },
    )
    third = engine.decide(_workload(4, **{REQUIRED: RACK}), [w1])
    assert third.chosen is None and "holds 3" in third.verdicts[0].reason


def test_a_preferred_rack_scores_higher_where_the_pods_stay_in_one() -> None:
    spread = _tas_worker("worker-1", {"r1": 3, "r2": 3})
    compact = _tas_worker("worker-2", {"r1": 6})
    d = PlacementEngine(Policy()).decide(_workload(5, **{PREFERRED: RACK}), [spread, compact])
    assert d.chosen is not None and d.chosen.cluster == "worker-2"
    by_name = {v.cluster: v for v in d.verdicts}
    assert by_name["worker-1"].feasible and by_name["worker-1"].terms["topology"] == 0.5
    assert by_name["worker-1"].topology == "pod set main: 5 pods over 2 racks (preferred: one rack)"
    assert by_name["worker-2"].terms["topology"] == 1.0
    assert "its preferred topology domain holds every pod" in d.summary


def test_a_tas_flavor_without_its_topology_makes_the_cluster_queue_inactive() -> None:
    w = _tas_worker("worker-1", {"r1": 4}, topology=False)
    d = PlacementEngine(Policy()).decide(_workload(1, **{REQUIRED: RACK}), [w])
    assert d.chosen is None
    assert "no Topology 'gpu-topology' for TAS flavor tas (Kueue: TopologyNotFound)" in d.verdicts[0].reason


def test_pod_set_topology_requests_follow_kueues_annotations() -> None:
    assert topology_request({REQUIRED: RACK}) == TopologyRequest(required=RACK)
    assert topology_request({PREFERRED: RACK, "kueue.x-k8s.io/podset-group-name": "g"}) == TopologyRequest(
        preferred=RACK, group="g"
    )
    assert topology_request({"kueue.x-k8s.io/podset-unconstrained-topology": "true"}) == TopologyRequest(
        unconstrained=True
    )
    sliced = {
        REQUIRED: BLOCK,
        "kueue.x-k8s.io/podset-slice-required-topology": RACK,
        "kueue.x-k8s.io/podset-slice-size": "4",
    }
    assert topology_request(sliced) == TopologyRequest(required=BLOCK, slice_required=RACK, slice_size=4)
    assert topology_request({"other": "x"}) is None


# ---- fair sharing -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "want"),
    [
        (None, None),
        ({"apiVersion": "config.kueue.x-k8s.io/v1beta2"}, None),
        ({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "fairSharing": {}}, FairSharingConfig()),
        (
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]},
            },
            FairSharingConfig(("LessThanInitialShare",)),
        ),
        ({"apiVersion": "config.kueue.x-k8s.io/v1beta1", "fairSharing": {"enable": False}}, None),
        ({"apiVersion": "config.kueue.x-k8s.io/v1beta1", "fairSharing": {"enable": True}}, FairSharingConfig()),
        (
            {"fairSharing": {}, "featureGates": {"FairSharingPreemptWithinNominal": False}},
            FairSharingConfig(preempt_within_nominal=False),
        ),
    ],
)
def test_fair_sharing_is_read_from_kueues_configuration(config: Obj | None, want: FairSharingConfig | None) -> None:
    assert FairSharingConfig.from_config(config) == want


def _cq(name: str, cpu: str, weight: str | None = None, **preemption: str) -> Obj:
    spec: Obj = {
        "cohortName": "pool",
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
            }
        ],
    }
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    if preemption:
        spec["preemption"] = preemption
    return {"metadata": {"name": name}, "spec": spec}


def _admitted(name: str, cq: str, cpu: str) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"queueName": "q"},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}],
            "admission": {
                "clusterQueue": cq,
                "podSetAssignments": [
                    {"name": "main", "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": cpu}, "count": 1}
                ],
            },
        },
    }


def _fair_worker(name: str, *, weight: str, other_uses: str, fair: bool = True) -> WorkerCapacity:
    """ClusterQueue ``team`` (4 CPU, the given weight) and ``other`` (8 CPU, using ``other_uses``) share a cohort."""
    w = WorkerCapacity(name)
    if fair:
        w.set_kueue_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "fairSharing": {}})
    w.set_flavor({"metadata": {"name": "f"}, "spec": {}})
    w.set_cluster_queue(_cq("team", "4", weight, reclaimWithinCohort="Any", withinClusterQueue="LowerPriority"))
    w.set_cluster_queue(_cq("other", "8"))
    w.set_local_queue({"metadata": {"name": "q", "namespace": "default"}, "spec": {"clusterQueue": "team"}})
    w.node_event("ADDED", {"metadata": {"name": f"{name}-n"}, "spec": {}, "status": {"allocatable": {"cpu": "64"}}})
    if other_uses != "0":
        w.workload_event("ADDED", _admitted("busy", "other", other_uses))
    w.health, w.synced = "Ready", True
    return w


def _cpu_workload(cpu: str) -> PendingWorkload:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}
    ps = PodSetSpec.from_json({"name": "main", "count": 1, "requests": {"cpu": cpu}, "template": template})
    n = next(_ids)
    return PendingWorkload(n, f"uid-{n}", "default", f"wl-{n}", "q", 0, float(n), 1, (ps,))


def test_the_worker_where_the_queue_would_borrow_the_smaller_share_wins_under_fair_sharing() -> None:
    # Both must borrow 2 CPU beyond team's 4; team's weight 2 halves its share on worker-2.
    light = _fair_worker("worker-1", weight="1", other_uses="0")
    heavy = _fair_worker("worker-2", weight="2", other_uses="0")
    d = PlacementEngine(Policy()).decide(_cpu_workload("6"), [light, heavy])
    by_name = {v.cluster: v for v in d.verdicts}
    # 2 CPU borrowed of the 12 the cohort could lend: 166.7 per mille, weighted 1 or 2.
    assert by_name["worker-1"].fair_share == {"share": 167, "resource": "cpu", "weight": 1.0}
    assert by_name["worker-2"].fair_share == {"share": 84, "resource": "cpu", "weight": 2.0}
    assert d.chosen is not None and d.chosen.cluster == "worker-2"
    assert "lowest fair-sharing share after admission" in d.summary
    assert "dominant resource share becomes 84 (cpu, weight 2)" in d.summary


def test_fair_sharing_lets_the_queue_reclaim_while_borrowing_by_fair_preemption() -> None:
    # other borrows 4 beyond its 8; team (weight 2) wants 6: 2 beyond its own 4. Without fair sharing, Kueue's
    # classical reclaim needs the preemptor within nominal (and borrowWithinCohort is Never): no candidates.
    fair = _fair_worker("worker-1", weight="2", other_uses="12")
    classic = _fair_worker("worker-2", weight="2", other_uses="12", fair=False)
    d = PlacementEngine(Policy()).decide(_cpu_workload("6"), [fair, classic])
    by_name = {v.cluster: v for v in d.verdicts}
    assert by_name["worker-1"].feasible and by_name["worker-1"].preempts == 1
    assert by_name["worker-1"].preemption_reasons == "InCohortFairSharing: 1"
    assert not by_name["worker-2"].feasible
    assert d.chosen is not None and "its Kueue will preempt 1 workload(s) (InCohortFairSharing: 1)" in d.summary


def test_dispatcher_explain_shows_topology_fair_share_and_preemption_reasons() -> None:
    workers = [_tas_worker("worker-1", {"r1": 8, "r2": 2}), _tas_worker("worker-2", {"r1": 6, "r2": 6})]
    d = PlacementEngine(Policy()).decide(_workload(8, **{REQUIRED: RACK}), workers)
    rendered = "\n".join(render_decision(d.explanation()))
    assert "topology: pod set main: 8 pods in one rack" in rendered
    assert "pod set main needs 8 pods in one rack; largest free rack on worker-2 holds 6" in rendered

    fair = _fair_worker("worker-1", weight="2", other_uses="12")
    d = PlacementEngine(Policy()).decide(_cpu_workload("6"), [fair])
    rendered = "\n".join(render_decision(d.explanation()))
    assert "would preempt 1 (InCohortFairSharing: 1)" in rendered
    assert "fair share after admission" in rendered


def test_pods_matter_only_once_a_flavor_names_a_topology() -> None:
    """A Topology alone places nothing (no ClusterQueue can use it without a TAS flavor): the worker's pods are
    not watched for it; a flavor that names a Topology, present or missing, makes them count."""
    w = WorkerCapacity("w")
    levels = [{"nodeLabel": k} for k in (BLOCK, RACK, HOST)]
    w.set_topology({"metadata": {"name": "gpu-topology"}, "spec": {"levels": levels}})
    w.set_flavor({"metadata": {"name": "plain"}, "spec": {}})
    assert not w.uses_tas
    w.set_flavor({"metadata": {"name": "tas"}, "spec": {"topologyName": "other-topology"}})
    assert w.uses_tas
    assert _tas_worker("x", {"r1": 1}, topology=False).uses_tas
