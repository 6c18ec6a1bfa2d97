"""Label and field selectors, parsed with the grammar of ``k8s.io/apimachinery/pkg/labels`` and ``fields``."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ApiError, bad_request

__all__ = ["FieldSelector", "LabelSelector", "parse_field_selector", "parse_label_selector"]

_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        if self.op in ("!=", "notin"):
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        try:
            have = int(labels[self.key])
        except ValueError:
            return False
        want = int(self.values[0])
        return have > want if self.op == "gt" else have < want


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    requirements: tuple[_Requirement, ...]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _check_key(key: str, selector: str) -> None:
    if not key or len(key) > 317 or not _KEY.match(key):
        raise bad_request(f"unable to parse requirement: invalid label key {key!r} in selector {selector!r}")


def _check_value(value: str, selector: str) -> None:
    if len(value) > 63 or not _VALUE.match(value):
        raise bad_request(f"unable to parse requirement: invalid label value: {value!r} in selector {selector!r}")


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse ``labelSelector`` (equality- and set-based). Errors are 400 BadRequest, as the server answers."""
    if not text or not text.strip():
        return LabelSelector(())
    reqs: list[_Requirement] = []
    for raw in _split_top(text):
        part = raw.strip()
        if not part:
            raise bad_request(f"unable to parse requirement: found '', expected: identifier in {text!r}")
        set_match = re.fullmatch(r"(\S+)\s+(in|notin)\s*\(([^)]*)\)", part)
        if set_match:
            key, op, raw_values = set_match.groups()
            values = tuple(v.strip() for v in raw_values.split(",")) if raw_values.strip() else ()
            _check_key(key, text)
            for v in values:
                _check_value(v, text)
            if not values and op == "in":
                raise bad_request(f"for 'in', 'notin' operators, values set can't be empty in {text!r}")
            reqs.append(_Requirement(key, op, values))
            continue
        if part.startswith("!"):
            key = part[1:].strip()
            _check_key(key, text)
            reqs.append(_Requirement(key, "!", ()))
            continue
        eq = re.fullmatch(r"([^=!<>\s]+)\s*(==|=|!=|>|<)\s*(\S*)", part)
        if eq:
            key, op, value = eq.groups()
            _check_key(key, text)
            if op in (">", "<"):
                try:
                    int(value)
                except ValueError:
                    raise bad_request(
                        "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer "
                        f"in {text!r}"
                    ) from None
                reqs.append(_Requirement(key, "gt" if op == ">" else "lt", (value,)))
                continue
            _check_value(value, text)
            reqs.append(_Requirement(key, "!=" if op == "!=" else "=", (value,)))
            continue
        if re.fullmatch(r"\S+", part):
            _check_key(part, text)
            reqs.append(_Requirement(part, "exists", ()))
            continue
        raise bad_request(f"unable to parse requirement: found unexpected token in {text!r}")
    return LabelSelector(tuple(reqs))


def selector_from_label_selector_object(sel: Mapping[str, Any] | None) -> LabelSelector:
    """A ``metav1.LabelSelector`` (matchLabels / matchExpressions) as a :class:`LabelSelector`."""
    if not sel:
        return LabelSelector(())
    reqs = [_Requirement(k, "=", (str(v),)) for k, v in (sel.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in sel.get("matchExpressions") or []:
        reqs.append(_Requirement(expr["key"], ops[expr["operator"]], tuple(expr.get("values") or ())))
    return LabelSelector(tuple(reqs))


FieldGetter = Callable[[Mapping[str, Any]], "str | None"]


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A parsed field selector: ``(field, must_equal, value)`` terms, all of which must hold."""

    terms: tuple[tuple[str, bool, str], ...]

    def matches(self, obj: Mapping[str, Any], getters: Mapping[str, FieldGetter]) -> bool:
        for field, equal, value in self.terms:
            have = getters[field](obj)
            have_s = "" if have is None else have
            if (have_s == value) != equal:
                return False
        return True

    def value_of(self, field: str) -> str | None:
        """The value an equality term pins ``field`` to (lets a list use an index, e.g. metadata.name)."""
        for f, equal, value in self.terms:
            if f == field and equal:
                return value
        return None


def parse_field_selector(text: str | None, supported: Mapping[str, FieldGetter], kind: str) -> FieldSelector:
    """Parse ``fieldSelector``; an unsupported field is the server's 400 ``field label "x" not supported for Kind``."""
    if not text or not text.strip():
        return FieldSelector(())
    terms: list[tuple[str, bool, str]] = []
    for raw in text.split(","):
        part = raw.strip()
        m = re.fullmatch(r"([^=!\s]+)\s*(==|=|!=)\s*(.*)", part)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = m.groups()
        if field not in supported:
            raise ApiError(400, "BadRequest", f'field label "{field}" not supported for {kind}')
        terms.append((field, op != "!=", value.strip()))
    return FieldSelector(tuple(terms))
