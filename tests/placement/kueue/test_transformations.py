"""Kueue's ``resources.transformations`` and ``excludeResourcePrefixes`` (:func:`dispatcher.resources.transform`), as
Kueue v0.17.0 applies them (``pkg/workload/workload.go`` ``applyResourceTransformations``, the release the real rig
runs): each output is ``factor x Value(input)``, where ``Value()`` rounds the input up to a whole unit (away from zero);
``multiplyBy`` first multiplies the input by ``Value()`` of that resource, and ``Retain`` keeps the multiplied input;
outputs are not clamped. (Kueue v0.17.7+, kueue#12953, multiplies exact decimals instead.)"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from dispatcher.placement.evaluation import _pod_set_requests
from dispatcher.placement.worker import WorkerCapacity
from dispatcher.placement.workload import PodSetSpec
from dispatcher.quantity import kueue_value, parse_quantity
from dispatcher.resources import PodSet, ResourceTransformation, transform

GPUMEM_TOTAL = {
    "input": "nvidia.com/gpumem",
    "strategy": "Retain",
    "multiplyBy": "nvidia.com/gpu",
    "outputs": {"nvidia.com/total-gpumem": "1"},
}


def _q(values: dict[str, str]) -> dict[str, Fraction]:
    return {k: parse_quantity(v) for k, v in values.items()}


CASES: dict[str, tuple[dict[str, str], list[dict[str, Any]], tuple[str, ...], dict[str, str]]] = {
    "a fractional input is rounded up before the factor": (
        {"example.com/half": "500m"},
        [{"input": "example.com/half", "strategy": "Replace", "outputs": {"example.com/credits": "2"}}],
        (),
        {"example.com/credits": "2"},
    ),
    "cpu is rounded up to a whole core (Kueue v0.17.7 TestNewInfo transformMilliValues says 300)": (
        {"cpu": "100m", "memory": "100M"},
        [
            {"input": "cpu", "strategy": "Replace", "outputs": {"example.com/cpu-credits": "3000"}},
            {"input": "memory", "strategy": "Replace", "outputs": {"example.com/memory-credits": "3m"}},
        ],
        (),
        {"example.com/cpu-credits": "3000", "example.com/memory-credits": "300k"},
    ),
    "a fractional factor stays fractional": (
        {"example.com/in": "3"},
        [{"input": "example.com/in", "strategy": "Replace", "outputs": {"example.com/out": "500m"}}],
        (),
        {"example.com/out": "1500m"},
    ),
    "Retain with multiplyBy keeps the multiplied input": (
        {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000"},
        [GPUMEM_TOTAL],
        (),
        {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "2000", "nvidia.com/total-gpumem": "2000"},
    ),
    "multiplyBy uses the whole units of its resource": (
        {"nvidia.com/gpu": "1500m", "nvidia.com/gpumem": "1000"},
        [GPUMEM_TOTAL],
        (),
        {"nvidia.com/gpu": "1500m", "nvidia.com/gpumem": "2000", "nvidia.com/total-gpumem": "2000"},
    ),
    "a fractional multiplied input is retained as it is and rounded up for the output": (
        {"nvidia.com/gpu": "3", "nvidia.com/gpumem": "500m"},
        [GPUMEM_TOTAL],
        (),
        {"nvidia.com/gpu": "3", "nvidia.com/gpumem": "1500m", "nvidia.com/total-gpumem": "2"},
    ),
    "multiplyBy of an absent resource leaves the input as it is": (
        {"nvidia.com/gpumem": "1000"},
        [GPUMEM_TOTAL],
        (),
        {"nvidia.com/gpumem": "1000", "nvidia.com/total-gpumem": "1000"},
    ),
    "a negative factor gives a negative output": (
        {"example.com/in": "3"},
        [{"input": "example.com/in", "strategy": "Retain", "outputs": {"example.com/credits": "-1"}}],
        (),
        {"example.com/in": "3", "example.com/credits": "-3"},
    ),
    "outputs of several inputs add up": (
        {"nvidia.com/mig-1g.5gb": "2", "nvidia.com/mig-2g.10gb": "1", "cpu": "1"},
        [
            {
                "input": "nvidia.com/mig-1g.5gb",
                "strategy": "Replace",
                "outputs": {"example.com/accelerator-memory": "5Ki", "example.com/credits": "10"},
            },
            {
                "input": "nvidia.com/mig-2g.10gb",
                "strategy": "Replace",
                "outputs": {"example.com/accelerator-memory": "10Ki", "example.com/credits": "15"},
            },
        ],
        (),
        {"cpu": "1", "example.com/accelerator-memory": "20Ki", "example.com/credits": "35"},
    ),
    "excluded prefixes go first": (
        {"cpu": "10m", "networking.example.com/vpc1": "1"},
        [{"input": "networking.example.com/vpc1", "outputs": {"example.com/credits": "1"}}],
        ("dummyPrefix", "networking.example.com/"),
        {"cpu": "10m"},
    ),
}


@pytest.mark.parametrize("name", list(CASES), ids=list(CASES))
def test_transform_as_kueue_v017(name: str) -> None:
    requests, transformations, excluded, want = CASES[name]
    got = transform(_q(requests), [ResourceTransformation.from_config(t) for t in transformations], excluded)
    assert got == _q(want)


@pytest.mark.parametrize(
    ("amount", "cpu", "other"),
    [("1500m", 1500, 2), ("-1500m", -1500, -2), ("-1", -1000, -1), ("-1m", -1, -1), ("-100u", -1, -1)],
)
def test_kueue_value_rounds_away_from_zero(amount: str, cpu: int, other: int) -> None:
    """``resources.ResourceValue``: ``MilliValue()`` / ``Value()``, rounded up away from zero."""
    assert (kueue_value("cpu", amount), kueue_value("example.com/x", amount)) == (cpu, other)


def test_a_negative_output_reaches_the_flavor_assigner() -> None:
    """Kueue keeps a negative output as a request (a ClusterQueue that does not cover it leaves the Workload
    pending); the engine's per-pod Kueue requests keep it too."""
    worker = WorkerCapacity("w")
    worker.transformations = (
        ResourceTransformation.from_config(
            {"input": "example.com/in", "strategy": "Retain", "outputs": {"example.com/credits": "-1"}}
        ),
    )
    ps = PodSetSpec("main", 2, _q({"cpu": "1", "example.com/in": "3"}))
    assert _pod_set_requests(worker, ps) == {"cpu": 1000, "example.com/in": 3, "example.com/credits": -3}
    pod_set = PodSet("main", 2, _q({"cpu": "1", "example.com/in": "3"}))
    assert pod_set.kueue_requests(worker.transformations) == {
        "cpu": 2000,
        "example.com/in": 6,
        "example.com/credits": -6,
    }
