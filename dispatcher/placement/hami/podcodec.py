"""Pod annotations: the devices HAMi gives a pod, as it writes them (section 7 of ``/work/shared/hami-rules.md``).

The per-container device lists (``EncodePodSingleDevice`` / ``DecodePodDevices``), the device plugin's
``Allocate`` step that erases one container entry at a time, the MIG allocations
(``pkg/device/nvidia/mig_allocations.go``) and the annotations ``Filter`` and ``Bind`` write on a bound pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from .devices import ContainerDevice, MigAllocation, MigPlacement
from .gojson import _INT64, _UINT32, _fold_fields, _go_json_string, _json_kind, _load_go_json, _TypeErrors
from .gosemantics import _go_parse_int, _GoNumError
from .names import (
    ALLOCATED_ANNOTATION,
    ASSIGNED_NODE_ANNOTATION,
    ASSIGNED_TIME_ANNOTATION,
    BIND_PHASE_ANNOTATION,
    BIND_SUCCESS,
    BIND_TIME_ANNOTATION,
    MIG_ALLOCATIONS_ANNOTATION,
    TO_ALLOCATE_ANNOTATION,
    HamiFormatError,
)

__all__ = [
    "bind_annotations",
    "decode_mig_allocations",
    "decode_pod_devices",
    "encode_mig_allocations",
    "encode_pod_devices",
    "pop_next_container_devices",
]


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
