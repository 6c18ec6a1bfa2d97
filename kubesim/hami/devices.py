"""GPUs as the simulated HAMi registers, encodes, allocates and counts them.

Follows HAMi (rules sections 2 and 7):

* the device plugin's registration (``register.go``): ``devmem = floor(MiB x deviceMemoryScaling)``, ``devcore =
  int(deviceCoreScaling x 100)``, ``count = deviceSplitCount``, ``type = "NVIDIA-" + model`` unless the model
  already starts with ``NVIDIA``;
* ``hami.io/node-nvidia-register`` in its JSON form (``MarshalNodeDevices`` / ``UnMarshalNodeDevices``: Go's key
  order id, index, count, devmem, devcore, type, numa, mode, health, every key ``omitempty`` so a missing
  ``health`` is unhealthy; keys matched case-insensitively as Go's ``encoding/json`` does);
  ``hami.io/node-nvidia-score`` (``[{"uuid": ..., "score": {...}}]``);
* the pod annotations (``EncodePodSingleDevice`` / ``DecodePodDevices``: ``UUID,NVIDIA,mem,cores:`` per GPU and
  ``;`` per container, init containers first, empty entries kept), the device plugin's ``Allocate`` erasing each
  container's entry from ``…-to-allocate``, and the bind annotations;
* usage rebuilt from bound pods (``CollapseInitContainerUsage``: init containers at their peak with one slot,
  app containers summed with a slot each, the larger of the two per GPU; app containers only once every init
  container exited 0; ``getNodesUsage``: an allocation naming an unknown GPU is ignored).

MIG-mode GPUs are not modelled: the simulated device plugin registers none, and MIG profiles in a registration
are not read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .config import (
    ALLOCATED_ANNOTATION,
    ASSIGNED_NODE_ANNOTATION,
    ASSIGNED_TIME_ANNOTATION,
    BIND_PHASE_ANNOTATION,
    BIND_TIME_ANNOTATION,
    MODE_HAMI_CORE,
    NVIDIA,
    PAIR_SCORE_ANNOTATION,
    REGISTER_ANNOTATION,
    TO_ALLOCATE_ANNOTATION,
    HamiFormatError,
)
from .requests import int32

__all__ = [
    "ContainerDevice",
    "DeviceInfo",
    "DeviceUsage",
    "PodAllocation",
    "bind_annotations",
    "decode_node_devices",
    "decode_pod_devices",
    "encode_node_devices",
    "encode_pod_devices",
    "node_devices_from_annotations",
    "node_usage",
    "register_device",
]


@dataclass(frozen=True)
class DeviceInfo:
    """One registered GPU (an element of ``hami.io/node-nvidia-register``)."""

    id: str
    index: int = 0
    count: int = 0
    devmem: int = 0
    devcore: int = 0
    type: str = ""
    numa: int = 0
    health: bool = False
    mode: str = ""


@dataclass
class DeviceUsage:
    """A GPU with what bound pods (and the pod being placed) use of it (HAMi's ``DeviceUsage``)."""

    info: DeviceInfo
    used: int = 0
    usedmem: int = 0
    usedcores: int = 0
    health: bool = True

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def free_mem(self) -> int:
        return self.info.devmem - self.usedmem

    def copy(self) -> DeviceUsage:
        return replace(self)


@dataclass(frozen=True)
class ContainerDevice:
    """One GPU given to a container, as the pod annotations carry it; ``slots`` only in collapsed usage."""

    uuid: str
    type: str
    usedmem: int
    usedcores: int
    slots: int = 0


def register_device(
    uuid: str,
    index: int,
    memory_mib: int,
    model: str,
    *,
    numa: int = 0,
    split_count: int = 10,
    healthy: bool = True,
    memory_scaling: float = 1.0,
    core_scaling: float = 1.0,
) -> DeviceInfo:
    """What HAMi's device plugin registers for one ``hami-core`` GPU."""
    devmem = int(memory_mib * memory_scaling) if memory_scaling != 1 else memory_mib
    return DeviceInfo(
        id=uuid,
        index=index,
        count=split_count,
        devmem=int32(devmem),
        devcore=int32(int(core_scaling * 100)),
        type=model if model.startswith("NVIDIA") else f"NVIDIA-{model}",
        numa=numa,
        health=healthy,
        mode=MODE_HAMI_CORE,
    )


# --------------------------------------------------------------------------------------------------------------
# Node annotations
# --------------------------------------------------------------------------------------------------------------


def _go_string(value: str) -> str:
    """A JSON string as Go's ``encoding/json`` writes it (HTML characters escaped)."""
    out = json.dumps(value, ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        out = out.replace(ch, esc)
    return out


def encode_node_devices(devices: Iterable[DeviceInfo]) -> str:
    """``MarshalNodeDevices``: compact JSON, Go's field order, zero values left out."""
    items = []
    for d in devices:
        fields = [f'"id":{_go_string(d.id)}'] if d.id else []
        for key, number in (("index", d.index), ("count", d.count), ("devmem", d.devmem), ("devcore", d.devcore)):
            if number:
                fields.append(f'"{key}":{number}')
        if d.type:
            fields.append(f'"type":{_go_string(d.type)}')
        if d.numa:
            fields.append(f'"numa":{d.numa}')
        if d.mode:
            fields.append(f'"mode":{_go_string(d.mode)}')
        if d.health:
            fields.append('"health":true')
        items.append("{" + ",".join(fields) + "}")
    return "[" + ",".join(items) + "]"


def _field(item: Mapping[str, Any], name: str, kind: type, default: Any) -> Any:
    """A field matched case-insensitively (the exact spelling wins), checked against its Go type."""
    value = item.get(name)
    if value is None:
        for key, v in item.items():
            if key.lower() == name.lower():
                value = v
                break
    if value is None:
        return default
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise HamiFormatError(f"json: cannot unmarshal {type(value).__name__} into Go struct field DeviceInfo.{name}")
    if kind is not int and not isinstance(value, kind):
        raise HamiFormatError(f"json: cannot unmarshal {type(value).__name__} into Go struct field DeviceInfo.{name}")
    return value


def decode_node_devices(annotation: str) -> list[DeviceInfo]:
    """``UnMarshalNodeDevices`` plus ``GetNodeDevices``'s empty check."""
    try:
        data = json.loads(annotation)
    except ValueError as err:
        raise HamiFormatError(f"invalid character in the node registration: {err}") from None
    if data is None or data == []:
        raise HamiFormatError("no gpu found on node")
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise HamiFormatError("json: cannot unmarshal the node registration into []*device.DeviceInfo")
    return [
        DeviceInfo(
            id=_field(d, "id", str, ""),
            index=_field(d, "index", int, 0),
            count=_field(d, "count", int, 0),
            devmem=_field(d, "devmem", int, 0),
            devcore=_field(d, "devcore", int, 0),
            type=_field(d, "type", str, ""),
            numa=_field(d, "numa", int, 0),
            health=_field(d, "health", bool, False),
            mode=_field(d, "mode", str, ""),
        )
        for d in data
    ]


def decode_pair_scores(annotation: str) -> dict[str, dict[str, int]]:
    """``DecodePairScores``: per GPU UUID, its pair scores with the other GPUs of the node."""
    try:
        data = json.loads(annotation)
    except ValueError as err:
        raise HamiFormatError(f"invalid pair scores: {err}") from None
    out: dict[str, dict[str, int]] = {}
    for entry in data or ():
        if not isinstance(entry, dict):
            raise HamiFormatError("invalid pair scores")
        scores = entry.get("score") or {}
        out[str(entry.get("uuid") or "")] = {str(k): int(v) for k, v in scores.items()}
    return out


def node_devices_from_annotations(
    annotations: Mapping[str, str],
) -> tuple[list[DeviceInfo], dict[str, dict[str, int]]]:
    """``GetNodeDevices``: the node's GPUs and their pair scores (empty without the score annotation)."""
    raw = annotations.get(REGISTER_ANNOTATION)
    if raw is None:
        raise HamiFormatError("annos not found " + REGISTER_ANNOTATION)
    devices = decode_node_devices(raw)
    scores = annotations.get(PAIR_SCORE_ANNOTATION)
    return devices, (decode_pair_scores(scores) if scores is not None else {})


# --------------------------------------------------------------------------------------------------------------
# Pod annotations
# --------------------------------------------------------------------------------------------------------------


def encode_pod_devices(containers: Iterable[Iterable[ContainerDevice]]) -> str:
    """``EncodePodSingleDevice``."""
    return "".join(
        "".join(f"{d.uuid},{d.type},{d.usedmem},{d.usedcores}:" for d in container) + ";" for container in containers
    )


def _decode_container(text: str) -> list[ContainerDevice]:
    out: list[ContainerDevice] = []
    for entry in text.split(":") if text else ():
        if "," not in entry:
            continue
        fields = entry.split(",")
        if len(fields) < 4:
            raise HamiFormatError("pod annotation format error, missing fields, do not use nodeName in task spec")
        try:
            mem, cores = int(fields[2]), int(fields[3])
        except ValueError as err:
            raise HamiFormatError(f"invalid device field: {err}") from None
        if not (-(2**31) <= mem < 2**31 and -(2**31) <= cores < 2**31):
            raise HamiFormatError("invalid device field: value out of range")
        out.append(ContainerDevice(fields[0], fields[1], mem, cores))
    return out


def decode_pod_devices(annotation: str) -> list[list[ContainerDevice]]:
    """``DecodePodDevices``: one entry per ``;``-separated part, empty entries kept."""
    return [_decode_container(part) for part in annotation.split(";")]


def bind_annotations(node: str, devices: Sequence[Sequence[ContainerDevice]], now: float) -> dict[str, str]:
    """The annotations of a bound pod once HAMi's Filter and Bind and the device plugin's ``Allocate`` (one call per
    container with GPUs, each erasing that container's entry from ``…-to-allocate``) have run."""
    encoded = encode_pod_devices(devices)
    to_allocate = encoded
    while True:
        entries = decode_pod_devices(to_allocate)
        pending = next((i for i, e in enumerate(entries) if e), None)
        if pending is None:
            break
        entries[pending] = []
        to_allocate = encode_pod_devices(entries)
    stamp = str(int(now))
    return {
        ASSIGNED_NODE_ANNOTATION: node,
        ASSIGNED_TIME_ANNOTATION: stamp,
        TO_ALLOCATE_ANNOTATION: to_allocate,
        ALLOCATED_ANNOTATION: encoded,
        BIND_PHASE_ANNOTATION: "success",
        BIND_TIME_ANNOTATION: stamp,
    }


# --------------------------------------------------------------------------------------------------------------
# Usage
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodAllocation:
    """What a bound pod holds: its allocated devices per container and how many are init containers."""

    devices: tuple[tuple[ContainerDevice, ...], ...]
    num_init: int = 0
    init_done: bool = False

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> PodAllocation | None:
        """The allocation HAMi tracks for a pod, or ``None`` (not assigned by HAMi, terminated, unreadable)."""
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if ASSIGNED_NODE_ANNOTATION not in annotations:
            return None
        status = pod.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            return None
        raw = annotations.get(ALLOCATED_ANNOTATION)
        try:
            devices = tuple(tuple(c) for c in decode_pod_devices(raw)) if raw is not None else ()
        except HamiFormatError:
            return None
        statuses = status.get("initContainerStatuses") or []
        init_done = bool(statuses) and all(_terminated_ok(s) for s in statuses)
        return cls(devices, len((pod.get("spec") or {}).get("initContainers") or ()), init_done)

    def collapsed(self) -> list[ContainerDevice]:
        """``CollapseInitContainerUsage`` (``AppContainersOnlyDeviceUsage`` once the init containers are done)."""
        init: dict[str, list[int]] = {}
        app: dict[str, list[int]] = {}
        for i, container in enumerate(self.devices):
            is_init = i < self.num_init
            if is_init and self.init_done:
                continue
            for d in container:
                if is_init:
                    cur = init.setdefault(d.uuid, [0, 0, 0])
                    cur[0], cur[1], cur[2] = max(cur[0], d.usedmem), max(cur[1], d.usedcores), 1
                else:
                    cur = app.setdefault(d.uuid, [0, 0, 0])
                    cur[0], cur[1], cur[2] = cur[0] + d.usedmem, cur[1] + d.usedcores, cur[2] + 1
        out = []
        for uuid in sorted(init.keys() | app.keys()):
            a, b = init.get(uuid, [0, 0, 0]), app.get(uuid, [0, 0, 0])
            out.append(ContainerDevice(uuid, NVIDIA, max(a[0], b[0]), max(a[1], b[1]), max(a[2], b[2], 1)))
        return out


def _terminated_ok(status: Mapping[str, Any]) -> bool:
    """``AllInitContainersSucceeded`` for one init container: terminated with exit code 0."""
    terminated = (status.get("state") or {}).get("terminated")
    return terminated is not None and int(terminated.get("exitCode") or 0) == 0


def node_usage(devices: Sequence[DeviceInfo], allocations: Iterable[PodAllocation]) -> list[DeviceUsage]:
    """Per-GPU usage of a node from the pods bound to it, in registration order."""
    usage = [DeviceUsage(d, health=d.health) for d in devices]
    by_id: dict[str, list[DeviceUsage]] = {}
    for u in usage:
        by_id.setdefault(u.id, []).append(u)
    for allocation in allocations:
        for entry in allocation.collapsed():
            for u in by_id.get(entry.uuid, ()):
                u.used += max(entry.slots, 1)
                u.usedmem += entry.usedmem
                u.usedcores += entry.usedcores
    return usage
