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

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .tasnodes import (
    HOSTNAME,
    INT32_MAX,
    Domain,
    Domains,
    Outcome,
    TasNode,
    TasPodSet,
    affinity_ok,
    fits_times,
    go_div,
    taint_text,
    tolerated,
)

__all__ = ["FlavorTopology"]


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
        self.leaves: dict[str, Domain] = {}
        self.all: dict[tuple[str, ...], Domain] = {}
        for node in nodes:
            values = tuple(node.labels.get(k, "") for k in self.levels)
            key = node.labels.get(HOSTNAME, "") if self.by_host else ",".join(values)
            leaf = self.leaves.get(key)
            if leaf is None:
                leaf = self.leaves[key] = Domain(values)
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

    def _hook(self, dom: Domain) -> None:
        self.all[dom.path] = dom
        if len(dom.path) > 1:
            parent = self.all.get(dom.path[:-1])
            if parent is None:
                parent = Domain(dom.path[:-1])
                self._hook(parent)
            parent.kids.append(dom)

    def at(self, level: int) -> list[Domain]:
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
                        if t.get("effect") in ("NoSchedule", "NoExecute") and not tolerated(t, tolerations)
                    ),
                    None,
                )
                if bad is not None:
                    text = taint_text(bad)
                    stats["taints"][text] = stats["taints"].get(text, 0) + 1
                    continue
                if any(leaf.node.labels.get(k) != v for k, v in selector.items()):
                    stats["selector"] += 1
                    continue
                if not affinity_ok(ps.pod_spec, leaf.node.labels):
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

    def _roll_up(self, d: Domain, level: int, size: int, slice_level: int) -> None:
        if not d.kids:
            if level == slice_level:
                d.slices, d.slices_l = go_div(d.pods, size), go_div(d.pods_l, size)
            return
        pods = slices = lead = 0
        gap = slice_gap = INT32_MAX
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
            d.slices, d.slices_l = go_div(d.pods, size), go_div(d.pods_l, size)

    # ---- phase 2 ------------------------------------------------------------------------------------------------

    @staticmethod
    def _order(doms: Iterable[Domain], least_free: bool) -> list[Domain]:
        sign = 1 if least_free else -1
        return sorted(doms, key=lambda d: (sign * d.slices, d.pods, d.path))

    @staticmethod
    def _order_leader(doms: Iterable[Domain], least_free: bool) -> list[Domain]:
        sign = 1 if least_free else -1
        return sorted(doms, key=lambda d: (-d.lead, sign * d.slices_l, d.pods_l, d.path))

    @staticmethod
    def _tightest(doms: Sequence[Domain], need: int, attr: str) -> Domain:
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
    ) -> tuple[int, list[Domain], str]:
        doms = self.at(idx)
        if not doms:
            return 0, [], f"no topology domains at level: {self.levels[idx]}"
        ordered = self._order_leader(doms, lfc)
        need = go_div(count, size)
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
        chosen: list[Domain] = []
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
        self, doms: Sequence[Domain], count: int, leaders: int, size: int, lfc: bool, by_slice: bool
    ) -> list[Domain]:
        """``updateCountsToMinimumGeneric`` (with ``consumeWithLeadersGeneric``)."""
        out: list[Domain] = []
        left = go_div(count, size) if by_slice else count
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
            nxt: list[Domain] = []
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
