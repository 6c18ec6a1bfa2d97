"""The engine's per-shape verdicts, ranking and re-validation decide exactly as an engine without any memory.

A long-lived :class:`PlacementEngine` keeps every worker's verdict per workload shape and looks again only at
the workers the change journal names (re-validating ``Fit`` verdicts cell by cell after reservations). A fresh
engine per decision evaluates everything. Random sequences of decisions, reservations, releases, admissions,
evictions, health and cordon changes, node changes, kinds and in-flight limits run against both; every decision
must be the same: the chosen worker, the summary, and every worker's verdict, reason and score.
"""

from __future__ import annotations

import itertools
import random
from datetime import datetime
from fractions import Fraction
from typing import Any

import pytest

from dispatcher.config import Policy
from dispatcher.placement.engine import Decision, PlacementEngine
from dispatcher.placement.gpu import WorkerGpus, sync_worker
from dispatcher.placement.gpufit import HamiFitter
from dispatcher.placement.hami.names import HANDSHAKE_ANNOTATION, REGISTER_ANNOTATION
from dispatcher.placement.hami.nodecodec import encode_node_devices, register_device
from dispatcher.placement.journal import JOURNAL
from dispatcher.placement.kueue.specs import Toleration
from dispatcher.placement.worker import WorkerCapacity, latency_term
from dispatcher.placement.workload import PendingWorkload, PodSetSpec

Obj = dict[str, Any]
NOW = datetime(2025, 6, 1, 12, 0, 0)
HAMI_KUEUE_CONFIG: Obj = {
    "resources": {
        "transformations": [
            {
                "input": "nvidia.com/gpumem",
                "strategy": "Replace",
                "multiplyBy": "nvidia.com/gpu",
                "outputs": {"nvidia.com/total-gpumem": "1"},
            }
        ]
    }
}


def _flavor(name: str, taint: bool = False, labels: Obj | None = None) -> Obj:
    spec: Obj = {"nodeLabels": labels or {}}
    if taint:
        spec["nodeTaints"] = [{"key": "spot", "value": "true", "effect": "NoSchedule"}]
    return {"metadata": {"name": name}, "spec": spec}


def _cpu_flavors(cpu: str, *, borrowing: str | None = None) -> Obj:
    cpu_quota: Obj = {"name": "cpu", "nominalQuota": cpu}
    if borrowing is not None:
        cpu_quota["borrowingLimit"] = borrowing
    return {
        "coveredResources": ["cpu"],
        "flavors": [
            {"name": "default-flavor", "resources": [cpu_quota]},
            {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": cpu}]},
        ],
    }


def _cluster_queue(
    name: str, cpu: str, *, cohort: str | None = None, gpus: int = 0, fungibility: Obj | None = None, **kw: str
) -> Obj:
    groups = [_cpu_flavors(cpu, **kw)]
    if gpus:
        groups.append(
            {
                "coveredResources": ["nvidia.com/gpu", "nvidia.com/total-gpumem"],
                "flavors": [
                    {
                        "name": "hami-vgpu",
                        "resources": [
                            {"name": "nvidia.com/gpu", "nominalQuota": str(gpus * 10)},
                            {"name": "nvidia.com/total-gpumem", "nominalQuota": str(gpus * 40960)},
                        ],
                    }
                ],
            }
        )
    spec: Obj = {"resourceGroups": groups, "preemption": {"withinClusterQueue": "LowerPriority"}}
    if cohort:
        spec["cohort"] = cohort
    if fungibility:
        spec["flavorFungibility"] = fungibility
    return {"metadata": {"name": name}, "spec": spec}


def _cpu_node(name: str, cpu: str = "16", spot: bool = False) -> Obj:
    spec: Obj = {"taints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}]} if spot else {}
    return {"metadata": {"name": name, "labels": {}}, "spec": spec, "status": {"allocatable": {"cpu": cpu}}}


def _gpu_node(name: str, gpus: int = 4) -> Obj:
    devices = [register_device(f"GPU-{name}-{i}", i, 40960, "A100-SXM4-40GB") for i in range(gpus)]
    return {
        "metadata": {
            "name": name,
            "labels": {"hami.io/vgpu": "true"},
            "annotations": {
                REGISTER_ANNOTATION: encode_node_devices(devices),
                HANDSHAKE_ANNOTATION: "Requesting_" + NOW.strftime("%Y-%m-%d %H:%M:%S"),
            },
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "32", "nvidia.com/gpu": str(gpus * 10)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _worker(name: str, *, gpu: bool, cohort: bool, weight: float = 1.0, labels: Obj | None = None) -> WorkerCapacity:
    w = WorkerCapacity(name, weight=weight, labels=labels, max_in_flight=12)
    # The zone label makes a node selector on zone rule out spot too (Kueue v0.17.0 reduces the selector to the
    # label keys of every flavor of the resource group).
    w.set_flavor(_flavor("default-flavor", labels={"zone": "a"}))
    w.set_flavor(_flavor("spot", taint=True))
    if gpu:
        w.set_flavor(_flavor("hami-vgpu", labels={"hami.io/vgpu": "true"}))
        w.set_kueue_config(HAMI_KUEUE_CONFIG)
    if cohort:
        w.set_cohort({"metadata": {"name": "pool"}, "spec": {}})
        w.set_cluster_queue(
            _cluster_queue("team", "12", cohort="pool", borrowing="8", fungibility={"whenCanBorrow": "TryNextFlavor"})
        )
        w.set_cluster_queue(_cluster_queue("other", "8", cohort="pool"))
    else:
        w.set_cluster_queue(_cluster_queue("team", "24", gpus=8 if gpu else 0))
    w.set_local_queue({"metadata": {"name": "user-queue", "namespace": "default"}, "spec": {"clusterQueue": "team"}})
    nodes = [_cpu_node(f"{name}-cpu"), _cpu_node(f"{name}-spot", spot=True)]
    if gpu:
        nodes += [_gpu_node(f"{name}-gpu-1"), _gpu_node(f"{name}-gpu-2")]
    gpus = WorkerGpus(clock=lambda: NOW)
    for n in nodes:
        w.node_event("ADDED", n)
        sync_worker(w, gpus, gpus.node_event("ADDED", n))
    w.health = "Ready"
    w.synced = True
    return w


def _template(gpu: int = 0, mem: int | None = None) -> Obj:
    limits = {}
    if gpu:
        limits["nvidia.com/gpu"] = str(gpu)
        if mem is not None:
            limits["nvidia.com/gpumem"] = str(mem)
    return {"spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]}}


def _pod_set(
    name: str, count: int, cpu: str, *, gpu: int = 0, mem: int | None = None, spot: bool = False, zone: str = ""
) -> PodSetSpec:
    requests = {"cpu": Fraction(cpu)}
    if gpu:
        requests["nvidia.com/gpu"] = Fraction(gpu)
        if mem is not None:
            requests["nvidia.com/gpumem"] = Fraction(mem)
    tolerations = (Toleration(key="spot", operator="Equal", value="true", effect="NoSchedule"),) if spot else ()
    node_selector = {"zone": zone} if zone else {}
    return PodSetSpec(
        name, count, requests, node_selector=node_selector, tolerations=tolerations, template=_template(gpu, mem)
    )


SHAPES: list[tuple[PodSetSpec, ...]] = [
    (_pod_set("main", 1, "1"),),
    (_pod_set("main", 1, "3"),),
    (_pod_set("main", 2, "1", spot=True),),
    (_pod_set("main", 1, "1", gpu=1),),
    (_pod_set("main", 1, "1", gpu=1, mem=12000),),
    (_pod_set("main", 2, "1", gpu=1, mem=30000),),
    (_pod_set("driver", 1, "1"), _pod_set("workers", 2, "2")),
    (_pod_set("main", 1, "2", spot=True, zone="a"),),
    (_pod_set("main", 1, "1", zone="b"),),
]
_ids = itertools.count(1)


def _workload(rng: random.Random) -> PendingWorkload:
    n = next(_ids)
    roll = rng.random()
    return PendingWorkload(
        id=n,
        uid=f"uid-{n}",
        namespace="default",
        name=f"wl-{n}",
        queue="user-queue",
        priority=rng.choice([0, 0, 0, 10]),
        created=float(n),
        generation=1,
        pod_sets=rng.choice(SHAPES),
        selector={"region": "eu"} if roll < 0.08 else None,
        excluded=frozenset({"gpu-b"}) if 0.08 <= roll < 0.16 else frozenset(),
        kind="JobSet" if 0.16 <= roll < 0.24 else "",
    )


def _admitted(name: str, cpu: int, priority: int = 0) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default", "ownerReferences": [{"uid": name, "controller": True}]},
        "spec": {"queueName": "user-queue", "priority": priority},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {
                "clusterQueue": "team",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"cpu": "default-flavor"},
                        "resourceUsage": {"cpu": str(cpu)},
                        "count": 1,
                    }
                ],
            },
        },
    }


def _snapshot(d: Decision) -> tuple[Any, ...]:
    return (
        d.chosen.cluster if d.chosen else None,
        d.summary,
        [
            (v.cluster, v.feasible, v.reason, round(v.score, 12) if v.feasible else None, v.flavors, v.preempts)
            for v in d.verdicts
        ],
    )


@pytest.mark.parametrize("seed", range(12))
def test_incremental_decisions_equal_fresh_evaluation(seed: int) -> None:
    rng = random.Random(seed)
    side = random.Random(-seed)  # its own stream, so the other steps' draws stay as they were
    workers = [
        _worker("cpu-a", gpu=False, cohort=True),
        _worker("gpu-b", gpu=True, cohort=False),
        _worker("gpu-c", gpu=True, cohort=False),
        _worker("cpu-d", gpu=False, cohort=False, weight=2.0, labels={"region": "eu"}),
    ]
    by_name = {w.name: w for w in workers}
    policy = Policy()
    engine = PlacementEngine(policy, HamiFitter())
    held: list[tuple[str, str]] = []
    admitted: list[tuple[str, str]] = []
    kinds = {"decided": 0, "placed": 0, "revalidated": 0}
    for step in range(400):
        roll = rng.random()
        w = rng.choice(workers)
        if roll < 0.7:
            wl = _workload(rng)
            got = engine.decide(wl, workers)
            want = PlacementEngine(policy, HamiFitter()).decide(wl, workers)
            assert _snapshot(got) == _snapshot(want), f"seed {seed} step {step}"
            kinds["decided"] += 1
            if got.chosen is not None and rng.random() < 0.8:
                engine.reserve(got, by_name)
                held.append((got.chosen.cluster, wl.uid))
                kinds["placed"] += 1
        elif roll < 0.78 and held:
            cluster, uid = held.pop(rng.randrange(len(held)))
            by_name[cluster].release(uid)
        elif roll < 0.82 and held:
            cluster, uid = rng.choice(held)
            by_name[cluster].settle(uid)
        elif roll < 0.88:
            name = f"adm-{step}"
            w.workload_event("ADDED", _admitted(name, rng.choice([1, 2, 3]), priority=rng.choice([0, 5])))
            admitted.append((w.name, name))
        elif roll < 0.92 and admitted:
            cluster, name = admitted.pop(rng.randrange(len(admitted)))
            by_name[cluster].workload_event("DELETED", _admitted(name, 1))
        elif roll < 0.95:
            if rng.random() < 0.5:
                w.health = "Suspect" if w.health == "Ready" else "Ready"
            else:
                w.cordoned = not w.cordoned
            if side.random() < 0.6:  # the client's latency estimate moves: scores change, assignments do not
                side.choice(workers).latency = side.choice([0.0, 0.004, 0.05, 0.3])
        elif roll < 0.98:
            w.node_event("MODIFIED", _cpu_node(f"{w.name}-cpu", cpu=rng.choice(["2", "16"])))
        else:
            if "JobSet" in w.unserved_kinds:
                w.unserved_kinds.discard("JobSet")
            else:
                w.unserved_kinds.add("JobSet")
            w.touch()
    kinds["revalidated"] = engine.revalidations
    # The run exercised what it is about: placements, and Fit verdicts re-validated rather than evaluated.
    assert kinds["placed"] > 25 and kinds["revalidated"] > 8, kinds


def test_a_latency_that_moves_its_term_rescores_the_worker_and_jitter_does_not() -> None:
    """The runtime sets each worker's latency from its client before every placement round. A cached verdict must
    not keep a latency the worker no longer has (it did: the setting was no change), and a jitter too small to move
    the term must not throw every verdict of the worker away."""
    workers = [_worker("cpu-a", gpu=False, cohort=False), _worker("cpu-d", gpu=False, cohort=False)]
    engine = PlacementEngine(Policy(), None)
    wl = _workload(random.Random(1))
    wl.selector, wl.excluded, wl.kind = None, frozenset(), ""
    wl.pod_sets = SHAPES[0]
    first = engine.decide(wl, workers)
    assert first.chosen is not None and first.chosen.cluster == "cpu-a"  # a tie on score, first by name
    a = workers[0]
    version = a.version
    a.latency = 0.001  # moves the term by 0.0099
    assert (a.version, a.latency) == (version, 0.0)
    a.latency = 0.05
    assert a.version > version and a.base_version < a.version and a.latency == 0.05
    evaluations = engine.evaluations
    again = engine.decide(wl, workers)
    mine = next(v for v in again.verdicts if v.cluster == "cpu-a")
    assert mine.terms["latency"] == latency_term(0.05) < 1.0
    assert again.chosen is not None and again.chosen.cluster == "cpu-d"
    assert engine.evaluations == evaluations  # scored again, not assigned again


def test_a_journal_that_dropped_entries_makes_the_engine_look_at_every_worker() -> None:
    workers = [_worker("cpu-a", gpu=False, cohort=False), _worker("cpu-d", gpu=False, cohort=False)]
    engine = PlacementEngine(Policy(), None)
    rng = random.Random(1)
    wl = _workload(rng)
    wl.selector, wl.excluded, wl.kind = None, frozenset(), ""
    wl.pod_sets = SHAPES[1]
    first = engine.decide(wl, workers)
    assert first.chosen is not None
    first_seen = JOURNAL.seq
    limit, JOURNAL.limit = JOURNAL.limit, 8
    others = [_worker(f"other-{i}", gpu=False, cohort=False) for i in range(12)]
    try:
        for w in others:
            w.touch()
        workers[0].cordoned = True
        cordoned_at = workers[0].version
        for w in others:  # twelve workers changed since: the journal keeps eight, cpu-a's change is dropped
            w.touch()
        assert JOURNAL.start >= cordoned_at and JOURNAL.changed_since(first_seen) is None
        again = engine.decide(wl, workers)
    finally:
        JOURNAL.limit = limit
    assert again.chosen is not None and again.chosen.cluster == "cpu-d"
    assert "cordoned" in next(v.reason for v in again.verdicts if v.cluster == "cpu-a")


def test_the_engine_keeps_a_bounded_number_of_shapes_and_decides_the_same_after_eviction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dispatcher.placement.engine as engine_module

    monkeypatch.setattr(engine_module, "CACHED_VERDICTS", 40)  # 2 workers: at most 20 shapes (16 at the least)
    workers = [_worker("cpu-a", gpu=False, cohort=False), _worker("cpu-d", gpu=False, cohort=False)]
    engine = PlacementEngine(Policy(), None)
    rng = random.Random(3)
    for cpu in [*range(1, 40), *range(1, 40)]:  # 39 distinct shapes, each decided twice
        wl = _workload(rng)
        wl.selector, wl.excluded, wl.kind = None, frozenset(), ""
        wl.pod_sets = (_pod_set("main", 1, f"{cpu}/10"),)
        assert _snapshot(engine.decide(wl, workers)) == _snapshot(PlacementEngine(Policy(), None).decide(wl, workers))
        assert len(engine._cache) <= 20


# ---- fair sharing and topology aware scheduling ---------------------------------------------------------------

BLOCK, RACK, HOST = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"


def _tas_node(worker: str, rack: str, i: int, cpu: str = "4") -> Obj:
    name = f"{worker}-{rack}-{i}"
    return {
        "metadata": {"name": name, "labels": {BLOCK: "b1", RACK: rack, HOST: name, "tas": "true"}},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _tas_worker(name: str) -> WorkerCapacity:
    """A worker whose ClusterQueue uses a TAS flavor over two racks of 3 nodes (4 CPU each)."""
    w = WorkerCapacity(name, max_in_flight=12)
    w.set_topology(
        {"metadata": {"name": "default"}, "spec": {"levels": [{"nodeLabel": k} for k in (BLOCK, RACK, HOST)]}}
    )
    w.set_flavor({"metadata": {"name": "tas"}, "spec": {"nodeLabels": {"tas": "true"}, "topologyName": "default"}})
    w.set_cluster_queue(
        {
            "metadata": {"name": "team"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "tas", "resources": [{"name": "cpu", "nominalQuota": "40"}]}],
                    }
                ],
                "preemption": {"withinClusterQueue": "LowerPriority"},
            },
        }
    )
    w.set_local_queue({"metadata": {"name": "user-queue", "namespace": "default"}, "spec": {"clusterQueue": "team"}})
    for rack in ("r1", "r2"):
        for i in (1, 2, 3):
            w.node_event("ADDED", _tas_node(name, rack, i))
    w.health = "Ready"
    w.synced = True
    return w


def _fair_worker(name: str) -> WorkerCapacity:
    """A worker with fair sharing on: ClusterQueue team (weight 2) and other share a cohort."""
    w = WorkerCapacity(name, max_in_flight=12)
    w.set_kueue_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "fairSharing": {}})
    w.set_flavor(_flavor("default-flavor", labels={"zone": "a"}))
    w.set_flavor(_flavor("spot", taint=True))
    w.set_cohort({"metadata": {"name": "pool"}, "spec": {}})
    team = _cluster_queue("team", "6", cohort="pool")
    team["spec"]["fairSharing"] = {"weight": "2"}
    team["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    w.set_cluster_queue(team)
    w.set_cluster_queue(_cluster_queue("other", "10", cohort="pool"))
    w.set_local_queue({"metadata": {"name": "user-queue", "namespace": "default"}, "spec": {"clusterQueue": "team"}})
    for n in (_cpu_node(f"{name}-cpu"), _cpu_node(f"{name}-spot", spot=True)):
        w.node_event("ADDED", n)
    w.health = "Ready"
    w.synced = True
    return w


def _tas_pod_set(count: int, cpu: str, **annotations: str) -> PodSetSpec:
    keys = {
        "required": "kueue.x-k8s.io/podset-required-topology",
        "preferred": "kueue.x-k8s.io/podset-preferred-topology",
        "unconstrained": "kueue.x-k8s.io/podset-unconstrained-topology",
    }
    template: Obj = {
        "metadata": {"annotations": {keys[k]: v for k, v in annotations.items()}},
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}]},
    }
    return PodSetSpec.from_json({"name": "main", "count": count, "requests": {"cpu": cpu}, "template": template})


TAS_SHAPES: list[tuple[PodSetSpec, ...]] = [
    (_tas_pod_set(4, "2", required=RACK),),
    (_tas_pod_set(6, "2", required=RACK),),
    (_tas_pod_set(5, "2", preferred=RACK),),
    (_tas_pod_set(3, "1", unconstrained="true"),),
    (_tas_pod_set(2, "3", required=HOST),),
    (_pod_set("main", 2, "2"),),
    (_pod_set("main", 3, "3", spot=True),),
]


def _tas_admitted(name: str, worker: str, rack: str, count: int, cpu: int) -> Obj:
    wl = _admitted(name, cpu * count)
    psa = wl["status"]["admission"]["podSetAssignments"][0]
    psa["flavors"] = {"cpu": "tas"}
    psa["count"] = count
    psa["topologyAssignment"] = {
        "levels": [HOST],
        "slices": [
            {
                "domainCount": 1,
                "valuesPerLevel": [{"universal": f"{worker}-{rack}-1"}],
                "podCounts": {"universal": count},
            }
        ],
    }
    return wl


def _pod(name: str, node: str, cpu: str) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running"},
    }


def _snapshot_depth(d: Decision) -> tuple[Any, ...]:
    return (
        *_snapshot(d),
        [(v.cluster, v.topology, v.fair_share, v.preemption_reasons, sorted(v.terms.items())) for v in d.verdicts],
    )


@pytest.mark.parametrize("seed", range(8))
def test_decisions_with_fair_sharing_and_tas_equal_fresh_evaluation(seed: int) -> None:
    rng = random.Random(1000 + seed)
    workers = [
        _tas_worker("tas-e"),
        _tas_worker("tas-g"),
        _fair_worker("fair-f"),
        _worker("cpu-d", gpu=False, cohort=False),
    ]
    by_name = {w.name: w for w in workers}
    policy = Policy()
    engine = PlacementEngine(policy, None)
    held: list[tuple[str, str]] = []
    admitted: list[tuple[str, str]] = []
    stats = {"tas": 0, "fair": 0, "placed": 0}
    for step in range(300):
        roll = rng.random()
        w = rng.choice(workers)
        if roll < 0.65:
            wl = _workload(rng)
            wl.selector, wl.excluded, wl.kind = None, frozenset(), ""
            wl.pod_sets = rng.choice(TAS_SHAPES)
            got = engine.decide(wl, workers)
            want = PlacementEngine(policy, None).decide(wl, workers)
            assert _snapshot_depth(got) == _snapshot_depth(want), f"seed {seed} step {step}"
            stats["tas"] += any(v.topology for v in got.verdicts)
            stats["fair"] += any(v.fair_share for v in got.verdicts)
            if got.chosen is not None and rng.random() < 0.8:
                engine.reserve(got, by_name)
                held.append((got.chosen.cluster, wl.uid))
                stats["placed"] += 1
        elif roll < 0.73 and held:
            cluster, uid = held.pop(rng.randrange(len(held)))
            by_name[cluster].release(uid)
        elif roll < 0.77 and held:
            cluster, uid = rng.choice(held)
            by_name[cluster].settle(uid)
        elif roll < 0.84:
            name = f"adm-{step}"
            if w.name.startswith("tas"):
                w.workload_event("ADDED", _tas_admitted(name, w.name, rng.choice(["r1", "r2"]), 2, 1))
            else:
                w.workload_event("ADDED", _admitted(name, rng.choice([1, 2, 3]), priority=rng.choice([0, 5])))
            admitted.append((w.name, name))
        elif roll < 0.88 and admitted:
            cluster, name = admitted.pop(rng.randrange(len(admitted)))
            by_name[cluster].workload_event("DELETED", _admitted(name, 1))
        elif roll < 0.94 and w.name.startswith("tas"):
            pod = _pod(
                f"p-{step}", f"{w.name}-{rng.choice(['r1', 'r2'])}-{rng.choice([1, 2, 3])}", rng.choice(["1", "3"])
            )
            w.pod_event("ADDED" if rng.random() < 0.7 else "DELETED", pod)
        elif roll < 0.97 and w.name.startswith("tas"):
            w.node_event("MODIFIED", _tas_node(w.name, "r1", 2, cpu=rng.choice(["1", "4", "8"])))
        else:
            w.cordoned = not w.cordoned
    assert stats["tas"] > 8 and stats["fair"] > 8 and stats["placed"] > 20, stats
