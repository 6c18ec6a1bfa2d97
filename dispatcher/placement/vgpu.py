"""HAMi's NVIDIA vGPU rules in pure Python: requests, inventory, Fit, scores, node choice and annotations.

One module serves two callers that must agree with a real HAMi scheduler (``Project-HAMi/HAMi`` at commit
4707fb02, see ``/work/shared/hami-rules.md``; section numbers below refer to that document):

* the simulator's HAMi emulation, which needs the full scheduler path: the admission webhook
  (:func:`mutate_pod`), per-container requests (:func:`pod_requests`), node inventory
  (:func:`decode_node_devices`), per-device usage rebuilt from bound pods (:func:`node_usage`), device
  ordering, ``Fit`` with checks F1-F13 in HAMi's order and HAMi's reason strings (:func:`fit_pod`), the node
  score and node choice (:func:`node_score`, :func:`choose_node`, :func:`schedule_pod`), the annotations HAMi
  writes (:func:`bind_annotations`) and node health (:func:`check_handshake`, :class:`NvidiaHealthTracker`);
* the dispatcher's placement engine, which asks "can all ``count`` pods of this pod set be placed on this
  worker, and how good is the fit?" thousands of times a second (:func:`fit_pod_set` over a prebuilt
  :class:`GpuInventory`).

It is a re-implementation of the behaviour, not a transliteration. Details that decide results are kept:
Go's ``float32`` arithmetic for device and node scores (ties decide device order), the stable insertion sort Go
uses for up to 12 devices and its pattern-defeating quicksort above that, ``int32`` truncation where HAMi
truncates, and the exact ``Fit`` walk (from the end of the sorted list, first failing check wins).

Hot-path conventions: the value classes use ``@dataclass(slots=True)``; :class:`DeviceUsage` and
:class:`ContainerDevice` are treated as immutable values (functions build new ones instead of mutating), so a
simulated placement copies only the few devices it touches and never deep-copies a node.

Modelled with simplifications (each documented where it lives):

* F8 namespace quota is applied when a :class:`NamespaceQuota` is passed; the caller tracks the namespace's
  used amount (HAMi's ``QuotaManager``).
* MIG: profiles are decoded and encoded, F13 selects a free non-overlapping placement and a MIG GPU is revisited
  as HAMi does, but MIG usage is only rebuilt from ``hami.io/vgpu-mig-allocations`` (no runtime identity
  bookkeeping) and the MIG profile allowlist is the device plugin's business.
* HAMi's node choice among equal node scores depends on goroutine completion order; here ties go to the
  smallest node name.
"""

from __future__ import annotations

import heapq
import itertools
import json
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from math import ceil, floor
from typing import Any, Final, TypeVar

from dispatcher.quantity import QuantityError, parse_quantity

__all__ = [
    "ALLOCATED_ANNOTATION",
    "ASSIGNED_NODE_ANNOTATION",
    "ASSIGNED_TIME_ANNOTATION",
    "BIND_PHASE_ANNOTATION",
    "BIND_TIME_ANNOTATION",
    "CORDON_ANNOTATION",
    "DEFAULT_CONFIG",
    "GPU_POLICY_ANNOTATION",
    "HANDSHAKE_ANNOTATION",
    "MIG_ALLOCATIONS_ANNOTATION",
    "NODE_POLICY_ANNOTATION",
    "NOUSE_GPUTYPE_ANNOTATION",
    "NOUSE_GPUUUID_ANNOTATION",
    "NUMA_BIND_ANNOTATION",
    "NVIDIA",
    "PAIR_SCORE_ANNOTATION",
    "REGISTER_ANNOTATION",
    "SCORING_WEIGHTS_ANNOTATION",
    "TO_ALLOCATE_ANNOTATION",
    "USE_GPUTYPE_ANNOTATION",
    "USE_GPUUUID_ANNOTATION",
    "VGPU_MODE_ANNOTATION",
    "ContainerDevice",
    "ContainerRequest",
    "DeviceInfo",
    "DeviceUsage",
    "GpuInventory",
    "HamiAdmissionError",
    "HamiConfig",
    "HamiFormatError",
    "HamiSchedulingError",
    "HandshakeCheck",
    "MigAllocation",
    "MigPlacement",
    "MigProfile",
    "NamespaceQuota",
    "NodeSummary",
    "NvidiaHealthTracker",
    "PodAllocation",
    "PodFit",
    "PodSelectors",
    "PodSetFit",
    "PreparedPod",
    "ScheduleResult",
    "ScoringWeights",
    "admission_quota_fits",
    "bind_annotations",
    "check_handshake",
    "choose_node",
    "collapse_pod_usage",
    "container_request",
    "cordoned_devices",
    "decode_legacy_node_devices",
    "decode_mig_allocations",
    "decode_node_devices",
    "decode_pair_scores",
    "decode_pod_devices",
    "device_score",
    "encode_legacy_node_devices",
    "encode_mig_allocations",
    "encode_node_devices",
    "encode_pod_devices",
    "filter_failure_messages",
    "fit_container",
    "fit_pod",
    "fit_pod_set",
    "gen_reason",
    "hami_problem",
    "hami_resource_problems",
    "is_hami_request",
    "mutate_pod",
    "namespace_quota",
    "node_devices_from_annotations",
    "node_score",
    "node_usage",
    "parse_reason",
    "parse_scoring_weights",
    "pod_quota_usage",
    "pod_requests",
    "pop_next_container_devices",
    "prepare_pod",
    "register_device",
    "schedule_pod",
    "sort_devices",
    "utilisation",
]

# --------------------------------------------------------------------------------------------------------------
# Names (pkg/device/nvidia/device.go:40-64, pkg/util/types.go, pkg/device/common/common.go:25-44)
# --------------------------------------------------------------------------------------------------------------

NVIDIA: Final = "NVIDIA"
MODE_HAMI_CORE: Final = "hami-core"
MODE_MIG: Final = "mig"
MODE_MPS: Final = "mps"

REGISTER_ANNOTATION: Final = "hami.io/node-nvidia-register"
PAIR_SCORE_ANNOTATION: Final = "hami.io/node-nvidia-score"
HANDSHAKE_ANNOTATION: Final = "hami.io/node-handshake"
CORDON_ANNOTATION: Final = "hami.io/device-cordon"
NODE_LOCK_ANNOTATION: Final = "hami.io/mutex.lock"
TO_ALLOCATE_ANNOTATION: Final = "hami.io/vgpu-devices-to-allocate"
ALLOCATED_ANNOTATION: Final = "hami.io/vgpu-devices-allocated"
MIG_ALLOCATIONS_ANNOTATION: Final = "hami.io/vgpu-mig-allocations"
ASSIGNED_NODE_ANNOTATION: Final = "hami.io/vgpu-node"
ASSIGNED_TIME_ANNOTATION: Final = "hami.io/vgpu-time"
BIND_PHASE_ANNOTATION: Final = "hami.io/bind-phase"
BIND_TIME_ANNOTATION: Final = "hami.io/bind-time"
USE_GPUTYPE_ANNOTATION: Final = "nvidia.com/use-gputype"
NOUSE_GPUTYPE_ANNOTATION: Final = "nvidia.com/nouse-gputype"
USE_GPUUUID_ANNOTATION: Final = "nvidia.com/use-gpuuuid"
NOUSE_GPUUUID_ANNOTATION: Final = "nvidia.com/nouse-gpuuuid"
NUMA_BIND_ANNOTATION: Final = "nvidia.com/numa-bind"
VGPU_MODE_ANNOTATION: Final = "nvidia.com/vgpu-mode"
GPU_POLICY_ANNOTATION: Final = "hami.io/gpu-scheduler-policy"
NODE_POLICY_ANNOTATION: Final = "hami.io/node-scheduler-policy"
SCORING_WEIGHTS_ANNOTATION: Final = "hami.io/device-scoring-weights"

BIND_ALLOCATING: Final = "allocating"
BIND_SUCCESS: Final = "success"
BIND_FAILED: Final = "failed"

CARD_TYPE_MISMATCH: Final = "CardTypeMismatch"
CARD_UUID_MISMATCH: Final = "CardUuidMismatch"
CARD_TIME_SLICING_EXHAUSTED: Final = "CardTimeSlicingExhausted"
CARD_COMPUTE_UNITS_EXHAUSTED: Final = "CardComputeUnitsExhausted"
CARD_INSUFFICIENT_MEMORY: Final = "CardInsufficientMemory"
CARD_INSUFFICIENT_CORE: Final = "CardInsufficientCore"
CARD_NOT_HEALTH: Final = "CardNotHealth"
CARD_CORDONED: Final = "CardCordoned"
NUMA_NOT_FIT: Final = "NumaNotFit"
EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT: Final = "ExclusiveDeviceAllocateConflict"
CARD_MIG_TOPOLOGY_INFEASIBLE: Final = "CardMigTopologyInfeasible"
NODE_INSUFFICIENT_DEVICE: Final = "NodeInsufficientDevice"
ALLOCATED_CARDS_INSUFFICIENT_REQUEST: Final = "AllocatedCardsInsufficientRequest"
RESOURCE_QUOTA_NOT_FIT: Final = "ResourceQuotaNotFit"

POLICY_BINPACK: Final = "binpack"
POLICY_SPREAD: Final = "spread"
POLICY_TOPOLOGY: Final = "topology-aware"
POLICY_MUTEX: Final = "mutex"
POLICY_NUMA: Final = "numa"

_MAX_INT32: Final = 2**31 - 1
_MAX_INT64: Final = 2**63 - 1
_SCORE_WEIGHT: Final = 10  # util.Weight
_HANDSHAKE_TIMEOUT: Final = timedelta(seconds=60)
_GO_DATETIME: Final = "%Y-%m-%d %H:%M:%S"  # time.DateTime


class HamiFormatError(ValueError):
    """An annotation HAMi cannot decode. The message is HAMi's (or Go's) own wording."""


class HamiSchedulingError(ValueError):
    """Scheduling cannot even start for this pod (HAMi's Filter returns an error, e.g. bad scoring weights)."""


class HamiAdmissionError(Exception):
    """The admission webhook refuses the pod: ``code`` 403 for ``admission.Denied``, 500 for ``Errored``."""

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


# --------------------------------------------------------------------------------------------------------------
# Go numeric semantics
# --------------------------------------------------------------------------------------------------------------

_F32 = struct.Struct("<f")


def _f32(x: float) -> float:
    """Round to the nearest float32, as every Go float32 operation does.

    Rounding the double result of one ``+ - * /`` on float32 operands gives the correctly rounded float32
    result (a double has more than 2×24+2 bits), so chaining ``_f32`` reproduces Go on amd64 exactly.
    """
    return float(_F32.unpack(_F32.pack(x))[0])


def _i32(x: int) -> int:
    """Go's ``int32(x)``: keep the low 32 bits, two's complement."""
    x &= 0xFFFFFFFF
    return x - 0x1_0000_0000 if x >= 0x8000_0000 else x


def _go_div(a: int, b: int) -> int:
    """Go's integer division, which truncates toward zero (Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _percent_of(devmem: int, pct: int) -> int:
    """``dev.Totalmem * k.MemPercentagereq / 100`` in int32 arithmetic (device.go:782)."""
    return _i32(_go_div(_i32(devmem * pct), 100))


_PRINTABLE_ESC = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _go_quote(s: str) -> str:
    """Go's ``strconv.Quote`` (``%q``), enough for error messages."""
    out = ['"']
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in _PRINTABLE_ESC:
            out.append(_PRINTABLE_ESC[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


class _GoNumError(ValueError):
    """A ``strconv`` error, formatted as Go prints it."""


_GO_INT = re.compile(r"[+-]?[0-9]+")


def _go_parse_int(s: str, bits: int, func: str = "ParseInt") -> int:
    """``strconv.ParseInt(s, 10, bits)`` (or ``Atoi`` for ``func="Atoi"``)."""
    if not _GO_INT.fullmatch(s):
        raise _GoNumError(f"strconv.{func}: parsing {_go_quote(s)}: invalid syntax")
    value = int(s)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise _GoNumError(f"strconv.{func}: parsing {_go_quote(s)}: value out of range")
    return value


def _go_parse_bool(s: str) -> bool:
    """``strconv.ParseBool``."""
    if s in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if s in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise _GoNumError(f"strconv.ParseBool: parsing {_go_quote(s)}: invalid syntax")


def _parse_bool_true(value: str | None) -> bool:
    """``strconv.ParseBool(v)`` succeeded and was true; anything else is false (assertNuma, device.go:482)."""
    if value is None:
        return False
    try:
        return _go_parse_bool(value)
    except _GoNumError:
        return False


T = TypeVar("T")


# --------------------------------------------------------------------------------------------------------------
# Go's sort.Sort (pdqsort) — only used for lists longer than 12, where it is not stable
# --------------------------------------------------------------------------------------------------------------


def _go_sort(data: list[T], less: Callable[[T, T], bool]) -> None:
    """Sort ``data`` in place exactly as Go's ``sort.Sort`` orders it (pattern-defeating quicksort).

    Up to 12 elements this is an insertion sort, so it is stable and equals Python's ``sorted``; above that the
    order of equal elements is Go's, which matters for nodes with more than 12 GPUs.
    """
    n = len(data)
    if n > 1:
        _pdqsort(data, less, 0, n, n.bit_length())


def _insertion_sort(data: list[T], less: Callable[[T, T], bool], a: int, b: int) -> None:
    for i in range(a + 1, b):
        j = i
        while j > a and less(data[j], data[j - 1]):
            data[j], data[j - 1] = data[j - 1], data[j]
            j -= 1


def _sift_down(data: list[T], less: Callable[[T, T], bool], lo: int, hi: int, first: int) -> None:
    root = lo
    while True:
        child = 2 * root + 1
        if child >= hi:
            return
        if child + 1 < hi and less(data[first + child], data[first + child + 1]):
            child += 1
        if not less(data[first + root], data[first + child]):
            return
        data[first + root], data[first + child] = data[first + child], data[first + root]
        root = child


def _heap_sort(data: list[T], less: Callable[[T, T], bool], a: int, b: int) -> None:
    first, hi = a, b - a
    for i in range((hi - 1) // 2, -1, -1):
        _sift_down(data, less, i, hi, first)
    for i in range(hi - 1, -1, -1):
        data[first], data[first + i] = data[first + i], data[first]
        _sift_down(data, less, 0, i, first)


def _pdqsort(data: list[T], less: Callable[[T, T], bool], a: int, b: int, limit: int) -> None:
    was_balanced = was_partitioned = True
    while True:
        length = b - a
        if length <= 12:
            _insertion_sort(data, less, a, b)
            return
        if limit == 0:
            _heap_sort(data, less, a, b)
            return
        if not was_balanced:
            _break_patterns(data, a, b)
            limit -= 1
        pivot, hint = _choose_pivot(data, less, a, b)
        if hint == 2:  # decreasing
            i, j = a, b - 1
            while i < j:
                data[i], data[j] = data[j], data[i]
                i += 1
                j -= 1
            pivot = (b - 1) - (pivot - a)
            hint = 1
        if was_balanced and was_partitioned and hint == 1 and _partial_insertion_sort(data, less, a, b):
            return
        if a > 0 and not less(data[a - 1], data[pivot]):
            a = _partition_equal(data, less, a, b, pivot)
            continue
        mid, was_partitioned = _partition(data, less, a, b, pivot)
        left, right = mid - a, b - mid
        threshold = length // 8
        if left < right:
            was_balanced = left >= threshold
            _pdqsort(data, less, a, mid, limit)
            a = mid + 1
        else:
            was_balanced = right >= threshold
            _pdqsort(data, less, mid + 1, b, limit)
            b = mid


def _partition(data: list[T], less: Callable[[T, T], bool], a: int, b: int, pivot: int) -> tuple[int, bool]:
    data[a], data[pivot] = data[pivot], data[a]
    i, j = a + 1, b - 1
    while i <= j and less(data[i], data[a]):
        i += 1
    while i <= j and not less(data[j], data[a]):
        j -= 1
    if i > j:
        data[j], data[a] = data[a], data[j]
        return j, True
    data[i], data[j] = data[j], data[i]
    i += 1
    j -= 1
    while True:
        while i <= j and less(data[i], data[a]):
            i += 1
        while i <= j and not less(data[j], data[a]):
            j -= 1
        if i > j:
            break
        data[i], data[j] = data[j], data[i]
        i += 1
        j -= 1
    data[j], data[a] = data[a], data[j]
    return j, False


def _partition_equal(data: list[T], less: Callable[[T, T], bool], a: int, b: int, pivot: int) -> int:
    data[a], data[pivot] = data[pivot], data[a]
    i, j = a + 1, b - 1
    while True:
        while i <= j and not less(data[a], data[i]):
            i += 1
        while i <= j and less(data[a], data[j]):
            j -= 1
        if i > j:
            return i
        data[i], data[j] = data[j], data[i]
        i += 1
        j -= 1


def _partial_insertion_sort(data: list[T], less: Callable[[T, T], bool], a: int, b: int) -> bool:
    i = a + 1
    for _ in range(5):
        while i < b and not less(data[i], data[i - 1]):
            i += 1
        if i == b:
            return True
        if b - a < 50:
            return False
        data[i], data[i - 1] = data[i - 1], data[i]
        if i - a >= 2:
            j = i - 1
            while j >= 1 and less(data[j], data[j - 1]):  # Go compares against index 1, not a+1
                data[j], data[j - 1] = data[j - 1], data[j]
                j -= 1
        if b - i >= 2:
            j = i + 1
            while j < b and less(data[j], data[j - 1]):
                data[j], data[j - 1] = data[j - 1], data[j]
                j += 1
    return False


def _break_patterns(data: list[T], a: int, b: int) -> None:
    length = b - a
    if length >= 8:
        state = length
        modulus = 1 << length.bit_length()
        start = a + (length // 4) * 2 - 1
        for idx in range(start, start + 3):
            state ^= (state << 13) & 0xFFFFFFFFFFFFFFFF
            state ^= state >> 7
            state ^= (state << 17) & 0xFFFFFFFFFFFFFFFF
            other = state & (modulus - 1)
            if other >= length:
                other -= length
            data[idx], data[a + other] = data[a + other], data[idx]


def _choose_pivot(data: list[T], less: Callable[[T, T], bool], a: int, b: int) -> tuple[int, int]:
    swaps = 0

    def median(x: int, y: int, z: int) -> int:
        nonlocal swaps
        if less(data[y], data[x]):
            swaps += 1
            x, y = y, x
        if less(data[z], data[y]):
            swaps += 1
            y, z = z, y
        if less(data[y], data[x]):
            swaps += 1
            x, y = y, x
        return y

    length = b - a
    i, j, k = a + length // 4, a + length // 4 * 2, a + length // 4 * 3
    if length >= 8:
        if length >= 50:
            i, j, k = median(i - 1, i, i + 1), median(j - 1, j, j + 1), median(k - 1, k, k + 1)
        j = median(i, j, k)
    if swaps == 0:
        return j, 1
    if swaps == 12:
        return j, 2
    return j, 0


# --------------------------------------------------------------------------------------------------------------
# Configuration and value classes
# --------------------------------------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class HamiConfig:
    """The scheduler and device-plugin settings that change results (section 8; chart defaults)."""

    resource_count: str = "nvidia.com/gpu"
    resource_memory: str = "nvidia.com/gpumem"
    resource_memory_percentage: str = "nvidia.com/gpumem-percentage"
    resource_cores: str = "nvidia.com/gpucores"
    resource_priority: str = "nvidia.com/priority"
    default_memory: int = 0
    default_cores: int = 0
    default_gpu_num: int = 1
    memory_factor: int = 1
    gpu_policy: str = POLICY_SPREAD
    node_policy: str = POLICY_BINPACK
    #: ``--scheduler-name``: the chart passes ``hami-scheduler``; empty leaves ``spec.schedulerName`` alone.
    scheduler_name: str = "hami-scheduler"
    force_overwrite_default_scheduler: bool = True
    runtime_class_name: str = ""
    gpu_core_policy: str = "default"
    overwrite_env: bool = False


DEFAULT_CONFIG: Final = HamiConfig()


@dataclass(slots=True, frozen=True)
class MigPlacement:
    """A MIG placement (start slice and size) as NVML reports it."""

    start: int
    size: int


@dataclass(slots=True, frozen=True)
class MigProfile:
    """One MIG profile a GPU offers (``migProfiles`` in the register annotation)."""

    name: str
    memory_mb: int
    core: int
    slice_count: int
    #: ``None`` is Go's nil slice (marshalled as ``null``), ``()`` an empty one (``[]``).
    placements: tuple[MigPlacement, ...] | None


@dataclass(slots=True, frozen=True)
class DeviceInfo:
    """One registered GPU (an element of ``hami.io/node-nvidia-register``). Shared, never copied."""

    id: str
    index: int = 0
    count: int = 0
    devmem: int = 0
    devcore: int = 0
    type: str = ""
    numa: int = 0
    health: bool = False
    mode: str = ""
    mig_profiles: tuple[MigProfile, ...] = ()


@dataclass(slots=True)
class DeviceUsage:
    """A GPU and what bound pods use on it (HAMi's ``DeviceUsage``). Treat as an immutable value.

    ``mig_in_use`` holds the MIG placements already taken on a MIG-mode GPU.
    """

    info: DeviceInfo
    used: int = 0
    usedmem: int = 0
    usedcores: int = 0
    mig_in_use: tuple[MigPlacement, ...] = ()

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def free_mem(self) -> int:
        return self.info.devmem - self.usedmem

    @property
    def free_cores(self) -> int:
        return self.info.devcore - self.usedcores


@dataclass(slots=True, frozen=True)
class ContainerRequest:
    """One container's request (``ContainerDeviceRequest``). ``mem_percentage`` 101 means "not set"."""

    nums: int
    memreq: int = 0
    mem_percentage: int = 101
    coresreq: int = 0
    type: str = NVIDIA


@dataclass(slots=True)
class ContainerDevice:
    """One GPU given to a container (``ContainerDevice``). Treat as an immutable value.

    ``index`` (the device index) and ``slots`` (collapsed usage only) are not part of the annotation wire form.
    """

    uuid: str
    type: str
    usedmem: int
    usedcores: int
    index: int = 0
    slots: int = 0
    mig_profile: str = ""
    mig_placement: MigPlacement | None = None


@dataclass(slots=True, frozen=True)
class ScoringWeights:
    """``hami.io/device-scoring-weights`` (pkg/util/device_scoring_weights.go); default 1/1/1."""

    slot: int = 1
    core: int = 1
    memory: int = 1


_DEFAULT_WEIGHTS: Final = ScoringWeights()


@dataclass(slots=True, frozen=True)
class MigAllocation:
    """An element of ``hami.io/vgpu-mig-allocations`` (pkg/device/nvidia/mig_allocations.go)."""

    container_index: int
    device_index: int
    gpu_uuid: str
    profile: str
    placement: MigPlacement
    mig_uuid: str = ""
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


# --------------------------------------------------------------------------------------------------------------
# Section 1: pod resources -> per-container request, and the admission webhook
# --------------------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------------------
# Section 7: annotation formats
# --------------------------------------------------------------------------------------------------------------


def _quote_char(c: str) -> str:
    """``quoteChar`` of encoding/json's scanner."""
    if c == "'":
        return "'\\''"
    if c == '"':
        return "'\"'"
    return "'" + _go_quote(c)[1:-1] + "'"


class _Syntax(Exception):
    pass


def _go_json_syntax_error(text: str) -> str | None:
    """The message Go's ``json.Unmarshal`` gives for a syntax error in ``text``, or ``None`` when it is valid.

    A small recursive-descent checker with the contexts of encoding/json's scanner, so a legacy colon-form
    annotation reports ``invalid character 'G' looking for beginning of value`` as HAMi logs it.
    """
    n = len(text)
    ws = " \t\r\n"

    def bad(i: int, context: str) -> _Syntax:
        # At the end of input Go steps one more space through the scanner.
        return _Syntax(f"invalid character {_quote_char(text[i] if i < n else ' ')} {context}")

    def eof() -> _Syntax:
        return _Syntax("unexpected end of JSON input")

    def skip(i: int) -> int:
        while i < n and text[i] in ws:
            i += 1
        return i

    def digits(i: int) -> int:
        while i < n and "0" <= text[i] <= "9":
            i += 1
        return i

    def value(i: int) -> int:
        if i >= n:
            raise eof()
        c = text[i]
        if c == "{":
            return obj(i + 1)
        if c == "[":
            return arr(i + 1)
        if c == '"':
            return string(i + 1)
        if c == "-" or "0" <= c <= "9":
            return number(i)
        for word in ("true", "false", "null"):
            if c == word[0]:
                for k, expected in enumerate(word[1:], start=1):
                    if i + k >= n or text[i + k] != expected:
                        raise bad(i + k, f"in literal {word} (expecting {_quote_char(expected)})")
                return i + len(word)
        raise bad(i, "looking for beginning of value")

    def obj(i: int) -> int:
        i = skip(i)
        if i >= n:
            raise eof()
        if text[i] == "}":
            return i + 1
        while True:
            if i >= n:
                raise eof()
            if text[i] != '"':
                raise bad(i, "looking for beginning of object key string")
            i = skip(string(i + 1))
            if i >= n:
                raise eof()
            if text[i] != ":":
                raise bad(i, "after object key")
            i = skip(value(skip(i + 1)))
            if i >= n:
                raise eof()
            if text[i] == ",":
                i = skip(i + 1)
                continue
            if text[i] == "}":
                return i + 1
            raise bad(i, "after object key:value pair")

    def arr(i: int) -> int:
        i = skip(i)
        if i >= n:
            raise eof()
        if text[i] == "]":
            return i + 1
        while True:
            i = skip(value(i))
            if i >= n:
                raise eof()
            if text[i] == ",":
                i = skip(i + 1)
                continue
            if text[i] == "]":
                return i + 1
            raise bad(i, "after array element")

    def string(i: int) -> int:
        while True:
            if i >= n:
                raise eof()
            c = text[i]
            if c == '"':
                return i + 1
            if c == "\\":
                i += 1
                if i < n and text[i] in 'bfnrt\\/"':
                    i += 1
                    continue
                if i < n and text[i] == "u":
                    for k in range(1, 5):
                        if i + k >= n or text[i + k] not in "0123456789abcdefABCDEF":
                            raise bad(i + k, "in \\u hexadecimal character escape")
                    i += 5
                    continue
                raise bad(i, "in string escape code")
            if ord(c) < 0x20:
                raise bad(i, "in string literal")
            i += 1

    def number(i: int) -> int:
        if text[i] == "-":
            i += 1
            if i >= n or not "0" <= text[i] <= "9":
                raise bad(i, "in numeric literal")
        i = i + 1 if text[i] == "0" else digits(i)
        if i < n and text[i] == ".":
            i += 1
            if i >= n or not "0" <= text[i] <= "9":
                raise bad(i, "after decimal point in numeric literal")
            i = digits(i)
        if i < n and text[i] in "eE":
            i += 1
            if i < n and text[i] in "+-":
                i += 1
            if i >= n or not "0" <= text[i] <= "9":
                raise bad(i, "in exponent of numeric literal")
            i = digits(i)
        return i

    try:
        i = skip(value(skip(0)))
        if i < n:
            raise bad(i, "after top-level value")
    except _Syntax as exc:
        return str(exc)
    return None


class _IntLit(str):
    """A JSON integer literal, kept as text so Go's range and form checks can be applied."""


class _FloatLit(str):
    """A JSON number literal with a fraction or exponent."""


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def _load_go_json(text: str) -> Any:
    """``json.Unmarshal``'s first phase: a syntax check with Go's messages. Numbers stay literal text."""
    try:
        return json.loads(text, parse_int=_IntLit, parse_float=_FloatLit, parse_constant=_reject_constant)
    except ValueError:
        message = _go_json_syntax_error(text)
        raise HamiFormatError(message or "invalid JSON") from None


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (_IntLit, _FloatLit)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


class _TypeErrors:
    """Collects the first ``json.UnmarshalTypeError``; Go keeps decoding and reports the first one."""

    def __init__(self) -> None:
        self.first: str | None = None

    def add(self, struct: str, path: str, value: Any, go_type: str) -> None:
        if self.first is None:
            kind = _json_kind(value)
            shown = f"number {value}" if kind == "number" and go_type not in ("string", "bool") else kind
            self.first = f"json: cannot unmarshal {shown} into Go struct field {struct}.{path} of type {go_type}"

    def int_field(self, struct: str, path: str, value: Any, go_type: str, lo: int, hi: int, default: int) -> int:
        if value is None:
            return default
        if isinstance(value, _IntLit):
            number = int(value)
            if lo <= number <= hi:
                return number
        self.add(struct, path, value, go_type)
        return default

    def str_field(self, struct: str, path: str, value: Any, default: str) -> str:
        if value is None:
            return default
        if isinstance(value, str) and not isinstance(value, (_IntLit, _FloatLit)):
            return str(value)
        self.add(struct, path, value, "string")
        return default

    def bool_field(self, struct: str, path: str, value: Any, default: bool) -> bool:
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        self.add(struct, path, value, "bool")
        return default


_INT32 = (-(2**31), 2**31 - 1)
_UINT32 = (0, 2**32 - 1)
_UINT64 = (0, 2**64 - 1)
_INT64 = (-(2**63), 2**63 - 1)

_DEVICE_FIELDS = (
    "id",
    "index",
    "count",
    "devmem",
    "devcore",
    "type",
    "numa",
    "mode",
    "migprofiles",
    "migtemplate",
    "health",
    "devicevendor",
    "custominfo",
)


def _fold_fields(obj: Mapping[str, Any], names: Sequence[str], exact: Mapping[str, str]) -> dict[str, Any]:
    """Go's field matching: keys match exactly or case-insensitively, and a later key overrides an earlier one."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = exact.get(key) or key.lower()
        if name in names:
            out[name] = value
    return out


def _decode_placements(raw: Any, errors: _TypeErrors) -> tuple[MigPlacement, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        errors.add("DeviceInfo", "migProfiles.placements", raw, "[]device.MigPlacement")
        return None
    out = []
    for item in raw:
        if item is None:
            out.append(MigPlacement(0, 0))
            continue
        if not isinstance(item, dict):
            errors.add("DeviceInfo", "migProfiles.placements", item, "device.MigPlacement")
            continue
        fields = _fold_fields(item, ("start", "size"), {"start": "start", "size": "size"})
        path = "migProfiles.placements."
        start = errors.int_field("DeviceInfo", path + "start", fields.get("start"), "uint32", *_UINT32, 0)
        size = errors.int_field("DeviceInfo", path + "size", fields.get("size"), "uint32", *_UINT32, 0)
        out.append(MigPlacement(start, size))
    return tuple(out)


def _decode_profiles(raw: Any, errors: _TypeErrors) -> tuple[MigProfile, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        errors.add("DeviceInfo", "migProfiles", raw, "[]device.MigProfile")
        return ()
    out = []
    names = ("name", "memorymb", "core", "slicecount", "placements")
    exact = {"name": "name", "memoryMB": "memorymb", "core": "core", "sliceCount": "slicecount"}
    exact["placements"] = "placements"
    for item in raw:
        if item is None:
            out.append(MigProfile("", 0, 0, 0, None))
            continue
        if not isinstance(item, dict):
            errors.add("DeviceInfo", "migProfiles", item, "device.MigProfile")
            continue
        f = _fold_fields(item, names, exact)
        out.append(
            MigProfile(
                name=errors.str_field("DeviceInfo", "migProfiles.name", f.get("name"), ""),
                memory_mb=errors.int_field(
                    "DeviceInfo", "migProfiles.memoryMB", f.get("memorymb"), "int32", *_INT32, 0
                ),
                core=errors.int_field("DeviceInfo", "migProfiles.core", f.get("core"), "int32", *_INT32, 0),
                slice_count=errors.int_field(
                    "DeviceInfo", "migProfiles.sliceCount", f.get("slicecount"), "uint32", *_UINT32, 0
                ),
                placements=_decode_placements(f.get("placements"), errors),
            )
        )
    return tuple(out)


_DEVICE_EXACT = {name: name for name in _DEVICE_FIELDS if name != "migprofiles"} | {"migProfiles": "migprofiles"}


def decode_node_devices(annotation: str) -> list[DeviceInfo]:
    """Decode ``hami.io/node-nvidia-register`` as HAMi's NVIDIA backend does at HEAD (JSON only).

    Follows ``UnMarshalNodeDevices`` and ``GetNodeDevices`` (device.go:302-345): Go's syntax and type errors,
    case-insensitive keys, omitted keys left at zero (a missing ``health`` means unhealthy), ``"[]"`` and
    ``null`` give "no gpu found on node". The legacy colon form is a JSON syntax error here, as in HAMi.
    """
    data = _load_go_json(annotation)
    if data is None:
        raise HamiFormatError("no gpu found on node")
    if not isinstance(data, list):
        raise HamiFormatError(f"json: cannot unmarshal {_json_kind(data)} into Go value of type []*device.DeviceInfo")
    errors = _TypeErrors()
    devices: list[DeviceInfo | None] = []
    for item in data:
        if item is None:
            devices.append(None)
            continue
        if not isinstance(item, dict):
            if errors.first is None:
                errors.first = f"json: cannot unmarshal {_json_kind(item)} into Go value of type device.DeviceInfo"
            continue
        f = _fold_fields(item, _DEVICE_FIELDS, _DEVICE_EXACT)
        s = "DeviceInfo"
        devices.append(
            DeviceInfo(
                id=errors.str_field(s, "id", f.get("id"), ""),
                index=errors.int_field(s, "index", f.get("index"), "uint", *_UINT64, 0),
                count=errors.int_field(s, "count", f.get("count"), "int32", *_INT32, 0),
                devmem=errors.int_field(s, "devmem", f.get("devmem"), "int32", *_INT32, 0),
                devcore=errors.int_field(s, "devcore", f.get("devcore"), "int32", *_INT32, 0),
                type=errors.str_field(s, "type", f.get("type"), ""),
                numa=errors.int_field(s, "numa", f.get("numa"), "int", *_INT64, 0),
                mode=errors.str_field(s, "mode", f.get("mode"), ""),
                health=errors.bool_field(s, "health", f.get("health"), False),
                mig_profiles=_decode_profiles(f.get("migprofiles"), errors),
            )
        )
        errors.str_field(s, "devicevendor", f.get("devicevendor"), "")
    if errors.first is not None:
        raise HamiFormatError(errors.first)
    if not devices:
        raise HamiFormatError("no gpu found on node")
    if any(d is None for d in devices):
        # GetNodeDevices sets DeviceVendor on each element; a JSON null element is a nil pointer there.
        raise HamiFormatError("runtime error: invalid memory address or nil pointer dereference")
    return [d for d in devices if d is not None]


_HTML_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JSON_ESC = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _go_json_string(s: str) -> str:
    """``json.Marshal`` of a string: HTML-safe escapes, ``\\u00XX`` for other control characters."""
    out = ['"']
    for ch in s:
        if ch in _JSON_ESC:
            out.append(_JSON_ESC[ch])
        elif ch in _HTML_UNSAFE:
            out.append(_HTML_UNSAFE[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u00{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _encode_profile(p: MigProfile) -> str:
    if p.placements is None:
        placements = "null"
    else:
        placements = "[" + ",".join(f'{{"start":{x.start},"size":{x.size}}}' for x in p.placements) + "]"
    return (
        f'{{"name":{_go_json_string(p.name)},"memoryMB":{p.memory_mb},"core":{p.core},'
        f'"sliceCount":{p.slice_count},"placements":{placements}}}'
    )


def encode_node_devices(devices: Iterable[DeviceInfo]) -> str:
    """``MarshalNodeDevices`` (devices.go:422-443): compact JSON, Go's key order, every key ``omitempty``.

    Key order is id, index, count, devmem, devcore, type, numa, mode, migProfiles, health; zero values
    (including ``health: false``) are left out, exactly as the device plugin writes the annotation.
    """
    parts = []
    for d in devices:
        fields = []
        if d.id:
            fields.append(f'"id":{_go_json_string(d.id)}')
        for key, number in (("index", d.index), ("count", d.count), ("devmem", d.devmem), ("devcore", d.devcore)):
            if number:
                fields.append(f'"{key}":{number}')
        if d.type:
            fields.append(f'"type":{_go_json_string(d.type)}')
        if d.numa:
            fields.append(f'"numa":{d.numa}')
        if d.mode:
            fields.append(f'"mode":{_go_json_string(d.mode)}')
        if d.mig_profiles:
            fields.append('"migProfiles":[' + ",".join(_encode_profile(p) for p in d.mig_profiles) + "]")
        if d.health:
            fields.append('"health":true')
        parts.append("{" + ",".join(fields) + "}")
    return "[" + ",".join(parts) + "]"


def decode_legacy_node_devices(annotation: str) -> list[DeviceInfo]:
    """The legacy colon form (``DecodeNodeDevices``, devices.go:317-381), with HAMi's error messages.

    ``ID,count,devmem,devcore,type,numa,health[,index,mode]:`` per device. Seven fields (v2.4.x) give index 0
    and mode ``hami-core``. HAMi's NVIDIA backend no longer reads this form; other vendors and old nodes do.
    """
    if ":" not in annotation:
        raise HamiFormatError("node annotation missing device separator")
    out = []
    for segment in annotation.split(":"):
        if not segment:
            continue
        if "," not in segment:
            raise HamiFormatError(f"malformed node annotation segment: {_go_quote(segment)}")
        items = segment.split(",")
        if len(items) not in (7, 9):
            raise HamiFormatError(f"unexpected field count {len(items)} in node annotation")
        try:
            count = _go_parse_int(items[1], 32)
        except _GoNumError as exc:
            raise HamiFormatError(f"invalid count field: {exc}") from None
        try:
            devmem = _go_parse_int(items[2], 32)
        except _GoNumError as exc:
            raise HamiFormatError(f"invalid memory field: {exc}") from None
        try:
            devcore = _go_parse_int(items[3], 32)
        except _GoNumError as exc:
            raise HamiFormatError(f"invalid core field: {exc}") from None
        try:
            health = _go_parse_bool(items[6])
        except _GoNumError as exc:
            raise HamiFormatError(f"invalid health field: {exc}") from None
        try:
            numa = _go_parse_int(items[5], 64, "Atoi")
        except _GoNumError as exc:
            raise HamiFormatError(f"invalid numa field: {exc}") from None
        mode, index = MODE_HAMI_CORE, 0
        if len(items) == 9:
            try:
                index = _go_parse_int(items[7], 64, "Atoi")
            except _GoNumError as exc:
                raise HamiFormatError(f"invalid index field: {exc}") from None
            if index < 0:
                raise HamiFormatError(f"index field must not be negative: {index}")
            mode = items[8]
        out.append(
            DeviceInfo(
                id=items[0],
                index=index,
                count=count,
                devmem=devmem,
                devcore=devcore,
                type=items[4],
                numa=numa,
                health=health,
                mode=mode,
            )
        )
    return out


def encode_legacy_node_devices(devices: Iterable[DeviceInfo]) -> str:
    """``EncodeNodeDevices`` (devices.go:391-417): the nine-field colon form."""
    return "".join(
        f"{d.id},{d.count},{d.devmem},{d.devcore},{d.type},{d.numa},{str(d.health).lower()},{d.index},{d.mode}:"
        for d in devices
    )


def decode_pair_scores(annotation: str) -> dict[str, dict[str, int]]:
    """``hami.io/node-nvidia-score``: ``[{"uuid": ..., "score": {uuid: int}}]`` -> ``{uuid: {uuid: score}}``.

    The first entry for a UUID wins, as ``GetNodeDevices`` assigns it; a malformed value is an error (the node's
    registration fails).
    """
    data = _load_go_json(annotation)
    if data is None:
        return {}
    if not isinstance(data, list):
        kind = _json_kind(data)
        raise HamiFormatError(f"json: cannot unmarshal {kind} into Go value of type device.DevicePairScores")
    errors = _TypeErrors()
    out: dict[str, dict[str, int]] = {}
    for item in data:
        if item is None:
            continue
        if not isinstance(item, dict):
            if errors.first is None:
                errors.first = f"json: cannot unmarshal {_json_kind(item)} into Go value of type device.DevicePairScore"
            continue
        f = _fold_fields(item, ("uuid", "score"), {"uuid": "uuid", "score": "score"})
        uuid = errors.str_field("DevicePairScore", "uuid", f.get("uuid"), "")
        raw_scores = f.get("score")
        scores: dict[str, int] = {}
        if isinstance(raw_scores, dict):
            for key, value in raw_scores.items():
                scores[key] = errors.int_field("DevicePairScore", "score", value, "int", *_INT64, 0)
        elif raw_scores is not None:
            errors.add("DevicePairScore", "score", raw_scores, "map[string]int")
        out.setdefault(uuid, scores)
    if errors.first is not None:
        raise HamiFormatError(errors.first)
    return out


def cordoned_devices(node_annotations: Mapping[str, str] | None) -> frozenset[str]:
    """``hami.io/device-cordon``: comma list of UUIDs, trimmed, empty entries skipped (device.go:698-713)."""
    raw = (node_annotations or {}).get(CORDON_ANNOTATION, "")
    return frozenset(u.strip() for u in raw.split(",") if u.strip())


def node_devices_from_annotations(
    node_annotations: Mapping[str, str],
) -> tuple[list[DeviceInfo], dict[str, dict[str, int]] | None]:
    """``GetNodeDevices``: the node's GPUs and its topology pair scores (``None`` without the annotation).

    Raises :class:`HamiFormatError` with HAMi's message when the node cannot be used ("annos not found
    hami.io/node-nvidia-register", "no gpu found on node", JSON errors).
    """
    raw = node_annotations.get(REGISTER_ANNOTATION)
    if raw is None:
        raise HamiFormatError("annos not found " + REGISTER_ANNOTATION)
    devices = decode_node_devices(raw)
    pair = node_annotations.get(PAIR_SCORE_ANNOTATION)
    return devices, (decode_pair_scores(pair) if pair is not None else None)


def encode_pod_devices(containers: Iterable[Iterable[ContainerDevice]]) -> str:
    """``EncodePodSingleDevice``: ``UUID,NVIDIA,mem,cores:`` per device, then ``;`` per container."""
    return "".join(
        "".join(f"{d.uuid},{d.type},{d.usedmem},{d.usedcores}:" for d in container) + ";" for container in containers
    )


def _decode_container(text: str) -> list[ContainerDevice]:
    if not text:
        return []
    out = []
    for entry in text.split(":"):
        if "," not in entry:
            continue  # anything without a comma is skipped silently, as in HAMi
        fields = entry.split(",")
        if len(fields) < 4:
            raise HamiFormatError("pod annotation format error, missing fields, do not use nodeName in task spec")
        try:
            mem = _go_parse_int(fields[2], 32)
        except _GoNumError as exc:
            raise HamiFormatError(f"invalid memory field: {exc}") from None
        try:
            cores = _go_parse_int(fields[3], 32)
        except _GoNumError as exc:
            raise HamiFormatError(f"invalid core field: {exc}") from None
        out.append(ContainerDevice(fields[0], fields[1], mem, cores))
    return out


def decode_pod_devices(annotation: str) -> list[list[ContainerDevice]]:
    """``DecodePodDevices`` for one device type: split on ``;`` keeping empty entries (index = position).

    A trailing ``;`` therefore yields one extra empty entry, as in HAMi.
    """
    return [_decode_container(part) for part in annotation.split(";")]


def pop_next_container_devices(to_allocate: str) -> tuple[int | None, list[ContainerDevice], str]:
    """The device plugin's ``Allocate`` step: take the first non-empty container entry and erase it.

    Returns (position, devices, new annotation value). The re-encoding keeps the decoded trailing empty entry,
    so each call adds one ``;`` as in HAMi. ``None`` when nothing is pending ("no pending device allocation
    found").
    """
    entries = decode_pod_devices(to_allocate)
    for i, devices in enumerate(entries):
        if devices:
            entries[i] = []
            return i, devices, encode_pod_devices(entries)
    return None, [], to_allocate


def encode_mig_allocations(containers: Sequence[Sequence[ContainerDevice]]) -> str | None:
    """``EncodeMigAllocations``: the MIG placements of a pod as JSON, or ``None`` when there are none."""
    items = []
    for ci, container in enumerate(containers):
        for di, d in enumerate(container):
            p = d.mig_placement
            if not d.mig_profile or p is None or p.size == 0:
                continue
            items.append(
                f'{{"containerIndex":{ci},"deviceIndex":{di},"gpuUUID":{_go_json_string(d.uuid)},'
                f'"profile":{_go_json_string(d.mig_profile)},"placement":{{"start":{p.start},"size":{p.size}}}}}'
            )
    return "[" + ",".join(items) + "]" if items else None


def decode_mig_allocations(annotation: str) -> list[MigAllocation]:
    """``DecodeMigAllocations`` with its validation messages (mig_allocations.go)."""
    if not annotation:
        return []
    data = _load_go_json(annotation)
    if data is None:
        return []
    if not isinstance(data, list):
        raise HamiFormatError(f"json: cannot unmarshal {_json_kind(data)} into Go value of type []nvidia.MigAllocation")
    errors = _TypeErrors()
    out: list[MigAllocation] = []
    seen: set[tuple[int, int]] = set()
    names = (
        "containerindex",
        "deviceindex",
        "gpuuuid",
        "profile",
        "placement",
        "miguuid",
        "gpuinstanceid",
        "computeinstanceid",
    )
    exact = {"containerIndex": "containerindex", "deviceIndex": "deviceindex", "gpuUUID": "gpuuuid"}
    exact |= {"profile": "profile", "placement": "placement", "migUUID": "miguuid"}
    exact |= {"gpuInstanceID": "gpuinstanceid", "computeInstanceID": "computeinstanceid"}
    for item in data:
        f = _fold_fields(item, names, exact) if isinstance(item, dict) else {}
        s = "MigAllocation"
        raw_place = f.get("placement")
        place = MigPlacement(0, 0)
        if isinstance(raw_place, dict):
            pf = _fold_fields(raw_place, ("start", "size"), {"start": "start", "size": "size"})
            place = MigPlacement(
                errors.int_field(s, "placement.start", pf.get("start"), "uint32", *_UINT32, 0),
                errors.int_field(s, "placement.size", pf.get("size"), "uint32", *_UINT32, 0),
            )
        gi = f.get("gpuinstanceid")
        ci = f.get("computeinstanceid")
        out.append(
            MigAllocation(
                container_index=errors.int_field(s, "containerIndex", f.get("containerindex"), "int", *_INT64, 0),
                device_index=errors.int_field(s, "deviceIndex", f.get("deviceindex"), "int", *_INT64, 0),
                gpu_uuid=errors.str_field(s, "gpuUUID", f.get("gpuuuid"), ""),
                profile=errors.str_field(s, "profile", f.get("profile"), ""),
                placement=place,
                mig_uuid=errors.str_field(s, "migUUID", f.get("miguuid"), ""),
                gpu_instance_id=None if gi is None else errors.int_field(s, "gpuInstanceID", gi, "uint32", *_UINT32, 0),
                compute_instance_id=None
                if ci is None
                else errors.int_field(s, "computeInstanceID", ci, "uint32", *_UINT32, 0),
            )
        )
    if errors.first is not None:
        raise HamiFormatError(errors.first)
    for i, a in enumerate(out):
        if a.container_index < 0 or a.device_index < 0 or not a.gpu_uuid or not a.profile or a.placement.size == 0:
            raise HamiFormatError(f"MIG allocation {i} is incomplete")
        runtime = (a.mig_uuid != "") + (a.gpu_instance_id is not None) + (a.compute_instance_id is not None)
        if runtime not in (0, 3):
            raise HamiFormatError(f"MIG allocation {i} has partial runtime identity")
        key = (a.container_index, a.device_index)
        if key in seen:
            raise HamiFormatError(f"duplicate MIG allocation for container {key[0]} device {key[1]}")
        seen.add(key)
    return out


def _unix(now: datetime | float) -> str:
    return str(int(now.timestamp()) if isinstance(now, datetime) else int(now))


def bind_annotations(
    node_name: str,
    devices: Sequence[Sequence[ContainerDevice]],
    now: datetime | float,
    *,
    bind_time: datetime | float | None = None,
    phase: str = BIND_SUCCESS,
) -> dict[str, str]:
    """The pod annotations HAMi has written once a pod is bound, from ``PodFit.hami_devices``.

    Filter writes ``hami.io/vgpu-node``, ``hami.io/vgpu-time`` (unix seconds) and the device list to both
    ``…-to-allocate`` and ``…-allocated`` (plus ``hami.io/vgpu-mig-allocations`` for MIG). Bind writes
    ``hami.io/bind-phase: allocating`` and ``hami.io/bind-time``. With the default ``phase="success"`` the
    device plugin's part is applied too: every container entry popped from ``…-to-allocate`` (one ``Allocate``
    call each, see :func:`pop_next_container_devices`) and the phase set to ``success``.
    """
    encoded = encode_pod_devices(devices)
    to_allocate = encoded
    if phase == BIND_SUCCESS:
        while True:
            index, _, erased = pop_next_container_devices(to_allocate)
            if index is None:
                break
            to_allocate = erased
    out = {
        ASSIGNED_NODE_ANNOTATION: node_name,
        ASSIGNED_TIME_ANNOTATION: _unix(now),
        TO_ALLOCATE_ANNOTATION: to_allocate,
        ALLOCATED_ANNOTATION: encoded,
        BIND_PHASE_ANNOTATION: phase,
        BIND_TIME_ANNOTATION: _unix(now if bind_time is None else bind_time),
    }
    mig = encode_mig_allocations(devices)
    if mig is not None:
        out[MIG_ALLOCATIONS_ANNOTATION] = mig
    return out


def register_device(
    uuid: str,
    index: int,
    memory_mib: int,
    model: str,
    *,
    numa: int = 0,
    healthy: bool | str = True,
    split_count: int = 10,
    memory_scaling: float = 1.0,
    core_scaling: float = 1.0,
    mode: str = MODE_HAMI_CORE,
    mig_profiles: tuple[MigProfile, ...] = (),
) -> DeviceInfo:
    """The ``DeviceInfo`` HAMi's device plugin registers for one GPU (register.go:92-207).

    ``devmem = int32(MiB × memory_scaling)`` and ``devcore = int32(core_scaling × 100)`` (both truncated, not
    applied in MIG mode), ``type = "NVIDIA-" + model`` unless the model already starts with ``NVIDIA``, health
    from the kubelet string compared case-insensitively with ``Healthy``; in MIG mode ``count`` is the largest
    profile instance count, passed here as ``split_count``.
    """
    mig = mode == MODE_MIG
    devmem = int(float(memory_mib) * memory_scaling) if memory_scaling != 1 and not mig else memory_mib
    devcore = 100 if mig else int(core_scaling * 100)
    health = healthy.lower() == "healthy" if isinstance(healthy, str) else healthy
    return DeviceInfo(
        id=uuid,
        index=index,
        count=split_count,
        devmem=_i32(devmem),
        devcore=_i32(devcore),
        type=model if model.startswith("NVIDIA") else f"NVIDIA-{model}",
        numa=numa,
        health=health,
        mode=mode,
        mig_profiles=mig_profiles,
    )


# --------------------------------------------------------------------------------------------------------------
# Section 2: usage rebuilt from bound pods
# --------------------------------------------------------------------------------------------------------------


def collapse_pod_usage(
    devices: Sequence[Sequence[ContainerDevice]], num_init: int, *, init_done: bool = False
) -> list[ContainerDevice]:
    """A pod's effective usage per GPU, sorted by UUID (``CollapseInitContainerUsage``, initContainer.go).

    Positions below ``num_init`` are init containers: they contribute their peak memory and cores and one slot.
    The others are app containers: summed, one slot per occurrence. The result is ``max(init, app)`` per field,
    at least one slot. ``init_done`` gives ``AppContainersOnlyDeviceUsage``, which HAMi switches to once every
    init container exited 0.
    """
    init_peak: dict[str, list[int]] = {}
    app_sum: dict[str, list[int]] = {}
    for ci, container in enumerate(devices):
        is_init = ci < num_init
        if is_init and init_done:
            continue
        for d in container:
            if is_init:
                cur = init_peak.setdefault(d.uuid, [0, 0, 0])
                cur[0] = max(cur[0], d.usedmem)
                cur[1] = max(cur[1], d.usedcores)
                cur[2] = 1
            else:
                cur = app_sum.setdefault(d.uuid, [0, 0, 0])
                cur[0] += d.usedmem
                cur[1] += d.usedcores
                cur[2] += 1
    out = []
    for uuid in sorted(init_peak.keys() | app_sum.keys()):
        i = init_peak.get(uuid, [0, 0, 0])
        a = app_sum.get(uuid, [0, 0, 0])
        out.append(ContainerDevice(uuid, NVIDIA, max(i[0], a[0]), max(i[1], a[1]), slots=max(i[2], a[2], 1)))
    return out


def pod_quota_usage(devices: Sequence[Sequence[ContainerDevice]], num_init: int) -> tuple[int, int]:
    """The memory and cores HAMi's quota manager charges a bound pod (collapsed usage, summed)."""
    collapsed = collapse_pod_usage(devices, num_init)
    return sum(d.usedmem for d in collapsed), sum(d.usedcores for d in collapsed)


@dataclass(slots=True, frozen=True)
class PodAllocation:
    """What one bound pod holds on a node: the decoded ``hami.io/vgpu-devices-allocated`` list and context."""

    devices: tuple[tuple[ContainerDevice, ...], ...]
    num_init: int = 0
    #: All init containers exited 0 and HAMi has shrunk the pod to its app containers (scheduler.go:205-223).
    init_done: bool = False
    mig_allocations: tuple[MigAllocation, ...] = ()

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> PodAllocation | None:
        """The allocation of a pod object, or ``None`` when HAMi does not count it.

        HAMi counts pods with ``hami.io/vgpu-node`` that are not Succeeded/Failed and whose annotation decodes.
        ``init_done`` follows ``AllInitContainersSucceeded``; note HAMi only applies that shrink on a pod update
        event, so a scheduler that just restarted counts the init peak until the pod next changes.
        """
        meta = pod.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        if ASSIGNED_NODE_ANNOTATION not in annotations:
            return None
        status = pod.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            return None
        try:
            raw = annotations.get(ALLOCATED_ANNOTATION)
            devices = tuple(tuple(c) for c in decode_pod_devices(raw)) if raw is not None else ()
        except HamiFormatError:
            return None  # HAMi logs the decode error and does not track the pod
        try:
            mig = tuple(decode_mig_allocations(annotations.get(MIG_ALLOCATIONS_ANNOTATION, "")))
        except HamiFormatError:
            mig = ()  # an unreadable MIG annotation is ignored (getNodesUsage)
        statuses = status.get("initContainerStatuses") or []
        init_done = bool(statuses) and all(_terminated_ok(s) for s in statuses)
        spec = pod.get("spec") or {}
        return cls(devices, len(spec.get("initContainers") or []), init_done, mig)


def _terminated_ok(status: Mapping[str, Any]) -> bool:
    terminated = (status.get("state") or {}).get("terminated")
    return terminated is not None and (terminated.get("exitCode") or 0) == 0


def node_usage(devices: Sequence[DeviceInfo], allocations: Iterable[PodAllocation]) -> list[DeviceUsage]:
    """Per-GPU usage of a node from the pods bound to it (``getNodesUsage``, scheduler.go:744-863).

    Each pod is collapsed (:func:`collapse_pod_usage`); a UUID the node does not have is ignored. MIG
    reservations from ``hami.io/vgpu-mig-allocations`` become occupied placements; a MIG reservation on a
    ``hami-core`` GPU, or a MIG GPU used without one, marks the GPU unhealthy as HAMi does.
    """
    used = [0] * len(devices)
    mem = [0] * len(devices)
    cores = [0] * len(devices)
    health = [d.health for d in devices]
    mig: list[list[MigPlacement]] = [[] for _ in devices]
    positions: dict[str, list[int]] = {}
    for i, d in enumerate(devices):
        positions.setdefault(d.id, []).append(i)
    for alloc in allocations:
        by_gpu: dict[str, list[MigAllocation]] = {}
        for m in alloc.mig_allocations:
            by_gpu.setdefault(m.gpu_uuid, []).append(m)
        for entry in collapse_pod_usage(alloc.devices, alloc.num_init, init_done=alloc.init_done):
            for i in positions.get(entry.uuid, ()):
                used[i] += max(entry.slots, 1)
                mem[i] += entry.usedmem
                cores[i] += entry.usedcores
                pending = by_gpu.get(entry.uuid)
                if pending:
                    if devices[i].mode == MODE_HAMI_CORE:
                        health[i] = False
                        continue
                    mig[i].append(pending.pop(0).placement)
                    continue
                if devices[i].mode == MODE_MIG:
                    health[i] = False
        for uuid, pending in by_gpu.items():
            if not pending:
                continue
            where = positions.get(uuid)
            if where is None:
                for i, d in enumerate(devices):
                    if d.mode == MODE_MIG:
                        health[i] = False
                continue
            i = where[0]
            if devices[i].mode != MODE_MIG:
                health[i] = False
            else:
                mig[i].extend(m.placement for m in pending)
    out = []
    for i, d in enumerate(devices):
        info = d if health[i] == d.health else _with_health(d, health[i])
        out.append(DeviceUsage(info, used[i], mem[i], cores[i], tuple(mig[i])))
    return out


def _with_health(d: DeviceInfo, health: bool) -> DeviceInfo:
    return DeviceInfo(d.id, d.index, d.count, d.devmem, d.devcore, d.type, d.numa, health, d.mode, d.mig_profiles)


# --------------------------------------------------------------------------------------------------------------
# Pod annotations that steer scheduling
# --------------------------------------------------------------------------------------------------------------


def parse_scoring_weights(value: str) -> ScoringWeights:
    """``ParseDeviceScoringWeights``: ``slot=a,core=b,memory=c``, all three, integers >= 0, not all zero."""
    head = f"invalid {SCORING_WEIGHTS_ANNOTATION} annotation {_go_quote(value)}:"
    parts = value.split(",")
    if len(parts) != 3:
        raise HamiSchedulingError(f"{head} expected slot, core, and memory weights")
    weights = {"slot": 0, "core": 0, "memory": 0}
    seen: set[str] = set()
    for part in parts:
        kv = part.strip().split("=", 1)
        if len(kv) != 2:
            raise HamiSchedulingError(f"{head} expected key=value entries")
        key = kv[0].strip()
        if key in seen:
            raise HamiSchedulingError(f"{head} duplicate {_go_quote(key)} weight")
        try:
            weight = _go_parse_int(kv[1].strip(), 64)
        except _GoNumError:
            raise HamiSchedulingError(f"{head} {_go_quote(key)} weight must be an integer") from None
        if weight < 0:
            raise HamiSchedulingError(f"{head} {_go_quote(key)} weight must not be negative")
        if key not in weights:
            raise HamiSchedulingError(f"{head} unknown weight {_go_quote(key)}")
        weights[key] = weight
        seen.add(key)
    if not any(weights.values()):
        raise HamiSchedulingError(f"{head} at least one weight must be positive")
    return ScoringWeights(weights["slot"], weights["core"], weights["memory"])


def _policy_contains(policy: str, name: str) -> bool:
    """``util.PolicyContains``: comma list, trimmed, exact token."""
    return any(p.strip() == name for p in policy.split(","))


@dataclass(slots=True, frozen=True)
class PodSelectors:
    """A pod's scheduling annotations, parsed once (device.go:40-64, devices.go:693-738, util/types.go)."""

    use_types: tuple[str, ...] | None = None
    nouse_types: tuple[str, ...] | None = None
    use_uuids: frozenset[str] | None = None
    nouse_uuids: frozenset[str] | None = None
    numa_bind: bool = False
    vgpu_mode: str | None = None
    gpu_policy: str = POLICY_SPREAD
    node_policy: str = POLICY_BINPACK
    weights: ScoringWeights = _DEFAULT_WEIGHTS
    #: A bad ``hami.io/device-scoring-weights`` makes HAMi's Filter fail for the pod; the message is kept here.
    weights_error: str | None = None
    _type_cache: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str] | None, cfg: HamiConfig = DEFAULT_CONFIG) -> PodSelectors:
        annos = annotations or {}

        def types(key: str) -> tuple[str, ...] | None:
            raw = annos.get(key)
            if raw is None or not raw.strip():
                return None  # an empty value means "no constraint"
            return tuple(t.strip().upper() for t in raw.split(",") if t.strip())

        def uuids(key: str) -> frozenset[str] | None:
            raw = annos.get(key)
            if raw is None or not raw.strip():
                return None
            return frozenset(u.strip() for u in raw.split(","))

        weights, error = _DEFAULT_WEIGHTS, None
        if SCORING_WEIGHTS_ANNOTATION in annos:
            try:
                weights = parse_scoring_weights(annos[SCORING_WEIGHTS_ANNOTATION])
            except HamiSchedulingError as exc:
                error = str(exc)
        return cls(
            use_types=types(USE_GPUTYPE_ANNOTATION),
            nouse_types=types(NOUSE_GPUTYPE_ANNOTATION),
            use_uuids=uuids(USE_GPUUUID_ANNOTATION),
            nouse_uuids=uuids(NOUSE_GPUUUID_ANNOTATION),
            numa_bind=_parse_bool_true(annos.get(NUMA_BIND_ANNOTATION)),
            vgpu_mode=annos.get(VGPU_MODE_ANNOTATION),
            gpu_policy=annos.get(GPU_POLICY_ANNOTATION, cfg.gpu_policy),
            node_policy=annos.get(NODE_POLICY_ANNOTATION, cfg.node_policy),
            weights=weights,
            weights_error=error,
        )

    def type_ok(self, card_type: str) -> bool:
        """F3's type part: ``use-gputype`` / ``nouse-gputype`` as case-insensitive substrings."""
        cached = self._type_cache.get(card_type)
        if cached is None:
            upper = card_type.upper()
            cached = not (
                (self.use_types is not None and not any(t in upper for t in self.use_types))
                or (self.nouse_types is not None and any(t in upper for t in self.nouse_types))
            )
            self._type_cache[card_type] = cached
        return cached

    def mode_ok(self, mode: str) -> bool:
        """F3's mode part: ``nvidia.com/vgpu-mode`` must contain the device mode (an empty mode always does)."""
        return self.vgpu_mode is None or mode in self.vgpu_mode

    def uuid_ok(self, uuid: str) -> bool:
        """F5: ``use-gpuuuid`` / ``nouse-gpuuuid``, exact match after trimming."""
        if self.use_uuids is not None and uuid not in self.use_uuids:
            return False
        return not (self.nouse_uuids is not None and uuid in self.nouse_uuids)


@dataclass(slots=True, frozen=True)
class PreparedPod:
    """A pod reduced to what the scheduler uses; build once with :func:`prepare_pod` and reuse."""

    requests: tuple[ContainerRequest | None, ...]
    num_init: int
    selectors: PodSelectors

    @property
    def has_request(self) -> bool:
        return any(r is not None for r in self.requests)


def prepare_pod(
    pod_spec: Mapping[str, Any],
    pod_annotations: Mapping[str, str] | None = None,
    cfg: HamiConfig = DEFAULT_CONFIG,
    *,
    webhook: bool = True,
) -> PreparedPod:
    """Requests (after the webhook's defaults unless ``webhook=False``), init count and parsed annotations.

    The placement engine sees pod templates as users wrote them; HAMi's webhook turns a bare
    ``nvidia.com/gpu: 1`` into an exclusive card before scheduling, so the webhook is applied by default.
    """
    requests = _webhook_requests(pod_spec, cfg) if webhook else pod_requests(pod_spec, cfg)
    num_init = len(pod_spec.get("initContainers") or [])
    return PreparedPod(tuple(requests), num_init, PodSelectors.from_annotations(pod_annotations, cfg))


# --------------------------------------------------------------------------------------------------------------
# Quota (F8)
# --------------------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------------------
# Section 4: device scores and device order
# --------------------------------------------------------------------------------------------------------------

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
# Section 3: Fit
# --------------------------------------------------------------------------------------------------------------


def gen_reason(reasons: Mapping[str, int], cards: int) -> str:
    """``GenReason``: ``"<n>/<cards> <Reason>"`` entries sorted as strings, joined with ``", "``."""
    return ", ".join(sorted(f"{count}/{cards} {reason}" for reason, count in reasons.items()))


def parse_reason(reason: str) -> dict[str, int]:
    """``ParseReason``: the counts per reason name of a :func:`gen_reason` string (others are skipped)."""
    out: dict[str, int] = {}
    for part in reason.split(", "):
        m = re.match(r"\s*([+-]?\d+)/\s*[+-]?\d+\s+(\S+)", part)
        if m:
            out[m.group(2)] = int(m.group(1))
    return out


def filter_failure_messages(failed_nodes: Mapping[str, str]) -> list[str]:
    """The ``FilteringFailed`` event texts HAMi records: ``"<n> nodes <Reason>(<node>,...)"`` per reason name."""
    by_reason: dict[str, list[str]] = {}
    for node, reason in failed_nodes.items():
        for name in parse_reason(reason):
            by_reason.setdefault(name, []).append(node)
    return [f"{len(nodes)} nodes {name}({','.join(sorted(nodes))})" for name, nodes in sorted(by_reason.items())]


def _mig_candidate(
    profiles: Sequence[MigProfile], occupied: Sequence[MigPlacement], memory: int
) -> tuple[MigProfile, MigPlacement] | None:
    """``selectMigCandidate``: the smallest profile with enough memory that has a free placement."""
    for profile in sorted(profiles, key=lambda p: (p.memory_mb, p.slice_count)):
        if profile.memory_mb < memory:
            continue
        named = next((p for p in profiles if p.name == profile.name), None)
        if named is None:
            continue
        high_first = named.name.startswith(("1g.", "3g."))
        placements = sorted(named.placements or (), key=lambda x: -x.start if high_first else x.start)
        for cand in placements:
            if cand.size == 0:
                continue  # a zero-size placement never overlaps: HAMi would revisit the GPU forever
            if all(not (cand.start < o.start + o.size and o.start < cand.start + cand.size) for o in occupied):
                return profile, cand
    return None


def _mig_filter(d: DeviceUsage, memreq: int, collected: Sequence[ContainerDevice]) -> bool:
    """F13 ``CustomFilterRule`` for a MIG GPU: earlier picks on the same GPU and this one all get a placement."""
    profiles = d.info.mig_profiles
    occupied = list(d.mig_in_use)
    for existing in collected:
        if existing.uuid != d.info.id:
            continue
        picked = _mig_candidate(profiles, occupied, existing.usedmem)
        if picked is None:
            return False
        occupied.append(picked[1])
    return _mig_candidate(profiles, occupied, memreq) is not None


@dataclass(slots=True)
class _PodCtx:
    """Per-pod scheduling context: requests, selectors and the policy flags Fit reads."""

    requests: tuple[ContainerRequest | None, ...]
    num_init: int
    sel: PodSelectors
    gpu_policy: str
    mutex: bool
    topology: bool
    cfg: HamiConfig

    @classmethod
    def of(cls, prepared: PreparedPod, cfg: HamiConfig) -> _PodCtx:
        policy = prepared.selectors.gpu_policy
        return cls(
            prepared.requests,
            prepared.num_init,
            prepared.selectors,
            policy,
            _policy_contains(policy, POLICY_MUTEX),
            _policy_contains(policy, POLICY_TOPOLOGY),
            cfg,
        )


@dataclass(slots=True, frozen=True)
class _NodeCtx:
    """What Fit needs from the node object besides its devices."""

    name: str
    cordoned: frozenset[str] = frozenset()
    pair_scores: Mapping[str, Mapping[str, int]] | None = None
    #: HAMi pads its per-container device list only for node device types equal to "NVIDIA" (see _score_node).
    pad: bool = False

    @classmethod
    def of(cls, name: str, devices: Sequence[DeviceUsage], annotations: Mapping[str, str] | None) -> _NodeCtx:
        pair = (annotations or {}).get(PAIR_SCORE_ANNOTATION)
        return cls(
            name,
            cordoned_devices(annotations),
            decode_pair_scores(pair) if pair is not None else None,
            any(d.info.type == NVIDIA for d in devices),
        )


def _fit_container(
    devices: Sequence[DeviceUsage],
    req: ContainerRequest,
    ctx: _PodCtx,
    node: _NodeCtx,
    allocated: Sequence[Sequence[ContainerDevice]],
    quota: NamespaceQuota | None,
) -> tuple[bool, list[ContainerDevice], str]:
    """``(*NvidiaGPUDevices).Fit`` (device.go:715-876) over type-filtered, sorted devices."""
    sel = ctx.sel
    orig = nums = req.nums
    coresreq = req.coresreq
    is_nvidia = req.type == NVIDIA
    numa_bind = is_nvidia and sel.numa_bind
    mutex, topology = ctx.mutex, ctx.topology
    cordoned = node.cordoned
    prevnuma = -1
    collected: list[ContainerDevice] = []
    reasons: dict[str, int] = {}
    i = len(devices) - 1
    while i >= 0:
        d = devices[i]
        info = d.info
        reason: str | None = None
        memreq = 0
        if not info.health:
            reason = CARD_NOT_HEALTH
        elif info.id in cordoned:
            reason = CARD_CORDONED
        elif not (is_nvidia and sel.type_ok(info.type) and sel.mode_ok(info.mode)):
            reason = CARD_TYPE_MISMATCH
        else:
            if numa_bind and prevnuma != info.numa:
                if nums != orig:
                    reasons[NUMA_NOT_FIT] = reasons.get(NUMA_NOT_FIT, 0) + len(collected)
                nums = orig
                prevnuma = info.numa
                collected = []
            if not sel.uuid_ok(info.id):
                reason = CARD_UUID_MISMATCH
            elif info.count <= d.used:
                reason = CARD_TIME_SLICING_EXHAUSTED
            elif mutex and d.used > 0:
                reason = EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT
            else:
                coresreq = min(coresreq, 100)
                if req.memreq > 0:
                    memreq = req.memreq
                elif req.mem_percentage != 101:
                    memreq = _percent_of(info.devmem, req.mem_percentage)
                if quota is not None and not _fit_quota(ctx, collected, allocated, info.id, memreq, coresreq, quota):
                    reason = RESOURCE_QUOTA_NOT_FIT
                elif info.devmem - d.usedmem < memreq:
                    reason = CARD_INSUFFICIENT_MEMORY
                elif info.devcore - d.usedcores < coresreq:
                    reason = CARD_INSUFFICIENT_CORE
                elif info.devcore == 100 and coresreq == 100 and d.used > 0:
                    reason = EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT
                elif info.devcore != 0 and d.usedcores == info.devcore and coresreq == 0:
                    reason = CARD_COMPUTE_UNITS_EXHAUSTED
                elif info.mode == MODE_MIG and not _mig_filter(d, memreq, collected):
                    reason = CARD_MIG_TOPOLOGY_INFEASIBLE
        if reason is not None:
            reasons[reason] = reasons.get(reason, 0) + 1
            i -= 1
            continue
        if nums > 0:
            if not topology:
                nums -= 1
            collected.append(ContainerDevice(info.id, req.type, memreq, coresreq, index=info.index))
        if nums == 0 and not topology:
            return True, collected, ""
        if info.mode != MODE_MIG:  # a MIG GPU is revisited for another instance (846-848)
            i -= 1
    if topology:
        if len(collected) == orig:
            return True, collected, ""
        if len(collected) > orig:
            pair = node.pair_scores or {}
            if orig == 1:
                return True, _worst_single_card(collected, pair), ""
            return True, _best_combination(collected, orig, pair), ""
    if collected:
        reasons[ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = len(collected)
    return False, collected, gen_reason(reasons, len(devices))


def _worst_single_card(
    candidates: Sequence[ContainerDevice], pair: Mapping[str, Mapping[str, int]]
) -> list[ContainerDevice]:
    """``computeWorstSingleCard``: the candidate with the lowest summed pair score; first one wins ties."""
    best: ContainerDevice | None = None
    best_score = 0
    for a in candidates:
        scores = pair.get(a.uuid, {})
        total = sum(scores.get(b.uuid, 0) for b in candidates if b.uuid != a.uuid)
        if best is None or total < best_score:
            best, best_score = a, total
    return [best] if best is not None else []


def _best_combination(
    candidates: Sequence[ContainerDevice], nums: int, pair: Mapping[str, Mapping[str, int]]
) -> list[ContainerDevice]:
    """``computeBestCombination``: the highest summed pairwise score, combinations in candidate order."""
    best: tuple[ContainerDevice, ...] = ()
    best_score = -1
    found = False
    for combo in itertools.combinations(candidates, nums):
        total = 0
        for x in range(len(combo) - 1):
            scores = pair.get(combo[x].uuid, {})
            for y in range(x + 1, len(combo)):
                total += scores.get(combo[y].uuid, 0)
        if not found or total > best_score:
            found, best, best_score = True, combo, total
    return list(best)


def _fit_quota(
    ctx: _PodCtx,
    collected: Sequence[ContainerDevice],
    allocated: Sequence[Sequence[ContainerDevice]],
    uuid: str,
    memreq: int,
    coresreq: int,
    quota: NamespaceQuota,
) -> bool:
    """``fitQuota`` (device.go:666-692): the pod so far plus this device, collapsed, against the quota.

    HAMi passes the list of the current phase (init containers, or app containers) and collapses it with the
    pod's init-container count, so for app containers positions below that count are taken as init containers;
    kept as is.
    """
    hypo = [*allocated, [*collected, ContainerDevice(uuid, NVIDIA, memreq, coresreq)]]
    collapsed = collapse_pod_usage(hypo, ctx.num_init)
    mem = sum(d.usedmem for d in collapsed)
    cores = sum(d.usedcores for d in collapsed)
    return quota.fits(mem, cores, ctx.cfg.memory_factor)


_NVIDIA_TYPE_CACHE: dict[str, bool] = {}


def _is_nvidia_type(card_type: str) -> bool:
    """``getNodeResources``' filter: the device type contains the request type ``NVIDIA``, case-insensitively."""
    known = _NVIDIA_TYPE_CACHE.get(card_type)
    if known is None:
        known = "nvidia" in card_type.lower()
        if len(_NVIDIA_TYPE_CACHE) < 4096:
            _NVIDIA_TYPE_CACHE[card_type] = known
    return known


def _fit_in_devices(
    work: list[DeviceUsage],
    req: ContainerRequest,
    ctx: _PodCtx,
    node: _NodeCtx,
    allocated: Sequence[Sequence[ContainerDevice]],
    quota: NamespaceQuota | None,
) -> tuple[bool, str, list[ContainerDevice]]:
    """``fitInDevices`` (score.go:81-137): score, sort, type filter, Fit, then ``AddResourceUsage``.

    ``work`` is the node's device list for this phase; it is reordered and its touched devices are replaced
    by new :class:`DeviceUsage` values, so the next container sees the usage and the order, as in HAMi.
    """
    weights = ctx.sel.weights
    scores = [_score(d, *_request_terms(d, req), weights) for d in work]
    work[:] = sort_devices(work, scores, ctx.gpu_policy, ctx.sel.numa_bind)
    typed = [d for d in work if _is_nvidia_type(d.info.type)]
    if req.nums > len(typed) and not _is_mig_request(req, typed, ctx.sel):
        return False, NODE_INSUFFICIENT_DEVICE, []
    ok, got, reason = _fit_container(typed, req, ctx, node, allocated, quota)
    if not ok:
        return False, reason, got
    for k, taken in enumerate(got):
        idx = next(j for j, d in enumerate(work) if d.info.id == taken.uuid)
        d = work[idx]
        mig = d.mig_in_use
        cd = taken
        if d.info.mode == MODE_MIG:
            picked = _mig_candidate(d.info.mig_profiles, mig, cd.usedmem)
            if picked is None:
                message = "MIG profile and placement allocation failed"
                return False, f"AddResourceUsage failed for device {d.info.id}: {message}", got
            profile, placement = picked
            cd = ContainerDevice(
                cd.uuid, cd.type, profile.memory_mb, profile.core, cd.index, 0, profile.name, placement
            )
            got[k] = cd
            mig = (*mig, placement)
        work[idx] = DeviceUsage(d.info, d.used + 1, d.usedmem + cd.usedmem, d.usedcores + cd.usedcores, mig)
    return True, "", got


def _is_mig_request(req: ContainerRequest, devices: Sequence[DeviceUsage], sel: PodSelectors) -> bool:
    """``isMIGRequest`` (score.go:54-69): a MIG request may exceed the GPU count (several instances per GPU)."""
    if req.type != NVIDIA:
        return False
    if sel.vgpu_mode is not None and MODE_MIG not in sel.vgpu_mode:
        return False
    return any(d.info.mode == MODE_MIG for d in devices)


def fit_container(
    devices: Sequence[DeviceUsage],
    request: ContainerRequest,
    pod_annotations: Mapping[str, str] | None = None,
    cfg: HamiConfig = DEFAULT_CONFIG,
    *,
    node_annotations: Mapping[str, str] | None = None,
    quota: NamespaceQuota | None = None,
    allocated: Sequence[Sequence[ContainerDevice]] = (),
    num_init: int = 0,
) -> tuple[bool, list[ContainerDevice], str]:
    """HAMi's ``Fit`` alone, over ``devices`` already in sorted order: (ok, devices taken, GenReason string).

    This is what HAMi's own ``TestDevices_Fit`` exercises; :func:`fit_pod` adds the scoring, sorting, type
    filter and per-container usage bookkeeping around it.
    """
    sel = PodSelectors.from_annotations(pod_annotations, cfg)
    ctx = _PodCtx.of(PreparedPod((request,), num_init, sel), cfg)
    node = _NodeCtx.of("", devices, node_annotations)
    return _fit_container(devices, request, ctx, node, allocated, quota)


@dataclass(slots=True)
class PodFit:
    """The outcome of fitting one pod onto one node (``scoreNode``).

    ``devices`` has one list per container (init first, ``[]`` without a request). ``hami_devices`` is the list
    HAMi encodes into the pod annotations: it only carries empty entries for request-less containers when a
    device on the node is typed exactly ``NVIDIA`` (HAMi pads by the node's device type names), so with real
    ``NVIDIA-<model>`` types those containers are skipped and positions shift.
    """

    ok: bool
    devices: list[list[ContainerDevice]]
    hami_devices: list[list[ContainerDevice]]
    reason: str = ""
    node_score: float = 0.0
    failed_container: int | None = None


def _score_node(
    node: _NodeCtx,
    devices: Sequence[DeviceUsage],
    ctx: _PodCtx,
    quota: NamespaceQuota | None,
    score: float | None = None,
) -> PodFit:
    """``scoreNode`` (score.go:294-346): init containers on fresh copies, app containers on one shared copy."""
    requests = ctx.requests
    num_init = ctx.num_init
    per_container: list[list[ContainerDevice]] = []
    init_list: list[list[ContainerDevice]] = []
    for ci in range(num_init):
        req = requests[ci]
        if req is None:
            per_container.append([])
            if node.pad:
                init_list.append([])
            continue
        ok, reason, got = _fit_in_devices(list(devices), req, ctx, node, init_list, quota)
        if not ok:
            return PodFit(False, per_container, init_list, reason, failed_container=ci)
        per_container.append(got)
        init_list.append(got)
    if score is None:
        score = node_score(devices)
    work = list(devices)
    app_list: list[list[ContainerDevice]] = []
    for ci in range(num_init, len(requests)):
        req = requests[ci]
        if req is None:
            per_container.append([])
            if node.pad:
                app_list.append([])
            continue
        ok, reason, got = _fit_in_devices(work, req, ctx, node, app_list, quota)
        if not ok:
            return PodFit(False, per_container, init_list + app_list, reason, score, failed_container=ci)
        per_container.append(got)
        app_list.append(got)
    return PodFit(True, per_container, init_list + app_list, "", score)


def fit_pod(
    usage: Sequence[DeviceUsage],
    requests: Sequence[ContainerRequest | None],
    pod_annotations: Mapping[str, str] | None = None,
    cfg: HamiConfig = DEFAULT_CONFIG,
    *,
    num_init: int = 0,
    node_annotations: Mapping[str, str] | None = None,
    quota: NamespaceQuota | None = None,
) -> PodFit:
    """Fit one pod onto one node as HAMi's ``scoreNode`` does; ``requests`` as from :func:`pod_requests`.

    ``num_init`` is the number of init containers at the front of ``requests``. ``node_annotations`` supplies
    ``hami.io/device-cordon`` and the topology pair scores. Raises :class:`HamiSchedulingError` for an invalid
    ``hami.io/device-scoring-weights`` (HAMi's Filter errors out for the whole pod).
    """
    sel = PodSelectors.from_annotations(pod_annotations, cfg)
    if sel.weights_error is not None:
        raise HamiSchedulingError(sel.weights_error)
    ctx = _PodCtx.of(PreparedPod(tuple(requests), num_init, sel), cfg)
    return _score_node(_NodeCtx.of("", usage, node_annotations), usage, ctx, quota)


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


@dataclass(slots=True)
class ScheduleResult:
    """HAMi's Filter for one pod over a set of nodes."""

    node: str | None
    fit: PodFit | None
    failed_nodes: dict[str, str]
    scores: dict[str, float]
    #: The pod has no HAMi request: HAMi passes it through with every node.
    passthrough: bool = False


def schedule_pod(
    nodes: Mapping[str, Sequence[DeviceUsage]],
    pod: Mapping[str, Any],
    cfg: HamiConfig = DEFAULT_CONFIG,
    *,
    node_annotations: Mapping[str, Mapping[str, str]] | None = None,
    quota: NamespaceQuota | None = None,
) -> ScheduleResult:
    """HAMi's ``Filter`` (scheduler.go:1067-1154) for a pod object already mutated by the webhook.

    Every node is fitted (:func:`fit_pod` semantics); failed nodes keep their reason; the chosen node follows
    :func:`choose_node` with the pod's node policy. Write the annotations with :func:`bind_annotations`
    (``result.fit.hami_devices``) and add the pod's usage with :class:`PodAllocation`.
    """
    spec = pod.get("spec") or {}
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    prepared = prepare_pod(spec, annotations, cfg, webhook=False)
    if not prepared.has_request:
        return ScheduleResult(None, None, {}, {}, passthrough=True)
    if prepared.selectors.weights_error is not None:
        raise HamiSchedulingError(prepared.selectors.weights_error)
    ctx = _PodCtx.of(prepared, cfg)
    failed: dict[str, str] = {}
    scores: dict[str, float] = {}
    fits: dict[str, PodFit] = {}
    for name, devices in nodes.items():
        node = _NodeCtx.of(name, devices, (node_annotations or {}).get(name))
        fit = _score_node(node, devices, ctx, quota)
        if fit.ok:
            scores[name] = fit.node_score
            fits[name] = fit
        else:
            failed[name] = fit.reason
    chosen = choose_node(scores, prepared.selectors.node_policy)
    return ScheduleResult(chosen, fits.get(chosen) if chosen else None, failed, scores)


# --------------------------------------------------------------------------------------------------------------
# Section 6: health
# --------------------------------------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class HandshakeCheck:
    """The outcome of ``device.CheckHealth``: healthy, changed, and the handshake value to write (if any)."""

    healthy: bool
    changed: bool
    write: str | None = None


def _local_naive(now: datetime) -> datetime:
    return now.astimezone().replace(tzinfo=None) if now.tzinfo is not None else now


_GO_DATETIME_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:[.,]\d+)?")


def check_handshake(annotation: str | None, now: datetime, allocatable_gpus: int) -> HandshakeCheck:
    """``device.CheckHealth`` (devices.go:576-615) on ``hami.io/node-handshake``.

    Without ``Requesting`` the scheduler writes ``Requesting_<local time.DateTime>`` and the node is healthy
    (changed). With it: no ``_``, an unparsable time or one less than 60 s old is healthy; older is healthy only
    while the node's allocatable ``nvidia.com/gpu`` is above 0. ``now`` is local time (naive) or aware.
    """
    value = annotation or ""
    local = _local_naive(now)
    if "Requesting" in value:
        _, sep, stamp = value.partition("_")
        if not sep:
            return HandshakeCheck(True, False)
        m = _GO_DATETIME_RE.fullmatch(stamp)
        if m is None:
            return HandshakeCheck(True, False)
        try:
            y, mo, d, h, mi, sec = (int(g) for g in m.groups()[:6])
            former = datetime(y, mo, d, h, mi, sec)
        except ValueError:
            return HandshakeCheck(True, False)
        if local < former + _HANDSHAKE_TIMEOUT:
            return HandshakeCheck(True, False)
        return HandshakeCheck(allocatable_gpus > 0, False)
    return HandshakeCheck(True, True, "Requesting_" + local.strftime(_GO_DATETIME))


class NvidiaHealthTracker:
    """The NVIDIA backend's node health check (device.go:234-272), with its per-node memory.

    An unhealthy result means HAMi runs ``NodeCleanUp`` (removes ``hami.io/node-handshake``) and drops the
    node's NVIDIA devices from its cache. Call :meth:`node_deleted` when a node goes away.
    """

    def __init__(self) -> None:
        self.reported_gpus: dict[str, int] = {}
        self.reported_register: dict[str, str] = {}

    def check(
        self,
        node_name: str,
        annotations: Mapping[str, str],
        allocatable_gpus: int,
        now: datetime,
    ) -> HandshakeCheck:
        reported = self.reported_gpus.get(node_name, 0)
        handshake = check_handshake(annotations.get(HANDSHAKE_ANNOTATION), now, allocatable_gpus)
        register = annotations.get(REGISTER_ANNOTATION, "")
        if allocatable_gpus == 0:
            if reported == 0:
                return handshake
            self.reported_gpus[node_name] = 0
            self.reported_register[node_name] = register
            return HandshakeCheck(False, handshake.changed, handshake.write)
        if reported != allocatable_gpus:
            self.reported_gpus[node_name] = allocatable_gpus
            self.reported_register[node_name] = register
            return HandshakeCheck(True, True, handshake.write)
        if self.reported_register.get(node_name, "") != register:
            self.reported_register[node_name] = register
            return HandshakeCheck(handshake.healthy, True, handshake.write)
        return handshake

    def node_deleted(self, node_name: str) -> None:
        self.reported_gpus.pop(node_name, None)
        self.reported_register.pop(node_name, None)


# --------------------------------------------------------------------------------------------------------------
# The placement engine: cheap node summaries and pod-set placement
# --------------------------------------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class NodeSummary:
    """A cheap per-node digest to skip nodes that cannot fit before running the exact Fit.

    ``free`` lists, for every GPU that could take anything at all (NVIDIA-typed, healthy, not cordoned, a free
    vGPU slot), ``(free_mem, free_cores, used, devmem, devcore, usedcores)``. :meth:`fitting_gpus` counts the
    GPUs that pass HAMi's checks F1, F2, F6, F7 and F9-F12 for a request; those checks do not depend on the pod's
    annotations, so ``fitting_gpus(req) < req.nums`` proves the container (and so the pod) cannot fit there.
    The reverse is not a proof: type/UUID selectors, NUMA binding, quota, MIG and earlier containers of the same
    pod can still refuse, which is why the exact :func:`fit_pod` runs afterwards. Nodes with MIG GPUs are never
    skipped (``may_fit`` is always true there).
    """

    gpus: int
    free: tuple[tuple[int, int, int, int, int, int], ...]
    max_free_mem: int
    max_free_cores: int
    idle_gpus: int
    has_mig: bool
    #: ``fitting_gpus`` answers, kept because the summary never changes and request shapes repeat.
    _counts: dict[tuple[ContainerRequest, bool], int] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, devices: Sequence[DeviceUsage], cordoned: frozenset[str] = frozenset()) -> NodeSummary:
        free = []
        gpus = idle = 0
        mig = False
        for d in devices:
            info = d.info
            if not _is_nvidia_type(info.type):
                continue
            gpus += 1
            mig = mig or info.mode == MODE_MIG
            if info.health and info.id not in cordoned and info.count > d.used:
                free_mem, free_cores = info.devmem - d.usedmem, info.devcore - d.usedcores
                free.append((free_mem, free_cores, d.used, info.devmem, info.devcore, d.usedcores))
                idle += d.used == 0
        return cls(
            gpus,
            tuple(free),
            max((f[0] for f in free), default=0),
            max((f[1] for f in free), default=0),
            idle,
            mig,
        )

    def gpus_with(self, mem: int, cores: int = 0) -> int:
        """GPUs with at least ``mem`` MiB and ``cores`` percent free."""
        return sum(1 for f in self.free if f[0] >= mem and f[1] >= cores)

    def fitting_gpus(self, req: ContainerRequest, *, mutex: bool = False) -> int:
        """GPUs passing the pod-independent checks for ``req`` (see the class docstring)."""
        known = self._counts.get((req, mutex))
        if known is not None:
            return known
        cores = min(req.coresreq, 100)
        count = 0
        for free_mem, free_cores, used, devmem, devcore, usedcores in self.free:
            if mutex and used > 0:
                continue
            if req.memreq > 0:
                memreq = req.memreq
            elif req.mem_percentage != 101:
                memreq = _percent_of(devmem, req.mem_percentage)
            else:
                memreq = 0
            if free_mem < memreq or free_cores < cores:
                continue
            if devcore == 100 and cores == 100 and used > 0:
                continue
            if devcore != 0 and usedcores == devcore and cores == 0:
                continue
            count += 1
        if len(self._counts) < 64:
            self._counts[(req, mutex)] = count
        return count

    def may_fit(self, req: ContainerRequest, *, mutex: bool = False) -> bool:
        """``False`` only when the container certainly cannot fit on this node."""
        if self.has_mig:
            return True
        if req.nums > len(self.free) or req.memreq > self.max_free_mem or min(req.coresreq, 100) > self.max_free_cores:
            return False
        return self.fitting_gpus(req, mutex=mutex) >= req.nums


@dataclass(slots=True)
class _NodeState:
    ctx: _NodeCtx
    devices: tuple[DeviceUsage, ...]
    score: float
    summary: NodeSummary

    @classmethod
    def of(cls, ctx: _NodeCtx, devices: tuple[DeviceUsage, ...]) -> _NodeState:
        return cls(ctx, devices, node_score(devices), NodeSummary.of(devices, ctx.cordoned))


def _totals(devices: Iterable[DeviceUsage]) -> tuple[int, int, int, int, int, int]:
    used = usedcores = usedmem = count = devcore = devmem = 0
    for d in devices:
        used += d.used
        usedcores += d.usedcores
        usedmem += d.usedmem
        count += d.info.count
        devcore += d.info.devcore
        devmem += d.info.devmem
    return used, usedcores, usedmem, count, devcore, devmem


def utilisation(devices: Iterable[DeviceUsage]) -> float:
    """Mean of slot, core and memory utilisation (0..1), the node score without its float32 and weight."""
    used, usedcores, usedmem, count, devcore, devmem = _totals(devices)
    if count == 0 or devcore == 0 or devmem == 0:
        return 0.0
    return (used / count + usedcores / devcore + usedmem / devmem) / 3


class GpuInventory:
    """A worker's GPU nodes prepared for many :func:`fit_pod_set` calls (summaries and node scores cached).

    Build it once per capacity snapshot; :func:`fit_pod_set` never mutates it, and :meth:`apply` returns a new
    inventory with a placement's usage added (only the touched nodes are rebuilt).
    """

    __slots__ = ("_order", "states")

    def __init__(
        self,
        nodes: Mapping[str, Sequence[DeviceUsage]] | None = None,
        node_annotations: Mapping[str, Mapping[str, str]] | None = None,
        *,
        _states: dict[str, _NodeState] | None = None,
    ) -> None:
        if _states is not None:
            self.states = _states
        else:
            annotations = node_annotations or {}
            self.states = {
                name: _NodeState.of(_NodeCtx.of(name, devices, annotations.get(name)), tuple(devices))
                for name, devices in (nodes or {}).items()
            }
        self._order: dict[bool, list[str]] = {}

    def order(self, spread: bool) -> list[str]:
        """Node names in HAMi's preference order: highest score first (binpack) or lowest (spread); name ties."""
        cached = self._order.get(spread)
        if cached is None:
            states = self.states
            if spread:
                cached = sorted(states, key=lambda n: (states[n].score, n))
            else:
                cached = sorted(states, key=lambda n: (-states[n].score, n))
            self._order[spread] = cached
        return cached

    def set_order(self, spread: bool, names: list[str]) -> None:
        """Give :meth:`order` its answer, when the caller keeps the order up to date itself."""
        self._order[spread] = names

    def devices(self, node: str) -> tuple[DeviceUsage, ...]:
        return self.states[node].devices

    def summary(self, node: str) -> NodeSummary:
        return self.states[node].summary

    def utilisation(self) -> float:
        """Mean slot/core/memory utilisation over all GPUs of the worker (0..1)."""
        return utilisation(d for s in self.states.values() for d in s.devices)

    def apply(self, placement: PodSetFit) -> GpuInventory:
        """A new inventory with ``placement``'s usage added."""
        states = dict(self.states)
        for name, devices in placement.usage_after.items():
            states[name] = _NodeState.of(states[name].ctx, devices)
        return GpuInventory(_states=states)


@dataclass(slots=True)
class PodSetFit:
    """Whether all pods of a pod set fit, where, and how well.

    ``nodes[i]`` and ``devices[i]`` are the node and per-container devices of pod ``i`` (``hami_devices``
    form, ready for :func:`bind_annotations`). ``score`` is the mean utilisation (0..1) of the chosen nodes after
    placement: prefer high values for binpack, low for spread. ``usage_after`` holds the new usage of the touched
    nodes. On failure ``reason`` names the resource and the best node, followed by HAMi's own reason there.
    """

    ok: bool
    nodes: list[str]
    devices: list[list[list[ContainerDevice]]]
    reason: str = ""
    score: float = 0.0
    placed: int = 0
    usage_after: dict[str, tuple[DeviceUsage, ...]] = field(default_factory=dict)


def _apply_pod(
    devices: Sequence[DeviceUsage], hami_devices: Sequence[Sequence[ContainerDevice]], num_init: int
) -> tuple[DeviceUsage, ...]:
    """The node's usage once the pod is bound: its collapsed annotation added, as HAMi rebuilds it."""
    collapsed = {c.uuid: c for c in collapse_pod_usage(hami_devices, num_init)}
    placements: dict[str, list[MigPlacement]] = {}
    for container in hami_devices:
        for cd in container:
            if cd.mig_placement is not None and cd.mig_profile:
                placements.setdefault(cd.uuid, []).append(cd.mig_placement)
    out = []
    for d in devices:
        c = collapsed.get(d.info.id)
        if c is None:
            out.append(d)
            continue
        mig = (*d.mig_in_use, *placements.get(d.info.id, ()))
        out.append(DeviceUsage(d.info, d.used + max(c.slots, 1), d.usedmem + c.usedmem, d.usedcores + c.usedcores, mig))
    return tuple(out)


def _candidates(inv: GpuInventory, overlay: Mapping[str, _NodeState], spread: bool) -> Iterator[str]:
    """Node names in preference order with the nodes changed by this pod set re-ranked by their new score."""
    base = inv.order(spread)
    if not overlay:
        yield from base
        return
    sign = 1 if spread else -1
    states = inv.states
    changed = sorted((sign * s.score, name) for name, s in overlay.items())
    rest = ((sign * states[name].score, name) for name in base if name not in overlay)
    for _, name in heapq.merge(rest, changed):
        yield name


def _memory_phrase(req: ContainerRequest) -> str:
    if req.memreq > 0:
        return f"{req.memreq} MiB"
    if req.mem_percentage == 100:
        return "all of its memory"
    if req.mem_percentage != 101:
        return f"{req.mem_percentage}% of its memory"
    return ""


def _request_phrase(req: ContainerRequest) -> str:
    """``2 GPUs with 24000 MiB and 50% cores free each`` / ``1 idle GPU with all of its memory free``."""
    cores = min(req.coresreq, 100)
    exclusive = cores == 100
    gpus = f"{req.nums} {'idle ' if exclusive else ''}GPU{'s' if req.nums != 1 else ''}"
    wants = [m for m in (_memory_phrase(req),) if m]
    if 0 < cores < 100:
        wants.append(f"{cores}% cores")
    if not wants:
        return f"{gpus} with a free vGPU slot{' each' if req.nums != 1 else ''}"
    return f"{gpus} with {' and '.join(wants)} free{' each' if req.nums != 1 else ''}"


def _failure_reason(
    inv: GpuInventory,
    overlay: Mapping[str, _NodeState],
    ctx: _PodCtx,
    quota: NamespaceQuota | None,
    pod_index: int,
    count: int,
) -> str:
    """A human reason naming the resource, the best node and HAMi's own reason on it."""
    states = {**inv.states, **overlay}
    reqs = [r for r in ctx.requests if r is not None]
    prefix = f"placed {pod_index} of {count} pods; " if pod_index else ""
    if not states:
        return prefix + "no GPU nodes"
    # The most demanding container names the resource.
    req = max(reqs, key=lambda r: (r.nums, r.memreq, r.mem_percentage % 101, r.coresreq))
    most = max(s.summary.gpus for s in states.values())
    if req.nums > most:
        return prefix + f"no node has {req.nums} GPUs; the largest has {most}"
    best = min(states, key=lambda n: (-states[n].summary.fitting_gpus(req, mutex=ctx.mutex), n))
    have = states[best].summary.fitting_gpus(req, mutex=ctx.mutex)
    fit = _score_node(states[best].ctx, states[best].devices, ctx, quota)
    hami = f" (HAMi: {fit.reason})" if fit.reason else ""
    if have < req.nums:
        return prefix + f"no node has {_request_phrase(req)}; best node {best} has {have}{hami}"
    return prefix + f"no node fits the pod; best node {best}{hami}"


def fit_pod_set(
    nodes: Mapping[str, Sequence[DeviceUsage]] | GpuInventory,
    pod_spec: Mapping[str, Any] | PreparedPod,
    count: int,
    pod_annotations: Mapping[str, str] | None = None,
    cfg: HamiConfig = DEFAULT_CONFIG,
    *,
    node_annotations: Mapping[str, Mapping[str, str]] | None = None,
    quota: NamespaceQuota | None = None,
    webhook: bool = True,
) -> PodSetFit:
    """Can all ``count`` identical pods be placed on these GPU nodes, and how good is the fit?

    Simulates HAMi placing the pods one by one: each pod goes to the node HAMi would choose (node policy over the
    node scores of the nodes it fits) with the devices HAMi's Fit would give it, and the pod's usage is added as
    HAMi rebuilds it before the next pod. Node choice is exact without scoring every node: the node score does not
    depend on the pod, so nodes are tried in preference order and the first that fits wins; nodes whose
    :class:`NodeSummary` proves a container cannot fit are skipped without running Fit.

    ``pod_spec`` is a pod spec mapping (the webhook's defaults are applied unless ``webhook=False``) or a
    :class:`PreparedPod`. Pass a :class:`GpuInventory` to reuse summaries across many calls.
    """
    inv = nodes if isinstance(nodes, GpuInventory) else GpuInventory(nodes, node_annotations)
    if isinstance(pod_spec, PreparedPod):
        prepared = pod_spec
    else:
        prepared = prepare_pod(pod_spec, pod_annotations, cfg, webhook=webhook)
    if count <= 0 or not prepared.has_request:
        return PodSetFit(True, [], [], "" if count <= 0 else "no HAMi GPU request")
    if prepared.selectors.weights_error is not None:
        return PodSetFit(False, [], [], prepared.selectors.weights_error)
    ctx = _PodCtx.of(prepared, cfg)
    reqs = [r for r in ctx.requests if r is not None]
    spread = prepared.selectors.node_policy == POLICY_SPREAD
    mutex = ctx.mutex
    overlay: dict[str, _NodeState] = {}
    chosen: list[str] = []
    devices: list[list[list[ContainerDevice]]] = []
    q = quota
    states = inv.states
    for k in range(count):
        found: tuple[str, _NodeState, PodFit] | None = None
        for name in _candidates(inv, overlay, spread):
            st = overlay.get(name) or states[name]
            summary = st.summary
            if not all(summary.may_fit(r, mutex=mutex) for r in reqs):
                continue
            fit = _score_node(st.ctx, st.devices, ctx, q, st.score)
            if fit.ok:
                found = (name, st, fit)
                break
        if found is None:
            reason = _failure_reason(inv, overlay, ctx, q, k, count)
            return PodSetFit(False, chosen, devices, reason, 0.0, k, {n: s.devices for n, s in overlay.items()})
        name, st, fit = found
        new_devices = _apply_pod(st.devices, fit.hami_devices, ctx.num_init)
        overlay[name] = _NodeState.of(st.ctx, new_devices)
        if q is not None:
            q = q.plus(*pod_quota_usage(fit.hami_devices, ctx.num_init))
        chosen.append(name)
        devices.append(fit.hami_devices)
    distinct = dict.fromkeys(chosen)
    score = sum(utilisation(overlay[n].devices) for n in distinct) / len(distinct)
    return PodSetFit(True, chosen, devices, "", score, count, {n: s.devices for n, s in overlay.items()})
