"""The preemption tables ported from Kueue's Go tests (tests/conformance/kueue: TestPreemption and
TestHierarchicalPreemptions), run against the simulator's own preemption (kubesim/kueue/preemption.py).

The case data is the conformance suite's; only the objects are built for the simulator instead of the product's
model, so both readings of Kueue answer the same Kueue cases.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from kueuebuild import NEVER_TIME, cq_obj

from kubecommon.quantity import kueue_value
from kubesim.kueue.preemption import Preemptor
from kubesim.kueue.quota import AdmittedWorkload, QuotaTree
from kubesim.kueue.specs import ClusterQueueSpec, CohortSpec

Obj = dict[str, Any]


def _sim_cq(name: str, *groups: Obj, **kw: Any) -> ClusterQueueSpec:
    return ClusterQueueSpec.from_object(cq_obj(name, *groups, **kw))


def _sim_cohort(name: str, *groups: Obj, parent: str | None = None) -> CohortSpec:
    spec: Obj = {"resourceGroups": list(groups)}
    if parent:
        spec["parentName"] = parent
    return CohortSpec.from_object({"metadata": {"name": name}, "spec": spec})


def _cases(module: str, attr: str) -> list[Any]:
    return list(getattr(importlib.import_module(module), attr))


@pytest.fixture
def flat_table() -> Iterator[ModuleType]:
    """The TestPreemption module with its ClusterQueue builders pointed at the simulator's specs."""
    mod = importlib.import_module("test_preemption")
    saved = (mod.make_cq, mod.make_cohort)  # type: ignore[attr-defined]
    mod.make_cq, mod.make_cohort = _sim_cq, _sim_cohort  # type: ignore[attr-defined]
    try:
        yield mod
    finally:
        mod.make_cq, mod.make_cohort = saved  # type: ignore[attr-defined]


def _tree(cqs: list[ClusterQueueSpec], cohorts: list[CohortSpec]) -> QuotaTree:
    tree = QuotaTree()
    for c in cohorts:
        tree.set_cohort(c)
    for q in cqs:
        tree.set_cluster_queue(q)
    return tree


def _admit(
    tree: QuotaTree,
    key: str,
    cq: str,
    priority: int,
    usage: Obj,
    reserved: float,
    created: float | None,
    evicted: bool = False,
) -> None:
    amounts = {fr: kueue_value(fr[1], q) for fr, q in usage.items()}
    tree.add_workload(
        AdmittedWorkload(
            key,
            cq,
            amounts,
            frozenset(amounts),
            priority,
            NEVER_TIME if created is None else created,
            reserved,
            evicted,
            uid=key,
        )
    )


def _targets(tree: QuotaTree, case: Any) -> dict[str, str]:
    usage = {fr: kueue_value(fr[1], q) for fr, q in case.usage.items()}
    created = NEVER_TIME if case.created is None else case.created
    preemptor = Preemptor(tree, tree.cq_specs[case.target], case.priority, created, 0.0)
    return {t.workload.key: t.reason for t in preemptor.targets(usage, set(case.frs))}


@pytest.mark.parametrize("case", _cases("test_preemption", "_PREEMPTION_CASES"), ids=lambda c: c.name)
def test_preemption_table(case: Any, flat_table: ModuleType) -> None:
    cqs, cohorts = flat_table._default_preemption_cluster_queues()
    tree = _tree(cqs, cohorts)
    for key, cq, priority, usage, reserved, created in case.admitted:
        _admit(tree, key, cq, priority, usage, reserved, created)
    before = {name: dict(node.usage) for name, node in tree.cqs.items()}
    assert _targets(tree, case) == case.want
    assert {name: dict(node.usage) for name, node in tree.cqs.items()} == before


@pytest.mark.parametrize("case", _cases("test_preemption_hierarchical", "_HIERARCHICAL_CASES"), ids=lambda c: c.name)
def test_hierarchical_preemption_table(case: Any) -> None:
    from kueuebuild import fq, rg

    cohorts = [
        _sim_cohort(name, *([rg(fq("default", *q))] if q else []), parent=parent) for name, parent, q in case.cohorts
    ]
    cqs = [
        _sim_cq(name, rg(fq("default", *q)), cohort=cohort, preemption=pre)
        for name, cohort, q, pre in case.cluster_queues
    ]
    tree = _tree(cqs, cohorts)
    for key, cq, priority, usage, reserved, created, evicted in case.admitted:
        _admit(tree, key, cq, priority, usage, reserved, created, evicted)
    assert _targets(tree, case) == case.want
