"""Topology Aware Scheduling in the simulated Kueue, the pieces a flavor's topology is built from: TAS nodes and pod
sets, how many pods fit in free capacity, the compact v1beta2 encoding of a topology assignment
(``pkg/util/tas``), and which nodes a pod set may use (taints, node affinity). Written from Kueue v0.17.0; see
:mod:`.tas` for the sources.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubecommon.quantity import QuantityError, kueue_value, parse_quantity

__all__ = [
    "HOSTNAME",
    "INT32_MAX",
    "Domain",
    "Domains",
    "Outcome",
    "TasNode",
    "TasPodSet",
    "affinity_ok",
    "assignment_from_api",
    "assignment_to_api",
    "explicit_tas",
    "fits_times",
    "go_div",
    "is_tas_pod",
    "taint_text",
    "tolerated",
    "topology_request_of",
]

HOSTNAME = "kubernetes.io/hostname"
INT32_MAX = 2147483647
_TAS_MARKERS = (
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
)

Obj = dict[str, Any]
Domains = list[tuple[tuple[str, ...], int]]


def go_div(a: int, b: int) -> int:
    """Go's ``/`` on integers (rounds toward zero)."""
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def fits_times(per_pod: Mapping[str, int], free: Mapping[str, int]) -> tuple[int, str]:
    """``Requests.CountInWithLimitingResource``: how many pods fit and which resource limits them (ties by name)."""
    best: int | None = None
    name = ""
    for res in sorted(per_pod):
        want = per_pod[res]
        if res not in free and want != 0:
            return 0, res
        n = INT32_MAX if want == 0 else go_div(free.get(res, 0), want)
        if best is None or n < best or (n == best and res < name):
            best, name = n, res
    return best or 0, name


def topology_request_of(pod_set: Mapping[str, Any]) -> Obj | None:
    """A Workload pod set's ``topologyRequest``."""
    tr = pod_set.get("topologyRequest")
    return tr if isinstance(tr, dict) else None


def explicit_tas(tr: Mapping[str, Any] | None) -> bool:
    """``IsExplicitlyRequestingTAS``."""
    if tr is None:
        return False
    return any(
        tr.get(k) is not None
        for k in ("unconstrained", "required", "preferred", "podSetSliceRequiredTopology", "podSetSliceSize")
    ) or bool(tr.get("podsetSliceRequiredTopologyConstraints"))


def is_tas_pod(pod: Mapping[str, Any]) -> bool:
    """``utiltas.IsTAS``: the pod carries a topology annotation."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return any(k in annotations for k in _TAS_MARKERS)


@dataclass
class TasNode:
    name: str
    labels: Mapping[str, str]
    taints: Sequence[Mapping[str, Any]] = ()
    allocatable: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_object(cls, node: Mapping[str, Any]) -> tuple[TasNode, bool]:
        """The node and whether TAS counts it (Ready, not unschedulable)."""
        meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
        alloc: dict[str, int] = {}
        for res, qty in (status.get("allocatable") or {}).items():
            with contextlib.suppress(QuantityError):
                alloc[str(res)] = kueue_value(str(res), parse_quantity(qty))
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
        return (
            cls(meta.get("name", ""), dict(meta.get("labels") or {}), list(spec.get("taints") or ()), alloc),
            ready and not spec.get("unschedulable"),
        )


@dataclass
class TasPodSet:
    """One pod set to place (``TASPodSetRequests``)."""

    name: str
    count: int
    per_pod: Mapping[str, int]
    request: Mapping[str, Any] | None
    pod_spec: Mapping[str, Any] = field(default_factory=dict)
    implied: bool = False

    @property
    def group(self) -> str | None:
        if self.request is None:
            return None
        g = self.request.get("podSetGroupName")
        return str(g) if g else None


@dataclass
class Outcome:
    """A pod set's placement: ``domains`` (values at ``levels``, count) or ``reason``."""

    levels: tuple[str, ...] = ()
    domains: Domains = field(default_factory=list)
    reason: str = ""


# --------------------------------------------------------------------------------------------------------------
# Assignments in the API (v1beta2 TopologyAssignment)
# --------------------------------------------------------------------------------------------------------------


def _common(values: Sequence[str]) -> Obj:
    first = values[0]
    if all(v == first for v in values):
        return {"universal": first}
    shortest = min(len(v) for v in values)
    pre = 0
    while pre < shortest and all(v[pre] == first[pre] for v in values):
        pre += 1
    suf = 0
    while suf < shortest and all(v[len(v) - 1 - suf] == first[len(first) - 1 - suf] for v in values):
        suf += 1
    if pre + suf > shortest:
        pre = shortest - suf
    out: Obj = {}
    if pre:
        out["prefix"] = first[:pre]
    if suf:
        out["suffix"] = first[len(first) - suf :]
    out["roots"] = [v[pre : len(v) - suf] for v in values]
    return {"individual": out}


def assignment_to_api(levels: Sequence[str], domains: Domains) -> Obj:
    """``V1Beta2From``: one slice, values sharing prefixes/suffixes compacted, equal values and counts universal."""
    if not domains:
        return {"levels": list(levels), "slices": []}
    counts = [n for _, n in domains]
    pod_counts: Obj = {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts}
    per_level = [_common([vals[i] for vals, _ in domains]) for i in range(len(levels))]
    return {
        "levels": list(levels),
        "slices": [{"domainCount": len(domains), "valuesPerLevel": per_level, "podCounts": pod_counts}],
    }


def assignment_from_api(ta: Mapping[str, Any] | None) -> tuple[tuple[str, ...], Domains] | None:
    """``InternalFrom``."""
    if not isinstance(ta, Mapping):
        return None
    levels = tuple(str(x) for x in ta.get("levels") or ())
    out: Domains = []
    for sl in ta.get("slices") or ():
        n = int(sl.get("domainCount") or 0)
        pc = sl.get("podCounts") or {}
        for i in range(n):
            values = []
            for lv in sl.get("valuesPerLevel") or ():
                if "universal" in lv:
                    values.append(str(lv["universal"]))
                else:
                    ind = lv.get("individual") or {}
                    values.append(f"{ind.get('prefix', '')}{(ind.get('roots') or [''])[i]}{ind.get('suffix', '')}")
            count = pc["universal"] if "universal" in pc else (pc.get("individual") or [0])[i]
            out.append((tuple(values), int(count)))
    return levels, out


# --------------------------------------------------------------------------------------------------------------
# The placement algorithm
# --------------------------------------------------------------------------------------------------------------


class Domain:
    """A topology domain and its counts during one placement."""

    __slots__ = ("free", "kids", "lead", "node", "path", "pods", "pods_l", "slices", "slices_l", "used")

    def __init__(self, path: tuple[str, ...]) -> None:
        self.path = path
        self.kids: list[Domain] = []
        self.free: dict[str, int] = {}
        self.used: dict[str, int] = {}
        self.node: TasNode | None = None
        self.pods = self.pods_l = self.slices = self.slices_l = self.lead = 0


def tolerated(taint: Mapping[str, Any], tolerations: Iterable[Mapping[str, Any]]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("key") and t.get("key") != taint.get("key"):
            continue
        op = t.get("operator") or "Equal"
        if op == "Exists" or (op == "Equal" and (t.get("value") or "") == (taint.get("value") or "")):
            return True
    return False


def taint_text(taint: Mapping[str, Any]) -> str:
    key, value, effect = taint.get("key") or "", taint.get("value") or "", taint.get("effect") or ""
    if not effect:
        return f"{key}={value}:" if value else key
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def _expression_ok(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, vals = expr.get("key"), expr.get("operator"), [str(v) for v in expr.get("values") or ()]
    has = key in labels
    if op == "In":
        return has and labels[str(key)] in vals
    if op == "NotIn":
        return not has or labels[str(key)] not in vals
    if op == "Exists":
        return has
    if op == "DoesNotExist":
        return not has
    if op in ("Gt", "Lt") and has and len(vals) == 1:
        try:
            a, b = int(labels[str(key)]), int(vals[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def affinity_ok(pod_spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    req = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not req:
        return True
    for term in req.get("nodeSelectorTerms") or ():
        exprs = term.get("matchExpressions") or ()
        if exprs and all(_expression_ok(e, labels) for e in exprs):
            return True
    return False
