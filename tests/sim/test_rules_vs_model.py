"""Two independent readings of Kueue and HAMi, compared: the simulator's own rules (kubesim/kueue and
kubesim/hami) and the product's placement model (dispatcher/placement), on seeded random cases.

Neither is the truth (the differential tests against a real Kueue are); a disagreement here means one of them
misreads the source, and is decided by reading it. The cases include flavors with and without node labels and pod
sets selecting them (the selector is reduced to the label keys of the whole resource group in v0.17.0),
``PreemptionOverBorrowing`` (where "no candidates" is not ranked apart in v0.17), pending Workloads with
reclaimable pods (partial admission reduces the spec counts) and resource transformations of fractional and
``multiplyBy`` inputs, which the two once read differently. Pending messages are not compared: a flavor stops at its
first resource that does not fit, which Kueue v0.17 meets in Go's map order; each reading picks its own order.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction
from typing import Any

import pytest

from dispatcher import resources as model_resources
from dispatcher.placement.hami import devices as model_devices
from dispatcher.placement.hami import fit as model_fit
from dispatcher.placement.hami import names as model_names
from dispatcher.placement.hami import webhook as model_webhook
from dispatcher.placement.kueue import assignment as model_assignment
from dispatcher.placement.kueue import flavors as model_flavors
from dispatcher.placement.kueue import preemption as model_preemption
from dispatcher.placement.kueue import specs as model_specs
from dispatcher.placement.kueue import tree as model_tree
from dispatcher.placement.kueue import workloads as model_workloads
from dispatcher.placement.partial import partial_counts
from dispatcher.quantity import kueue_value, parse_quantity
from kubesim.hami import config as hami_config
from kubesim.hami import devices as hami_devices
from kubesim.hami import fit as hami_fit
from kubesim.hami import requests as hami_requests
from kubesim.kueue import quota as sim_quota
from kubesim.kueue import requests as sim_requests
from kubesim.kueue import specs as sim_specs
from kubesim.kueue.admission import decide
from kubesim.kueue.flavors import Mode

Obj = dict[str, Any]
Admitted = tuple[str, str, dict[tuple[str, str], int], int, float]
POLICIES = ["Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"]


def _quota(resource: str, nominal: object, borrowing: object = None, lending: object = None) -> Obj:
    q: Obj = {"name": resource, "nominalQuota": str(nominal)}
    if borrowing is not None:
        q["borrowingLimit"] = str(borrowing)
    if lending is not None:
        q["lendingLimit"] = str(lending)
    return q


def _kueue_case(rng: random.Random) -> tuple[list[Obj], list[Obj], list[Obj], list[Admitted], Obj, str, int]:
    """ClusterQueues (cpu/memory, maybe a GPU group and pods) in one Cohort or a small hierarchy, admitted Workloads
    and a pending one (maybe with node selectors, and reclaimable pods)."""
    hierarchical = rng.random() < 0.3
    cohorts: list[Obj] = []
    if hierarchical:
        for name, parent in (("root", None), ("left", "root")):
            spec: Obj = {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {"name": "on-demand", "resources": [_quota("cpu", rng.choice([0, 2])), _quota("memory", 0)]}
                        ],
                    }
                ]
            }
            if parent:
                spec["parentName"] = parent
            cohorts.append({"metadata": {"name": name}, "spec": spec})
    cqs = []
    for i, name in enumerate(["a", "b", "c"][: rng.choice([2, 3])]):
        flavors = ["on-demand", "spot"][: rng.choice([1, 2])]
        groups: list[Obj] = [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": f,
                        "resources": [
                            _quota("cpu", rng.choice([0, 2, 4]), rng.choice([None, None, 0, 2]), rng.choice([None, 1])),
                            _quota("memory", rng.choice(["0", "4Gi", "8Gi"])),
                        ],
                    }
                    for f in flavors
                ],
            }
        ]
        if rng.random() < 0.5:
            groups.append(
                {
                    "coveredResources": ["example.com/gpu"],
                    "flavors": [
                        {"name": g, "resources": [_quota("example.com/gpu", rng.choice([0, 1, 2]))]}
                        for g in ["g1", "g2"][: rng.choice([1, 2])]
                    ],
                }
            )
        if rng.random() < 0.15:
            groups.append({"coveredResources": ["pods"], "flavors": [{"name": "p", "resources": [_quota("pods", 4)]}]})
        spec = {
            "namespaceSelector": {},
            "resourceGroups": groups,
            "cohortName": ("left" if i < 2 else "root") if hierarchical else "co",
            "preemption": {"withinClusterQueue": rng.choice(POLICIES[:3]), "reclaimWithinCohort": rng.choice(POLICIES)},
        }
        if rng.random() < 0.3:
            spec["preemption"]["borrowWithinCohort"] = {"policy": "LowerPriority"}
            if rng.random() < 0.5:
                spec["preemption"]["borrowWithinCohort"]["maxPriorityThreshold"] = rng.choice([0, 100])
        if rng.random() < 0.5:
            spec["flavorFungibility"] = {
                "whenCanBorrow": rng.choice(["MayStopSearch", "TryNextFlavor"]),
                "whenCanPreempt": rng.choice(["MayStopSearch", "TryNextFlavor"]),
            }
            preference = rng.choice([None, "PreemptionOverBorrowing", "BorrowingOverPreemption"])
            if preference is not None:
                spec["flavorFungibility"]["preference"] = preference
        cqs.append({"metadata": {"name": name}, "spec": spec})
    taint = rng.random() < 0.3
    zones = rng.choice([{}, {"on-demand": "a"}, {"spot": "b"}, {"on-demand": "a", "spot": "b"}])
    flavors = []
    for f in ("on-demand", "spot", "g1", "g2", "p"):
        fspec: Obj = {}
        if f == "spot" and taint:
            fspec["nodeTaints"] = [{"key": "spot", "effect": "NoSchedule"}]
        if f in zones:
            fspec["nodeLabels"] = {"zone": zones[f]}
        flavors.append({"metadata": {"name": f}, "spec": fspec})
    admitted: list[Admitted] = []
    for j in range(rng.randint(0, 6)):
        usage = {(rng.choice(["on-demand", "spot"]), "cpu"): rng.choice([1000, 2000]), ("on-demand", "memory"): 0}
        if rng.random() < 0.3:
            usage[("g1", "example.com/gpu")] = 1
        admitted.append((f"ns/w{j}", rng.choice(cqs)["metadata"]["name"], usage, rng.choice([0, 100, 200]), 100.0 + j))
    pod_sets = []
    reclaimable = []
    for k in range(rng.choice([1, 1, 2])):
        req = {"cpu": rng.choice(["500m", "1", "2"])}
        if rng.random() < 0.5:
            req["memory"] = rng.choice(["1Gi", "3Gi"])
        if rng.random() < 0.3:
            req["example.com/gpu"] = "1"
        count = rng.choice([1, 2, 3])
        ps: Obj = {
            "name": f"ps{k}",
            "count": count,
            "template": {"spec": {"containers": [{"resources": {"requests": req}}]}},
        }
        if rng.random() < 0.3:
            ps["template"]["spec"]["tolerations"] = [{"key": "spot", "operator": "Exists"}]
        r = rng.random()
        if r < 0.15:
            ps["template"]["spec"]["nodeSelector"] = {"zone": rng.choice(["a", "b"])}
        elif r < 0.25:
            op = rng.choice(["In", "NotIn"])
            term = [{"key": "zone", "operator": op, "values": [rng.choice(["a", "b"])]}]
            ps["template"]["spec"]["affinity"] = {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": term}
                ]}}
            }  # fmt: skip
        if count > 1 and rng.random() < 0.3:
            ps["minCount"] = 1
        if rng.random() < 0.1:
            ps["topologyRequest"] = {"podSetGroupName": "group"}
        if rng.random() < 0.15:
            reclaimable.append({"name": f"ps{k}", "count": rng.randint(1, count)})
        pod_sets.append(ps)
    workload: Obj = {"spec": {"podSets": pod_sets}}
    if reclaimable:
        workload["status"] = {"reclaimablePods": reclaimable}
    return (
        cqs,
        cohorts,
        flavors,
        admitted,
        workload,
        rng.choice([c["metadata"]["name"] for c in cqs]),
        rng.choice([0, 100, 200]),
    )


def _by_model(
    cqs: list[Obj],
    cohorts: list[Obj],
    flavors: list[Obj],
    admitted: list[Admitted],
    workload: Obj,
    cq: str,
    prio: int,
) -> tuple[Any, ...]:
    tree = model_tree.QuotaTree(
        [model_specs.ClusterQueueSpec.from_object(c) for c in cqs],
        [model_specs.CohortSpec.from_object(c) for c in cohorts],
    )
    for key, name, usage, priority, ts in admitted:
        tree.add_workload(model_workloads.AdmittedWorkload(key, name, dict(usage), priority, ts, ts + 1, False, key))
    specs = {f["metadata"]["name"]: model_specs.ResourceFlavorSpec.from_object(f) for f in flavors}
    requests = model_workloads.workload_pod_sets(workload)
    kw: Any = {"priority": prio, "queue_order_time": 500.0, "now": 5000.0}
    assignment = model_flavors.assign_flavors(tree, cq, requests, specs, **kw)
    targets: list[model_preemption.PreemptionTarget] = []
    if assignment.mode is not model_assignment.FlavorAssignmentMode.FIT:
        if assignment.mode is model_assignment.FlavorAssignmentMode.PREEMPT:
            targets = model_assignment.preemption_targets(tree, assignment, **kw)
        if not targets:
            partial = partial_counts(tree, cq, requests, specs, **kw)
            if partial is not None:
                assignment, targets = partial.assignment, partial.targets
    modes = model_assignment.FlavorAssignmentMode
    mode = {modes.FIT: "Fit", modes.PREEMPT: "Preempt"}.get(assignment.mode, "NoFit")
    return (
        mode,
        [{r: a.flavor for r, a in p.flavors.items()} for p in assignment.pod_sets],
        [p.count for p in assignment.pod_sets],
        assignment.borrowing,
        sorted((t.workload.key, t.reason) for t in targets),
    )


def _by_simulator(
    cqs: list[Obj],
    cohorts: list[Obj],
    flavors: list[Obj],
    admitted: list[Admitted],
    workload: Obj,
    cq: str,
    prio: int,
) -> tuple[Any, ...]:
    tree = sim_quota.QuotaTree()
    for c in cohorts:
        tree.set_cohort(sim_specs.CohortSpec.from_object(c))
    specs = {}
    for c in cqs:
        spec = sim_specs.ClusterQueueSpec.from_object(c)
        specs[spec.name] = spec
        tree.set_cluster_queue(spec)
    for key, name, usage, priority, ts in admitted:
        tree.add_workload(
            sim_quota.AdmittedWorkload(key, name, dict(usage), frozenset(usage), priority, ts, ts + 1, uid=key)
        )
    flavor_specs = {f["metadata"]["name"]: sim_specs.FlavorSpec.from_object(f) for f in flavors}
    requests = sim_requests.workload_pod_sets(workload)
    d = decide(tree, specs[cq], requests, flavor_specs, priority=prio, timestamp=500.0, now=5000.0)
    a = d.assignment
    return (
        {Mode.FIT: "Fit", Mode.PREEMPT: "Preempt", Mode.NO_FIT: "NoFit"}[a.mode],
        [{r: c.flavor for r, c in p.flavors.items()} for p in a.pod_sets],
        [p.count for p in a.pod_sets],
        a.borrowing,
        sorted((t.workload.key, t.reason) for t in d.targets),
    )


@pytest.mark.parametrize("seed", [1, 2])
def test_kueue_admission_decisions_agree(seed: int) -> None:
    rng = random.Random(seed)
    for i in range(300):
        case = _kueue_case(rng)
        assert _by_simulator(*case) == _by_model(*case), f"case {i}: {json.dumps(case, default=str)}"


def _hami_case(rng: random.Random) -> tuple[dict[str, list[Obj]], dict[str, dict[str, str]], Obj]:
    nodes: dict[str, list[Obj]] = {}
    annotations: dict[str, dict[str, str]] = {}
    for n in range(rng.randint(1, 3)):
        count = rng.choice([1, 2, 4, 8])
        devices = []
        for i in range(count):
            d = {
                "id": f"GPU-{n}-{i}",
                "index": i,
                "count": rng.choice([2, 10]),
                "devmem": rng.choice([16384, 40960]),
                "type": rng.choice(["NVIDIA-A100", "NVIDIA-T4"]),
                "numa": i // max(1, count // 2),
                "health": rng.random() > 0.05,
                "used": 0,
                "usedmem": 0,
                "usedcores": 0,
            }
            for _ in range(rng.choice([0, 0, 1, 2])):
                mem, cores = rng.choice([1000, 4000, 10000]), rng.choice([0, 20, 50])
                if d["used"] < d["count"] and d["usedmem"] + mem <= d["devmem"] and d["usedcores"] + cores <= 100:
                    d["used"], d["usedmem"], d["usedcores"] = d["used"] + 1, d["usedmem"] + mem, d["usedcores"] + cores
            devices.append(d)
        nodes[f"n{n}"] = devices
        ann: dict[str, str] = {}
        if rng.random() < 0.2:
            ann[hami_config.CORDON_ANNOTATION] = devices[0]["id"]
        if count > 1 and rng.random() < 0.3:
            ann[hami_config.PAIR_SCORE_ANNOTATION] = json.dumps(
                [
                    {"uuid": d["id"], "score": {o["id"]: rng.choice([10, 100, 200]) for o in devices if o is not d}}
                    for d in devices
                ]
            )
        annotations[f"n{n}"] = ann

    def container(i: int) -> Obj:
        limits = {"nvidia.com/gpu": str(rng.choice([1, 1, 2, 3]))} if rng.random() < 0.9 else {}
        r = rng.random()
        if r < 0.5:
            limits["nvidia.com/gpumem"] = str(rng.choice([1000, 3000, 8000, 20000]))
        elif r < 0.7:
            limits["nvidia.com/gpumem-percentage"] = str(rng.choice([10, 50, 100]))
        if rng.random() < 0.5:
            limits["nvidia.com/gpucores"] = str(rng.choice([0, 10, 30, 100]))
        return {"name": f"c{i}", "resources": {"limits": limits}}

    spec: Obj = {"containers": [container(i) for i in range(rng.choice([1, 1, 2]))]}
    if rng.random() < 0.2:
        spec["initContainers"] = [container(9)]
    pod_annotations: dict[str, str] = {}
    if rng.random() < 0.4:
        pod_annotations[hami_config.GPU_POLICY_ANNOTATION] = rng.choice(
            ["binpack", "spread", "mutex", "topology-aware", "binpack,numa", "numa", "spread,numa"]
        )
    if rng.random() < 0.2:
        pod_annotations[hami_config.NODE_POLICY_ANNOTATION] = rng.choice(["spread", "binpack"])
    if rng.random() < 0.2:
        pod_annotations[hami_config.NUMA_BIND_ANNOTATION] = "true"
    if rng.random() < 0.15:
        pod_annotations["nvidia.com/use-gputype"] = rng.choice(["a100", "T4", "a100,t4"])
    if rng.random() < 0.1:
        pod_annotations[hami_config.SCORING_WEIGHTS_ANNOTATION] = rng.choice(
            ["slot=1,core=0,memory=3", "slot=0,core=0,memory=0"]
        )
    return nodes, annotations, {"metadata": {"name": "p", "annotations": pod_annotations}, "spec": spec}


def _hami_by_model(nodes: dict[str, list[Obj]], annotations: dict[str, dict[str, str]], pod: Obj) -> tuple[Any, ...]:
    mutated = model_webhook.mutate_pod(pod)
    usage = {
        n: [
            model_devices.DeviceUsage(
                model_devices.DeviceInfo(
                    d["id"], d["index"], d["count"], d["devmem"], 100, d["type"], d["numa"], d["health"], "hami-core"
                ),
                d["used"],
                d["usedmem"],
                d["usedcores"],
            )
            for d in devices
        ]
        for n, devices in nodes.items()
    }
    try:
        result = model_fit.schedule_pod(usage, mutated, node_annotations=annotations)
    except model_names.HamiSchedulingError as err:
        return ("error", str(err))
    if result.passthrough:
        return ("passthrough",)
    fit = (
        None if result.fit is None else [[(d.uuid, d.usedmem, d.usedcores) for d in c] for c in result.fit.hami_devices]
    )
    return (mutated["spec"], result.node, fit, dict(result.failed_nodes))


def _hami_by_simulator(
    nodes: dict[str, list[Obj]], annotations: dict[str, dict[str, str]], pod: Obj
) -> tuple[Any, ...]:
    mutated = hami_requests.mutate_pod(pod)
    if not hami_requests.is_hami_request(mutated["spec"]):
        return ("passthrough",)
    usage = {
        n: [
            hami_devices.DeviceUsage(
                hami_devices.DeviceInfo(
                    d["id"], d["index"], d["count"], d["devmem"], 100, d["type"], d["numa"], d["health"], "hami-core"
                ),
                d["used"],
                d["usedmem"],
                d["usedcores"],
                d["health"],
            )
            for d in devices
        ]
        for n, devices in nodes.items()
    }
    scores = {
        n: hami_devices.decode_pair_scores(a[hami_config.PAIR_SCORE_ANNOTATION])
        for n, a in annotations.items()
        if hami_config.PAIR_SCORE_ANNOTATION in a
    }
    try:
        result = hami_fit.schedule_pod(usage, mutated, node_annotations=annotations, pair_scores=scores)
    except hami_config.HamiSchedulingError as err:
        return ("error", str(err))
    fit = None if result.fit is None else [[(d.uuid, d.usedmem, d.usedcores) for d in c] for c in result.fit.devices]
    return (mutated["spec"], result.node, fit, dict(result.failed))


@pytest.mark.parametrize("seed", [1, 2])
def test_hami_filter_decisions_agree(seed: int) -> None:
    rng = random.Random(seed)
    for i in range(300):
        case = _hami_case(rng)
        assert _hami_by_simulator(*case) == _hami_by_model(*case), f"case {i}: {json.dumps(case)}"


def _transformation_case(rng: random.Random) -> tuple[dict[str, Fraction], list[Obj], tuple[str, ...]]:
    """Per-pod requests (whole, fractional, cpu) and Kueue ``resources.transformations`` over them."""
    names = ["cpu", "example.com/a", "example.com/b", "nvidia.com/gpu", "nvidia.com/gpumem", "x.org/skip"]
    requests = {
        n: parse_quantity(rng.choice(["0", "250m", "500m", "1", "1500m", "3", "1000"]))
        if n != "cpu"
        else Fraction(rng.choice([100, 500, 1000, 2500]), 1000)
        for n in rng.sample(names, rng.randint(1, len(names)))
    }
    transformations = []
    for name in rng.sample(names, rng.randint(0, 3)):
        t: Obj = {
            "input": name,
            "strategy": rng.choice(["Retain", "Replace"]),
            "outputs": {
                out: rng.choice(["1", "2", "500m", "3000", "5Ki", "-1"])
                for out in rng.sample(["example.com/credits", "example.com/mem", name + "-total"], rng.randint(1, 2))
            },
        }
        if rng.random() < 0.4:
            t["multiplyBy"] = rng.choice(["nvidia.com/gpu", "example.com/b", "x.org/skip"])
        transformations.append(t)
    excluded = ("x.org/",) if rng.random() < 0.3 else ()
    return requests, transformations, excluded


@pytest.mark.parametrize("seed", [1, 2])
def test_resource_transformations_agree(seed: int) -> None:
    """``dispatcher.resources.transform`` and the simulator's ``effective_requests``, then Kueue's int64 values."""
    rng = random.Random(seed)
    for i in range(300):
        requests, transformations, excluded = _transformation_case(rng)
        by_model = model_resources.transform(
            requests, [model_resources.ResourceTransformation.from_config(t) for t in transformations], excluded
        )
        by_sim = sim_requests.effective_requests(
            requests, [sim_requests.ResourceTransformation.from_config(t) for t in transformations], excluded
        )
        case = json.dumps([{k: str(v) for k, v in requests.items()}, transformations, excluded])
        assert by_sim == by_model, f"case {i}: {case}"
        values = {r: sim_requests.resource_value(r, v) for r, v in by_sim.items()}
        assert values == {r: kueue_value(r, v) for r, v in by_model.items()}, f"case {i}: {case}"
