"""Flavor assignment of the simulated Kueue: which flavor each requested resource of a Workload gets.

Follows Kueue v0.17 ``pkg/scheduler/flavorassigner/flavorassigner.go`` with the FlavorFungibility gate on (its
default):

* pod sets are assigned in order, grouped by ``topologyRequest.podSetGroupName`` (a group gets the same flavors);
  the ``pods`` resource is requested (one per pod) when the ClusterQueue covers it;
* per resource group, the group's flavors are tried in spec order, resuming after the flavor tried last time
  (``LastAssignment``, dropped when the ClusterQueue's generation moved on); a flavor is skipped when one of
  its ``NoSchedule``/``NoExecute`` taints is not tolerated by the pod or the flavor, or when the pod's node
  selector or required node affinity, reduced to the label keys the group's flavors define (``flavorSelector``),
  rejects the flavor's labels;
* each resource is ``fitsResourceQuota``: ``NoFit`` above the potential available quota, ``Fit`` within what is
  available now (with its borrowing height), otherwise preemption is simulated (``PreemptionOracle``) when the
  request is within nominal quota, a higher Cohort could be reclaimed from, or ``borrowWithinCohort`` allows it;
* a flavor's representative mode is its worst resource (``isPreferred``); ``shouldTryNextFlavor`` applies
  ``whenCanBorrow`` / ``whenCanPreempt``; the best flavor seen wins when none stops the search.

Resources are walked in name order where Kueue walks a Go map (random order); only the wording of a pending
message with several failing resources can differ. With fair sharing on, a ClusterQueue that reclaims within its
Cohort may preempt while borrowing. Topology Aware Scheduling is the last step (:mod:`.tasstep`); workload slices
are not modelled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from .quota import Node, QuotaTree, available, lowest_fitting_subtree, potential_available
from .requests import FlavorResource, PodSet, quantity_string
from .specs import TRY_NEXT_FLAVOR, ClusterQueueSpec, FlavorSpec, ResourceGroup
from .tas import FlavorTopology
from .tasnodes import TasPodSet, assignment_to_api
from .tasstate import TasState
from .tasstep import domains_fit, flavor_mismatch, tas_only, tas_views, topology_step

__all__ = [
    "NO_CANDIDATES",
    "PREEMPT_POSSIBLE",
    "RECLAIM_POSSIBLE",
    "Assignment",
    "FlavorChoice",
    "Mode",
    "Oracle",
    "PodSetAssignment",
    "assign_flavors",
]


class Mode(IntEnum):
    """``FlavorAssignmentMode``, worst to best."""

    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


# PreemptionPossibility (preemption/common/types.go)
NO_CANDIDATES, PREEMPT_POSSIBLE, RECLAIM_POSSIBLE = 0, 1, 2
# preemptionMode, worst to best
_NO_FIT, _NO_PREEMPTION_CANDIDATES, _PREEMPT, _RECLAIM, _FIT = range(5)
_TO_MODE = {
    _NO_FIT: Mode.NO_FIT,
    _NO_PREEMPTION_CANDIDATES: Mode.PREEMPT,
    _PREEMPT: Mode.PREEMPT,
    _RECLAIM: Mode.PREEMPT,
    _FIT: Mode.FIT,
}
_FROM_POSSIBILITY = {NO_CANDIDATES: _NO_PREEMPTION_CANDIDATES, PREEMPT_POSSIBLE: _PREEMPT, RECLAIM_POSSIBLE: _RECLAIM}
_WORST_BORROW = 1 << 62

Oracle = Callable[[FlavorResource, int], tuple[int, int]]
"""``SimulatePreemption``: for a (flavor, resource) and a quantity, the preemption possibility and the borrowing
height after the preemptions."""


@dataclass
class FlavorChoice:
    """``FlavorAssignment``: the flavor given to one resource, its mode and borrowing height."""

    flavor: str
    mode: Mode
    borrow: int = 0
    tried: int = 0


@dataclass
class PodSetAssignment:
    """Flavors per resource of one pod set; ``requests`` are its totals (``pods`` included when covered)."""

    name: str
    count: int
    requests: dict[str, int]
    flavors: dict[str, FlavorChoice] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def is_fit(self) -> bool:
        return self.error is None and not self.reasons

    @property
    def mode(self) -> Mode:
        """``PodSetAssignment.RepresentativeMode``."""
        if self.is_fit:
            return Mode.FIT
        if self.error is not None or not self.flavors:
            return Mode.NO_FIT
        return min(c.mode for c in self.flavors.values())

    def message(self) -> str:
        return self.error if self.error is not None else ", ".join(sorted(self.reasons))

    def to_api(
        self, topology: tuple[tuple[str, ...], list[tuple[tuple[str, ...], int]]] | None = None
    ) -> dict[str, Any]:
        """``toAPI``: flavors and resource usage of the assigned resources, the count, the topology assignment."""
        out: dict[str, Any] = {
            "name": self.name,
            "flavors": {res: c.flavor for res, c in self.flavors.items()},
            "resourceUsage": {res: quantity_string(res, self.requests.get(res, 0)) for res in self.flavors},
            "count": self.count,
        }
        if topology is not None:
            out["topologyAssignment"] = assignment_to_api(*topology)
        return out


@dataclass
class Assignment:
    """The outcome for one Workload in one ClusterQueue (``flavorassigner.Assignment``)."""

    cluster_queue: str
    pod_sets: list[PodSetAssignment] = field(default_factory=list)
    borrowing: int = 0
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    #: ``LastState``: per pod set, the index of the flavor tried last per resource (-1: start over).
    tried: list[dict[str, int]] = field(default_factory=list)
    generation: int = 0
    #: The representative mode the TAS step set (Kueue caches it and then overrides it there).
    override: Mode | None = None
    #: TAS: per TAS flavor, the pod sets it places; per pod set, its placement (levels, domains).
    tas_requests: dict[str, list[TasPodSet]] = field(default_factory=dict)
    topology: dict[str, tuple[tuple[str, ...], list[tuple[tuple[str, ...], int]]]] = field(default_factory=dict)

    @property
    def mode(self) -> Mode:
        """``RepresentativeMode``: the worst pod set (``NoFit`` with none)."""
        if not self.pod_sets:
            return Mode.NO_FIT
        if self.override is not None:
            return self.override
        return min(ps.mode for ps in self.pod_sets)

    def message(self) -> str:
        """``Message``: why the pod sets that do not fit plainly do not."""
        parts = []
        for ps in self.pod_sets:
            if ps.is_fit:
                continue
            if ps.error is not None:
                return f"failed to assign flavors to pod set {ps.name}: {ps.error}"
            parts.append(f"couldn't assign flavors to pod set {ps.name}: {ps.message()}")
        return "; ".join(parts)

    def needs_preemption(self) -> set[FlavorResource]:
        """``flavorResourcesNeedPreemption``."""
        return {(c.flavor, res) for ps in self.pod_sets for res, c in ps.flavors.items() if c.mode is Mode.PREEMPT}

    def quota_usage(self) -> dict[FlavorResource, int]:
        """``TotalRequestsFor``: the usage preemption has to make room for (zero requests left out)."""
        return {fr: v for fr, v in self.usage.items() if v != 0}

    def pending_flavors(self) -> bool:
        """``PendingFlavors``: a flavor search stopped before the last flavor of some resource."""
        return any(idx != -1 for ps in self.tried for idx in ps.values())

    def to_admission(self) -> list[dict[str, Any]]:
        return [ps.to_api(self.topology.get(ps.name)) for ps in self.pod_sets]

    def tas_fits(self, views: Mapping[str, FlavorTopology]) -> bool:
        """``ClusterQueueSnapshot.Fits``' TAS half: each placed pod set's pods (its TAS flavor's quota usage per pod,
        ``ComputeTASNetUsage``) still fit their domains."""
        for ps in self.pod_sets:
            placed = self.topology.get(ps.name)
            if placed is None or not ps.count:
                continue
            for flavor in {c.flavor for c in ps.flavors.values()} & set(views):
                per_pod = {
                    r: v // ps.count
                    for r, v in ps.requests.items()
                    if r in ps.flavors and ps.flavors[r].flavor in views
                }
                if not domains_fit(views[flavor], per_pod, placed[1]):
                    return False
        return True

    def no_fit_reason(self) -> str:
        """The QuotaReserved reason newer Kueue gives a ``NoFit`` workload (used only when the simulator plays a
        Kueue with granular pending reasons): no flavor matching a pod set, a request above the maximum
        capacity, else waiting for quota."""
        messages = [r for ps in self.pod_sets if ps.mode is Mode.NO_FIT for r in ps.reasons]
        if any(ps.mode is Mode.NO_FIT and not ps.flavors and _only_mismatches(ps.reasons) for ps in self.pod_sets):
            return "NoMatchingFlavor"
        if any(r.startswith("insufficient quota for ") for r in messages):
            return "ExceedsMaxQuota"
        return "WaitingForQuota"


def _only_mismatches(reasons: Sequence[str]) -> bool:
    marks = ("untolerated taint", "doesn't match node affinity", "not found", "unavailable in ClusterQueue")
    return bool(reasons) and all(any(m in r for m in marks) for r in reasons)


# --------------------------------------------------------------------------------------------------------------
# Flavor matching: taints and the node-affinity selector
# --------------------------------------------------------------------------------------------------------------


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``Toleration.ToleratesTaint`` with the numeric ``Lt``/``Gt`` operators (Kueue enables them)."""
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    if key and key != (taint.get("key") or ""):
        return False
    op = toleration.get("operator") or ""
    if op in ("", "Equal"):
        return (toleration.get("value") or "") == (taint.get("value") or "")
    if op == "Exists":
        return True
    if op in ("Lt", "Gt"):
        try:
            mine, theirs = int(str(toleration.get("value") or "")), int(str(taint.get("value") or ""))
        except ValueError:
            return False
        return theirs < mine if op == "Lt" else theirs > mine
    return False


def _untolerated_taint(taints: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]) -> str | None:
    """``FindMatchingUntoleratedTaint`` over ``NoSchedule``/``NoExecute`` taints, printed as Go prints the struct."""
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            added = taint.get("timeAdded") or "<nil>"
            return f"{{{taint.get('key') or ''} {taint.get('value') or ''} {taint.get('effect') or ''} {added}}}"
    return None


def _requirement_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op = str(expr.get("key") or ""), expr.get("operator")
    values = [str(v) for v in expr.get("values") or ()]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def flavor_selector_matches(pod_spec: Mapping[str, Any], keys: set[str], labels: Mapping[str, str]) -> bool:
    """``flavorSelector`` then ``RequiredNodeAffinity.Match`` against a node carrying the flavor's labels.

    The pod's node selector and required node-affinity expressions are kept only for ``keys`` (the label keys of
    all flavors of the resource group); a term left empty makes the affinity match anything.
    """
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if key in keys and labels.get(key) != value:
            return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms: list[list[Mapping[str, Any]]] = []
    for term in required.get("nodeSelectorTerms") or ():
        kept = [e for e in term.get("matchExpressions") or () if e.get("key") in keys]
        if not kept:
            return True
        terms.append(kept)
    if not terms:
        return True
    return any(all(_requirement_matches(e, labels) for e in term) for term in terms)


# --------------------------------------------------------------------------------------------------------------
# The assigner
# --------------------------------------------------------------------------------------------------------------


def _is_preferred(a: tuple[int, int], b: tuple[int, int], preference: str | None) -> bool:
    """``isPreferred`` (v0.17) over (preemption mode, borrowing level)."""
    if a[0] == _NO_FIT:
        return False
    if b[0] == _NO_FIT:
        return True
    if preference == "PreemptionOverBorrowing":
        return a[1] < b[1] if a[1] != b[1] else a[0] > b[0]
    return a[0] > b[0] if a[0] != b[0] else a[1] < b[1]


class _Assigner:
    """``FlavorAssigner`` for one Workload against one ClusterQueue of the tree."""

    def __init__(
        self,
        tree: QuotaTree,
        spec: ClusterQueueSpec,
        pod_sets: Sequence[PodSet],
        flavors: Mapping[str, FlavorSpec],
        oracle: Oracle,
        last: Sequence[Mapping[str, int]] | None,
        fair: bool = False,
        tas: TasState | None = None,
    ) -> None:
        self.tree = tree
        self.node: Node = tree.node(spec.name)
        self.spec = spec
        self.pod_sets = pod_sets
        self.flavors = flavors
        self.oracle = oracle
        self.last = last
        self.fair = fair
        self.tas = tas
        self.only_tas = tas_only(spec, flavors)
        self.views: dict[str, FlavorTopology] | None = None

    def _label_keys(self, rg: ResourceGroup) -> set[str]:
        keys: set[str] = set()
        for name in rg.flavors:
            flavor = self.flavors.get(name)
            if flavor is not None:
                keys.update(flavor.node_labels)
        return keys

    def _check_flavor(self, name: str, ps_ids: Sequence[int], keys: set[str], covered: frozenset[str]) -> str | None:
        """``checkFlavorForPodSets``: why the flavor cannot serve these pod sets, or ``None``."""
        flavor = self.flavors.get(name)
        if flavor is None:
            return f"flavor {name} not found"
        for i in ps_ids:
            if self.views is None:
                self.views = tas_views(self.spec, self.flavors, self.tas)
            tas_reason = flavor_mismatch(self.pod_sets[i], flavor, covered, self.only_tas, self.views)
            if tas_reason is not None:
                return tas_reason
            spec = self.pod_sets[i].pod_spec
            taint = _untolerated_taint(flavor.node_taints, [*(spec.get("tolerations") or ()), *flavor.tolerations])
            if taint is not None:
                return f"untolerated taint {taint} in flavor {name}"
            if not flavor_selector_matches(spec, keys, flavor.node_labels):
                return f"flavor {name} doesn't match node affinity"
        return None

    def _fits_quota(self, fr: FlavorResource, assumed: int, request: int) -> tuple[int, int, str | None]:
        """``fitsResourceQuota``: preemption mode, borrowing height and the reason when not a plain fit."""
        node = self.node
        free = max(0, available(node, fr))
        capacity = potential_available(node, fr)
        value = assumed + request
        flavor, res = fr
        if value > capacity:
            return (
                _NO_FIT,
                0,
                f"insufficient quota for {res} in flavor {flavor}, previously considered podsets requests "
                f"({quantity_string(res, assumed)}) + current podset request ({quantity_string(res, request)}) > "
                f"maximum capacity ({quantity_string(res, capacity)})",
            )
        borrow, may_reclaim = lowest_fitting_subtree(node, fr, value)
        if value <= free:
            return _FIT, borrow, None
        reason = (
            f"insufficient unused quota for {res} in flavor {flavor}, {quantity_string(res, value - free)} more needed"
        )
        nominal = self.spec.quotas.get(fr)
        can_preempt_while_borrowing = self.spec.preemption.borrow_within_cohort != "Never" or (
            self.fair and self.spec.preemption.reclaim_within_cohort != "Never"
        )
        if value <= (nominal.nominal if nominal is not None else 0) or may_reclaim or can_preempt_while_borrowing:
            possibility, borrow_after = self.oracle(fr, value)
            return _FROM_POSSIBILITY[possibility], borrow_after, reason
        return _NO_FIT, borrow, reason

    def _should_try_next(self, mode: tuple[int, int]) -> bool:
        if mode[0] in (_NO_FIT, _NO_PREEMPTION_CANDIDATES):
            return True
        ff = self.spec.fungibility
        if mode[0] in (_PREEMPT, _RECLAIM) and ff.when_can_preempt == TRY_NEXT_FLAVOR:
            return True
        return mode[1] != 0 and ff.when_can_borrow == TRY_NEXT_FLAVOR

    def _find_flavor(
        self, ps_ids: Sequence[int], requests: Mapping[str, int], res_name: str, usage: Mapping[FlavorResource, int]
    ) -> tuple[dict[str, FlavorChoice], list[str], str | None]:
        """``findFlavorForPodSets``: the flavors for ``res_name``'s group, the reasons, and an error."""
        rg = self.spec.group_of(res_name)
        if rg is None:
            return {}, [f"resource {res_name} unavailable in ClusterQueue"], None
        reasons: list[str] = []
        wanted = sorted((r, v) for r, v in requests.items() if r in rg.covered)
        keys = self._label_keys(rg)
        best: dict[str, FlavorChoice] = {}
        best_mode = (_NO_FIT, _WORST_BORROW)
        start = 0
        if self.last is not None and ps_ids[0] < len(self.last) and res_name in self.last[ps_ids[0]]:
            start = self.last[ps_ids[0]][res_name] + 1
        attempted = -1
        preference = self.spec.fungibility.preference
        for idx in range(start, len(rg.flavors)):
            attempted = idx
            name = rg.flavors[idx]
            mismatch = self._check_flavor(name, ps_ids, keys, rg.covered)
            if mismatch is not None:
                reasons.append(mismatch)
                continue
            chosen: dict[str, FlavorChoice] = {}
            mode = (_FIT, 0)
            for res, value in wanted:
                fr = (name, res)
                pmode, borrow, reason = self._fits_quota(fr, usage.get(fr, 0), value)
                if reason is not None:
                    reasons.append(reason)
                if _is_preferred(mode, (pmode, borrow), preference):
                    mode = (pmode, borrow)
                if mode[0] == _NO_FIT:
                    break
                chosen[res] = FlavorChoice(name, _TO_MODE[pmode], borrow)
            if not self._should_try_next(mode):
                best, best_mode = chosen, mode
                break
            if _is_preferred(mode, best_mode, preference):
                best, best_mode = chosen, mode
        for choice in best.values():
            choice.tried = -1 if attempted == len(rg.flavors) - 1 else attempted
        if best_mode[0] == _FIT:
            return best, [], None
        return best, reasons, None

    def assign(self, counts: Sequence[int] | None) -> Assignment:
        """``assignFlavors``."""
        covers_pods = self.spec.group_of("pods") is not None
        assignment = Assignment(self.spec.name, generation=self.node.generation)
        totals: list[dict[str, int]] = []
        psas: list[PodSetAssignment] = []
        groups: dict[str, list[int]] = {}
        for i, ps in enumerate(self.pod_sets):
            scaled = ps.scaled(counts[i]) if counts is not None else ps
            req = scaled.totals()
            if covers_pods:
                req["pods"] = scaled.count
            totals.append(req)
            psas.append(PodSetAssignment(ps.name, scaled.count, dict(req)))
            groups.setdefault(ps.group if ps.group is not None else str(i), []).append(i)
        for ps_ids in groups.values():
            requests: dict[str, int] = {}
            for i in ps_ids:
                for res, value in totals[i].items():
                    requests[res] = requests.get(res, 0) + value
            group_flavors: dict[str, FlavorChoice] | None = {}
            group_reasons: list[str] = []
            group_error: str | None = None
            for res in sorted(requests):
                if requests[res] == 0 and self.spec.group_of(res) is None:
                    continue
                assert group_flavors is not None
                if res in group_flavors:
                    continue
                flavors, reasons, error = self._find_flavor(ps_ids, requests, res, assignment.usage)
                if error is not None or not flavors:
                    group_flavors, group_reasons, group_error = None, reasons, error
                    break
                group_flavors.update(flavors)
                group_reasons += reasons
            failed = False
            for i in ps_ids:
                psa = psas[i]
                psa.flavors = {r: c for r, c in (group_flavors or {}).items() if r in totals[i]}
                psa.reasons = list(group_reasons)
                psa.error = group_error
                self._append(assignment, totals[i], psa)
                if psa.error is not None or (totals[i] and not psa.flavors):
                    failed = True
            if failed:
                return assignment
        topology_step(assignment, self.spec, self.pod_sets, self.flavors, self.tas, Mode)
        return assignment

    @staticmethod
    def _append(assignment: Assignment, requests: Mapping[str, int], psa: PodSetAssignment) -> None:
        tried: dict[str, int] = {}
        assignment.pod_sets.append(psa)
        for res, choice in psa.flavors.items():
            assignment.borrowing = max(assignment.borrowing, choice.borrow)
            fr = (choice.flavor, res)
            assignment.usage[fr] = assignment.usage.get(fr, 0) + requests.get(res, 0)
            tried[res] = choice.tried
        assignment.tried.append(tried)


def assign_flavors(
    tree: QuotaTree,
    spec: ClusterQueueSpec,
    pod_sets: Sequence[PodSet],
    flavors: Mapping[str, FlavorSpec],
    oracle: Oracle,
    *,
    counts: Sequence[int] | None = None,
    last: Sequence[Mapping[str, int]] | None = None,
    fair: bool = False,
    tas: TasState | None = None,
) -> Assignment:
    """``FlavorAssigner.Assign``: a flavor for every requested resource of every pod set (``counts`` override the
    pod set counts, for partial admission; ``last`` is the previous attempt's state, see the module docstring;
    ``fair``: fair sharing is on; ``tas``: the cluster's TAS state)."""
    return _Assigner(tree, spec, pod_sets, flavors, oracle, last, fair, tas).assign(counts)
