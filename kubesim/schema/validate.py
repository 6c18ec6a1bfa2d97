"""Request-time checks: decoding of built-in kinds, and pruning/defaulting/validation of custom resources.

Built-in kinds are decoded by the apiserver into Go structs with ``encoding/json`` semantics; the first type
error fails the request with **400** and Go's own wording (``json: cannot unmarshal string into Go struct field
JobSpec.spec.parallelism of type int32``), custom unmarshalers (Quantity, IntOrString, Time) fail with theirs,
unknown fields are dropped and reported as warnings, or fail the request under ``fieldValidation=Strict``.
Values are re-serialised as Go would: quantities and times in canonical form.

Custom resources follow apiextensions-apiserver: structural pruning (unknown fields dropped, same warnings and
strict errors), ObjectMeta coercion of ``metadata``, structural defaulting, then OpenAPI validation with
kube-openapi's messages, list-type checks, and CEL rules (skipped, with the apiserver's note, when an earlier
error is blocking). All errors are collected and raised as one **422** Invalid. On updates, validation ratchets:
a subtree equal to the stored one is not re-validated (CRDValidationRatcheting, on by default since 1.30).
"""

from __future__ import annotations

import base64
import binascii
import calendar
import ipaddress
import math
import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from functools import cache, lru_cache
from math import ceil
from typing import Any, NoReturn

from kubecommon.quantity import QuantityError, parse_quantity

from ..errors import Cause, bad_request, go_repr, invalid
from . import cel
from .model import KindSchema, Node

__all__ = [
    "apply_crd",
    "canonical_quantity",
    "decode_builtin",
    "go_float",
    "parse_go_time",
]

_DROP: Any = object()

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_RAW_JSON = ("io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1", "io.k8s.apimachinery.pkg.runtime.RawExtension")

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1), "int": (-(2**63), 2**63 - 1)}


# -- Go-style rendering ------------------------------------------------------------------------------


def go_float(value: float) -> str:
    """A float64 as Go's ``%v`` prints it (shortest digits; exponent form from 1e+06 and below 1e-04)."""
    if value == 0:
        return "0"
    if math.isnan(value) or math.isinf(value):
        return {"inf": "+Inf", "-inf": "-Inf"}.get(repr(value), "NaN")
    sign, digits_t, exp = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exp, int)
    digits = "".join(map(str, digits_t))
    nd = len(digits)
    dp = nd + exp  # position of the decimal point relative to the digits
    e = dp - 1
    prefix = "-" if sign else ""
    if e < -4 or e >= 6:  # %v is %g with the shortest digits; exponent form decided at precision 6
        mant = digits[0] + ("." + digits[1:] if nd > 1 else "")
        return f"{prefix}{mant}e{'-' if e < 0 else '+'}{abs(e):02d}"
    if dp <= 0:
        return f"{prefix}0.{'0' * -dp}{digits}"
    if dp >= nd:
        return f"{prefix}{digits}{'0' * (dp - nd)}"
    return f"{prefix}{digits[:dp]}.{digits[dp:]}"


def _go_number(value: Any) -> str:
    """A JSON number as its literal would read (what Go puts in ``number 1.5``)."""
    if isinstance(value, float):
        text = repr(value)
        return text.replace("e+", "e")
    return str(value)


def _json_kind(value: Any) -> str:
    """The JSON value kind Go names in UnmarshalTypeError (``string``, ``number``, ``bool`` …)."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "null"


def _schema_type(value: Any) -> str:
    """The OpenAPI type name kube-openapi gives a decoded value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "unknown"


def _quote(text: str) -> str:
    """Go's ``%q`` / strconv.Quote for the common cases."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _go_value(value: Any) -> str:
    """A bad value as ``field.Error.ErrorBody`` prints it (simple types plainly, strings quoted)."""
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{_quote(str(k))}:{_go_sharp(v)}" for k, v in value.items())
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(_go_sharp(v) for v in value) + "}"
    return go_repr(value)


def _go_sharp(value: Any) -> str:
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}"
    if isinstance(value, float):
        return go_float(value)
    if value is None:
        return "interface {}(nil)"
    return _go_value(value)


# -- Go time parsing ---------------------------------------------------------------------------------

_LAYOUT = "2006-01-02T15:04:05Z07:00"
_LAYOUT_MICRO = "2006-01-02T15:04:05.000000Z07:00"


class _TimeError(ValueError):
    pass


def _getnum(s: str, fixed: bool) -> tuple[int, str] | None:
    if not s or not s[0].isdigit() or not s[0].isascii():
        return None
    if len(s) < 2 or not (s[1].isdigit() and s[1].isascii()):
        return None if fixed else (int(s[0]), s[1:])
    return int(s[:2]), s[2:]


def parse_go_time(value: str, *, micro: bool = False) -> datetime:
    """``time.Parse(time.RFC3339, value)`` (or metav1's RFC3339Micro), with Go's error messages."""
    layout = _LAYOUT_MICRO if micro else _LAYOUT

    def bad(rest: str, elem: str) -> NoReturn:
        raise _TimeError(
            f"parsing time {_quote(value)} as {_quote(layout)}: cannot parse {_quote(rest)} as {_quote(elem)}"
        )

    def out_of_range(what: str) -> NoReturn:
        raise _TimeError(f"parsing time {_quote(value)}: {what} out of range")

    s = value
    if len(s) < 4 or not all(c.isdigit() and c.isascii() for c in s[:4]):
        bad(s, "2006")
    year, s = int(s[:4]), s[4:]
    fields: dict[str, int] = {}
    for sep, elem, name, fixed, limit in (
        ("-", "01", "month", True, 12),
        ("-", "02", "day", True, 31),
        ("T", "15", "hour", False, 23),
        (":", "04", "minute", True, 59),
        (":", "05", "second", True, 59),
    ):
        if not s.startswith(sep):
            bad(s, sep)
        s = s[len(sep) :]
        got = _getnum(s, fixed)
        if got is None:
            bad(s, elem)
        num, s = got
        if (name == "month" and (num < 1 or num > limit)) or (name not in {"day", "month"} and num > limit):
            out_of_range(name)
        fields[name] = num
    micros = 0
    if micro:
        if len(s) < 7 or s[0] not in ".," or not all(c.isdigit() and c.isascii() for c in s[1:7]):
            bad(s, ".000000")
        micros, s = int(s[1:7]), s[7:]
    elif len(s) >= 2 and s[0] in ".," and s[1].isdigit():
        n = 1
        while n < len(s) and s[n].isdigit() and s[n].isascii():
            n += 1
        micros = int((s[1:n] + "000000")[:6])
        s = s[n:]
    offset = 0
    if s.startswith("Z"):
        s = s[1:]
    else:
        if len(s) < 6 or s[3] != ":" or s[0] not in "+-":
            bad(s, "Z07:00")
        hh, mm = _getnum(s[1:3], True), _getnum(s[4:6], True)
        if hh is None or mm is None:
            bad(s, "Z07:00")
        if hh[0] > 24:
            out_of_range("time zone offset hour")
        if mm[0] > 60:
            out_of_range("time zone offset minute")
        offset = (hh[0] * 60 + mm[0]) * (1 if s[0] == "+" else -1)
        s = s[6:]
    if s:
        raise _TimeError(f"parsing time {_quote(value)}: extra text: {_quote(s)}")
    month, day = fields["month"], fields["day"]
    last_day = calendar.monthrange(year, month)[1] if year > 0 else 31
    if day < 1 or day > last_day:
        out_of_range("day")
    try:
        local = datetime(
            max(year, 1), month, day, fields["hour"], fields["minute"], fields["second"], micros, tzinfo=UTC
        )
    except ValueError as exc:  # pragma: no cover - guarded above
        raise _TimeError(f"parsing time {_quote(value)}: {exc}") from None
    return local - timedelta(minutes=offset)


def _format_time(moment: datetime, *, micro: bool) -> str:
    if micro:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@lru_cache(maxsize=4096)
def _canonical_time(value: str, micro: bool) -> str:
    """A time as the apiserver stores it (parsed, then formatted in UTC); memoized, as every write repeats the
    same few timestamps. A malformed one raises each time (exceptions are not cached)."""
    return _format_time(parse_go_time(value, micro=micro), micro=micro)


# -- Quantity canonical form -------------------------------------------------------------------------

_DECIMAL_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIX = {0: "", 10: "Ki", 20: "Mi", 30: "Gi", 40: "Ti", 50: "Pi", 60: "Ei"}
_SUFFIX_RE = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")


@lru_cache(maxsize=4096)
def _canonical_quantity_text(value: str) -> str:
    """:func:`canonical_quantity` of a string, memoized (requests and limits repeat on every object)."""
    return canonical_quantity(value)


def canonical_quantity(value: str | int | float) -> str:
    """``Quantity.String()`` after ``ParseQuantity``: how a real server stores ``cpu: 0.5`` (``500m``)."""
    text = value if isinstance(value, str) else _go_number(value)
    text = text.strip()
    amount = parse_quantity(text)
    m = _SUFFIX_RE.match(text)
    suffix = m.group(2) if m else ""
    if suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"):
        fmt = "binary"
    elif suffix[:1] in ("e", "E"):
        fmt = "exponent"
    else:
        fmt = "decimal"
    negative = amount < 0
    mag = -amount if negative else amount
    if mag != 0:
        # Rounded up to the smallest unit the apiserver keeps (1n).
        mag = Fraction(ceil(mag * 10**9), 10**9)
    if mag == 0:
        return "0"
    if fmt == "binary" and (mag < 1024 or mag.denominator != 1):
        fmt = "decimal"
    sign = "-" if negative else ""
    if fmt == "binary":
        n = int(mag)
        exp = 0
        while n % 1024 == 0 and exp < 60:
            n //= 1024
            exp += 10
        return f"{sign}{n}{_BINARY_SUFFIX[exp]}"
    # Decimal: integer mantissa, exponent a multiple of 3, as large as possible.
    scaled = mag * 10**9
    mantissa = int(scaled)
    exp10 = -9
    while mantissa % 10 == 0 and mantissa:
        mantissa //= 10
        exp10 += 1
    rem = exp10 % 3
    if rem:
        mantissa *= 10**rem
        exp10 -= rem
    if fmt == "exponent":
        return f"{sign}{mantissa}" + (f"e{exp10}" if exp10 else "")
    if exp10 in _DECIMAL_SUFFIX:
        return f"{sign}{mantissa}{_DECIMAL_SUFFIX[exp10]}"
    # Beyond E: the apiserver falls back to an exponent.
    return f"{sign}{mantissa}e{exp10}"


# -- base64 as Go's StdEncoding decodes it -------------------------------------------------------------

_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _base64_error(src: str) -> str | None:
    """None if ``src`` decodes; else Go's ``illegal base64 data at input byte N``."""
    si, n = 0, len(src)
    while si < n:
        j = 0
        while j < 4:
            if si == n:
                if j == 0:
                    return None
                return f"illegal base64 data at input byte {si - j}"
            ch = src[si]
            si += 1
            if ch in _B64:
                j += 1
                continue
            if ch in "\r\n":
                continue
            if ch != "=" or j < 2:
                return f"illegal base64 data at input byte {si - 1}"
            if j == 2:
                while si < n and src[si] in "\r\n":
                    si += 1
                if si == n:
                    return f"illegal base64 data at input byte {n}"
                if src[si] != "=":
                    return f"illegal base64 data at input byte {si - 1}"
                si += 1
            while si < n and src[si] in "\r\n":
                si += 1
            if si < n:
                return f"illegal base64 data at input byte {si}"
            return None
    return None


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


def decode_builtin(
    schema: KindSchema, obj: dict[str, Any], *, field_validation: str = "Warn"
) -> tuple[dict[str, Any], list[str]]:
    """Decode ``obj`` into the built-in kind as the apiserver does; returns (the object as stored, warnings).

    Raises 400 BadRequest for type errors (first one, Go's wording), malformed quantities/times, and for
    unknown fields under ``fieldValidation=Strict`` (all of them, comma-joined).
    """
    dec = _Decoder(schema.kind, schema.version)
    if not isinstance(obj, dict):
        dec.fail(f"json: cannot unmarshal {_json_kind(obj)} into Go value of type {_go_type(schema.root)}")
    out = dec.struct(obj, schema.root, [], "")
    if dec.first_error is not None:
        dec.fail(dec.first_error)
    warnings = _unknown_outcome(schema.kind, schema.version, dec.unknown, field_validation)
    return out, warnings


# -- custom resources: pruning -----------------------------------------------------------------------


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Pruner:
    def __init__(self, schema: KindSchema) -> None:
        self.schema = schema
        #: Pruned paths (reported sorted, as PruneWithOptions sorts them).
        self.unknown: list[str] = []
        #: Unknown metadata fields, from ObjectMeta coercion (reported after the pruned ones, in walk order).
        self.meta_unknown: list[str] = []
        self.meta_node = schema.schemas.definition(OBJECT_META)

    def metadata(self, value: dict[str, Any], path: str) -> dict[str, Any]:
        """ObjectMeta coercion: only ObjectMeta's fields survive (unknown ones reported), types as in Go."""
        dec = _Decoder(self.schema.kind, self.schema.version)
        out = dec.struct(value, self.meta_node, ["metadata"], path)
        if dec.first_error is not None:
            # Go's field path starts at ObjectMeta for a custom resource's metadata.
            dec.fail(dec.first_error)
        self.meta_unknown.extend(dec.unknown)
        return out

    def prune(self, value: Any, node: Node | None, path: str, resource_root: bool = False) -> None:
        if node is not None and node.preserve_unknown:
            self.skip(value, node, path)
            return
        if isinstance(value, dict):
            if node is None:
                for key in list(value):
                    self.unknown.append(_join(path, key))
                    del value[key]
                return
            props = node.properties
            addl = node.additional_properties
            is_resource = resource_root or node.embedded_resource
            for key in list(value):
                item = value[key]
                if is_resource:
                    if key in ("apiVersion", "kind") and isinstance(item, str):
                        continue
                    if key == "metadata" and isinstance(item, dict):
                        value[key] = self.metadata(item, _join(path, key))
                        continue
                if type(item) is float and item.is_integer() and abs(item) < 1e21:
                    # Go decodes JSON numbers into int64 when it can and writes float64s without ".0":
                    # a stored 2.0 reads back as 2.
                    value[key] = item = int(item)
                child = props.get(key)
                if child is not None:
                    self.prune(item, child, _join(path, key))
                elif isinstance(addl, Node):
                    self.prune(item, addl, _join(path, key))
                elif addl is True:
                    continue
                else:
                    self.unknown.append(_join(path, key))
                    del value[key]
        elif isinstance(value, list):
            items = node.items if node is not None else None
            for i, item in enumerate(value):
                if type(item) is float and item.is_integer() and abs(item) < 1e21:
                    value[i] = int(item)
                    continue
                self.prune(item, items, f"{path}[{i}]")

    def skip(self, value: Any, node: Node, path: str) -> None:
        """x-kubernetes-preserve-unknown-fields: keep unknown fields, prune inside the specified ones."""
        if isinstance(value, dict):
            props = node.properties
            addl = node.additional_properties
            for key in list(value):
                item = value[key]
                if node.embedded_resource and key in ("apiVersion", "kind"):
                    continue
                if node.embedded_resource and key == "metadata" and isinstance(item, dict):
                    value[key] = self.metadata(item, _join(path, key))
                    continue
                child = props.get(key)
                if child is not None:
                    self.prune(item, child, _join(path, key))
                elif isinstance(addl, Node):
                    self.prune(item, addl, _join(path, key))
        elif isinstance(value, list) and node.items is not None:
            for i, item in enumerate(value):
                self.prune(item, node.items, f"{path}[{i}]")


# -- custom resources: defaulting --------------------------------------------------------------------


def _clone(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value


def _default(value: Any, node: Node, resource_root: bool = False) -> None:
    """Structural defaulting: non-nullable nulls dropped (or defaulted), absent fields defaulted, recursively."""
    if isinstance(value, dict):
        props = node.properties
        for key, child in props.items():
            if (
                child.has_default
                and child.default is not None
                and (key not in value or (value[key] is None and not child.nullable))
            ):
                if resource_root and key == "metadata":
                    continue
                value[key] = _clone(child.default)
        addl = node.additional_properties
        for key in list(value):
            item = value[key]
            if (resource_root or node.embedded_resource) and key == "metadata":
                continue
            found = props.get(key)
            if found is None:
                if not isinstance(addl, Node):
                    continue
                child = addl
                if item is None and not child.nullable:
                    if child.has_default and child.default is not None:
                        value[key] = item = _clone(child.default)
                    else:
                        del value[key]
                        continue
            else:
                child = found
                if item is None and not child.nullable:
                    del value[key]
                    continue
            if isinstance(item, (dict, list)):
                _default(item, child, child.embedded_resource)
    elif isinstance(value, list):
        items = node.items
        if items is None:
            return
        for i, item in enumerate(value):
            current = item
            if current is None and not items.nullable and items.has_default and items.default is not None:
                value[i] = current = _clone(items.default)
            if isinstance(current, (dict, list)):
                _default(current, items, items.embedded_resource)


# -- custom resources: validation --------------------------------------------------------------------

_BLOCKING = frozenset(
    {"FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong", "FieldValueTooMany", "FieldValueTypeInvalid"}
)


@cache
def _regex(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:  # an RE2 construct Python does not know: not checked
        return None


_DATE_TIME_RE = re.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
_MAC_RE = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{4}\.){2}[0-9A-Fa-f]{4}$")
_HOSTNAME_RE = re.compile(
    r"^([a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*\.?$"
)
_DURATION_RE = re.compile(r"^(([+-]?\d+(\.\d+)?)(ns|us|µs|μs|ms|s|m|h|d|w)\s*)+$")


def _is_date(text: str) -> bool:
    try:
        datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        return False
    return len(text) == 10


def _format_ok(fmt: str, text: str) -> bool:
    """The string formats kube-openapi's default registry checks (others pass)."""
    if fmt in ("date-time", "datetime"):
        if len(text) < 4:
            return False
        parts = text.lower().split("t")
        if len(parts) < 2 or not _is_date(parts[0]):
            return False
        m = _DATE_TIME_RE.match(parts[1])
        if m is None:
            return False
        return m.group(1) <= "23" and m.group(2) <= "59" and m.group(3) <= "59"
    if fmt == "date":
        return _is_date(text)
    if fmt == "byte":
        try:
            base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            return False
        return True
    if fmt in ("uuid", "uuid3", "uuid4", "uuid5"):
        try:
            u = uuid.UUID(text)
        except ValueError:
            return False
        return fmt == "uuid" or u.version == int(fmt[-1])
    if fmt == "ipv4":
        try:
            ipaddress.IPv4Address(text)
        except ValueError:
            return False
        return True
    if fmt == "ipv6":
        try:
            ipaddress.IPv6Address(text)
        except ValueError:
            return False
        return True
    if fmt == "cidr":
        try:
            ipaddress.ip_network(text, strict=False)
        except ValueError:
            return False
        return "/" in text
    if fmt == "mac":
        return bool(_MAC_RE.match(text))
    if fmt == "hostname":
        return len(text) <= 255 and bool(_HOSTNAME_RE.match(text))
    if fmt == "duration":
        return bool(_DURATION_RE.match(text))
    return True


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _map_key(item: Any, keys: Sequence[str]) -> tuple[Any, ...] | None:
    if not isinstance(item, dict):
        return None
    return tuple(_hashable(item.get(k)) for k in keys)


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return (type(value).__name__, value)


def _correlate_items(node: Node, old: Any) -> dict[tuple[Any, ...], Any] | None:
    """Old list items by map key, for ``x-kubernetes-list-type: map`` (the only lists the apiserver correlates)."""
    if node.list_type != "map" or not isinstance(old, list) or not node.list_map_keys:
        return None
    keys = node.list_map_keys
    out: dict[tuple[Any, ...], Any] = {}
    for item in old:
        k = _map_key(item, keys)
        if k is not None:
            out.setdefault(k, item)
    return out


class _Validator:
    """OpenAPI validation with kube-openapi's messages, collected as field causes."""

    def __init__(self) -> None:
        self.causes: list[Cause] = []

    def add(self, field: str, message: str, reason: str) -> None:
        self.causes.append(Cause(field, message, reason))

    def composite(self, message: str) -> None:
        # go-openapi composite errors are not field errors: the apiserver reports them at the root.
        self.add("<nil>", f'Invalid value: "": {message}', "FieldValueInvalid")

    def validate(self, value: Any, node: Node, path: str, old: Any = None, has_old: bool = False) -> None:
        if has_old and _same(value, old):
            return  # ratcheting: an unchanged value is not re-validated
        self.schema(value, node, path, old, has_old, resource_root=False)

    def schema(self, value: Any, node: Node, path: str, old: Any, has_old: bool, resource_root: bool) -> None:
        raw = node.raw
        types: tuple[str, ...]
        if node.int_or_string:
            types = ("integer", "string")
        else:
            t = raw.get("t")
            types = (t,) if t else ()
        if value is None:
            if types and not node.nullable and "null" not in types:
                self.add(
                    path,
                    f'Invalid value: "null": {path} in body must be of type {",".join(types)}: "null"',
                    "FieldValueTypeInvalid",
                )
            if node.enum is not None and not node.nullable and not any(e is None for e in node.enum):
                self._enum_error(value, node, path)
            return
        if types:
            st = _schema_type(value)
            ok = (
                st in types
                or (st == "number" and "integer" in types and float(value).is_integer())
                or (st == "integer" and "number" in types)
            )
            if not ok:
                self.add(
                    path,
                    f'Invalid value: "{st}": {path} in body must be of type {",".join(types)}: "{st}"',
                    "FieldValueTypeInvalid",
                )
        if "any" in raw or "one" in raw or "all" in raw or "not" in raw:
            self.schema_props(value, node, path)
        if isinstance(value, str):
            self.string(value, node, path)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self.number(value, node, path)
        elif isinstance(value, list):
            self.array(value, node, path, old, has_old)
        if node.enum is not None:
            for allowed in node.enum:
                if _same(allowed, value) or (
                    isinstance(allowed, (int, float))
                    and isinstance(value, (int, float))
                    and not isinstance(allowed, bool)
                    and not isinstance(value, bool)
                    and allowed == value
                ):
                    break
            else:
                self._enum_error(value, node, path)
        if isinstance(value, dict):
            self.object(value, node, path, old, has_old, resource_root)

    def _enum_error(self, value: Any, node: Node, path: str) -> None:
        quoted = []
        for allowed in node.enum or ():
            text = allowed if isinstance(allowed, str) else _json_dumps(allowed)
            quoted.append(_quote(text))
        detail = "supported values: " + ", ".join(quoted) if quoted else ""
        self.add(
            path,
            f"Unsupported value: {_go_value(value)}" + (f": {detail}" if detail else ""),
            "FieldValueNotSupported",
        )

    def _sub(self, value: Any, node: Node, path: str) -> list[Cause]:
        sub = _Validator()
        sub.schema(value, node, path, None, False, resource_root=False)
        return sub.causes

    def schema_props(self, value: Any, node: Node, path: str) -> None:
        any_of = node.any_of
        if any_of:
            best: list[Cause] | None = None
            for alt in any_of:
                errs = self._sub(value, node=alt, path=path)
                if not errs:
                    best = None
                    break
                if best is None or len(errs) < len(best):
                    best = errs
            else:
                self.composite(f'"{path}" must validate at least one schema (anyOf)')
            if best:
                self.causes.extend(best)
        one_of = node.one_of
        if one_of:
            results: list[list[Cause]] = [self._sub(value, alt, path) for alt in one_of]
            valid = sum(1 for r in results if not r)
            if valid != 1:
                extra = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
                self.composite(f'"{path}" must validate one and only one schema (oneOf). {extra}')
                if valid == 0:
                    fewest: list[Cause] = min(results, key=_count)
                    self.causes.extend(fewest)
        all_of = node.all_of
        if all_of:
            failed = False
            for alt in all_of:
                errs = self._sub(value, alt, path)
                if errs:
                    failed = True
                    self.causes.extend(errs)
            if failed:
                self.composite(f'"{path}" must validate all the schemas (allOf)')
        not_node = node.not_
        if not_node is not None and not self._sub(value, not_node, path):
            self.composite(f'"{path}" must not validate the schema (not)')

    def string(self, value: str, node: Node, path: str) -> None:
        raw = node.raw
        max_len = raw.get("mxl")
        if max_len is not None and len(value) > max_len:
            unit = "byte" if max_len == 1 else "bytes"
            self.add(path, f"Too long: may not be more than {max_len} {unit}", "FieldValueTooLong")
        min_len = raw.get("mnl")
        if min_len is not None and len(value) < min_len:
            self.add(
                path,
                f"Invalid value: {_quote(value)}: {path} in body should be at least {min_len} chars long",
                "FieldValueInvalid",
            )
        pattern = raw.get("pt")
        if pattern is not None:
            rx = _regex(pattern)
            if rx is not None and not rx.search(value):
                self.add(
                    path,
                    f"Invalid value: {_quote(value)}: {path} in body should match '{pattern}'",
                    "FieldValueInvalid",
                )
        fmt = raw.get("f")
        if fmt and not _format_ok(fmt, value):
            self.add(
                path,
                f"Invalid value: {_quote(value)}: {path} in body must be of type {fmt}: {_quote(value)}",
                "FieldValueTypeInvalid",
            )

    def number(self, value: float, node: Node, path: str) -> None:
        raw = node.raw
        shown = _go_value(value)
        mult = raw.get("mo")
        if mult and (Fraction(str(value)) / Fraction(str(mult))).denominator != 1:
            self.add(
                path,
                f"Invalid value: {shown}: {path} in body should be a multiple of {go_float(float(mult))}",
                "FieldValueInvalid",
            )
        maximum = raw.get("mx")
        if maximum is not None:
            if raw.get("xmx") and value >= maximum:
                self.add(
                    path,
                    f"Invalid value: {shown}: {path} in body should be less than {go_float(float(maximum))}",
                    "FieldValueInvalid",
                )
            elif value > maximum:
                self.add(
                    path,
                    f"Invalid value: {shown}: {path} in body should be less than or equal to "
                    f"{go_float(float(maximum))}",
                    "FieldValueInvalid",
                )
        minimum = raw.get("mn")
        if minimum is not None:
            if raw.get("xmn") and value <= minimum:
                self.add(
                    path,
                    f"Invalid value: {shown}: {path} in body should be greater than {go_float(float(minimum))}",
                    "FieldValueInvalid",
                )
            elif value < minimum:
                self.add(
                    path,
                    f"Invalid value: {shown}: {path} in body should be greater than or equal to "
                    f"{go_float(float(minimum))}",
                    "FieldValueInvalid",
                )

    def array(self, value: list[Any], node: Node, path: str, old: Any, has_old: bool) -> None:
        raw = node.raw
        size = len(value)
        min_items = raw.get("mni")
        if min_items is not None and size < min_items:
            self.add(
                path,
                f"Invalid value: {size}: {path} in body should have at least {min_items} items",
                "FieldValueInvalid",
            )
        max_items = raw.get("mxi")
        if max_items is not None and size > max_items:
            unit = "item" if max_items == 1 else "items"
            self.add(path, f"Too many: {size}: must have at most {max_items} {unit}", "FieldValueTooMany")
        items = node.items
        if items is None:
            return
        by_key = _correlate_items(node, old) if has_old else None
        keys = node.list_map_keys or ()
        for i, item in enumerate(value):
            item_path = f"{path}[{i}]"
            if by_key is not None:
                k = _map_key(item, keys)
                if k is not None and k in by_key:
                    self.validate(item, items, item_path, by_key[k], True)
                    continue
            self.schema(item, items, item_path, None, False, resource_root=items.embedded_resource)

    def object(
        self, value: dict[str, Any], node: Node, path: str, old: Any, has_old: bool, resource_root: bool
    ) -> None:
        raw = node.raw
        size = len(value)
        min_props = raw.get("mnp")
        if min_props is not None and size < min_props:
            self.add(
                path,
                f"Invalid value: {size}: {path} in body should have at least {min_props} properties",
                "FieldValueInvalid",
            )
            return
        max_props = raw.get("mxp")
        if max_props is not None and size > max_props:
            unit = "item" if max_props == 1 else "items"
            self.add(path, f"Too many: {size}: must have at most {max_props} {unit}", "FieldValueTooMany")
            return
        old_map = old if has_old and isinstance(old, dict) else None
        props = node.properties
        addl = node.additional_properties
        is_resource = resource_root or node.embedded_resource
        if isinstance(addl, Node):
            for key, item in value.items():
                if key in props:
                    continue
                sub_path = _join(path, key)
                if old_map is not None and key in old_map:
                    self.validate(item, addl, sub_path, old_map[key], True)
                else:
                    self.schema(item, addl, sub_path, None, False, resource_root=addl.embedded_resource)
        for key, item in value.items():
            child = props.get(key)
            if child is None or (is_resource and key == "metadata"):
                continue
            sub_path = _join(path, key)
            if old_map is not None and key in old_map:
                self.validate(item, child, sub_path, old_map[key], True)
            else:
                self.schema(item, child, sub_path, None, False, resource_root=child.embedded_resource)
        for key in node.required:
            if key not in value:
                self.add(_join(path, key), "Required value", "FieldValueRequired")


def _count(causes: list[Cause]) -> int:
    return len(causes)


def _json_dumps(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"), sort_keys=True)


# -- list types --------------------------------------------------------------------------------------


def _list_types(value: Any, node: Node, path: str, old: Any, has_old: bool, out: list[Cause], root: bool) -> None:
    """``x-kubernetes-list-type`` set/map invariants: no duplicate items / keys."""
    if has_old and _same(value, old):
        return
    if isinstance(value, dict):
        props = node.properties
        addl = node.additional_properties
        old_map = old if has_old and isinstance(old, dict) else None
        for key, item in value.items():
            if root and key == "metadata":
                continue
            child = props.get(key)
            sub_path = _join(path, key)
            if child is None:
                if not isinstance(addl, Node):
                    continue
                child = addl
                sub_path = f"{path}[{key}]"
            if isinstance(item, (dict, list)):
                has = old_map is not None and key in old_map
                _list_types(item, child, sub_path, old_map.get(key) if old_map else None, has, out, False)
    elif isinstance(value, list):
        lt = node.list_type
        if lt == "set":
            seen: set[Any] = set()
            for i, item in enumerate(value):
                h = _hashable(item)
                if h in seen:
                    out.append(Cause(f"{path}[{i}]", f"Duplicate value: {_go_value(item)}", "FieldValueDuplicate"))
                seen.add(h)
        elif lt == "map" and node.list_map_keys:
            keys = node.list_map_keys
            seen_keys: set[Any] = set()
            for i, item in enumerate(value):
                k = _map_key(item, keys)
                if k is None:
                    continue
                if k in seen_keys:
                    shown = {key: item.get(key) for key in keys if key in item}
                    out.append(Cause(f"{path}[{i}]", f"Duplicate value: {_go_value(shown)}", "FieldValueDuplicate"))
                seen_keys.add(k)
        items = node.items
        if items is None:
            return
        by_key = _correlate_items(node, old) if has_old else None
        for i, item in enumerate(value):
            if isinstance(item, (dict, list)):
                old_item = None
                has = False
                if by_key is not None:
                    k = _map_key(item, node.list_map_keys or ())
                    if k is not None and k in by_key:
                        old_item, has = by_key[k], True
                _list_types(item, items, f"{path}[{i}]", old_item, has, out, False)


# -- CEL ---------------------------------------------------------------------------------------------


def _root_view(obj: Any) -> Any:
    """What CEL sees as ``self`` at a resource root: metadata limited to name and generateName."""
    if not isinstance(obj, dict):
        return obj
    view = dict(obj)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        view["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    return view


def _cel_field(path: str, field_path: str | None) -> str:
    if field_path:
        fp = field_path.strip()
        if fp.startswith("."):
            fp = fp[1:]
        if path:
            return path + fp if fp.startswith("[") else f"{path}.{fp}"
        return fp
    return path or "<nil>"


def _cel_walk(value: Any, node: Node, path: str, old: Any, has_old: bool, out: list[Cause], root: bool) -> None:
    if has_old and _same(value, old):
        return  # ratcheting (transition rules on an unchanged value pass by construction for these CRDs)
    rules = node.compiled_rules()
    if rules:
        self_value = _root_view(value) if root else value
        old_value = _root_view(old) if root and has_old else old
        type_name = node.type or ""
        for outcome in cel.evaluate(rules, self_value, old_value, has_old):
            if outcome.passed:
                continue
            rule = outcome.rule
            if outcome.error is not None:
                msg = f"{outcome.error} evaluating rule: {cel.rule_error_string(rule)}"
                if outcome.error == "no such overload":
                    msg = (
                        f"'no such overload': call arguments did not match a supported operator, function or macro "
                        f"signature for rule: {cel.rule_error_string(rule)}"
                    )
                out.append(Cause(path or "<nil>", f'Invalid value: "{type_name}": {msg}', "FieldValueInvalid"))
                continue
            field = _cel_field(path, rule.field_path)
            reason = rule.reason or "FieldValueInvalid"
            if reason == "FieldValueForbidden":
                out.append(Cause(field, f"Forbidden: {outcome.message}", reason))
            elif reason == "FieldValueRequired":
                out.append(Cause(field, f"Required value: {outcome.message}", reason))
            elif reason == "FieldValueDuplicate":
                out.append(Cause(field, f'Duplicate value: "{type_name}"', reason))
            else:
                out.append(Cause(field, f'Invalid value: "{type_name}": {outcome.message}', "FieldValueInvalid"))
    if isinstance(value, dict):
        props = node.properties
        addl = node.additional_properties
        old_map = old if has_old and isinstance(old, dict) else None
        for key, item in value.items():
            if (root or node.embedded_resource) and key == "metadata":
                continue
            child = props.get(key)
            if child is not None:
                sub_path = _join(path, key)
            elif isinstance(addl, Node):
                child = addl
                sub_path = f"{path}[{key}]"
            else:
                continue
            has = old_map is not None and key in old_map
            _cel_walk(item, child, sub_path, old_map.get(key) if old_map else None, has, out, child.embedded_resource)
    elif isinstance(value, list) and node.items is not None:
        items = node.items
        by_key = _correlate_items(node, old) if has_old else None
        keys = node.list_map_keys or ()
        for i, item in enumerate(value):
            old_item, has = None, False
            if by_key is not None:
                k = _map_key(item, keys)
                if k is not None and k in by_key:
                    old_item, has = by_key[k], True
            _cel_walk(item, items, f"{path}[{i}]", old_item, has, out, items.embedded_resource)


# -- custom resources: the whole pipeline --------------------------------------------------------------


def apply_crd(
    schema: KindSchema,
    obj: dict[str, Any],
    *,
    field_validation: str = "Warn",
    old: dict[str, Any] | None = None,
    subresource: str | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Prune, default and validate a custom resource as apiextensions-apiserver does.

    Returns (the object as it would be stored, warnings). Raises 400 for strict unknown fields or malformed
    metadata, 422 Invalid with every cause for schema and CEL violations. ``old`` is the stored object on
    updates (for transition rules and ratcheting). ``subresource`` is accepted for symmetry with the
    apiserver's status strategy, which validates the whole object the same way.
    """
    del subresource  # the status strategy validates the whole object exactly like the main one
    if not isinstance(obj, dict):
        raise bad_request(
            f'{schema.kind} in version "{schema.version}" cannot be handled as a {schema.kind}: '
            f"json: cannot unmarshal {_json_kind(obj)} into Go value of type map[string]interface {{}}"
        )
    data: dict[str, Any] = _clone(obj)
    pruner = _Pruner(schema)
    pruner.prune(data, schema.root, "", resource_root=True)
    unknown = sorted(pruner.unknown) + pruner.meta_unknown
    warnings = _unknown_outcome(schema.kind, schema.version, unknown, field_validation)
    _default(data, schema.root, resource_root=True)

    has_old = isinstance(old, dict)
    validator = _Validator()
    validator.schema(data, schema.root, "", old, has_old, resource_root=True)
    causes = validator.causes
    _list_types(data, schema.root, "", old, has_old, causes, True)
    if schema.has_rules:
        if any(c.reason in _BLOCKING for c in causes):
            causes.append(
                Cause(
                    "<nil>",
                    "Invalid value: null: some validation rules were not checked because the object was invalid; "
                    "correct the existing errors to complete validation",
                    "FieldValueInvalid",
                )
            )
        else:
            _cel_walk(data, schema.root, "", old, has_old, causes, True)
    if causes:
        unique: list[Cause] = []
        seen: set[str] = set()
        for c in causes:
            text = c.render()
            if text not in seen:
                seen.add(text)
                unique.append(c)
        meta = data.get("metadata")
        name = meta.get("name", "") if isinstance(meta, dict) else ""
        err = invalid(schema.kind, schema.group, str(name or ""), unique)
        err.warnings = list(warnings)  # kube-apiserver sends the pruning warnings with the 422 too
        raise err
    return data, warnings
