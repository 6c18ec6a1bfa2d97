"""Tests for :mod:`dispatcher.placement.hami.gojson`: Go's ``encoding/json`` as HAMi's annotations meet it.

Every expected value was printed by Go itself (go1.26.8, ``go run tests/placement/hami/gocases.go``):
``json.Unmarshal``'s syntax errors (HAMi logs them for an unreadable annotation) and ``json.Marshal`` of a string
(how HAMi writes the UUIDs and profile names in its annotations). The decoders' type errors are tested with the
annotations they belong to (test_nodecodec.py, test_podcodec.py).
"""

from __future__ import annotations

import pytest

from dispatcher.placement.hami.gojson import _go_json_string, _go_json_syntax_error, _load_go_json
from dispatcher.placement.hami.names import HamiFormatError

# json.Unmarshal(text, &v) with v of type any: (text, error text, "" when valid)
SYNTAX = [
    ("[]", ""),
    ("null", ""),
    (" 1 ", ""),
    ('"x"', ""),
    ("[1e5,-0,0.5]", ""),
    ('{"a":[true,false,null]}', ""),
    ("", "unexpected end of JSON input"),
    ("[1,]", "invalid character ']' looking for beginning of value"),
    ('{"a" 1}', "invalid character '1' after object key"),
    ('{"a":1,}', "invalid character '}' looking for beginning of object key string"),
    ("[1 2]", "invalid character '2' after array element"),
    ("01", "invalid character '1' after top-level value"),
    ("tru", "invalid character ' ' in literal true (expecting 'e')"),
    ("trux", "invalid character 'x' in literal true (expecting 'e')"),
    ("nul", "invalid character ' ' in literal null (expecting 'l')"),
    ('"\x01"', "invalid character '\\x01' in string literal"),
    ("1.", "invalid character ' ' after decimal point in numeric literal"),
    ("1.a", "invalid character 'a' after decimal point in numeric literal"),
    ("-", "invalid character ' ' in numeric literal"),
    ("-a", "invalid character 'a' in numeric literal"),
    ("1e", "invalid character ' ' in exponent of numeric literal"),
    ("1ea", "invalid character 'a' in exponent of numeric literal"),
    ('"\\q"', "invalid character 'q' in string escape code"),
    ("[1] x", "invalid character 'x' after top-level value"),
    ("{1:2}", "invalid character '1' looking for beginning of object key string"),
    ("[", "unexpected end of JSON input"),
    ("{", "unexpected end of JSON input"),
    ('"abc', "unexpected end of JSON input"),
    ("[NaN]", "invalid character 'N' looking for beginning of value"),
    ("'a'", "invalid character '\\'' looking for beginning of value"),
    ('"\\u12"', "invalid character '\"' in \\u hexadecimal character escape"),
    ('"\\u12x4"', "invalid character 'x' in \\u hexadecimal character escape"),
]

# json.Marshal(s) for a string s
MARSHAL = [
    ("abc", '"abc"'),
    ("<a&b>", '"\\u003ca\\u0026b\\u003e"'),
    ("\u2028\u2029", '"\\u2028\\u2029"'),
    ("é", '"é"'),
    ("\x01\x1f", '"\\u0001\\u001f"'),
    ("tab\t", '"tab\\t"'),
    ('q"', '"q\\""'),
    ("\\", '"\\\\"'),
    ("\x08\x0c\n\r", '"\\b\\f\\n\\r"'),
    ("\x7f", '"\x7f"'),
]


@pytest.mark.parametrize(("text", "error"), SYNTAX)
def test_syntax_errors_read_as_go_writes_them(text: str, error: str) -> None:
    assert _go_json_syntax_error(text) == (error or None)
    if error:
        with pytest.raises(HamiFormatError) as exc:
            _load_go_json(text)
        assert str(exc.value) == error
    else:
        _load_go_json(text)


@pytest.mark.parametrize(("s", "encoded"), MARSHAL)
def test_strings_encoded_as_go_marshals_them(s: str, encoded: str) -> None:
    assert _go_json_string(s) == encoded
