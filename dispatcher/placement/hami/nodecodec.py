"""Node annotations: the GPUs a node registers and what HAMi reads beside them (section 7 of the rules).

``hami.io/node-nvidia-register`` in the JSON form HAMi's NVIDIA backend reads at HEAD (``UnMarshalNodeDevices``
and ``GetNodeDevices``, ``device.go:302-345``) and in the legacy colon form (``DecodeNodeDevices``,
``devices.go:317-381``), the ``hami.io/node-nvidia-score`` topology pair scores, ``hami.io/device-cordon``,
and the ``DeviceInfo`` the device plugin registers for one GPU (``register.go:92-207``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .devices import DeviceInfo, MigPlacement, MigProfile
from .gojson import (
    _INT32,
    _INT64,
    _UINT32,
    _UINT64,
    _fold_fields,
    _go_json_string,
    _json_kind,
    _load_go_json,
    _TypeErrors,
)
from .gosemantics import _go_parse_bool, _go_parse_int, _go_quote, _GoNumError, _i32
from .names import (
    CORDON_ANNOTATION,
    MODE_HAMI_CORE,
    MODE_MIG,
    PAIR_SCORE_ANNOTATION,
    REGISTER_ANNOTATION,
    HamiFormatError,
)

__all__ = [
    "cordoned_devices",
    "decode_legacy_node_devices",
    "decode_node_devices",
    "decode_pair_scores",
    "encode_legacy_node_devices",
    "encode_node_devices",
    "node_devices_from_annotations",
    "register_device",
]


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
