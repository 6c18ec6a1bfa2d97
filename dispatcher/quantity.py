"""Kubernetes resource quantities: :mod:`kubecommon.quantity`, shared with the simulator, under the product's name."""

from __future__ import annotations

from kubecommon.quantity import (
    QUANTITY_REGEX,
    QuantityError,
    format_kueue_value,
    format_quantity,
    kueue_value,
    parse_quantity,
)

__all__ = [
    "QUANTITY_REGEX",
    "QuantityError",
    "format_kueue_value",
    "format_quantity",
    "kueue_value",
    "parse_quantity",
]
