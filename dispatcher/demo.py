"""``dispatcher demo``: the whole product on the embedded default, in one command.

Starts simulated clusters (a manager and three workers, the last with HAMi GPU nodes), a SQLite
database in a temporary directory and the dispatcher; submits a mix of Jobs to the manager through
its API (CPU only, whole GPUs, fractional vGPUs; two namespaces and queues; two priorities; half handed
over with ``spec.managedBy``, half suspended), plus a JobSet, a PyTorchJob and a RayJob whose workers ask
for HAMi vGPUs; shows progress; and ends with a table (or ``--json``) naming each job's kind.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, TextIO

from . import DEFAULT_CONTROLLER_NAME
from .config import Policy, load_config
from .kube.client import KubeError, connect
from .quantity import format_quantity, parse_quantity
from .service import Dispatcher
from .store.engine import make_engine
from .store.migrate import upgrade
from .store.models import WorkloadState
from .store.repo import Repo

__all__ = ["DemoOptions", "demo_gangs", "demo_jobs", "run_demo"]

Obj = dict[str, Any]


@dataclass
class DemoOptions:
    jobs: int = 30
    workers: int = 3
    gpu_workers: int = 1
    seed: int = 7
    timeout: float = 170.0
    json: bool = False


def _job(
    name: str,
    namespace: str,
    *,
    cpu: str,
    memory: str,
    gpu: Obj | None,
    seconds: float,
    parallelism: int,
    priority: str,
    managed: bool,
) -> Obj:
    resources: Obj = {"requests": {"cpu": cpu, "memory": memory}}
    if gpu:
        resources["limits"] = dict(gpu)
    spec: Obj = {
        "parallelism": parallelism,
        "completions": parallelism,
        "backoffLimit": 0,
        "template": {
            "metadata": {"annotations": {"sim.dispatcher.io/run-seconds": f"{seconds:g}"}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "main", "image": "busybox:1.36", "command": ["sleep", "1"], "resources": resources}
                ],
            },
        },
    }
    if managed:
        spec["managedBy"] = DEFAULT_CONTROLLER_NAME
    else:
        spec["suspend"] = True
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/priority-class": priority},
        },
        "spec": spec,
    }


def demo_jobs(count: int, seed: int) -> list[Obj]:
    """A reproducible mix: CPU jobs, whole-GPU jobs, fractional vGPU jobs; two queues, two priorities."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        namespace = "team-a" if i % 2 == 0 else "team-b"
        priority = "high" if i % 5 == 0 else "low"
        managed = i % 2 == 1
        seconds = rng.choice([2, 3, 4, 5])
        kind = i % 3
        if kind == 0:
            out.append(
                _job(
                    f"cpu-{i:02d}",
                    namespace,
                    cpu=rng.choice(["500m", "1", "2"]),
                    memory="1Gi",
                    gpu=None,
                    seconds=seconds,
                    parallelism=rng.choice([1, 2]),
                    priority=priority,
                    managed=managed,
                )
            )
        elif kind == 1:
            out.append(
                _job(
                    f"gpu-whole-{i:02d}",
                    namespace,
                    cpu="1",
                    memory="4Gi",
                    gpu={"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"},
                    seconds=seconds,
                    parallelism=1,
                    priority=priority,
                    managed=managed,
                )
            )
        else:
            mem = rng.choice(["8000", "10000", "16000"])
            out.append(
                _job(
                    f"vgpu-{i:02d}",
                    namespace,
                    cpu="500m",
                    memory="2Gi",
                    gpu={"nvidia.com/gpu": "1", "nvidia.com/gpumem": mem, "nvidia.com/gpucores": "30"},
                    seconds=seconds,
                    parallelism=1,
                    priority=priority,
                    managed=managed,
                )
            )
    return out


def _container(name: str, cpu: str, memory: str, limits: Obj | None = None) -> Obj:
    resources: Obj = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "busybox:1.36", "resources": resources}


def _pod_template(container: Obj, seconds: float) -> Obj:
    return {
        "metadata": {"annotations": {"sim.dispatcher.io/run-seconds": f"{seconds:g}"}},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }


def demo_gangs(seconds: float = 4.0) -> list[Obj]:
    """A JobSet, a PyTorchJob and a RayJob (its worker group on HAMi vGPUs), all handed over with managedBy."""

    def meta(name: str) -> Obj:
        return {
            "name": name,
            "namespace": "team-a",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "annotations": {"sim.dispatcher.io/run-seconds": f"{seconds:g}"},
        }

    def replicated(name: str, replicas: int, parallelism: int) -> Obj:
        return {
            "name": name,
            "replicas": replicas,
            "template": {
                "spec": {
                    "parallelism": parallelism,
                    "completions": parallelism,
                    "backoffLimit": 0,
                    "template": _pod_template(_container(name, "500m", "1Gi"), seconds),
                }
            },
        }

    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta("jobset-train"),
        "spec": {
            "managedBy": DEFAULT_CONTROLLER_NAME,
            "replicatedJobs": [replicated("leader", 1, 1), replicated("workers", 2, 2)],
        },
    }
    pytorch = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": meta("pytorch-mnist"),
        "spec": {
            "runPolicy": {"managedBy": DEFAULT_CONTROLLER_NAME},
            "pytorchReplicaSpecs": {
                role: {
                    "replicas": count,
                    "restartPolicy": "OnFailure",
                    "template": _pod_template(_container("pytorch", "1", "2Gi"), seconds),
                }
                for role, count in (("Master", 1), ("Worker", 2))
            },
        },
    }
    vgpu = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000", "nvidia.com/gpucores": "30"}
    ray = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": meta("ray-vgpu"),
        "spec": {
            "managedBy": DEFAULT_CONTROLLER_NAME,
            "entrypoint": "python -c 'import ray; ray.init()'",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [_container("ray-head", "1", "2Gi")]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu-workers",
                        "replicas": 2,
                        "minReplicas": 2,
                        "maxReplicas": 2,
                        "rayStartParams": {},
                        "template": {"spec": {"containers": [_container("ray-worker", "1", "2Gi", vgpu)]}},
                    }
                ],
            },
        },
    }
    return [jobset, pytorch, ray]


def _total_requests(pod_sets: list[Obj]) -> dict[str, str]:
    total: dict[str, Fraction] = {}
    for ps in pod_sets:
        for res, qty in (ps.get("requests") or {}).items():
            total[res] = total.get(res, Fraction(0)) + parse_quantity(qty) * int(ps.get("count", 1))
    return {k: format_quantity(v, binary=k == "memory") for k, v in sorted(total.items())}


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows)


async def run_demo(options: DemoOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    from kubesim.world import SimWorld, WorldOptions

    progress = err if options.json else out
    world = SimWorld(WorldOptions(workers=options.workers, gpu_workers=options.gpu_workers, default_run_seconds=3.0))
    await world.start()
    with tempfile.TemporaryDirectory(prefix="dispatcher-demo-") as tmp:
        directory = Path(tmp)
        await asyncio.to_thread(world.write_files, directory)
        loaded = load_config(directory / "clusters.yaml")
        policy = Policy(
            mode="binpack",
            admission_timeout=60.0,
            lost_timeout=30.0,
            suspect_after=10.0,
            finished_retention=3600.0,
            gc_interval=30.0,
        )
        config = type(loaded)(
            manager=loaded.manager,
            workers=loaded.workers,
            policy=policy,
            controller_name=loaded.controller_name,
            origin=loaded.origin,
            database_url=f"sqlite+aiosqlite:///{directory / 'dispatcher.sqlite'}",
        )
        engine = make_engine(config.database_url or "")
        await upgrade(engine)
        repo = Repo(engine)
        dispatcher = Dispatcher(config, repo)
        started = time.monotonic()
        try:
            await dispatcher.start()
            print(
                f"dispatcher up: manager + {len(config.workers)} workers "
                f"({', '.join(w.name for w in config.workers)}), SQLite at {directory / 'dispatcher.sqlite'}",
                file=progress,
            )
            manager = await connect("manager", config.manager)
            jobs = demo_jobs(options.jobs, options.seed)
            gangs = demo_gangs()
            try:
                from .adapters import default_adapters

                resources = {a.kind: a.resource for a in default_adapters()}
                for job in [*jobs, *gangs]:
                    await manager.create(resources[job["kind"]], job["metadata"]["namespace"], job)
                print(
                    f"submitted {len(jobs)} Jobs and a {', a '.join(g['kind'] for g in gangs)} to the manager",
                    file=progress,
                )
                jobs = [*jobs, *gangs]
                done = await _wait(repo, len(jobs), started, options.timeout, progress)
            finally:
                await manager.close()
            rows = await repo.list_workloads(limit=10_000)
            summary = _summary(world, rows)
        except KubeError as exc:
            print(f"dispatcher demo: {exc}", file=err)
            return 1
        finally:
            await dispatcher.stop()
            await engine.dispose()
            await world.stop()
    if options.json:
        json.dump(summary, out, indent=2)
        out.write("\n")
    else:
        _print_summary(summary, out)
    if not done:
        print(f"dispatcher demo: not every job finished within {options.timeout:g}s", file=err)
        return 1
    return 0 if all(j["state"] == WorkloadState.SUCCEEDED for j in summary["jobs"]) else 1


async def _wait(repo: Repo, total: int, started: float, timeout: float, progress: TextIO) -> bool:
    last = ""
    while time.monotonic() - started < timeout:
        counts = await repo.count_by_state()
        finished = sum(counts.get(s, 0) for s in WorkloadState.TERMINAL)
        line = "  ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        if line != last:
            print(f"[{time.monotonic() - started:5.1f}s] {line}", file=progress)
            last = line
        if finished >= total:
            return True
        await asyncio.sleep(1.0)
    return False


def _summary(world: Any, rows: list[Any]) -> Obj:
    workers = []
    for w in world.workers:
        workers.append({"name": w.name, "gpus": int(w.describe().get("gpus", 0))})
    jobs = []
    for r in sorted(rows, key=lambda r: (r.namespace, r.name)):
        submitted = r.created_at or r.submitted_at
        wait = (r.admitted_at - submitted).total_seconds() if r.admitted_at and submitted else None
        run = (r.finished_at - r.started_at).total_seconds() if r.finished_at and r.started_at else None
        reason = str((r.last_decision or {}).get("summary", ""))
        jobs.append(
            {
                "namespace": r.namespace,
                "name": r.name,
                "kind": r.kind,
                "cluster": r.cluster,
                "state": r.state,
                "priority": r.priority,
                "requests": _total_requests(r.pod_sets or []),
                "reason": reason or (r.reason or ""),
                "waitSeconds": round(wait, 1) if wait is not None else None,
                "runSeconds": round(run, 1) if run is not None else None,
            }
        )
    return {"workers": workers, "jobs": jobs}


def _print_summary(summary: Obj, out: TextIO) -> None:
    rows = [["JOB", "KIND", "CLUSTER", "STATE", "REQUESTS", "WAIT", "RUN", "REASON"]]
    for j in summary["jobs"]:
        req = ",".join(f"{k.removeprefix('nvidia.com/')}={v}" for k, v in j["requests"].items())
        rows.append(
            [
                f"{j['namespace']}/{j['name']}",
                j["kind"],
                j["cluster"] or "-",
                j["state"],
                req,
                f"{j['waitSeconds']:.1f}s" if j["waitSeconds"] is not None else "-",
                f"{j['runSeconds']:.1f}s" if j["runSeconds"] is not None else "-",
                j["reason"][:70],
            ]
        )
    print(_table(rows), file=out)
    by_cluster: dict[str, int] = {}
    for j in summary["jobs"]:
        by_cluster[j["cluster"] or "-"] = by_cluster.get(j["cluster"] or "-", 0) + 1
    print("\nper cluster: " + ", ".join(f"{k} {v}" for k, v in sorted(by_cluster.items())), file=out)
