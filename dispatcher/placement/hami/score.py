"""Device scores and device order, node score and node choice (sections 4 and 5 of ``/work/shared/hami-rules.md``).

Device scores follow ``ComputeScore`` (``pkg/scheduler/policy/gpu_policy.go:194-222``) and the device order
``DeviceUsageList.Less`` (``gpu_policy.go:77-167``) sorted as Go's ``sort.Sort`` does; the node score follows
``ComputeDefaultScore`` (``node_policy.go:106-130``). Scores are computed in ``float32`` as in HAMi, since
ties decide the order. HAMi's node choice among equal node scores depends on goroutine completion order; here
ties go to the smallest node name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

from .devices import _DEFAULT_WEIGHTS, ContainerRequest, DeviceUsage, ScoringWeights
from .gosemantics import _f32, _go_sort, _i32
from .names import POLICY_BINPACK, POLICY_MUTEX, POLICY_NUMA, POLICY_SPREAD

__all__ = ["choose_node", "device_score", "node_score", "sort_devices"]


# --------------------------------------------------------------------------------------------------------------
# Section 4: device scores and device order
# --------------------------------------------------------------------------------------------------------------
_SCORE_WEIGHT: Final = 10  # util.Weight


#: Memoised float32 scores: the same few utilisation states recur across thousands of identical GPUs.
_SCORE_CACHE: dict[tuple[int, ...], float] = {}
_NODE_SCORE_CACHE: dict[tuple[int, ...], float] = {}
_SCORE_CACHE_LIMIT: Final = 1 << 16


def _request_terms(d: DeviceUsage, request: ContainerRequest | None) -> tuple[int, int, int]:
    """The request's contribution to ``ComputeScore``: only when its Type equals the device type exactly."""
    if request is None or request.type != d.info.type:
        return 0, 0, 0
    pct = request.mem_percentage
    mem = (d.info.devmem * pct) // 100 if pct not in (0, 101) else request.memreq
    return 1, request.coresreq, _i32(mem)


def _score(d: DeviceUsage, req_n: int, req_cores: int, req_mem: int, w: ScoringWeights) -> float:
    info = d.info
    count, devcore, devmem = info.count, info.devcore, info.devmem
    if count == 0 or devcore == 0 or devmem == 0:
        return 0.0
    key = (count, devcore, devmem, d.used, d.usedcores, d.usedmem, req_n, req_cores, req_mem, w.slot, w.core, w.memory)
    score = _SCORE_CACHE.get(key)
    if score is None:
        f = _f32
        slot = f(f(_i32(req_n + d.used)) / f(count))
        core = f(f(_i32(req_cores + d.usedcores)) / f(devcore))
        mem = f(f(_i32(req_mem + d.usedmem)) / f(devmem))
        total = f(f(f(f(w.slot) * slot) + f(f(w.core) * core)) + f(f(w.memory) * mem))
        score = f(_SCORE_WEIGHT * total)
        if len(_SCORE_CACHE) >= _SCORE_CACHE_LIMIT:
            _SCORE_CACHE.clear()
        _SCORE_CACHE[key] = score
    return score


def device_score(
    d: DeviceUsage, request: ContainerRequest | None = None, weights: ScoringWeights = _DEFAULT_WEIGHTS
) -> float:
    """``ComputeScore`` (gpu_policy.go:194-222) in float32: 10 × (slot + core + memory utilisation after request).

    The request terms only count when ``request.type`` equals the device type exactly; real devices are typed
    ``NVIDIA-<model>``, so for them the score is the current utilisation.
    """
    return _score(d, *_request_terms(d, request), weights)


def _sort_key_fn(policy: str, numa_bind: bool) -> Callable[[DeviceUsage, float], tuple[float, ...]]:
    """A key whose tuple order is ``DeviceUsageList.Less`` (gpu_policy.go:77-167): lexicographic in all modes."""
    if "," in policy or policy == POLICY_NUMA:
        chain: list[str] = []
        for token in policy.split(","):
            name = token.strip()
            if name in (POLICY_BINPACK, POLICY_SPREAD, POLICY_NUMA) and name not in chain:
                chain.append(name)
        if not chain:
            chain = [POLICY_SPREAD]
        if numa_bind and chain[0] != POLICY_NUMA:
            chain = [POLICY_NUMA, *(k for k in chain if k != POLICY_NUMA)]

        def chained(d: DeviceUsage, s: float) -> tuple[float, ...]:
            parts: list[float] = []
            for k in chain:
                parts.append(s if k == POLICY_BINPACK else -s if k == POLICY_SPREAD else d.info.numa)
            parts.append(d.info.index)
            return tuple(parts)

        return chained
    if policy == POLICY_MUTEX:
        return lambda d, s: (-d.used, d.info.numa)
    binpack = policy == POLICY_BINPACK
    if numa_bind:
        if binpack:
            return lambda d, s: (-d.info.numa, s)
        return lambda d, s: (d.info.numa, -s)
    if binpack:
        return lambda d, s: (s, d.info.numa)
    return lambda d, s: (-s, d.info.numa)


def sort_devices(
    devices: Sequence[DeviceUsage], scores: Sequence[float], policy: str = POLICY_SPREAD, numa_bind: bool = False
) -> list[DeviceUsage]:
    """The device order ``sort.Sort(node.Devices)`` produces; ``Fit`` then walks it from the end.

    binpack sorts ascending by score (the fullest GPU is tried first), spread descending (the emptiest first),
    mutex puts busy GPUs first, numa-bind makes NUMA the primary key, comma chains apply their keys in order.
    """
    keyf = _sort_key_fn(policy, numa_bind)
    items = [(keyf(d, s), d) for d, s in zip(devices, scores, strict=True)]
    if len(items) <= 12:
        items.sort(key=lambda kv: kv[0])  # Go's insertion sort is stable: same result
    else:
        _go_sort(items, lambda a, b: a[0] < b[0])
    return [d for _, d in items]


# --------------------------------------------------------------------------------------------------------------
# Section 5: node score and node choice
# --------------------------------------------------------------------------------------------------------------


def node_score(usage: Sequence[DeviceUsage]) -> float:
    """``ComputeDefaultScore`` (node_policy.go:106-130), float32: 10 × (Σused/Σcount + Σcores + Σmem ratios)."""
    used = usedcores = usedmem = count = devcore = devmem = 0
    for d in usage:
        used += d.used
        usedcores += d.usedcores
        usedmem += d.usedmem
        count += d.info.count
        devcore += d.info.devcore
        devmem += d.info.devmem
    key = (used, usedcores, usedmem, count, devcore, devmem)
    score = _NODE_SCORE_CACHE.get(key)
    if score is None:
        count, devcore, devmem = _i32(count), _i32(devcore), _i32(devmem)
        if count == 0 or devcore == 0 or devmem == 0:
            score = 0.0
        else:
            f = _f32
            slot = f(f(_i32(used)) / f(count))
            core = f(f(_i32(usedcores)) / f(devcore))
            mem = f(f(_i32(usedmem)) / f(devmem))
            score = f(_SCORE_WEIGHT * f(f(slot + core) + mem))
        if len(_NODE_SCORE_CACHE) >= _SCORE_CACHE_LIMIT:
            _NODE_SCORE_CACHE.clear()
        _NODE_SCORE_CACHE[key] = score
    return score


def choose_node(scores: Mapping[str, float], policy: str = POLICY_BINPACK) -> str | None:
    """The node HAMi binds to among fitting nodes: highest score (binpack) or lowest (``spread``).

    HAMi sorts and takes the last element; equal scores depend on goroutine timing there, so this breaks ties
    by the smallest node name.
    """
    if not scores:
        return None
    if policy == POLICY_SPREAD:
        return min(scores, key=lambda n: (scores[n], n))
    return min(scores, key=lambda n: (-scores[n], n))
