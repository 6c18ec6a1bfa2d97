"""ClusterQueue, Cohort and ResourceFlavor specs as Kueue reads them, with taints, tolerations and selectors.

Parsed from v1beta2 objects (and the v1beta1 spellings, ``apis/kueue``): quotas per resource group and flavor,
borrowing and lending limits, preemption and flavor fungibility settings, the queueing strategy, the stop
policy, namespace selector and admission checks; ResourceFlavor node labels, taints and tolerations; and the
label-selector, taint-toleration and node-affinity matching the flavor assigner applies to flavors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from dispatcher.quantity import QuantityError, parse_quantity

from .amounts import _MIN64, UNLIMITED, quota_amount

__all__ = [
    "BorrowWithinCohort",
    "ClusterQueueSpec",
    "CohortSpec",
    "FairSharingConfig",
    "FlavorFungibility",
    "FlavorQuotasSpec",
    "NodeSelectorRequirement",
    "PreemptionPolicy",
    "PreemptionSpec",
    "QueueingStrategy",
    "ResourceFlavorSpec",
    "ResourceGroupSpec",
    "ResourceQuotaSpec",
    "Taint",
    "Toleration",
    "find_untolerated_taint",
]


_MAY_STOP_SEARCH: Final = "MayStopSearch"
_TRY_NEXT_FLAVOR: Final = "TryNextFlavor"
_BORROWING_OVER_PREEMPTION: Final = "BorrowingOverPreemption"
_PREEMPTION_OVER_BORROWING: Final = "PreemptionOverBorrowing"


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


def _fair_weight(spec: Mapping[str, Any]) -> float:
    """``parseFairWeight``: ``spec.fairSharing.weight`` as a float (``Quantity.AsFloat64Slow``), 1 when unset."""
    weight = _map(spec.get("fairSharing")).get("weight")
    if weight is None:
        return 1.0
    try:
        return float(parse_quantity(weight))
    except (QuantityError, TypeError, ValueError):
        return 1.0


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
    #: ``spec.fairSharing.weight`` (only used when fair sharing is on in Kueue's configuration).
    fair_weight: float = 1.0

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
            fair_weight=_fair_weight(spec),
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
    fair_weight: float = 1.0

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> CohortSpec:
        spec = _map(obj.get("spec"))
        parent = _str(spec.get("parentName")) or _str(spec.get("parent")) or None
        return cls(_name(obj, "Cohort"), parent, _resource_groups(spec.get("resourceGroups")), _fair_weight(spec))


LESS_THAN_OR_EQUAL_TO_FINAL_SHARE: Final = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE: Final = "LessThanInitialShare"


@dataclass(frozen=True, slots=True)
class FairSharingConfig:
    """Fair sharing as Kueue's ``Configuration`` turns it on, with its preemption strategies.

    ``config.kueue.x-k8s.io/v1beta2`` (what v0.17.0 reads natively): a ``fairSharing`` section turns it on
    (``fairsharing.Enabled``: not nil); ``v1beta1``: ``fairSharing.enable: true`` (``Convert_v1beta1_Configuration``
    drops the section otherwise). No strategy listed: ``[LessThanOrEqualToFinalShare, LessThanInitialShare]``
    (``parseStrategies``). ``preempt_within_nominal`` is the ``FairSharingPreemptWithinNominal`` gate and
    ``prioritize_non_borrowing`` ``FairSharingPrioritizeNonBorrowing``, both beta and on in v0.17.0, readable from
    the Configuration's ``featureGates``.
    """

    strategies: tuple[str, ...] = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
    preempt_within_nominal: bool = True
    prioritize_non_borrowing: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> FairSharingConfig | None:
        """Read Kueue's Configuration (the document of ``controller_manager_config.yaml``); ``None``: off."""
        data = _map(config)
        section = data.get("fairSharing")
        if not isinstance(section, Mapping):
            return None
        if _str(data.get("apiVersion")).endswith("/v1beta1") and section.get("enable") is not True:
            return None
        strategies = tuple(_str(s) for s in _list(section.get("preemptionStrategies")) if _str(s))
        gates = _map(data.get("featureGates"))
        within = gates.get("FairSharingPreemptWithinNominal")
        non_borrowing = gates.get("FairSharingPrioritizeNonBorrowing")
        return cls(
            strategies or (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE),
            within if isinstance(within, bool) else True,
            non_borrowing if isinstance(non_borrowing, bool) else True,
        )


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
