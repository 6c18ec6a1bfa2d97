"""The incremental HAMi re-fit (:mod:`dispatcher.placement.refit`) against a fit from scratch, on random changes."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from datetime import datetime
from fractions import Fraction
from typing import Any

import pytest

from dispatcher.placement import refit
from dispatcher.placement.gpu import WorkerGpus
from dispatcher.placement.gpufit import HamiFitter
from dispatcher.placement.hami.devices import ContainerDevice
from dispatcher.placement.hami.names import (
    CORDON_ANNOTATION,
    HANDSHAKE_ANNOTATION,
    NODE_POLICY_ANNOTATION,
    REGISTER_ANNOTATION,
)
from dispatcher.placement.hami.nodecodec import encode_node_devices, register_device
from dispatcher.placement.hami.podcodec import bind_annotations
from dispatcher.placement.verdicts import GpuVerdict
from dispatcher.placement.worker import WorkerCapacity
from dispatcher.placement.workload import PodSetSpec

Obj = dict[str, Any]
NOW = datetime(2025, 6, 1, 12, 0, 0)


def _node(name: str, gpus: int, mem: int, cordon: Sequence[int] = ()) -> Obj:
    devices = [register_device(f"GPU-{name}-{i}", i, mem, "A100-SXM4-40GB") for i in range(gpus)]
    annotations = {
        REGISTER_ANNOTATION: encode_node_devices(devices),
        HANDSHAKE_ANNOTATION: "Requesting_" + NOW.strftime("%Y-%m-%d %H:%M:%S"),
    }
    if cordon:
        annotations[CORDON_ANNOTATION] = ",".join(f"GPU-{name}-{i}" for i in cordon)
    return {
        "metadata": {"name": name, "labels": {"hami.io/vgpu": "true"}, "annotations": annotations},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": str(gpus * 10)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod_set(gpus: int, mem: int | None, cores: int | None, policy: str | None) -> PodSetSpec:
    limits = {"nvidia.com/gpu": str(gpus)}
    if mem is not None:
        limits["nvidia.com/gpumem"] = str(mem)
    if cores is not None:
        limits["nvidia.com/gpucores"] = str(cores)
    template = {
        "metadata": {"annotations": {NODE_POLICY_ANNOTATION: policy} if policy else {}},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}]},
    }
    requests = {k: Fraction(int(v)) for k, v in limits.items()}
    return PodSetSpec(name="main", count=1, requests=requests, template=template)


def _pod(uid: str, node: str, allocs: Sequence[tuple[str, int, int, int]]) -> Obj:
    container = [ContainerDevice(dev, "NVIDIA", mem, cores) for dev, mem, cores, _ in allocs]
    return {
        "metadata": {
            "name": uid,
            "namespace": "default",
            "uid": uid,
            "annotations": bind_annotations(node, [container], NOW),
        },
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


#: Requests of one pod: whole GPUs, shares of memory and cores, two GPUs; binpack (HAMi's default) and spread.
SHAPES = [
    (1, None, None, None),
    (1, 4000, 20, None),
    (1, 12000, 30, None),
    (2, 8000, None, None),
    (1, 8000, 25, "spread"),
    (1, None, None, "spread"),
]


def _same(a: GpuVerdict, b: GpuVerdict) -> bool:
    fields = ("ok", "reason", "allocations", "score", "permanent")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


@pytest.mark.parametrize("seed", range(6))
def test_refit_gives_the_fit_from_scratch(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reservations land where the fits say (as the engine's do), are released or become bound pods, pods end,
    nodes are cordoned, changed and removed; after each change every shape is fitted both ways and must agree,
    down to the devices and score."""
    rng = random.Random(seed)
    plans = {"reused": 0, "narrowed": 0, "scratch": 0}
    plan = refit.refit_plan

    def counting(gpus: WorkerGpus, last: refit.LastFit | None, spread: bool) -> Any:
        out = plan(gpus, last, spread)
        plans["scratch" if out is None else "reused" if isinstance(out, GpuVerdict) else "narrowed"] += 1
        return out

    monkeypatch.setattr("dispatcher.placement.gpufit.refit_plan", counting)
    nodes = {f"n{i:02d}": (rng.choice([2, 4, 8]), rng.choice([24000, 40960])) for i in range(12)}
    gpus = WorkerGpus(clock=lambda: NOW)
    for name, (count, mem) in nodes.items():
        gpus.node_event("ADDED", _node(name, count, mem))
    worker = WorkerCapacity("w")
    worker.gpu = gpus
    fitter = HamiFitter()
    shapes = [[_pod_set(*s)] for s in SHAPES]
    keys = [fitter.key(ps, "binpack") for ps in shapes]
    held: list[str] = []
    pods: list[Obj] = []
    for step in range(300):
        roll = rng.random()
        if roll < 0.6 or not held:
            i = rng.randrange(len(shapes))
            verdict = fitter.fit(worker, shapes[i], "binpack", keys[i])
            if verdict.ok:
                uid = f"r{step}"
                gpus.assume(uid, verdict.allocations)
                held.append(uid)
        elif roll < 0.75:
            gpus.forget(held.pop(rng.randrange(len(held))))
        elif roll < 0.85:
            # The reservation's pod is bound (HAMi's annotations now carry its usage), or a bound pod ends.
            if pods and rng.random() < 0.4:
                gpus.pod_event("DELETED", pods.pop(rng.randrange(len(pods))))
            else:
                uid = held.pop(rng.randrange(len(held)))
                ((node, allocs),) = gpus.assumed[uid].items()
                gpus.forget(uid)
                pods.append(_pod(uid, node, allocs))
                gpus.pod_event("ADDED", pods[-1])
        elif roll < 0.95:
            name = rng.choice(sorted(nodes))
            count, mem = nodes[name]
            cordon = rng.sample(range(count), rng.randint(0, 1))
            gpus.node_event("MODIFIED", _node(name, count, mem, cordon))
        else:
            name = rng.choice(sorted(nodes))
            gpus.node_event("DELETED", _node(name, *nodes[name]))
            if rng.random() < 0.5:
                gpus.node_event("ADDED", _node(name, *nodes[name]))
        for ps, key in zip(shapes, keys, strict=True):
            incremental = fitter.fit(worker, ps, "binpack", key)
            scratch = fitter._fit(gpus, key.prepared, "binpack")  # type: ignore[attr-defined]
            if scratch.ok:
                assert _same(incremental, scratch), (step, incremental, scratch)
            else:  # the fitter adds "(never: ...)" to a failure that no freed GPU would help
                assert not incremental.ok, (step, incremental, scratch)
                assert incremental.reason.startswith(scratch.reason), (step, incremental, scratch)
    # Both shortcuts ran often, and a fit from scratch stays the exception.
    assert plans["reused"] > 100 and plans["narrowed"] > 100, plans
    assert plans["scratch"] < plans["reused"] + plans["narrowed"], plans


def test_a_fit_under_a_node_selector_or_of_several_pods_is_never_incremental() -> None:
    fitter = HamiFitter()
    two = dataclasses.replace(_pod_set(1, 4000, 20, None), count=2)
    selected = dataclasses.replace(_pod_set(1, 4000, 20, None), node_selector={"hami.io/vgpu": "true"})
    assert fitter.key([two], "binpack").single is None  # type: ignore[attr-defined]
    assert fitter.key([selected], "binpack").single is None  # type: ignore[attr-defined]
    assert fitter.key([_pod_set(1, 4000, 20, None)], "binpack").single is not None  # type: ignore[attr-defined]
