"""HAMi for the simulated clusters: its NVIDIA device plugin, its scheduler (as an extender) and its webhook.

What a HAMi install (``Project-HAMi/HAMi``, see ``/work/shared/hami-rules.md``) does to a cluster, with the
rules themselves in the simulator's own :mod:`kubesim.hami` package:

- **device plugin** (one per GPU node of the topology): registers the node's GPUs in
  ``hami.io/node-nvidia-register`` (HAMi's JSON form, one entry per physical GPU with its UUID, split count,
  MiB, cores, type, NUMA node, mode and health) and, as the kubelet does for it, advertises ``count × split``
  ``nvidia.com/gpu`` in the node's capacity and allocatable. Like the real plugin it writes again only when
  what it would register changes (here: when it first sees the node, or the node was re-created);
- **scheduler, node side** (``RegisterFromNodeAnnotations``): when a node is added or deleted, when its
  registration or GPU count changes, and every 15 s it runs HAMi's health check on every node: it writes
  ``hami.io/node-handshake: Requesting_<local time>`` where the annotation lacks ``Requesting`` (HAMi at HEAD;
  the device plugin no longer writes ``Reported …``); a node whose handshake is older than 60 s while its allocatable
  ``nvidia.com/gpu`` is 0 (or whose allocatable dropped to 0) is unhealthy: the handshake is removed and its
  GPUs leave the scheduler's cache. Only cached nodes can take HAMi pods (others fail "node unregistered");
- **scheduler extender** (``Filter`` + ``Bind``): for pods with a HAMi request the default scheduler ignores
  the HAMi resources (``managed_resources``) and hands the nodes that pass its own filters to :meth:`choose`,
  which rebuilds each node's per-GPU usage from the ``hami.io/vgpu-devices-allocated`` annotations of the
  non-terminal pods bound there, runs HAMi's Fit/score/node choice and returns the node with the annotations
  HAMi's Filter, Bind and the device plugin's Allocate leave on the pod, or HAMi's per-node failure reasons;
- **admission webhook** (``vgpu.hami.io``, pods, CREATE): HAMi's ``MutateAdmission`` on every new pod (default
  ``nvidia.com/gpu``, ``gpucores: 100`` for whole-card requests, ``schedulerName: hami-scheduler``, the
  privileged/nodeName denials), skipping pods or namespaces labelled ``hami.io/webhook: ignore`` as the chart's
  selectors do. With the controller disabled the webhook is skipped (the chart's ``failurePolicy: Ignore``).

Devices free when a pod ends or is deleted: usage is rebuilt from the pods the scheduler passes in (non-terminal
ones), and the scheduler retries parked pods when a bound pod finishes.

Not modelled: HAMi's namespace quota (the simulator serves no ResourceQuota), MIG-mode GPUs, the node lock HAMi's
Bind takes and the device plugin releases (both happen at once here), HAMi's scheduling events.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from kubecommon.quantity import QuantityError, parse_quantity

from ..api import Admission, Api
from ..errors import ApiError
from ..hami.config import (
    DEFAULT_CONFIG,
    HANDSHAKE_ANNOTATION,
    REGISTER_ANNOTATION,
    HamiAdmissionError,
    HamiConfig,
    HamiFormatError,
    HamiSchedulingError,
)
from ..hami.devices import (
    DeviceInfo,
    DeviceUsage,
    PodAllocation,
    bind_annotations,
    encode_node_devices,
    node_devices_from_annotations,
    node_usage,
    register_device,
)
from ..hami.fit import schedule_pod
from ..hami.health import NodeHealth
from ..hami.requests import is_hami_request, mutate_pod
from ..store import StoreEvent
from ..topology import GpuSpec
from .base import Controller, LocalClient

__all__ = ["HEALTH_PERIOD", "WEBHOOK_IGNORE_LABEL", "WEBHOOK_NAME", "HamiController", "gpu_uuid"]

Obj = dict[str, Any]

#: HAMi's scheduler re-reads node registrations and checks node health on this ticker (scheduler.go).
HEALTH_PERIOD = 15.0
#: The mutating webhook's name in the chart (shows in denial messages).
WEBHOOK_NAME = "vgpu.hami.io"
#: Pods or namespaces with this label set to ``ignore`` are not sent to the webhook (chart selectors).
WEBHOOK_IGNORE_LABEL = "hami.io/webhook"

_UUID_NAMESPACE = uuid.UUID("6f1c1e1a-8a0b-4c43-9d7e-2f0d5a6b9c31")
_TICK = ("tick",)


def gpu_uuid(node: str, index: int) -> str:
    """The simulated GPU's UUID: stable for a node name and device index, shaped like NVML's ``GPU-…``."""
    return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{node}/{index}')}"


def _numa(index: int, count: int) -> int:
    """Two sockets: the first half of the GPUs on NUMA node 0, the rest on 1 (a single GPU is on 0)."""
    if count < 2:
        return 0
    return index // -(-count // 2)


def _int_quantity(value: Any) -> int:
    try:
        return int(parse_quantity(value)) if value is not None else 0
    except (QuantityError, TypeError, ValueError):
        return 0


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


class HamiController(Controller):
    """HAMi's NVIDIA device plugin, node registration/health, webhook and scheduler extender in one controller.

    ``gpu_nodes`` (node name -> :class:`~kubesim.topology.GpuSpec`) is the cluster's own dict, filled by
    ``add_nodes`` after this controller exists: it is read on every node event, never copied.
    """

    name = "hami"
    resources = ("nodes", "pods")

    def __init__(self, api: Api, gpu_nodes: Mapping[str, GpuSpec], config: HamiConfig = DEFAULT_CONFIG) -> None:
        super().__init__(api)
        self.gpu_nodes = gpu_nodes
        self.config = config
        #: The resources the extender manages; kube-scheduler ignores them for these pods (``ignoredByScheduler``).
        self.managed_resources: frozenset[str] = frozenset(
            r
            for r in (
                config.resource_count,
                config.resource_memory,
                config.resource_memory_percentage,
                config.resource_cores,
            )
            if r
        )
        self._plugin = LocalClient(api, "nvidia-device-plugin")
        self._kubelet = LocalClient(api, "kubelet")
        self._scheduler = LocalClient(api, "scheduler")
        self._nodes_rt = api.rt("", "Node")
        self._health = NodeHealth()
        #: What each node's device plugin last registered (its ``deviceCache``), with the node's uid.
        self._plugin_cache: dict[str, tuple[str, str]] = {}
        #: HAMi's scheduler node cache: the GPUs of every registered, healthy node.
        self._registered: dict[str, tuple[DeviceInfo, ...]] = {}
        #: Their topology pair scores (``hami.io/node-nvidia-score``), for the ``topology-aware`` GPU policy.
        self._pair_scores: dict[str, dict[str, dict[str, int]]] = {}
        #: Decoded allocations of bound pods, by uid: (resourceVersion, allocation or None).
        self._allocations: dict[str, tuple[str, PodAllocation | None]] = {}
        #: Per-node usage, valid while the node's devices and its allocated pods (uid, resourceVersion) are the same.
        self._usage: dict[str, tuple[tuple[DeviceInfo, ...], frozenset[tuple[str, str]], list[DeviceUsage]]] = {}
        api.add_mutating_hook("pods", self._webhook)

    # -- running -------------------------------------------------------------------------------------

    def start(self) -> None:
        super().start()
        self.requeue_after(_TICK, HEALTH_PERIOD)

    def devices_of(self, node: str, spec: GpuSpec) -> list[DeviceInfo]:
        """What the device plugin of ``node`` registers: one healthy ``hami-core`` GPU per physical card."""
        out = []
        for i in range(spec.count):
            info = register_device(
                gpu_uuid(node, i), i, spec.memory_mib, spec.type, numa=_numa(i, spec.count), split_count=spec.split
            )
            out.append(info if info.devcore == spec.cores else replace(info, devcore=spec.cores))
        return out

    def registered_devices(self, node: str) -> tuple[DeviceInfo, ...] | None:
        """The GPUs HAMi's scheduler holds for ``node`` (None: unregistered or unhealthy)."""
        return self._registered.get(node)

    def keys_for(self, event: StoreEvent) -> Iterable[Hashable]:
        meta = event.obj["metadata"]
        if event.resource == "pods":
            phase = (event.obj.get("status") or {}).get("phase")
            if event.type == "DELETED" or phase in ("Succeeded", "Failed"):
                self._allocations.pop(meta.get("uid", ""), None)
            return []
        if (
            event.type == "MODIFIED"
            and event.prev is not None
            and self._registration(event.obj) == self._registration(event.prev)
        ):
            # HAMi reacts to node adds and deletes at once and sees other changes on its 15 s ticker. Here a
            # changed registration or GPU count is also looked at at once (the device plugin and the scheduler's
            # registration are one step); a handshake change waits for the ticker as in HAMi.
            return []
        return [("nodes", "", meta["name"])]

    def _registration(self, node: Obj) -> tuple[str | None, Any]:
        alloc = ((node.get("status") or {}).get("allocatable") or {}).get(self.config.resource_count)
        return _annotations(node).get(REGISTER_ANNOTATION), alloc

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        if key == _TICK:
            for obj in self.api.store.iter_all("nodes"):
                self.enqueue(("nodes", "", obj["metadata"]["name"]))
            self.requeue_after(_TICK, HEALTH_PERIOD)
            return
        _, _, name = key
        node = self.api.store.get("nodes", "", name)
        if node is None:
            self._forget(name)
            return
        spec = self.gpu_nodes.get(name)
        if spec is not None:
            node = self._register(node, spec)
        self._check_node(node)

    def _forget(self, name: str) -> None:
        self._plugin_cache.pop(name, None)
        self._registered.pop(name, None)
        self._pair_scores.pop(name, None)
        self._usage.pop(name, None)
        self._health.forget(name)

    # -- device plugin -------------------------------------------------------------------------------

    def _register(self, node: Obj, spec: GpuSpec) -> Obj:
        """The device plugin's ``RegisterInAnnotation`` and the kubelet's extended-resource capacity."""
        name = node["metadata"]["name"]
        encoded = encode_node_devices(self.devices_of(name, spec))
        registered = (node["metadata"].get("uid", ""), encoded)
        if self._plugin_cache.get(name) == registered:
            return node
        if _annotations(node).get(REGISTER_ANNOTATION) != encoded:
            node = self._plugin.patch(
                self._nodes_rt, None, name, {"metadata": {"annotations": {REGISTER_ANNOTATION: encoded}}}
            )
        resource = self.config.resource_count
        slots = str(spec.count * spec.split)
        status = node.get("status") or {}
        if (status.get("capacity") or {}).get(resource) != slots or (status.get("allocatable") or {}).get(
            resource
        ) != slots:
            node = self._kubelet.patch(
                self._nodes_rt,
                None,
                name,
                {"status": {"capacity": {resource: slots}, "allocatable": {resource: slots}}},
                subresource="status",
            )
        self._plugin_cache[name] = registered
        return node

    # -- scheduler: node registration and health -----------------------------------------------------

    def _check_node(self, node: Obj) -> None:
        """One node of HAMi's ``register`` loop: health check (handshake), then the node cache."""
        name = node["metadata"]["name"]
        annotations = _annotations(node)
        allocatable = _int_quantity(
            ((node.get("status") or {}).get("allocatable") or {}).get(self.config.resource_count)
        )
        devices: list[DeviceInfo] | None
        scores: dict[str, dict[str, int]] = {}
        try:
            devices, scores = node_devices_from_annotations(annotations)
        except HamiFormatError:
            devices = None
        check = self._health.check(name, annotations, allocatable, datetime.now())
        if check.write is not None:
            self._scheduler.patch(
                self._nodes_rt, None, name, {"metadata": {"annotations": {HANDSHAKE_ANNOTATION: check.write}}}
            )
        if not check.healthy:
            if name in self._registered:
                # NodeCleanUp: the handshake goes, and so do the node's GPUs in the scheduler's cache.
                self._health.forget(name)
                with contextlib.suppress(ApiError):
                    self._scheduler.patch(
                        self._nodes_rt, None, name, {"metadata": {"annotations": {HANDSHAKE_ANNOTATION: None}}}
                    )
                self._registered.pop(name, None)
                self._usage.pop(name, None)
            return
        if devices is None:
            return
        if check.changed:
            self._registered[name] = tuple(devices)
            self._pair_scores[name] = scores

    # -- webhook -------------------------------------------------------------------------------------

    def _webhook(self, adm: Admission) -> None:
        if adm.operation != "CREATE" or adm.subresource is not None or not self.enabled:
            return
        pod = adm.obj
        meta = pod.get("metadata") or {}
        if (meta.get("labels") or {}).get(WEBHOOK_IGNORE_LABEL) == "ignore":
            return
        ns = self.api.store.get("namespaces", "", meta.get("namespace") or "")
        if ns is not None and ((ns["metadata"].get("labels") or {}).get(WEBHOOK_IGNORE_LABEL) == "ignore"):
            return
        try:
            mutated = mutate_pod(pod, self.config)
        except HamiAdmissionError as exc:
            # admission.Denied answers 403 Forbidden; admission.Errored keeps its code and has no reason.
            reason = "Forbidden" if exc.code == 403 else ""
            message = f'admission webhook "{WEBHOOK_NAME}" denied the request: {exc.message}'
            raise ApiError(exc.code, reason, message) from None
        pod["spec"] = mutated["spec"]

    # -- scheduler extender --------------------------------------------------------------------------

    def interested(self, pod: Obj) -> bool:
        """Whether HAMi's Filter handles the pod: a container with a HAMi request (the stored, mutated spec)."""
        return is_hami_request(pod.get("spec") or {}, self.config)

    def _allocation(self, pod: Obj) -> PodAllocation | None:
        meta = pod["metadata"]
        uid, rv = meta.get("uid", ""), meta.get("resourceVersion", "")
        cached = self._allocations.get(uid)
        if cached is not None and cached[0] == rv:
            return cached[1]
        allocation = PodAllocation.from_pod(pod)
        self._allocations[uid] = (rv, allocation)
        return allocation

    def node_usage(self, name: str, pods: Iterable[Obj]) -> list[DeviceUsage] | None:
        """Per-GPU usage of a registered node from the (non-terminal) pods bound to it; None if unregistered."""
        devices = self._registered.get(name)
        if devices is None:
            return None
        allocations: list[PodAllocation] = []
        holders: list[tuple[str, str]] = []
        for p in pods:
            allocation = self._allocation(p)
            if allocation is not None:
                allocations.append(allocation)
                meta = p["metadata"]
                holders.append((meta.get("uid", ""), meta.get("resourceVersion", "")))
        signature = frozenset(holders)
        cached = self._usage.get(name)
        if cached is not None and cached[0] is devices and cached[1] == signature:
            return cached[2]
        usage = node_usage(devices, allocations)
        self._usage[name] = (devices, signature, usage)
        return usage

    def choose(
        self, pod: Obj, nodes: list[Obj], pods_on_node: dict[str, list[Obj]]
    ) -> tuple[str, dict[str, str]] | dict[str, str] | str:
        """HAMi's Filter over the nodes that passed the default filters, then its Bind's annotations."""
        failed: dict[str, str] = {}
        usage: dict[str, list[DeviceUsage]] = {}
        node_annotations: dict[str, dict[str, str]] = {}
        for node in nodes:
            name = node["metadata"]["name"]
            devices = self.node_usage(name, pods_on_node.get(name, ()))
            if devices is None:
                failed[name] = "node unregistered"
                continue
            usage[name] = devices
            node_annotations[name] = _annotations(node)
        try:
            result = schedule_pod(
                usage, pod, self.config, node_annotations=node_annotations, pair_scores=self._pair_scores
            )
        except HamiSchedulingError as exc:
            return f"calcScore failed {exc} for pod {pod['metadata']['name']}"
        if result.node is None or result.fit is None:
            failed.update(result.failed)
            return failed
        return result.node, bind_annotations(result.node, result.fit.devices, time.time())
