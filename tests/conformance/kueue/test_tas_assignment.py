"""Kueue conformance: ``pkg/util/tas/tas_assignment_test.go``: the v1beta2 encoding of a topology assignment (one
compact slice with common prefixes, suffixes and universal values: ``V1Beta2From``) and its decoding (``InternalFrom``,
also of assignments written in several slices), against ``dispatcher.placement.kueue.topology``."""

from __future__ import annotations

from typing import Any

import pytest

from dispatcher.placement.kueue.topology import (
    DomainAssignment,
    TopologyAssignment,
    decode_assignment,
    encode_assignment,
)

SOURCE = "pkg/util/tas/tas_assignment_test.go"

# bothWaysTestCases and oneWayTestCases, transcribed: the internal form (levels, [(values, count)]) and the v1beta2
# object.
BOTH_WAYS: list[dict[str, Any]] = [
    {"name": "empty", "levels": ("a", "b"), "domains": [], "v1beta2": {"levels": ["a", "b"], "slices": []}},
    {
        "name": "one domain",
        "levels": ("a", "b"),
        "domains": [(("a1", "b1"), 1)],
        "v1beta2": {
            "levels": ["a", "b"],
            "slices": [
                {
                    "domainCount": 1,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [{"universal": "a1"}, {"universal": "b1"}],
                }
            ],
        },
    },
    {
        "name": "multiple domains, same counts, no common prefix",
        "levels": ("a", "b"),
        "domains": [(("a1", "b1"), 1), (("a2", "b2"), 1)],
        "v1beta2": {
            "levels": ["a", "b"],
            "slices": [
                {
                    "domainCount": 2,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [
                        {"individual": {"prefix": "a", "roots": ["1", "2"]}},
                        {"individual": {"prefix": "b", "roots": ["1", "2"]}},
                    ],
                }
            ],
        },
    },
    {
        "name": "multiple domains, different counts, common prefix and suffix",
        "levels": ("a", "b"),
        "domains": [(("p.a1.s", "p.b1.s"), 1), (("p.a2.s", "p.b2.s"), 2)],
        "v1beta2": {
            "levels": ["a", "b"],
            "slices": [
                {
                    "domainCount": 2,
                    "podCounts": {"individual": [1, 2]},
                    "valuesPerLevel": [
                        {"individual": {"prefix": "p.a", "suffix": ".s", "roots": ["1", "2"]}},
                        {"individual": {"prefix": "p.b", "suffix": ".s", "roots": ["1", "2"]}},
                    ],
                }
            ],
        },
    },
    {
        "name": "multiple domains, universal value",
        "levels": ("a", "b"),
        "domains": [(("a1", "x"), 1), (("a1", "y"), 2)],
        "v1beta2": {
            "levels": ["a", "b"],
            "slices": [
                {
                    "domainCount": 2,
                    "podCounts": {"individual": [1, 2]},
                    "valuesPerLevel": [{"universal": "a1"}, {"individual": {"roots": ["x", "y"]}}],
                }
            ],
        },
    },
    {
        "name": "multiple domains, same counts, shrinking prefix",
        "levels": ("a",),
        "domains": [(("a123",), 1), (("a12",), 1), (("a1",), 1), (("a13",), 1)],
        "v1beta2": {
            "levels": ["a"],
            "slices": [
                {
                    "domainCount": 4,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [{"individual": {"prefix": "a1", "roots": ["23", "2", "", "3"]}}],
                }
            ],
        },
    },
    {
        "name": "multiple domains, same counts, shrinking suffix",
        "levels": ("a",),
        "domains": [(("123b",), 1), (("23b",), 1), (("3b",), 1), (("13b",), 1)],
        "v1beta2": {
            "levels": ["a"],
            "slices": [
                {
                    "domainCount": 4,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [{"individual": {"suffix": "3b", "roots": ["12", "2", "", "1"]}}],
                }
            ],
        },
    },
    {
        "name": "multiple domains, same counts, max prefix & suffix overlap partially",
        "levels": ("a",),
        "domains": [(("abacacada",), 1), (("abacada",), 1)],
        "v1beta2": {
            "levels": ["a"],
            "slices": [
                {
                    "domainCount": 2,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [{"individual": {"prefix": "ab", "suffix": "acada", "roots": ["ac", ""]}}],
                }
            ],
        },
    },
    {
        "name": "multiple domains, same counts, max prefix & suffix overlap fully, shrinking strings",
        "levels": ("a",),
        "domains": [(("ababa",), 1), (("aba",), 1)],
        "v1beta2": {
            "levels": ["a"],
            "slices": [
                {
                    "domainCount": 2,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [{"individual": {"suffix": "aba", "roots": ["ab", ""]}}],
                }
            ],
        },
    },
    {
        "name": "multiple domains, same counts, max prefix & suffix overlap fully, growing strings",
        "levels": ("a",),
        "domains": [(("aba",), 1), (("ababa",), 1)],
        "v1beta2": {
            "levels": ["a"],
            "slices": [
                {
                    "domainCount": 2,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [{"individual": {"suffix": "aba", "roots": ["", "ab"]}}],
                }
            ],
        },
    },
]

ONE_WAY: list[dict[str, Any]] = [
    {
        "name": "multiple slices, no prefixes/suffixes or universal values",
        "levels": ("a", "b"),
        "domains": [(("a", "b"), 1), (("c", "d"), 2), (("e", "f"), 3)],
        "v1beta2": {
            "levels": ["a", "b"],
            "slices": [
                {
                    "domainCount": 1,
                    "podCounts": {"individual": [1]},
                    "valuesPerLevel": [{"individual": {"roots": ["a"]}}, {"individual": {"roots": ["b"]}}],
                },
                {
                    "domainCount": 2,
                    "podCounts": {"individual": [2, 3]},
                    "valuesPerLevel": [{"individual": {"roots": ["c", "e"]}}, {"individual": {"roots": ["d", "f"]}}],
                },
            ],
        },
    },
    {
        "name": "multiple slices, prefixes, suffixes & universal values",
        "levels": ("a", "b"),
        "domains": [
            (("a1", "b1-s"), 2),
            (("a1", "b2-s"), 3),
            (("a2", "x-t"), 5),
            (("a3", "y-t"), 5),
            (("a4", "z-t"), 5),
            (("a10", "b10"), 10),
            (("a10", "b10"), 10),
        ],
        "v1beta2": {
            "levels": ["a", "b"],
            "slices": [
                {
                    "domainCount": 2,
                    "podCounts": {"individual": [2, 3]},
                    "valuesPerLevel": [
                        {"universal": "a1"},
                        {"individual": {"prefix": "b", "suffix": "-s", "roots": ["1", "2"]}},
                    ],
                },
                {
                    "domainCount": 3,
                    "podCounts": {"universal": 5},
                    "valuesPerLevel": [
                        {"individual": {"prefix": "a", "roots": ["2", "3", "4"]}},
                        {"individual": {"suffix": "-t", "roots": ["x", "y", "z"]}},
                    ],
                },
                {
                    "domainCount": 2,
                    "podCounts": {"universal": 10},
                    "valuesPerLevel": [{"universal": "a10"}, {"universal": "b10"}],
                },
            ],
        },
    },
]


def _internal(case: dict[str, Any]) -> TopologyAssignment:
    return TopologyAssignment(case["levels"], tuple(DomainAssignment(v, n) for v, n in case["domains"]))


@pytest.mark.kueue(source=SOURCE, test="TestV1Beta2FromInternal")
@pytest.mark.parametrize("case", BOTH_WAYS, ids=[c["name"] for c in BOTH_WAYS])
def test_v1beta2_from_internal(case: dict[str, Any]) -> None:
    assert encode_assignment(_internal(case)) == case["v1beta2"]


@pytest.mark.kueue(source=SOURCE, test="TestInternalFromV1Beta2")
@pytest.mark.parametrize("case", BOTH_WAYS + ONE_WAY, ids=[c["name"] for c in BOTH_WAYS + ONE_WAY])
def test_internal_from_v1beta2(case: dict[str, Any]) -> None:
    assert decode_assignment(case["v1beta2"]) == _internal(case)


@pytest.mark.kueue(source=SOURCE, test="TestInternalFromV1Beta2_forNil")
def test_internal_from_v1beta2_for_nil() -> None:
    assert decode_assignment(None) is None
