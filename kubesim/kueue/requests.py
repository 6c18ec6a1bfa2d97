"""What a Workload asks of quota: per-pod requests of its pod sets, as the simulated Kueue counts them.

Follows Kueue v0.17:

* ``pkg/workload/resources.go`` ``UseLimitsAsMissingRequestsInPod``: a container limit stands in for a request
  the container does not set;
* ``k8s.io/component-helpers/resource.PodRequests`` (called by ``totalRequestsFromPodSets``): app containers are
  summed; a restartable init container (``restartPolicy: Always``, a sidecar) is added to that sum and stays for
  the rest of the init sequence; every init container counts at its peak together with the sidecars started before
  it; the pod asks for the larger of the two, plus ``spec.overhead``;
* ``pkg/workload/workload.go`` ``dropExcludedResources`` and ``applyResourceTransformations`` (the
  ``resources.excludeResourcePrefixes`` and ``resources.transformations`` of Kueue's Configuration), which work on
  quantities and use ``Quantity.Value()`` (rounded up) of the input and of ``multiplyBy``;
* ``pkg/resources`` ``ResourceValue``: milli-units for ``cpu``, whole units rounded up for everything else, and
  ``ResourceQuantityString`` to print such a value back.

Pod-level resources (``spec.resources``) are not read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from math import ceil
from typing import Any

from kubecommon.quantity import QuantityError, format_quantity, kueue_value, parse_quantity

__all__ = [
    "FlavorResource",
    "PodSet",
    "ResourceTransformation",
    "effective_requests",
    "pod_requests",
    "quantity_string",
    "resource_value",
    "workload_pod_sets",
]

FlavorResource = tuple[str, str]
"""``(flavor, resource)``: Kueue's ``resources.FlavorResource``."""

Obj = dict[str, Any]


def _quantity(value: Any) -> Fraction:
    """A quantity of a stored object (the API server validated it); anything unreadable counts as zero."""
    try:
        return parse_quantity(value)
    except (QuantityError, TypeError, ValueError):
        return Fraction(0)


def _go_value(amount: Fraction) -> int:
    """``Quantity.Value()``: the value rounded up to an integer."""
    return ceil(amount)


def resource_value(resource: str, amount: Fraction) -> int:
    """``resources.ResourceValue``: ``cpu`` in milli-units, anything else in whole units, rounded up."""
    return kueue_value(resource, amount)


def quantity_string(resource: str, value: int) -> str:
    """``resources.ResourceQuantityString``: how Kueue prints a value in its messages and statuses.

    ``cpu`` is a milli-quantity; ``memory``, ``ephemeral-storage`` and ``hugepages-*`` are binary quantities made
    canonical (a multiple of 1024 keeps a binary suffix, anything else is printed as a decimal quantity, so
    ``1000000`` is ``1M``); other resources are decimal quantities.
    """
    if resource == "cpu":
        return format_quantity(Fraction(value, 1000))
    binary = resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")
    if binary and value % 1024 == 0 and abs(value) >= 1024:
        return format_quantity(Fraction(value), binary=True)
    return format_quantity(Fraction(value))


# --------------------------------------------------------------------------------------------------------------
# Pod requests
# --------------------------------------------------------------------------------------------------------------


def _container_requests(container: Mapping[str, Any], limits: bool = True) -> dict[str, Fraction]:
    """A container's requests after ``UseLimitsAsMissingRequestsInPod`` (requests win, limits fill the gaps);
    ``limits=False``: its own requests only (``NewRequestsFromPodSpec``, what TAS places by)."""
    resources = container.get("resources") or {}
    out = {str(k): _quantity(v) for k, v in (resources.get("limits") or {}).items()} if limits else {}
    out.update({str(k): _quantity(v) for k, v in (resources.get("requests") or {}).items()})
    return out


def _add_into(total: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, Fraction(0)) + amount


def pod_requests(pod_spec: Mapping[str, Any], limits: bool = True) -> dict[str, Fraction]:
    """One pod's requests (``PodRequests`` over a spec whose limits stand in for missing requests, unless
    ``limits=False``)."""
    total: dict[str, Fraction] = {}
    for container in pod_spec.get("containers") or ():
        _add_into(total, _container_requests(container, limits))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for container in pod_spec.get("initContainers") or ():
        own = _container_requests(container, limits)
        if container.get("restartPolicy") == "Always":
            _add_into(total, own)
            _add_into(sidecars, own)
            during = dict(sidecars)
        else:
            during = dict(own)
            _add_into(during, sidecars)
        for name, amount in during.items():
            if amount > init_peak.get(name, Fraction(0)):
                init_peak[name] = amount
    for name, amount in init_peak.items():
        if amount > total.get(name, Fraction(0)):
            total[name] = amount
    _add_into(total, {str(k): _quantity(v) for k, v in (pod_spec.get("overhead") or {}).items()})
    return total


# --------------------------------------------------------------------------------------------------------------
# Configuration: excluded prefixes and transformations
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceTransformation:
    """One entry of Kueue's ``resources.transformations`` (``config.ResourceTransformation``)."""

    input: str
    strategy: str = "Retain"
    outputs: tuple[tuple[str, Fraction], ...] = ()
    multiply_by: str = ""

    @classmethod
    def from_config(cls, raw: Mapping[str, Any]) -> ResourceTransformation:
        """Read one configuration entry; raises ``ValueError`` for an entry Kueue's validation would refuse."""
        name = raw.get("input")
        if not isinstance(name, str) or not name:
            raise ValueError("transformation without input")
        strategy = raw.get("strategy") or "Retain"
        if strategy not in ("Retain", "Replace"):
            raise ValueError(f"unknown strategy {strategy!r}")
        outputs_raw = raw.get("outputs") or {}
        if not isinstance(outputs_raw, Mapping):
            raise ValueError("outputs must be a map")
        try:
            outputs = tuple((str(k), parse_quantity(v)) for k, v in outputs_raw.items())
        except QuantityError as err:
            raise ValueError(str(err)) from None
        multiply_by = raw.get("multiplyBy") or ""
        return cls(name, str(strategy), outputs, str(multiply_by))


def effective_requests(
    requests: Mapping[str, Fraction],
    transformations: Iterable[ResourceTransformation] = (),
    excluded_prefixes: Iterable[str] = (),
) -> dict[str, Fraction]:
    """``dropExcludedResources`` then ``applyResourceTransformations`` on one pod's requests.

    A transformed input contributes ``output factor x Value(input)`` to each output; with ``multiplyBy`` the input
    is first multiplied by ``Value()`` of that resource, and ``Retain`` keeps the (multiplied) input. Kueue writes
    outputs and kept inputs into one map in Go's random map order, so an output named like a kept resource may
    either add to it or be overwritten; here it always adds.
    """
    prefixes = tuple(excluded_prefixes)
    kept = {name: amount for name, amount in requests.items() if not (prefixes and name.startswith(prefixes))}
    by_input: dict[str, ResourceTransformation] = {}
    for t in transformations:
        by_input[t.input] = t
    if not any(name in by_input for name in kept):
        return kept
    out: dict[str, Fraction] = {}
    for name, amount in kept.items():
        transformation = by_input.get(name)
        if transformation is None:
            out[name] = out.get(name, Fraction(0)) + amount
            continue
        value = amount
        if transformation.multiply_by and transformation.multiply_by in kept:
            value = amount * _go_value(kept[transformation.multiply_by])
        for output, factor in transformation.outputs:
            out[output] = out.get(output, Fraction(0)) + factor * _go_value(value)
        if transformation.strategy == "Retain":
            out[name] = out.get(name, Fraction(0)) + value
    return out


# --------------------------------------------------------------------------------------------------------------
# Pod sets
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodSet:
    """A Workload pod set as the flavor assigner reads it (``workload.PodSetResources`` plus its spec).

    ``requests`` are per pod, in Kueue units, after the configuration's exclusions and transformations.
    ``count`` is the count after ``status.reclaimablePods`` (``podSetsCountsAfterReclaim``), ``spec_count`` the
    Workload's own count, which partial admission reduces (down to ``min_count``).
    """

    name: str
    count: int
    requests: Mapping[str, int]
    spec_count: int
    min_count: int | None = None
    group: str | None = None
    pod_spec: Mapping[str, Any] = field(default_factory=dict)
    #: TAS: the pod set's ``topologyRequest``, and its per-pod requests as TAS counts them (the spec's own).
    topology: Mapping[str, Any] | None = None
    tas_per_pod: Mapping[str, int] = field(default_factory=dict)

    def scaled(self, count: int) -> PodSet:
        """``PodSetResources.ScaledTo``: the same pod set with another count (a count of 0 stays 0)."""
        if self.count in (0, count):
            return self
        return replace(self, count=count)

    def totals(self) -> dict[str, int]:
        """The pod set's requests for all its pods (``TotalRequests``)."""
        return {name: value * self.count for name, value in self.requests.items()}


def workload_pod_sets(
    workload: Mapping[str, Any],
    transformations: Iterable[ResourceTransformation] = (),
    excluded_prefixes: Iterable[str] = (),
) -> list[PodSet]:
    """The pod sets of a pending Workload (``totalRequestsFromPodSets``), counts reduced by reclaimable pods."""
    status = workload.get("status") or {}
    reclaimable: dict[str, int] = {}
    for r in status.get("reclaimablePods") or ():
        reclaimable[str(r.get("name") or "")] = int(r.get("count") or 0)
    transformations = tuple(transformations)
    excluded_prefixes = tuple(excluded_prefixes)
    out: list[PodSet] = []
    for ps in (workload.get("spec") or {}).get("podSets") or ():
        name = str(ps.get("name") or "main")
        raw_count = ps.get("count", 1)
        spec_count = raw_count if isinstance(raw_count, int) and not isinstance(raw_count, bool) else 1
        pod_spec = (ps.get("template") or {}).get("spec") or {}
        per_pod = effective_requests(pod_requests(pod_spec), transformations, excluded_prefixes)
        raw_min = ps.get("minCount")
        topology = ps.get("topologyRequest") if isinstance(ps.get("topologyRequest"), dict) else None
        group = ((ps.get("topologyRequest") or {}).get("podSetGroupName")) or None
        out.append(
            PodSet(
                name=name,
                count=max(0, spec_count - reclaimable.get(name, 0)),
                requests={res: resource_value(res, amount) for res, amount in per_pod.items()},
                spec_count=spec_count,
                min_count=raw_min if isinstance(raw_min, int) and not isinstance(raw_min, bool) else None,
                group=str(group) if group else None,
                pod_spec=pod_spec,
                topology=topology,
                tas_per_pod={r: resource_value(r, a) for r, a in pod_requests(pod_spec, limits=False).items()},
            )
        )
    return out
