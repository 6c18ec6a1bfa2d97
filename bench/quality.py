"""Placement quality: this project's scored placement against MultiKueue's allAtOnce and incremental dispatchers,
on Kueue's own scheduler performance workload, side by side in one run.

    python bench/quality.py --quick --json                       # one cohort, 1/50 of the counts, time x5: < 1 minute
    python bench/quality.py --time-scale 4 --json                # the baseline, time stretched 4x (2 busy cores)
    python bench/quality.py --gpu --quick --json                 # the classes as HAMi vGPU requests
    python bench/quality.py --generator my/generator.yaml --worker-factors 1,0.5 --strategies scored,allAtOnce
    python bench/quality.py --real --quick --worker-factors 1,1,0.5 --failover --json   # real MultiKueue, one rig

These runs compare with this project's *emulation* of MultiKueue's dispatchers (``policy.strategy``) on the
simulator; ``--real`` (bench/quality_real.py) runs real MultiKueue on real components instead.

The generator file has the format of Kueue's ``test/performance/scheduler/configs/*/generator.yaml`` (cohorts with
``count`` and ``queuesSets``; a queues set has ``count``, ``nominalQuota``, ``borrowingLimit``,
``reclaimWithinCohort``, ``withinClusterQueue`` and ``workloadsSets``; a workloads set has ``count``,
``creationIntervalMs`` and ``workloads`` of ``className``, ``runtimeMs``, ``priority``, ``request`` in CPU). The
default, ``bench/quality-baseline.yaml``, holds the baseline figures.

Every worker gets the generator's ClusterQueues (cohort ``<cohort class>-<i>``, ClusterQueue
``<cohort>-<queue class>-<j>``) and a LocalQueue of the same name in namespace ``perf``, with quotas scaled by its
``--worker-factors`` entry. For each strategy, fresh simulated clusters (``dispatcher sim up``, a child process)
and a fresh dispatcher (in this process, SQLite) receive the same stream of Jobs on the manager at the generator's
intervals (``--time-scale`` multiplies intervals and run times).

``--gpu``: the classes become HAMi requests on GPU workers (A100 40 GB, split 10): small = one vGPU with a fifth
of a GPU (8192 MiB, 20 cores), medium = half a GPU (20480 MiB, 50 cores), large = two whole GPUs (2 x 40960 MiB,
100 cores). A ClusterQueue's nominal quota of N CPU becomes N/10 GPUs (vGPU slots, gpumem and gpucores totals).

Figures per strategy (and class): mean and p95 time to admission (submission on the manager to QuotaReserved of
the copy that ran, as this process sees the worker's Workload), makespan (first submission to the last
Finished), minimum ClusterQueue usage (Kueue's ``clusterQueueClassesMinUsage``: per ClusterQueue name, admitted
usage over nominal quota summed over workers, averaged over the makespan; the minimum over ClusterQueues), remote
copies created and deleted, worker-side preemptions and the needless ones (the preemptor was a copy that did not
end up running its workload: a race loser, or a copy moved away), and with ``--gpu`` fragmentation waits (jobs that
waited for admission while one single worker's free vGPUs could have held them, sampled every 0.25 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import re
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from _common import add_keep_option, scratch_dir

from dispatcher.adapters.job import JobAdapter
from dispatcher.capacity import kueue_resource
from dispatcher.config import Policy, load_config
from dispatcher.kube.client import ClusterClient, KubeError, connect
from dispatcher.kube.informer import Informer
from dispatcher.placement.gpufit import HamiFitter
from dispatcher.service import Dispatcher
from dispatcher.store.engine import make_engine
from dispatcher.store.migrate import upgrade
from dispatcher.store.models import Placement, Workload, WorkloadState
from dispatcher.store.repo import Repo

Obj = dict[str, Any]
HERE = Path(__file__).resolve().parent
DEFAULT_GENERATOR = HERE / "quality-baseline.yaml"
NAMESPACE = "perf"
STRATEGIES = ("scored", "allAtOnce", "incremental")
CLASSES = ("small", "medium", "large")
WORKLOADS = kueue_resource("workloads", "v1beta2")
CQS = kueue_resource("clusterqueues", "v1beta2")
LQS = kueue_resource("localqueues", "v1beta2")
JOB_UID = re.compile(r"JobUID: ([^)\s]+)\)")
#: --gpu: (vGPUs, gpumem MiB, gpucores) per pod of each class (a documented mapping, see the module docstring).
GPU_CLASSES = {"small": (1, 8192, 20), "medium": (1, 20480, 50), "large": (2, 40960, 100)}
GPU_MEMORY_MIB, GPU_SPLIT, GPUS_PER_NODE = 40960, 10, 4


# -- the generator file ---------------------------------------------------------------------------------------


RECLAIM = ("Never", "LowerPriority", "Any")


class GeneratorError(ValueError):
    """A generator file with a bad key or value; the message names the key path."""


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    runtime_ms: int
    priority: int
    request: float


@dataclass(frozen=True)
class WorkloadsSet:
    count: int
    interval_ms: int
    classes: tuple[WorkloadClass, ...]


@dataclass(frozen=True)
class QueuesSet:
    class_name: str
    count: int
    nominal_quota: float
    borrowing_limit: float | None
    reclaim_within_cohort: str
    within_cluster_queue: str
    workloads_sets: tuple[WorkloadsSet, ...]


@dataclass(frozen=True)
class CohortClass:
    class_name: str
    count: int
    queues_sets: tuple[QueuesSet, ...]


@dataclass(frozen=True)
class Queue:
    cohort: str
    name: str
    spec: QueuesSet


@dataclass(frozen=True)
class Submission:
    at_ms: float
    name: str
    queue: str
    klass: WorkloadClass


@dataclass(frozen=True)
class Generator:
    cohorts: tuple[CohortClass, ...]

    def queues(self) -> list[Queue]:
        out = []
        for cc in self.cohorts:
            for i in range(cc.count):
                cohort = f"{cc.class_name}-{i}"
                for qs in cc.queues_sets:
                    out.extend(Queue(cohort, f"{cohort}-{qs.class_name}-{j}", qs) for j in range(qs.count))
        return out

    def workload_count(self) -> int:
        return sum(len(ws.classes) * ws.count for q in self.queues() for ws in q.spec.workloads_sets)

    def stream(self) -> list[Submission]:
        """Every Job of the run in submission order: per queue and workloads set, one batch of the set's classes
        every ``creationIntervalMs`` (as Kueue's generator does), all queues at once."""
        out = []
        for q in self.queues():
            for si, ws in enumerate(q.spec.workloads_sets):
                for i in range(ws.count):
                    for k in ws.classes:
                        out.append(Submission(i * ws.interval_ms, f"{q.name}-{si}-{k.name}-{i}", q.name, k))
        out.sort(key=lambda s: (s.at_ms, s.name))
        return out

    def scaled(self, cohorts: int | None, counts: float) -> Generator:
        """Fewer cohorts and/or fewer workloads per set (``--quick``)."""
        ccs = []
        for cc in self.cohorts:
            qss = tuple(
                dataclasses.replace(
                    qs,
                    workloads_sets=tuple(
                        dataclasses.replace(ws, count=max(1, round(ws.count * counts))) for ws in qs.workloads_sets
                    ),
                )
                for qs in cc.queues_sets
            )
            ccs.append(dataclasses.replace(cc, count=min(cc.count, cohorts) if cohorts else cc.count, queues_sets=qss))
        if cohorts:
            ccs = ccs[:1]
        return Generator(tuple(ccs))


def _mapping(raw: Any, path: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise GeneratorError(f"{path}: expected a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise GeneratorError(f"{path}.{unknown[0]}: unknown key (expected one of {', '.join(sorted(allowed))})")
    return raw


def _list(raw: dict[str, Any], key: str, path: str) -> list[Any]:
    value = raw.get(key)
    if not isinstance(value, list) or not value:
        raise GeneratorError(f"{path}.{key}: expected a non-empty list, got {value!r}")
    return value


def _int(raw: dict[str, Any], key: str, path: str, *, minimum: int = 0, default: int | None = None) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise GeneratorError(f"{path}.{key}: expected an integer >= {minimum}, got {value!r}")
    return value


def _number(raw: dict[str, Any], key: str, path: str, *, required: bool = True) -> float | None:
    value = raw.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise GeneratorError(f"{path}.{key}: expected a number >= 0, got {value!r}")
    return float(value)


def _str(raw: dict[str, Any], key: str, path: str, choices: tuple[str, ...], default: str) -> str:
    value = raw.get(key, default)
    if value not in choices:
        raise GeneratorError(f"{path}.{key}: expected one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _name(raw: dict[str, Any], path: str) -> str:
    value = raw.get("className")
    if not isinstance(value, str) or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", value):
        raise GeneratorError(f"{path}.className: expected a lower-case DNS label, got {value!r}")
    return value


def parse_generator(raw: Any, source: str = "generator") -> Generator:
    top = _mapping(raw, source, {"cohorts"})
    cohorts = []
    for ci, craw in enumerate(_list(top, "cohorts", source)):
        cp = f"cohorts[{ci}]"
        c = _mapping(craw, cp, {"className", "count", "queuesSets"})
        qsets = []
        for qi, qraw in enumerate(_list(c, "queuesSets", cp)):
            qp = f"{cp}.queuesSets[{qi}]"
            q = _mapping(
                qraw,
                qp,
                {
                    "className",
                    "count",
                    "nominalQuota",
                    "borrowingLimit",
                    "reclaimWithinCohort",
                    "withinClusterQueue",
                    "workloadsSets",
                },
            )
            wsets = []
            for wi, wraw in enumerate(_list(q, "workloadsSets", qp)):
                wp = f"{qp}.workloadsSets[{wi}]"
                w = _mapping(wraw, wp, {"count", "creationIntervalMs", "workloads"})
                classes = []
                for ki, kraw in enumerate(_list(w, "workloads", wp)):
                    kp = f"{wp}.workloads[{ki}]"
                    k = _mapping(kraw, kp, {"className", "runtimeMs", "priority", "request"})
                    request = _number(k, "request", kp)
                    assert request is not None
                    classes.append(
                        WorkloadClass(
                            _name(k, kp), _int(k, "runtimeMs", kp), _int(k, "priority", kp, default=0), request
                        )
                    )
                wsets.append(WorkloadsSet(_int(w, "count", wp), _int(w, "creationIntervalMs", wp), tuple(classes)))
            nominal = _number(q, "nominalQuota", qp)
            assert nominal is not None
            qsets.append(
                QueuesSet(
                    class_name=_name(q, qp),
                    count=_int(q, "count", qp, minimum=1),
                    nominal_quota=nominal,
                    borrowing_limit=_number(q, "borrowingLimit", qp, required=False),
                    reclaim_within_cohort=_str(
                        q, "reclaimWithinCohort", qp, ("Never", "LowerPriority", "Any"), "Never"
                    ),
                    within_cluster_queue=_str(q, "withinClusterQueue", qp, ("Never", "LowerPriority"), "Never"),
                    workloads_sets=tuple(wsets),
                )
            )
        cohorts.append(CohortClass(_name(c, cp), _int(c, "count", cp, minimum=1), tuple(qsets)))
    return Generator(tuple(cohorts))


def read_generator(path: Path) -> Generator:
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise GeneratorError(f"{path}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise GeneratorError(f"{path}: not valid YAML: {exc}") from None
    return parse_generator(raw, str(path))


# -- figures ----------------------------------------------------------------------------------------------------


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def ratios(strategies: dict[str, Obj]) -> Obj:
    """scored over allAtOnce: mean admission wait (all jobs), copies created, makespan."""
    s, a = strategies.get("scored"), strategies.get("allAtOnce")
    if not s or not a:
        return {}
    return {
        "wait_ratio_vs_allatonce": ratio(s["admission_wait_mean_all_s"], a["admission_wait_mean_all_s"]),
        "copies_ratio_vs_allatonce": ratio(s["copies_created"], a["copies_created"]),
        "makespan_ratio_vs_allatonce": ratio(s["makespan_s"], a["makespan_s"]),
    }


@dataclass
class Observed:
    """What this process saw of the workers' Kueue Workloads during one run (monotonic times)."""

    admitted: dict[tuple[str, str], float] = field(default_factory=dict)  # (worker, job uid) -> first QuotaReserved
    finished: dict[tuple[str, str], float] = field(default_factory=dict)
    preemptions: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (worker, wl uid, when) -> JobUID
    #: (worker, workload uid) -> (ClusterQueue, units) while holding quota
    holding: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)
    usage_sum: dict[str, float] = field(default_factory=dict)
    samples: int = 0


def _cond(wl: Obj, ctype: str) -> Obj | None:
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return dict(c)
    return None


def _owner(wl: Obj) -> str:
    refs = (wl.get("metadata") or {}).get("ownerReferences") or []
    return str(refs[0].get("uid")) if refs else ""


# -- one run ----------------------------------------------------------------------------------------------------


def _topology(args: argparse.Namespace, gen: Generator) -> str:
    nominal = sum(q.spec.nominal_quota for q in gen.queues()) * max(args.factors)
    priorities = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": f"perf-{p}"},
            "value": p,
        }
        for p in sorted({k.priority for q in gen.queues() for ws in q.spec.workloads_sets for k in ws.classes})
    ]
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}
    vgpu = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "hami-vgpu"},
        "spec": {"nodeLabels": {"hami.io/vgpu": "true"}},
    }
    topo: Obj = {
        "namespaces": ["default", NAMESPACE],
        "managerObjects": priorities,
        "cpuWorker": {
            "nodes": [{"prefix": "cpu", "count": max(1, math.ceil(nominal / 128)), "cpu": "128", "memory": "512Gi",
                       "pods": 4000}],
            "objects": [flavor, *priorities],
        },
    }  # fmt: skip
    if args.gpu:
        gpus = nominal / 10
        topo["gpuWorker"] = {
            "nodes": [
                {"prefix": "cpu", "count": 1, "cpu": "32", "memory": "128Gi", "pods": 500},
                {
                    "prefix": "gpu",
                    "count": max(1, math.ceil(gpus / GPUS_PER_NODE)),
                    "cpu": "64",
                    "memory": "256Gi",
                    "pods": 2000,
                    "labels": {"hami.io/vgpu": "true", "nvidia.com/gpu.present": "true"},
                    "gpus": {"count": GPUS_PER_NODE, "memoryMiB": GPU_MEMORY_MIB, "split": GPU_SPLIT, "cores": 100},
                },
            ],
            "objects": [flavor, vgpu, *priorities],
        }
    return yaml.safe_dump(topo)


def _quantity(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{round(value * 1000)}m"


def _cluster_queue(q: Queue, factor: float, gpu: bool) -> Obj:
    def res(name: str, per_unit: float) -> Obj:
        out: Obj = {"name": name, "nominalQuota": _quantity(q.spec.nominal_quota * factor * per_unit)}
        if q.spec.borrowing_limit is not None:
            out["borrowingLimit"] = _quantity(q.spec.borrowing_limit * factor * per_unit)
        return out

    if gpu:  # N CPU of the generator's quota -> N/10 GPUs
        group = {
            "coveredResources": ["nvidia.com/gpu", "nvidia.com/total-gpumem", "nvidia.com/total-gpucores"],
            "flavors": [
                {
                    "name": "hami-vgpu",
                    "resources": [
                        res("nvidia.com/gpu", GPU_SPLIT / 10),
                        res("nvidia.com/total-gpumem", GPU_MEMORY_MIB / 10),
                        res("nvidia.com/total-gpucores", 100 / 10),
                    ],
                }
            ],
        }
    else:
        group = {"coveredResources": ["cpu"], "flavors": [{"name": "default-flavor", "resources": [res("cpu", 1)]}]}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": q.name},
        "spec": {
            "cohortName": q.cohort,
            "namespaceSelector": {},
            "resourceGroups": [group],
            "preemption": {
                "reclaimWithinCohort": q.spec.reclaim_within_cohort,
                "withinClusterQueue": q.spec.within_cluster_queue,
            },
        },
    }  # fmt: skip


def _units(k: WorkloadClass, gpu: bool) -> float:
    """What one Job of this class holds of its ClusterQueue's quota (CPU, or GPUs' worth with --gpu)."""
    if gpu:
        n, _mem, cores = GPU_CLASSES.get(k.name, (1, GPU_MEMORY_MIB, 100))
        return n * cores / 100
    return k.request


def _job(s: Submission, gpu: bool, scale: float) -> Obj:
    runtime = s.klass.runtime_ms * scale / 1000
    if gpu:
        n, mem, cores = GPU_CLASSES.get(s.klass.name, (1, GPU_MEMORY_MIB, 100))
        resources: Obj = {
            "limits": {"nvidia.com/gpu": str(n), "nvidia.com/gpumem": str(mem), "nvidia.com/gpucores": str(cores)}
        }
    else:
        resources = {"requests": {"cpu": _quantity(s.klass.request)}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": s.name,
            "namespace": NAMESPACE,
            "labels": {
                "kueue.x-k8s.io/queue-name": s.queue,
                "kueue.x-k8s.io/priority-class": f"perf-{s.klass.priority}",
            },
        },
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"sim.dispatcher.io/run-seconds": f"{runtime:g}"}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "main", "image": "busybox:1.36", "resources": resources}],
                },
            },
        },
    }  # fmt: skip


async def _setup_worker(client: ClusterClient, gen: Generator, factor: float, gpu: bool) -> None:
    for q in gen.queues():
        await client.create(CQS, None, _cluster_queue(q, factor, gpu))
        lq = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": q.name, "namespace": NAMESPACE},
            "spec": {"clusterQueue": q.name},
        }
        await client.create(LQS, NAMESPACE, lq)


async def run_strategy(strategy: str, gen: Generator, args: argparse.Namespace) -> Obj:
    tmp = Path(tempfile.mkdtemp(prefix=f"quality-{strategy}-", dir=args.scratch))
    (tmp / "topology.yaml").write_text(_topology(args, gen))
    n = len(args.factors)
    gpu_workers = str(n if args.gpu else 0)
    sim = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dispatcher", "sim", "up", "--workers", str(n), "--gpu-workers", gpu_workers,
        "--dir", str(tmp / "sim"), "--run-seconds", "1", "--topology", str(tmp / "topology.yaml"),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not await asyncio.to_thread((tmp / "sim" / "ready").exists):
            if time.monotonic() > deadline or sim.returncode is not None:
                raise RuntimeError("the simulated clusters did not start")
            await asyncio.sleep(0.1)
        loaded = load_config(tmp / "sim" / "clusters.yaml")
        workers = tuple(dataclasses.replace(w, max_in_flight=args.max_in_flight) for w in loaded.workers)
        clients = {w.name: await connect(f"bench-{w.name}", w.kube) for w in workers}
        try:
            for (_name, client), factor in zip(sorted(clients.items()), args.factors, strict=True):
                await _setup_worker(client, gen, factor, args.gpu)
            policy = Policy(
                strategy=strategy,
                admission_timeout=args.admission_timeout,
                lost_timeout=60.0,
                suspect_after=20.0,
                gc_interval=30.0,
                finished_retention=3600.0,
                incremental_round=args.workers_per_round,
                incremental_interval=args.round_interval * args.time_scale,
            )
            config = dataclasses.replace(loaded, workers=workers, policy=policy)
            engine = make_engine(f"sqlite+aiosqlite:///{tmp / 'dispatcher.sqlite'}")
            await upgrade(engine)
            repo = Repo(engine)
            dispatcher = Dispatcher(config, repo)
            await dispatcher.start()
            try:
                return await _measure(strategy, gen, args, dispatcher, repo, clients, config.manager)
            finally:
                await dispatcher.stop()
                await engine.dispose()
        finally:
            for c in clients.values():
                await c.close()
    finally:
        if sim.returncode is None:
            sim.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(15):
                    await sim.wait()
            except TimeoutError:
                sim.kill()  # a saturated simulator can take long to wind down
                await sim.wait()


async def _measure(
    strategy: str,
    gen: Generator,
    args: argparse.Namespace,
    dispatcher: Dispatcher,
    repo: Repo,
    clients: dict[str, ClusterClient],
    manager_ref: Any,
) -> Obj:
    seen = Observed()
    stream = gen.stream()
    units = {s.name: _units(s.klass, args.gpu) for s in stream}
    klass = {s.name: s.klass.name for s in stream}
    nominal: dict[str, float] = {}
    for q in gen.queues():
        nominal[q.name] = q.spec.nominal_quota * sum(args.factors) / (10 if args.gpu else 1)

    def handler(worker: str) -> Any:
        def on_workload(kind: str, wl: Obj, _old: Obj | None) -> None:
            now = time.monotonic()
            meta = wl.get("metadata") or {}
            key = (worker, _owner(wl))
            held = (worker, str(meta.get("uid")))
            reserved = _cond(wl, "QuotaReserved") is not None
            done = _cond(wl, "Finished") is not None
            if reserved and key not in seen.admitted:
                seen.admitted[key] = now
            if done and key not in seen.finished:
                seen.finished[key] = now
            evicted = _cond(wl, "Evicted")
            if evicted is not None and evicted.get("reason") == "Preempted":
                found = JOB_UID.search(str(evicted.get("message") or ""))
                seen.preemptions[(worker, str(meta.get("uid")), str(evicted.get("lastTransitionTime")))] = (
                    found.group(1) if found else ""
                )
            refs = meta.get("ownerReferences") or []
            job_name = str(refs[0].get("name")) if refs else ""
            cq = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue")
            if kind != "DELETED" and reserved and not done and cq and job_name in units:
                seen.holding[held] = (str(cq), units[job_name])
            else:
                seen.holding.pop(held, None)

        return on_workload

    informers = [Informer(c, WORKLOADS, handler(name), namespace=NAMESPACE) for name, c in clients.items()]
    for inf in informers:
        inf.start()
    for inf in informers:
        async with asyncio.timeout(30):
            await inf.synced.wait()
    manager = await connect("bench-manager", manager_ref)
    submitted: dict[str, float] = {}
    fragmented: set[str] = set()
    fitter = HamiFitter()
    stop = asyncio.Event()

    async def sampler() -> None:
        while not stop.is_set():
            seen.samples += 1
            for cq, amount in list(seen.holding.values()):
                seen.usage_sum[cq] = seen.usage_sum.get(cq, 0.0) + amount
            if args.gpu:
                now = time.monotonic()
                caps = dispatcher.workers()
                for live in list(dispatcher.live.by_id.values()):
                    if live.name in fragmented or live.state not in (
                        WorkloadState.PENDING,
                        WorkloadState.PLACING,
                        WorkloadState.PLACED,
                    ):
                        continue  # fmt: skip
                    if now - submitted.get(live.name, now) < 0.5 * args.time_scale:
                        continue
                    if any((live.cluster, live.remote_uid) == k for k in seen.admitted if live.cluster):
                        continue
                    pod_sets = live.pending().pod_sets
                    if any(c.gpu is not None and fitter.fit(c, pod_sets, "binpack").ok for c in caps):
                        fragmented.add(live.name)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.25):
                    await stop.wait()

    sampling = asyncio.create_task(sampler())
    sem = asyncio.Semaphore(64)
    start = time.monotonic()

    async def submit(s: Submission) -> None:
        delay = start + s.at_ms * args.time_scale / 1000 - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        async with sem:
            submitted[s.name] = time.monotonic()
            for attempt in range(5):
                try:
                    await manager.create(JobAdapter.resource, NAMESPACE, _job(s, args.gpu, args.time_scale))
                    return
                except KubeError as exc:
                    if exc.already_exists or attempt == 4:
                        return
                    await asyncio.sleep(0.5)

    await asyncio.gather(*(submit(s) for s in stream))
    deadline = time.monotonic() + args.timeout
    names = {s.name for s in stream}
    while time.monotonic() < deadline:
        done = sum(1 for lv in dispatcher.live.by_id.values() if lv.name in names and lv.terminal)
        if done >= len(names):
            break
        await asyncio.sleep(0.25)
    stop.set()
    await sampling
    for inf in informers:
        await inf.stop()
    await manager.close()
    return await _figures(strategy, repo, dispatcher, seen, submitted, klass, nominal, fragmented, start, names)


async def _figures(
    strategy: str,
    repo: Repo,
    dispatcher: Dispatcher,
    seen: Observed,
    submitted: dict[str, float],
    klass: dict[str, str],
    nominal: dict[str, float],
    fragmented: set[str],
    start: float,
    names: set[str],
) -> Obj:
    from sqlalchemy import select

    async with repo.sessions() as s:
        rows = list((await s.scalars(select(Workload).where(Workload.namespace == NAMESPACE))).all())
        placements = list((await s.scalars(select(Placement))).all())
    by_id = {p.id: p for p in placements}
    ran: set[str] = set()
    waits: dict[str, list[float]] = {c: [] for c in CLASSES}
    finished: list[float] = []
    unadmitted = 0
    for row in rows:
        p = by_id.get(row.placement_id or 0)
        key = (p.cluster, p.remote_uid or "") if p is not None else None
        if key is None or key not in seen.admitted or row.name not in submitted:
            unadmitted += 1
            continue
        ran.add(key[1])
        waits.setdefault(klass.get(row.name, "other"), []).append(seen.admitted[key] - submitted[row.name])
        if key in seen.finished:
            finished.append(seen.finished[key])
    everything = [w for ws in waits.values() for w in ws]
    needless = sum(1 for job_uid in seen.preemptions.values() if job_uid and job_uid not in ran)
    samples = max(1, seen.samples)
    usage = {cq: 100.0 * seen.usage_sum.get(cq, 0.0) / samples / n for cq, n in nominal.items() if n > 0}
    return {
        "jobs": len(names),
        "succeeded": sum(1 for r in rows if r.state == WorkloadState.SUCCEEDED),
        "not_admitted": unadmitted,
        "admission_wait_mean_s": {c: round(statistics.fmean(v), 3) if v else None for c, v in waits.items()},
        "admission_wait_p95_s": {c: round(p95(v), 3) if v else None for c, v in waits.items()},
        "admission_wait_mean_all_s": round(statistics.fmean(everything), 3) if everything else 0.0,
        "makespan_s": round(max(finished) - start, 2) if finished else None,
        "min_cq_usage": round(min(usage.values()), 1) if usage else None,
        "copies_created": dispatcher.rt.copies_created,
        "copies_deleted": dispatcher.rt.copies_deleted + dispatcher.gc.deleted,
        "preemptions": len(seen.preemptions),
        "needless_preemptions": needless,
        "loser_admissions": dispatcher.races.loser_admissions,
        "fragmentation_waits": len(fragmented),
    }


# -- main -------------------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> Obj:
    gen = read_generator(Path(args.generator))
    if args.quick:
        gen = gen.scaled(cohorts=1, counts=args.quick_counts)
    elif args.counts != 1.0 or args.cohorts:
        gen = gen.scaled(cohorts=args.cohorts, counts=args.counts)
    if getattr(args, "real", False):
        import quality_real

        return await quality_real.run_real(args, gen)
    out: Obj = {
        "generator": str(args.generator),
        "quick": args.quick,
        "gpu": args.gpu,
        "time_scale": args.time_scale,
        "worker_factors": args.factors,
        "cluster_queues": len(gen.queues()),
        "jobs": gen.workload_count(),
        "strategies": {},
    }
    for strategy in args.strategies:
        t0 = time.monotonic()
        figures = await run_strategy(strategy, gen, args)
        figures["wall_s"] = round(time.monotonic() - t0, 1)
        out["strategies"][strategy] = figures
        if not args.json:
            print(f"{strategy}: {json.dumps(figures)}", file=sys.stderr)
    out.update(ratios(out["strategies"]))
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generator", default=str(DEFAULT_GENERATOR), help="a Kueue scheduler-perf generator file")
    parser.add_argument("--worker-factors", default="1,1,0.5,0.5", help="per worker quota factor (default %(default)s)")
    parser.add_argument(
        "--time-scale", type=float, help="multiplies intervals and run times (default 1; 5 with --quick)"
    )
    parser.add_argument("--quick", action="store_true", help="one cohort, 1/50 of the workloads, time x5")
    parser.add_argument("--quick-counts", type=float, default=0.02, help=argparse.SUPPRESS)
    parser.add_argument("--counts", type=float, default=1.0, help="scale every workloads set's count")
    parser.add_argument("--cohorts", type=int, help="keep only this many cohorts of the first cohort class")
    parser.add_argument("--gpu", action="store_true", help="the classes as HAMi vGPU requests on GPU workers")
    parser.add_argument("--strategies", default=",".join(STRATEGIES), help="default %(default)s")
    parser.add_argument("--workers-per-round", type=int, default=3, help="incremental (default 3)")
    parser.add_argument("--round-interval", type=float, default=300.0, help="incremental, seconds (time-scaled)")
    parser.add_argument("--admission-timeout", type=float, default=600.0, help="scored's admission timeout")
    parser.add_argument("--max-in-flight", type=int, default=100, help="per worker")
    parser.add_argument("--timeout", type=float, default=1800.0, help="give up waiting for the jobs after this")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_keep_option(parser)
    parser.add_argument("--verbose", action="store_true", help="the dispatcher's log on stderr")
    import quality_real  # the real-rig run (bench/quality_real.py): real MultiKueue as the peer

    quality_real.add_arguments(parser)
    args = parser.parse_args(argv)
    quality_real.check(parser, args)
    if args.time_scale is None:
        args.time_scale = 5.0 if args.quick else 1.0
    if args.time_scale <= 0:
        parser.error(f"--time-scale: expected a positive number, got {args.time_scale!r}")
    try:
        args.factors = [float(f) for f in args.worker_factors.split(",") if f.strip()]
    except ValueError:
        parser.error(f"--worker-factors: expected numbers separated by commas, got {args.worker_factors!r}")
    if not args.factors or any(f <= 0 for f in args.factors):
        parser.error(f"--worker-factors: expected positive numbers, got {args.worker_factors!r}")
    args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    bad = [s for s in args.strategies if s not in STRATEGIES]
    if bad:
        parser.error(f"--strategies: {bad[0]!r} is not one of {', '.join(STRATEGIES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def terminate(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # unwinds asyncio.run, so every run's finally stops its simulated clusters

    signal.signal(signal.SIGTERM, terminate)
    if args.verbose:
        import logging

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # Every strategy's clusters, database and logs go under one directory, removed at the end (bench/_common.py).
    with scratch_dir("quality-", keep=args.keep) as args.scratch:
        try:
            report = asyncio.run(run(args))
        except GeneratorError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
