"""Built-in kinds decoded as the apiserver's JSON decoder does: :func:`decode_builtin`.

Built-in kinds are decoded by the apiserver into Go structs with ``encoding/json`` semantics; the first type
error fails the request with **400** and Go's own wording (``json: cannot unmarshal string into Go struct field
JobSpec.spec.parallelism of type int32``), custom unmarshalers (Quantity, IntOrString, Time) fail with theirs,
unknown fields are dropped and reported as warnings, or fail the request under ``fieldValidation=Strict``.
Values are re-serialised as Go would: quantities and times in canonical form. The decoder also coerces the
``metadata`` of custom resources (:mod:`.crd`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, NoReturn

from kubecommon import fastjson
from kubecommon.quantity import QuantityError

from ..errors import bad_request
from .gosemantics import (
    _base64_error,
    _canonical_quantity_text,
    _canonical_time,
    _go_number,
    _json_kind,
    _quote,
    _TimeError,
    canonical_quantity,
)
from .model import KindSchema, Node

__all__ = ["decode_builtin"]

_DROP: Any = object()

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
_RAW_JSON = ("io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1", "io.k8s.apimachinery.pkg.runtime.RawExtension")

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1), "int": (-(2**63), 2**63 - 1)}


# -- built-in kinds ----------------------------------------------------------------------------------


@cache
def _go_kind(node: Node) -> str:
    name = node.def_name
    if name == QUANTITY:
        return "quantity"
    if node.int_or_string:
        return "intstr"
    if name == TIME:
        return "time"
    if name == MICRO_TIME:
        return "microtime"
    if name in _RAW_JSON:
        return "any"
    t = node.type
    if t == "object":
        if node.properties:
            return "struct"
        if isinstance(node.additional_properties, Node):
            return "map"
        return "any"
    if t == "array":
        return "slice"
    if t == "string":
        return "bytes" if node.format == "byte" else "string"
    if t == "integer":
        return node.format if node.format in ("int32", "int64") else "int"
    if t == "number":
        return "float32" if node.format == "float" else "float64"
    if t == "boolean":
        return "bool"
    return "any"


@cache
def _go_type(node: Node) -> str:
    """The Go type ``reflect.Type.String()`` prints for the field (``v1.JobSpec``, ``[]v1.Container`` …)."""
    if node.def_name and _go_kind(node) in ("struct", "quantity", "intstr", "time", "microtime", "any"):
        parts = node.def_name.split(".")
        return f"{parts[-2]}.{parts[-1]}"
    kind = _go_kind(node)
    if kind == "slice":
        return "[]" + (_go_type(node.items) if node.items is not None else "interface {}")
    if kind == "map":
        addl = node.additional_properties
        return "map[string]" + (_go_type(addl) if isinstance(addl, Node) else "interface {}")
    if kind == "bytes":
        return "[]uint8"
    if kind == "any":
        return "map[string]interface {}" if node.type == "object" else "interface {}"
    return kind


def _zero(node: Node | None) -> Any:
    """What Go stores for a JSON ``null`` inside a list or map (the element type's zero value)."""
    if node is None:
        return None
    kind = _go_kind(node)
    return {
        "string": "",
        "int32": 0,
        "int64": 0,
        "int": 0,
        "float64": 0,
        "float32": 0,
        "bool": False,
        "struct": {},
        "quantity": "0",
    }.get(kind)


class _Decoder:
    """One decode of a request body into a built-in kind (Go ``encoding/json`` + apimachinery semantics)."""

    def __init__(self, kind: str, version: str) -> None:
        self.kind = kind
        self.version = version
        self.first_error: str | None = None
        self.unknown: list[str] = []

    def fail(self, message: str) -> NoReturn:
        raise bad_request(f'{self.kind} in version "{self.version}" cannot be handled as a {self.kind}: {message}')

    def type_error(self, value: str, struct: str, jpath: Sequence[str], node: Node) -> None:
        if self.first_error is None:
            where = f"{struct}.{'.'.join(jpath)}"
            self.first_error = f"json: cannot unmarshal {value} into Go struct field {where} of type {_go_type(node)}"

    def value(self, v: Any, node: Node, struct: str, jpath: list[str], spath: str) -> Any:
        if v is None:
            return _DROP
        kind = _go_kind(node)
        if kind == "struct":
            if not isinstance(v, dict):
                self.type_error(_json_kind(v), struct, jpath, node)
                return _DROP
            return self.struct(v, node, jpath, spath)
        if kind == "map":
            if not isinstance(v, dict):
                self.type_error(_json_kind(v), struct, jpath, node)
                return _DROP
            elem = node.additional_properties
            assert isinstance(elem, Node)
            out: dict[str, Any] = {}
            for key, item in v.items():
                if item is None:
                    out[key] = _zero(elem)
                    continue
                got = self.value(item, elem, struct, jpath, f"{spath}.{key}")
                if got is not _DROP:
                    out[key] = got
            return out
        if kind == "slice":
            if not isinstance(v, list):
                self.type_error(_json_kind(v), struct, jpath, node)
                return _DROP
            elem_node = node.items
            if elem_node is None:
                return v
            items: list[Any] = []
            for i, item in enumerate(v):
                if item is None:
                    items.append(_zero(elem_node))
                    continue
                got = self.value(item, elem_node, struct, jpath, f"{spath}[{i}]")
                items.append(_zero(elem_node) if got is _DROP else got)
            return items
        return self.scalar(v, node, kind, struct, jpath)

    def scalar(self, v: Any, node: Node, kind: str, struct: str, jpath: list[str]) -> Any:
        if kind == "string":
            if isinstance(v, str):
                return v
            self.type_error(_json_kind(v), struct, jpath, node)
            return _DROP
        if kind in _INT_RANGES:
            if isinstance(v, int) and not isinstance(v, bool):
                lo, hi = _INT_RANGES[kind]
                if lo <= v <= hi:
                    return v
                self.type_error(f"number {v}", struct, jpath, node)
            elif isinstance(v, float):
                self.type_error(f"number {_go_number(v)}", struct, jpath, node)
            else:
                self.type_error(_json_kind(v), struct, jpath, node)
            return _DROP
        if kind in ("float64", "float32"):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return v
            self.type_error(_json_kind(v), struct, jpath, node)
            return _DROP
        if kind == "bool":
            if isinstance(v, bool):
                return v
            self.type_error(_json_kind(v), struct, jpath, node)
            return _DROP
        if kind == "bytes":
            if not isinstance(v, str):
                self.type_error(_json_kind(v), struct, jpath, node)
                return _DROP
            err = _base64_error(v)
            if err is not None:
                if self.first_error is None:
                    self.first_error = err
                return _DROP
            return v
        if kind == "quantity":
            # Quantity.UnmarshalJSON: quotes stripped, then ParseQuantity on whatever is left.
            if isinstance(v, (dict, list, bool)):
                self.fail(f"quantities must match the regular expression '{_QUANTITY_REGEX}'")
            try:
                return _canonical_quantity_text(v) if isinstance(v, str) else canonical_quantity(v)
            except QuantityError as exc:
                self.fail(str(exc))
        if kind == "intstr":
            if isinstance(v, str):
                return v
            if isinstance(v, int) and not isinstance(v, bool):
                if -(2**31) <= v < 2**31:
                    return v
                self.fail(f"json: cannot unmarshal number {v} into Go value of type int32")
            what = f"number {_go_number(v)}" if isinstance(v, float) else _json_kind(v)
            self.fail(f"json: cannot unmarshal {what} into Go value of type int32")
        if kind in ("time", "microtime"):
            if not isinstance(v, str):
                self.fail(f"json: cannot unmarshal {_json_kind(v)} into Go value of type string")
            try:
                return _canonical_time(v, kind == "microtime")
            except _TimeError as exc:
                self.fail(str(exc))
        return v  # any: kept as sent

    def struct(self, v: dict[str, Any], node: Node, jpath: list[str], spath: str) -> dict[str, Any]:
        props = node.properties
        name = node.ref_name or "Object"
        out: dict[str, Any] = {}
        for key, item in v.items():
            child = props.get(key)
            if child is None:
                self.unknown.append(f"{spath}.{key}" if spath else key)
                continue
            got = self.value(item, child, name, [*jpath, key], f"{spath}.{key}" if spath else key)
            if got is not _DROP:
                out[key] = got
        return out


_QUANTITY_REGEX = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"


def _unknown_outcome(decoder_kind: str, version: str, unknown: list[str], field_validation: str) -> list[str]:
    if not unknown:
        return []
    if field_validation == "Strict":
        fields = ", ".join(f"unknown field {_quote(p)}" for p in unknown)
        raise bad_request(
            f'{decoder_kind} in version "{version}" cannot be handled as a {decoder_kind}: '
            f"strict decoding error: {fields}"
        )
    if field_validation == "Ignore":
        return []
    return [f"unknown field {_quote(p)}" for p in unknown]


def sent_as_stored(obj: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """The top-level maps and lists of ``obj`` whose JSON is exactly ``stored``'s (types and key order included),
    copied (the caller may change what it sent). Such a field came out of the write path when it was stored and
    would come out of it unchanged, so the decoders (here and :mod:`.crd`) skip it."""
    kept: dict[str, Any] = {}
    for key, value in obj.items():
        if isinstance(value, (dict, list)) and key in stored:
            sent = fastjson.dumps(value)
            if sent == fastjson.dumps(stored[key]):
                kept[key] = fastjson.loads(sent)
    return kept


def decode_builtin(
    schema: KindSchema, obj: dict[str, Any], *, field_validation: str = "Warn", stored: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Decode ``obj`` into the built-in kind as the apiserver does; returns (the object as stored, warnings).

    Raises 400 BadRequest for type errors (first one, Go's wording), malformed quantities/times, and for
    unknown fields under ``fieldValidation=Strict`` (all of them, comma-joined).

    ``stored``: on an update, the object as stored, which this function decoded. A top-level field sent exactly
    as stored (the same JSON, types included) decodes to itself (no unknown field, no type error, canonical
    quantities and times), so it is copied instead of walked: a status write sends back the spec and metadata
    it read.
    """
    dec = _Decoder(schema.kind, schema.version)
    if not isinstance(obj, dict):
        dec.fail(f"json: cannot unmarshal {_json_kind(obj)} into Go value of type {_go_type(schema.root)}")
    kept = sent_as_stored(obj, stored) if stored is not None else {}
    out = dec.struct({k: v for k, v in obj.items() if k not in kept} if kept else obj, schema.root, [], "")
    if kept:
        out = {k: kept[k] if k in kept else out[k] for k in obj if k in kept or k in out}
    if dec.first_error is not None:
        dec.fail(dec.first_error)
    warnings = _unknown_outcome(schema.kind, schema.version, dec.unknown, field_validation)
    return out, warnings
