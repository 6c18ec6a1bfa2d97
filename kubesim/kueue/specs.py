"""ClusterQueue, Cohort and ResourceFlavor objects as the simulated Kueue's cache holds them.

Follows Kueue v0.17's API (``apis/kueue/v1beta2``, with the CRD defaults: ``whenCanBorrow: MayStopSearch``,
``whenCanPreempt: TryNextFlavor``, every preemption policy ``Never``, ``queueingStrategy: BestEffortFIFO``,
``stopPolicy: None``) and how its cache reads them: quotas in ``resources.ResourceValue`` units
(``pkg/cache/scheduler/resource.go`` ``createResourceQuotas``), resource groups with their flavors in spec order
(``createdResourceGroups``), the namespace selector as ``metav1.LabelSelectorAsSelector`` (a missing selector
matches nothing, an empty one everything). The v1beta1 spellings (``spec.cohort``, ``Borrow``/``Preempt``
fungibility values, a Cohort's ``spec.parent``) are read too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubecommon.quantity import QuantityError, parse_quantity

from .requests import FlavorResource, resource_value

__all__ = [
    "ClusterQueueSpec",
    "CohortSpec",
    "FlavorFungibility",
    "FlavorSpec",
    "Preemption",
    "Quota",
    "ResourceGroup",
    "label_selector_matches",
]

Obj = dict[str, Any]

MAY_STOP_SEARCH = "MayStopSearch"
TRY_NEXT_FLAVOR = "TryNextFlavor"
NEVER = "Never"


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _amount(resource: str, value: object) -> int:
    try:
        return resource_value(resource, parse_quantity(value if isinstance(value, str | int | float) else 0))
    except QuantityError:
        return 0


def _weight(spec: Mapping[str, Any]) -> float:
    """``parseFairWeight``: ``spec.fairSharing.weight`` as a float, 1 when unset."""
    raw = _dict(spec.get("fairSharing")).get("weight")
    if raw is None:
        return 1.0
    try:
        return float(parse_quantity(raw))
    except (QuantityError, TypeError, ValueError):
        return 1.0


@dataclass(frozen=True)
class Quota:
    """``schdcache.ResourceQuota``: nominal quota and optional borrowing and lending limits."""

    nominal: int = 0
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class ResourceGroup:
    """Resources that share flavors; a pod set gets one flavor for all of a group's resources."""

    covered: frozenset[str]
    flavors: tuple[str, ...]


def _resource_groups(raw: object) -> tuple[tuple[ResourceGroup, ...], dict[FlavorResource, Quota]]:
    groups: list[ResourceGroup] = []
    quotas: dict[FlavorResource, Quota] = {}
    for rg in _list(raw):
        rgm = _dict(rg)
        flavors: list[str] = []
        for flavor in _list(rgm.get("flavors")):
            fm = _dict(flavor)
            fname = _text(fm.get("name"))
            flavors.append(fname)
            for r in _list(fm.get("resources")):
                rm = _dict(r)
                res = _text(rm.get("name"))
                borrowing, lending = rm.get("borrowingLimit"), rm.get("lendingLimit")
                quotas[(fname, res)] = Quota(
                    nominal=_amount(res, rm.get("nominalQuota", 0)),
                    borrowing_limit=None if borrowing is None else _amount(res, borrowing),
                    lending_limit=None if lending is None else _amount(res, lending),
                )
        groups.append(ResourceGroup(frozenset(_text(c) for c in _list(rgm.get("coveredResources"))), tuple(flavors)))
    return tuple(groups), quotas


@dataclass(frozen=True)
class FlavorFungibility:
    """``spec.flavorFungibility``: when the flavor search stops, and which outcome is preferred."""

    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR
    preference: str | None = None


@dataclass(frozen=True)
class Preemption:
    """``spec.preemption`` with its defaults."""

    within_cluster_queue: str = NEVER
    reclaim_within_cohort: str = NEVER
    borrow_within_cohort: str = NEVER
    max_priority_threshold: int | None = None


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """``metav1.LabelSelectorAsSelector(selector).Matches(labels)``: ``None`` matches nothing, ``{}`` everything."""
    if selector is None:
        return False
    for key, value in _dict(selector.get("matchLabels")).items():
        if labels.get(key) != value:
            return False
    for expr in _list(selector.get("matchExpressions")):
        em = _dict(expr)
        key, op = _text(em.get("key")), _text(em.get("operator"))
        values = {_text(v) for v in _list(em.get("values"))}
        present = key in labels
        if op == "In":
            ok = present and labels[key] in values
        elif op == "NotIn":
            ok = not present or labels[key] not in values
        elif op == "Exists":
            ok = present
        elif op == "DoesNotExist":
            ok = not present
        else:
            ok = False
        if not ok:
            return False
    return True


@dataclass(frozen=True)
class ClusterQueueSpec:
    """What of a ClusterQueue the simulated Kueue admits by."""

    name: str
    cohort: str | None = None
    groups: tuple[ResourceGroup, ...] = ()
    quotas: Mapping[FlavorResource, Quota] = field(default_factory=dict)
    fungibility: FlavorFungibility = FlavorFungibility()
    preemption: Preemption = Preemption()
    queueing_strategy: str = "BestEffortFIFO"
    stop_policy: str = "None"
    namespace_selector: Mapping[str, Any] | None = None
    #: ``spec.fairSharing.weight`` (``parseFairWeight``), used when fair sharing is on.
    fair_weight: float = 1.0

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ClusterQueueSpec:
        spec = _dict(obj.get("spec"))
        groups, quotas = _resource_groups(spec.get("resourceGroups"))
        ff = _dict(spec.get("flavorFungibility"))
        borrow = _text(ff.get("whenCanBorrow")) or MAY_STOP_SEARCH
        preempt = _text(ff.get("whenCanPreempt")) or TRY_NEXT_FLAVOR
        pre = _dict(spec.get("preemption"))
        bwc = _dict(pre.get("borrowWithinCohort"))
        threshold = bwc.get("maxPriorityThreshold")
        selector = spec.get("namespaceSelector")
        return cls(
            name=_text(_dict(obj.get("metadata")).get("name")),
            cohort=_text(spec.get("cohortName")) or _text(spec.get("cohort")) or None,
            groups=groups,
            quotas=quotas,
            fungibility=FlavorFungibility(
                MAY_STOP_SEARCH if borrow == "Borrow" else borrow,
                MAY_STOP_SEARCH if preempt == "Preempt" else preempt,
                _text(ff.get("preference")) or None,
            ),
            preemption=Preemption(
                _text(pre.get("withinClusterQueue")) or NEVER,
                _text(pre.get("reclaimWithinCohort")) or NEVER,
                _text(bwc.get("policy")) or NEVER,
                threshold if isinstance(threshold, int) and not isinstance(threshold, bool) else None,
            ),
            queueing_strategy=_text(spec.get("queueingStrategy")) or "BestEffortFIFO",
            stop_policy=_text(spec.get("stopPolicy")) or "None",
            namespace_selector=dict(selector) if isinstance(selector, Mapping) else None,
            fair_weight=_weight(spec),
        )

    @property
    def is_stopped(self) -> bool:
        """A ``Hold`` or ``HoldAndDrain`` stop policy keeps the ClusterQueue from admitting."""
        return self.stop_policy != "None"

    @property
    def strict_fifo(self) -> bool:
        return self.queueing_strategy == "StrictFIFO"

    def matches_namespace(self, labels: Mapping[str, str]) -> bool:
        return label_selector_matches(self.namespace_selector, labels)

    def group_of(self, resource: str) -> ResourceGroup | None:
        """``RGByResource``: the first resource group covering ``resource``."""
        for rg in self.groups:
            if resource in rg.covered:
                return rg
        return None

    def flavor_names(self) -> list[str]:
        """Every flavor the ClusterQueue references, in spec order, once each."""
        return list(dict.fromkeys(f for rg in self.groups for f in rg.flavors))


@dataclass(frozen=True)
class CohortSpec:
    """A Cohort object: an optional parent and quota of its own."""

    name: str
    parent: str | None = None
    quotas: Mapping[FlavorResource, Quota] = field(default_factory=dict)
    fair_weight: float = 1.0

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> CohortSpec:
        spec = _dict(obj.get("spec"))
        _, quotas = _resource_groups(spec.get("resourceGroups"))
        parent = _text(spec.get("parentName")) or _text(spec.get("parent")) or None
        return cls(_text(_dict(obj.get("metadata")).get("name")), parent, quotas, _weight(spec))


@dataclass(frozen=True)
class FlavorSpec:
    """What of a ResourceFlavor the flavor assigner looks at: node labels, node taints, tolerations, and the
    Topology of a TAS flavor (``spec.topologyName``)."""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Mapping[str, Any], ...] = ()
    tolerations: tuple[Mapping[str, Any], ...] = ()
    topology: str | None = None

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> FlavorSpec:
        spec = _dict(obj.get("spec"))
        return cls(
            name=_text(_dict(obj.get("metadata")).get("name")),
            node_labels={str(k): _text(v) for k, v in _dict(spec.get("nodeLabels")).items()},
            node_taints=tuple(dict(_dict(t)) for t in _list(spec.get("nodeTaints"))),
            tolerations=tuple(dict(_dict(t)) for t in _list(spec.get("tolerations"))),
            topology=_text(spec.get("topologyName")) or None,
        )
