"""Kueue's quota arithmetic, flavor assignment and classical preemption, in pure Python.

One model serves two callers that must agree with a real Kueue to the unit:

* the simulator's Kueue controller, which admits workloads on simulated worker clusters as Kueue would, and
* the dispatcher's placement engine, which scores worker clusters by what the ClusterQueue behind a queue name
  would still admit (per flavor, with cohort borrowing).

Everything here follows the Kueue source at the commit whose CRDs the project ships
(``pkg/cache/scheduler/resource_node.go``, ``clusterqueue_snapshot.go``, ``pkg/scheduler/flavorassigner`` and
``pkg/scheduler/preemption`` with its ``classical`` and ``common`` packages). It is a re-implementation of the
behaviour, not a transliteration: names follow Python conventions and hot paths are flattened.

Units are Kueue's ``int64`` values: milli-units for ``cpu``, whole units (rounded up) for everything else.
Quotas that overflow ``int64`` become :data:`UNLIMITED`, and quota arithmetic saturates exactly as Kueue's
``resources.Amount`` does, so "1E" CPU quotas neither wrap nor collapse to zero.

Modelled:

* ClusterQueue / Cohort / ResourceFlavor specs from v1beta2 objects (and the v1beta1 spellings);
* the quota tree: nominal quota, borrowing and lending limits, hierarchical cohorts with their own quota,
  implicit cohorts (a ClusterQueue naming a Cohort that has no object), incremental usage bookkeeping,
  ``available`` / ``potentialAvailable`` and the per-ClusterQueue usage report;
* flavor assignment with flavor fungibility (``whenCanBorrow``, ``whenCanPreempt``, ``preference``),
  taints/tolerations, node selector and required node affinity against flavor labels, PodSet groups,
  the ``pods`` resource, the resume-from-last-tried-flavor bookkeeping, Kueue's reason strings and the
  ``NoFit`` reason (``NoMatchingFlavor`` / ``ExceedsMaxQuota`` / ``WaitingForQuota``);
* classical preemption: candidate collection (within the ClusterQueue, reclaim within the cohort,
  hierarchical reclaim, ``borrowWithinCohort`` with its priority threshold), Kueue's candidate ordering and the
  minimal-set heuristic (remove candidates until the workload fits, then add them back in reverse order);
* the pending-queue ordering and the ``StrictFIFO`` / ``BestEffortFIFO`` semantics.

Deliberately left out: Topology Aware Scheduling, fair sharing (DRS-based ordering and fair preemption),
admission fair sharing, admission checks, partial admission's count search (``assign_flavors`` accepts
explicit counts), elastic workload slices, concurrent admission variants, the priority-boost annotation
(pass the effective priority) and resource transformations / excluded resource prefixes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum, StrEnum
from fractions import Fraction
from typing import Any, Final

from dispatcher.quantity import format_kueue_value, format_quantity, kueue_value, parse_quantity

__all__ = [
    "EXCEEDS_MAX_QUOTA",
    "IN_CLUSTER_QUEUE",
    "IN_COHORT_RECLAIMATION",
    "IN_COHORT_RECLAIM_WHILE_BORROWING",
    "NO_MATCHING_FLAVOR",
    "UNLIMITED",
    "WAITING_FOR_QUOTA",
    "AdmittedWorkload",
    "Assignment",
    "BorrowWithinCohort",
    "ClusterQueueSpec",
    "CohortSpec",
    "FlavorAssignment",
    "FlavorAssignmentAttempt",
    "FlavorAssignmentMode",
    "FlavorFungibility",
    "FlavorQuotasSpec",
    "FlavorResource",
    "NodeSelectorRequirement",
    "PodSetAssignment",
    "PodSetRequest",
    "PreemptionOracle",
    "PreemptionPolicy",
    "PreemptionPossibility",
    "PreemptionSpec",
    "PreemptionTarget",
    "QueueingStrategy",
    "QuotaReport",
    "QuotaTree",
    "ResourceFlavorSpec",
    "ResourceGroupSpec",
    "ResourceQuotaSpec",
    "Taint",
    "Toleration",
    "assign_flavors",
    "candidates_order_key",
    "find_preemption_targets",
    "find_untolerated_taint",
    "fit_checks",
    "fits_as_before",
    "flavor_matches_pod_set",
    "format_amount",
    "pending_order_key",
    "pod_requests",
    "preemption_targets",
    "queue_order_timestamp",
    "quota_amount",
    "simulate_preemption",
    "workload_pod_sets",
]

FlavorResource = tuple[str, str]
"""``(flavor, resource)``, Kueue's ``resources.FlavorResource``."""

UNLIMITED: Final = 2**63 - 1
"""Kueue's ``resources.Unlimited``: the ``math.MaxInt64`` sentinel for quotas that overflow ``int64``."""
_MIN64: Final = -(2**63)
# Quotas or usages at or above this magnitude switch a tree to saturating arithmetic; below it plain ints are
# exact, because no realistic sum of such values reaches int64's bounds.
_EXACT_THRESHOLD: Final = 2**53

# Workload QuotaReserved reasons (apis/kueue/v1beta2/workload_types.go).
NO_MATCHING_FLAVOR: Final = "NoMatchingFlavor"
EXCEEDS_MAX_QUOTA: Final = "ExceedsMaxQuota"
WAITING_FOR_QUOTA: Final = "WaitingForQuota"
# Preemption reasons (the Preempted condition's reason).
IN_CLUSTER_QUEUE: Final = "InClusterQueue"
IN_COHORT_RECLAIMATION: Final = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING: Final = "InCohortReclaimWhileBorrowing"

_MAY_STOP_SEARCH: Final = "MayStopSearch"
_TRY_NEXT_FLAVOR: Final = "TryNextFlavor"
_BORROWING_OVER_PREEMPTION: Final = "BorrowingOverPreemption"
_PREEMPTION_OVER_BORROWING: Final = "PreemptionOverBorrowing"


# --------------------------------------------------------------------------------------------------------------
# Amount arithmetic (pkg/resources/amount.go)
# --------------------------------------------------------------------------------------------------------------


def _add(a: int, b: int) -> int:
    """``Amount.Add``: Unlimited is absorbing and bounded sums saturate instead of wrapping."""
    if UNLIMITED in (a, b):
        return UNLIMITED
    s = a + b
    if s > UNLIMITED:
        return UNLIMITED
    if s < _MIN64:
        return _MIN64
    return s


def _sub(a: int, b: int) -> int:
    """``Amount.Sub``: Unlimited-Unlimited is 0, bounded-Unlimited is MinInt64 ("nothing available")."""
    if a == UNLIMITED:
        return 0 if b == UNLIMITED else UNLIMITED
    if b == UNLIMITED:
        return _MIN64
    d = a - b
    if d > UNLIMITED:
        return UNLIMITED
    if d < _MIN64:
        return _MIN64
    return d


def quota_amount(resource: str, quantity: str | int | float | Fraction) -> int:
    """A quota quantity as Kueue stores it (``resources.AmountFromQuantity``).

    Quantities whose canonical value would overflow ``int64`` are :data:`UNLIMITED` rather than wrapped, which
    is why a "1E" CPU quota admits everything instead of nothing.
    """
    amount = quantity if isinstance(quantity, Fraction) else parse_quantity(quantity)
    if resource == "cpu":
        if amount >= UNLIMITED // 1000:
            return UNLIMITED
    elif amount >= UNLIMITED:
        return UNLIMITED
    return kueue_value(resource, amount)


def format_amount(resource: str, value: int) -> str:
    """Print a Kueue value the way Kueue's ``ResourceFormatter`` does in its messages.

    ``cpu`` is printed from milli-units; memory, ephemeral storage and hugepages use binary suffixes only when
    the value is an exact multiple of 1024 (Kueue re-parses the binary string, so ``1000000`` prints ``1M``).
    """
    if value == UNLIMITED:
        return "<unlimited>"
    if resource == "cpu":
        return format_kueue_value("cpu", value)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        if value % 1024 == 0 and abs(value) >= 1024:
            return format_quantity(Fraction(value), binary=True)
        return format_quantity(Fraction(value))
    return format_quantity(Fraction(value))


# --------------------------------------------------------------------------------------------------------------
# Object parsing helpers
# --------------------------------------------------------------------------------------------------------------


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _name(obj: Mapping[str, Any], kind: str) -> str:
    name = _str(_map(obj.get("metadata")).get("name"))
    if not name:
        raise ValueError(f"{kind} has no metadata.name")
    return name


def _timestamp(value: object) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch; ``None`` when absent or unparsable."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------------------------
# Specs
# --------------------------------------------------------------------------------------------------------------


class PreemptionPolicy(StrEnum):
    """``kueue.PreemptionPolicy`` values."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
    ANY = "Any"


class QueueingStrategy(StrEnum):
    """How a ClusterQueue orders and blocks its pending workloads.

    Both strategies order pending workloads by :func:`pending_order_key` (higher priority first, then the
    older queue-order timestamp). They differ in what an inadmissible head does:

    * ``StrictFIFO``: the head blocks the queue. A workload that cannot be admitted stays at the head and is
      retried (requeued immediately) until it fits; nothing behind it is considered meanwhile.
    * ``BestEffortFIFO`` (the default): an inadmissible head is parked among the inadmissible workloads and the
      next workload becomes the head. Parked workloads return to the queue when the cluster changes (a workload
      finishes, quota changes), and then compete again in priority/timestamp order.
    """

    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"

    @property
    def head_blocks(self) -> bool:
        """Whether an inadmissible head keeps the workloads behind it from being considered."""
        return self is QueueingStrategy.STRICT_FIFO


@dataclass(frozen=True, slots=True)
class ResourceQuotaSpec:
    """One resource of one flavor in a resource group; limits are ``None`` when unset."""

    name: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ResourceQuotaSpec:
        name = _str(obj.get("name"))
        if not name:
            raise ValueError("resource quota has no name")
        nominal = obj.get("nominalQuota", 0)
        borrowing = obj.get("borrowingLimit")
        lending = obj.get("lendingLimit")
        return cls(
            name=name,
            nominal=quota_amount(name, nominal if nominal is not None else 0),
            borrowing_limit=None if borrowing is None else quota_amount(name, borrowing),
            lending_limit=None if lending is None else quota_amount(name, lending),
        )


@dataclass(frozen=True, slots=True)
class FlavorQuotasSpec:
    """A flavor of a resource group with its per-resource quotas, in the order the spec lists them."""

    name: str
    resources: tuple[ResourceQuotaSpec, ...]

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> FlavorQuotasSpec:
        name = _str(obj.get("name"))
        if not name:
            raise ValueError("flavor quotas have no name")
        return cls(name, tuple(ResourceQuotaSpec.from_object(_map(r)) for r in _list(obj.get("resources"))))


@dataclass(frozen=True, slots=True)
class ResourceGroupSpec:
    """Resources that share flavors: a workload gets one flavor for all of a group's resources."""

    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotasSpec, ...]

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ResourceGroupSpec:
        return cls(
            tuple(_str(r) for r in _list(obj.get("coveredResources"))),
            tuple(FlavorQuotasSpec.from_object(_map(f)) for f in _list(obj.get("flavors"))),
        )


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    """When the flavor search stops. Defaults are Kueue's: stop when borrowing, try the next flavor to avoid
    preemption. v1beta1's ``Borrow`` / ``Preempt`` are read as ``MayStopSearch``, as Kueue's conversion does."""

    when_can_borrow: str = _MAY_STOP_SEARCH
    when_can_preempt: str = _TRY_NEXT_FLAVOR
    preference: str | None = None

    @classmethod
    def from_object(cls, obj: object) -> FlavorFungibility:
        data = _map(obj)
        borrow = _str(data.get("whenCanBorrow")) or _MAY_STOP_SEARCH
        preempt = _str(data.get("whenCanPreempt")) or _TRY_NEXT_FLAVOR
        if borrow == "Borrow":
            borrow = _MAY_STOP_SEARCH
        if preempt == "Preempt":
            preempt = _MAY_STOP_SEARCH
        return cls(borrow, preempt, _str(data.get("preference")) or None)


@dataclass(frozen=True, slots=True)
class BorrowWithinCohort:
    """``preemption.borrowWithinCohort``: whether to preempt in the cohort while borrowing, up to a priority."""

    policy: str = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class PreemptionSpec:
    """``spec.preemption`` with the CRD defaults filled in (everything ``Never``)."""

    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.NEVER
    reclaim_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    borrow_within_cohort: BorrowWithinCohort | None = None

    @classmethod
    def from_object(cls, obj: object) -> PreemptionSpec:
        data = _map(obj)
        bwc_obj = data.get("borrowWithinCohort")
        bwc: BorrowWithinCohort | None = None
        if isinstance(bwc_obj, Mapping):
            threshold = bwc_obj.get("maxPriorityThreshold")
            bwc = BorrowWithinCohort(
                _str(bwc_obj.get("policy")) or "Never",
                threshold if isinstance(threshold, int) and not isinstance(threshold, bool) else None,
            )
        return cls(
            PreemptionPolicy(_str(data.get("withinClusterQueue")) or "Never"),
            PreemptionPolicy(_str(data.get("reclaimWithinCohort")) or "Never"),
            bwc,
        )


def _resource_groups(obj: object) -> tuple[ResourceGroupSpec, ...]:
    return tuple(ResourceGroupSpec.from_object(_map(rg)) for rg in _list(obj))


@dataclass(frozen=True, slots=True)
class ClusterQueueSpec:
    """What of a ClusterQueue matters for admission."""

    name: str
    cohort: str | None = None
    resource_groups: tuple[ResourceGroupSpec, ...] = ()
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    preemption: PreemptionSpec = PreemptionSpec()
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    stop_policy: str = "None"
    namespace_selector: Mapping[str, Any] | None = None
    admission_checks: tuple[str, ...] = ()

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ClusterQueueSpec:
        """Read a v1beta2 object (``spec.cohortName``) or a v1beta1 one (``spec.cohort``)."""
        spec = _map(obj.get("spec"))
        cohort = _str(spec.get("cohortName")) or _str(spec.get("cohort")) or None
        strategy = _map(spec.get("admissionChecksStrategy"))
        checks = [_str(_map(c).get("name")) for c in _list(strategy.get("admissionChecks"))]
        checks += [_str(c) for c in _list(spec.get("admissionChecks"))]
        selector = spec.get("namespaceSelector")
        return cls(
            name=_name(obj, "ClusterQueue"),
            cohort=cohort,
            resource_groups=_resource_groups(spec.get("resourceGroups")),
            flavor_fungibility=FlavorFungibility.from_object(spec.get("flavorFungibility")),
            preemption=PreemptionSpec.from_object(spec.get("preemption")),
            queueing_strategy=QueueingStrategy(_str(spec.get("queueingStrategy")) or "BestEffortFIFO"),
            stop_policy=_str(spec.get("stopPolicy")) or "None",
            namespace_selector=dict(selector) if isinstance(selector, Mapping) else None,
            admission_checks=tuple(dict.fromkeys(c for c in checks if c)),
        )

    @property
    def is_stopped(self) -> bool:
        """A ``Hold`` / ``HoldAndDrain`` stop policy makes Kueue keep the queue inactive (no admissions)."""
        return self.stop_policy != "None"

    def matches_namespace(self, labels: Mapping[str, str]) -> bool:
        """Whether a namespace with ``labels`` may use this ClusterQueue.

        A missing selector matches nothing and an empty one matches everything, as ``LabelSelectorAsSelector``.
        """
        if self.namespace_selector is None:
            return False
        return _label_selector_matches(self.namespace_selector, labels)


@dataclass(frozen=True, slots=True)
class CohortSpec:
    """A v1beta2 Cohort: an optional parent and quota of its own (hierarchical cohorts)."""

    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroupSpec, ...] = ()

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> CohortSpec:
        spec = _map(obj.get("spec"))
        parent = _str(spec.get("parentName")) or _str(spec.get("parent")) or None
        return cls(_name(obj, "Cohort"), parent, _resource_groups(spec.get("resourceGroups")))


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = ""
    time_added: str | None = None

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Taint:
        added = obj.get("timeAdded")
        return cls(_str(obj.get("key")), _str(obj.get("value")), _str(obj.get("effect")), _str(added) or None)

    def __str__(self) -> str:
        # Go's %s of a corev1.Taint value: its fields in order, a nil TimeAdded printed as <nil>.
        return f"{{{self.key} {self.value} {self.effect} {self.time_added or '<nil>'}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Toleration:
        return cls(_str(obj.get("key")), _str(obj.get("operator")), _str(obj.get("value")), _str(obj.get("effect")))

    def tolerates(self, taint: Taint) -> bool:
        """``Toleration.ToleratesTaint`` with the numeric ``Lt`` / ``Gt`` operators enabled, as Kueue calls it."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        op = self.operator
        if op in ("", "Equal"):
            return self.value == taint.value
        if op == "Exists":
            return True
        if op in ("Lt", "Gt"):
            toleration_value = _decimal_int(self.value)
            taint_value = _decimal_int(taint.value)
            if toleration_value is None or taint_value is None:
                return False
            return taint_value < toleration_value if op == "Lt" else taint_value > toleration_value
        return False


def _decimal_int(text: str) -> int | None:
    body = text[1:] if text.startswith("-") else text
    if not body.isdigit() or not body.isascii() or (len(body) > 1 and body[0] == "0"):
        return None
    value = int(text)
    return value if _MIN64 <= value <= UNLIMITED else None


@dataclass(frozen=True, slots=True)
class ResourceFlavorSpec:
    """What of a ResourceFlavor the flavor assigner checks against a PodSet."""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ResourceFlavorSpec:
        spec = _map(obj.get("spec"))
        return cls(
            name=_name(obj, "ResourceFlavor"),
            node_labels={str(k): _str(v) for k, v in _map(spec.get("nodeLabels")).items()},
            node_taints=tuple(Taint.from_object(_map(t)) for t in _list(spec.get("nodeTaints"))),
            tolerations=tuple(Toleration.from_object(_map(t)) for t in _list(spec.get("tolerations"))),
            topology_name=_str(spec.get("topologyName")) or None,
        )


# --------------------------------------------------------------------------------------------------------------
# Label selectors, taints and node affinity
# --------------------------------------------------------------------------------------------------------------


def _label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    for key, value in _map(selector.get("matchLabels")).items():
        if labels.get(key) != value:
            return False
    for expr in _list(selector.get("matchExpressions")):
        e = _map(expr)
        key, op, values = _str(e.get("key")), _str(e.get("operator")), [_str(v) for v in _list(e.get("values"))]
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def find_untolerated_taint(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first ``NoSchedule`` / ``NoExecute`` taint no toleration tolerates (``FindMatchingUntoleratedTaint``)."""
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One ``matchExpressions`` entry of a required node affinity term."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        op = self.operator
        if op == "In":
            return present and labels[self.key] in self.values
        if op == "NotIn":
            return not present or labels[self.key] not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt"):
            if not present or len(self.values) != 1:
                return False
            try:
                label, bound = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return label > bound if op == "Gt" else label < bound
        return False


def flavor_matches_pod_set(pod_set: PodSetRequest, flavor: ResourceFlavorSpec) -> bool:
    """Whether the PodSet's node selector and required node affinity accept the flavor's node labels.

    As Kueue's ``flavorSelector``: only keys the flavor itself labels are considered, and an affinity term left
    with no expression after that filtering matches any flavor (terms are ORed).
    """
    labels = flavor.node_labels
    for key, value in pod_set.node_selector.items():
        if key in labels and labels[key] != value:
            return False
    terms = pod_set.node_affinity
    if not terms:
        return True
    filtered: list[list[NodeSelectorRequirement]] = []
    for term in terms:
        kept = [e for e in term if e.key in labels]
        if not kept:
            return True
        filtered.append(kept)
    return any(all(e.matches(labels) for e in term) for term in filtered)


# --------------------------------------------------------------------------------------------------------------
# Workload inputs
# --------------------------------------------------------------------------------------------------------------


def _resource_list(obj: object) -> dict[str, Fraction]:
    return {str(k): parse_quantity(v) for k, v in _map(obj).items()}


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """A pod's effective requests in Kueue units, as ``resourcehelpers.PodRequests`` computes them.

    Containers are summed; init containers count at their peak (restartable sidecars stay for the pod's life);
    the pod overhead is added. A container limit stands in for a missing request, as Kueue's job integration
    does before it creates the Workload. Negative values are floored to zero.
    """

    def container_requests(c: Mapping[str, Any]) -> dict[str, Fraction]:
        resources = _map(c.get("resources"))
        merged = _resource_list(resources.get("limits"))
        merged.update(_resource_list(resources.get("requests")))
        return merged

    total: dict[str, Fraction] = {}
    for c in _list(pod_spec.get("containers")):
        for name, q in container_requests(_map(c)).items():
            total[name] = total.get(name, Fraction(0)) + q
    restartable: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for c in _list(pod_spec.get("initContainers")):
        cmap = _map(c)
        reqs = container_requests(cmap)
        if _str(cmap.get("restartPolicy")) == "Always":
            for name, q in reqs.items():
                total[name] = total.get(name, Fraction(0)) + q
                restartable[name] = restartable.get(name, Fraction(0)) + q
            current = dict(restartable)
        else:
            current = dict(reqs)
            for name, q in restartable.items():
                current[name] = current.get(name, Fraction(0)) + q
        for name, q in current.items():
            if q > init_peak.get(name, Fraction(0)):
                init_peak[name] = q
    for name, q in init_peak.items():
        if q > total.get(name, Fraction(0)):
            total[name] = q
    for name, q in _resource_list(pod_spec.get("overhead")).items():
        total[name] = total.get(name, Fraction(0)) + q
    return {name: max(0, kueue_value(name, q)) for name, q in total.items()}


@dataclass(frozen=True, slots=True)
class PodSetRequest:
    """A PodSet as the flavor assigner sees it: per-pod requests in Kueue units and placement constraints.

    ``node_affinity`` holds the required node affinity terms (ORed) of ``matchExpressions`` (ANDed), or ``None``;
    ``group`` is the TAS ``podSetGroupName`` (PodSets of a group get the same flavors); ``min_count`` is the
    PodSet's ``minCount`` (``None``: no partial admission), down to which :mod:`.partial` may reduce ``count``.
    """

    name: str
    count: int
    requests: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    node_affinity: tuple[tuple[NodeSelectorRequirement, ...], ...] | None = None
    group: str | None = None
    min_count: int | None = None

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], count: int | None = None) -> PodSetRequest:
        """Read a Workload ``spec.podSets[]`` entry (``count`` overrides the PodSet's own count)."""
        pod_spec = _map(_map(obj.get("template")).get("spec"))
        node_selector, tolerations, terms = pod_constraints(pod_spec)
        raw_count = obj.get("count", 1)
        group = _str(_map(obj.get("topologyRequest")).get("podSetGroupName")) or None
        raw_min = obj.get("minCount")
        return cls(
            name=_str(obj.get("name")) or "main",
            count=count if count is not None else (raw_count if isinstance(raw_count, int) else 1),
            requests=pod_requests(pod_spec),
            node_selector=node_selector,
            tolerations=tolerations,
            node_affinity=terms,
            group=group,
            min_count=raw_min if isinstance(raw_min, int) and not isinstance(raw_min, bool) else None,
        )


def pod_constraints(
    pod_spec: Mapping[str, Any],
) -> tuple[dict[str, str], tuple[Toleration, ...], tuple[tuple[NodeSelectorRequirement, ...], ...] | None]:
    """A pod's node selector, tolerations and required node affinity terms (ORed terms of ANDed expressions)."""
    affinity = _map(
        _map(_map(pod_spec.get("affinity")).get("nodeAffinity")).get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    terms: tuple[tuple[NodeSelectorRequirement, ...], ...] | None = None
    if affinity:
        terms = tuple(
            tuple(
                NodeSelectorRequirement(
                    _str(_map(e).get("key")),
                    _str(_map(e).get("operator")),
                    tuple(_str(v) for v in _list(_map(e).get("values"))),
                )
                for e in _list(_map(term).get("matchExpressions"))
            )
            for term in _list(affinity.get("nodeSelectorTerms"))
        )
    node_selector = {str(k): _str(v) for k, v in _map(pod_spec.get("nodeSelector")).items()}
    tolerations = tuple(Toleration.from_object(_map(t)) for t in _list(pod_spec.get("tolerations")))
    return node_selector, tolerations, terms


def workload_pod_sets(workload: Mapping[str, Any]) -> list[PodSetRequest]:
    """The PodSets of a Workload object, counts reduced by ``status.reclaimablePods`` as Kueue does."""
    reclaimable = {
        _str(_map(r).get("name")): int(_map(r).get("count", 0) or 0)
        for r in _list(_map(workload.get("status")).get("reclaimablePods"))
    }
    result = []
    for ps in _list(_map(workload.get("spec")).get("podSets")):
        psm = _map(ps)
        raw = psm.get("count", 1)
        count = raw if isinstance(raw, int) else 1
        name = _str(psm.get("name")) or "main"
        result.append(PodSetRequest.from_object(psm, count=max(0, count - reclaimable.get(name, 0))))
    return result


def _condition(obj: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    for c in _list(_map(obj.get("status")).get("conditions")):
        cm = _map(c)
        if cm.get("type") == ctype:
            return cm
    return None


def queue_order_timestamp(workload: Mapping[str, Any], *, pods_ready_eviction_timestamp: bool = False) -> float:
    """The timestamp Kueue orders a pending workload by (``workload.Ordering.GetQueueOrderTimestamp``).

    The creation time, except after an eviction by an admission check (or a PodsReady timeout when
    ``waitForPodsReady.requeuingStrategy.timestamp`` is ``Eviction``), when it is the eviction time.
    """
    evicted = _condition(workload, "Evicted")
    if evicted is not None and evicted.get("status") == "True":
        reason = evicted.get("reason")
        if reason == "AdmissionCheck" or (pods_ready_eviction_timestamp and reason == "PodsReadyTimeout"):
            ts = _timestamp(evicted.get("lastTransitionTime"))
            if ts is not None:
                return ts
    return _timestamp(_map(workload.get("metadata")).get("creationTimestamp")) or 0.0


@dataclass(slots=True)
class AdmittedWorkload:
    """A workload holding quota in a ClusterQueue, as the quota tree and preemption see it.

    ``usage`` lists every (flavor, resource) the admission assigned, zero quantities included (Kueue's
    ``WorkloadUsesResources`` looks at assigned flavors, not amounts). ``quota_reserved_time`` is the
    QuotaReserved condition's transition time (``None``: not reserved yet, treated as "now"), and
    ``queue_order_time`` the timestamp ``LowerOrNewerEqualPriority`` compares.
    """

    key: str
    cluster_queue: str
    usage: dict[FlavorResource, int]
    priority: int = 0
    queue_order_time: float = 0.0
    quota_reserved_time: float | None = None
    evicted: bool = False
    uid: str = ""

    @classmethod
    def from_object(cls, workload: Mapping[str, Any]) -> AdmittedWorkload:
        """Read a Workload with ``status.admission``; usage is scaled down for reclaimable pods as Kueue does."""
        meta = _map(workload.get("metadata"))
        status = _map(workload.get("status"))
        admission = _map(status.get("admission"))
        cq = _str(admission.get("clusterQueue"))
        if not cq:
            raise ValueError("workload has no status.admission.clusterQueue")
        spec_counts = {
            _str(_map(ps).get("name")) or "main": int(_map(ps).get("count", 1) or 0)
            for ps in _list(_map(workload.get("spec")).get("podSets"))
        }
        reclaimable = {
            _str(_map(r).get("name")): int(_map(r).get("count", 0) or 0) for r in _list(status.get("reclaimablePods"))
        }
        usage: dict[FlavorResource, int] = {}
        for psa in _list(admission.get("podSetAssignments")):
            psam = _map(psa)
            ps_name = _str(psam.get("name")) or "main"
            total = spec_counts.get(ps_name, 1)
            raw_count = psam.get("count")
            count = raw_count if isinstance(raw_count, int) else total
            after_reclaim = max(0, total - reclaimable.get(ps_name, 0))
            flavors = {str(k): _str(v) for k, v in _map(psam.get("flavors")).items()}
            for res, qty in _map(psam.get("resourceUsage")).items():
                flavor = flavors.get(str(res))
                if not flavor:
                    continue
                value = kueue_value(str(res), qty)
                if after_reclaim < count and count > 0:
                    value = value // count * after_reclaim
                fr = (flavor, str(res))
                usage[fr] = usage.get(fr, 0) + value
            for res, flavor in flavors.items():
                usage.setdefault((flavor, res), 0)
        reserved = _condition(workload, "QuotaReserved")
        reserved_time = None
        if reserved is not None and reserved.get("status") == "True":
            reserved_time = _timestamp(reserved.get("lastTransitionTime"))
        evicted = _condition(workload, "Evicted")
        priority = _map(workload.get("spec")).get("priority")
        namespace = _str(meta.get("namespace"))
        name = _str(meta.get("name"))
        return cls(
            key=f"{namespace}/{name}" if namespace else name,
            cluster_queue=cq,
            usage=usage,
            priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
            queue_order_time=queue_order_timestamp(workload),
            quota_reserved_time=reserved_time,
            evicted=evicted is not None and evicted.get("status") == "True",
            uid=_str(meta.get("uid")),
        )


# --------------------------------------------------------------------------------------------------------------
# The quota tree (pkg/cache/scheduler/resource_node.go)
# --------------------------------------------------------------------------------------------------------------


class _Cell:
    """One node's state for one (flavor, resource).

    ``up`` is the parent node's cell for the same flavor-resource, so the recursive ``available`` walk is a
    chain of attribute reads. ``local`` (the quota the lending limit keeps out of the parent's reach) and
    ``stored`` (what this node contributes to the parent) depend only on quotas and are cached at rebuild.
    """

    __slots__ = ("borrowing_limit", "lending_limit", "local", "nominal", "stored", "subtree", "up", "usage")

    def __init__(self, up: _Cell | None) -> None:
        self.nominal = 0
        self.borrowing_limit: int | None = None
        self.lending_limit: int | None = None
        self.subtree = 0
        self.local = 0
        self.stored = 0
        self.usage = 0
        self.up = up

    def finish(self) -> None:
        """Derive ``local`` and ``stored`` once the subtree quota is known (``resourceNode.localQuota``)."""
        if self.lending_limit is not None:
            self.local = max(0, _sub(self.subtree, self.lending_limit))
        else:
            self.local = 0
        self.stored = _sub(self.subtree, self.local)


@dataclass(frozen=True, slots=True)
class _ResourceGroup:
    covered: frozenset[str]
    flavors: tuple[str, ...]


class _Node:
    """A ClusterQueue or a Cohort of the tree."""

    __slots__ = ("cells", "child_cohorts", "child_cqs", "groups", "height", "is_cq", "name", "parent", "rg_of")

    def __init__(self, name: str, is_cq: bool) -> None:
        self.name = name
        self.is_cq = is_cq
        self.parent: _Node | None = None
        self.cells: dict[FlavorResource, _Cell] = {}
        self.child_cqs: list[_Node] = []
        self.child_cohorts: list[_Node] = []
        self.height = 0
        self.groups: tuple[_ResourceGroup, ...] = ()
        self.rg_of: dict[str, _ResourceGroup] = {}

    def cell(self, fr: FlavorResource) -> _Cell:
        """The cell for ``fr``, created (with its ancestors') as zero quota when absent, like a Go map miss."""
        c = self.cells.get(fr)
        if c is None:
            c = _Cell(self.parent.cell(fr) if self.parent is not None else None)
            self.cells[fr] = c
        return c

    def ancestors(self) -> Iterator[_Node]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def borrowing_with(self, fr: FlavorResource, value: int) -> bool:
        """ClusterQueue: usage+value beyond nominal; Cohort: beyond its subtree quota (``BorrowingWith``)."""
        c = self.cells.get(fr)
        if c is None:
            return value > 0
        return (c.nominal if self.is_cq else c.subtree) < _add(c.usage, value)

    def within_nominal(self, frs: Iterable[FlavorResource]) -> bool:
        """``IsWithinNominalInResources``: usage within the subtree quota for every listed flavor-resource."""
        for fr in frs:
            c = self.cells.get(fr)
            if c is not None and c.subtree < c.usage:
                return False
        return True

    def local_available(self, fr: FlavorResource) -> int:
        c = self.cells.get(fr)
        return 0 if c is None else max(0, _sub(c.local, c.usage))

    def quantities_fit(self, requests: Mapping[FlavorResource, int]) -> tuple[bool, dict[FlavorResource, int]]:
        """``QuantitiesFitInQuota``: whether requests fit this subtree, and what exceeds its guaranteed quota."""
        fits = True
        remaining: dict[FlavorResource, int] = {}
        for fr, v in requests.items():
            c = self.cells.get(fr)
            subtree, usage, local = (0, 0, 0) if c is None else (c.subtree, c.usage, c.local)
            if subtree < _add(usage, v):
                fits = False
            remaining[fr] = max(0, _sub(v, max(0, _sub(local, usage))))
        return fits, remaining


def _available_exact(c: _Cell) -> int:
    up = c.up
    if up is None:
        return _sub(c.subtree, c.usage)
    parent = _available_exact(up)
    bl = c.borrowing_limit
    if bl is not None:
        used_in_parent = max(0, _sub(c.usage, c.local))
        parent = min(_add(_sub(c.stored, used_in_parent), bl), parent)
    return _add(max(0, _sub(c.local, c.usage)), parent)


def _available_fast(c: _Cell) -> int:
    """``available`` on plain ints; valid while every quota and usage is far from int64's bounds."""
    up = c.up
    if up is None:
        return c.subtree - c.usage
    parent = _available_fast(up)
    bl = c.borrowing_limit
    usage = c.usage
    local = c.local
    if bl is not None:
        used_in_parent = usage - local
        used_in_parent = max(used_in_parent, 0)
        with_max = c.stored - used_in_parent + bl
        parent = min(parent, with_max)
    local_available = local - usage
    return parent + local_available if local_available > 0 else parent


def _potential_exact(c: _Cell) -> int:
    up = c.up
    if up is None:
        return c.subtree
    avail = _add(c.local, _potential_exact(up))
    if c.borrowing_limit is not None:
        avail = min(_add(c.subtree, c.borrowing_limit), avail)
    return avail


def _potential_fast(c: _Cell) -> int:
    up = c.up
    if up is None:
        return c.subtree
    avail = c.local + _potential_fast(up)
    if c.borrowing_limit is not None:
        avail = min(c.subtree + c.borrowing_limit, avail)
    return avail


def _add_usage(c: _Cell, value: int) -> None:
    """``addUsage``: what exceeds the node's local quota is also counted in the parent, recursively."""
    while True:
        local_available = max(0, _sub(c.local, c.usage))
        c.usage = _add(c.usage, value)
        up = c.up
        if up is None or value <= local_available:
            return
        value = _sub(value, local_available)
        c = up


def _remove_usage(c: _Cell, value: int) -> None:
    """``removeUsage``: gives back to the parent what the node was storing there, recursively."""
    while True:
        stored_in_parent = _sub(c.usage, c.local)
        c.usage = _sub(c.usage, value)
        up = c.up
        if stored_in_parent <= 0 or up is None:
            return
        value = min(value, stored_in_parent)
        c = up


@dataclass(frozen=True, slots=True)
class QuotaReport:
    """One flavor-resource of a ClusterQueue, for the dispatcher's API and the simulated status.

    ``borrowed`` is zero outside a cohort (as in Kueue's status); ``available`` is what a new workload could get
    now, borrowing included, and ``potential_available`` what it could get if nothing was in use.
    """

    flavor: str
    resource: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    used: int
    borrowed: int
    available: int
    potential_available: int

    @property
    def free_nominal(self) -> int:
        """Nominal quota not yet used by the ClusterQueue itself."""
        return max(0, self.nominal - self.used)


class QuotaTree:
    """ClusterQueues and Cohorts with their quotas and usage: Kueue's cache/snapshot resource nodes.

    Structural changes (adding, replacing or deleting a ClusterQueue or Cohort) rebuild the subtree quotas from
    the specs, keeping every ClusterQueue's usage. Usage changes are incremental and walk only the ancestors.
    A ClusterQueue naming a Cohort without an object (or a Cohort naming a missing parent) forms an implicit
    Cohort, as in Kueue. ClusterQueues under a Cohort cycle are detached and listed in
    :attr:`cycle_cluster_queues` (Kueue keeps them inactive).

    Not thread-safe; clone it (:meth:`clone`) to give another thread or a simulation its own copy.
    """

    def __init__(self, cluster_queues: Iterable[ClusterQueueSpec] = (), cohorts: Iterable[CohortSpec] = ()) -> None:
        self._cq_specs: dict[str, ClusterQueueSpec] = {s.name: s for s in cluster_queues}
        self._cohort_specs: dict[str, CohortSpec] = {s.name: s for s in cohorts}
        self._cqs: dict[str, _Node] = {}
        self._cohorts: dict[str, _Node] = {}
        self._workloads: dict[str, dict[str, AdmittedWorkload]] = {}
        self._exact = False
        self.cycle_cluster_queues: frozenset[str] = frozenset()
        self._rebuild({})

    # ---- structure --------------------------------------------------------------------------------------------

    def set_cluster_queue(self, spec: ClusterQueueSpec) -> None:
        """Add or replace a ClusterQueue; its usage and workloads are kept."""
        if self._cq_specs.get(spec.name) == spec:
            return
        self._cq_specs[spec.name] = spec
        self._rebuild(self._cq_usage())

    def delete_cluster_queue(self, name: str) -> None:
        """Remove a ClusterQueue with its usage and workloads."""
        if self._cq_specs.pop(name, None) is None:
            return
        self._workloads.pop(name, None)
        usage = self._cq_usage()
        usage.pop(name, None)
        self._rebuild(usage)

    def set_cohort(self, spec: CohortSpec) -> None:
        """Add or replace a Cohort object (its parent and its own quota)."""
        if self._cohort_specs.get(spec.name) == spec:
            return
        self._cohort_specs[spec.name] = spec
        self._rebuild(self._cq_usage())

    def delete_cohort(self, name: str) -> None:
        """Remove a Cohort object; it stays as an implicit cohort while something still references it."""
        if self._cohort_specs.pop(name, None) is None:
            return
        self._rebuild(self._cq_usage())

    def _cq_usage(self) -> dict[str, dict[FlavorResource, int]]:
        return {name: {fr: c.usage for fr, c in node.cells.items() if c.usage} for name, node in self._cqs.items()}

    def _rebuild(self, usage: Mapping[str, Mapping[FlavorResource, int]]) -> None:
        cohorts: dict[str, _Node] = {}

        def cohort(name: str) -> _Node:
            node = cohorts.get(name)
            if node is None:
                node = cohorts[name] = _Node(name, False)
            return node

        for cspec in self._cohort_specs.values():
            node = cohort(cspec.name)
            if cspec.parent:
                node.parent = cohort(cspec.parent)
        # Cohorts whose ancestry loops are left out, as Kueue leaves them out of its snapshot.
        cyclic: set[str] = set()
        for node in cohorts.values():
            seen: set[str] = set()
            walk: _Node | None = node
            while walk is not None:
                if walk.name in seen or walk.name in cyclic:
                    cyclic.update(seen)
                    break
                seen.add(walk.name)
                walk = walk.parent
        for node in cohorts.values():
            if node.name in cyclic:
                node.parent = None
            elif node.parent is not None:
                node.parent.child_cohorts.append(node)

        cqs: dict[str, _Node] = {}
        cycle_cqs: set[str] = set()
        exact = False
        for spec in self._cq_specs.values():
            node = _Node(spec.name, True)
            cqs[spec.name] = node
            if spec.cohort:
                parent = cohort(spec.cohort)
                if spec.cohort in cyclic:
                    cycle_cqs.add(spec.name)
                else:
                    node.parent = parent
                    parent.child_cqs.append(node)
            groups = tuple(
                _ResourceGroup(frozenset(rg.covered_resources), tuple(f.name for f in rg.flavors))
                for rg in spec.resource_groups
            )
            node.groups = groups
            for g in groups:
                for res in g.covered:
                    node.rg_of.setdefault(res, g)
            exact |= self._load_quotas(node, spec.resource_groups)
            for fr, value in usage.get(spec.name, {}).items():
                node.cells.setdefault(fr, _Cell(None)).usage = value
                exact |= abs(value) >= _EXACT_THRESHOLD
            for c in node.cells.values():
                c.finish()
        for cspec in self._cohort_specs.values():
            if cspec.name not in cyclic:
                exact |= self._load_quotas(cohort(cspec.name), cspec.resource_groups)

        def build(node: _Node) -> None:
            # updateCohortResourceNode: subtree quota and usage accumulate what children lend / store upward.
            for child in node.child_cohorts:
                build(child)
            for child in (*node.child_cohorts, *node.child_cqs):
                for fr, cc in child.cells.items():
                    pc = node.cells.get(fr)
                    if pc is None:
                        pc = node.cells[fr] = _Cell(None)
                    pc.subtree = _add(pc.subtree, cc.stored)
                    pc.usage = _add(pc.usage, max(0, _sub(cc.usage, cc.local)))
            for c in node.cells.values():
                c.finish()
            height = min(len(node.child_cqs) + len(node.child_cohorts), 1)
            for child in node.child_cohorts:
                height = max(height, child.height + 1)
            node.height = height

        def link(node: _Node) -> None:
            for child in (*node.child_cohorts, *node.child_cqs):
                for fr, cc in child.cells.items():
                    cc.up = node.cells[fr]
                if not child.is_cq:
                    link(child)

        for node in cohorts.values():
            if node.parent is None and node.name not in cyclic:
                build(node)
                link(node)
        # Implicit cohorts with nothing under them disappear, as in Kueue's hierarchy manager.
        self._cohorts = {
            n: c
            for n, c in cohorts.items()
            if n not in cyclic and (n in self._cohort_specs or c.child_cqs or c.child_cohorts)
        }
        self._cqs = cqs
        self._exact = exact
        self.cycle_cluster_queues = frozenset(cycle_cqs)
        for name in list(self._workloads):
            if name not in cqs:
                del self._workloads[name]

    @staticmethod
    def _load_quotas(node: _Node, groups: Sequence[ResourceGroupSpec]) -> bool:
        exact = False
        for rg in groups:
            for flavor in rg.flavors:
                for rq in flavor.resources:
                    c = node.cells.setdefault((flavor.name, rq.name), _Cell(None))
                    c.nominal = c.subtree = rq.nominal
                    c.borrowing_limit = rq.borrowing_limit
                    c.lending_limit = rq.lending_limit
                    for v in (rq.nominal, rq.borrowing_limit, rq.lending_limit):
                        if v is not None and abs(v) >= _EXACT_THRESHOLD:
                            exact = True
        return exact

    # ---- lookups ----------------------------------------------------------------------------------------------

    def _cq(self, name: str) -> _Node:
        try:
            return self._cqs[name]
        except KeyError:
            raise KeyError(f"unknown ClusterQueue {name!r}") from None

    @property
    def cluster_queue_names(self) -> list[str]:
        return list(self._cqs)

    @property
    def cohort_names(self) -> list[str]:
        """Explicit and implicit Cohorts (cyclic ones excluded)."""
        return list(self._cohorts)

    def cluster_queue(self, name: str) -> ClusterQueueSpec:
        return self._cq_specs[self._cq(name).name]

    def cohort_spec(self, name: str) -> CohortSpec | None:
        """The Cohort's object spec, ``None`` for an implicit Cohort."""
        return self._cohort_specs.get(name)

    def parent_cohort(self, cluster_queue: str) -> str | None:
        parent = self._cq(cluster_queue).parent
        return parent.name if parent is not None else None

    def root_cohort(self, cluster_queue: str) -> str | None:
        node = self._cq(cluster_queue)
        root = None
        for a in node.ancestors():
            root = a.name
        return root

    def cluster_queues_in_tree(self, cluster_queue: str) -> list[str]:
        """Every ClusterQueue sharing the root cohort with ``cluster_queue`` (itself included)."""
        node = self._cq(cluster_queue)
        root = node
        for a in node.ancestors():
            root = a
        if root.is_cq:
            return [root.name]
        out: list[str] = []
        stack = [root]
        while stack:
            n = stack.pop()
            out.extend(c.name for c in n.child_cqs)
            stack.extend(n.child_cohorts)
        return out

    # ---- usage ------------------------------------------------------------------------------------------------

    def add_usage(self, cluster_queue: str, usage: Mapping[FlavorResource, int]) -> None:
        """Count ``usage`` against the ClusterQueue and, past its local quota, its cohorts (O(depth) each)."""
        node = self._cq(cluster_queue)
        for fr, value in usage.items():
            if not self._exact and abs(value) >= _EXACT_THRESHOLD:
                self._exact = True
            _add_usage(node.cell(fr), value)

    def remove_usage(self, cluster_queue: str, usage: Mapping[FlavorResource, int]) -> None:
        """Undo :meth:`add_usage`."""
        node = self._cq(cluster_queue)
        for fr, value in usage.items():
            _remove_usage(node.cell(fr), value)

    def add_workload(self, workload: AdmittedWorkload) -> None:
        """Record an admitted workload (a preemption candidate) and count its usage.

        A workload with the same key in the same ClusterQueue is replaced; remove it from its old ClusterQueue
        first when it moves.
        """
        self.remove_workload(workload.cluster_queue, workload.key)
        self._cq(workload.cluster_queue)
        self._workloads.setdefault(workload.cluster_queue, {})[workload.key] = workload
        self.add_usage(workload.cluster_queue, workload.usage)

    def remove_workload(self, cluster_queue: str, key: str) -> AdmittedWorkload | None:
        """Forget an admitted workload and release its usage; returns it, or ``None`` if it was not there."""
        wls = self._workloads.get(cluster_queue)
        if not wls:
            return None
        wl = wls.pop(key, None)
        if wl is not None:
            self.remove_usage(cluster_queue, wl.usage)
        return wl

    def workloads(self, cluster_queue: str) -> Mapping[str, AdmittedWorkload]:
        """The admitted workloads recorded for a ClusterQueue, by key."""
        self._cq(cluster_queue)
        return self._workloads.get(cluster_queue, {})

    # ---- queries ----------------------------------------------------------------------------------------------

    def available(self, cluster_queue: str, flavor: str, resource: str) -> int:
        """What a new workload could use now: local quota plus what the cohorts can lend (never negative).

        Kueue's ``ClusterQueueSnapshot.Available``: honours borrowing limits on the path up, lending limits of
        every node (through the subtree quotas) and the usage of everything else in the tree.
        """
        c = self._cq(cluster_queue).cell((flavor, resource))
        value = _available_exact(c) if self._exact else _available_fast(c)
        return value if value > 0 else 0

    def potential_available(self, cluster_queue: str, flavor: str, resource: str) -> int:
        """The largest amount the ClusterQueue could ever get with nothing in use (``PotentialAvailable``)."""
        c = self._cq(cluster_queue).cell((flavor, resource))
        return _potential_exact(c) if self._exact else _potential_fast(c)

    def usage(self, cluster_queue: str, flavor: str, resource: str) -> int:
        c = self._cq(cluster_queue).cells.get((flavor, resource))
        return 0 if c is None else c.usage

    def nominal(self, cluster_queue: str, flavor: str, resource: str) -> int:
        c = self._cq(cluster_queue).cells.get((flavor, resource))
        return 0 if c is None else c.nominal

    def headroom(self, cluster_queue: str, usage: Mapping[FlavorResource, int]) -> float:
        """The ClusterQueue's nominal quota left once ``usage`` is added, as a fraction of it: the tightest
        flavor-resource of ``usage`` decides, clamped to [-1, 1] (-1 where there is no nominal quota)."""
        cells = self._cq(cluster_queue).cells
        tightest = 1.0
        for fr, amount in usage.items():
            if amount <= 0:
                continue
            c = cells.get(fr)
            nominal = c.nominal if c is not None else 0
            if nominal <= 0:
                return -1.0
            share = (nominal - c.usage - amount) / nominal  # type: ignore[union-attr]
            tightest = min(tightest, share)
        return tightest if tightest > -1.0 else -1.0

    def borrowing(self, cluster_queue: str, flavor: str, resource: str) -> int:
        """How much the ClusterQueue uses beyond its nominal quota (0 outside a cohort, as Kueue reports it)."""
        node = self._cq(cluster_queue)
        c = node.cells.get((flavor, resource))
        if c is None or node.parent is None:
            return 0
        return max(0, _sub(c.usage, c.nominal))

    def is_borrowing(self, cluster_queue: str, flavor: str, resource: str) -> bool:
        """``ClusterQueueSnapshot.Borrowing``: usage above nominal quota."""
        return self._cq(cluster_queue).borrowing_with((flavor, resource), 0)

    def fits(self, cluster_queue: str, usage: Mapping[FlavorResource, int]) -> bool:
        """Whether ``usage`` fits what is available now (``ClusterQueueSnapshot.Fits`` without TAS)."""
        return all(v <= self.available(cluster_queue, f, r) for (f, r), v in usage.items())

    def cohort_usage(self, cohort: str, flavor: str, resource: str) -> tuple[int, int]:
        """``(subtree quota, usage counted against it)`` of a Cohort for one flavor-resource."""
        c = self._cohorts[cohort].cells.get((flavor, resource))
        return (0, 0) if c is None else (c.subtree, c.usage)

    def cluster_queue_report(self, cluster_queue: str) -> tuple[QuotaReport, ...]:
        """Every flavor-resource of the ClusterQueue in spec order (flavors of each group, resources by name)."""
        node = self._cq(cluster_queue)
        out = []
        for g in node.groups:
            for flavor in g.flavors:
                for res in sorted(g.covered):
                    c = node.cells.get((flavor, res))
                    used = 0 if c is None else c.usage
                    nominal = 0 if c is None else c.nominal
                    out.append(
                        QuotaReport(
                            flavor=flavor,
                            resource=res,
                            nominal=nominal,
                            borrowing_limit=None if c is None else c.borrowing_limit,
                            lending_limit=None if c is None else c.lending_limit,
                            used=used,
                            borrowed=max(0, _sub(used, nominal)) if node.parent is not None else 0,
                            available=self.available(cluster_queue, flavor, res),
                            potential_available=self.potential_available(cluster_queue, flavor, res),
                        )
                    )
        return tuple(out)

    def flavors_reservation(self, cluster_queue: str) -> list[dict[str, Any]]:
        """The ClusterQueue's ``status.flavorsReservation`` as Kueue writes it (``total`` and ``borrowed``)."""
        flavors: dict[str, list[dict[str, str]]] = {}
        for r in self.cluster_queue_report(cluster_queue):
            flavors.setdefault(r.flavor, []).append(
                {
                    "name": r.resource,
                    "total": format_amount(r.resource, r.used),
                    "borrowed": format_amount(r.resource, r.borrowed),
                }
            )
        return [{"name": f, "resources": res} for f, res in flavors.items()]

    def clone(self) -> QuotaTree:
        """An independent copy with the same specs, usage and workloads (for what-if simulations)."""
        other = QuotaTree.__new__(QuotaTree)
        other._cq_specs = dict(self._cq_specs)
        other._cohort_specs = dict(self._cohort_specs)
        other._cqs = {}
        other._cohorts = {}
        other._workloads = {cq: dict(wls) for cq, wls in self._workloads.items()}
        other._exact = False
        other.cycle_cluster_queues = frozenset()
        other._rebuild(self._cq_usage())
        return other

    # ---- preemption helpers (pkg/scheduler/preemption/classical) -------------------------------------------------

    def _height_of_lowest_subtree_that_fits(self, node: _Node, fr: FlavorResource, value: int) -> tuple[int, bool]:
        """``FindHeightOfLowestSubtreeThatFits``: how far up the tree ``value`` must borrow, and whether a
        higher cohort remains from which quota could be reclaimed."""
        if not node.borrowing_with(fr, value) or node.parent is None:
            return 0, node.parent is not None
        remaining = _sub(value, node.local_available(fr))
        root = node.parent
        for tracking in node.ancestors():
            root = tracking
            if not tracking.borrowing_with(fr, remaining):
                return tracking.height, tracking.parent is not None
            remaining = _sub(remaining, tracking.local_available(fr))
        return root.height, False


# --------------------------------------------------------------------------------------------------------------
# Classical preemption (pkg/scheduler/preemption)
# --------------------------------------------------------------------------------------------------------------


class PreemptionPossibility(IntEnum):
    """Outcome of a preemption simulation (``preemptioncommon.PreemptionPossibility``)."""

    NO_CANDIDATES = 0
    PREEMPT = 1
    RECLAIM = 2


@dataclass(frozen=True, slots=True)
class PreemptionTarget:
    """A workload to evict, with the reason Kueue writes on its Preempted condition."""

    workload: AdmittedWorkload
    reason: str


# preemptionVariant
_NEVER, _WITHIN_CQ, _HIERARCHICAL_RECLAIM, _RECLAIM_WITHOUT_BORROWING, _RECLAIM_WHILE_BORROWING = range(5)
_VARIANT_REASON = {
    _WITHIN_CQ: IN_CLUSTER_QUEUE,
    _HIERARCHICAL_RECLAIM: IN_COHORT_RECLAIMATION,
    _RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAIMATION,
    _RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING,
}


def candidates_order_key(
    workload: AdmittedWorkload, preemptor_cluster_queue: str, now: float = math.inf
) -> tuple[bool, bool, int, float, str]:
    """Kueue's ``CandidatesOrdering`` as a sort key: evicted first, other ClusterQueues before the preemptor's,
    lower priority first, most recently reserved first (a missing reservation counts as ``now``), then UID."""
    reserved = workload.quota_reserved_time if workload.quota_reserved_time is not None else now
    return (
        not workload.evicted,
        workload.cluster_queue == preemptor_cluster_queue,
        workload.priority,
        -reserved,
        workload.uid or workload.key,
    )


def _satisfies_policy(policy: PreemptionPolicy, priority: int, ts: float, candidate: AdmittedWorkload) -> bool:
    if policy is PreemptionPolicy.LOWER_PRIORITY:
        return priority > candidate.priority
    if policy is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return priority > candidate.priority or (priority == candidate.priority and ts < candidate.queue_order_time)
    return policy is PreemptionPolicy.ANY


def _borrowing_within_cohort_forbidden(spec: ClusterQueueSpec) -> tuple[bool, int | None]:
    bwc = spec.preemption.borrow_within_cohort
    if bwc is None or bwc.policy == "Never":
        return True, None
    return False, bwc.max_priority_threshold


@dataclass(slots=True)
class _Candidate:
    wl: AdmittedWorkload
    lca: _Node | None
    variant: int


class _Preemptor:
    """One run of the classical algorithm for a preemptor in a ClusterQueue (``classicalPreemptions``)."""

    __slots__ = ("cq", "frs", "now", "priority", "spec", "timestamp", "tree", "usage")

    def __init__(
        self,
        tree: QuotaTree,
        cluster_queue: str,
        usage: Mapping[FlavorResource, int],
        frs: Collection[FlavorResource],
        priority: int,
        timestamp: float,
        now: float,
    ) -> None:
        self.tree = tree
        self.cq = tree._cq(cluster_queue)
        self.spec = tree._cq_specs[cluster_queue]
        self.usage = usage
        self.frs = frs
        self.priority = priority
        self.timestamp = timestamp
        self.now = now

    def _uses_resources(self, wl: AdmittedWorkload) -> bool:
        usage = wl.usage
        return any(fr in usage for fr in self.frs)

    def _classify(self, wl: AdmittedWorkload, advantage: bool) -> int:
        if not self._uses_resources(wl):
            return _NEVER
        same = wl.cluster_queue == self.cq.name
        pre = self.spec.preemption
        policy = pre.within_cluster_queue if same else pre.reclaim_within_cohort
        if not _satisfies_policy(policy, self.priority, self.timestamp, wl):
            return _NEVER
        if same:
            return _WITHIN_CQ
        if advantage:
            return _HIERARCHICAL_RECLAIM
        forbidden, threshold = _borrowing_within_cohort_forbidden(self.spec)
        if forbidden:
            return _RECLAIM_WITHOUT_BORROWING
        if wl.priority >= self.priority or (threshold is not None and wl.priority > threshold):
            return _RECLAIM_WITHOUT_BORROWING
        return _RECLAIM_WHILE_BORROWING

    def _from_cq(self, node: _Node, lca: _Node | None, advantage: bool, out: list[_Candidate]) -> None:
        for wl in self.tree._workloads.get(node.name, {}).values():
            variant = self._classify(wl, advantage)
            if variant != _NEVER:
                out.append(_Candidate(wl, lca, variant))

    def _in_subtree(self, current: _Node, root: _Node, skip: _Node | None, adv: bool, out: list[_Candidate]) -> None:
        for child in current.child_cohorts:
            if child is skip or child.within_nominal(self.frs):
                continue
            self._in_subtree(child, root, skip, adv, out)
        for child_cq in current.child_cqs:
            if child_cq is not self.cq and not child_cq.within_nominal(self.frs):
                self._from_cq(child_cq, root, adv, out)

    def _collect(self) -> tuple[list[_Candidate], list[_Candidate], list[_Candidate]]:
        same: list[_Candidate] = []
        if self.spec.preemption.within_cluster_queue is not PreemptionPolicy.NEVER:
            self._from_cq(self.cq, None, False, same)
        hierarchy: list[_Candidate] = []
        by_priority: list[_Candidate] = []
        if self.cq.parent is not None and self.spec.preemption.reclaim_within_cohort is not PreemptionPolicy.NEVER:
            advantage, remaining = self.cq.quantities_fit(self.usage)
            previous: _Node | None = None
            for current in self.cq.ancestors():
                self._in_subtree(current, current, previous, advantage, hierarchy if advantage else by_priority)
                fits, remaining = current.quantities_fit(remaining)
                advantage = advantage or fits
                previous = current
        return same, hierarchy, by_priority

    def _valid(self, cand: _Candidate, borrow: bool) -> bool:
        if cand.wl.cluster_queue == self.cq.name:
            return True
        if borrow and cand.variant == _RECLAIM_WITHOUT_BORROWING:
            return False
        node = self.tree._cqs[cand.wl.cluster_queue]
        if node.within_nominal(self.frs):
            return False
        for ancestor in node.ancestors():
            if ancestor is cand.lca:
                break
            if ancestor.within_nominal(self.frs):
                return False
        return True

    def _fits(self, allow_borrowing: bool) -> bool:
        cq = self.cq
        tree = self.tree
        for fr, v in self.usage.items():
            if not allow_borrowing and cq.borrowing_with(fr, v):
                return False
            if v > tree.available(cq.name, fr[0], fr[1]):
                return False
        return True

    def _remove(self, wl: AdmittedWorkload) -> None:
        self.tree.remove_usage(wl.cluster_queue, wl.usage)

    def _restore(self, wl: AdmittedWorkload) -> None:
        self.tree.add_usage(wl.cluster_queue, wl.usage)

    def targets(self) -> list[PreemptionTarget]:
        same, hierarchy, by_priority = self._collect()
        key_cq, now = self.cq.name, self.now

        def order(c: _Candidate) -> tuple[bool, bool, int, float, str]:
            return candidates_order_key(c.wl, key_cq, now)

        lists = [sorted(hierarchy, key=order), sorted(by_priority, key=order), sorted(same, key=order)]
        candidates = [c for lst in lists for c in lst if c.wl.evicted]
        candidates += [c for lst in lists for c in lst if not c.wl.evicted]
        forbidden, _ = _borrowing_within_cohort_forbidden(self.spec)
        under_nominal = all(
            (cell := self.cq.cells.get(fr)) is not None and cell.nominal > cell.usage for fr in self.frs
        )
        attempts: tuple[bool, ...]
        if (not hierarchy and not by_priority) or (forbidden and not under_nominal):
            attempts = (True,)
        elif forbidden and not hierarchy:
            attempts = (False, True)
        else:
            attempts = (True, False)
        for allow_borrowing in attempts:
            chosen: list[_Candidate] = []
            for cand in candidates:
                if not self._valid(cand, allow_borrowing):
                    continue
                self._remove(cand.wl)
                chosen.append(cand)
                if self._fits(allow_borrowing):
                    chosen = self._fill_back(chosen, allow_borrowing)
                    for c in chosen:
                        self._restore(c.wl)
                    return [PreemptionTarget(c.wl, _VARIANT_REASON[c.variant]) for c in chosen]
            for c in chosen:
                self._restore(c.wl)
        return []

    def _fill_back(self, chosen: list[_Candidate], allow_borrowing: bool) -> list[_Candidate]:
        """Add victims back, newest choice first (the last one is needed), keeping those the fit does not need."""
        for i in range(len(chosen) - 2, -1, -1):
            self._restore(chosen[i].wl)
            if self._fits(allow_borrowing):
                chosen[i] = chosen[-1]
                chosen.pop()
            else:
                self._remove(chosen[i].wl)
        return chosen


def find_preemption_targets(
    tree: QuotaTree,
    cluster_queue: str,
    usage: Mapping[FlavorResource, int],
    frs_need_preemption: Collection[FlavorResource],
    *,
    priority: int = 0,
    queue_order_time: float = 0.0,
    now: float = math.inf,
) -> list[PreemptionTarget]:
    """The minimal set of admitted workloads Kueue would evict so ``usage`` fits in ``cluster_queue``.

    Classical preemption (no fair sharing) over the workloads recorded in ``tree``: candidates are those using a
    flavor-resource in ``frs_need_preemption`` that the ClusterQueue's policy allows (``withinClusterQueue`` for
    its own, ``reclaimWithinCohort`` for ClusterQueues borrowing in the cohort, ``borrowWithinCohort`` deciding
    whether the preemptor may still borrow afterwards). They are taken in Kueue's order until the workload fits,
    then added back in reverse order when not needed. Empty when no set of candidates makes it fit.
    The tree is left as it was.
    """
    if not frs_need_preemption:
        return []
    return _Preemptor(tree, cluster_queue, usage, frs_need_preemption, priority, queue_order_time, now).targets()


def simulate_preemption(
    tree: QuotaTree,
    cluster_queue: str,
    fr: FlavorResource,
    quantity: int,
    *,
    priority: int = 0,
    queue_order_time: float = 0.0,
    now: float = math.inf,
) -> tuple[PreemptionPossibility, int]:
    """Kueue's ``PreemptionOracle.SimulatePreemption`` for one flavor-resource.

    Returns whether preemption could make ``quantity`` fit (and whether only other ClusterQueues' workloads
    would be evicted: ``RECLAIM``), with the borrowing height after those evictions.
    """
    node = tree._cq(cluster_queue)
    targets = find_preemption_targets(
        tree, cluster_queue, {fr: quantity}, (fr,), priority=priority, queue_order_time=queue_order_time, now=now
    )
    if not targets:
        return PreemptionPossibility.NO_CANDIDATES, tree._height_of_lowest_subtree_that_fits(node, fr, quantity)[0]
    for t in targets:
        tree.remove_usage(t.workload.cluster_queue, t.workload.usage)
    try:
        borrow = tree._height_of_lowest_subtree_that_fits(node, fr, quantity)[0]
    finally:
        for t in targets:
            tree.add_usage(t.workload.cluster_queue, t.workload.usage)
    if any(t.workload.cluster_queue == cluster_queue for t in targets):
        return PreemptionPossibility.PREEMPT, borrow
    return PreemptionPossibility.RECLAIM, borrow


PreemptionOracle = Callable[[QuotaTree, str, FlavorResource, int], tuple[PreemptionPossibility, int]]
"""``(tree, cluster_queue, flavor_resource, quantity) -> (possibility, borrowing height after preemption)``."""


# --------------------------------------------------------------------------------------------------------------
# Flavor assignment (pkg/scheduler/flavorassigner)
# --------------------------------------------------------------------------------------------------------------


class FlavorAssignmentMode(IntEnum):
    """How a flavor can be assigned, worst to best."""

    NO_FIT = 0
    PREEMPT = 1
    DEFERRED_FIT = 2
    FIT = 3

    def __str__(self) -> str:
        return {0: "NoFit", 1: "Preempt", 2: "DeferredFit", 3: "Fit"}[int(self)]


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
    """Kueue's ``isPreferred`` over ``(preemption mode, borrowing level)``: is ``a`` better than ``b``?"""
    if a[0] == _PM_NO_FIT:
        return False
    if b[0] == _PM_NO_FIT:
        return True
    a_none, b_none = a[0] == _PM_NO_CANDIDATES, b[0] == _PM_NO_CANDIDATES
    if a_none != b_none:
        return not a_none
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
class FlavorAssignment:
    """The flavor chosen for one resource of a PodSet, with its mode and borrowing height."""

    flavor: str
    mode: FlavorAssignmentMode
    borrow: int = 0
    tried_flavor_idx: int = 0


@dataclass(slots=True)
class FlavorAssignmentAttempt:
    """One flavor tried for a PodSet: its worst mode over the resources and why it was not a plain fit."""

    flavor: str
    mode: FlavorAssignmentMode
    borrow: int = 0
    preemption_possibility: PreemptionPossibility | None = None
    reasons: list[str] = field(default_factory=list)
    no_fit_reason: str = ""


@dataclass(slots=True)
class PodSetAssignment:
    """Flavors per resource for one PodSet; ``requests`` are the PodSet totals (per pod x count)."""

    name: str
    count: int
    flavors: dict[str, FlavorAssignment]
    requests: dict[str, int]
    reasons: list[str] = field(default_factory=list)
    error: str | None = None
    attempts: list[FlavorAssignmentAttempt] = field(default_factory=list)

    @property
    def is_fit(self) -> bool:
        return self.error is None and not self.reasons

    @property
    def mode(self) -> FlavorAssignmentMode:
        """The worst mode among the assigned flavors (``PodSetAssignment.RepresentativeMode``)."""
        if self.is_fit:
            return FlavorAssignmentMode.FIT
        if self.error is not None or not self.flavors:
            return FlavorAssignmentMode.NO_FIT
        return min(a.mode for a in self.flavors.values())

    def message(self) -> str:
        """The reasons, sorted and comma-joined as Kueue's ``Status.Message``."""
        if self.error is not None:
            return self.error
        return ", ".join(sorted(self.reasons))


@dataclass(slots=True)
class Assignment:
    """The outcome of :func:`assign_flavors` for one workload in one ClusterQueue.

    ``usage`` is the total quota the workload would take per flavor-resource; ``borrowing`` is the height of the
    smallest cohort subtree the workload must borrow from (0: within the ClusterQueue's nominal quota).
    """

    cluster_queue: str
    pod_sets: list[PodSetAssignment]
    usage: dict[FlavorResource, int]
    borrowing: int = 0
    no_fit_reason: str = ""
    last_tried_flavor_idx: list[dict[str, int]] = field(default_factory=list)

    @property
    def mode(self) -> FlavorAssignmentMode:
        """The representative mode: the worst among the PodSets (``NoFit`` with no PodSet)."""
        pod_sets = self.pod_sets
        if len(pod_sets) == 1:
            return pod_sets[0].mode
        if not pod_sets:
            return FlavorAssignmentMode.NO_FIT
        return min(ps.mode for ps in pod_sets)

    representative_mode = mode

    @property
    def borrows(self) -> bool:
        """Whether admitting needs quota beyond the ClusterQueue's nominal quota."""
        return self.borrowing > 0

    def message(self) -> str:
        """Kueue's pending message: ``couldn't assign flavors to pod set <name>: <reasons>`` per PodSet."""
        parts = []
        for ps in self.pod_sets:
            if ps.is_fit:
                continue
            if ps.error is not None:
                return f"failed to assign flavors to pod set {ps.name}: {ps.error}"
            parts.append(f"couldn't assign flavors to pod set {ps.name}: {ps.message()}")
        return "; ".join(parts)

    def flavor_resources_needing_preemption(self) -> set[FlavorResource]:
        return {
            (a.flavor, res)
            for ps in self.pod_sets
            for res, a in ps.flavors.items()
            if a.mode is FlavorAssignmentMode.PREEMPT
        }

    def to_admission(self) -> list[dict[str, Any]]:
        """``status.admission.podSetAssignments`` as Kueue writes them on admission."""
        out = []
        for ps in self.pod_sets:
            out.append(
                {
                    "name": ps.name,
                    "flavors": {res: a.flavor for res, a in ps.flavors.items()},
                    "resourceUsage": {res: format_amount(res, ps.requests.get(res, 0)) for res in ps.flavors},
                    "count": ps.count,
                }
            )
        return out


@dataclass(slots=True)
class _Status:
    reasons: list[str] = field(default_factory=list)
    no_fit_reason: str = ""


class _Assigner:
    """``FlavorAssigner`` for one workload against one ClusterQueue of a tree."""

    __slots__ = ("cq", "flavors", "ignore_undeclared", "last", "node", "oracle", "tree")

    def __init__(
        self,
        tree: QuotaTree,
        cluster_queue: str,
        flavors: Mapping[str, ResourceFlavorSpec],
        oracle: PreemptionOracle,
        last: Sequence[Mapping[str, int]] | None,
        ignore_undeclared: bool,
    ) -> None:
        self.tree = tree
        self.node = tree._cq(cluster_queue)
        self.cq = tree._cq_specs[cluster_queue]
        self.flavors = flavors
        self.oracle = oracle
        self.last = last
        self.ignore_undeclared = ignore_undeclared

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
        can_preempt_while_borrowing = bwc is not None and bwc.policy != "Never"
        if nominal >= value or may_reclaim or can_preempt_while_borrowing:
            possibility, borrow_after = self.oracle(tree, name, fr, value)
            status.no_fit_reason = ""
            return _POSSIBILITY_TO_PM[possibility], borrow_after, status
        return _PM_NO_FIT, borrow, status

    def _check_flavor(self, flavor_name: str, pod_sets: Sequence[PodSetRequest]) -> list[str]:
        """``checkFlavorForPodSets``: taints and node labels; returns the reasons the flavor does not match."""
        flavor = self.flavors.get(flavor_name)
        if flavor is None:
            return [f"flavor {flavor_name} not found"]
        for ps in pod_sets:
            taint = find_untolerated_taint(flavor.node_taints, (*ps.tolerations, *flavor.tolerations))
            if taint is not None:
                return [f"untolerated taint {taint} in flavor {flavor_name}"]
            if not flavor_matches_pod_set(ps, flavor):
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
        for idx in range(start, len(flavors)):
            attempted = idx
            fname = flavors[idx]
            mismatch = self._check_flavor(fname, [pod_sets[i] for i in ps_ids])
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
                    continue
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
            count = counts[i] if counts is not None else ps.count
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
) -> Assignment:
    """Assign a flavor to every requested resource of every PodSet, as Kueue's flavor assigner does.

    Resource groups are walked in Kueue's resource order; for each, the group's flavors are tried in spec order
    (from ``last_tried_flavor_idx`` + 1 when resuming a scan), skipping flavors whose taints are not tolerated
    or whose labels the PodSet's node selector / required affinity rejects. Each resource's mode is ``Fit``
    (unused quota, possibly borrowed), ``Preempt`` (quota exists but is in use, and preemption could free it) or
    ``NoFit``; flavor fungibility decides whether to stop at a flavor that needs borrowing or preemption.

    Preemption feasibility comes from ``oracle``; by default, a classical preemption simulation over the
    workloads recorded in ``tree`` for a preemptor with ``priority`` and ``queue_order_time``. ``counts``
    overrides the PodSet counts (partial admission). Resources the ClusterQueue does not cover make the workload
    ``NoFit`` unless their request is zero or ``ignore_undeclared_resources`` (``QuotaCheckStrategy:
    IgnoreUndeclared``) is set.
    """
    if oracle is None:

        def default_oracle(t: QuotaTree, cq: str, fr: FlavorResource, qty: int) -> tuple[PreemptionPossibility, int]:
            return simulate_preemption(t, cq, fr, qty, priority=priority, queue_order_time=queue_order_time, now=now)

        oracle = default_oracle
    assigner = _Assigner(
        tree, cluster_queue, resource_flavors, oracle, last_tried_flavor_idx, ignore_undeclared_resources
    )
    return assigner.assign(pod_sets, counts)


FitCheck = tuple[FlavorResource, int, int]
"""One ``fitsResourceQuota`` call of a ``Fit`` assignment: (flavor-resource, value checked, borrowing height)."""


def fit_checks(assignment: Assignment) -> tuple[FitCheck, ...] | None:
    """The quota checks that decided a ``Fit`` assignment, for :func:`fits_as_before`; ``None`` when the assignment
    cannot be re-validated that way.

    Re-validation is exact when the only change since is added usage and every flavor tried before (or after) a
    chosen one was rejected for a reason usage cannot change (taints, node labels, a flavor not providing the
    resource: ``NoMatchingFlavor``). Then the flavor loop reaches the same chosen flavors again, and those give the
    same result if each of their ``fitsResourceQuota`` calls still fits at the same borrowing height. The value
    checked for a pod set is its request plus what the pod sets before it were assigned of that flavor-resource,
    as :meth:`_Assigner.assign` passes it.
    """
    if assignment.mode is not FlavorAssignmentMode.FIT:
        return None
    checks: list[FitCheck] = []
    assumed: dict[FlavorResource, int] = {}
    for psa in assignment.pod_sets:
        chosen = {a.flavor for a in psa.flavors.values()}
        for attempt in psa.attempts:
            if attempt.flavor not in chosen and attempt.no_fit_reason != NO_MATCHING_FLAVOR:
                return None
        for res, a in psa.flavors.items():
            fr = (a.flavor, res)
            value = _add(assumed.get(fr, 0), psa.requests.get(res, 0))
            checks.append((fr, value, a.borrow))
        for res, a in psa.flavors.items():
            fr = (a.flavor, res)
            assumed[fr] = _add(assumed.get(fr, 0), psa.requests.get(res, 0))
    return tuple(checks)


def fits_as_before(tree: QuotaTree, cluster_queue: str, checks: Sequence[FitCheck]) -> bool:
    """Whether every check of :func:`fit_checks` still fits, at the same borrowing height (the ``Fit`` branch of
    ``_Assigner._fits_quota``, which this must follow)."""
    node = tree._cqs.get(cluster_queue)
    if node is None:
        return False
    exact = tree._exact
    if node.parent is None and not exact:
        # A ClusterQueue without a cohort: available is its quota minus usage, and it never borrows.
        cells = node.cells
        for fr, value, borrow in checks:
            c = cells.get(fr)
            if c is None:
                return False
            free = c.subtree - c.usage
            if value > c.subtree or value > (free if free > 0 else 0) or borrow != 0:
                return False
        return True
    for fr, value, borrow in checks:
        cell = node.cell(fr)
        if exact:
            available, max_capacity = _available_exact(cell), _potential_exact(cell)
        else:
            available, max_capacity = _available_fast(cell), _potential_fast(cell)
        if value > max_capacity or value > max(available, 0):
            return False
        if tree._height_of_lowest_subtree_that_fits(node, fr, value)[0] != borrow:
            return False
    return True


def preemption_targets(
    tree: QuotaTree,
    assignment: Assignment,
    *,
    priority: int = 0,
    queue_order_time: float = 0.0,
    now: float = math.inf,
) -> list[PreemptionTarget]:
    """The victims for an assignment in ``Preempt`` mode (Kueue's ``Preemptor.GetTargets``, classical)."""
    usage = {fr: v for fr, v in assignment.usage.items() if v != 0}
    return find_preemption_targets(
        tree,
        assignment.cluster_queue,
        usage,
        assignment.flavor_resources_needing_preemption(),
        priority=priority,
        queue_order_time=queue_order_time,
        now=now,
    )


# --------------------------------------------------------------------------------------------------------------
# Queue ordering
# --------------------------------------------------------------------------------------------------------------


def pending_order_key(priority: int, queue_order_time: float, uid: str = "") -> tuple[int, float, str]:
    """Sort key of a ClusterQueue's pending workloads: higher priority first, then older queue-order timestamp
    (see :func:`queue_order_timestamp`), then UID, as Kueue's ``baseCompareFunc``. How an inadmissible head
    affects the rest depends on the :class:`QueueingStrategy`."""
    return (-priority, queue_order_time, uid)
