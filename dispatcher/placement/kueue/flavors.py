"""Kueue's flavor assigner: a flavor for every requested resource of every pod set, and its re-validation.

Follows ``pkg/scheduler/flavorassigner``: resource groups in Kueue's resource order, flavors in spec order
(resuming from the last tried flavor), taints and tolerations, node selector and required node affinity against
flavor labels, PodSet groups and the ``pods`` resource, flavor fungibility (``whenCanBorrow``,
``whenCanPreempt``, ``preference``), and Kueue's reason strings. :func:`fit_checks` and :func:`fits_as_before`
re-validate a ``Fit`` assignment after added usage without running the assigner again; they follow the ``Fit``
branch of the assigner and live beside it for that reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Final

from .amounts import FlavorResource, _add, _sub, format_amount
from .assignment import (
    EXCEEDS_MAX_QUOTA,
    NO_MATCHING_FLAVOR,
    WAITING_FOR_QUOTA,
    Assignment,
    FlavorAssignment,
    FlavorAssignmentAttempt,
    FlavorAssignmentMode,
    PodSetAssignment,
)
from .cells import _available_exact, _available_fast, _potential_exact, _potential_fast
from .preemption import PreemptionOracle, PreemptionPossibility, simulate_preemption
from .revalidate import fit_checks, fits_as_before
from .specs import (
    _PREEMPTION_OVER_BORROWING,
    _TRY_NEXT_FLAVOR,
    FairSharingConfig,
    FlavorFungibility,
    NodeSelectorRequirement,
    ResourceFlavorSpec,
    find_untolerated_taint,
)
from .tas import TASCache
from .tasassign import apply_topology, cluster_queue_tas_flavors, is_tas_only, tas_flavor_mismatch
from .tassnapshot import TopologyFlavorSnapshot
from .tree import QuotaTree
from .workloads import PodSetRequest

__all__ = ["assign_flavors", "fit_checks", "fits_as_before", "flavor_matches_pod_set", "group_label_keys"]


def flavor_matches_pod_set(
    pod_set: PodSetRequest, flavor: ResourceFlavorSpec, label_keys: AbstractSet[str] | None = None
) -> bool:
    """Whether the PodSet's node selector and required node affinity accept the flavor's node labels.

    As Kueue v0.17.0's ``flavorSelector(spec, resourceGroup.LabelKeys)``: only the keys in ``label_keys`` are
    considered, the node label keys of every flavor of the resource group (:func:`group_label_keys`), so a flavor
    without a key another flavor of the group labels does not match a selector on that key; an affinity term left
    with no expression after that filtering matches any flavor (terms are ORed). ``None``: the flavor's own keys
    (what Kueue v0.17.6+ and main do, kueue#12449).
    """
    labels = flavor.node_labels
    keys: AbstractSet[str] = labels.keys() if label_keys is None else label_keys
    for key, value in pod_set.node_selector.items():
        if key in keys and labels.get(key) != value:
            return False
    terms = pod_set.node_affinity
    if not terms:
        return True
    filtered: list[list[NodeSelectorRequirement]] = []
    for term in terms:
        kept = [e for e in term if e.key in keys]
        if not kept:
            return True
        filtered.append(kept)
    return any(all(e.matches(labels) for e in term) for term in filtered)


def group_label_keys(group_flavors: Iterable[str], flavors: Mapping[str, ResourceFlavorSpec]) -> frozenset[str]:
    """``clusterQueue.updateLabelKeys``: the node label keys of the resource group's flavors that exist."""
    keys: set[str] = set()
    for name in group_flavors:
        flavor = flavors.get(name)
        if flavor is not None:
            keys.update(flavor.node_labels)
    return frozenset(keys)


# preemptionMode, worst to best.
_PM_NO_FIT, _PM_NO_CANDIDATES, _PM_PREEMPT, _PM_RECLAIM, _PM_FIT = range(5)
_PM_TO_MODE = (
    FlavorAssignmentMode.NO_FIT,
    FlavorAssignmentMode.PREEMPT,
    FlavorAssignmentMode.PREEMPT,
    FlavorAssignmentMode.PREEMPT,
    FlavorAssignmentMode.FIT,
)
_PM_TO_POSSIBILITY: tuple[PreemptionPossibility | None, ...] = (
    None,
    PreemptionPossibility.NO_CANDIDATES,
    PreemptionPossibility.PREEMPT,
    PreemptionPossibility.RECLAIM,
    None,
)
_POSSIBILITY_TO_PM = {
    PreemptionPossibility.NO_CANDIDATES: _PM_NO_CANDIDATES,
    PreemptionPossibility.PREEMPT: _PM_PREEMPT,
    PreemptionPossibility.RECLAIM: _PM_RECLAIM,
}
_WORST_BORROW: Final = 2**63 - 1
_SEVERITY = {"": 0, "TopologyPlacementFailed": 1, WAITING_FOR_QUOTA: 2, EXCEEDS_MAX_QUOTA: 3, NO_MATCHING_FLAVOR: 4}


def _most_severe(a: str, b: str) -> str:
    return a if _SEVERITY.get(a, 0) >= _SEVERITY.get(b, 0) else b


def _is_preferred(a: tuple[int, int], b: tuple[int, int], preference: str | None) -> bool:
    """Kueue v0.17's ``isPreferred`` over ``(preemption mode, borrowing level)``: is ``a`` better than ``b``?

    "No preemption candidates" is just the mode below ``preempt``: with ``PreemptionOverBorrowing`` a flavor without
    candidates at a lower borrowing level beats one that fits or can preempt higher up (Kueue main, kueue#13616,
    ranks it below every viable mode first; no release has that).
    """
    if a[0] == _PM_NO_FIT:
        return False
    if b[0] == _PM_NO_FIT:
        return True
    if preference == _PREEMPTION_OVER_BORROWING:
        if a[1] != b[1]:
            return a[1] < b[1]
        return a[0] > b[0]
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] < b[1]


def _should_try_next_flavor(mode: tuple[int, int], fungibility: FlavorFungibility) -> bool:
    if mode[0] in (_PM_NO_FIT, _PM_NO_CANDIDATES):
        return True
    if mode[0] in (_PM_PREEMPT, _PM_RECLAIM) and fungibility.when_can_preempt == _TRY_NEXT_FLAVOR:
        return True
    return mode[1] != 0 and fungibility.when_can_borrow == _TRY_NEXT_FLAVOR


_HASHES: dict[str, int] = {}
_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {}


def _resource_order(name: str) -> tuple[int, str]:
    """Kueue iterates requests sorted by the FNV-1a hash of the resource name (``SliceRequests``); doing the
    same keeps reason lists and resource-group resolution identical."""
    h = _HASHES.get(name)
    if h is None:
        h = 0xCBF29CE484222325
        for byte in name.encode():
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        _HASHES[name] = h
    return h, name


def _in_resource_order(requests: Mapping[str, int]) -> dict[str, int]:
    """``requests`` re-keyed in Kueue's iteration order; the order of each key set is computed once."""
    keys = tuple(requests)
    order = _ORDERS.get(keys)
    if order is None:
        if len(_ORDERS) > 4096:
            _ORDERS.clear()
        order = _ORDERS[keys] = tuple(sorted(keys, key=_resource_order))
    return {k: requests[k] for k in order}


@dataclass(slots=True)
class _Status:
    reasons: list[str] = field(default_factory=list)
    no_fit_reason: str = ""


class _Assigner:
    """``FlavorAssigner`` for one workload against one ClusterQueue of a tree."""

    __slots__ = (
        "cq",
        "fair",
        "flavors",
        "ignore_undeclared",
        "label_keys",
        "last",
        "node",
        "oracle",
        "tas",
        "tas_flavors",
        "tas_only",
        "tree",
    )

    def __init__(
        self,
        tree: QuotaTree,
        cluster_queue: str,
        flavors: Mapping[str, ResourceFlavorSpec],
        oracle: PreemptionOracle,
        last: Sequence[Mapping[str, int]] | None,
        ignore_undeclared: bool,
        fair: FairSharingConfig | None = None,
        tas: TASCache | None = None,
    ) -> None:
        self.tree = tree
        self.node = tree._cq(cluster_queue)
        self.cq = tree._cq_specs[cluster_queue]
        self.flavors = flavors
        self.oracle = oracle
        self.last = last
        self.ignore_undeclared = ignore_undeclared
        self.fair = fair
        self.tas = tas
        #: TAS: whether every flavor is a TAS flavor, and the TAS flavors' snapshots (computed when first needed)
        self.tas_only = is_tas_only(self.cq, flavors)
        self.tas_flavors: dict[str, TopologyFlavorSnapshot] | None = None
        #: per resource group (its flavors), the label keys node selectors are reduced to
        self.label_keys: dict[tuple[str, ...], frozenset[str]] = {}

    def _fits_quota(self, fr: FlavorResource, assumed: int, request: int) -> tuple[int, int, _Status | None]:
        """``fitsResourceQuota``: the preemption mode and borrowing height for one flavor-resource."""
        tree, node, name = self.tree, self.node, self.node.name
        cell = node.cell(fr)
        if tree._exact:
            available, max_capacity = _available_exact(cell), _potential_exact(cell)
        else:
            available, max_capacity = _available_fast(cell), _potential_fast(cell)
        available = max(available, 0)
        value = _add(assumed, request)
        flavor, resource = fr
        if value > max_capacity:
            return (
                _PM_NO_FIT,
                0,
                _Status(
                    [
                        f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
                        f"({format_amount(resource, assumed)}) + current podset request "
                        f"({format_amount(resource, request)}) > maximum capacity "
                        f"({format_amount(resource, max_capacity)})"
                    ],
                    EXCEEDS_MAX_QUOTA,
                ),
            )
        borrow, may_reclaim = tree._height_of_lowest_subtree_that_fits(node, fr, value)
        if value <= available:
            return _PM_FIT, borrow, None
        status = _Status(
            [
                f"insufficient unused quota for {resource} in flavor {flavor}, "
                f"{format_amount(resource, _sub(value, available))} more needed"
            ],
            WAITING_FOR_QUOTA,
        )
        nominal = cell.nominal
        bwc = self.cq.preemption.borrow_within_cohort
        # canPreemptWhileBorrowing: borrowWithinCohort, or fair sharing with reclaimWithinCohort.
        can_preempt_while_borrowing = (bwc is not None and bwc.policy != "Never") or (
            self.fair is not None and self.cq.preemption.reclaim_within_cohort != "Never"
        )
        if nominal >= value or may_reclaim or can_preempt_while_borrowing:
            possibility, borrow_after = self.oracle(tree, name, fr, value)
            status.no_fit_reason = ""
            return _POSSIBILITY_TO_PM[possibility], borrow_after, status
        return _PM_NO_FIT, borrow, status

    def _check_flavor(
        self, flavor_name: str, pod_sets: Sequence[PodSetRequest], keys: AbstractSet[str], covered: frozenset[str]
    ) -> list[str]:
        """``checkFlavorForPodSets``: TAS (``checkPodSetAndFlavorMatchForTAS``), taints and node labels (reduced to
        the group's label ``keys``); returns the reasons the flavor does not match."""
        flavor = self.flavors.get(flavor_name)
        if flavor is None:
            return [f"flavor {flavor_name} not found"]
        for ps in pod_sets:
            if flavor.topology_name is not None or (ps.topology is not None and ps.topology.explicit):
                if self.tas_flavors is None:
                    self.tas_flavors = cluster_queue_tas_flavors(self.cq, self.flavors, self.tas)
                mismatch = tas_flavor_mismatch(ps, flavor, covered, self.tas_only, self.tas_flavors)
                if mismatch is not None:
                    return [mismatch]
            taint = find_untolerated_taint(flavor.node_taints, (*ps.tolerations, *flavor.tolerations))
            if taint is not None:
                return [f"untolerated taint {taint} in flavor {flavor_name}"]
            if not flavor_matches_pod_set(ps, flavor, keys):
                return [f"flavor {flavor_name} doesn't match node affinity"]
        return []

    def find_flavor(
        self,
        ps_ids: Sequence[int],
        pod_sets: Sequence[PodSetRequest],
        requests: Mapping[str, int],
        res_name: str,
        assignment_usage: Mapping[FlavorResource, int],
    ) -> tuple[dict[str, FlavorAssignment] | None, _Status | None, list[FlavorAssignmentAttempt]]:
        """``findFlavorForPodSets``: one flavor for all resources of ``res_name``'s resource group."""
        group = self.node.rg_of.get(res_name)
        if group is None:
            return None, _Status([f"resource {res_name} unavailable in ClusterQueue"]), []
        status = _Status()
        covered = group.covered
        group_requests = [(r, v) for r, v in requests.items() if r in covered]
        fungibility = self.cq.flavor_fungibility
        preference = fungibility.preference
        best: dict[str, FlavorAssignment] | None = None
        best_mode = (_PM_NO_FIT, _WORST_BORROW)
        attempts: list[FlavorAssignmentAttempt] = []
        start = 0
        if self.last is not None and ps_ids[0] < len(self.last):
            tried = self.last[ps_ids[0]].get(res_name)
            if tried is not None:
                start = tried + 1
        attempted = -1
        flavors = group.flavors
        keys = self.label_keys.get(flavors)
        if keys is None:
            keys = self.label_keys[flavors] = group_label_keys(flavors, self.flavors)
        for idx in range(start, len(flavors)):
            attempted = idx
            fname = flavors[idx]
            mismatch = self._check_flavor(fname, [pod_sets[i] for i in ps_ids], keys, covered)
            if mismatch:
                status.reasons.extend(mismatch)
                attempts.append(
                    FlavorAssignmentAttempt(
                        fname, FlavorAssignmentMode.NO_FIT, 0, None, list(mismatch), NO_MATCHING_FLAVOR
                    )
                )
                continue
            assignments: dict[str, FlavorAssignment] = {}
            rep = (_PM_FIT, 0)
            max_borrow = 0
            quota_reasons: list[str] = []
            no_fit_reason = ""
            for rname, val in group_requests:
                fr = (fname, rname)
                pm, borrow, s = self._fits_quota(fr, assignment_usage.get(fr, 0), val)
                if s is not None:
                    quota_reasons.extend(s.reasons)
                    status.reasons.extend(s.reasons)
                    no_fit_reason = _most_severe(no_fit_reason, s.no_fit_reason)
                max_borrow = max(max_borrow, borrow)
                mode = (pm, borrow)
                if _is_preferred(rep, mode, preference):
                    rep = mode
                if rep[0] == _PM_NO_FIT:
                    # v0.17: the flavor does not fit, its other resources are not checked (newer Kueue checks
                    # them all and lists every reason); Kueue meets them in Go's map order, here in resource order.
                    break
                assignments[rname] = FlavorAssignment(fname, _PM_TO_MODE[pm], borrow)
            attempts.append(
                FlavorAssignmentAttempt(
                    fname,
                    _PM_TO_MODE[rep[0]],
                    max_borrow,
                    _PM_TO_POSSIBILITY[rep[0]],
                    sorted(quota_reasons),
                    no_fit_reason,
                )
            )
            if not _should_try_next_flavor(rep, fungibility):
                best, best_mode = assignments, rep
                break
            if _is_preferred(rep, best_mode, preference):
                best, best_mode = assignments, rep
        if best is not None:
            tried_idx = -1 if attempted == len(flavors) - 1 else attempted
            for a in best.values():
                a.tried_flavor_idx = tried_idx
        if best_mode[0] == _PM_FIT:
            return best, None, attempts
        return best, status, attempts

    def assign(self, pod_sets: Sequence[PodSetRequest], counts: Sequence[int] | None) -> Assignment:
        covers_pods = "pods" in self.node.rg_of
        totals: list[dict[str, int]] = []
        ps_assignments: list[PodSetAssignment] = []
        groups: dict[str, list[int]] = {}
        for i, ps in enumerate(pod_sets):
            # PodSetResources.ScaledTo: a pod set with no pod left (all reclaimable) keeps its count of 0.
            count = counts[i] if counts is not None and ps.count != 0 else ps.count
            req = {r: v * count for r, v in ps.requests.items()}
            if covers_pods:
                req["pods"] = count
            req = _in_resource_order(req)
            totals.append(req)
            ps_assignments.append(PodSetAssignment(ps.name, count, {}, req))
            groups.setdefault(ps.group if ps.group is not None else str(i), []).append(i)

        assignment = Assignment(self.node.name, [], {})
        for ps_ids in groups.values():
            requests: dict[str, int] = {}
            for i in ps_ids:
                for r, v in totals[i].items():
                    requests[r] = requests.get(r, 0) + v
            if len(ps_ids) > 1:
                requests = _in_resource_order(requests)
            considered: dict[str, FlavorAssignmentAttempt] = {}
            group_flavors: dict[str, FlavorAssignment] | None = {}
            group_status = _Status()
            for res_name, quantity in requests.items():
                if res_name not in self.node.rg_of and (quantity == 0 or self.ignore_undeclared):
                    continue
                assert group_flavors is not None
                if res_name in group_flavors:
                    continue
                flavors, status, attempts = self.find_flavor(ps_ids, pod_sets, requests, res_name, assignment.usage)
                self._merge_attempts(considered, attempts, res_name)
                if not flavors and requests:
                    group_flavors = None
                    group_status = status if status is not None else _Status()
                    break
                group_flavors.update(flavors or {})
                if status is not None:
                    group_status.reasons.extend(status.reasons)
            final = sorted(considered.values(), key=lambda a: a.flavor)
            failed = False
            for i in ps_ids:
                psa = ps_assignments[i]
                if group_flavors and totals[i]:
                    psa.flavors = {r: a for r, a in group_flavors.items() if r in totals[i]}
                psa.reasons = group_status.reasons
                psa.attempts = final
                self._append(assignment, totals[i], psa)
                if totals[i] and not psa.flavors:
                    failed = True
            if failed:
                self._resolve_no_fit_reason(assignment)
                return assignment
        self._resolve_no_fit_reason(assignment)
        apply_topology(assignment, pod_sets, self.cq, self.flavors, self.tas)
        return assignment

    @staticmethod
    def _append(assignment: Assignment, requests: Mapping[str, int], psa: PodSetAssignment) -> None:
        tried: dict[str, int] = {}
        assignment.pod_sets.append(psa)
        usage = assignment.usage
        for res, a in psa.flavors.items():
            assignment.borrowing = max(assignment.borrowing, a.borrow)
            fr = (a.flavor, res)
            usage[fr] = _add(usage.get(fr, 0), requests.get(res, 0))
            tried[res] = a.tried_flavor_idx
        assignment.last_tried_flavor_idx.append(tried)

    def _merge_attempts(
        self, dst: dict[str, FlavorAssignmentAttempt], src: list[FlavorAssignmentAttempt], res_name: str
    ) -> None:
        """``mergeFlavorAttemptsForResource``: keep the worst outcome per flavor across the group's resources."""
        for at in src:
            existing = dst.get(at.flavor)
            if existing is None:
                dst[at.flavor] = FlavorAssignmentAttempt(
                    at.flavor, at.mode, at.borrow, at.preemption_possibility, sorted(set(at.reasons)), at.no_fit_reason
                )
                continue
            possibility = existing.preemption_possibility
            new = at.preemption_possibility
            if new is not None and (possibility is None or new < possibility):
                possibility = new
            dst[at.flavor] = FlavorAssignmentAttempt(
                at.flavor,
                min(at.mode, existing.mode),
                max(at.borrow, existing.borrow),
                possibility,
                sorted(set(existing.reasons) | set(at.reasons)),
                _most_severe(existing.no_fit_reason, at.no_fit_reason),
            )
        if src:
            group = self.node.rg_of.get(res_name)
            group_flavors = set(group.flavors) if group is not None else set()
            present = {a.flavor for a in src}
            for flavor, at in dst.items():
                if flavor in group_flavors and flavor not in present:
                    at.mode = FlavorAssignmentMode.NO_FIT
                    at.reasons = sorted(set(at.reasons) | {f"flavor {flavor} does not provide resource {res_name}"})
                    at.no_fit_reason = NO_MATCHING_FLAVOR

    def _resolve_no_fit_reason(self, assignment: Assignment) -> None:
        """``resolveNoFitReason``: the least severe blocker per resource group, the most severe across groups."""
        if assignment.mode is not FlavorAssignmentMode.NO_FIT:
            return
        overall = ""
        groups = self.node.groups
        for ps in assignment.pod_sets:
            if ps.mode is not FlavorAssignmentMode.NO_FIT:
                continue
            if not ps.attempts:
                overall = _most_severe(overall, NO_MATCHING_FLAVOR)
                continue
            per_group: dict[int, str] = {}
            for i, at in enumerate(ps.attempts):
                if at.mode is not FlavorAssignmentMode.NO_FIT:
                    continue
                indices = [g for g, rg in enumerate(groups) if at.flavor in rg.flavors] or [-1 - i]
                for g in indices:
                    existing = per_group.get(g)
                    if existing is None or _SEVERITY.get(at.no_fit_reason, 0) < _SEVERITY.get(existing, 0):
                        per_group[g] = at.no_fit_reason
            reason = ""
            for r in per_group.values():
                reason = _most_severe(reason, r)
            overall = _most_severe(overall, reason)
        assignment.no_fit_reason = overall


def assign_flavors(
    tree: QuotaTree,
    cluster_queue: str,
    pod_sets: Sequence[PodSetRequest],
    resource_flavors: Mapping[str, ResourceFlavorSpec],
    *,
    priority: int = 0,
    queue_order_time: float = 0.0,
    now: float = math.inf,
    counts: Sequence[int] | None = None,
    last_tried_flavor_idx: Sequence[Mapping[str, int]] | None = None,
    ignore_undeclared_resources: bool = False,
    oracle: PreemptionOracle | None = None,
    fair_sharing: FairSharingConfig | None = None,
    tas: TASCache | None = None,
) -> Assignment:
    """Assign a flavor to every requested resource of every PodSet, as Kueue's flavor assigner does.

    Resource groups are walked in Kueue's resource order; for each, the group's flavors are tried in spec order
    (from ``last_tried_flavor_idx`` + 1 when resuming a scan), skipping flavors whose taints are not tolerated
    or whose labels the PodSet's node selector / required affinity rejects. Each resource's mode is ``Fit``
    (unused quota, possibly borrowed), ``Preempt`` (quota exists but is in use, and preemption could free it) or
    ``NoFit``; flavor fungibility decides whether to stop at a flavor that needs borrowing or preemption.

    Preemption feasibility comes from ``oracle``; by default, a classical preemption simulation over the
    workloads recorded in ``tree`` for a preemptor with ``priority`` and ``queue_order_time``. ``counts``
    overrides the PodSet counts (partial admission), except a count of 0. Resources the ClusterQueue does not cover
    make the workload ``NoFit`` unless their request is zero or ``ignore_undeclared_resources``
    (``QuotaCheckStrategy: IgnoreUndeclared``) is set. ``fair_sharing`` (Kueue's Configuration) lets the
    ClusterQueue preempt while borrowing when it reclaims within the cohort, and preemption follows fair sharing;
    ``tas`` (the cluster's TAS state) places the pod sets that ask for a topology (:mod:`.tasassign`).
    """
    if oracle is None:

        def default_oracle(t: QuotaTree, cq: str, fr: FlavorResource, qty: int) -> tuple[PreemptionPossibility, int]:
            return simulate_preemption(
                t,
                cq,
                fr,
                qty,
                priority=priority,
                queue_order_time=queue_order_time,
                now=now,
                fair_sharing=fair_sharing,
                tas=tas,
            )

        oracle = default_oracle
    assigner = _Assigner(
        tree,
        cluster_queue,
        resource_flavors,
        oracle,
        last_tried_flavor_idx,
        ignore_undeclared_resources,
        fair_sharing,
        tas,
    )
    return assigner.assign(pod_sets, counts)
