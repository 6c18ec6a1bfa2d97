"""Go's ``encoding/json`` as HAMi's annotations meet it, shared by the annotation codecs.

HAMi decodes its annotations with ``json.Unmarshal`` and logs Go's messages, so decoding here keeps Go's
behaviour where it shows: syntax errors with the scanner's wording (``invalid character 'G' looking for
beginning of value``), numbers kept as literal text for Go's range and form checks, the first
``UnmarshalTypeError`` reported after decoding goes on, case-insensitive field matching, and encoding strings
with Go's HTML-safe escapes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .gosemantics import _go_quote
from .names import HamiFormatError


def _quote_char(c: str) -> str:
    """``quoteChar`` of encoding/json's scanner."""
    if c == "'":
        return "'\\''"
    if c == '"':
        return "'\"'"
    return "'" + _go_quote(c)[1:-1] + "'"


class _Syntax(Exception):
    pass


def _go_json_syntax_error(text: str) -> str | None:
    """The message Go's ``json.Unmarshal`` gives for a syntax error in ``text``, or ``None`` when it is valid.

    A small recursive-descent checker with the contexts of encoding/json's scanner, so a legacy colon-form
    annotation reports ``invalid character 'G' looking for beginning of value`` as HAMi logs it.
    """
    n = len(text)
    ws = " \t\r\n"

    def bad(i: int, context: str) -> _Syntax:
        # At the end of input Go steps one more space through the scanner.
        return _Syntax(f"invalid character {_quote_char(text[i] if i < n else ' ')} {context}")

    def eof() -> _Syntax:
        return _Syntax("unexpected end of JSON input")

    def skip(i: int) -> int:
        while i < n and text[i] in ws:
            i += 1
        return i

    def digits(i: int) -> int:
        while i < n and "0" <= text[i] <= "9":
            i += 1
        return i

    def value(i: int) -> int:
        if i >= n:
            raise eof()
        c = text[i]
        if c == "{":
            return obj(i + 1)
        if c == "[":
            return arr(i + 1)
        if c == '"':
            return string(i + 1)
        if c == "-" or "0" <= c <= "9":
            return number(i)
        for word in ("true", "false", "null"):
            if c == word[0]:
                for k, expected in enumerate(word[1:], start=1):
                    if i + k >= n or text[i + k] != expected:
                        raise bad(i + k, f"in literal {word} (expecting {_quote_char(expected)})")
                return i + len(word)
        raise bad(i, "looking for beginning of value")

    def obj(i: int) -> int:
        i = skip(i)
        if i >= n:
            raise eof()
        if text[i] == "}":
            return i + 1
        while True:
            if i >= n:
                raise eof()
            if text[i] != '"':
                raise bad(i, "looking for beginning of object key string")
            i = skip(string(i + 1))
            if i >= n:
                raise eof()
            if text[i] != ":":
                raise bad(i, "after object key")
            i = skip(value(skip(i + 1)))
            if i >= n:
                raise eof()
            if text[i] == ",":
                i = skip(i + 1)
                continue
            if text[i] == "}":
                return i + 1
            raise bad(i, "after object key:value pair")

    def arr(i: int) -> int:
        i = skip(i)
        if i >= n:
            raise eof()
        if text[i] == "]":
            return i + 1
        while True:
            i = skip(value(i))
            if i >= n:
                raise eof()
            if text[i] == ",":
                i = skip(i + 1)
                continue
            if text[i] == "]":
                return i + 1
            raise bad(i, "after array element")

    def string(i: int) -> int:
        while True:
            if i >= n:
                raise eof()
            c = text[i]
            if c == '"':
                return i + 1
            if c == "\\":
                i += 1
                if i < n and text[i] in 'bfnrt\\/"':
                    i += 1
                    continue
                if i < n and text[i] == "u":
                    for k in range(1, 5):
                        if i + k >= n or text[i + k] not in "0123456789abcdefABCDEF":
                            raise bad(i + k, "in \\u hexadecimal character escape")
                    i += 5
                    continue
                raise bad(i, "in string escape code")
            if ord(c) < 0x20:
                raise bad(i, "in string literal")
            i += 1

    def number(i: int) -> int:
        if text[i] == "-":
            i += 1
            if i >= n or not "0" <= text[i] <= "9":
                raise bad(i, "in numeric literal")
        i = i + 1 if text[i] == "0" else digits(i)
        if i < n and text[i] == ".":
            i += 1
            if i >= n or not "0" <= text[i] <= "9":
                raise bad(i, "after decimal point in numeric literal")
            i = digits(i)
        if i < n and text[i] in "eE":
            i += 1
            if i < n and text[i] in "+-":
                i += 1
            if i >= n or not "0" <= text[i] <= "9":
                raise bad(i, "in exponent of numeric literal")
            i = digits(i)
        return i

    try:
        i = skip(value(skip(0)))
        if i < n:
            raise bad(i, "after top-level value")
    except _Syntax as exc:
        return str(exc)
    return None


class _IntLit(str):
    """A JSON integer literal, kept as text so Go's range and form checks can be applied."""


class _FloatLit(str):
    """A JSON number literal with a fraction or exponent."""


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def _load_go_json(text: str) -> Any:
    """``json.Unmarshal``'s first phase: a syntax check with Go's messages. Numbers stay literal text."""
    try:
        return json.loads(text, parse_int=_IntLit, parse_float=_FloatLit, parse_constant=_reject_constant)
    except ValueError:
        message = _go_json_syntax_error(text)
        raise HamiFormatError(message or "invalid JSON") from None


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (_IntLit, _FloatLit)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


class _TypeErrors:
    """Collects the first ``json.UnmarshalTypeError``; Go keeps decoding and reports the first one."""

    def __init__(self) -> None:
        self.first: str | None = None

    def add(self, struct: str, path: str, value: Any, go_type: str) -> None:
        if self.first is None:
            kind = _json_kind(value)
            shown = f"number {value}" if kind == "number" and go_type not in ("string", "bool") else kind
            self.first = f"json: cannot unmarshal {shown} into Go struct field {struct}.{path} of type {go_type}"

    def int_field(self, struct: str, path: str, value: Any, go_type: str, lo: int, hi: int, default: int) -> int:
        if value is None:
            return default
        if isinstance(value, _IntLit):
            number = int(value)
            if lo <= number <= hi:
                return number
        self.add(struct, path, value, go_type)
        return default

    def str_field(self, struct: str, path: str, value: Any, default: str) -> str:
        if value is None:
            return default
        if isinstance(value, str) and not isinstance(value, (_IntLit, _FloatLit)):
            return str(value)
        self.add(struct, path, value, "string")
        return default

    def bool_field(self, struct: str, path: str, value: Any, default: bool) -> bool:
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        self.add(struct, path, value, "bool")
        return default


_INT32 = (-(2**31), 2**31 - 1)
_UINT32 = (0, 2**32 - 1)
_UINT64 = (0, 2**64 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def _fold_fields(obj: Mapping[str, Any], names: Sequence[str], exact: Mapping[str, str]) -> dict[str, Any]:
    """Go's field matching: keys match exactly or case-insensitively, and a later key overrides an earlier one."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = exact.get(key) or key.lower()
        if name in names:
            out[name] = value
    return out


_HTML_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JSON_ESC = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _go_json_string(s: str) -> str:
    """``json.Marshal`` of a string: HTML-safe escapes, ``\\u00XX`` for other control characters."""
    out = ['"']
    for ch in s:
        if ch in _JSON_ESC:
            out.append(_JSON_ESC[ch])
        elif ch in _HTML_UNSAFE:
            out.append(_HTML_UNSAFE[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u00{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
