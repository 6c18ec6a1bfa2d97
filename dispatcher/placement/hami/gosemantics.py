"""Go's semantics where they decide HAMi's results, for the rest of :mod:`dispatcher.placement.hami`.

HAMi computes device and node scores in ``float32`` (ties decide the device order), truncates to ``int32``
where Go converts, divides as Go does, parses annotation numbers and booleans with ``strconv`` (and quotes
them in its messages with ``strconv.Quote``), and sorts devices with ``sort.Sort``: a stable insertion sort
for up to 12 elements and, above that, the pattern-defeating quicksort of Go's ``sort`` package, which is not
stable, so equal scores come out in Go's order only if the algorithm is Go's own (ported here).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from typing import Final, TypeVar

# --------------------------------------------------------------------------------------------------------------
# Go numeric semantics
# --------------------------------------------------------------------------------------------------------------

_MAX_INT32: Final = 2**31 - 1
_MAX_INT64: Final = 2**63 - 1


_F32 = struct.Struct("<f")


def _f32(x: float) -> float:
    """Round to the nearest float32, as every Go float32 operation does.

    Rounding the double result of one ``+ - * /`` on float32 operands gives the correctly rounded float32
    result (a double has more than 2×24+2 bits), so chaining ``_f32`` reproduces Go on amd64 exactly.
    """
    return float(_F32.unpack(_F32.pack(x))[0])


def _i32(x: int) -> int:
    """Go's ``int32(x)``: keep the low 32 bits, two's complement."""
    x &= 0xFFFFFFFF
    return x - 0x1_0000_0000 if x >= 0x8000_0000 else x


def _go_div(a: int, b: int) -> int:
    """Go's integer division, which truncates toward zero (Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _percent_of(devmem: int, pct: int) -> int:
    """``dev.Totalmem * k.MemPercentagereq / 100`` in int32 arithmetic (device.go:782)."""
    return _i32(_go_div(_i32(devmem * pct), 100))


_PRINTABLE_ESC = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _go_quote(s: str) -> str:
    """Go's ``strconv.Quote`` (``%q``), enough for error messages."""
    out = ['"']
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in _PRINTABLE_ESC:
            out.append(_PRINTABLE_ESC[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


class _GoNumError(ValueError):
    """A ``strconv`` error, formatted as Go prints it."""


_GO_INT = re.compile(r"[+-]?[0-9]+")


def _go_parse_int(s: str, bits: int, func: str = "ParseInt") -> int:
    """``strconv.ParseInt(s, 10, bits)`` (or ``Atoi`` for ``func="Atoi"``)."""
    if not _GO_INT.fullmatch(s):
        raise _GoNumError(f"strconv.{func}: parsing {_go_quote(s)}: invalid syntax")
    value = int(s)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise _GoNumError(f"strconv.{func}: parsing {_go_quote(s)}: value out of range")
    return value


def _go_parse_bool(s: str) -> bool:
    """``strconv.ParseBool``."""
    if s in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if s in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise _GoNumError(f"strconv.ParseBool: parsing {_go_quote(s)}: invalid syntax")


def _parse_bool_true(value: str | None) -> bool:
    """``strconv.ParseBool(v)`` succeeded and was true; anything else is false (assertNuma, device.go:482)."""
    if value is None:
        return False
    try:
        return _go_parse_bool(value)
    except _GoNumError:
        return False


T = TypeVar("T")


# --------------------------------------------------------------------------------------------------------------
# Go's sort.Sort (pdqsort) — only used for lists longer than 12, where it is not stable
# --------------------------------------------------------------------------------------------------------------


def _go_sort(data: list[T], less: Callable[[T, T], bool]) -> None:
    """Sort ``data`` in place exactly as Go's ``sort.Sort`` orders it (pattern-defeating quicksort).

    Up to 12 elements this is an insertion sort, so it is stable and equals Python's ``sorted``; above that the
    order of equal elements is Go's, which matters for nodes with more than 12 GPUs.
    """
    n = len(data)
    if n > 1:
        _pdqsort(data, less, 0, n, n.bit_length())


def _insertion_sort(data: list[T], less: Callable[[T, T], bool], a: int, b: int) -> None:
    for i in range(a + 1, b):
        j = i
        while j > a and less(data[j], data[j - 1]):
            data[j], data[j - 1] = data[j - 1], data[j]
            j -= 1


def _sift_down(data: list[T], less: Callable[[T, T], bool], lo: int, hi: int, first: int) -> None:
    root = lo
    while True:
        child = 2 * root + 1
        if child >= hi:
            return
        if child + 1 < hi and less(data[first + child], data[first + child + 1]):
            child += 1
        if not less(data[first + root], data[first + child]):
            return
        data[first + root], data[first + child] = data[first + child], data[first + root]
        root = child


def _heap_sort(data: list[T], less: Callable[[T, T], bool], a: int, b: int) -> None:
    first, hi = a, b - a
    for i in range((hi - 1) // 2, -1, -1):
        _sift_down(data, less, i, hi, first)
    for i in range(hi - 1, -1, -1):
        data[first], data[first + i] = data[first + i], data[first]
        _sift_down(data, less, 0, i, first)


def _pdqsort(data: list[T], less: Callable[[T, T], bool], a: int, b: int, limit: int) -> None:
    was_balanced = was_partitioned = True
    while True:
        length = b - a
        if length <= 12:
            _insertion_sort(data, less, a, b)
            return
        if limit == 0:
            _heap_sort(data, less, a, b)
            return
        if not was_balanced:
            _break_patterns(data, a, b)
            limit -= 1
        pivot, hint = _choose_pivot(data, less, a, b)
        if hint == 2:  # decreasing
            i, j = a, b - 1
            while i < j:
                data[i], data[j] = data[j], data[i]
                i += 1
                j -= 1
            pivot = (b - 1) - (pivot - a)
            hint = 1
        if was_balanced and was_partitioned and hint == 1 and _partial_insertion_sort(data, less, a, b):
            return
        if a > 0 and not less(data[a - 1], data[pivot]):
            a = _partition_equal(data, less, a, b, pivot)
            continue
        mid, was_partitioned = _partition(data, less, a, b, pivot)
        left, right = mid - a, b - mid
        threshold = length // 8
        if left < right:
            was_balanced = left >= threshold
            _pdqsort(data, less, a, mid, limit)
            a = mid + 1
        else:
            was_balanced = right >= threshold
            _pdqsort(data, less, mid + 1, b, limit)
            b = mid


def _partition(data: list[T], less: Callable[[T, T], bool], a: int, b: int, pivot: int) -> tuple[int, bool]:
    data[a], data[pivot] = data[pivot], data[a]
    i, j = a + 1, b - 1
    while i <= j and less(data[i], data[a]):
        i += 1
    while i <= j and not less(data[j], data[a]):
        j -= 1
    if i > j:
        data[j], data[a] = data[a], data[j]
        return j, True
    data[i], data[j] = data[j], data[i]
    i += 1
    j -= 1
    while True:
        while i <= j and less(data[i], data[a]):
            i += 1
        while i <= j and not less(data[j], data[a]):
            j -= 1
        if i > j:
            break
        data[i], data[j] = data[j], data[i]
        i += 1
        j -= 1
    data[j], data[a] = data[a], data[j]
    return j, False


def _partition_equal(data: list[T], less: Callable[[T, T], bool], a: int, b: int, pivot: int) -> int:
    data[a], data[pivot] = data[pivot], data[a]
    i, j = a + 1, b - 1
    while True:
        while i <= j and not less(data[a], data[i]):
            i += 1
        while i <= j and less(data[a], data[j]):
            j -= 1
        if i > j:
            return i
        data[i], data[j] = data[j], data[i]
        i += 1
        j -= 1


def _partial_insertion_sort(data: list[T], less: Callable[[T, T], bool], a: int, b: int) -> bool:
    i = a + 1
    for _ in range(5):
        while i < b and not less(data[i], data[i - 1]):
            i += 1
        if i == b:
            return True
        if b - a < 50:
            return False
        data[i], data[i - 1] = data[i - 1], data[i]
        if i - a >= 2:
            j = i - 1
            while j >= 1 and less(data[j], data[j - 1]):  # Go compares against index 1, not a+1
                data[j], data[j - 1] = data[j - 1], data[j]
                j -= 1
        if b - i >= 2:
            j = i + 1
            while j < b and less(data[j], data[j - 1]):
                data[j], data[j - 1] = data[j - 1], data[j]
                j += 1
    return False


def _break_patterns(data: list[T], a: int, b: int) -> None:
    length = b - a
    if length >= 8:
        state = length
        modulus = 1 << length.bit_length()
        start = a + (length // 4) * 2 - 1
        for idx in range(start, start + 3):
            state ^= (state << 13) & 0xFFFFFFFFFFFFFFFF
            state ^= state >> 7
            state ^= (state << 17) & 0xFFFFFFFFFFFFFFFF
            other = state & (modulus - 1)
            if other >= length:
                other -= length
            data[idx], data[a + other] = data[a + other], data[idx]


def _choose_pivot(data: list[T], less: Callable[[T, T], bool], a: int, b: int) -> tuple[int, int]:
    swaps = 0

    def median(x: int, y: int, z: int) -> int:
        nonlocal swaps
        if less(data[y], data[x]):
            swaps += 1
            x, y = y, x
        if less(data[z], data[y]):
            swaps += 1
            y, z = z, y
        if less(data[y], data[x]):
            swaps += 1
            x, y = y, x
        return y

    length = b - a
    i, j, k = a + length // 4, a + length // 4 * 2, a + length // 4 * 3
    if length >= 8:
        if length >= 50:
            i, j, k = median(i - 1, i, i + 1), median(j - 1, j, j + 1), median(k - 1, k, k + 1)
        j = median(i, j, k)
    if swaps == 0:
        return j, 1
    if swaps == 12:
        return j, 2
    return j, 0
