"""Topology Aware Scheduling in the simulated Kueue: which nodes of a TAS flavor a pod set's pods go to.

Written from Kueue v0.17.0's sources, independently of the dispatcher's model:

* ``pkg/cache/scheduler/tas_cache.go``, ``tas_nodes_cache.go``, ``tas_non_tas_pod_cache.go``, ``tas_flavor.go``:
  a flavor's nodes are the Ready, schedulable ones with its ``nodeLabels`` and every level label of its Topology;
  each leaf domain's free capacity is the nodes' allocatable less the pods bound there that ask for no topology
  (their requests and one ``pods``), less the TAS usage of admitted workloads (per-pod usage times the count, and
  the count as ``pods``);
* ``tas_flavor_snapshot.go``: phase 1 counts how many pods (slices; with a leader) each domain holds; the level
  search keeps to the requested level when required, climbs when preferred, and for unconstrained requests (and
  TAS implied by a TAS-only ClusterQueue) takes the domains with the least free capacity first (``TASProfileMixed``,
  on in v0.17), otherwise best fit; phase 2 walks down level by level choosing the fewest domains;
* ``pkg/util/tas``: domains are named by their level values joined with commas (only the hostname when it is the
  lowest level), and an assignment is written to the Workload as one compact v1beta2 slice.

Not simulated (off by default in v0.17.0 or not needed): balanced placement, multi-layer slices, replacement of
failed nodes, elastic workloads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubecommon.quantity import QuantityError, kueue_value, parse_quantity

__all__ = [
    "HOSTNAME",
    "FlavorTopology",
    "TasNode",
    "TasPodSet",
    "assignment_from_api",
    "assignment_to_api",
    "topology_request_of",
]

HOSTNAME = "kubernetes.io/hostname"
_INT32_MAX = 2147483647
_TAS_MARKERS = (
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
)

Obj = dict[str, Any]
Domains = list[tuple[tuple[str, ...], int]]


def _go_div(a: int, b: int) -> int:
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
        n = _INT32_MAX if want == 0 else _go_div(free.get(res, 0), want)
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


class _Dom:
    """A topology domain and its counts during one placement."""

    __slots__ = ("free", "kids", "lead", "node", "path", "pods", "pods_l", "slices", "slices_l", "used")

    def __init__(self, path: tuple[str, ...]) -> None:
        self.path = path
        self.kids: list[_Dom] = []
        self.free: dict[str, int] = {}
        self.used: dict[str, int] = {}
        self.node: TasNode | None = None
        self.pods = self.pods_l = self.slices = self.slices_l = self.lead = 0


def _tolerated(taint: Mapping[str, Any], tolerations: Iterable[Mapping[str, Any]]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("key") and t.get("key") != taint.get("key"):
            continue
        op = t.get("operator") or "Equal"
        if op == "Exists" or (op == "Equal" and (t.get("value") or "") == (taint.get("value") or "")):
            return True
    return False


def _taint_text(taint: Mapping[str, Any]) -> str:
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


def _affinity_ok(pod_spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
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


class FlavorTopology:
    """A TAS flavor's view of its nodes (``TASFlavorSnapshot``), for one scheduling decision."""

    def __init__(
        self,
        name: str,
        levels: Sequence[str],
        tolerations: Sequence[Mapping[str, Any]],
        nodes: Iterable[TasNode],
        non_tas: Mapping[str, Mapping[str, int]],
        tas_used: Mapping[str, Mapping[str, int]],
    ) -> None:
        self.name = name
        self.levels = tuple(levels)
        self.tolerations = list(tolerations)
        self.by_host = bool(self.levels) and self.levels[-1] == HOSTNAME
        self.leaves: dict[str, _Dom] = {}
        self.all: dict[tuple[str, ...], _Dom] = {}
        for node in nodes:
            values = tuple(node.labels.get(k, "") for k in self.levels)
            key = node.labels.get(HOSTNAME, "") if self.by_host else ",".join(values)
            leaf = self.leaves.get(key)
            if leaf is None:
                leaf = self.leaves[key] = _Dom(values)
                leaf.node = node if self.by_host else None
                self._hook(leaf)
            for r, v in node.allocatable.items():
                leaf.free[r] = leaf.free.get(r, 0) + v
            for r, v in non_tas.get(node.name, {}).items():
                leaf.free[r] = leaf.free.get(r, 0) - v
        for key, usage in tas_used.items():
            leaf = self.leaves.get(key)
            if leaf is not None:
                for r, v in usage.items():
                    leaf.used[r] = leaf.used.get(r, 0) + v

    def _hook(self, dom: _Dom) -> None:
        self.all[dom.path] = dom
        if len(dom.path) > 1:
            parent = self.all.get(dom.path[:-1])
            if parent is None:
                parent = _Dom(dom.path[:-1])
                self._hook(parent)
            parent.kids.append(dom)

    def at(self, level: int) -> list[_Dom]:
        return [d for d in self.all.values() if len(d.path) == level + 1]

    def key_index(self, key: str | None) -> int | None:
        return self.levels.index(key) if key in self.levels else None

    def asked_level(self, tr: Mapping[str, Any] | None, implied: bool) -> str | None:
        if tr is not None:
            for k in ("required", "preferred"):
                if tr.get(k):
                    return str(tr[k])
            if tr.get("podSetSliceRequiredTopology"):
                return self.levels[0]
            if tr.get("unconstrained"):
                return self.levels[-1]
        return self.levels[-1] if implied else None

    def has_level(self, tr: Mapping[str, Any] | None) -> bool:
        """``HasLevel``."""
        main = self.asked_level(tr, False)
        slice_key = (tr or {}).get("podSetSliceRequiredTopology") or self.levels[-1]
        return main is not None and main in self.levels and slice_key in self.levels

    # ---- phase 1 ------------------------------------------------------------------------------------------------

    def _count(
        self,
        ps: TasPodSet,
        per_pod: Mapping[str, int],
        leader: Mapping[str, int] | None,
        assumed: Mapping[str, Mapping[str, int]],
        slice_size: int,
        slice_level: int,
        empty: bool,
    ) -> dict[str, Any]:
        stats: dict[str, Any] = {"total": 0, "taints": {}, "selector": 0, "affinity": 0, "resources": {}}
        for d in self.all.values():
            d.pods = d.pods_l = d.slices = d.slices_l = d.lead = 0
        selector = dict(ps.pod_spec.get("nodeSelector") or {})
        tolerations = [*(ps.pod_spec.get("tolerations") or ()), *self.tolerations]
        for key, leaf in self.leaves.items():
            stats["total"] += 1
            if self.by_host and leaf.node is not None:
                bad = next(
                    (
                        t
                        for t in leaf.node.taints
                        if t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(t, tolerations)
                    ),
                    None,
                )
                if bad is not None:
                    text = _taint_text(bad)
                    stats["taints"][text] = stats["taints"].get(text, 0) + 1
                    continue
                if any(leaf.node.labels.get(k) != v for k, v in selector.items()):
                    stats["selector"] += 1
                    continue
                if not _affinity_ok(ps.pod_spec, leaf.node.labels):
                    stats["affinity"] += 1
                    continue
            free = dict(leaf.free)
            for src in ((leaf.used,) if not empty else ()) + ((assumed.get(key, {}),)):
                for r, v in src.items():
                    free[r] = free.get(r, 0) - v
            leaf.pods, limit = fits_times(per_pod, free)
            if leaf.pods == 0 and limit:
                stats["resources"][limit] = stats["resources"].get(limit, 0) + 1
            if leader is not None and fits_times(leader, free)[0] > 0:
                leaf.lead = 1
                for r, v in leader.items():
                    free[r] = free.get(r, 0) - v
            leaf.pods_l = fits_times(per_pod, free)[0]
        for root in self.at(0):
            self._roll_up(root, 0, slice_size, slice_level)
        return stats

    def _roll_up(self, d: _Dom, level: int, size: int, slice_level: int) -> None:
        if not d.kids:
            if level == slice_level:
                d.slices, d.slices_l = _go_div(d.pods, size), _go_div(d.pods_l, size)
            return
        pods = slices = lead = 0
        gap = slice_gap = _INT32_MAX
        for k in d.kids:
            self._roll_up(k, level + 1, size, slice_level)
            pods += k.pods
            slices += k.slices
            gap = min(gap, k.pods - k.pods_l)
            slice_gap = min(slice_gap, k.slices - k.slices_l)
            lead = max(lead, k.lead)
        d.pods, d.pods_l, d.lead = pods, pods - gap, lead
        d.slices, d.slices_l = slices, slices - slice_gap
        if level == slice_level:
            d.slices, d.slices_l = _go_div(d.pods, size), _go_div(d.pods_l, size)

    # ---- phase 2 ------------------------------------------------------------------------------------------------

    @staticmethod
    def _order(doms: Iterable[_Dom], least_free: bool) -> list[_Dom]:
        sign = 1 if least_free else -1
        return sorted(doms, key=lambda d: (sign * d.slices, d.pods, d.path))

    @staticmethod
    def _order_leader(doms: Iterable[_Dom], least_free: bool) -> list[_Dom]:
        sign = 1 if least_free else -1
        return sorted(doms, key=lambda d: (-d.lead, sign * d.slices_l, d.pods_l, d.path))

    @staticmethod
    def _tightest(doms: Sequence[_Dom], need: int, attr: str) -> _Dom:
        pick = doms[0]
        for d in doms:
            if need <= getattr(d, attr) < getattr(pick, attr):
                pick = d
        return pick

    def _fail(self, fit: int, total: int, size: int, stats: Mapping[str, Any]) -> str:
        unit = "pod" if size == 1 else "slice"
        if fit == 0:
            text = f'topology "{self.name}" doesn\'t allow to fit any of {total} {unit}(s)'
        else:
            text = f'topology "{self.name}" allows to fit only {fit} out of {total} {unit}(s)'
        parts = []
        if stats["selector"]:
            parts.append(f"nodeSelector: {stats['selector']}")
        if stats["affinity"]:
            parts.append(f"affinity: {stats['affinity']}")
        parts += [f'taint "{t}": {n}' for t, n in stats["taints"].items()]
        parts += [f'resource "{r}": {n}' for r, n in stats["resources"].items()]
        if parts:
            text += f". Total nodes: {stats['total']}; excluded: {', '.join(sorted(parts))}"
        return text

    def _find_level(
        self, idx: int, required: bool, count: int, leaders: int, size: int, lfc: bool, stats: Mapping[str, Any]
    ) -> tuple[int, list[_Dom], str]:
        doms = self.at(idx)
        if not doms:
            return 0, [], f"no topology domains at level: {self.levels[idx]}"
        ordered = self._order_leader(doms, lfc)
        need = _go_div(count, size)
        top = ordered[0]
        if not lfc and top.slices_l >= need and top.lead >= leaders:
            top = self._tightest(ordered, need, "slices_l" if leaders > 0 else "slices")
        if lfc:
            for d in ordered:
                if d.slices >= need:
                    return idx, [d], ""
            if required:
                return 0, [], self._fail(ordered[-1].pods, need, size, stats)
        if top.slices_l >= need and top.lead >= leaders:
            return idx, [top], ""
        if required:
            return 0, [], self._fail(top.slices, need, size, stats)
        if idx > 0 and not lfc:
            return self._find_level(idx - 1, required, count, leaders, size, lfc, stats)
        chosen: list[_Dom] = []
        left, lead_left = need, leaders
        i = 0
        while lead_left > 0 and i < len(ordered) and ordered[i].lead > 0:
            d = ordered[i]
            if not lfc and d.slices_l >= left:
                d = self._tightest(ordered[i:], left, "slices_l")
            chosen.append(d)
            lead_left -= d.lead
            left -= d.slices_l
            i += 1
        if lead_left > 0:
            return 0, [], self._fail(leaders - lead_left, need, size, stats)
        rest = self._order(ordered[i:], lfc)
        j = 0
        while left > 0 and j < len(rest):
            d = rest[j]
            if not lfc and d.slices >= left:
                d = self._tightest(rest[j:], left, "slices")
            chosen.append(d)
            left -= d.slices
            j += 1
        if left > 0:
            return 0, [], self._fail(need - left, need, size, stats)
        return idx, chosen, ""

    def _spread(
        self, doms: Sequence[_Dom], count: int, leaders: int, size: int, lfc: bool, by_slice: bool
    ) -> list[_Dom]:
        """``updateCountsToMinimumGeneric`` (with ``consumeWithLeadersGeneric``)."""
        out: list[_Dom] = []
        left = _go_div(count, size) if by_slice else count
        lead_left = leaders
        cap, cap_l = ("slices", "slices_l") if by_slice else ("pods", "pods_l")
        unit = size if by_slice else 1
        for i, first in enumerate(doms):
            d = first
            if lead_left > 0:
                if not lfc and getattr(d, cap_l) >= left and d.lead >= lead_left:
                    d = self._tightest(doms[i:], left, cap_l)
                if getattr(d, cap_l) >= left and d.lead >= lead_left:
                    setattr(d, cap, left)
                    d.lead = lead_left
                    d.pods = left * unit
                    out.append(d)
                    return out
                if by_slice:
                    d.slices_l = min(d.slices_l, left)
                    d.lead = min(d.lead, lead_left)
                    d.pods = d.slices_l * unit
                    lead_left -= d.lead
                    left -= d.slices_l
                else:
                    left -= d.pods_l
                    lead_left -= d.lead
                    d.pods_l = min(d.pods_l, left)
                    d.lead = min(d.lead, lead_left)
                out.append(d)
                continue
            if not lfc and getattr(d, cap) >= left:
                d = self._tightest(doms[i:], left, cap)
            d.lead = 0
            if getattr(d, cap) >= left:
                setattr(d, cap, left)
                d.pods = left * unit
                out.append(d)
                return out
            if by_slice:
                d.pods = d.slices * unit
            left -= getattr(d, cap)
            out.append(d)
        return []

    def place(self, pod_sets: Sequence[TasPodSet], *, empty: bool = False) -> dict[str, Outcome]:
        """``FindTopologyAssignmentsForFlavor``: each group of pod sets in turn (its smaller pod set the leader),
        earlier groups' pods held; stops at the first that does not fit."""
        result: dict[str, Outcome] = {}
        assumed: dict[str, dict[str, int]] = {}
        groups: dict[str, list[TasPodSet]] = {}
        for i, ps in enumerate(pod_sets):
            groups.setdefault(ps.group or str(i), []).append(ps)
        for members in groups.values():
            workers, leader = members[0], None
            if len(members) > 1:
                workers, leader = (members[1], members[0]) if members[1].count > members[0].count else members
            placed, reason = self._place(workers, leader, assumed, empty)
            for ps in members:
                result[ps.name] = placed.get(ps.name, Outcome()) if not reason else Outcome(reason=reason)
            if reason:
                return result
            for ps in members:
                for vals, n in result[ps.name].domains:
                    key = ",".join(vals)
                    slot = assumed.setdefault(key, {})
                    for r, v in ps.per_pod.items():
                        slot[r] = slot.get(r, 0) + v * n
        return result

    def _place(
        self, workers: TasPodSet, leader: TasPodSet | None, assumed: Mapping[str, Mapping[str, int]], empty: bool
    ) -> tuple[dict[str, Outcome], str]:
        per_pod = {**workers.per_pod, "pods": workers.per_pod.get("pods", 0) + 1}
        lead_req = {**leader.per_pod, "pods": leader.per_pod.get("pods", 0) + 1} if leader is not None else None
        leaders = 1 if leader is not None else 0
        tr = workers.request or {}
        size = 1
        if tr.get("podSetSliceRequiredTopology") is not None:
            if tr.get("podSetSliceSize") is None:
                return {}, "slice topology requested, but slice size not provided"
            size = int(tr["podSetSliceSize"])
        required = bool(tr.get("required"))
        key = self.asked_level(workers.request, workers.implied)
        slice_key = tr.get("podSetSliceRequiredTopology") or self.levels[-1]
        slice_only = not tr.get("required") and not tr.get("preferred") and bool(tr.get("podSetSliceRequiredTopology"))
        lfc = bool(tr.get("unconstrained")) or workers.implied or slice_only
        if key is None:
            return {}, "topology level not specified"
        idx = self.key_index(key)
        if idx is None:
            return {}, f"no requested topology level: {key}"
        slice_idx = self.key_index(str(slice_key))
        if slice_idx is None:
            return {}, f"no requested topology level for slices: {slice_key}"
        if idx > slice_idx:
            return {}, f"podset slice topology {slice_key} is above the podset topology {key}"
        stats = self._count(workers, per_pod, lead_req, assumed, size, slice_idx, empty)
        level, fit, reason = self._find_level(idx, required, workers.count, leaders, size, lfc, stats)
        if reason:
            return {}, reason
        fit = self._spread(fit, workers.count, leaders, size, lfc, True)
        while level < min(len(self.levels) - 1, slice_idx):
            fit = self._spread(
                self._order([k for d in fit for k in d.kids], lfc), workers.count, leaders, size, lfc, True
            )
            level += 1
        while level < len(self.levels) - 1:
            nxt: list[_Dom] = []
            for d in fit:
                nxt += self._spread(self._order(d.kids, lfc), d.pods, d.lead, 1, lfc, False)
            fit = nxt
            level += 1
        out: dict[str, Outcome] = {}
        if leader is not None:
            out[leader.name] = self._outcome([(d.path, d.lead) for d in fit if d.lead > 0])
            fit = [d for d in fit if d.pods > 0]
        out[workers.name] = self._outcome([(d.path, d.pods) for d in fit])
        return out, ""

    def _outcome(self, doms: Domains) -> Outcome:
        start = len(self.levels) - 1 if self.by_host else 0
        return Outcome(self.levels[start:], [(p[start:], n) for p, n in sorted(doms) if n != 0])


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
