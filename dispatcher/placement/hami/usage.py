"""Per-GPU usage rebuilt from the pods bound to a node (section 2 of ``/work/shared/hami-rules.md``).

Follows ``getNodesUsage`` (``pkg/scheduler/scheduler.go:744-863``) with init-container collapsing
(``CollapseInitContainerUsage``, ``pkg/device/initContainer.go``). MIG usage is only rebuilt from
``hami.io/vgpu-mig-allocations`` (no runtime identity bookkeeping).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .devices import ContainerDevice, DeviceInfo, DeviceUsage, MigAllocation, MigPlacement
from .names import (
    ALLOCATED_ANNOTATION,
    ASSIGNED_NODE_ANNOTATION,
    MIG_ALLOCATIONS_ANNOTATION,
    MODE_HAMI_CORE,
    MODE_MIG,
    NVIDIA,
    HamiFormatError,
)
from .podcodec import decode_mig_allocations, decode_pod_devices

__all__ = ["PodAllocation", "collapse_pod_usage", "node_usage", "pod_quota_usage"]


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
