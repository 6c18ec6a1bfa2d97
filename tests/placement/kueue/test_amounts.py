"""Tests for :mod:`dispatcher.placement.kueue.amounts`: saturating amounts and their quantity form.

The cases ported from Kueue's own Go tests are in tests/conformance/kueue/ (one file per Kueue test file); the
builders they share with these tests (``make_cq``, ``fq``, ``ps``, ...) are in tests/conformance/kueue/kueuebuild.py.
"""

from __future__ import annotations

import pytest
from kueuebuild import Mi, fq, make_cq, rg

from dispatcher.placement.kueue.amounts import UNLIMITED, format_amount, quota_amount
from dispatcher.placement.kueue.tree import QuotaTree


def test_quota_amounts_saturate_like_kueue() -> None:
    # Kueue: pkg/resources/amount.go AmountFromQuantity.
    assert quota_amount("cpu", "1E") == UNLIMITED
    assert quota_amount("memory", "10E") == UNLIMITED
    assert quota_amount("cpu", "1.5") == 1500
    assert quota_amount("memory", "1Ki") == 1024


def test_unlimited_quota_admits_anything() -> None:
    tree = QuotaTree(
        [make_cq("a", rg(fq("f", ("cpu", "1E"))), cohort="c"), make_cq("b", rg(fq("f", ("cpu", "1"))), cohort="c")]
    )
    assert tree.available("a", "f", "cpu") == UNLIMITED
    assert tree.available("b", "f", "cpu") == UNLIMITED
    tree.add_usage("a", {("f", "cpu"): 10**12})
    assert tree.available("b", "f", "cpu") == UNLIMITED
    assert tree.potential_available("b", "f", "cpu") == UNLIMITED


@pytest.mark.parametrize(
    ("resource", "value", "text"),
    [
        ("cpu", 1500, "1500m"),
        ("cpu", 2000, "2"),
        ("memory", 10 * Mi, "10Mi"),
        ("memory", 1_000_000, "1M"),
        ("memory", 1536, "1536"),
        ("memory", 1000, "1k"),
        ("nvidia.com/gpu", 16, "16"),
        ("cpu", UNLIMITED, "<unlimited>"),
    ],
)
def test_format_amount(resource: str, value: int, text: str) -> None:
    assert format_amount(resource, value) == text
