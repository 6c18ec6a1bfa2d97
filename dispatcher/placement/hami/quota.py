"""HAMi's per-namespace quota for ``gpumem`` and ``gpucores`` (check F8 of ``/work/shared/hami-rules.md``).

Follows ``pkg/device/quota.go`` (``QuotaManager``, ``FitQuota``, ``addQuotaLocked``) and the webhook's coarse
quota pre-check (``pkg/scheduler/webhook.go:145-192``). The quota is applied when a :class:`NamespaceQuota` is
passed; the caller tracks the namespace's used amount, as HAMi's ``QuotaManager`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .devices import DEFAULT_CONFIG, HamiConfig
from .requests import _as_int64, _containers, container_request

__all__ = ["NamespaceQuota", "admission_quota_fits", "namespace_quota"]


@dataclass(slots=True, frozen=True)
class NamespaceQuota:
    """HAMi's per-namespace quota for ``gpumem`` and ``gpucores`` (pkg/device/quota.go).

    ``None`` limits are "not configured"; ``0`` blocks. ``*_used`` is what bound pods in the namespace hold
    (collapsed usage; :func:`pod_quota_usage`).
    """

    mem_limit: int | None = None
    core_limit: int | None = None
    mem_used: int = 0
    core_used: int = 0

    def fits(self, mem: int, cores: int, memory_factor: int = 1) -> bool:
        """``FitQuota``: used + request within the limit; the memory limit is scaled by memoryFactor > 1."""
        if self.mem_limit is not None:
            limit = self.mem_limit * memory_factor if memory_factor > 1 else self.mem_limit
            if self.mem_used + mem > limit:
                return False
        return not (self.core_limit is not None and self.core_used + cores > self.core_limit)

    def plus(self, mem: int, cores: int) -> NamespaceQuota:
        return NamespaceQuota(self.mem_limit, self.core_limit, self.mem_used + mem, self.core_used + cores)


def namespace_quota(
    resource_quotas: Iterable[Mapping[str, Any]],
    cfg: HamiConfig = DEFAULT_CONFIG,
    *,
    mem_used: int = 0,
    core_used: int = 0,
) -> NamespaceQuota | None:
    """The namespace quota HAMi builds from ResourceQuota objects, or ``None`` when none applies.

    Only ``spec.hard`` keys ``limits.<gpumem>`` / ``limits.<gpucores>`` with whole values count; with several
    ResourceQuotas the last one read wins, as in ``addQuotaLocked``.
    """
    mem: int | None = None
    core: int | None = None
    for rq in resource_quotas:
        for key, raw in ((rq.get("spec") or {}).get("hard") or {}).items():
            value = _as_int64(raw)
            if value is None or not key.startswith("limits."):
                continue
            name = key[len("limits.") :]
            if name == cfg.resource_memory:
                mem = value
            elif name == cfg.resource_cores:
                core = value
    if mem is None and core is None:
        return None
    return NamespaceQuota(mem, core, mem_used, core_used)


def admission_quota_fits(pod_spec: Mapping[str, Any], quota: NamespaceQuota, cfg: HamiConfig = DEFAULT_CONFIG) -> bool:
    """The webhook's coarse quota pre-check (webhook.go:145-192).

    Charges explicit ``Memreq × Nums`` and ``Coresreq × Nums``: the sum over app containers, or the largest init
    container if bigger. Percentage and whole-card memory count as 0 here.
    """
    init, app = _containers(pod_spec)
    app_mem = app_cores = init_mem = init_cores = 0
    for container in app:
        r = container_request(container, cfg)
        if r is not None:
            app_mem += r.memreq * r.nums
            app_cores += r.coresreq * r.nums
    for container in init:
        r = container_request(container, cfg)
        if r is not None:
            init_mem = max(init_mem, r.memreq * r.nums)
            init_cores = max(init_cores, r.coresreq * r.nums)
    mem, cores = max(app_mem, init_mem), max(app_cores, init_cores)
    if mem == 0 and cores == 0:
        return True
    return quota.fits(mem, cores, cfg.memory_factor)
