"""HAMi vGPU capacity of a worker (pure, no I/O).

:class:`WorkerGpus` is the per-worker HAMi state kept in :attr:`WorkerCapacity.gpu`. The capacity view feeds it
from watch events (:meth:`WorkerGpus.node_event`, :meth:`WorkerGpus.pod_event`), and the worker's reservations
add usage for our own placements that have no pod yet (:meth:`WorkerGpus.assume`, :meth:`WorkerGpus.forget`).
It mirrors what the worker's HAMi scheduler sees (``/work/shared/hami-rules.md`` sections 2 and 6):

* a node offers GPUs only with a decodable ``hami.io/node-nvidia-register`` annotation (and, when present, a
  decodable ``hami.io/node-nvidia-score``), a handshake HAMi considers healthy (``check_handshake``), a non-zero
  allocatable ``nvidia.com/gpu`` (kube-scheduler refuses any vGPU pod on a node without it), and when it is
  schedulable and not NotReady;
* per-device usage is rebuilt from the HAMi allocations (``hami.io/vgpu-devices-allocated``) of pods that carry
  ``hami.io/vgpu-node`` and are not Succeeded/Failed, collapsed per pod as HAMi does (``node_usage``);
* device health (``health`` in the register annotation) and ``hami.io/device-cordon`` are applied by the fit.

The engine's fit of a workload's pods onto these GPUs is :class:`~.gpufit.HamiFitter`.

The inventory is rebuilt lazily and only for the nodes that changed (cost per changed node is its GPUs and its
pods, never all pods of the worker); fits are cached per inventory version and pod-set shape.
"""

from __future__ import annotations

import bisect
import itertools
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..quantity import QuantityError, parse_quantity
from .hami.devices import DEFAULT_CONFIG, DeviceInfo, DeviceUsage, HamiConfig
from .hami.health import check_handshake
from .hami.inventory import GpuInventory, node_state
from .hami.names import (
    ASSIGNED_NODE_ANNOTATION,
    CORDON_ANNOTATION,
    HANDSHAKE_ANNOTATION,
    PAIR_SCORE_ANNOTATION,
    REGISTER_ANNOTATION,
    HamiFormatError,
)
from .hami.nodecodec import decode_node_devices, decode_pair_scores
from .hami.usage import PodAllocation, node_usage
from .refit import LastFit
from .verdicts import GpuVerdict

if TYPE_CHECKING:
    from .worker import WorkerCapacity

__all__ = ["Allocation", "WorkerGpus", "sync_worker"]

Obj = dict[str, Any]

#: One device's share of a placement: (device UUID, memory MiB, cores percent, vGPU slots).
Allocation = tuple[str, int, int, int]

_FIT_CACHE_LIMIT = 4096
#: How many inventory builds :meth:`WorkerGpus.changed_since` can look back over.
_REBUILT_KEPT = 32


@dataclass(slots=True, frozen=True)
class _GpuNode:
    """A node that carries HAMi's register annotation, as far as GPU placement is concerned."""

    name: str
    register: str
    devices: tuple[DeviceInfo, ...]
    #: The node annotations the fit reads (cordon list, topology pair scores).
    annotations: Mapping[str, str]
    labels: Mapping[str, str]
    #: Why the node's GPUs cannot be used now (``None``: usable).
    problem: str | None = None


def _allocatable(node: Mapping[str, Any], resource: str) -> int:
    raw = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
    if raw is None:
        return 0
    try:
        value = parse_quantity(raw)
    except QuantityError:
        return 0
    return int(value) if value > 0 else 0


def _not_ready(node: Mapping[str, Any]) -> bool:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") != "True")
    return False  # no conditions reported: not known to be NotReady


class WorkerGpus:
    """One worker's HAMi GPU nodes, the allocations of its pods and our assumed reservations.

    Every method that changes the GPU view returns ``True`` (or, for :meth:`assume`/:meth:`forget`, always
    changes it) and bumps :attr:`version`; the caller bumps the worker's version (:meth:`WorkerCapacity.touch`,
    which ``reserve``/``release`` already do) so the engine's cached verdicts are re-evaluated.
    """

    def __init__(self, cfg: HamiConfig = DEFAULT_CONFIG, *, clock: Callable[[], datetime] = datetime.now) -> None:
        self.cfg = cfg
        self._clock = clock
        #: Bumped on every change of the GPU view; caches key on it.
        self.version = 0
        #: Every node with the register annotation, usable or not.
        self._nodes: dict[str, _GpuNode] = {}
        #: How many of them offer usable GPUs (read by every fit: kept, not counted each time).
        self._offering = 0
        #: Pod uid -> (node, allocation) for pods HAMi counts.
        self._pods: dict[str, tuple[str, PodAllocation]] = {}
        self._pods_by_node: dict[str, dict[str, PodAllocation]] = {}
        #: Reservation uid -> node -> allocations assumed taken.
        self._assumed: dict[str, dict[str, tuple[Allocation, ...]]] = {}
        #: Node -> device UUID -> [memory, cores, slots, allocations] assumed there in all (kept as reservations
        #: come and go, so rebuilding a node costs its GPUs, not the reservations on it).
        self._assumed_by_node: dict[str, dict[str, list[int]]] = {}
        #: Per usable node, the fit's prepared state (``GpuInventory.states`` values); rebuilt when dirty.
        self._states: dict[str, Any] = {}
        self._dirty: set[str] = set()
        #: The usable nodes as (-score, name) and (score, name), sorted: the binpack and spread orders.
        self._binpack: list[tuple[float, str]] = []
        self._spread: list[tuple[float, str]] = []
        self._inventory: GpuInventory | None = None
        #: Node name -> (node object, its GPUs' usage by pods): rebuilt on pod events there or a new node object.
        self._pod_usage: dict[str, tuple[_GpuNode, list[DeviceUsage]]] = {}
        #: Node name -> the node object its kept ``_NodeCtx`` was made from.
        self._ctx_of: dict[str, _GpuNode] = {}
        #: Which inventory build is current, and the nodes each recent build changed (:meth:`changed_since`).
        self._generation = 0
        self._rebuilt: deque[frozenset[str]] = deque(maxlen=_REBUILT_KEPT)
        self._fit_cache: dict[Hashable, GpuVerdict] = {}
        self._fit_cache_version = -1
        #: Fit key -> the last fit made under it and where (:mod:`.refit`).
        self.last_fits: dict[Hashable, LastFit] = {}

    # -- events ------------------------------------------------------------------------------------------

    def _changed(self, *nodes: str) -> None:
        self._dirty.update(nodes)
        self._inventory = None
        self.version += 1

    def _usable(self, name: str) -> bool:
        node = self._nodes.get(name)
        return node is not None and node.problem is None

    def _read_node(self, node: Mapping[str, Any], name: str) -> _GpuNode | None:
        meta = node.get("metadata") or {}
        annotations: Mapping[str, str] = meta.get("annotations") or {}
        register = annotations.get(REGISTER_ANNOTATION)
        if register is None:
            return None  # not a HAMi node: "annos not found hami.io/node-nvidia-register"
        labels = dict(meta.get("labels") or {})
        fit_annotations = {k: annotations[k] for k in (CORDON_ANNOTATION, PAIR_SCORE_ANNOTATION) if k in annotations}
        old = self._nodes.get(name)
        problem: str | None = None
        devices: tuple[DeviceInfo, ...] = ()
        if old is not None and old.register == register and old.devices:
            devices = old.devices  # unchanged annotation: skip decoding
        else:
            try:
                devices = tuple(decode_node_devices(register))
            except HamiFormatError as exc:
                problem = f"{REGISTER_ANNOTATION}: {exc}"
        if problem is None and PAIR_SCORE_ANNOTATION in fit_annotations:
            try:
                decode_pair_scores(fit_annotations[PAIR_SCORE_ANNOTATION])
            except HamiFormatError as exc:
                problem = f"{PAIR_SCORE_ANNOTATION}: {exc}"
        if problem is None:
            allocatable = _allocatable(node, self.cfg.resource_count)
            handshake = check_handshake(annotations.get(HANDSHAKE_ANNOTATION), self._clock(), allocatable)
            if not handshake.healthy:
                problem = (
                    f"stale {HANDSHAKE_ANNOTATION} and no allocatable {self.cfg.resource_count}: HAMi drops the node"
                )
            elif allocatable <= 0:
                problem = f"no allocatable {self.cfg.resource_count} (HAMi device plugin not running)"
            elif (node.get("spec") or {}).get("unschedulable"):
                problem = "node is unschedulable (cordoned)"
            elif _not_ready(node):
                problem = "node is not Ready"
        return _GpuNode(name, register, devices, fit_annotations, labels, problem)

    def node_event(self, kind: str, node: Mapping[str, Any]) -> bool:
        """A Node watch event (``ADDED``/``MODIFIED``/``DELETED``). True when the GPU view changed."""
        name = str((node.get("metadata") or {}).get("name", ""))
        old = self._nodes.get(name)
        new = None if kind == "DELETED" else self._read_node(node, name)
        if new == old:
            return False
        if new is None:
            del self._nodes[name]
        else:
            self._nodes[name] = new
        self._offering += _offers(new) - _offers(old)
        if (old is None or old.problem is not None) and (new is None or new.problem is not None):
            # Neither version offers GPUs: only the unusable-node report changed.
            self.version += 1
            self._inventory = None
            return True
        self._changed(name)
        return True

    def pod_event(self, kind: str, pod: Mapping[str, Any]) -> bool:
        """A Pod watch event. Tracks the HAMi allocation of pods HAMi counts; True when the GPU view changed."""
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")
        new: tuple[str, PodAllocation] | None = None
        if kind != "DELETED":
            alloc = PodAllocation.from_pod(pod)
            if alloc is not None and any(alloc.devices):
                new = (str((meta.get("annotations") or {})[ASSIGNED_NODE_ANNOTATION]), alloc)
        old = self._pods.get(uid)
        if new == old:
            return False
        if old is not None:
            del self._pods[uid]
            by_node = self._pods_by_node.get(old[0])
            if by_node is not None:
                by_node.pop(uid, None)
                if not by_node:
                    del self._pods_by_node[old[0]]
        if new is not None:
            self._pods[uid] = new
            self._pods_by_node.setdefault(new[0], {})[uid] = new[1]
        touched = _nodes_of(old, new)
        for name in touched:
            self._pod_usage.pop(name, None)
        if not any(self._usable(n) for n in touched):
            return False  # a pod on a node without usable GPUs (yet): kept, but the view is unchanged
        self._changed(*touched)
        return True

    # -- reservations ------------------------------------------------------------------------------------

    def assume(self, uid: str, allocations: Mapping[str, Sequence[Allocation]]) -> None:
        """Add a reservation's GPUs (from :attr:`GpuVerdict.allocations`) on top of the pods' usage."""
        self.forget(uid)
        held = {
            node: tuple((str(a[0]), int(a[1]), int(a[2]), int(a[3])) for a in allocs)
            for node, allocs in allocations.items()
            if allocs
        }
        if not held:
            return
        self._assumed[uid] = held
        self._add_assumed(held, 1)
        self._changed(*held)

    def _add_assumed(self, held: Mapping[str, tuple[Allocation, ...]], sign: int) -> None:
        by_node = self._assumed_by_node
        for node, allocs in held.items():
            extra = by_node.get(node)
            if extra is None:
                extra = by_node[node] = {}
            for dev, mem, cores, slots in allocs:
                acc = extra.get(dev)
                if acc is None:
                    acc = extra[dev] = [0, 0, 0, 0]
                acc[0] += sign * mem
                acc[1] += sign * cores
                acc[2] += sign * slots
                acc[3] += sign  # how many allocations: the entry goes with the last one
                if not acc[3]:
                    del extra[dev]
            if not extra:
                del by_node[node]

    def forget(self, uid: str) -> None:
        """Drop a reservation's assumed GPUs (it was admitted and its pods are counted, or it was dropped)."""
        held = self._assumed.pop(uid, None)
        if held is None:
            return
        self._add_assumed(held, -1)
        self._changed(*held)

    def retain_assumed(self, uids: Iterable[str]) -> None:
        """Forget every assumed reservation whose uid is not in ``uids`` (e.g. the worker's live reservations)."""
        keep = set(uids)
        for uid in [u for u in self._assumed if u not in keep]:
            self.forget(uid)

    @property
    def assumed(self) -> Mapping[str, Mapping[str, tuple[Allocation, ...]]]:
        return self._assumed

    # -- views -------------------------------------------------------------------------------------------

    @property
    def has_gpus(self) -> bool:
        """Whether any node offers usable HAMi GPUs."""
        return self._offering > 0

    def _node_usage(self, node: _GpuNode) -> list[DeviceUsage]:
        # The pods' usage changes with pod events only; reservations come and go far more often.
        kept = self._pod_usage.get(node.name)
        if kept is not None and kept[0] is node:
            usage = kept[1]
        else:
            usage = node_usage(node.devices, self._pods_by_node.get(node.name, {}).values())
            self._pod_usage[node.name] = (node, usage)
        extra = self._assumed_by_node.get(node.name)
        if not extra:
            return usage
        out = []
        for d in usage:
            add = extra.get(d.info.id)
            if add is None:
                out.append(d)
            else:
                out.append(DeviceUsage(d.info, d.used + add[2], d.usedmem + add[0], d.usedcores + add[1], d.mig_in_use))
        return out

    def empty_inventory(self) -> GpuInventory:
        """The usable GPU nodes with nothing on them: what a pod that does not fit here can never fit."""
        nodes = {
            n.name: [DeviceUsage(d) for d in n.devices] for n in self._nodes.values() if n.problem is None and n.devices
        }
        return GpuInventory(nodes, {name: self._nodes[name].annotations for name in nodes})

    def inventory(self) -> GpuInventory:
        """The worker's usable GPU nodes for :func:`fit_pod_set` (cached; only changed nodes are rebuilt)."""
        if self._inventory is not None:
            return self._inventory
        binpack, spread, states = self._binpack, self._spread, self._states
        for name in self._dirty:
            old = states.get(name)
            if old is not None:  # out of both orders; back in below with its new score
                del binpack[bisect.bisect_left(binpack, (-old.score, name))]
                del spread[bisect.bisect_left(spread, (old.score, name))]
            node = self._nodes.get(name)
            if node is None or node.problem is not None or not node.devices:
                states.pop(name, None)
                self._ctx_of.pop(name, None)
                self._pod_usage.pop(name, None)
                continue
            # The node's context (cordoned GPUs, pair scores) depends on the node object alone: kept while it is.
            like = old if old is not None and self._ctx_of.get(name) is node else None
            state = states[name] = node_state(name, tuple(self._node_usage(node)), node.annotations, like)
            self._ctx_of[name] = node
            bisect.insort(binpack, (-state.score, name))
            bisect.insort(spread, (state.score, name))
        self._generation += 1
        self._rebuilt.append(frozenset(self._dirty))
        self._dirty.clear()
        inv = GpuInventory(_states=dict(states))
        inv.generation = self._generation
        # HAMi's node preference orders, kept sorted as nodes change instead of sorted again per inventory.
        inv.set_keys(False, list(binpack))
        inv.set_keys(True, list(spread))
        self._inventory = inv
        return inv

    def changed_since(self, generation: int) -> frozenset[str] | None:
        """The nodes whose prepared state differs between inventory build ``generation`` and the current one
        (built now if due), or ``None`` when that build is too old to tell."""
        current = self.inventory().generation
        back = current - generation
        if back < 0 or back > len(self._rebuilt):
            return None
        if back == 0:
            return frozenset()
        if back == 1:
            return self._rebuilt[-1]
        return frozenset().union(*itertools.islice(reversed(self._rebuilt), back))

    def labels(self, node: str) -> Mapping[str, str]:
        entry = self._nodes.get(node)
        return entry.labels if entry is not None else {}

    def unusable(self) -> dict[str, str]:
        """Nodes with the register annotation whose GPUs are not used, and why."""
        return {n.name: n.problem for n in self._nodes.values() if n.problem is not None}

    def summary(self) -> Obj:
        """Physical GPUs, vGPU slots and memory (MiB) of the usable nodes, reservations included (API/CLI)."""
        inv = self.inventory()
        gpus = healthy = slots = slots_used = total = used = free = cores = cores_used = 0
        for name in inv.states:
            for d in inv.devices(name):
                gpus += 1
                healthy += d.info.health
                slots += d.info.count
                slots_used += d.used
                total += d.info.devmem
                used += d.usedmem
                free += max(d.info.devmem - d.usedmem, 0)
                cores += d.info.devcore
                cores_used += d.usedcores
        return {
            "nodes": len(inv.states),
            "gpus": gpus,
            "healthyGpus": healthy,
            "vgpuSlots": slots,
            "vgpuSlotsUsed": slots_used,
            "memoryTotalMiB": total,
            "memoryUsedMiB": used,
            "memoryFreeMiB": free,
            "coresTotal": cores,
            "coresUsed": cores_used,
            "reservations": len(self._assumed),
            "unusableNodes": self.unusable(),
        }

    # -- fit cache (used by HamiFitter) ---------------------------------------------------------------------

    def cached_fit(self, key: Hashable) -> GpuVerdict | None:
        if self._fit_cache_version != self.version:
            self._fit_cache.clear()
            self._fit_cache_version = self.version
        return self._fit_cache.get(key)

    def store_fit(self, key: Hashable, verdict: GpuVerdict) -> None:
        if self._fit_cache_version != self.version:
            self._fit_cache.clear()
            self._fit_cache_version = self.version
        if len(self._fit_cache) >= _FIT_CACHE_LIMIT:
            self._fit_cache.clear()
        self._fit_cache[key] = verdict


def _offers(node: _GpuNode | None) -> int:
    """1 when the node offers usable GPUs (a decoded register annotation with devices, no problem), else 0."""
    return 1 if node is not None and node.problem is None and node.devices else 0


def _nodes_of(*entries: tuple[str, PodAllocation] | None) -> set[str]:
    return {e[0] for e in entries if e is not None}


def sync_worker(worker: WorkerCapacity, gpus: WorkerGpus, changed: bool) -> None:
    """After a node or pod event on ``gpus``: expose it as ``worker.gpu`` while it has usable GPUs (``None``
    otherwise, which the engine reports as "no HAMi GPU nodes") and bump the worker's version on any change."""
    want = gpus if gpus.has_gpus else None
    if worker.gpu is not want:
        if want is not None:
            gpus.retain_assumed(uid for uid, r in worker.reservations.items() if r.gpu)
        worker.gpu = want
        changed = True
    if changed:
        worker.touch()
