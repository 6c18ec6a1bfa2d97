"""Kueue conformance: ``pkg/scheduler/flavorassigner/podset_reducer_test.go`` (TestSearch), the binary search of
partial admission (``minCount``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from dispatcher.placement.partial import search_counts

SOURCE = "pkg/scheduler/flavorassigner/podset_reducer_test.go"


@dataclass(frozen=True)
class _SearchCase:
    #: (count, minCount or None) per pod set: ``MakePodSet(name, count).SetMinimumCount(min)``
    pod_sets: Sequence[tuple[int, int | None]]
    count_limit: int
    want_count: int
    want_found: bool


_FOUR = [(5, 3), (5, 4), (5, 1), (5, 2)]

# Kueue: pkg/scheduler/flavorassigner/podset_reducer_test.go, TestSearch. The fits function there passes when the
# counts sum to at most countLimit and returns that sum.
SEARCH_CASES = {
    "empty": _SearchCase([], 10, 0, False),
    "partial not available": _SearchCase([(1, None), (2, 2)], 2, 0, False),
    "partial available": _SearchCase(_FOUR, 15, 15, True),
    "one partial available": _SearchCase([(5, 3), (5, None), (5, None), (5, None)], 19, 19, True),
    "to min": _SearchCase(_FOUR, 10, 10, True),
    "to max": _SearchCase(_FOUR, 20, 20, True),
    "no overflow": _SearchCase([(150_000, 1)] * 8, 150_000, 150_000, True),
    "max pods on 1.27": _SearchCase([(150_000, 1)] + [(1, None)] * 7, 150_000, 150_000, True),
    "podset with replica count 0": _SearchCase([(0, 0)], 0, 0, False),
}


@pytest.mark.parametrize("name", sorted(SEARCH_CASES))
@pytest.mark.kueue(source=SOURCE, test="TestSearch")
def test_search_kueue_table(name: str) -> None:
    case = SEARCH_CASES[name]
    calls: list[list[int]] = []

    def fits(counts: list[int]) -> tuple[int | None, bool]:
        calls.append(counts)
        total = sum(counts)
        return total, total <= case.count_limit

    count, found = search_counts([c for c, _ in case.pod_sets], [m for _, m in case.pod_sets], fits)
    assert (count or 0, found) == (case.want_count, case.want_found)
    if sum(c - (c if m is None else m) for c, m in case.pod_sets) == 0:
        assert calls == []  # nothing to give up: Kueue does not even try
