"""Tests for :mod:`dispatcher.placement.hami.gosemantics`: Go's numeric helpers, ``strconv`` and ``sort.Sort``.

Every expected value was printed by Go itself (go1.26.8, ``go run tests/placement/hami/gocases.go``): HAMi's
results depend on these semantics (float32 scores, int32 truncation, the order pdqsort leaves equal scores in,
strconv's messages in HAMi's errors), so the tables pin them to Go's behaviour, not to a reading of it.
"""

from __future__ import annotations

import pytest

from dispatcher.placement.hami.gosemantics import (
    _f32,
    _go_div,
    _go_parse_bool,
    _go_parse_int,
    _go_quote,
    _go_sort,
    _GoNumError,
    _i32,
    _parse_bool_true,
    _percent_of,
)

# strconv.Quote(s)
QUOTE = [
    ("abc", '"abc"'),
    ('a"b', '"a\\"b"'),
    ("a\\b", '"a\\\\b"'),
    ("a\nb", '"a\\nb"'),
    ("\x00", '"\\x00"'),
    ("\x7f", '"\\x7f"'),
    ("é", '"é"'),
    ("日本", '"日本"'),
    ("\xa0", '"\\u00a0"'),
    ("\u2028", '"\\u2028"'),
    ("tab\there", '"tab\\there"'),
    ("😀", '"😀"'),
    ("\U000e0001", '"\\U000e0001"'),
]

# strconv.ParseInt(s, 10, bits): (s, bits, value, error text or "")
PARSE_INT = [
    ("42", 64, 42, ""),
    ("+7", 64, 7, ""),
    ("-0", 64, 0, ""),
    ("007", 64, 7, ""),
    ("9223372036854775807", 64, 9223372036854775807, ""),
    (
        "9223372036854775808",
        64,
        9223372036854775807,
        'strconv.ParseInt: parsing "9223372036854775808": value out of range',
    ),
    ("-9223372036854775808", 64, -9223372036854775808, ""),
    (
        "-9223372036854775809",
        64,
        -9223372036854775808,
        'strconv.ParseInt: parsing "-9223372036854775809": value out of range',
    ),
    ("2147483647", 64, 2147483647, ""),
    ("2147483648", 64, 2147483648, ""),
    ("-2147483649", 64, -2147483649, ""),
    ("1.5", 64, 0, 'strconv.ParseInt: parsing "1.5": invalid syntax'),
    ("", 64, 0, 'strconv.ParseInt: parsing "": invalid syntax'),
    ("0x10", 64, 0, 'strconv.ParseInt: parsing "0x10": invalid syntax'),
    ("1_000", 64, 0, 'strconv.ParseInt: parsing "1_000": invalid syntax'),
    (" 1", 64, 0, 'strconv.ParseInt: parsing " 1": invalid syntax'),
    ("+", 64, 0, 'strconv.ParseInt: parsing "+": invalid syntax'),
    ("-", 64, 0, 'strconv.ParseInt: parsing "-": invalid syntax'),
    ("１", 64, 0, 'strconv.ParseInt: parsing "１": invalid syntax'),
    ("42", 32, 42, ""),
    ("+7", 32, 7, ""),
    ("-0", 32, 0, ""),
    ("007", 32, 7, ""),
    ("9223372036854775807", 32, 2147483647, 'strconv.ParseInt: parsing "9223372036854775807": value out of range'),
    ("9223372036854775808", 32, 2147483647, 'strconv.ParseInt: parsing "9223372036854775808": value out of range'),
    ("-9223372036854775808", 32, -2147483648, 'strconv.ParseInt: parsing "-9223372036854775808": value out of range'),
    ("-9223372036854775809", 32, -2147483648, 'strconv.ParseInt: parsing "-9223372036854775809": value out of range'),
    ("2147483647", 32, 2147483647, ""),
    ("2147483648", 32, 2147483647, 'strconv.ParseInt: parsing "2147483648": value out of range'),
    ("-2147483649", 32, -2147483648, 'strconv.ParseInt: parsing "-2147483649": value out of range'),
    ("1.5", 32, 0, 'strconv.ParseInt: parsing "1.5": invalid syntax'),
    ("", 32, 0, 'strconv.ParseInt: parsing "": invalid syntax'),
    ("0x10", 32, 0, 'strconv.ParseInt: parsing "0x10": invalid syntax'),
    ("1_000", 32, 0, 'strconv.ParseInt: parsing "1_000": invalid syntax'),
    (" 1", 32, 0, 'strconv.ParseInt: parsing " 1": invalid syntax'),
    ("+", 32, 0, 'strconv.ParseInt: parsing "+": invalid syntax'),
    ("-", 32, 0, 'strconv.ParseInt: parsing "-": invalid syntax'),
    ("１", 32, 0, 'strconv.ParseInt: parsing "１": invalid syntax'),
]

# strconv.Atoi(s): (s, value, error text or "")
ATOI = [
    ("12", 12, ""),
    ("x", 0, 'strconv.Atoi: parsing "x": invalid syntax'),
    ("99999999999999999999", 9223372036854775807, 'strconv.Atoi: parsing "99999999999999999999": value out of range'),
]

# strconv.ParseBool(s): (s, value, error text or "")
PARSE_BOOL = [
    ("1", True, ""),
    ("t", True, ""),
    ("T", True, ""),
    ("TRUE", True, ""),
    ("True", True, ""),
    ("True", True, ""),
    ("0", False, ""),
    ("f", False, ""),
    ("F", False, ""),
    ("FALSE", False, ""),
    ("False", False, ""),
    ("False", False, ""),
    ("tRuE", False, 'strconv.ParseBool: parsing "tRuE": invalid syntax'),
    ("yes", False, 'strconv.ParseBool: parsing "yes": invalid syntax'),
    ("", False, 'strconv.ParseBool: parsing "": invalid syntax'),
    (" True", False, 'strconv.ParseBool: parsing " True": invalid syntax'),
]

# int32(x) for an int64 x
INT32 = [
    (0, 0),
    (2147483647, 2147483647),
    (2147483648, -2147483648),
    (4294967301, 5),
    (-1, -1),
    (-2147483649, 2147483647),
    (1099511627776, 0),
    (-4611686018427387904, 0),
]

# a / b for int64 operands (truncates toward zero)
GO_DIV = [
    (7, 2, 3),
    (-7, 2, -3),
    (7, -2, -3),
    (-7, -2, 3),
    (0, 5, 0),
    (-1, 100, 0),
    (199, 100, 1),
    (-199, 100, -1),
]

# int32(devmem * pct) / 100 with int32 operands (device.go:782)
PERCENT_OF = [
    (8192, 50, 4096),
    (40960, 33, 13516),
    (81920, 100, 81920),
    (30000000, 100, -12949672),
    (100000000, 50, 7050327),
]

# float64(float32(x))
FLOAT32 = [
    (0.1, 0.10000000149011612),
    (0.3333333333333333, 0.3333333432674408),
    (16777217.0, 16777216.0),
    (0.5, 0.5),
    (0.6666666666666666, 0.6666666865348816),
    (123456.789, 123456.7890625),
]

# sort.Sort over n elements keyed (i*7919 + i*i*31) % m, Less on the key alone: the original positions in the
# order Go leaves them (above 12 elements pdqsort is not stable, so equal keys come out in Go's own order).
GO_SORT = [
    (12, 3, "0 1 3 4 6 7 9 10 2 5 8 11"),
    (13, 3, "6 1 3 4 0 7 9 10 12 2 5 8 11"),
    (20, 5, "10 1 16 15 0 5 6 11 8 13 3 18 9 12 7 4 14 2 17 19"),
    (
        50,
        4,
        (
            "24 0 4 7 8 11 48 47 44 43 40 12 39 36 35 15 16 32 31 19 20 28 27 23 3 42 38 22 21 29 30 18 17 33 34 "
            "14 13 37 26 10 9 41 25 6 5 45 46 2 1 49"
        ),
    ),
    (
        64,
        2,
        (
            "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 "
            "37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63"
        ),
    ),
    (
        100,
        7,
        (
            "32 98 95 91 4 88 84 7 81 77 0 11 74 70 14 67 63 60 18 56 53 21 49 46 42 25 39 35 28 75 61 97 96 33 "
            "34 27 90 89 5 26 40 41 6 83 82 76 12 47 48 13 69 68 62 20 54 55 19 65 72 2 93 37 86 16 44 30 79 58 "
            "51 9 23 78 52 73 22 10 45 50 15 66 80 8 64 43 24 85 71 87 38 57 36 3 92 17 94 59 29 31 1 99"
        ),
    ),
    (
        200,
        3,
        (
            "100 37 199 3 4 198 6 196 195 9 10 193 12 13 192 15 0 190 18 19 189 21 22 187 24 25 186 27 28 184 30 "
            "31 183 33 34 181 36 99 180 39 40 178 42 43 177 45 46 175 48 49 174 51 52 172 54 55 171 57 58 169 60 "
            "61 168 63 64 166 66 67 165 69 70 163 72 73 162 75 76 160 78 79 159 81 82 157 84 85 156 87 88 154 90 "
            "91 153 93 94 151 96 97 7 1 16 150 102 103 148 105 106 147 108 109 145 111 112 144 114 115 142 117 "
            "118 141 120 121 139 123 124 138 126 127 136 129 130 135 132 133 167 62 68 137 125 122 140 119 116 "
            "143 113 110 146 107 104 149 65 95 152 92 89 155 86 83 158 80 77 161 74 71 164 134 128 131 47 59 170 "
            "56 53 173 50 101 176 44 41 179 38 35 182 32 29 185 26 23 188 20 17 191 14 11 194 8 98 197 5 2"
        ),
    ),
]


@pytest.mark.parametrize(("s", "quoted"), QUOTE)
def test_go_quote(s: str, quoted: str) -> None:
    assert _go_quote(s) == quoted


@pytest.mark.parametrize(("s", "bits", "value", "error"), PARSE_INT)
def test_go_parse_int(s: str, bits: int, value: int, error: str) -> None:
    if error:
        with pytest.raises(_GoNumError) as exc:
            _go_parse_int(s, bits)
        assert str(exc.value) == error
    else:
        assert _go_parse_int(s, bits) == value


@pytest.mark.parametrize(("s", "value", "error"), ATOI)
def test_go_atoi(s: str, value: int, error: str) -> None:
    if error:
        with pytest.raises(_GoNumError) as exc:
            _go_parse_int(s, 64, "Atoi")
        assert str(exc.value) == error
    else:
        assert _go_parse_int(s, 64, "Atoi") == value


@pytest.mark.parametrize(("s", "value", "error"), PARSE_BOOL)
def test_go_parse_bool(s: str, value: bool, error: str) -> None:
    if error:
        with pytest.raises(_GoNumError) as exc:
            _go_parse_bool(s)
        assert str(exc.value) == error
    else:
        assert _go_parse_bool(s) is value
    # assertNuma's reading: true only when ParseBool succeeds with true
    assert _parse_bool_true(s) is (value and not error)


def test_parse_bool_true_without_a_value() -> None:
    assert _parse_bool_true(None) is False


@pytest.mark.parametrize(("x", "want"), INT32)
def test_i32(x: int, want: int) -> None:
    assert _i32(x) == want


@pytest.mark.parametrize(("a", "b", "want"), GO_DIV)
def test_go_div(a: int, b: int, want: int) -> None:
    assert _go_div(a, b) == want


@pytest.mark.parametrize(("devmem", "pct", "want"), PERCENT_OF)
def test_percent_of(devmem: int, pct: int, want: int) -> None:
    assert _percent_of(devmem, pct) == want


@pytest.mark.parametrize(("x", "want"), FLOAT32)
def test_f32(x: float, want: float) -> None:
    assert _f32(x) == want


@pytest.mark.parametrize(("n", "m", "order"), GO_SORT, ids=[f"{c[0]}-by-{c[1]}" for c in GO_SORT])
def test_go_sort_leaves_equal_elements_where_go_does(n: int, m: int, order: str) -> None:
    items = [((i * 7919 + i * i * 31) % m, i) for i in range(n)]
    _go_sort(items, lambda a, b: a[0] < b[0])
    assert [i for _, i in items] == [int(x) for x in order.split()]
