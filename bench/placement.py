"""Placement at scale: the placement engine alone (no I/O), fed synthetic capacity.

Each worker has 3 ResourceFlavors (``default-flavor`` and ``spot`` on CPU nodes, ``hami-vgpu`` on GPU nodes),
20 CPU nodes and 100 GPU nodes of 8 HAMi GPUs (A100 40 GB, split 10), one ClusterQueue per team with quota for
all of it, and Kueue's HAMi resource transformation. 100,000 pending workloads mix CPU (40%), whole-GPU (30%)
and vGPU (30%) requests over two namespaces and two priorities. The loop is the dispatcher's own placement
round (``Dispatcher._place_round`` without the SQL): take the best pending workload from the
:class:`PendingQueue`, ask the engine for a decision over every worker, reserve the winner's capacity or park
the workload's group. A decision is one ``decide`` call; the figure is decisions per second over the run.

The process's cyclic GC runs as the dispatcher's does once started (``kubecommon.gcpolicy.settle``: what exists
when the loop starts, the workers' capacity and the pending workloads, is frozen out of the collector's sight, and
young objects are collected in batches). Until 2026-11-28 the loop ran under CPython's default thresholds, whose
collections walked the whole heap of workers and workloads: figures before that date are lower for that reason too.

Workers do not admit anything during the run (no Kueue), so ``maxInFlight`` is set above the number of
workloads: the engine keeps every reservation, as it would for copies the workers have not admitted yet.

Memory per tracked workload: the resident memory (RSS) that 100,000 pending workloads add to a process holding
the engine, as the dispatcher holds them in memory: the engine's ``PendingWorkload`` with its pod sets (the pod
template decoded from SQL JSON, one per workload) in the ``PendingQueue``, and also, as a second figure,
with the service's ``Live`` record beside it.

    python bench/placement.py                 # 100 and 1,000 workers, 100,000 workloads, 3 runs each
    python bench/placement.py --quick --json  # 100 and 1,000 workers with 10 GPU nodes, 10,000 workloads
    python bench/placement.py --workers 100 --workloads 20000 --profile /tmp/placement.prof
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import random
import subprocess
import sys
import time
from datetime import datetime
from fractions import Fraction
from typing import Any

from _common import emit, machine, machine_line, median, parser, rnd, rss_bytes

from dispatcher.config import Policy
from dispatcher.live import Live
from dispatcher.placement.engine import PlacementEngine
from dispatcher.placement.gpu import WorkerGpus, sync_worker
from dispatcher.placement.gpufit import HamiFitter
from dispatcher.placement.hami.names import HANDSHAKE_ANNOTATION, REGISTER_ANNOTATION
from dispatcher.placement.hami.nodecodec import encode_node_devices, register_device
from dispatcher.placement.queue import PendingQueue
from dispatcher.placement.worker import WorkerCapacity
from dispatcher.placement.workload import PendingWorkload
from dispatcher.quantity import parse_quantity
from kubecommon import gcpolicy

Obj = dict[str, Any]
TEAMS = ("team-a", "team-b")
GPU_MEM = 40960

HAMI_KUEUE_CONFIG: Obj = {
    "resources": {
        "transformations": [
            {
                "input": "nvidia.com/gpucores",
                "strategy": "Replace",
                "multiplyBy": "nvidia.com/gpu",
                "outputs": {"nvidia.com/total-gpucores": "1"},
            },
            {
                "input": "nvidia.com/gpumem",
                "strategy": "Replace",
                "multiplyBy": "nvidia.com/gpu",
                "outputs": {"nvidia.com/total-gpumem": "1"},
            },
        ]
    }
}


def _cluster_queue(name: str, gpus: int, cpu: int) -> Obj:
    slots = gpus * 10
    return {
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "default-flavor",
                            "resources": [
                                {"name": "cpu", "nominalQuota": str(cpu)},
                                {"name": "memory", "nominalQuota": f"{cpu * 4}Gi"},
                            ],
                        },
                        {
                            "name": "spot",
                            "resources": [
                                {"name": "cpu", "nominalQuota": str(cpu)},
                                {"name": "memory", "nominalQuota": f"{cpu * 4}Gi"},
                            ],
                        },
                    ],
                },
                {
                    "coveredResources": ["nvidia.com/gpu", "nvidia.com/total-gpumem", "nvidia.com/total-gpucores"],
                    "flavors": [
                        {
                            "name": "hami-vgpu",
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominalQuota": str(slots)},
                                {"name": "nvidia.com/total-gpumem", "nominalQuota": str(gpus * GPU_MEM)},
                                {"name": "nvidia.com/total-gpucores", "nominalQuota": str(gpus * 100)},
                            ],
                        }
                    ],
                },
            ],
        },
    }


def _cpu_node(name: str, spot: bool) -> Obj:
    return {
        "metadata": {"name": name, "labels": {"pool": "spot" if spot else "cpu"}},
        "spec": {},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "250"}},
    }


def _gpu_node(name: str, gpus: int, handshake: str) -> Obj:
    devices = [register_device(f"GPU-{name}-{i}", i, GPU_MEM, "A100-SXM4-40GB") for i in range(gpus)]
    return {
        "metadata": {
            "name": name,
            "labels": {"hami.io/vgpu": "true"},
            "annotations": {REGISTER_ANNOTATION: encode_node_devices(devices), HANDSHAKE_ANNOTATION: handshake},
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "96", "memory": "1024Gi", "pods": "250", "nvidia.com/gpu": str(gpus * 10)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def build_worker(name: str, gpu_nodes: int, gpus_per_node: int, cpu_nodes: int, max_in_flight: int) -> WorkerCapacity:
    """A synced, Ready worker as its informers would leave it (same calls as ``dispatcher.capacity``)."""
    w = WorkerCapacity(name, max_in_flight=max_in_flight)
    w.set_flavor({"metadata": {"name": "default-flavor"}, "spec": {"nodeLabels": {"pool": "cpu"}}})
    w.set_flavor({"metadata": {"name": "spot"}, "spec": {"nodeLabels": {"pool": "spot"}}})
    w.set_flavor({"metadata": {"name": "hami-vgpu"}, "spec": {"nodeLabels": {"hami.io/vgpu": "true"}}})
    w.set_kueue_config(HAMI_KUEUE_CONFIG)
    gpus_total = gpu_nodes * gpus_per_node
    for team in TEAMS:  # each team gets the whole worker as nominal quota: placement is limited by the nodes
        w.set_cluster_queue(_cluster_queue(team, gpus_total, cpu_nodes * 64 + gpu_nodes * 96))
        w.set_local_queue({"metadata": {"name": "user-queue", "namespace": team}, "spec": {"clusterQueue": team}})
    gpus = WorkerGpus()
    handshake = "Requesting_" + datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    for i in range(cpu_nodes):
        w.node_event("ADDED", _cpu_node(f"{name}-cpu-{i}", spot=i % 2 == 1))
    for i in range(gpu_nodes):
        node = _gpu_node(f"{name}-gpu-{i}", gpus_per_node, handshake)
        w.node_event("ADDED", node)
        sync_worker(w, gpus, gpus.node_event("ADDED", node))
    w.health = "Ready"
    w.synced = True
    w.touch()
    return w


def _template(kind: str, rng: random.Random) -> tuple[Obj, dict[str, str]]:
    """A pod template as the intake stores it (decoded from SQL JSON) and its per-pod requests."""
    requests: dict[str, str] = {"cpu": rng.choice(["500m", "1", "2"]), "memory": rng.choice(["1Gi", "2Gi", "4Gi"])}
    limits: dict[str, str] = {}
    if kind == "gpu":
        limits = {"nvidia.com/gpu": "1"}
    elif kind == "vgpu":
        limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": rng.choice(["4000", "8000"]), "nvidia.com/gpucores": "20"}
    resources: Obj = {"requests": dict(requests)}
    if limits:
        resources["limits"] = dict(limits)
    template = {
        "metadata": {"labels": {"app": "bench"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "registry.example/train:1.0", "resources": resources}],
        },
    }
    return template, {**requests, **limits}


def make_workloads(n: int, seed: int = 1) -> list[Live]:
    """``n`` Live records as the service loads them from SQL: pod sets with their own template each."""
    rng = random.Random(seed)
    out = []
    now = time.time()
    for i in range(n):
        roll = rng.random()
        kind = "cpu" if roll < 0.4 else "gpu" if roll < 0.7 else "vgpu"
        template, requests = _template(kind, rng)
        count = 1 if kind != "cpu" else rng.choice([1, 1, 2])
        out.append(
            Live(
                id=i + 1,
                uid=f"00000000-0000-4000-8000-{i:012d}",
                namespace=TEAMS[i % 2],
                name=f"job-{i:06d}",
                kind="Job",
                queue="user-queue",
                priority=100 if rng.random() < 0.1 else 0,
                generation=1,
                state="Pending",
                status_mode="mirror",
                no_failover=False,
                pod_sets=[{"name": "main", "count": count, "requests": requests, "template": template}],
                cluster_selector=None,
                excluded=[],
                created=now + i * 1e-3,
            )
        )
    return out


def _requests_fraction(raw: dict[str, str]) -> dict[str, Fraction]:
    return {k: parse_quantity(v) for k, v in raw.items()}


def run_decisions(
    workers: list[WorkerCapacity], lives: list[Live], profile: str | None = None
) -> dict[str, float | int]:
    """Push every workload into a PendingQueue and place until the queue is empty or every group is parked."""
    engine = PlacementEngine(Policy(), HamiFitter())
    queue = PendingQueue()
    for live in lives:
        queue.push(live.pending())
    by_name = {w.name: w for w in workers}
    # One tuple of the workers, as a placement round passes to each of its decisions (up to 200 per round in the
    # service, which builds a new tuple per round).
    fleet = tuple(workers)
    placed = parked = 0
    prof = cProfile.Profile() if profile else None
    gcpolicy.settle()  # as `dispatcher run` does once started
    start = time.perf_counter()
    if prof is not None:
        prof.enable()
    while True:
        wl = queue.next()
        if wl is None:
            break
        decision = engine.decide(wl, fleet)
        if decision.chosen is None:
            queue.park(wl)
            parked += 1
            continue
        engine.reserve(decision, by_name)
        queue.remove(wl.id)
        placed += 1
    elapsed = time.perf_counter() - start
    gc.unfreeze()  # the next run's collection may free this one's workers
    if prof is not None and profile:
        prof.disable()
        prof.dump_stats(profile)
    decisions = placed + parked
    return {
        "decisions": decisions,
        "placed": placed,
        "parked": parked,
        "seconds": elapsed,
        "decisions_per_second": decisions / elapsed if elapsed else 0.0,
        "evaluations": engine.evaluations,
        "cache_hits": engine.cache_hits,
        "revalidations": engine.revalidations,
    }


def memory_per_workload(n: int) -> dict[str, float]:
    """Resident bytes per pending workload: engine only (PendingWorkload in the queue), and with its Live."""
    gc.collect()
    base = rss_bytes()
    lives = make_workloads(n, seed=7)
    queue = PendingQueue()
    gc.collect()
    with_live_before_pending = rss_bytes()
    pendings: list[PendingWorkload] = []
    for live in lives:
        wl = live.pending()
        pendings.append(wl)
        queue.push(wl)
    gc.collect()
    after = rss_bytes()
    engine_only = (after - with_live_before_pending) / n
    with_live = (after - base) / n
    del pendings, queue, lives
    return {"bytes_per_workload": engine_only, "bytes_per_workload_with_live": with_live}


def _memory_in_child(n: int) -> dict[str, float]:
    """Measured in a fresh interpreter, so memory freed by the decision runs does not hide the growth."""
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", str(n)], check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def _check(workers: int, rate: float) -> str:
    target = 5000 if workers <= 100 else 1000
    return f"{'PASS' if rate >= target else 'FAIL'} (target >= {target}/s)"


def main() -> int:
    p = parser(__doc__, runs=3)
    p.add_argument("--workers", type=int, action="append", help="worker counts (default 100 and 1000)")
    p.add_argument("--workloads", type=int, help="pending workloads (default 100,000; --quick 10,000)")
    p.add_argument("--gpu-nodes", type=int, help="GPU nodes per worker (default 100; --quick 10)")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--cpu-nodes", type=int, default=20)
    p.add_argument("--profile", help="write a cProfile of the (first) decision loop to this file")
    p.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.memory_child:
        print(json.dumps(memory_per_workload(args.memory_child)))
        return 0
    runs = args.runs or (1 if args.quick else 3)
    worker_counts = args.workers or [100, 1000]
    n = args.workloads or (10_000 if args.quick else 100_000)
    gpu_nodes = args.gpu_nodes or (10 if args.quick else 100)
    info = machine()
    print(machine_line(info))
    print(
        f"placement engine alone: {n} pending workloads (40% CPU, 30% whole GPU, 30% vGPU); per worker 3 flavors, "
        f"{args.cpu_nodes} CPU nodes, {gpu_nodes} GPU nodes x {args.gpus_per_node} HAMi GPUs; median of {runs} runs"
    )
    report: dict[str, Any] = {
        "machine": info,
        "workloads": n,
        "gpu_nodes_per_worker": gpu_nodes,
        "gpus_per_node": args.gpus_per_node,
        "runs": runs,
        "decisions_per_second": {},
        "per_workers": {},
    }
    lives = make_workloads(n)
    for count in worker_counts:
        t0 = time.perf_counter()
        rates: list[float] = []
        last: dict[str, float | int] = {}
        for r in range(runs):
            workers = [
                build_worker(f"worker-{i:04d}", gpu_nodes, args.gpus_per_node, args.cpu_nodes, max_in_flight=n + 1)
                for i in range(count)
            ]
            for live in lives:
                live._pending = None
            build = time.perf_counter() - t0
            last = run_decisions(workers, lives, args.profile if r == 0 and count == worker_counts[0] else None)
            rates.append(float(last["decisions_per_second"]))
            del workers
            gc.collect()
            t0 = time.perf_counter()
        rate = median(rates)
        report["decisions_per_second"][str(count)] = round(rate, 1)
        report["per_workers"][str(count)] = {
            "runs": [round(x, 1) for x in rates],
            "placed": last["placed"],
            "parked": last["parked"],
            "evaluations": last["evaluations"],
            "revalidations": last["revalidations"],
            "cache_hits": last["cache_hits"],
            "build_seconds": rnd(build, 2),
        }
        print(
            f"{count:>5} workers: {rate:>8.0f} decisions/s (runs: {', '.join(f'{x:.0f}' for x in rates)}; "
            f"{last['placed']} placed, {last['parked']} parked; {last['evaluations']} full evaluations, "
            f"{last['revalidations']} re-validations) "
            f"{_check(count, rate)}"
        )
    del lives
    mem_runs = [_memory_in_child(n) for _ in range(runs)]
    per = median([m["bytes_per_workload"] for m in mem_runs])
    per_live = median([m["bytes_per_workload_with_live"] for m in mem_runs])
    report["bytes_per_workload"] = round(per)
    report["bytes_per_workload_with_live"] = round(per_live)
    print(
        f"memory per tracked workload: {per:.0f} B resident (PendingWorkload in the queue) "
        f"{'PASS' if per <= 2048 else 'FAIL'} (target <= 2048 B); {per_live:.0f} B with the service's Live record"
    )
    emit(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
