"""HAMi's admission webhook: a pod as it rewrites or refuses it (section 1 of ``/work/shared/hami-rules.md``).

Follows ``MutateAdmission`` (``pkg/scheduler/webhook.go``) with the NVIDIA backend's
``mutateContainerResource`` and ``defaultExclusiveCoreIfNeeded`` (``device.go:398-450``): the requests the
scheduler sees once the webhook has run, whether HAMi schedules a pod at all, and the problems the dispatcher
names before submitting, where HAMi would otherwise silently drop or change a request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .devices import DEFAULT_CONFIG, ContainerRequest, HamiConfig
from .gosemantics import _MAX_INT32
from .names import HamiAdmissionError
from .quota import NamespaceQuota, admission_quota_fits
from .requests import _as_int64, _containers, _go_value, _lookup, _request_from, _resources, pod_requests

__all__ = ["hami_problem", "hami_resource_problems", "is_hami_request", "mutate_pod"]


def _webhook_limits(container: Mapping[str, Any], cfg: HamiConfig) -> tuple[dict[str, Any], bool]:
    """The container's limits after ``mutateContainerResource`` and ``defaultExclusiveCoreIfNeeded``."""
    limits_in, requests = _resources(container)
    limits = dict(limits_in)
    # mutateContainerResource (398-415) looks at limits only.
    has_resource = False
    optional = (cfg.resource_cores, cfg.resource_memory, cfg.resource_memory_percentage)
    if cfg.resource_count in limits:
        has_resource = True
    elif any(name in limits for name in optional) and cfg.default_gpu_num > 0:
        limits[cfg.resource_count] = str(cfg.default_gpu_num)
        has_resource = True
    # defaultExclusiveCoreIfNeeded (417-450) looks at limits and requests.
    if (
        cfg.resource_count
        and (cfg.resource_count in limits or cfg.resource_count in requests)
        and cfg.resource_cores
        and cfg.resource_cores not in limits
        and cfg.resource_cores not in requests
    ):
        present, raw = False, None
        if cfg.resource_memory_percentage:
            present, raw = _lookup(limits, requests, cfg.resource_memory_percentage)
        if present:
            exclusive = _go_value(raw) == 100
        elif not cfg.resource_memory:
            exclusive = True
        else:
            exclusive = not _lookup(limits, requests, cfg.resource_memory)[0]
        if exclusive:
            limits[cfg.resource_cores] = "100"
            has_resource = True
    return limits, has_resource


def _with_limits(container: Mapping[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    new = dict(container)
    resources = dict(container.get("resources") or {})
    resources["limits"] = limits
    new["resources"] = resources
    return new


def _is_privileged(container: Mapping[str, Any]) -> bool:
    security = container.get("securityContext") or {}
    return security.get("privileged") is True


def mutate_pod(
    pod: Mapping[str, Any], cfg: HamiConfig = DEFAULT_CONFIG, *, quota: NamespaceQuota | None = None
) -> dict[str, Any]:
    """HAMi's admission webhook (pkg/scheduler/webhook.go, ``MutateAdmission``): a new pod dict with its defaults.

    Per container (init containers first): validate ``gpumem-percentage`` (0..100), add ``CUDA_TASK_PRIORITY``
    and ``GPU_CORE_UTILIZATION_POLICY`` env, add ``gpu = defaultGPUNum`` when only memory/cores are set, inject
    ``gpucores: 100`` for whole-card requests, set ``runtimeClassName`` and ``NVIDIA_VISIBLE_DEVICES=none`` as
    configured. Then the pod-level rules: refuse privileged GPU pods, set ``schedulerName``, refuse pods with a
    ``nodeName``, and the coarse quota pre-check when ``quota`` is given.

    Raises :class:`HamiAdmissionError` where the webhook denies or errors. A pod aimed at another scheduler is
    returned unchanged (as a copy).
    """
    new: dict[str, Any] = dict(pod)
    spec: dict[str, Any] = dict(pod.get("spec") or {})
    new["spec"] = spec
    init, app = _containers(spec)
    if not app:
        raise HamiAdmissionError("pod has no containers", code=403)
    scheduler = spec.get("schedulerName") or ""
    if (
        scheduler
        and (scheduler != "default-scheduler" or not cfg.force_overwrite_default_scheduler)
        and (not cfg.scheduler_name or scheduler != cfg.scheduler_name)
    ):
        return new
    privileged = next((c.get("name", "") for c in (*init, *app) if _is_privileged(c)), None)
    has_resource = False
    mutated: list[list[dict[str, Any]]] = []
    for group in (init, app):
        out = []
        for container in group:
            limits_in, requests = _resources(container)
            present, raw = _lookup(limits_in, requests, cfg.resource_memory_percentage)
            if present and cfg.resource_memory_percentage:
                pct = _go_value(raw)
                if pct is not None and not 0 <= pct <= 100:
                    name = container.get("name", "")
                    raise HamiAdmissionError(
                        f"invalid {cfg.resource_memory_percentage} value {pct} in container {name}: "
                        "must be an integer between 0 and 100",
                        code=500,
                    )
            env = list(container.get("env") or [])
            if cfg.resource_priority in limits_in:
                env.append({"name": "CUDA_TASK_PRIORITY", "value": str(_go_value(limits_in[cfg.resource_priority]))})
            if cfg.gpu_core_policy and cfg.gpu_core_policy != "default":
                env.append({"name": "GPU_CORE_UTILIZATION_POLICY", "value": cfg.gpu_core_policy})
            limits, found = _webhook_limits(container, cfg)
            if found and spec.get("runtimeClassName") is None and cfg.runtime_class_name:
                spec["runtimeClassName"] = cfg.runtime_class_name
            if not found and cfg.overwrite_env:
                env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"})
            has_resource = has_resource or found
            updated = _with_limits(container, limits) if limits != dict(limits_in) else dict(container)
            if env or "env" in container:
                updated["env"] = env
            out.append(updated)
        mutated.append(out)
    if init:
        spec["initContainers"] = mutated[0]
    spec["containers"] = mutated[1]
    if privileged is not None and has_resource:
        raise HamiAdmissionError(f"container {privileged} is privileged", code=403)
    if has_resource and cfg.scheduler_name:
        spec["schedulerName"] = cfg.scheduler_name
        if spec.get("nodeName"):
            raise HamiAdmissionError("pod has node assigned", code=403)
    if quota is not None and not admission_quota_fits(spec, quota, cfg):
        raise HamiAdmissionError("exceeding resource quota", code=403)
    return new


def _webhook_requests(pod_spec: Mapping[str, Any], cfg: HamiConfig) -> list[ContainerRequest | None]:
    """The requests HAMi's scheduler will see once the webhook has run, without copying the whole pod."""
    init, app = _containers(pod_spec)
    out: list[ContainerRequest | None] = []
    for container in (*init, *app):
        limits, _ = _webhook_limits(container, cfg)
        out.append(_request_from(limits, _resources(container)[1], cfg))
    return out


def is_hami_request(pod_spec: Mapping[str, Any], cfg: HamiConfig = DEFAULT_CONFIG, *, webhook: bool = True) -> bool:
    """Whether HAMi schedules this pod at all (a container with a non-empty request, after the webhook)."""
    requests = _webhook_requests(pod_spec, cfg) if webhook else pod_requests(pod_spec, cfg)
    return any(r is not None for r in requests)


_PLAIN_INT = re.compile(r"\+?[0-9]+")


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else repr(str(value))


def hami_resource_problems(pod_spec: Mapping[str, Any], cfg: HamiConfig = DEFAULT_CONFIG) -> list[str]:
    """Human-readable problems in a pod's HAMi resources, where HAMi would silently do something else.

    The common trap is ``nvidia.com/gpumem: 16Gi``: HAMi reads gpumem as a plain number of MiB, finds
    17179869184, and drops the container's whole GPU request, so the job runs without a GPU. Each message starts
    with the field name so the dispatcher can show it to the user before submitting.
    """
    problems: list[str] = []
    init, app = _containers(pod_spec)
    for container in (*init, *app):
        name = container.get("name", "")
        where = f"(container {name!r})"
        limits, requests = _resources(container)
        present, raw = _lookup(limits, requests, cfg.resource_count)
        if present and _as_int64(raw) is None:
            problems.append(
                f"{cfg.resource_count} must be a whole number of GPUs, got {_show(raw)} {where}; "
                "HAMi would ignore the container's GPU request"
            )
        present, raw = _lookup(limits, requests, cfg.resource_memory)
        if present:
            factor = max(cfg.memory_factor, 1)
            mem = _as_int64(raw)
            text = str(raw).strip()
            if mem is None or mem < 0 or mem > _MAX_INT32 // factor:
                problems.append(
                    f"{cfg.resource_memory} must be a plain integer in MiB, got {_show(raw)} {where}; "
                    "HAMi would ignore the container's GPU request and run it without a GPU"
                )
            elif _BINARY_OR_EXPONENT.search(text):
                # "16k" is how the API server writes 16000 back (its canonical form), so decimal suffixes are
                # fine; a binary suffix or an exponent was written by hand and probably meant bytes.
                problems.append(
                    f"{cfg.resource_memory} must be a plain integer in MiB, got {_show(raw)} {where}; "
                    f"HAMi would read it as {mem} MiB"
                )
        present, raw = _lookup(limits, requests, cfg.resource_memory_percentage)
        if present:
            value = _go_value(raw)
            if value is not None and not 0 <= value <= 100:
                problems.append(
                    f"{cfg.resource_memory_percentage} must be between 0 and 100, got {_show(raw)} {where}; "
                    "HAMi's webhook rejects the pod"
                )
            elif _as_int64(raw) is None:
                problems.append(
                    f"{cfg.resource_memory_percentage} must be a whole number, got {_show(raw)} {where}; "
                    "HAMi would ignore it and give the container a whole GPU's memory"
                )
        present, raw = _lookup(limits, requests, cfg.resource_cores)
        if present:
            cores = _as_int64(raw)
            if cores is None:
                problems.append(
                    f"{cfg.resource_cores} must be a whole number of percent, got {_show(raw)} {where}; "
                    f"HAMi would ignore it and use {cfg.default_cores}"
                )
            elif cores > 100:
                problems.append(
                    f"{cfg.resource_cores} must be at most 100, got {_show(raw)} {where}; "
                    "HAMi would clamp it to 100, which asks for whole GPUs to itself"
                )
    return problems


_BINARY_OR_EXPONENT = re.compile(r"[KMGTPE]i$|[eE][+-]?[0-9]")


def hami_problem(pod_spec: Mapping[str, Any], cfg: HamiConfig = DEFAULT_CONFIG) -> str | None:
    """The first of :func:`hami_resource_problems`, or ``None`` when HAMi reads the pod's resources as meant."""
    problems = hami_resource_problems(pod_spec, cfg)
    return problems[0] if problems else None
