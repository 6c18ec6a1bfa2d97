"""What a pod asks of HAMi: per-container GPU requests, and HAMi's admission webhook.

Follows HAMi (rules section 1): ``GenerateResourceRequests`` (``pkg/device/nvidia/device.go``: limits first,
then requests; a ``gpumem`` that is not a plain integer within ``int32 / memoryFactor`` empties the whole request;
``gpumem-percentage`` above 100 is clamped, 0 or less means unset; omitted memory is ``defaultMemory`` or the whole
card; ``gpucores`` defaults to ``defaultCores``), ``Resourcereqs`` (``pkg/device/devices.go``: init containers first,
requests with no GPU left out) and the webhook (``pkg/scheduler/webhook.go`` ``Handle`` with the NVIDIA
``MutateAdmission``: ``gpumem-percentage`` validation, ``CUDA_TASK_PRIORITY`` / core-policy env, ``gpu =
defaultGPUNum`` when only memory or cores are limited, ``gpucores: 100`` for a whole-card request, then the
privileged-container denial, ``schedulerName`` and the ``nodeName`` denial). HAMi's namespace quota is not modelled.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from math import ceil, floor
from typing import Any

from kubecommon.quantity import QuantityError, parse_quantity

from .config import DEFAULT_CONFIG, NVIDIA, HamiAdmissionError, HamiConfig

__all__ = ["ContainerRequest", "container_request", "is_hami_request", "mutate_pod", "pod_requests"]

Obj = dict[str, Any]

_INT32_MAX = 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def int32(value: int) -> int:
    """Go's conversion to ``int32`` (wraps around)."""
    value &= 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


@dataclass(frozen=True)
class ContainerRequest:
    """``ContainerDeviceRequest``: GPUs, MiB per GPU, percentage of a GPU's memory (101: unset) and cores."""

    nums: int
    memreq: int = 0
    mem_percentage: int = 101
    coresreq: int = 0
    type: str = NVIDIA


def _quantity(value: Any) -> Fraction | None:
    try:
        return parse_quantity(value)
    except (QuantityError, TypeError, ValueError):
        return None


def _as_int64(value: Any) -> int | None:
    """``Quantity.AsInt64``: the value when it is a whole number within int64."""
    q = _quantity(value)
    if q is None or q.denominator != 1 or not _INT64_MIN <= q.numerator <= _INT64_MAX:
        return None
    return q.numerator


def _value(value: Any) -> int | None:
    """``Quantity.Value``: rounded up (away from zero)."""
    q = _quantity(value)
    if q is None:
        return None
    return ceil(q) if q >= 0 else floor(q)


def _find(container: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    """A resource from the container's limits, else its requests."""
    resources = container.get("resources") or {}
    for kind in ("limits", "requests"):
        values = resources.get(kind) or {}
        if name and name in values:
            return True, values[name]
    return False, None


def container_request(container: Mapping[str, Any], cfg: HamiConfig = DEFAULT_CONFIG) -> ContainerRequest | None:
    """``GenerateResourceRequests``; ``None`` where it returns an empty request (no GPU at all)."""
    found, raw = _find(container, cfg.resource_count)
    if not found:
        return None
    n = _as_int64(raw)
    if n is None:
        return None
    memnum = 0
    found, raw = _find(container, cfg.resource_memory)
    if found:
        factor = max(cfg.memory_factor, 1)
        mem = _as_int64(raw)
        if mem is None or mem < 0 or mem > _INT32_MAX // factor:
            return None
        memnum = mem * factor
    mempnum = 101
    found, raw = _find(container, cfg.resource_memory_percentage)
    if found:
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
    found, raw = _find(container, cfg.resource_cores)
    if found:
        cores = _as_int64(raw)
        if cores is not None:
            corenum = int32(cores)
    nums = int32(n)
    if nums <= 0:
        return None
    return ContainerRequest(nums, int32(memnum), mempnum, corenum)


def pod_requests(pod_spec: Mapping[str, Any], cfg: HamiConfig = DEFAULT_CONFIG) -> list[ContainerRequest | None]:
    """``Resourcereqs``: one entry per container, init containers first."""
    containers = [*(pod_spec.get("initContainers") or ()), *(pod_spec.get("containers") or ())]
    return [container_request(c, cfg) for c in containers]


def is_hami_request(pod_spec: Mapping[str, Any], cfg: HamiConfig = DEFAULT_CONFIG) -> bool:
    """Whether HAMi's Filter handles the pod: some container has a GPU request."""
    return any(r is not None for r in pod_requests(pod_spec, cfg))


# --------------------------------------------------------------------------------------------------------------
# The webhook
# --------------------------------------------------------------------------------------------------------------


def _mutate_container(container: Obj, spec: Obj, cfg: HamiConfig) -> bool:
    """The NVIDIA ``MutateAdmission`` on one container (changed in place); whether it has a HAMi resource."""
    found, raw = _find(container, cfg.resource_memory_percentage)
    if found:
        pct = _value(raw)
        if pct is not None and not 0 <= pct <= 100:
            raise HamiAdmissionError(
                f"invalid {cfg.resource_memory_percentage} value {pct} in container {container.get('name', '')}: "
                "must be an integer between 0 and 100",
                code=500,
            )
    limits: dict[str, Any] = dict((container.get("resources") or {}).get("limits") or {})
    env: list[Obj] = list(container.get("env") or ())
    env_before = len(env)
    if cfg.resource_priority in limits:
        env.append({"name": "CUDA_TASK_PRIORITY", "value": str(_value(limits[cfg.resource_priority]))})
    if cfg.gpu_core_policy and cfg.gpu_core_policy != "default":
        env.append({"name": "GPU_CORE_UTILIZATION_POLICY", "value": cfg.gpu_core_policy})
    # mutateContainerResource: limits only
    has_resource = cfg.resource_count in limits
    if not has_resource:
        wanted = (cfg.resource_cores, cfg.resource_memory, cfg.resource_memory_percentage)
        if any(name and name in limits for name in wanted) and cfg.default_gpu_num > 0:
            _set_limit(container, cfg.resource_count, str(cfg.default_gpu_num))
            has_resource = True
    # defaultExclusiveCoreIfNeeded: limits and requests
    if (
        cfg.resource_count
        and cfg.resource_cores
        and _find(container, cfg.resource_count)[0]
        and not _find(container, cfg.resource_cores)[0]
    ):
        found, raw = _find(container, cfg.resource_memory_percentage)
        if found:
            exclusive = _value(raw) == 100
        elif not cfg.resource_memory:
            exclusive = True
        else:
            exclusive = not _find(container, cfg.resource_memory)[0]
        if exclusive:
            _set_limit(container, cfg.resource_cores, "100")
            has_resource = True
    if has_resource and spec.get("runtimeClassName") is None and cfg.runtime_class_name:
        spec["runtimeClassName"] = cfg.runtime_class_name
    if not has_resource and cfg.overwrite_env:
        env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"})
    if len(env) != env_before:
        container["env"] = env
    return has_resource


def _set_limit(container: Obj, name: str, value: str) -> None:
    resources = dict(container.get("resources") or {})
    resources["limits"] = {**(resources.get("limits") or {}), name: value}
    container["resources"] = resources


def _privileged(container: Mapping[str, Any]) -> bool:
    return (container.get("securityContext") or {}).get("privileged") is True


def mutate_pod(pod: Mapping[str, Any], cfg: HamiConfig = DEFAULT_CONFIG) -> Obj:
    """HAMi's webhook on a new pod: the mutated pod (a copy), or :class:`HamiAdmissionError`.

    A pod aimed at another scheduler is returned unchanged.
    """
    new: Obj = copy.deepcopy(dict(pod))
    spec: Obj = new.setdefault("spec", {})
    if not spec.get("containers"):
        raise HamiAdmissionError("pod has no containers", code=403)
    scheduler = spec.get("schedulerName") or ""
    if (
        scheduler
        and (scheduler != "default-scheduler" or not cfg.force_overwrite_default_scheduler)
        and (not cfg.scheduler_name or scheduler != cfg.scheduler_name)
    ):
        return new
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    privileged = next((str(c.get("name", "")) for c in containers if _privileged(c)), None)
    has_resource = False
    for container in containers:
        has_resource = _mutate_container(container, spec, cfg) or has_resource
    if privileged is not None and has_resource:
        raise HamiAdmissionError(f"container {privileged} is privileged", code=403)
    if has_resource and cfg.scheduler_name:
        spec["schedulerName"] = cfg.scheduler_name
        if spec.get("nodeName"):
            raise HamiAdmissionError("pod has node assigned", code=403)
    return new
