"""HAMi's ``Fit`` for one container, one pod, and one pod over nodes (section 3 of ``/work/shared/hami-rules.md``).

``Fit`` (``pkg/device/nvidia/device.go:715-876``) runs checks F1-F13 in HAMi's order, walking the sorted devices
from the end, and the first failing check gives HAMi's reason string; ``fitInDevices`` and ``scoreNode``
(``pkg/scheduler/score.go``) add the scoring, sorting, type filter and per-container usage bookkeeping; and
``Filter`` (``scheduler.go:1067-1154``) fits a pod on every node and chooses one. MIG: F13 selects a free
non-overlapping placement and a MIG GPU is revisited as HAMi does; the MIG profile allowlist is the device
plugin's business.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .devices import (
    DEFAULT_CONFIG,
    ContainerDevice,
    ContainerRequest,
    DeviceUsage,
    HamiConfig,
    MigPlacement,
    MigProfile,
)
from .gosemantics import _percent_of
from .names import (
    ALLOCATED_CARDS_INSUFFICIENT_REQUEST,
    CARD_COMPUTE_UNITS_EXHAUSTED,
    CARD_CORDONED,
    CARD_INSUFFICIENT_CORE,
    CARD_INSUFFICIENT_MEMORY,
    CARD_MIG_TOPOLOGY_INFEASIBLE,
    CARD_NOT_HEALTH,
    CARD_TIME_SLICING_EXHAUSTED,
    CARD_TYPE_MISMATCH,
    CARD_UUID_MISMATCH,
    EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
    MODE_MIG,
    NODE_INSUFFICIENT_DEVICE,
    NUMA_NOT_FIT,
    NVIDIA,
    PAIR_SCORE_ANNOTATION,
    POLICY_MUTEX,
    POLICY_TOPOLOGY,
    RESOURCE_QUOTA_NOT_FIT,
    HamiSchedulingError,
)
from .nodecodec import cordoned_devices, decode_pair_scores
from .quota import NamespaceQuota
from .score import _request_terms, _score, choose_node, node_score, sort_devices
from .selection import PodSelectors, PreparedPod, _policy_contains, prepare_pod
from .usage import collapse_pod_usage

__all__ = [
    "PodFit",
    "ScheduleResult",
    "filter_failure_messages",
    "fit_container",
    "fit_pod",
    "gen_reason",
    "parse_reason",
    "schedule_pod",
]


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
