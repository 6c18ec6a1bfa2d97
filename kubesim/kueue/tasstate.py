"""The simulated Kueue's TAS cache (``tasCache``): Topologies, Ready nodes, pods outside TAS and the TAS usage of
admitted workloads, from which each scheduling decision builds a :class:`~.tas.FlavorTopology`; and the pod set's
``topologyRequest`` from its template's annotations (jobframework/tas.go)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .tas import FlavorTopology
from .tasnodes import TasNode, is_tas_pod

__all__ = ["TasState", "build_topology_request"]

Obj = dict[str, Any]

# --------------------------------------------------------------------------------------------------------------
# The cluster's TAS state (the controller's cache)
# --------------------------------------------------------------------------------------------------------------

Usage = tuple[tuple[str, str, Mapping[str, int], int], ...]


class TasState:
    """Topologies, Ready nodes, pods outside TAS and the TAS usage of admitted workloads (Kueue's ``tasCache``)."""

    def __init__(self) -> None:
        self.topologies: dict[str, tuple[str, ...]] = {}
        self.nodes: dict[str, TasNode] = {}
        self.pods: dict[tuple[str, str], tuple[str, dict[str, int]]] = {}
        self.usage: dict[str, Usage] = {}

    def set_node(self, node: Mapping[str, Any] | None, name: str) -> bool:
        """Track a node (``None``: deleted); returns whether TAS' view changed."""
        before = self.nodes.get(name)
        if node is None:
            self.nodes.pop(name, None)
            return before is not None
        tas_node, counts = TasNode.from_object(node)
        if counts:
            self.nodes[name] = tas_node
        else:
            self.nodes.pop(name, None)
        return self.nodes.get(name) != before

    def set_pod(self, key: tuple[str, str], pod: Mapping[str, Any] | None, requests: Mapping[str, int]) -> bool:
        """Track a pod outside TAS bound to a node (``None``: deleted); returns whether the view changed."""
        before = self.pods.get(key)
        spec = (pod or {}).get("spec") or {}
        phase = ((pod or {}).get("status") or {}).get("phase")
        if pod is None or is_tas_pod(pod) or not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            self.pods.pop(key, None)
        else:
            self.pods[key] = (str(spec["nodeName"]), {**requests, "pods": requests.get("pods", 0) + 1})
        return self.pods.get(key) != before

    def add_workload(self, key: str, usage: Usage) -> None:
        if usage:
            self.usage[key] = usage
        else:
            self.usage.pop(key, None)

    def remove_workload(self, key: str) -> None:
        self.usage.pop(key, None)

    # the Preemptor's TasUsage protocol: a candidate's removal and return during a simulation
    def drop(self, wl: Any) -> None:
        self.usage.pop(wl.key, None)

    def keep(self, wl: Any) -> None:
        if wl.tas:
            self.usage[wl.key] = wl.tas

    def view(
        self,
        flavor: str,
        topology: str | None,
        node_labels: Mapping[str, str],
        tolerations: Sequence[Mapping[str, Any]],
    ) -> FlavorTopology | None:
        """The flavor's topology as it stands (``None``: not a TAS flavor, or its Topology is missing)."""
        levels = self.topologies.get(topology) if topology else None
        if levels is None or topology is None:
            return None
        nodes = [
            n
            for _, n in sorted(self.nodes.items())
            if all(n.labels.get(k) == v for k, v in node_labels.items()) and all(k in n.labels for k in levels)
        ]
        non_tas: dict[str, dict[str, int]] = {}
        for node_name, req in self.pods.values():
            slot = non_tas.setdefault(node_name, {})
            for r, v in req.items():
                slot[r] = slot.get(r, 0) + v
        used: dict[str, dict[str, int]] = {}
        for entries in self.usage.values():
            for f, domain, per_pod, count in entries:
                if f != flavor:
                    continue
                slot = used.setdefault(domain, {})
                for r, v in per_pod.items():
                    slot[r] = slot.get(r, 0) + v * count
                slot["pods"] = slot.get("pods", 0) + count
        return FlavorTopology(topology, levels, tolerations, nodes, non_tas, used)


_BOOL = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_BOOL.update({"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False})


def build_topology_request(annotations: Mapping[str, Any], pod_index_label: str | None = None) -> Obj | None:
    """``NewPodSetTopologyRequest(meta).PodIndexLabel(...).Build()`` (jobframework/tas.go): the pod set's
    ``topologyRequest`` from its template's annotations; ``None`` without any annotation or index label (a bad
    ``podset-unconstrained-topology`` or slice size, which Kueue's webhook rejects, counts as none)."""
    out: Obj = {}
    if "kueue.x-k8s.io/podset-required-topology" in annotations:
        out["required"] = str(annotations["kueue.x-k8s.io/podset-required-topology"])
    elif "kueue.x-k8s.io/podset-preferred-topology" in annotations:
        out["preferred"] = str(annotations["kueue.x-k8s.io/podset-preferred-topology"])
    elif "kueue.x-k8s.io/podset-unconstrained-topology" in annotations:
        value = _BOOL.get(str(annotations["kueue.x-k8s.io/podset-unconstrained-topology"]))
        if value is None:
            return None
        out["unconstrained"] = value
    slice_level = annotations.get("kueue.x-k8s.io/podset-slice-required-topology")
    slice_size = annotations.get("kueue.x-k8s.io/podset-slice-size")
    if not out and (slice_level is None or slice_size is None) and pod_index_label is None:
        return None
    if slice_level is not None and slice_size is not None:
        try:
            out["podSetSliceSize"] = int(str(slice_size))
        except ValueError:
            return None
        out["podSetSliceRequiredTopology"] = str(slice_level)
    if pod_index_label is not None:
        out["podIndexLabel"] = pod_index_label
    group = annotations.get("kueue.x-k8s.io/podset-group-name")
    if group is not None and ("required" in out or "preferred" in out):
        out["podSetGroupName"] = str(group)
    return out
