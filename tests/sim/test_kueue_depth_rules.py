"""Fair sharing and TAS tables ported from Kueue's Go tests (tests/conformance/kueue: TestDominantResourceShare,
TestFairPreemptions, TestFindTopologyAssignments), run against the simulator's own implementation
(kubesim/kueue/fairsharing.py, preemption.py, tas.py), so both readings of Kueue answer the same Kueue cases."""

from __future__ import annotations

import importlib
import math
from typing import Any

import pytest
from tas_cache_cases import CASES as TAS_CASES

from kubecommon.quantity import kueue_value
from kubesim.kueue.fairsharing import FairSharing, share_of
from kubesim.kueue.preemption import Preemptor
from kubesim.kueue.quota import AdmittedWorkload, QuotaTree
from kubesim.kueue.specs import ClusterQueueSpec, CohortSpec
from kubesim.kueue.tas import FlavorTopology
from kubesim.kueue.tasnodes import TasNode, TasPodSet

Obj = dict[str, Any]
NEVER_TIME = -62135596800.0


def _cases(module: str, attr: str) -> list[Any]:
    return list(getattr(importlib.import_module(module), attr))


def _tree(cqs: list[Obj], cohorts: list[Obj]) -> tuple[QuotaTree, dict[str, ClusterQueueSpec]]:
    tree = QuotaTree()
    for c in cohorts:
        tree.set_cohort(CohortSpec.from_object(c))
    specs = {}
    for q in cqs:
        spec = ClusterQueueSpec.from_object(q)
        specs[spec.name] = spec
        tree.set_cluster_queue(spec)
    return tree, specs


@pytest.mark.parametrize("case", _cases("test_fair_sharing", "DRS_CASES"), ids=lambda c: c.name)
def test_dominant_resource_share(case: Any) -> None:
    cqs = [case.cluster_queue] + ([case.lending] if case.lending is not None else [])
    tree, _ = _tree(cqs, case.cohorts)
    for i, (fr, value) in enumerate(case.usage.items()):
        tree.add_workload(AdmittedWorkload(f"workload-{i}", "cq", {fr: value}, frozenset({fr})))
    got = []
    for name, node in [*tree.cqs.items(), *tree.cohorts.items()]:
        share = share_of(tree, node, case.requests)
        value = 2**63 - 1 if share.zero_weight_borrowing else math.ceil(share.value())
        got.append((name, "cq" if node.is_cq else "cohort", value, share.resource, share.borrowing))
    assert sorted(got) == sorted(case.want)


@pytest.mark.parametrize("case", _cases("test_preemption_fair", "CASES"), ids=lambda c: c.name)
def test_fair_preemptions(case: Any) -> None:
    tree, specs = _tree(case.cluster_queues, case.cohorts)
    now = 1_700_000_000.0
    for name, cq, cpu, priority, flavor in case.admitted:
        usage = {(flavor, "cpu"): kueue_value("cpu", cpu)}
        tree.add_workload(
            AdmittedWorkload(f"/{name}", cq, usage, frozenset(usage), priority, reserved_at=now, uid=name)
        )
    _name, cpu, priority = case.incoming
    usage = {(case.flavor, "cpu"): kueue_value("cpu", cpu)}
    fair = FairSharing(case.strategies) if case.strategies else FairSharing()
    targets = Preemptor(tree, specs[case.target], priority, NEVER_TIME, now, fair).targets(usage, set(usage))
    assert sorted((t.workload.key, t.reason) for t in targets) == case.want


@pytest.mark.parametrize("case", TAS_CASES, ids=[c["name"] for c in TAS_CASES])
def test_find_topology_assignments(case: dict[str, Any]) -> None:
    levels, wanted = case["levels"], case.get("nodeLabels", {})
    nodes = []
    for n in case["nodes"]:
        if not n.get("ready", True) or n.get("unschedulable", False):
            continue
        if any(n["labels"].get(k) != v for k, v in wanted.items()) or any(lv not in n["labels"] for lv in levels):
            continue
        alloc = {r: kueue_value(r, q) for r, q in n["allocatable"].items()}
        nodes.append(TasNode(n["name"], n["labels"], list(n.get("taints", ())), alloc))
    non_tas: dict[str, dict[str, int]] = {}
    for p in case.get("pods", ()):
        if not p.get("node") or p.get("phase") in ("Succeeded", "Failed"):
            continue
        slot = non_tas.setdefault(p["node"], {})
        for r, q in p.get("requests", {}).items():
            slot[r] = slot.get(r, 0) + kueue_value(r, q)
        slot["pods"] = slot.get("pods", 0) + 1
    topology = FlavorTopology("default", levels, [], nodes, non_tas, {})
    pod_sets = []
    for ps in case["podSets"]:
        request = dict(ps["topology"]) if "topology" in ps else None
        if request is not None and ps.get("group"):
            request["podSetGroupName"] = ps["group"]
        spec: Obj = {}
        if ps.get("nodeSelector"):
            spec["nodeSelector"] = ps["nodeSelector"]
        if ps.get("tolerations"):
            spec["tolerations"] = ps["tolerations"]
        pod_sets.append(TasPodSet(ps.get("name", "main"), ps["count"], ps["requests"], request, spec, request is None))
    got = topology.place(pod_sets)
    for ps in case["podSets"]:
        outcome = got.get(ps.get("name", "main"))
        shown = None if outcome is None or outcome.reason else (outcome.levels, list(outcome.domains))
        assert (shown, outcome.reason if outcome else "") == (ps.get("want"), ps.get("reason", ""))
