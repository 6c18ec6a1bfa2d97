"""Go's own renderings and parsers, as the apiserver's messages and stored objects show them.

What the decoding of built-in kinds (:mod:`.decode`) and the validation of custom resources (:mod:`.validate`,
:mod:`.crd`) share: values printed as Go prints them (``strconv.FormatFloat``, ``%v``, ``%#v``), JSON and OpenAPI
type names, ``time.Parse`` with the RFC 3339 layouts and the canonical time form, the canonical form of a
``resource.Quantity``, and the errors of Go's StdEncoding base64 decoder.
"""

from __future__ import annotations

import calendar
import math
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from math import ceil
from typing import Any, NoReturn

from kubecommon.quantity import parse_quantity

from ..errors import go_repr

__all__ = ["canonical_quantity", "go_float", "parse_go_time"]


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
