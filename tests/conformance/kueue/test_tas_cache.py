"""Kueue conformance: ``pkg/cache/scheduler/tas_cache_test.go`` (TestFindTopologyAssignments): where Kueue's TAS flavor
snapshot places each pod set, or why it cannot, for the nodes, pods and topology of each case
(``tas_cache_cases.py``), run against the placement model's TAS cache and snapshot (``dispatcher.placement.kueue.tas``,
``.tassnapshot``)."""

from __future__ import annotations

from typing import Any

import pytest
from tas_cache_cases import CASES

from dispatcher.placement.kueue.specs import ResourceFlavorSpec, Taint, Toleration
from dispatcher.placement.kueue.tas import TASCache
from dispatcher.placement.kueue.topology import TASNode, TASPodSetRequest, TopologyRequest, TopologySpec
from dispatcher.quantity import kueue_value

SOURCE = "pkg/cache/scheduler/tas_cache_test.go"


def _cache(case: dict[str, Any]) -> TASCache:
    """The test's ``tasCache``: its nodes (``SyncNode``: only Ready, schedulable ones count) and its pods
    (``nonTasUsageCache.update``: bound, not terminated)."""
    cache = TASCache()
    cache.set_topology(TopologySpec("default", tuple(case["levels"])))
    for n in case["nodes"]:
        node = TASNode(
            n["name"],
            n["labels"],
            tuple(Taint(t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in n.get("taints", ())),
            {r: kueue_value(r, q) for r, q in n["allocatable"].items()},
        )
        cache.set_node(node, n.get("ready", True) and not n.get("unschedulable", False))
    for p in case.get("pods", ()):
        if not p.get("node") or p.get("phase") in ("Succeeded", "Failed"):
            continue
        usage = {r: kueue_value(r, q) for r, q in p.get("requests", {}).items()}
        usage["pods"] = usage.get("pods", 0) + 1
        cache.set_pod(p["name"], (p["node"], usage))
    return cache


def _request(ps: dict[str, Any]) -> TASPodSetRequest:
    topo = ps.get("topology")
    return TASPodSetRequest(
        name=ps.get("name", "main"),
        count=ps["count"],
        requests=ps["requests"],
        topology=TopologyRequest.from_object(topo) if topo is not None else None,
        node_selector=ps.get("nodeSelector", {}),
        tolerations=tuple(
            Toleration(t.get("key", ""), t.get("operator", ""), t.get("value", ""), t.get("effect", ""))
            for t in ps.get("tolerations", ())
        ),
        implied=topo is None,
        group=ps.get("group"),
    )


@pytest.mark.kueue(source=SOURCE, test="TestFindTopologyAssignments")
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_find_topology_assignments(case: dict[str, Any]) -> None:
    # Kueue: pkg/cache/scheduler/tas_cache_test.go TestFindTopologyAssignments (TASProfileMixed on, its v0.17 default)
    cache = _cache(case)
    flavor = ResourceFlavorSpec("tas", node_labels=case.get("nodeLabels", {}), topology_name="default")
    snapshot = cache.snapshot(flavor)
    assert snapshot is not None
    got = snapshot.find_assignments([_request(ps) for ps in case["podSets"]])
    for ps in case["podSets"]:
        ta, failure = got.get(ps.get("name", "main"), (None, None))
        shown = None if ta is None else (ta.levels, [(d.values, d.count) for d in ta.domains])
        assert (shown, failure.message if failure else "") == (ps.get("want"), ps.get("reason", ""))
