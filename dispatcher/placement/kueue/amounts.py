"""Kueue's quota amounts: ``int64`` values with saturating arithmetic, and their Kubernetes quantity form.

Follows ``pkg/resources/amount.go`` and Kueue's resource values: milli-units for ``cpu``, whole units (rounded
up) for everything else. Quotas that overflow ``int64`` become :data:`UNLIMITED`, and sums saturate exactly as
Kueue's ``resources.Amount`` does, so "1E" CPU quotas neither wrap nor collapse to zero.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Final

from dispatcher.quantity import format_kueue_value, format_quantity, kueue_value, parse_quantity

__all__ = ["UNLIMITED", "FlavorResource", "format_amount", "quota_amount"]


FlavorResource = tuple[str, str]
"""``(flavor, resource)``, Kueue's ``resources.FlavorResource``."""

UNLIMITED: Final = 2**63 - 1
"""Kueue's ``resources.Unlimited``: the ``math.MaxInt64`` sentinel for quotas that overflow ``int64``."""
_MIN64: Final = -(2**63)


def _add(a: int, b: int) -> int:
    """``Amount.Add``: Unlimited is absorbing and bounded sums saturate instead of wrapping."""
    if UNLIMITED in (a, b):
        return UNLIMITED
    s = a + b
    if s > UNLIMITED:
        return UNLIMITED
    if s < _MIN64:
        return _MIN64
    return s


def _sub(a: int, b: int) -> int:
    """``Amount.Sub``: Unlimited-Unlimited is 0, bounded-Unlimited is MinInt64 ("nothing available")."""
    if a == UNLIMITED:
        return 0 if b == UNLIMITED else UNLIMITED
    if b == UNLIMITED:
        return _MIN64
    d = a - b
    if d > UNLIMITED:
        return UNLIMITED
    if d < _MIN64:
        return _MIN64
    return d


def quota_amount(resource: str, quantity: str | int | float | Fraction) -> int:
    """A quota quantity as Kueue stores it (``resources.AmountFromQuantity``).

    Quantities whose canonical value would overflow ``int64`` are :data:`UNLIMITED` rather than wrapped, which
    is why a "1E" CPU quota admits everything instead of nothing.
    """
    amount = quantity if isinstance(quantity, Fraction) else parse_quantity(quantity)
    if resource == "cpu":
        if amount >= UNLIMITED // 1000:
            return UNLIMITED
    elif amount >= UNLIMITED:
        return UNLIMITED
    return kueue_value(resource, amount)


def format_amount(resource: str, value: int) -> str:
    """Print a Kueue value the way Kueue's ``ResourceFormatter`` does in its messages.

    ``cpu`` is printed from milli-units; memory, ephemeral storage and hugepages use binary suffixes only when
    the value is an exact multiple of 1024 (Kueue re-parses the binary string, so ``1000000`` prints ``1M``).
    """
    if value == UNLIMITED:
        return "<unlimited>"
    if resource == "cpu":
        return format_kueue_value("cpu", value)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        if value % 1024 == 0 and abs(value) >= 1024:
            return format_quantity(Fraction(value), binary=True)
        return format_quantity(Fraction(value))
    return format_quantity(Fraction(value))
