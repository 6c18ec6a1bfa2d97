"""Kueue's workload inputs: pod requests, pod sets with their constraints, admitted workloads, queue order.

Follows ``resourcehelpers.PodRequests`` and Kueue's ``pkg/workload`` (pod sets with ``minCount``, the node
selector, tolerations and required node affinity of their template, the quota an admitted workload holds per
flavor-resource and its eviction state) and the pending-queue ordering (``queue_order_timestamp``,
``baseCompareFunc``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from dispatcher.quantity import kueue_value, parse_quantity

from .amounts import FlavorResource
from .specs import NodeSelectorRequirement, Toleration, _list, _map, _str, _timestamp
from .topology import TASUsage, TopologyRequest, workload_tas_usage

__all__ = [
    "AdmittedWorkload",
    "PodSetRequest",
    "pending_order_key",
    "pod_requests",
    "queue_order_timestamp",
    "workload_pod_sets",
]


def _resource_list(obj: object) -> dict[str, Fraction]:
    return {str(k): parse_quantity(v) for k, v in _map(obj).items()}


def pod_requests(pod_spec: Mapping[str, Any], *, limits_as_requests: bool = True) -> dict[str, int]:
    """A pod's effective requests in Kueue units, as ``resourcehelpers.PodRequests`` computes them.

    Containers are summed; init containers count at their peak (restartable sidecars stay for the pod's life);
    the pod overhead is added. A container limit stands in for a missing request, as Kueue's job integration
    does before it creates the Workload (``UseLimitsAsMissingRequestsInPod``); TAS places pods by the pod spec's
    own requests (``NewRequestsFromPodSpec``), ``limits_as_requests=False``. Negative values are floored to zero.
    """

    def container_requests(c: Mapping[str, Any]) -> dict[str, Fraction]:
        resources = _map(c.get("resources"))
        merged = _resource_list(resources.get("limits")) if limits_as_requests else {}
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
    PodSet's ``minCount`` (``None``: no partial admission), down to which :mod:`.partial` may reduce the count.
    ``count`` is the count after ``status.reclaimablePods``, ``spec_count`` the Workload's own count when that
    differs (``None``: the same); partial admission reduces the spec count, as Kueue does. ``topology`` is the pod
    set's TAS ``topologyRequest`` and ``tas_requests`` the per-pod requests TAS places by (the pod spec's requests,
    before transformations and without limits; ``None``: ``requests``).
    """

    name: str
    count: int
    requests: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    node_affinity: tuple[tuple[NodeSelectorRequirement, ...], ...] | None = None
    group: str | None = None
    min_count: int | None = None
    spec_count: int | None = None
    topology: TopologyRequest | None = None
    tas_requests: Mapping[str, int] | None = None

    @property
    def full_count(self) -> int:
        """The Workload's own count (``spec.podSets[].count``), from which partial admission reduces."""
        return self.count if self.spec_count is None else self.spec_count

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], count: int | None = None) -> PodSetRequest:
        """Read a Workload ``spec.podSets[]`` entry (``count`` overrides the PodSet's own count)."""
        pod_spec = _map(_map(obj.get("template")).get("spec"))
        node_selector, tolerations, terms = pod_constraints(pod_spec)
        raw_count = obj.get("count", 1)
        group = _str(_map(obj.get("topologyRequest")).get("podSetGroupName")) or None
        topology = TopologyRequest.from_object(obj.get("topologyRequest"))
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
            topology=topology,
            tas_requests=pod_requests(pod_spec, limits_as_requests=False),
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
    """The PodSets of a Workload object, counts reduced by ``status.reclaimablePods`` as Kueue does
    (``podSetsCountsAfterReclaim``; the spec count is kept in ``spec_count``)."""
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
        after = max(0, count - reclaimable.get(name, 0))
        request = PodSetRequest.from_object(psm, count=after)
        if after != count:
            request = replace(request, spec_count=count)
        result.append(request)
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
    #: What the workload holds in TAS flavors' topology domains (from its ``topologyAssignment``).
    tas_usage: tuple[TASUsage, ...] = ()

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
            tas_usage=workload_tas_usage(workload),
        )


# --------------------------------------------------------------------------------------------------------------
# Queue ordering
# --------------------------------------------------------------------------------------------------------------


def pending_order_key(priority: int, queue_order_time: float, uid: str = "") -> tuple[int, float, str]:
    """Sort key of a ClusterQueue's pending workloads: higher priority first, then older queue-order timestamp
    (see :func:`queue_order_timestamp`), then UID, as Kueue's ``baseCompareFunc``. How an inadmissible head
    affects the rest depends on the :class:`QueueingStrategy`."""
    return (-priority, queue_order_time, uid)
