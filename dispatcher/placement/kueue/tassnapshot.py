"""Kueue's TAS flavor snapshot: where in a topology of nodes a pod set's pods go, or why they cannot.

Follows Kueue v0.17.0 ``pkg/cache/scheduler/tas_flavor_snapshot.go``: topology domains built from node labels, the
per-domain pod and slice capacity of phase 1 (``fillInCounts``), the level search (``findLevelWithFitDomains``) and
the descent to the lowest level of phase 2 (``updateCountsToMinimumGeneric``), with the ``BestFit`` algorithm for
required and preferred requests and, as the ``TASProfileMixed`` gate is on by default in v0.17, ``LeastFreeCapacity``
for unconstrained ones; pod set groups (a leader pod set placed with its workers), pod set slices
(``podset-slice-required-topology`` / ``podset-slice-size``), node filtering (taints against the pod's and the
flavor's tolerations, node selector and required node affinity, only when the lowest level is
``kubernetes.io/hostname``) and Kueue's failure messages with their exclusion statistics; ``pkg/resources``
``CountInWithLimitingResource`` for how many pods fit a capacity.

Left out, as v0.17.0 leaves them off by default or they need state this model does not keep: balanced placement
(``TASBalancedPlacement``, alpha), multi-layer slices (``TASMultiLayerTopology``, alpha), the replacement of a
failed node in an existing assignment, and elastic workload slices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from .specs import Toleration, find_untolerated_taint
from .topology import (
    _MAX_INT32,
    HOSTNAME,
    DomainAssignment,
    PlacementFailure,
    TASNode,
    TASPodSetRequest,
    TopologyAssignment,
    TopologyRequest,
    _add,
    _affinity_matches,
    _Stats,
    _sub,
    _taint_string,
    _trunc_div,
    count_in,
)

__all__ = ["TopologyFlavorSnapshot"]

#: ``TASProfileMixed`` (beta, on by default since Kueue 0.15): unconstrained requests use LeastFreeCapacity.
TAS_PROFILE_MIXED: Final = True


class _Domain:
    __slots__ = (
        "children",
        "id",
        "leader_state",
        "parent",
        "slice_state",
        "slice_state_with_leader",
        "state",
        "state_with_leader",
        "values",
    )

    def __init__(self, domain_id: str, values: tuple[str, ...]) -> None:
        self.id = domain_id
        self.values = values
        self.parent: _Domain | None = None
        self.children: list[_Domain] = []
        self.state = 0
        self.slice_state = 0
        self.state_with_leader = 0
        self.slice_state_with_leader = 0
        self.leader_state = 0


class _Leaf(_Domain):
    __slots__ = ("free", "node", "tas_usage")

    def __init__(self, domain_id: str, values: tuple[str, ...]) -> None:
        super().__init__(domain_id, values)
        self.free: dict[str, int] = {}
        self.tas_usage: dict[str, int] = {}
        self.node: TASNode | None = None


class TopologyFlavorSnapshot:
    """``TASFlavorSnapshot``: one TAS flavor's topology domains, their capacity and TAS usage.

    Built from the nodes matching the flavor (:meth:`add_node`), then :meth:`add_tas_usage` for the pods TAS
    workloads hold and :meth:`add_non_tas_usage` for other pods bound to the nodes. :meth:`find_assignments`
    places the pod sets of one workload, as ``FindTopologyAssignmentsForFlavor``.
    """

    def __init__(self, topology: str, levels: Sequence[str], tolerations: Sequence[Toleration] = ()) -> None:
        self.topology = topology
        self.levels = tuple(levels)
        self.tolerations = tuple(tolerations)
        self.lowest_is_node = bool(self.levels) and self.levels[-1] == HOSTNAME
        self.leaves: dict[str, _Leaf] = {}
        self.domains: dict[str, _Domain] = {}
        self.per_level: list[dict[str, _Domain]] = [{} for _ in self.levels]
        self._initialized = False

    # ---- building --------------------------------------------------------------------------------------------

    def add_node(self, node: TASNode) -> str:
        """``addNode``: the node's capacity goes to its leaf domain (the node itself when the lowest level is the
        hostname)."""
        values = tuple(node.labels.get(k, "") for k in self.levels)
        domain_id = node.labels.get(HOSTNAME, "") if self.lowest_is_node else ",".join(values)
        leaf = self.leaves.get(domain_id)
        if leaf is None:
            leaf = self.leaves[domain_id] = _Leaf(domain_id, values)
            if self.lowest_is_node:
                leaf.node = node
        _add(leaf.free, node.allocatable)
        self._initialized = False
        return domain_id

    def _initialize(self) -> None:
        if self._initialized:
            return
        self.domains = {}
        self.per_level = [{} for _ in self.levels]
        for leaf in self.leaves.values():
            leaf.children = []
            leaf.parent = None
            self.domains[leaf.id] = leaf
            self.per_level[len(leaf.values) - 1][leaf.id] = leaf
            self._link(leaf)
        self._initialized = True

    def _link(self, dom: _Domain) -> None:
        if len(dom.values) == 1:
            return
        parent_values = dom.values[:-1]
        parent_id = ",".join(parent_values)
        parent = self.domains.get(parent_id)
        if parent is None:
            parent = _Domain(parent_id, parent_values)
            self.per_level[len(parent_values) - 1][parent_id] = parent
            self.domains[parent_id] = parent
            self._link(parent)
        dom.parent = parent
        parent.children.append(dom)

    def add_tas_usage(self, domain_id: str, usage: Mapping[str, int]) -> None:
        """``addTASUsage``: ignored for a domain with no node (its node left or is not Ready)."""
        leaf = self.leaves.get(domain_id)
        if leaf is not None:
            _add(leaf.tas_usage, usage)

    def remove_tas_usage(self, domain_id: str, usage: Mapping[str, int]) -> None:
        leaf = self.leaves.get(domain_id)
        if leaf is not None:
            _sub(leaf.tas_usage, usage)

    def add_non_tas_usage(self, domain_id: str, usage: Mapping[str, int]) -> None:
        """``addNonTASUsage``: pods not managed by TAS bound to the leaf's node(s)."""
        leaf = self.leaves.get(domain_id)
        if leaf is not None:
            _sub(leaf.free, usage)

    # ---- queries ---------------------------------------------------------------------------------------------

    def level_index(self, key: str) -> int | None:
        try:
            return self.levels.index(key)
        except ValueError:
            return None

    def level_key(self, request: TopologyRequest | None, implied: bool = False) -> str | None:
        """``levelKeyWithImpliedFallback``: the level the pod set asks for."""
        if request is not None:
            if request.required is not None:
                return request.required
            if request.preferred is not None:
                return request.preferred
            if request.slice_only:
                return self.levels[0]
            if request.unconstrained:
                return self.levels[-1]
        return self.levels[-1] if implied else None

    def has_level(self, request: TopologyRequest | None) -> bool:
        """``HasLevel``: the requested level and the slice level exist in this topology."""
        key = self.level_key(request)
        if key is None:
            return False
        slice_key = request.slice_required if request is not None and request.slice_required else self.levels[-1]
        return self.level_index(key) is not None and self.level_index(slice_key) is not None

    def fits(self, usage: Iterable[tuple[str, Mapping[str, int], int]]) -> bool:
        """``Fits``: every (domain, per-pod requests, count) still fits its leaf's free capacity."""
        for domain_id, per_pod, count in usage:
            leaf = self.leaves.get(domain_id)
            if leaf is None:
                return False
            remaining = dict(leaf.free)
            _sub(remaining, leaf.tas_usage)
            if count_in(per_pod, remaining)[0] < count:
                return False
        return True

    def largest_domain(self, level: str, request: TASPodSetRequest) -> int:
        """How many of the request's pods the domain of ``level`` with the most room holds (for explanations)."""
        idx = self.level_index(level)
        if idx is None:
            return 0
        self._initialize()
        per_pod = {**request.requests, "pods": request.requests.get("pods", 0) + 1}
        self._fill_in_counts(per_pod, None, {}, 1, len(self.levels) - 1, False, self._tolerations(request), request)
        return max((d.state for d in self.per_level[idx].values()), default=0)

    # ---- the algorithm ---------------------------------------------------------------------------------------

    def find_assignments(
        self, requests: Sequence[TASPodSetRequest], *, simulate_empty: bool = False
    ) -> dict[str, tuple[TopologyAssignment | None, PlacementFailure | None]]:
        """``FindTopologyAssignmentsForFlavor``: per pod set, its assignment or why it does not fit; pod sets of a
        group are placed together (the smaller one as the leader), earlier groups' pods counted as used. Stops at
        the first failure, as Kueue does."""
        self._initialize()
        result: dict[str, tuple[TopologyAssignment | None, PlacementFailure | None]] = {}
        assumed: dict[str, dict[str, int]] = {}
        groups: dict[str, list[TASPodSetRequest]] = {}
        for idx, tr in enumerate(requests):
            groups.setdefault(tr.group if tr.group is not None else str(idx), []).append(tr)
        for trs in groups.values():
            workers, leader = trs[0], None
            if len(trs) > 1:
                leader = trs[1]
                if leader.count > workers.count:
                    workers, leader = trs[1], trs[0]
            assignments, failure = self._find(workers, leader, assumed, simulate_empty)
            for tr in trs:
                result[tr.name] = (assignments.get(tr.name) if assignments else None, failure)
            if failure is not None:
                return result
            for tr in trs:
                ta = assignments.get(tr.name)
                if ta is None:
                    continue
                for d in ta.domains:
                    domain_id = ",".join(d.values)
                    into = assumed.setdefault(domain_id, {})
                    _add(into, {k: v * d.count for k, v in tr.requests.items()})
        return result

    def _tolerations(self, tr: TASPodSetRequest) -> tuple[Toleration, ...]:
        return (*tr.tolerations, *self.tolerations)

    def _find(
        self,
        workers: TASPodSetRequest,
        leader: TASPodSetRequest | None,
        assumed: Mapping[str, Mapping[str, int]],
        simulate_empty: bool,
    ) -> tuple[dict[str, TopologyAssignment], PlacementFailure | None]:
        """``findTopologyAssignment``."""
        requests = {**workers.requests, "pods": workers.requests.get("pods", 0) + 1}
        leader_requests: dict[str, int] | None = None
        leader_count = 0
        if leader is not None:
            leader_requests = {**leader.requests, "pods": leader.requests.get("pods", 0) + 1}
            leader_count = 1
        count = workers.count
        tr = workers.topology
        slice_size = 1
        if tr is not None and tr.slice_required is not None:
            if tr.slice_size is None:
                return {}, PlacementFailure("slice topology requested, but slice size not provided")
            slice_size = tr.slice_size
        required = tr is not None and tr.required is not None
        key = self.level_key(tr, workers.implied)
        slice_key = tr.slice_required if tr is not None and tr.slice_required is not None else self.levels[-1]
        unconstrained = (
            (tr is not None and bool(tr.unconstrained)) or workers.implied or (tr is not None and tr.slice_only)
        )
        if key is None:
            return {}, PlacementFailure("topology level not specified")
        level_idx = self.level_index(key)
        if level_idx is None:
            return {}, PlacementFailure(f"no requested topology level: {key}")
        slice_idx = self.level_index(slice_key)
        if slice_idx is None:
            return {}, PlacementFailure(f"no requested topology level for slices: {slice_key}")
        if level_idx > slice_idx:
            return {}, PlacementFailure(f"podset slice topology {slice_key} is above the podset topology {key}")
        stats = _Stats()
        self._fill_in_counts(
            requests,
            leader_requests,
            assumed,
            slice_size,
            slice_idx,
            simulate_empty,
            self._tolerations(workers),
            workers,
            stats,
        )
        fit_idx, fit, failure = self._find_level(
            level_idx, required, count, leader_count, slice_size, unconstrained, stats
        )
        if failure is not None:
            failure.level = key
            return {}, failure
        fit = self._update_counts(fit, count, leader_count, slice_size, unconstrained, True)
        idx = fit_idx
        while idx < min(len(self.levels) - 1, slice_idx):
            lower = self._sorted([c for d in fit for c in d.children], unconstrained)
            fit = self._update_counts(lower, count, leader_count, slice_size, unconstrained, True)
            idx += 1
        while idx < len(self.levels) - 1:
            new: list[_Domain] = []
            for d in fit:
                lower = self._sorted(d.children, unconstrained)
                new += self._update_counts(lower, d.state, d.leader_state, 1, unconstrained, False)
            fit = new
            idx += 1
        out: dict[str, TopologyAssignment] = {}
        if leader is not None:
            leader_domains: list[tuple[tuple[str, ...], int]] = []
            worker_domains: list[_Domain] = []
            for d in fit:
                if d.leader_state > 0:
                    leader_domains.append((d.values, d.leader_state))
                if d.state > 0:
                    worker_domains.append(d)
            out[leader.name] = self._build(leader_domains)
            fit = worker_domains
        out[workers.name] = self._build([(d.values, d.state) for d in fit])
        return out, None

    def _fill_in_counts(
        self,
        requests: Mapping[str, int],
        leader_requests: Mapping[str, int] | None,
        assumed: Mapping[str, Mapping[str, int]],
        slice_size: int,
        slice_idx: int,
        simulate_empty: bool,
        tolerations: Sequence[Toleration],
        tr: TASPodSetRequest,
        stats: _Stats | None = None,
    ) -> None:
        """Phase 1 (``fillInCounts``): how many pods (and slices, and with the leader) fit each domain."""
        stats = stats if stats is not None else _Stats()
        for dom in self.domains.values():
            dom.state = dom.state_with_leader = dom.slice_state = dom.slice_state_with_leader = dom.leader_state = 0
        for leaf in self.leaves.values():
            stats.total += 1
            node = leaf.node
            if self.lowest_is_node and node is not None:
                taint = find_untolerated_taint(node.taints, tolerations)
                if taint is not None:
                    name = _taint_string(taint)
                    stats.taints[name] = stats.taints.get(name, 0) + 1
                    continue
                if any(node.labels.get(k) != v for k, v in tr.node_selector.items()):
                    stats.node_selector += 1
                    continue
                if tr.node_affinity is not None and not _affinity_matches(tr.node_affinity, node):
                    stats.affinity += 1
                    continue
            remaining = dict(leaf.free)
            if not simulate_empty:
                _sub(remaining, leaf.tas_usage)
            extra = assumed.get(leaf.id)
            if extra is not None:
                _sub(remaining, extra)
            leaf.state, limiting = count_in(requests, remaining)
            if leaf.state == 0 and limiting:
                stats.resources[limiting] = stats.resources.get(limiting, 0) + 1
            leaf.leader_state = 0
            if leader_requests is not None and count_in(leader_requests, remaining)[0] > 0:
                leaf.leader_state = 1
                _sub(remaining, leader_requests)
            leaf.state_with_leader = count_in(requests, remaining)[0]
        for root in self.per_level[0].values():
            self._fill_helper(root, slice_size, slice_idx, 0)

    def _fill_helper(self, dom: _Domain, slice_size: int, slice_idx: int, level: int) -> None:
        if not dom.children:
            if level == slice_idx:
                dom.slice_state = _trunc_div(dom.state, slice_size)
                dom.slice_state_with_leader = _trunc_div(dom.state_with_leader, slice_size)
            return
        capacity = slices = leader = 0
        min_diff = min_slice_diff = _MAX_INT32
        for child in dom.children:
            self._fill_helper(child, slice_size, slice_idx, level + 1)
            capacity += child.state
            slices += child.slice_state
            min_diff = min(child.state - child.state_with_leader, min_diff)
            min_slice_diff = min(child.slice_state - child.slice_state_with_leader, min_slice_diff)
            leader = max(child.leader_state, leader)
        dom.state = capacity
        dom.state_with_leader = capacity - min_diff
        dom.leader_state = leader
        slices_with_leader = slices - min_slice_diff
        if level == slice_idx:
            slices = _trunc_div(dom.state, slice_size)
            slices_with_leader = _trunc_div(dom.state_with_leader, slice_size)
        dom.slice_state = slices
        dom.slice_state_with_leader = slices_with_leader

    @staticmethod
    def _least_free(unconstrained: bool) -> bool:
        return unconstrained and TAS_PROFILE_MIXED

    def _sorted(self, domains: Iterable[_Domain], unconstrained: bool) -> list[_Domain]:
        """``sortedDomains``: BestFit: most slices first; LeastFreeCapacity: fewest; then fewer pods, then values."""
        if self._least_free(unconstrained):
            return sorted(domains, key=lambda d: (d.slice_state, d.state, d.values))
        return sorted(domains, key=lambda d: (-d.slice_state, d.state, d.values))

    def _sorted_with_leader(self, domains: Iterable[_Domain], unconstrained: bool) -> list[_Domain]:
        """``sortedDomainsWithLeader``."""
        sign = 1 if self._least_free(unconstrained) else -1
        return sorted(
            domains, key=lambda d: (-d.leader_state, sign * d.slice_state_with_leader, d.state_with_leader, d.values)
        )

    @staticmethod
    def _best_fit(domains: Sequence[_Domain], needed: int, attr: str) -> _Domain:
        """``findBestFitDomainBy``: the first domain with the least state at or above ``needed`` (else the first)."""
        best = domains[0]
        best_state = getattr(best, attr)
        for d in domains:
            state = getattr(d, attr)
            if needed <= state < best_state:
                best, best_state = d, state
        return best

    def _find_level(
        self,
        level_idx: int,
        required: bool,
        count: int,
        leader_count: int,
        slice_size: int,
        unconstrained: bool,
        stats: _Stats,
    ) -> tuple[int, list[_Domain], PlacementFailure | None]:
        """``findLevelWithFitDomains``: the domains at (or, when preferred, above) the level that hold the pods."""
        domains = self.per_level[level_idx]
        if not domains:
            return 0, [], PlacementFailure(f"no topology domains at level: {self.levels[level_idx]}")
        ordered = self._sorted_with_leader(domains.values(), unconstrained)
        top = ordered[0]
        slice_count = _trunc_div(count, slice_size)
        best_fit = not self._least_free(unconstrained)
        if best_fit and top.slice_state_with_leader >= slice_count and top.leader_state >= leader_count:
            top = self._best_fit(ordered, slice_count, "slice_state_with_leader" if leader_count > 0 else "slice_state")
        if not best_fit:
            for candidate in ordered:
                if candidate.slice_state >= slice_count:
                    return level_idx, [candidate], None
            if required:
                return 0, [], self._not_fit(ordered[-1].state, slice_count, slice_size, stats)
        if top.slice_state_with_leader < slice_count or top.leader_state < leader_count:
            if required:
                return 0, [], self._not_fit(top.slice_state, slice_count, slice_size, stats)
            if level_idx > 0 and not unconstrained:
                return self._find_level(level_idx - 1, required, count, leader_count, slice_size, unconstrained, stats)
            results: list[_Domain] = []
            remaining = slice_count
            remaining_leaders = leader_count
            i = 0
            while remaining_leaders > 0 and i < len(ordered) and ordered[i].leader_state > 0:
                dom = ordered[i]
                if best_fit and ordered[i].slice_state_with_leader >= remaining:
                    dom = self._best_fit(
                        ordered[i:], remaining, "slice_state_with_leader" if remaining_leaders > 0 else "slice_state"
                    )
                results.append(dom)
                remaining_leaders -= dom.leader_state
                remaining -= dom.slice_state_with_leader
                i += 1
            if remaining_leaders > 0:
                return 0, [], self._not_fit(leader_count - remaining_leaders, slice_count, slice_size, stats)
            rest = self._sorted(ordered[i:], unconstrained)
            j = 0
            while remaining > 0 and j < len(rest):
                dom = rest[j]
                if best_fit and rest[j].slice_state >= remaining:
                    dom = self._best_fit(rest[j:], remaining, "slice_state")
                results.append(dom)
                remaining -= dom.slice_state
                j += 1
            if remaining > 0:
                return 0, [], self._not_fit(slice_count - remaining, slice_count, slice_size, stats)
            return level_idx, results, None
        return level_idx, [top], None

    def _not_fit(self, fit: int, total: int, slice_size: int, stats: _Stats) -> PlacementFailure:
        """``notFitMessage``."""
        unit = "pod" if slice_size == 1 else "slice"
        if fit == 0:
            text = f'topology "{self.topology}" doesn\'t allow to fit any of {total} {unit}(s)'
        else:
            text = f'topology "{self.topology}" allows to fit only {fit} out of {total} {unit}(s)'
        if stats.node_selector or stats.affinity or stats.taints or stats.resources:
            text += f". Total nodes: {stats.total}; excluded: {stats.reasons()}"
        return PlacementFailure(text, needed=total, best=fit, unit=unit)

    def _consume_with_leaders(
        self,
        dom: _Domain,
        rest: Sequence[_Domain],
        remaining: int,
        remaining_leaders: int,
        unconstrained: bool,
        slice_size: int,
        slices: bool,
    ) -> tuple[_Domain, bool, int, int]:
        """``consumeWithLeadersGeneric``."""
        with_leader, primary = ("slice_state_with_leader", "slice_state") if slices else ("state_with_leader", "state")
        best_fit = not self._least_free(unconstrained)
        if best_fit and getattr(dom, with_leader) >= remaining and dom.leader_state >= remaining_leaders:
            dom = self._best_fit(rest, remaining, with_leader if remaining_leaders > 0 else primary)
        if getattr(dom, with_leader) >= remaining and dom.leader_state >= remaining_leaders:
            setattr(dom, primary, remaining)
            dom.leader_state = remaining_leaders
            dom.state = remaining * slice_size
            return dom, True, remaining, remaining_leaders
        if slices:
            dom.slice_state_with_leader = min(dom.slice_state_with_leader, remaining)
            dom.leader_state = min(dom.leader_state, remaining_leaders)
            dom.state = dom.slice_state_with_leader * slice_size
            remaining_leaders -= dom.leader_state
            remaining -= dom.slice_state_with_leader
            return dom, False, remaining, remaining_leaders
        remaining -= dom.state_with_leader
        remaining_leaders -= dom.leader_state
        dom.state_with_leader = min(dom.state_with_leader, remaining)
        dom.leader_state = min(dom.leader_state, remaining_leaders)
        return dom, False, remaining, remaining_leaders

    def _update_counts(
        self,
        domains: Sequence[_Domain],
        count: int,
        leader_count: int,
        slice_size: int,
        unconstrained: bool,
        slices: bool,
    ) -> list[_Domain]:
        """``updateCountsToMinimumGeneric``: take domains in order until the pods (slices) are placed, the last one
        chosen by best fit; each domain's state becomes what it gets. Empty when they run out (Kueue logs it)."""
        result: list[_Domain] = []
        remaining = _trunc_div(count, slice_size) if slices else count
        remaining_leaders = leader_count
        best_fit = not self._least_free(unconstrained)
        for i, candidate in enumerate(domains):
            dom = candidate
            if remaining_leaders > 0:
                dom, done, remaining, remaining_leaders = self._consume_with_leaders(
                    dom, domains[i:], remaining, remaining_leaders, unconstrained, slice_size if slices else 1, slices
                )
                result.append(dom)
                if done:
                    return result
                continue
            if slices:
                if best_fit and dom.slice_state >= remaining:
                    dom = self._best_fit(domains[i:], remaining, "slice_state")
                dom.leader_state = 0
                if dom.slice_state >= remaining:
                    dom.state = remaining * slice_size
                    dom.slice_state = remaining
                    result.append(dom)
                    return result
                dom.state = dom.slice_state * slice_size
                remaining -= dom.slice_state
                result.append(dom)
                continue
            if best_fit and dom.state >= remaining:
                dom = self._best_fit(domains[i:], remaining, "state")
            dom.leader_state = 0
            if dom.state >= remaining:
                dom.state = remaining
                result.append(dom)
                return result
            remaining -= dom.state
            result.append(dom)
        return []

    def _build(self, domains: Iterable[tuple[tuple[str, ...], int]]) -> TopologyAssignment:
        """``buildAssignment``: domains sorted by their values, only the hostname when it is the lowest level."""
        start = len(self.levels) - 1 if self.lowest_is_node else 0
        chosen = sorted(domains)
        return TopologyAssignment(
            self.levels[start:], tuple(DomainAssignment(values[start:], n) for values, n in chosen if n != 0)
        )
