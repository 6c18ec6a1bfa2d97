"""Kueue's Topology Aware Scheduling (TAS) inputs and outputs: Topologies, pod set topology requests, assignments.

Follows Kueue v0.17.0: the ``Topology`` API (levels of node labels, highest first); ``pkg/controller/jobframework/
tas.go`` for the topology request Kueue builds from a pod template's annotations (``podset-required-topology``,
``podset-preferred-topology``, ``podset-unconstrained-topology``, the slice and group annotations); ``pkg/util/tas``
for domain IDs and the v1beta2 encoding of a topology assignment (one compact slice, ``V1Beta2From`` /
``InternalFrom``); ``pkg/workload`` ``totalRequestsFromAdmission`` and ``Info.TASUsage`` for the pods an admitted
workload holds per domain. The placement algorithm is in :mod:`.tassnapshot`, the cluster's TAS state in :mod:`.tas`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from dispatcher.quantity import QuantityError, kueue_value

from .specs import NodeSelectorRequirement, Taint, Toleration, _list, _map, _str

__all__ = [
    "HOSTNAME",
    "DomainAssignment",
    "PlacementFailure",
    "TASNode",
    "TASPodSetRequest",
    "TASUsage",
    "TopologyAssignment",
    "TopologyRequest",
    "TopologySpec",
    "count_in",
    "decode_assignment",
    "encode_assignment",
    "topology_request",
    "workload_tas_usage",
]

HOSTNAME: Final = "kubernetes.io/hostname"
_MAX_INT32: Final = 2**31 - 1
REQUIRED_ANNOTATION: Final = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_ANNOTATION: Final = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_ANNOTATION: Final = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED_ANNOTATION: Final = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE_ANNOTATION: Final = "kueue.x-k8s.io/podset-slice-size"
GROUP_ANNOTATION: Final = "kueue.x-k8s.io/podset-group-name"


@dataclass(frozen=True, slots=True)
class TopologySpec:
    """A ``Topology`` object: its name and the node labels of its levels, highest first."""

    name: str
    levels: tuple[str, ...]

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> TopologySpec:
        name = _str(_map(obj.get("metadata")).get("name"))
        if not name:
            raise ValueError("Topology has no metadata.name")
        levels = tuple(_str(_map(level).get("nodeLabel")) for level in _list(_map(obj.get("spec")).get("levels")))
        if not levels or not all(levels):
            raise ValueError(f"Topology {name} has no levels")
        return cls(name, levels)


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """A pod set's ``topologyRequest`` (``kueue.PodSetTopologyRequest``), as Kueue builds it from annotations."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    slice_required: str | None = None
    slice_size: int | None = None
    group: str | None = None

    @property
    def explicit(self) -> bool:
        """``workload.IsExplicitlyRequestingTAS``."""
        return (
            self.unconstrained is not None
            or self.required is not None
            or self.preferred is not None
            or self.slice_required is not None
            or self.slice_size is not None
        )

    @property
    def slice_only(self) -> bool:
        """``isSliceTopologyOnlyRequest``."""
        return self.required is None and self.preferred is None and self.slice_required is not None

    @classmethod
    def from_object(cls, obj: object) -> TopologyRequest | None:
        """A Workload pod set's ``topologyRequest`` (``None`` when absent)."""
        if not isinstance(obj, Mapping):
            return None
        size = obj.get("podSetSliceSize")
        unconstrained = obj.get("unconstrained")
        return cls(
            required=_str(obj.get("required")) or None,
            preferred=_str(obj.get("preferred")) or None,
            unconstrained=unconstrained if isinstance(unconstrained, bool) else None,
            slice_required=_str(obj.get("podSetSliceRequiredTopology")) or None,
            slice_size=size if isinstance(size, int) and not isinstance(size, bool) else None,
            group=_str(obj.get("podSetGroupName")) or None,
        )

    def to_object(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.required is not None:
            out["required"] = self.required
        if self.preferred is not None:
            out["preferred"] = self.preferred
        if self.unconstrained is not None:
            out["unconstrained"] = self.unconstrained
        if self.slice_required is not None:
            out["podSetSliceRequiredTopology"] = self.slice_required
        if self.slice_size is not None:
            out["podSetSliceSize"] = self.slice_size
        if self.group is not None:
            out["podSetGroupName"] = self.group
        return out


def topology_request(annotations: Mapping[str, Any]) -> TopologyRequest | None:
    """The topology request Kueue builds from a pod template's annotations (``NewPodSetTopologyRequest``).

    ``None`` when no topology annotation is set (Kueue still sets a request with only the pod index label for a
    ``batch/v1`` Job; it does not ask for TAS). A malformed ``podset-unconstrained-topology`` or slice size reads as
    unset (Kueue's webhook rejects such Jobs).
    """
    required = annotations.get(REQUIRED_ANNOTATION)
    preferred = annotations.get(PREFERRED_ANNOTATION)
    unconstrained_raw = annotations.get(UNCONSTRAINED_ANNOTATION)
    slice_level = annotations.get(SLICE_REQUIRED_ANNOTATION)
    slice_size_raw = annotations.get(SLICE_SIZE_ANNOTATION)
    group = annotations.get(GROUP_ANNOTATION)
    unconstrained: bool | None = None
    if isinstance(required, str):
        base = TopologyRequest(required=required)
    elif isinstance(preferred, str):
        base = TopologyRequest(preferred=preferred)
    elif isinstance(unconstrained_raw, str):
        parsed = _parse_bool(unconstrained_raw)
        if parsed is None:
            return None
        unconstrained = parsed
        base = TopologyRequest(unconstrained=unconstrained)
    elif isinstance(slice_level, str) and isinstance(slice_size_raw, str):
        base = TopologyRequest()
    else:
        return None
    slice_required: str | None = None
    slice_size: int | None = None
    if isinstance(slice_level, str) and isinstance(slice_size_raw, str):
        try:
            slice_size = int(slice_size_raw)
        except ValueError:
            return None
        slice_required = slice_level
    return TopologyRequest(
        required=base.required,
        preferred=base.preferred,
        unconstrained=base.unconstrained,
        slice_required=slice_required,
        slice_size=slice_size,
        group=group if isinstance(group, str) and (base.required or base.preferred) else None,
    )


def _parse_bool(text: str) -> bool | None:
    """Go's ``strconv.ParseBool``."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


# --------------------------------------------------------------------------------------------------------------
# Assignments and their v1beta2 encoding (pkg/util/tas/tas_assignment.go)
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DomainAssignment:
    """Pods placed in one domain: its values at the assignment's levels, and how many."""

    values: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    """Kueue's internal ``TopologyAssignment``: the levels and the domains, sorted by their values."""

    levels: tuple[str, ...]
    domains: tuple[DomainAssignment, ...]

    @property
    def pods(self) -> int:
        return sum(d.count for d in self.domains)


def encode_assignment(ta: TopologyAssignment) -> dict[str, Any]:
    """``V1Beta2From``: one slice, with common prefixes and suffixes and universal values where possible."""
    n = len(ta.domains)
    if n == 0:
        return {"levels": list(ta.levels), "slices": []}
    per_level = []
    for i in range(len(ta.levels)):
        per_level.append(_compact([d.values[i] for d in ta.domains]))
    counts = [d.count for d in ta.domains]
    pod_counts: dict[str, Any] = (
        {"universal": counts[0]} if all(c == counts[0] for c in counts) else {"individual": counts}
    )
    return {
        "levels": list(ta.levels),
        "slices": [{"domainCount": n, "valuesPerLevel": per_level, "podCounts": pod_counts}],
    }


def _compact(values: Sequence[str]) -> dict[str, Any]:
    """``fillSingleCompactSliceValues``: the longest common prefix and suffix (not overlapping), or the universal
    value when all are equal."""
    prefix = suffix = values[0]
    min_len = max_len = len(values[0])
    for s in values[1:]:
        n = len(s)
        min_len, max_len = min(min_len, n), max(max_len, n)
        if n < len(prefix):
            prefix = prefix[:n]
        if n < len(suffix):
            suffix = suffix[len(suffix) - n :]
        for i in range(len(prefix)):
            if s[i] != prefix[i]:
                prefix = prefix[:i]
                break
        for i in range(len(suffix)):
            if s[len(s) - 1 - i] != suffix[len(suffix) - 1 - i]:
                suffix = suffix[len(suffix) - i :]
                break
    if len(prefix) == max_len:
        return {"universal": prefix}
    if len(prefix) + len(suffix) > min_len:
        prefix = prefix[: min_len - len(suffix)]
    individual: dict[str, Any] = {}
    if prefix:
        individual["prefix"] = prefix
    if suffix:
        individual["suffix"] = suffix
    individual["roots"] = [s[len(prefix) : len(s) - len(suffix)] for s in values]
    return {"individual": individual}


def decode_assignment(obj: object) -> TopologyAssignment | None:
    """``InternalFrom``: the domains of a v1beta2 ``topologyAssignment`` (``None`` when absent)."""
    if not isinstance(obj, Mapping):
        return None
    levels = tuple(_str(x) for x in _list(obj.get("levels")))
    domains: list[DomainAssignment] = []
    for sl in _list(obj.get("slices")):
        slm = _map(sl)
        n = slm.get("domainCount")
        if not isinstance(n, int) or n <= 0:
            continue
        counts = _map(slm.get("podCounts"))
        per_level = [_map(v) for v in _list(slm.get("valuesPerLevel"))]
        for i in range(n):
            values = []
            for v in per_level:
                if "universal" in v:
                    values.append(_str(v.get("universal")))
                else:
                    ind = _map(v.get("individual"))
                    roots = _list(ind.get("roots"))
                    root = _str(roots[i]) if i < len(roots) else ""
                    values.append(_str(ind.get("prefix")) + root + _str(ind.get("suffix")))
            if "universal" in counts:
                count = counts.get("universal")
            else:
                individual = _list(counts.get("individual"))
                count = individual[i] if i < len(individual) else 0
            domains.append(DomainAssignment(tuple(values), count if isinstance(count, int) else 0))
    return TopologyAssignment(levels, tuple(domains))


# --------------------------------------------------------------------------------------------------------------
# The TAS usage of admitted workloads
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TASUsage:
    """Pods a TAS workload holds in one leaf domain of one flavor: per-pod requests (Kueue units) and how many."""

    flavor: str
    domain: str
    per_pod: Mapping[str, int]
    count: int

    def total(self) -> dict[str, int]:
        """``TotalRequests`` plus the pods, as ``TASFlavorCache.updateUsage`` counts them."""
        out = {k: v * self.count for k, v in self.per_pod.items()}
        out["pods"] = out.get("pods", 0) + self.count
        return out


def workload_tas_usage(workload: Mapping[str, Any]) -> tuple[TASUsage, ...]:
    """The TAS usage of an admitted Workload (``Info.TASUsage``): per pod set with a ``topologyAssignment``, for
    every distinct flavor it was assigned, each domain's pods with the pod set's per-pod usage (its
    ``resourceUsage`` divided by its ``count``; ``status.reclaimablePods`` does not change it)."""
    spec_counts = {
        _str(_map(ps).get("name")) or "main": _map(ps).get("count", 1)
        for ps in _list(_map(workload.get("spec")).get("podSets"))
    }
    out: list[TASUsage] = []
    admission = _map(_map(workload.get("status")).get("admission"))
    for psa in _list(admission.get("podSetAssignments")):
        psam = _map(psa)
        ta = decode_assignment(psam.get("topologyAssignment"))
        if ta is None:
            continue
        name = _str(psam.get("name")) or "main"
        raw_count = psam.get("count")
        count = raw_count if isinstance(raw_count, int) else spec_counts.get(name, 1)
        per_pod: dict[str, int] = {}
        for res, qty in _map(psam.get("resourceUsage")).items():
            try:
                total = kueue_value(str(res), qty)
            except QuantityError:
                continue
            per_pod[str(res)] = total // count if isinstance(count, int) and count > 0 else total
        for flavor in dict.fromkeys(_str(f) for f in _map(psam.get("flavors")).values()):
            for d in ta.domains:
                out.append(TASUsage(flavor, ",".join(d.values), per_pod, d.count))
    return tuple(out)


# --------------------------------------------------------------------------------------------------------------
# What the placement algorithm works on (pkg/resources/requests.go, tas_nodes_cache.go, tas_flavor_snapshot.go)
# --------------------------------------------------------------------------------------------------------------


def _trunc_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def count_in(requests: Mapping[str, int], capacity: Mapping[str, int]) -> tuple[int, str]:
    """``CountInWithLimitingResource``: how many times ``requests`` fit ``capacity``, and the limiting resource
    (the smallest count, ties alphabetical). A requested resource the capacity lacks fits zero times."""
    result: int | None = None
    limiting = ""
    for name in sorted(requests):
        value = requests[name]
        if name not in capacity and value != 0:
            return 0, name
        count = _MAX_INT32 if value == 0 else _trunc_div(capacity.get(name, 0), value)
        if result is None or count < result or (count == result and name < limiting):
            result, limiting = count, name
    return (result if result is not None else 0), limiting


def _sub(into: dict[str, int], usage: Mapping[str, int]) -> None:
    for k, v in usage.items():
        into[k] = into.get(k, 0) - v


def _add(into: dict[str, int], usage: Mapping[str, int]) -> None:
    for k, v in usage.items():
        into[k] = into.get(k, 0) + v


@dataclass(slots=True)
class TASNode:
    """A Ready, schedulable node as Kueue's TAS cache keeps it (``nodeInfo``): allocatable in Kueue units."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    allocatable: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TASPodSetRequest:
    """``TASPodSetRequests``: one pod set's pods to place (per-pod requests from its pod spec, in Kueue units)."""

    name: str
    count: int
    requests: Mapping[str, int]
    topology: TopologyRequest | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    node_affinity: tuple[tuple[NodeSelectorRequirement, ...], ...] | None = None
    implied: bool = False
    group: str | None = None


@dataclass(slots=True)
class PlacementFailure:
    """Why a pod set does not fit: Kueue's message, and what the explanation needs (the level asked, how many
    pods or slices, and how many the best domain holds)."""

    message: str
    level: str | None = None
    needed: int = 0
    best: int = 0
    unit: str = "pod"


@dataclass(slots=True)
class _Stats:
    """``ExclusionStats``: why nodes were left out."""

    total: int = 0
    taints: dict[str, int] = field(default_factory=dict)
    node_selector: int = 0
    affinity: int = 0
    resources: dict[str, int] = field(default_factory=dict)

    def reasons(self) -> str:
        out = []
        if self.node_selector:
            out.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            out.append(f"affinity: {self.affinity}")
        out += [f'taint "{t}": {n}' for t, n in sorted(self.taints.items())]
        out += [f'resource "{r}": {n}' for r, n in sorted(self.resources.items())]
        return ", ".join(sorted(out))


def _taint_string(t: Taint) -> str:
    """``Taint.ToString``."""
    if not t.effect:
        return t.key if not t.value else f"{t.key}={t.value}:"
    return f"{t.key}:{t.effect}" if not t.value else f"{t.key}={t.value}:{t.effect}"


def _affinity_matches(terms: tuple[tuple[NodeSelectorRequirement, ...], ...], node: TASNode) -> bool:
    """``nodeaffinity.NodeSelector.Match``: terms are ORed, an empty term matches nothing."""
    labels = node.labels
    return any(term and all(e.matches(labels) for e in term) for term in terms)
