"""Tests for :mod:`dispatcher.placement.hami.score`: sections 4 and 5, device and node scores and order.

Expected values come from ``/work/shared/hami-rules.md`` (section numbers in test names) or from HAMi's table
tests at commit 4707fb02; a comment names the Go file each ported case comes from.
"""

from __future__ import annotations

import random

import pytest
from hamibuild import dev, gpu_spec, req

from dispatcher.placement.hami.devices import DeviceUsage, HamiConfig, ScoringWeights
from dispatcher.placement.hami.fit import fit_pod
from dispatcher.placement.hami.gosemantics import _go_sort
from dispatcher.placement.hami.inventory import fit_pod_set
from dispatcher.placement.hami.names import HamiSchedulingError
from dispatcher.placement.hami.score import choose_node, device_score, node_score, sort_devices
from dispatcher.placement.hami.selection import parse_scoring_weights


def test_s4_device_score() -> None:
    # pkg/scheduler/policy/gpu_policy_test.go TestComputeScore
    zero = dev("z", type="type1", count=0, devcore=0, devmem=0)
    assert device_score(zero) == 0.0
    d = dev("d", type="type1", devcore=4, devmem=8192, count=10, used=2, usedcores=1, usedmem=2048)
    assert device_score(d) == 7.0
    assert device_score(d, req(4, 1024, 0, 1, "type1")) == 11.75  # Nums is ignored: one slot per request
    assert device_score(d, req(2, 4096, 50, 2, "type2")) == 7.0  # another type does not count
    e = dev("e", type="type1", devcore=10, devmem=10000, count=10)
    assert device_score(e, req(1, 0, 50, 2, "type1")) == 8.0
    # real devices are typed NVIDIA-<model>: the "NVIDIA" request never adds its terms
    real = dev("r", type="NVIDIA-A100", used=2, usedmem=4096, usedcores=50)
    assert device_score(real, req(1, 4096, 101, 50)) == device_score(real)
    # float32: 10 × (1/3 + 1/3 + 1/3) is 10.0 in float32 arithmetic
    third = dev("t", type="x", count=3, devcore=3, devmem=3, used=1, usedcores=1, usedmem=1)
    assert device_score(third) == 10.0
    # custom weights
    w = ScoringWeights(slot=0, core=0, memory=2)
    assert device_score(d, None, w) == 5.0


def test_s4_scoring_weights() -> None:
    # pkg/util/device_scoring_weights_test.go
    assert parse_scoring_weights("slot=1,core=2,memory=3") == ScoringWeights(1, 2, 3)
    assert parse_scoring_weights(" memory = 3, slot = 1, core = 0 ") == ScoringWeights(1, 0, 3)
    for value, message in [
        ("", "expected slot, core, and memory weights"),
        ("slot=1,memory=3", "expected slot, core, and memory weights"),
        ("slot=1,core,memory=3", "expected key=value entries"),
        ("slot=1,core=high,memory=3", '"core" weight must be an integer'),
        ("slot=1,core=-1,memory=3", '"core" weight must not be negative'),
        ("slot=1,bandwidth=2,memory=3", 'unknown weight "bandwidth"'),
        ("slot=1,slot=2,memory=3", 'duplicate "slot" weight'),
        ("slot=0,core=0,memory=0", "at least one weight must be positive"),
    ]:
        with pytest.raises(HamiSchedulingError, match=message):
            parse_scoring_weights(value)
    with pytest.raises(HamiSchedulingError):
        fit_pod([dev("a")], [req(1)], {"hami.io/device-scoring-weights": "slot=1"})
    bad = fit_pod_set({"n": [dev("a")]}, gpu_spec(1), 1, {"hami.io/device-scoring-weights": "x"})
    assert not bad.ok and "expected slot, core, and memory weights" in bad.reason


def pair_less(policy: str, numa_bind: bool, a: tuple[int, int, int, float], b: tuple[int, int, int, float]) -> bool:
    """Less(0, 1) of DeviceUsageList through sort_devices: does a sort strictly before b?"""

    def mk(x: tuple[int, int, int, float], name: str) -> DeviceUsage:
        numa, used, index, _ = x
        return dev(name, numa=numa, used=used, index=index)

    da, db = mk(a, "a"), mk(b, "b")
    forward = [d.info.id for d in sort_devices([da, db], [a[3], b[3]], policy, numa_bind)]
    backward = [d.info.id for d in sort_devices([db, da], [b[3], a[3]], policy, numa_bind)]
    return forward == ["a", "b"] and backward == ["a", "b"]


# gpu_policy_test.go TestDeviceUsageList_Less: (numa, used, index, score) pairs
LESS_CASES: list[tuple[str, str, bool, tuple[int, int, int, float], tuple[int, int, int, float], bool]] = [
    ("binpack same numa", "binpack", False, (0, 10, 0, 10), (0, 20, 0, 20), True),
    ("binpack score primary", "binpack", False, (1, 10, 0, 10), (0, 20, 0, 20), True),
    ("binpack numa tiebreak", "binpack", False, (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("binpack high score last", "binpack", False, (1, 0, 0, 20), (0, 0, 0, 10), False),
    ("spread higher score first", "spread", False, (0, 10, 0, 10), (0, 20, 0, 20), False),
    ("spread over numa", "spread", False, (1, 0, 0, 20), (0, 0, 0, 10), True),
    ("spread numa tiebreak", "spread", False, (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("binpack+numabind numa primary", "binpack", True, (1, 0, 0, 5), (0, 0, 0, 99), True),
    ("binpack+numabind lower score first", "binpack", True, (0, 0, 0, 10), (0, 0, 0, 20), True),
    ("spread+numabind lower numa first", "spread", True, (0, 0, 0, 5), (1, 0, 0, 99), True),
    ("spread+numabind higher score first", "spread", True, (0, 0, 0, 20), (0, 0, 0, 10), True),
    ("mutex busy first", "mutex", False, (0, 2, 0, 0), (0, 0, 0, 0), True),
    ("mutex idle after busy", "mutex", False, (0, 0, 0, 0), (0, 1, 0, 0), False),
    ("mutex numa tiebreak", "mutex", False, (0, 0, 0, 0), (1, 0, 0, 0), True),
    ("bare numa", "numa", False, (0, 0, 0, 99), (1, 0, 0, 5), True),
    ("bare numa index tiebreak", "numa", False, (0, 0, 3, 10), (0, 0, 1, 20), False),
    ("chain binpack,numa", "binpack,numa", False, (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("chain spread,numa", "spread,numa", False, (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("chain numa,spread numa primary", "numa,spread", False, (1, 0, 0, 5), (0, 0, 0, 99), False),
    ("chain numa,spread then spread", "numa,spread", False, (0, 0, 0, 20), (0, 0, 0, 10), True),
    ("chain mutex,spread", "mutex,spread", False, (0, 5, 0, 10), (0, 0, 0, 20), False),
    ("chain filters only -> spread", "mutex,topology-aware", False, (0, 0, 0, 10), (0, 0, 0, 20), False),
    ("chain index tiebreak", "binpack,numa", False, (0, 0, 5, 10), (0, 0, 2, 10), False),
    ("chain + numabind numa forced", "binpack,spread", True, (0, 0, 0, 99), (1, 0, 0, 5), True),
    ("chain spread,numa + numabind", "spread,numa", True, (0, 0, 0, 20), (0, 0, 0, 10), True),
]


@pytest.mark.parametrize(("name", "policy", "numa_bind", "a", "b", "less"), LESS_CASES, ids=[c[0] for c in LESS_CASES])
def test_s4_less(
    name: str, policy: str, numa_bind: bool, a: tuple[int, int, int, float], b: tuple[int, int, int, float], less: bool
) -> None:
    assert pair_less(policy, numa_bind, a, b) is less


def test_s4_spread_vs_binpack_device_choice() -> None:
    # real device types: the score is current utilisation; Fit takes from the end of the sorted list
    devices = [
        dev("idle", type="NVIDIA-A100", devmem=40960),
        dev("half", type="NVIDIA-A100", devmem=40960, index=1, used=2, usedmem=20480, usedcores=50),
        dev("quarter", type="NVIDIA-A100", devmem=40960, index=2, used=1, usedmem=10240, usedcores=25),
    ]
    r = [req(1, 4096, 101, 10)]
    assert fit_pod(devices, r).devices[0][0].uuid == "idle"  # spread (default): least used GPU
    assert fit_pod(devices, r, {"hami.io/gpu-scheduler-policy": "binpack"}).devices[0][0].uuid == "half"
    assert fit_pod(devices, r, cfg=HamiConfig(gpu_policy="binpack")).devices[0][0].uuid == "half"
    # two GPUs: spread takes the two emptiest, binpack the two fullest
    r2 = [req(2, 4096, 101, 10)]
    assert [d.uuid for d in fit_pod(devices, r2).devices[0]] == ["idle", "quarter"]
    assert [d.uuid for d in fit_pod(devices, r2, {"hami.io/gpu-scheduler-policy": "binpack"}).devices[0]] == [
        "half",
        "quarter",
    ]
    # mutex only takes idle GPUs
    assert fit_pod(devices, r2, {"hami.io/gpu-scheduler-policy": "mutex"}).reason == (
        "1/3 AllocatedCardsInsufficientRequest, 2/3 ExclusiveDeviceAllocateConflict"
    )


def test_s4_float32_ties_decide_order() -> None:
    # 10 × (0/10 + 15/100) and 10 × (1/10 + 5/100) are both 1.5 in float32 but differ in float64; the tie keeps
    # registration order, so spread takes the last device (float64 would rank g1 higher and take g0)
    g0 = dev("g0", index=0, type="NVIDIA-T4", devmem=16384, usedcores=15)
    g1 = dev("g1", index=1, type="NVIDIA-T4", devmem=16384, used=1, usedcores=5)
    assert device_score(g0) == device_score(g1) == 1.5
    assert fit_pod([g0, g1], [req(1, 100, 101, 10)]).devices[0][0].uuid == "g1"


def test_s4_equal_scores_keep_registration_order() -> None:
    # Go's insertion sort is stable for <= 12 devices: identical GPUs stay in order, Fit takes the last
    devices = [dev(f"g{i}", index=i, type="NVIDIA-T4") for i in range(8)]
    assert fit_pod(devices, [req(1, 100)]).devices[0][0].uuid == "g7"
    assert fit_pod(devices, [req(1, 100)], {"hami.io/gpu-scheduler-policy": "binpack"}).devices[0][0].uuid == "g7"


def test_s4_go_sort_for_many_devices() -> None:
    rnd = random.Random(7)
    for n in (13, 16, 40, 64, 200):
        data = [rnd.randint(0, 5) for _ in range(n)]
        items = list(enumerate(data))
        _go_sort(items, lambda a, b: a[1] < b[1])
        assert [x for _, x in items] == sorted(data)
        assert sorted(i for i, _ in items) == list(range(n))
    devices = [dev(f"g{i:02d}", index=i, type="NVIDIA-H100", used=i % 3) for i in range(16)]
    scores = [device_score(d) for d in devices]
    ordered = sort_devices(devices, scores, "spread")
    assert [device_score(d) for d in ordered] == sorted(scores, reverse=True)


def test_s5_node_score_and_choice() -> None:
    # score_test.go "one node one device ... but this device before having use": 10 × (5/10 + 50/100 + 4000/8000)
    used = [dev("uuid1", devmem=8000, used=5, usedmem=4000, usedcores=50)]
    assert node_score(used) == 15.0
    result = fit_pod(used, [req(1, 1000, 101, 30)])
    assert result.ok and result.node_score == 15.0  # the score before this pod
    assert node_score([]) == 0.0
    scores = {"a": 5.0, "b": 15.0, "c": 15.0, "d": 1.0}
    assert choose_node(scores) == "b"  # binpack: most used; equal scores -> smallest name
    assert choose_node(scores, "spread") == "d"
    assert choose_node(scores, "Spread") == "b"  # only the exact word "spread" spreads
    assert choose_node({}) is None
