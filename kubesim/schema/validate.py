"""OpenAPI validation of custom resources with kube-openapi's messages, and the list-type invariants.

The schema checks apiextensions-apiserver makes (types, formats, enums, bounds, lengths, patterns, required and
unknown-to-the-schema combinators ``anyOf``/``oneOf``/``allOf``/``not``), each failure collected as a field cause,
and the ``x-kubernetes-list-type`` set/map invariants. On updates, validation ratchets: a subtree equal to the
stored one is not re-validated (CRDValidationRatcheting, on by default since 1.30). :mod:`.crd` runs them as part
of the whole custom-resource pipeline.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import uuid
from collections.abc import Sequence
from datetime import datetime
from fractions import Fraction
from functools import cache
from typing import Any

from ..errors import Cause
from .gosemantics import _go_value, _quote, _schema_type, go_float
from .model import Node


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


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
