"""The pod annotations that steer HAMi's device selection, parsed once per pod.

GPU type and UUID selectors, NUMA binding, vGPU mode, the GPU and node policies and the device scoring weights
(``device.go:40-64``, ``devices.go:693-738``, ``pkg/util/types.go``, ``pkg/util/device_scoring_weights.go``),
and :class:`PreparedPod`: a pod reduced to its requests (after the webhook) and these selectors, built once and
reused by every ``Fit``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .devices import _DEFAULT_WEIGHTS, DEFAULT_CONFIG, ContainerRequest, HamiConfig, ScoringWeights
from .gosemantics import _go_parse_int, _go_quote, _GoNumError, _parse_bool_true
from .names import (
    GPU_POLICY_ANNOTATION,
    NODE_POLICY_ANNOTATION,
    NOUSE_GPUTYPE_ANNOTATION,
    NOUSE_GPUUUID_ANNOTATION,
    NUMA_BIND_ANNOTATION,
    POLICY_BINPACK,
    POLICY_SPREAD,
    SCORING_WEIGHTS_ANNOTATION,
    USE_GPUTYPE_ANNOTATION,
    USE_GPUUUID_ANNOTATION,
    VGPU_MODE_ANNOTATION,
    HamiSchedulingError,
)
from .requests import pod_requests
from .webhook import _webhook_requests

__all__ = ["PodSelectors", "PreparedPod", "parse_scoring_weights", "prepare_pod"]


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
    #: Whether any container asks HAMi for a device (kept: every fit reads it).
    has_request: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "has_request", any(r is not None for r in self.requests))


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
