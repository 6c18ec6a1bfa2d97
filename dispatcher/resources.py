"""Resource requests of pods and pod sets, computed as Kueue computes them.

Per pod: limits stand in for missing requests (Kueue's ``UseLimitsAsMissingRequestsInPod``); regular
containers and sidecars (init containers with ``restartPolicy: Always``) are summed; every other init
container counts as its own peak together with the sidecars started before it; pod overhead is added
(``k8s.io/component-helpers`` ``PodRequests``). Then Kueue's configured excluded prefixes and resource
transformations apply (``pkg/workload/workload.go``), and the total is the per-pod amount times the
pod set's count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from math import ceil, floor
from typing import Any

from .quantity import QuantityError, format_quantity, kueue_value, parse_quantity

__all__ = [
    "InvalidRequest",
    "PodSet",
    "ResourceTransformation",
    "container_requests",
    "format_requests",
    "pod_requests",
    "transform",
]

Obj = dict[str, Any]


class InvalidRequest(ValueError):
    """A resource quantity that cannot be parsed; ``field`` is its path in the object."""

    def __init__(self, field: str, value: Any, why: str) -> None:
        super().__init__(f"{field}: {why}: {value!r}")
        self.field = field
        self.value = value
        self.why = why


def _q(value: Any, path: str) -> Fraction:
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        raise InvalidRequest(path, value, str(exc)) from None


def container_requests(container: Mapping[str, Any], path: str = "container") -> dict[str, Fraction]:
    """Requests of one container, with limits standing in for missing requests."""
    res = container.get("resources") or {}
    out: dict[str, Fraction] = {}
    for name, value in (res.get("limits") or {}).items():
        out[name] = _q(value, f"{path}.resources.limits[{name}]")
    for name, value in (res.get("requests") or {}).items():
        out[name] = _q(value, f"{path}.resources.requests[{name}]")
    return out


def _add(into: dict[str, Fraction], other: Mapping[str, Fraction]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, Fraction(0)) + v


def pod_requests(spec: Mapping[str, Any], path: str = "spec") -> dict[str, Fraction]:
    """Effective requests of one pod (see the module docstring)."""
    total: dict[str, Fraction] = {}
    for i, c in enumerate(spec.get("containers") or []):
        _add(total, container_requests(c, f"{path}.containers[{i}]"))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for i, c in enumerate(spec.get("initContainers") or []):
        req = container_requests(c, f"{path}.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            _add(sidecars, req)
            _add(total, req)
            continue
        peak = dict(sidecars)
        _add(peak, req)
        for k, v in peak.items():
            init_peak[k] = max(init_peak.get(k, Fraction(0)), v)
    for k, v in init_peak.items():
        total[k] = max(total.get(k, Fraction(0)), v)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Fraction(0)) + _q(value, f"{path}.overhead[{name}]")
    return total


@dataclass(frozen=True)
class ResourceTransformation:
    """One entry of Kueue's ``resources.transformations``."""

    input: str
    strategy: str = "Retain"  # Retain | Replace
    outputs: Mapping[str, Fraction] = field(default_factory=dict)
    multiply_by: str | None = None

    @classmethod
    def from_config(cls, raw: Mapping[str, Any]) -> ResourceTransformation:
        return cls(
            input=str(raw["input"]),
            strategy=str(raw.get("strategy", "Retain")),
            outputs={str(k): parse_quantity(v) for k, v in (raw.get("outputs") or {}).items()},
            multiply_by=raw.get("multiplyBy"),
        )


def _go_value(amount: Fraction) -> int:
    """``Quantity.Value()``: whole units, rounded up away from zero."""
    return ceil(amount) if amount >= 0 else floor(amount)


def transform(
    requests: Mapping[str, Fraction],
    transformations: Iterable[ResourceTransformation] = (),
    excluded_prefixes: Iterable[str] = (),
) -> dict[str, Fraction]:
    """Kueue's ``dropExcludedResources`` then ``applyResourceTransformations`` on per-pod requests.

    As Kueue v0.17.0 (the release the real rig runs): with ``multiplyBy`` the input is first multiplied by
    ``Value()`` (whole units, rounded up) of that resource; each output adds ``factor x Value(input)``; ``Retain``
    keeps the (multiplied) input. Outputs are not clamped: a negative factor gives a negative request. (Kueue
    v0.17.7+, kueue#12953, multiplies exact decimals instead of rounding.) Kueue writes outputs and kept inputs into
    one map in Go's map order, so an output named like a kept resource may add to it or be overwritten; here it
    always adds.
    """
    excluded = tuple(excluded_prefixes)
    current = {k: v for k, v in requests.items() if not (excluded and k.startswith(excluded))}
    by_input = {t.input: t for t in transformations}
    if not any(k in by_input for k in current):
        return current
    retained: dict[str, Fraction] = {}
    generated: dict[str, Fraction] = {}
    for name, amount in current.items():
        t = by_input.get(name)
        if t is None:
            retained[name] = amount
            continue
        base = amount
        if t.multiply_by and t.multiply_by in current:
            base = amount * _go_value(current[t.multiply_by])
        whole = _go_value(base)
        for out_name, factor in t.outputs.items():
            generated[out_name] = generated.get(out_name, Fraction(0)) + factor * whole
        if t.strategy == "Retain":
            retained[name] = base
    for k, v in generated.items():
        retained[k] = retained.get(k, Fraction(0)) + v
    return retained


@dataclass(frozen=True)
class PodSet:
    """A group of identical pods, Kueue's unit of admission."""

    name: str
    count: int
    #: Per-pod effective requests, before any worker's transformations.
    requests: Mapping[str, Fraction]
    #: The pod template (labels, annotations, spec), for node selectors, tolerations and HAMi fitting.
    template: Mapping[str, Any] = field(default_factory=dict)
    #: Kueue's ``minCount`` (partial admission): a worker's Kueue may admit as few pods when all do not fit.
    min_count: int | None = None

    def to_json(self) -> Obj:
        out: Obj = {
            "name": self.name,
            "count": self.count,
            "requests": {k: format_quantity(v, binary=k == "memory") for k, v in sorted(self.requests.items())},
        }
        if self.min_count is not None:
            out["minCount"] = self.min_count
        return out

    def kueue_requests(
        self, transformations: Iterable[ResourceTransformation] = (), excluded_prefixes: Iterable[str] = ()
    ) -> dict[str, int]:
        """Total Kueue usage of the pod set on a worker with that Kueue configuration."""
        per_pod = transform(self.requests, transformations, excluded_prefixes)
        return {k: kueue_value(k, v) * self.count for k, v in per_pod.items() if v != 0}


def format_requests(pod_sets: Iterable[PodSet]) -> dict[str, str]:
    """Total requests of all pod sets as quantity strings (count × per pod), for display."""
    total: dict[str, Fraction] = {}
    for ps in pod_sets:
        for k, v in ps.requests.items():
            total[k] = total.get(k, Fraction(0)) + v * ps.count
    return {k: format_quantity(v, binary=k == "memory") for k, v in sorted(total.items())}
