"""Where the simulated HAMi scheduler puts a pod's GPUs: device scores and order, ``Fit``, node choice.

Follows HAMi (rules sections 3 to 5):

* ``ComputeScore`` (``policy/gpu_policy.go``): ``10 x (slot + core + memory)`` usage ratios in ``float32``, with
  the ``hami.io/device-scoring-weights`` weights; the request terms count only requests whose type equals the
  device's exactly (never for ``NVIDIA-<model>`` GPUs);
* ``DeviceUsageList.Less``: ``binpack``, ``spread`` (the default, also for ``topology-aware``), ``mutex`` and the
  ``numa-bind`` grouping, or a comma chain of ``binpack``/``spread``/``numa`` with the index as last key; Go's
  ``sort.Sort`` is an insertion sort up to 12 elements, here a stable sort at any size (equal keys keep their
  order beyond 12 GPUs where Go's pdqsort may not);
* ``Fit`` (``nvidia/device.go``), walking the sorted GPUs from the last: F1 health, F2 cordon, F3 type/mode,
  F4 NUMA binding, F5 UUID lists, F6 vGPU slots, F7 mutex, F9 memory, F10 cores, F11 exclusive card, F12 cores
  exhausted (F8 namespace quota and F13 MIG are not modelled); each GPU at most once; ``topology-aware`` picks by
  the node's pair scores; HAMi's reasons ``"<n>/<GPUs> <Reason>"``;
* ``fitInDevices`` / ``scoreNode`` (``scheduler/score.go``): each init container against its own copy of the node,
  the app containers against one shared copy, usage added after every container; the node score is computed
  before the pod is placed (``ComputeDefaultScore``);
* the node choice: the highest score under ``binpack`` (the default), the lowest under ``spread``; HAMi breaks
  ties by goroutine timing, here by the smallest node name.
"""

from __future__ import annotations

import functools
import itertools
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .config import (
    ALLOCATED_CARDS_INSUFFICIENT_REQUEST,
    CARD_COMPUTE_UNITS_EXHAUSTED,
    CARD_CORDONED,
    CARD_INSUFFICIENT_CORE,
    CARD_INSUFFICIENT_MEMORY,
    CARD_NOT_HEALTH,
    CARD_TIME_SLICING_EXHAUSTED,
    CARD_TYPE_MISMATCH,
    CARD_UUID_MISMATCH,
    CORDON_ANNOTATION,
    DEFAULT_CONFIG,
    EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
    GPU_POLICY_ANNOTATION,
    NODE_INSUFFICIENT_DEVICE,
    NODE_POLICY_ANNOTATION,
    NOUSE_GPUTYPE_ANNOTATION,
    NOUSE_GPUUUID_ANNOTATION,
    NUMA_BIND_ANNOTATION,
    NUMA_NOT_FIT,
    NVIDIA,
    SCORING_WEIGHTS_ANNOTATION,
    USE_GPUTYPE_ANNOTATION,
    USE_GPUUUID_ANNOTATION,
    VGPU_MODE_ANNOTATION,
    HamiConfig,
    HamiSchedulingError,
)
from .devices import ContainerDevice, DeviceUsage
from .requests import ContainerRequest, pod_requests

__all__ = ["PodFit", "ScheduleResult", "gen_reason", "schedule_pod"]


def f32(x: float) -> float:
    """``x`` rounded to ``float32``, as Go's float32 arithmetic rounds every operation."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def gen_reason(reasons: Mapping[str, int], cards: int) -> str:
    """``common.GenReason``."""
    return ", ".join(sorted(f"{n}/{cards} {r}" for r, n in reasons.items()))


def _policy_has(policy: str, name: str) -> bool:
    """``util.PolicyContains``."""
    return any(p.strip() == name for p in policy.split(","))


def _go_bool(text: str) -> bool | None:
    """``strconv.ParseBool``."""
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    return None


def parse_weights(value: str) -> tuple[int, int, int]:
    """``ParseDeviceScoringWeights``: ``slot=a,core=b,memory=c``, each an integer >= 0, not all zero."""
    parts = value.split(",")
    key = SCORING_WEIGHTS_ANNOTATION
    if len(parts) != 3:
        raise HamiSchedulingError(f'invalid {key} annotation "{value}": expected slot, core, and memory weights')
    weights: dict[str, int] = {}
    for part in parts:
        kv = part.strip().split("=", 1)
        if len(kv) != 2:
            raise HamiSchedulingError(f'invalid {key} annotation "{value}": expected key=value entries')
        name = kv[0].strip()
        if name in weights:
            raise HamiSchedulingError(f'invalid {key} annotation "{value}": duplicate "{name}" weight')
        try:
            weight = int(kv[1].strip(), 10)
        except ValueError:
            raise HamiSchedulingError(
                f'invalid {key} annotation "{value}": "{name}" weight must be an integer'
            ) from None
        if weight < 0:
            raise HamiSchedulingError(f'invalid {key} annotation "{value}": "{name}" weight must not be negative')
        if name not in ("slot", "core", "memory"):
            raise HamiSchedulingError(f'invalid {key} annotation "{value}": unknown weight "{name}"')
        weights[name] = weight
    if not any(weights.values()):
        raise HamiSchedulingError(f'invalid {key} annotation "{value}": at least one weight must be positive')
    return weights.get("slot", 0), weights.get("core", 0), weights.get("memory", 0)


@dataclass(frozen=True)
class _Pod:
    """What of the pod steers device selection and ordering."""

    annotations: Mapping[str, str]
    gpu_policy: str
    numa_bind: bool
    weights: tuple[int, int, int]

    @classmethod
    def of(cls, pod: Mapping[str, Any], cfg: HamiConfig) -> _Pod:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        raw_weights = annotations.get(SCORING_WEIGHTS_ANNOTATION)
        return cls(
            annotations=annotations,
            gpu_policy=annotations.get(GPU_POLICY_ANNOTATION, cfg.gpu_policy),
            numa_bind=_go_bool(annotations.get(NUMA_BIND_ANNOTATION, "")) is True,
            weights=parse_weights(raw_weights) if raw_weights is not None else (1, 1, 1),
        )

    def type_allowed(self, card_type: str, mode: str) -> bool:
        """``CheckType`` (case-insensitive substrings, empty entries ignored) and the ``vgpu-mode`` check."""
        upper = card_type.upper()

        def listed(value: str) -> bool:
            return any(t.strip() and t.strip().upper() in upper for t in value.split(","))

        use, nouse = self.annotations.get(USE_GPUTYPE_ANNOTATION), self.annotations.get(NOUSE_GPUTYPE_ANNOTATION)
        if use is not None and use.strip() and not listed(use):
            return False
        if nouse is not None and nouse.strip() and listed(nouse):
            return False
        wanted_mode = self.annotations.get(VGPU_MODE_ANNOTATION)
        return wanted_mode is None or mode in wanted_mode

    def uuid_allowed(self, uuid: str) -> bool:
        """``CheckUUID``: exact matches after trimming; an empty value is no constraint."""
        use, nouse = self.annotations.get(USE_GPUUUID_ANNOTATION), self.annotations.get(NOUSE_GPUUUID_ANNOTATION)
        if use is not None and use.strip() and uuid not in {u.strip() for u in use.split(",")}:
            return False
        return not (nouse is not None and nouse.strip() and uuid in {u.strip() for u in nouse.split(",")})


@dataclass
class _Scored:
    device: DeviceUsage
    score: float = 0.0


def _score(d: DeviceUsage, requests: Sequence[ContainerRequest], weights: tuple[int, int, int]) -> float:
    """``ComputeScore``."""
    info = d.info
    if info.count == 0 or info.devcore == 0 or info.devmem == 0:
        return 0.0
    n = cores = mem = 0
    for r in requests:
        if r.type != info.type:
            continue
        n += 1
        cores += r.coresreq
        if r.mem_percentage not in (0, 101):
            mem += info.devmem * r.mem_percentage // 100
        else:
            mem += r.memreq
    slot_ratio = f32(f32(n + d.used) / f32(info.count))
    core_ratio = f32(f32(cores + d.usedcores) / f32(info.devcore))
    mem_ratio = f32(f32(mem + d.usedmem) / f32(info.devmem))
    ws, wc, wm = weights
    total = f32(f32(f32(ws) * slot_ratio) + f32(f32(wc) * core_ratio))
    total = f32(total + f32(f32(wm) * mem_ratio))
    return f32(f32(10) * total)


def _less(policy: str, numa_bind: bool) -> Callable[[_Scored, _Scored], bool]:
    """``DeviceUsageList.Less`` for a pod's GPU policy."""
    if "," in policy or policy == "numa":
        chain: list[str] = []
        for p in policy.split(","):
            name = p.strip()
            if name in ("binpack", "spread", "numa") and name not in chain:
                chain.append(name)
        if not chain:
            chain = ["spread"]
        if numa_bind and chain[0] != "numa":
            chain = ["numa", *(k for k in chain if k != "numa")]

        def by_chain(a: _Scored, b: _Scored) -> bool:
            for key in chain:
                if key == "binpack" and a.score != b.score:
                    return a.score < b.score
                if key == "spread" and a.score != b.score:
                    return a.score > b.score
                if key == "numa" and a.device.info.numa != b.device.info.numa:
                    return a.device.info.numa < b.device.info.numa
            return a.device.info.index < b.device.info.index

        return by_chain
    binpack = policy == "binpack"

    def single(a: _Scored, b: _Scored) -> bool:
        na, nb = a.device.info.numa, b.device.info.numa
        if policy == "mutex":
            return a.device.used > b.device.used if a.device.used != b.device.used else na < nb
        if numa_bind:
            if na == nb:
                return a.score < b.score if binpack else a.score > b.score
            return na > nb if binpack else na < nb
        if a.score != b.score:
            return a.score < b.score if binpack else a.score > b.score
        return na < nb

    return single


def _sort(items: list[_Scored], less: Callable[[_Scored, _Scored], bool]) -> None:
    def compare(a: _Scored, b: _Scored) -> int:
        return -1 if less(a, b) else (1 if less(b, a) else 0)

    items.sort(key=functools.cmp_to_key(compare))


@dataclass
class _Node:
    """A copy of a node's GPUs being filled by one pod, in their current order."""

    devices: list[_Scored]
    cordoned: frozenset[str]
    pair_scores: Mapping[str, Mapping[str, int]]

    def copy(self) -> _Node:
        return _Node([_Scored(s.device.copy(), s.score) for s in self.devices], self.cordoned, self.pair_scores)


def _fit(
    devices: Sequence[DeviceUsage], req: ContainerRequest, pod: _Pod, node: _Node
) -> tuple[bool, list[ContainerDevice], str]:
    """``Fit`` for one container request over the node's NVIDIA GPUs in sorted order."""
    topology = _policy_has(pod.gpu_policy, "topology-aware")
    mutex = _policy_has(pod.gpu_policy, "mutex")
    wanted = nums = req.nums
    coresreq = req.coresreq
    prev_numa = -1
    taken: list[ContainerDevice] = []
    reasons: dict[str, int] = {}

    def fail(reason: str, n: int = 1) -> None:
        reasons[reason] = reasons.get(reason, 0) + n

    for dev in reversed(devices):
        info = dev.info
        if not dev.health:
            fail(CARD_NOT_HEALTH)
            continue
        if info.id in node.cordoned:
            fail(CARD_CORDONED)
            continue
        if req.type != NVIDIA or not pod.type_allowed(info.type, info.mode):
            fail(CARD_TYPE_MISMATCH)
            continue
        if pod.numa_bind and prev_numa != info.numa:
            if nums != wanted:
                fail(NUMA_NOT_FIT, len(taken))
            nums, prev_numa, taken = wanted, info.numa, []
        if not pod.uuid_allowed(info.id):
            fail(CARD_UUID_MISMATCH)
            continue
        if info.count <= dev.used:
            fail(CARD_TIME_SLICING_EXHAUSTED)
            continue
        if mutex and dev.used > 0:
            fail(EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT)
            continue
        coresreq = min(coresreq, 100)
        memreq = req.memreq if req.memreq > 0 else 0
        if req.mem_percentage != 101 and req.memreq == 0:
            memreq = info.devmem * req.mem_percentage // 100
        if info.devmem - dev.usedmem < memreq:
            fail(CARD_INSUFFICIENT_MEMORY)
            continue
        if info.devcore - dev.usedcores < coresreq:
            fail(CARD_INSUFFICIENT_CORE)
            continue
        if info.devcore == 100 and coresreq == 100 and dev.used > 0:
            fail(EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT)
            continue
        if info.devcore != 0 and dev.usedcores == info.devcore and coresreq == 0:
            fail(CARD_COMPUTE_UNITS_EXHAUSTED)
            continue
        if nums > 0:
            if not topology:
                nums -= 1
            taken.append(ContainerDevice(info.id, NVIDIA, memreq, coresreq))
        if nums == 0 and not topology:
            return True, taken, ""
    if topology and len(taken) == wanted:
        return True, taken, ""
    if topology and len(taken) > wanted:
        return True, _by_topology(taken, wanted, node.pair_scores), ""
    if taken:
        reasons[ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = len(taken)
    return False, taken, gen_reason(reasons, len(devices))


def _by_topology(
    taken: list[ContainerDevice], wanted: int, scores: Mapping[str, Mapping[str, int]]
) -> list[ContainerDevice]:
    """``computeWorstSingleCard`` for one GPU (the least connected), ``computeBestCombination`` for more (the
    combination with the highest summed pair scores; the first of equals in combination order)."""

    def pair(a: ContainerDevice, b: ContainerDevice) -> int:
        return scores.get(a.uuid, {}).get(b.uuid, 0)

    if wanted == 1:
        best, best_total = taken[0], None
        for d in taken:
            total = sum(pair(d, o) for o in taken if o.uuid != d.uuid)
            if best_total is None or total < best_total:
                best, best_total = d, total
        return [best]
    best_combo: tuple[ContainerDevice, ...] = ()
    top = -1
    for combo in itertools.combinations(taken, wanted):
        total = sum(pair(a, b) for a, b in itertools.combinations(combo, 2))
        if not best_combo or total > top:
            best_combo, top = combo, total
    return list(best_combo)


def _fit_container(node: _Node, req: ContainerRequest, pod: _Pod) -> tuple[bool, list[ContainerDevice], str]:
    """``fitInDevices`` for one container: score, sort, filter by type, ``Fit``, then add the usage."""
    for s in node.devices:
        s.score = _score(s.device, [req], pod.weights)
    _sort(node.devices, _less(pod.gpu_policy, pod.numa_bind))
    typed = [s.device for s in node.devices if req.type.lower() in s.device.info.type.lower()]
    if req.nums > len(typed):
        return False, [], NODE_INSUFFICIENT_DEVICE
    ok, taken, reason = _fit(typed, req, pod, node)
    if not ok:
        return False, taken, reason
    by_id = {s.device.id: s.device for s in node.devices}
    for d in taken:
        dev = by_id[d.uuid]
        dev.used += 1
        dev.usedcores += d.usedcores
        dev.usedmem += d.usedmem
    return True, taken, ""


def node_score(devices: Sequence[DeviceUsage]) -> float:
    """``ComputeDefaultScore``: how used the node's GPUs already are (slots, cores, memory)."""
    total = sum(d.info.count for d in devices)
    total_core = sum(d.info.devcore for d in devices)
    total_mem = sum(d.info.devmem for d in devices)
    if total == 0 or total_core == 0 or total_mem == 0:
        return 0.0
    used = f32(f32(sum(d.used for d in devices)) / f32(total))
    cores = f32(f32(sum(d.usedcores for d in devices)) / f32(total_core))
    mem = f32(f32(sum(d.usedmem for d in devices)) / f32(total_mem))
    return f32(f32(10) * f32(f32(used + cores) + mem))


@dataclass
class PodFit:
    """A pod placed on one node: its devices per container with GPUs, init containers first (see :func:`fit_pod`),
    and the node's score."""

    devices: list[list[ContainerDevice]] = field(default_factory=list)
    score: float = 0.0


def fit_pod(
    requests: Sequence[ContainerRequest | None], num_init: int, pod: _Pod, node: _Node
) -> tuple[PodFit | None, str]:
    """``scoreNode``: the pod's devices on this node, or why it does not fit.

    HAMi keeps the pod's devices per device type and pads a container without GPUs with an empty entry under
    each type name the node's GPUs carry (``nodeDeviceBaseTypes``); the annotation is written from the
    ``NVIDIA`` list, so the empty entries show only on a node whose GPUs are typed exactly ``NVIDIA`` (never for
    ``NVIDIA-<model>``: the annotation then lists only the containers that got GPUs).
    """
    pad = any(s.device.info.type == NVIDIA for s in node.devices)
    fit = PodFit()
    for i in range(num_init):
        req = requests[i]
        if req is None:
            if pad:
                fit.devices.append([])
            continue
        ok, taken, reason = _fit_container(node.copy(), req, pod)
        if not ok:
            return None, reason
        fit.devices.append(taken)
    app = node.copy()
    fit.score = node_score([s.device for s in app.devices])
    for req in requests[num_init:]:
        if req is None:
            if pad:
                fit.devices.append([])
            continue
        ok, taken, reason = _fit_container(app, req, pod)
        if not ok:
            return None, reason
        fit.devices.append(taken)
    return fit, ""


@dataclass
class ScheduleResult:
    """HAMi's Filter for one pod: the chosen node and its fit, or the failed nodes' reasons."""

    node: str | None
    fit: PodFit | None
    failed: dict[str, str]


def schedule_pod(
    nodes: Mapping[str, Sequence[DeviceUsage]],
    pod: Mapping[str, Any],
    cfg: HamiConfig = DEFAULT_CONFIG,
    *,
    node_annotations: Mapping[str, Mapping[str, str]] | None = None,
    pair_scores: Mapping[str, Mapping[str, Mapping[str, int]]] | None = None,
) -> ScheduleResult:
    """``Filter`` for a pod with a HAMi request over the registered nodes' current usage (registration order).

    Raises :class:`~.config.HamiSchedulingError` when HAMi's Filter errors (bad scoring weights).
    """
    ctx = _Pod.of(pod, cfg)
    spec = pod.get("spec") or {}
    requests = pod_requests(spec, cfg)
    num_init = len(spec.get("initContainers") or ())
    failed: dict[str, str] = {}
    fits: dict[str, PodFit] = {}
    for name, usage in nodes.items():
        annotations = (node_annotations or {}).get(name) or {}
        cordoned = frozenset(u.strip() for u in annotations.get(CORDON_ANNOTATION, "").split(",") if u.strip())
        node = _Node([_Scored(d) for d in usage], cordoned, (pair_scores or {}).get(name) or {})
        fit, reason = fit_pod(requests, num_init, ctx, node)
        if fit is None:
            failed[name] = reason
        else:
            fits[name] = fit
    if not fits:
        return ScheduleResult(None, None, failed)
    policy = ctx.annotations.get(NODE_POLICY_ANNOTATION, cfg.node_policy)
    if policy == "spread":
        chosen = min(fits, key=lambda n: (fits[n].score, n))
    else:
        chosen = min(fits, key=lambda n: (-fits[n].score, n))
    return ScheduleResult(chosen, fits[chosen], failed)
