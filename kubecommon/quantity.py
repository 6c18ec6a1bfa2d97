"""Kubernetes resource quantities, parsed as ``k8s.io/apimachinery/pkg/api/resource`` parses them.

A quantity is kept as an exact :class:`fractions.Fraction`, so ``100m`` + ``900m`` is exactly ``1``.
Kueue does its quota arithmetic on ``int64`` values: milli-units for ``cpu`` and whole units (rounded up)
for everything else (``resources.ResourceValue`` in Kueue). :func:`kueue_value` gives that number and
:func:`format_kueue_value` turns it back into the canonical string a real server would print.
"""

from __future__ import annotations

import re
from fractions import Fraction
from math import ceil, floor

__all__ = [
    "QUANTITY_REGEX",
    "QuantityError",
    "format_kueue_value",
    "format_quantity",
    "kueue_value",
    "parse_quantity",
]

#: The coarse check the API server applies before parsing (its error message quotes this pattern).
QUANTITY_REGEX = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_COARSE = re.compile(QUANTITY_REGEX)
_NUMBER = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$")

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity. The message is the API server's own wording."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse ``value`` exactly. Raises :class:`QuantityError` for anything a real server would refuse."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_REGEX}'")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    text = value.strip() if isinstance(value, str) else ""
    match = _COARSE.match(text)
    if not match or not text:
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_REGEX}'")
    number, suffix = match.group(1), match.group(2)
    if not _NUMBER.match(number):
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_REGEX}'")
    base = Fraction(number)
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    exponent = re.fullmatch(r"[eE]([-+]?[0-9]+)", suffix)
    if exponent:
        return base * Fraction(10) ** int(exponent.group(1))
    raise QuantityError("unable to parse quantity's suffix")


def kueue_value(resource: str, value: str | int | float | Fraction) -> int:
    """The ``int64`` Kueue counts for ``resource``: milli-units for cpu, whole units otherwise, rounded up away from
    zero as ``Quantity.MilliValue()`` / ``Value()`` round (a negative amount, as a resource transformation with a
    negative factor gives, rounds down)."""
    amount = value if isinstance(value, Fraction) else parse_quantity(value)
    if resource == "cpu":
        amount *= 1000
    return ceil(amount) if amount >= 0 else floor(amount)


def format_kueue_value(resource: str, value: int) -> str:
    """The canonical quantity string for a Kueue value (``1500`` cpu is ``1500m``, ``2000`` cpu is ``2``)."""
    if resource == "cpu":
        return format_quantity(Fraction(value, 1000))
    if resource == "memory" or resource.endswith("storage"):
        return format_quantity(Fraction(value), binary=True)
    return format_quantity(Fraction(value))


def format_quantity(amount: Fraction, *, binary: bool = False) -> str:
    """Print ``amount`` in the shortest canonical form, as ``Quantity.String()`` would."""
    if amount == 0:
        return "0"
    sign = "-" if amount < 0 else ""
    amount = abs(amount)
    if binary and amount.denominator == 1:
        n = int(amount)
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _BINARY[suffix]
            if n % unit == 0:
                return f"{sign}{n // unit}{suffix}"
        return f"{sign}{n}"
    for suffix in ("E", "P", "T", "G", "M", "k", "", "m", "u", "n"):
        scaled = amount / _DECIMAL[suffix]
        if scaled.denominator == 1:
            # The largest suffix that keeps an integer mantissa, as Quantity.String() chooses it.
            return f"{sign}{int(scaled)}{suffix}"
    return f"{sign}{ceil(amount * 10**9)}n"
