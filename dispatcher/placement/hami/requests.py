"""A pod's resources read into one HAMi request per container (section 1 of ``/work/shared/hami-rules.md``).

Follows ``GenerateResourceRequests`` (``pkg/device/nvidia/device.go:520-600``) and ``Resourcereqs``
(``pkg/device/devices.go:639``), with the Kubernetes quantity semantics HAMi relies on (``AsInt64`` on the
canonical form, ``Value`` rounding up). The admission webhook, which changes what these functions see, is in
:mod:`.webhook`.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from math import ceil, floor
from typing import Any

from dispatcher.quantity import QuantityError, parse_quantity

from .devices import DEFAULT_CONFIG, ContainerRequest, HamiConfig
from .gosemantics import _MAX_INT32, _MAX_INT64, _i32

__all__ = ["container_request", "pod_requests"]


def _quantity(value: Any) -> Fraction | None:
    """The exact value of a resource quantity, or ``None`` when it is not one (the API server refuses those)."""
    if isinstance(value, Fraction):
        return value
    try:
        return parse_quantity(value)
    except (QuantityError, TypeError, ValueError):
        return None


def _as_int64(value: Any) -> int | None:
    """``Quantity.AsInt64()`` on the canonical form the API server stores: whole values within int64 only.

    HAMi reads pods through the API, which canonicalises quantities (``1.0`` is stored as ``1``, ``1.5`` as
    ``1500m``), so the question is whether the exact value is a whole number that fits an int64.
    """
    q = _quantity(value)
    if q is None or q.denominator != 1 or not -(2**63) <= q.numerator <= _MAX_INT64:
        return None
    return q.numerator


def _go_value(value: Any) -> int | None:
    """``Quantity.Value()``: rounded up, away from zero."""
    q = _quantity(value)
    if q is None:
        return None
    return ceil(q) if q >= 0 else floor(q)


def _resources(container: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    resources = container.get("resources") or {}
    return resources.get("limits") or {}, resources.get("requests") or {}


def _lookup(limits: Mapping[str, Any], requests: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    """Limits first, then requests (device.go:525-528)."""
    if name in limits:
        return True, limits[name]
    if name in requests:
        return True, requests[name]
    return False, None


def _request_from(limits: Mapping[str, Any], requests: Mapping[str, Any], cfg: HamiConfig) -> ContainerRequest | None:
    """``GenerateResourceRequests`` (device.go:520-600), returning ``None`` where ``Resourcereqs`` drops it."""
    present, raw = _lookup(limits, requests, cfg.resource_count)
    if not present:
        return None
    n = _as_int64(raw)
    if n is None:
        return None
    memnum = 0
    present, raw = _lookup(limits, requests, cfg.resource_memory)
    if present:
        mem = _as_int64(raw)
        factor = max(cfg.memory_factor, 1)
        if mem is None or mem < 0 or mem > _MAX_INT32 // factor:
            return None  # the whole container request becomes empty (532-550)
        memnum = mem * factor
    mempnum = 101
    present, raw = _lookup(limits, requests, cfg.resource_memory_percentage)
    if present:
        pct = _as_int64(raw)
        if pct is not None:
            pct = min(pct, 100)
            mempnum = pct if pct > 0 else 101
    if mempnum == 101 and memnum == 0:
        if cfg.default_memory != 0:
            memnum = cfg.default_memory
        else:
            mempnum = 100
    corenum = cfg.default_cores
    present, raw = _lookup(limits, requests, cfg.resource_cores)
    if present:
        cores = _as_int64(raw)
        if cores is not None:
            corenum = _i32(cores)
    nums = _i32(n)
    if nums <= 0:
        return None
    return ContainerRequest(nums=nums, memreq=_i32(memnum), mem_percentage=mempnum, coresreq=corenum)


def container_request(container: Mapping[str, Any], cfg: HamiConfig = DEFAULT_CONFIG) -> ContainerRequest | None:
    """The HAMi request of one container, or ``None`` when HAMi sees no GPU request in it.

    ``None`` also covers the silent cases: a ``gpumem`` that is not a whole number of MiB within
    int32/memoryFactor (``16Gi`` is 17179869184 MiB) or a fractional ``gpu`` count makes the whole request empty,
    so the container runs without a GPU; :func:`hami_resource_problems` names them.
    """
    limits, requests = _resources(container)
    return _request_from(limits, requests, cfg)


def _containers(pod_spec: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    return list(pod_spec.get("initContainers") or []), list(pod_spec.get("containers") or [])


def pod_requests(pod_spec: Mapping[str, Any], cfg: HamiConfig = DEFAULT_CONFIG) -> list[ContainerRequest | None]:
    """One entry per container, init containers first, then app containers (``Resourcereqs``, devices.go:639)."""
    init, app = _containers(pod_spec)
    return [container_request(c, cfg) for c in (*init, *app)]
