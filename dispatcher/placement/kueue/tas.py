"""Kueue's TAS cache: Topologies, the Ready nodes, the pods outside TAS and the TAS usage of admitted workloads.

Follows Kueue v0.17.0 ``pkg/cache/scheduler/tas_cache.go`` (flavors and topologies), ``tas_nodes_cache.go`` (only
Ready, schedulable nodes; a flavor sees the nodes carrying its ``nodeLabels`` and every level label of its
topology: ``NodeMatchesFlavor``), ``tas_non_tas_pod_cache.go`` with ``pkg/controller/tas/non_tas_usage_controller.go``
(pods bound to a node, not terminated, whose template asks for no topology, count against the node: their
requests plus one ``pods``), ``tas_flavor.go`` (the usage TAS workloads hold per domain: per-pod requests times
the count, plus the count as ``pods``) and ``pkg/workload`` ``totalRequestsFromAdmission`` for the usage of an
admitted workload (its ``resourceUsage`` over its ``count``, per domain of its ``topologyAssignment``).

A :class:`TASCache` hands out one :class:`~.topology.TopologyFlavorSnapshot` per TAS flavor, kept until the nodes,
pods or topologies change; workload usage added or removed (admissions, and preemption simulations) is applied to
the kept snapshots as well, as Kueue's scheduler snapshot does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dispatcher.quantity import QuantityError, kueue_value

from .specs import ResourceFlavorSpec, Taint, _list, _map, _str
from .tassnapshot import TopologyFlavorSnapshot
from .topology import TASNode, TASUsage, TopologySpec

__all__ = ["TASCache", "node_from_object", "non_tas_pod_usage"]


def node_from_object(obj: Mapping[str, Any]) -> tuple[TASNode, bool]:
    """A Node as the TAS nodes cache keeps it, and whether it counts (``Ready`` and not unschedulable)."""
    meta = _map(obj.get("metadata"))
    spec = _map(obj.get("spec"))
    status = _map(obj.get("status"))
    allocatable: dict[str, int] = {}
    for res, qty in _map(status.get("allocatable")).items():
        try:
            allocatable[str(res)] = kueue_value(str(res), qty)
        except QuantityError:
            continue
    ready = any(
        _map(c).get("type") == "Ready" and _map(c).get("status") == "True" for c in _list(status.get("conditions"))
    )
    node = TASNode(
        name=_str(meta.get("name")),
        labels={str(k): _str(v) for k, v in _map(meta.get("labels")).items()},
        taints=tuple(Taint.from_object(_map(t)) for t in _list(spec.get("taints"))),
        allocatable=allocatable,
    )
    return node, ready and not bool(spec.get("unschedulable"))


_TAS_ANNOTATIONS = (
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
)


def non_tas_pod_usage(pod: Mapping[str, Any], requests: Mapping[str, int]) -> tuple[str, dict[str, int]] | None:
    """What a pod takes from its node in the TAS view (``nonTasUsageCache.update``): ``(node, requests + 1 pod)``,
    or ``None`` for a TAS pod (``utiltas.IsTAS``: a topology annotation), an unbound pod, or a terminated one."""
    meta = _map(pod.get("metadata"))
    annotations = _map(meta.get("annotations"))
    if any(a in annotations for a in _TAS_ANNOTATIONS):
        return None
    node = _str(_map(pod.get("spec")).get("nodeName"))
    phase = _str(_map(pod.get("status")).get("phase"))
    if not node or phase in ("Succeeded", "Failed"):
        return None
    usage = dict(requests)
    usage["pods"] = usage.get("pods", 0) + 1
    return node, usage


class TASCache:
    """The TAS state of one cluster (Kueue's ``tasCache`` and the TAS part of its scheduler snapshot)."""

    def __init__(self) -> None:
        self.topologies: dict[str, TopologySpec] = {}
        self.nodes: dict[str, TASNode] = {}
        #: pod key -> (node name, usage with the pod counted once as ``pods``)
        self.pods: dict[str, tuple[str, dict[str, int]]] = {}
        #: workload key -> its TAS usage
        self.usage: dict[str, tuple[TASUsage, ...]] = {}
        #: flavor -> (its spec, the snapshot built for it)
        self._snapshots: dict[str, tuple[ResourceFlavorSpec, TopologyFlavorSnapshot]] = {}
        #: Bumped on every change, for callers that cache what they derived from the state.
        self.version = 0

    # ---- structure --------------------------------------------------------------------------------------------

    def _changed(self) -> None:
        self.version += 1
        self._snapshots.clear()

    def set_topology(self, spec: TopologySpec) -> None:
        if self.topologies.get(spec.name) != spec:
            self.topologies[spec.name] = spec
            self._changed()

    def delete_topology(self, name: str) -> None:
        if self.topologies.pop(name, None) is not None:
            self._changed()

    def set_node(self, node: TASNode, counts: bool) -> None:
        """Add or replace a node; one that is not Ready or is unschedulable leaves the cache."""
        if not counts:
            self.delete_node(node.name)
            return
        if self.nodes.get(node.name) != node:
            self.nodes[node.name] = node
            self._changed()

    def delete_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self._changed()

    def set_pod(self, key: str, usage: tuple[str, dict[str, int]] | None) -> None:
        """A pod's usage outside TAS (:func:`non_tas_pod_usage`); ``None`` forgets it."""
        if usage is None:
            self.delete_pod(key)
            return
        if self.pods.get(key) != usage:
            self.pods[key] = usage
            self._changed()

    def delete_pod(self, key: str) -> None:
        if self.pods.pop(key, None) is not None:
            self._changed()

    # ---- workload usage ---------------------------------------------------------------------------------------

    def add_workload(self, key: str, usage: Iterable[TASUsage]) -> None:
        """Count a workload's TAS usage (replacing what the key held)."""
        self.remove_workload(key)
        entries = tuple(usage)
        if not entries:
            return
        self.usage[key] = entries
        self.version += 1
        for u in entries:
            kept = self._snapshots.get(u.flavor)
            if kept is not None:
                kept[1].add_tas_usage(u.domain, u.total())

    def remove_workload(self, key: str) -> tuple[TASUsage, ...]:
        """Stop counting a workload's TAS usage; returns what it held."""
        entries = self.usage.pop(key, ())
        if entries:
            self.version += 1
        for u in entries:
            kept = self._snapshots.get(u.flavor)
            if kept is not None:
                kept[1].remove_tas_usage(u.domain, u.total())
        return entries

    # ---- snapshots --------------------------------------------------------------------------------------------

    def topology_of(self, flavor: ResourceFlavorSpec) -> TopologySpec | None:
        return self.topologies.get(flavor.topology_name) if flavor.topology_name else None

    def snapshot(self, flavor: ResourceFlavorSpec) -> TopologyFlavorSnapshot | None:
        """The flavor's TAS snapshot (``None``: not a TAS flavor, or its Topology does not exist)."""
        topology = self.topology_of(flavor)
        if topology is None:
            return None
        kept = self._snapshots.get(flavor.name)
        if kept is not None and kept[0] == flavor:
            return kept[1]
        snap = TopologyFlavorSnapshot(topology.name, topology.levels, flavor.tolerations)
        to_domain: dict[str, str] = {}
        for node in sorted(self.nodes.values(), key=lambda n: n.name):
            if all(node.labels.get(k) == v for k, v in flavor.node_labels.items()) and all(
                level in node.labels for level in topology.levels
            ):
                to_domain[node.name] = snap.add_node(node)
        snap._initialize()
        for entries in self.usage.values():
            for u in entries:
                if u.flavor == flavor.name:
                    snap.add_tas_usage(u.domain, u.total())
        per_node: dict[str, dict[str, int]] = {}
        for node_name, usage in self.pods.values():
            into = per_node.setdefault(node_name, {})
            for k, v in usage.items():
                into[k] = into.get(k, 0) + v
        for node_name, usage in per_node.items():
            domain = to_domain.get(node_name)
            if domain is not None:
                snap.add_non_tas_usage(domain, usage)
        self._snapshots[flavor.name] = (flavor, snap)
        return snap
