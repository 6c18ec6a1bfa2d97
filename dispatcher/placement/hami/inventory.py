"""Can all ``count`` pods of a pod set be placed on a worker's GPU nodes, and how well? (the placement engine's use)

Not a HAMi source file: it composes the rules of the other modules for the dispatcher, which asks this
thousands of times a second. :class:`GpuInventory` prepares a worker's nodes once per capacity snapshot
(:class:`NodeSummary` digests and node scores cached), and :func:`fit_pod_set` simulates HAMi placing the pods
one by one with the exact ``Fit`` of :mod:`.fit`, trying nodes in HAMi's preference order and skipping those a
summary proves cannot fit.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .devices import DEFAULT_CONFIG, ContainerDevice, ContainerRequest, DeviceUsage, HamiConfig, MigPlacement
from .fit import PodFit, _is_nvidia_type, _NodeCtx, _PodCtx, _score_node
from .gosemantics import _percent_of
from .names import MODE_MIG, POLICY_SPREAD
from .quota import NamespaceQuota
from .score import node_score
from .selection import PreparedPod, prepare_pod
from .usage import collapse_pod_usage, pod_quota_usage

__all__ = ["GpuInventory", "NodeSummary", "PodSetFit", "fit_pod_set", "node_state", "utilisation"]


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


def node_state(
    name: str,
    devices: tuple[DeviceUsage, ...],
    annotations: Mapping[str, str] | None,
    like: _NodeState | None = None,
) -> _NodeState:
    """One node prepared for :func:`fit_pod_set` (its score and summary), for an inventory kept up to date node by
    node (``GpuInventory(_states=...)``). ``like``: the node's previous state, when its annotations and GPUs are
    the same, so that its context (cordoned GPUs, pair scores) is not decoded again."""
    ctx = like.ctx if like is not None else _NodeCtx.of(name, devices, annotations)
    return _NodeState.of(ctx, devices)


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

    __slots__ = ("_keys", "_order", "generation", "states")

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
        self._keys: dict[bool, list[tuple[float, str]]] = {}
        #: Set by the owner of an inventory kept up to date node by node (``WorkerGpus``): which build this is.
        self.generation = 0

    def order(self, spread: bool) -> list[str]:
        """Node names in HAMi's preference order: highest score first (binpack) or lowest (spread); name ties."""
        cached = self._order.get(spread)
        if cached is None:
            cached = self._order[spread] = [name for _, name in self.keys(spread)]
        return cached

    def keys(self, spread: bool) -> list[tuple[float, str]]:
        """The preference order as sorted ``(score, name)`` (spread) or ``(-score, name)`` (binpack) pairs."""
        cached = self._keys.get(spread)
        if cached is None:
            sign = 1 if spread else -1
            cached = self._keys[spread] = sorted((sign * s.score, n) for n, s in self.states.items())
        return cached

    def set_keys(self, spread: bool, keys: list[tuple[float, str]]) -> None:
        """Give :meth:`keys` (and so :meth:`order`) its answer, when the caller keeps the order sorted itself."""
        self._keys[spread] = keys
        self._order.pop(spread, None)

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
    candidates: Iterable[str] | None = None,
) -> PodSetFit:
    """Can all ``count`` identical pods be placed on these GPU nodes, and how good is the fit?

    Simulates HAMi placing the pods one by one: each pod goes to the node HAMi would choose (node policy over the
    node scores of the nodes it fits) with the devices HAMi's Fit would give it, and the pod's usage is added as
    HAMi rebuilds it before the next pod. Node choice is exact without scoring every node: the node score does not
    depend on the pod, so nodes are tried in preference order and the first that fits wins; nodes whose
    :class:`NodeSummary` proves a container cannot fit are skipped without running Fit.

    ``pod_spec`` is a pod spec mapping (the webhook's defaults are applied unless ``webhook=False``) or a
    :class:`PreparedPod`. Pass a :class:`GpuInventory` to reuse summaries across many calls.

    ``candidates`` (one pod only): the nodes to try, in preference order, when the caller knows every other node
    cannot fit (an incremental re-fit, :mod:`..refit`). A failure's reason still looks at every node.
    """
    if candidates is not None and count != 1:
        raise ValueError("candidates are for a pod set of one pod")
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
    #: node -> its devices with the pods placed so far (``overlay`` holds them too, but not after the last pod)
    after: dict[str, tuple[DeviceUsage, ...]] = {}
    chosen: list[str] = []
    devices: list[list[list[ContainerDevice]]] = []
    q = quota
    states = inv.states
    for k in range(count):
        found: tuple[str, _NodeState, PodFit] | None = None
        for name in _candidates(inv, overlay, spread) if candidates is None else candidates:
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
            return PodSetFit(False, chosen, devices, reason, 0.0, k, after)
        name, st, fit = found
        new_devices = _apply_pod(st.devices, fit.hami_devices, ctx.num_init)
        after[name] = new_devices
        if k < count - 1:  # the next pod needs the node's new score and summary; after the last, only its usage
            overlay[name] = _NodeState.of(st.ctx, new_devices)
        if q is not None:
            q = q.plus(*pod_quota_usage(fit.hami_devices, ctx.num_init))
        chosen.append(name)
        devices.append(fit.hami_devices)
    distinct = dict.fromkeys(chosen)
    score = sum(utilisation(after[n]) for n in distinct) / len(distinct)
    return PodSetFit(True, chosen, devices, "", score, count, after)
