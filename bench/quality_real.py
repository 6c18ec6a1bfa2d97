"""Placement quality on real components against real MultiKueue: ``bench/quality.py --real``.

One ``dispatcher rig up --real --manager-kueue external`` (real kube-apiserver, etcd, controller manager,
scheduler, kwok, Kueue v0.17.0 and JobSet per cluster; real Kueue with MultiKueue on the manager), and on those
same clusters, one after the other, the same stream of Kueue's scheduler-performance workload (the generator of
``bench/quality.py``) under:

* ``allAtOnce``: real MultiKueue, Kueue's AllAtOnce dispatcher (``multiKueue.dispatcherName`` switched through the
  rig's admin endpoint; the manager's Kueue restarts);
* ``incremental``: real MultiKueue, Kueue's Incremental dispatcher;
* ``external``: real MultiKueue with this dispatcher as its external dispatcher (``--mode kueue-external``);
* ``standalone``: this dispatcher alone (the manager's Kueue stopped, its webhooks failing open: the manager is a
  plain cluster, as standalone mode expects).

Every Job is written as users write it for MultiKueue (``spec.managedBy: kueue.x-k8s.io/multikueue``). Figures per
configuration, from informers on the workers' Workloads: admission wait (submission on the manager to
QuotaReserved of the worker copy that ran; mean and p95 per class), remote Workloads created (copies), makespan
(first submission to the last copy Finished), preemptions on the workers and the needless ones (the preemptor's
copy did not end up running), and with ``--failover`` the time from a worker's loss (``stop``: its API server
stopped) to the admission of a running Job elsewhere, with MultiKueue's ``workerLostTimeout`` equal to the
dispatcher's ``lostTimeout`` (``--lost-timeout``).

``--gpu``: every worker is a HAMi GPU worker (``--gpu-workers``) and the classes are the vGPU requests of
``bench/quality.py --gpu``. The workers' real kube-scheduler places the pods through HAMi's scheduler extender
(:mod:`dispatcher.rig.hami`: the real extender protocol, with the *simulator's* HAMi rules, since HAMi's Go module is
not served), real Kueue counts the GPU quota with HAMi's resource transformations (the manager's Kueue too). GPU
fragmentation shows as pods that real Kueue admitted but the scheduler could not place (``PodScheduled`` False,
``Unschedulable``): counted per configuration, with the time from the copy's QuotaReserved to its pod's binding.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import dataclasses
import json
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
from quality import (
    CLASSES,
    CQS,
    GPU_MEMORY_MIB,
    GPU_SPLIT,
    GPUS_PER_NODE,
    LQS,
    NAMESPACE,
    WORKLOADS,
    Generator,
    _cluster_queue,
    _job,
    p95,
)

from dispatcher.config import KubeconfigRef, load_config
from dispatcher.kube.client import ClusterClient, KubeError, Resource, connect
from dispatcher.kube.informer import Informer
from dispatcher.native.run import NativeDispatcher
from dispatcher.service import Dispatcher
from dispatcher.store.engine import make_engine
from dispatcher.store.migrate import upgrade
from dispatcher.store.repo import Repo

Obj = dict[str, Any]
CONFIGS = ("allAtOnce", "incremental", "external", "standalone")
FLAVOUR = {"allAtOnce": "all-at-once", "incremental": "incremental", "external": "external"}
JOBS = Resource("batch", "v1", "jobs", "Job")
PODS = Resource("", "v1", "pods", "Pod")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
PRIORITIES = Resource("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass", False)
MUTATING = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "x", False)
VALIDATING = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "x", False)
WL_NAME = re.compile(r"^job-(.+)-[0-9a-f]{5}$")
PREEMPTOR = re.compile(r"\(UID: ([^,)\s]+)")


@dataclass
class Seen:
    """What the workers' Workloads showed during one configuration's run (monotonic times)."""

    created: set[tuple[str, str]] = field(default_factory=set)  # (worker, workload uid)
    reserved: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)  # -> (job, first QuotaReserved)
    finished: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)
    preemptions: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (worker, uid, when) -> preemptor uid
    #: Where the wait goes, per job (first times): a copy seen on any worker; on the manager's Workload, quota
    #: reserved, nominations written, ``clusterName`` set (MultiKueue configurations only).
    first_copy: dict[str, float] = field(default_factory=dict)
    manager_reserved: dict[str, float] = field(default_factory=dict)
    nominated: dict[str, float] = field(default_factory=dict)
    assigned: dict[str, float] = field(default_factory=dict)
    #: Pods on the workers, per (worker, job): first bound to a node; refused by the scheduler at least once.
    scheduled: dict[tuple[str, str], float] = field(default_factory=dict)
    unschedulable: set[tuple[str, str]] = field(default_factory=set)


def _true(wl: Obj, ctype: str) -> Obj | None:
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return dict(c)
    return None


def _handler(seen: Seen, worker: str) -> Any:
    def on_workload(kind: str, wl: Obj, _old: Obj | None) -> None:
        meta = wl.get("metadata") or {}
        match = WL_NAME.match(str(meta.get("name", "")))
        if match is None or kind == "DELETED":
            return
        key, job, now = (worker, str(meta.get("uid"))), match.group(1), time.monotonic()
        seen.created.add(key)
        seen.first_copy.setdefault(job, now)
        if _true(wl, "QuotaReserved") and key not in seen.reserved:
            seen.reserved[key] = (job, now)
        if _true(wl, "Finished") and key not in seen.finished:
            seen.finished[key] = (job, now)
        evicted = _true(wl, "Evicted")
        if evicted is not None and evicted.get("reason") == "Preempted":
            found = PREEMPTOR.search(str(evicted.get("message") or ""))
            seen.preemptions[(*key, str(evicted.get("lastTransitionTime")))] = found.group(1) if found else ""

    return on_workload


def _manager_handler(seen: Seen) -> Any:
    def on_workload(kind: str, wl: Obj, _old: Obj | None) -> None:
        match = WL_NAME.match(str((wl.get("metadata") or {}).get("name", "")))
        if match is None or kind == "DELETED":
            return
        job, now, status = match.group(1), time.monotonic(), wl.get("status") or {}
        if _true(wl, "QuotaReserved"):
            seen.manager_reserved.setdefault(job, now)
        if status.get("nominatedClusterNames"):
            seen.nominated.setdefault(job, now)
        if status.get("clusterName"):
            seen.assigned.setdefault(job, now)

    return on_workload


def _pod_handler(seen: Seen, worker: str) -> Any:
    def on_pod(kind: str, pod: Obj, _old: Obj | None) -> None:
        job = str(((pod.get("metadata") or {}).get("labels") or {}).get("job-name", ""))
        if not job or kind == "DELETED":
            return
        key = (worker, job)
        if (pod.get("spec") or {}).get("nodeName"):
            seen.scheduled.setdefault(key, time.monotonic())
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
                seen.unschedulable.add(key)

    return on_pod


def _stages(seen: Seen, submitted: dict[str, float], ran: dict[tuple[str, str], str]) -> Obj:
    """Mean seconds of each step of the wait, over the jobs that ran (each step where both ends were seen)."""
    reserved = {job: seen.reserved[key][1] for key, job in ran.items() if key in seen.reserved}
    steps = {
        "submit_to_manager_reserved": (submitted, seen.manager_reserved),
        "manager_reserved_to_nominated": (seen.manager_reserved, seen.nominated),
        "nominated_to_first_copy": (seen.nominated, seen.first_copy),
        "submit_to_first_copy": (submitted, seen.first_copy),
        "first_copy_to_reserved": (seen.first_copy, reserved),
        "reserved_to_cluster_name": (reserved, seen.assigned),
    }
    out: Obj = {}
    for name, (start, end) in steps.items():
        spans = [end[j] - start[j] for j in reserved if j in start and j in end]
        out[name] = round(statistics.fmean(spans), 3) if spans else None
    return out


class Bench:
    """The rig, its clients, and one configuration at a time."""

    def __init__(self, args: argparse.Namespace, gen: Generator, directory: Path) -> None:
        self.args, self.gen, self.dir = args, gen, directory
        self.rig: asyncio.subprocess.Process | None = None
        self.admin = ""
        self.clients: dict[str, ClusterClient] = {}
        self.workers = [f"worker-{i}" for i in range(1, len(args.factors) + 1)]

    # -- the rig ----------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        topology = self.dir / "topology.yaml"
        nominal = sum(q.spec.nominal_quota + (q.spec.borrowing_limit or 0) for q in self.gen.queues())
        gpu = self.args.gpu
        priorities = sorted({k.priority for q in self.gen.queues() for ws in q.spec.workloads_sets for k in ws.classes})
        self.priorities = [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": f"perf-{p}"},
             "value": p}
            for p in priorities
        ]  # fmt: skip
        flavor = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "default-flavor"},
        }
        topo: Obj = {
            "namespaces": ["default", NAMESPACE],
            "managerObjects": [flavor, *self.priorities],
            "cpuWorker": {
                "nodes": [{"prefix": "cpu", "count": 1, "cpu": str(int(nominal * max(self.args.factors)) + 8),
                           "memory": "2048Gi", "pods": 2000}],
                "objects": [flavor, *self.priorities],
            },
        }  # fmt: skip
        if gpu:  # as bench/quality.py --gpu: GPU nodes for the nominal quota of the largest worker, in GPUs
            vgpu = {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": "hami-vgpu"},
                "spec": {"nodeLabels": {"hami.io/vgpu": "true"}},
            }
            gpus = sum(q.spec.nominal_quota for q in self.gen.queues()) * max(self.args.factors) / 10
            topo["managerObjects"] = [flavor, vgpu, *self.priorities]
            topo["gpuWorker"] = {
                "nodes": [
                    {"prefix": "cpu", "count": 1, "cpu": "32", "memory": "128Gi", "pods": 500},
                    {"prefix": "gpu", "count": max(1, -(-int(gpus) // GPUS_PER_NODE)), "cpu": "64",
                     "memory": "256Gi", "pods": 2000,
                     "labels": {"hami.io/vgpu": "true", "nvidia.com/gpu.present": "true"},
                     "gpus": {"count": GPUS_PER_NODE, "memoryMiB": GPU_MEMORY_MIB, "split": GPU_SPLIT, "cores": 100}},
                ],
                "objects": [flavor, vgpu, *self.priorities],
            }  # fmt: skip
        topology.write_text(yaml.safe_dump(topo))
        rig_dir = self.dir / "rig"
        self.rig = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "dispatcher", "rig", "up", "--real", "--workers", str(len(self.workers)),
            "--manager-kueue", "external", "--worker-lost-timeout", f"{self.args.lost_timeout:g}",
            "--gpu-workers", str(len(self.workers) if gpu else 0),
            "--run-seconds", "1", "--topology", str(topology), "--dir", str(rig_dir),
            stdout=asyncio.subprocess.DEVNULL, stderr=(self.dir / "rig-up.log").open("wb"),
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while not (rig_dir / "ready").exists():
            if self.rig.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the real rig did not start; see {self.dir / 'rig-up.log'}")
            await asyncio.sleep(0.5)
        self.admin = json.loads((rig_dir / "rig.json").read_text())["admin"]
        for name in ("manager", *self.workers):
            self.clients[name] = await connect(
                f"bench-{name}", KubeconfigRef(path=str(rig_dir / f"{name}.kubeconfig")), timeout=30
            )
        await self._queues()

    async def stop(self) -> None:
        for c in self.clients.values():
            await c.close()
        if self.rig is not None and self.rig.returncode is None:
            self.rig.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(120):
                    await self.rig.wait()
            except TimeoutError:
                self.rig.kill()

    async def post(self, path: str, body: Obj) -> None:
        import aiohttp

        async with aiohttp.ClientSession() as s, s.post(f"{self.admin}{path}", json=body) as r:
            if r.status != 200:
                raise RuntimeError(f"rig admin {path}: {r.status} {await r.text()}")

    async def _queues(self) -> None:
        """The generator's ClusterQueues and LocalQueues on every worker (scaled by its factor) and on the manager
        (the workers' sum, with MultiKueue's AdmissionCheck)."""
        total = sum(self.args.factors)
        for name, client in self.clients.items():
            factor = total if name == "manager" else self.args.factors[self.workers.index(name)]
            for q in self.gen.queues():
                cq = _cluster_queue(q, factor, self.args.gpu)
                if name == "manager":
                    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "multikueue"}]}
                await _create(client, CQS, None, cq)
                lq: Obj = {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "spec": {"clusterQueue": q.name},
                }
                lq["metadata"] = {"name": q.name, "namespace": NAMESPACE}
                await _create(client, LQS, NAMESPACE, lq)

    async def _kueue_on_manager(self, running: bool) -> None:
        """Stop (webhooks failing open) or start the manager's Kueue."""
        manager = self.clients["manager"]
        policy = "Fail" if running else "Ignore"
        for res, name in ((MUTATING, "kueue-mutating-webhook-configuration"),
                          (VALIDATING, "kueue-validating-webhook-configuration")):  # fmt: skip
            config = await manager.get(res, None, name)
            if config is not None:
                hooks = [{"name": h["name"], "failurePolicy": policy} for h in config.get("webhooks") or []]
                await manager.patch(res, None, name, {"webhooks": hooks}, patch_type="strategic")
        await self.post("/clusters/manager/components/kueue", {"action": "start" if running else "stop"})

    # -- one configuration ----------------------------------------------------------------------------------------

    async def run(self, config: str) -> Obj:
        if config in FLAVOUR:
            await self.post("/multikueue", {"flavour": FLAVOUR[config]})
        loaded = load_config(self.dir / "rig" / "clusters.yaml")
        policy = dataclasses.replace(
            loaded.policy, admission_timeout=self.args.admission_timeout, lost_timeout=self.args.lost_timeout
        )
        db = make_engine(f"sqlite+aiosqlite:///{self.dir / f'{config}.sqlite'}")
        await upgrade(db)
        dispatcher: Any = None
        if config == "external":
            dispatcher = NativeDispatcher(dataclasses.replace(loaded, policy=policy), Repo(db))
        elif config == "standalone":
            await self._kueue_on_manager(False)
            policy = dataclasses.replace(policy, strategy="scored")
            workers = tuple(dataclasses.replace(w, max_in_flight=self.args.max_in_flight) for w in loaded.workers)
            dispatcher = Dispatcher(
                dataclasses.replace(loaded, mode="standalone", policy=policy, workers=workers), Repo(db)
            )
        try:
            if dispatcher is not None:
                await dispatcher.start()
            figures = await self._stream(config)
            if self.args.failover:
                figures["failover_s"] = await self._failover(config)
            return figures
        finally:
            if dispatcher is not None:
                await dispatcher.stop()
            await db.dispose()
            await self._clean()
            if config == "standalone":
                await self._kueue_on_manager(True)

    async def _stream(self, config: str) -> Obj:
        seen = Seen()
        informers = [Informer(self.clients[w], WORKLOADS, _handler(seen, w), namespace=NAMESPACE) for w in self.workers]
        informers.append(Informer(self.clients["manager"], WORKLOADS, _manager_handler(seen), namespace=NAMESPACE))
        informers += [Informer(self.clients[w], PODS, _pod_handler(seen, w), namespace=NAMESPACE) for w in self.workers]
        for inf in informers:
            inf.start()
        for inf in informers:
            async with asyncio.timeout(60):
                await inf.synced.wait()
        stream = self.gen.stream()
        klass = {s.name: s.klass.name for s in stream}
        submitted: dict[str, float] = {}
        start = time.monotonic()
        manager = self.clients["manager"]

        async def submit(s: Any) -> None:
            await asyncio.sleep(max(0.0, start + s.at_ms * self.args.time_scale / 1000 - time.monotonic()))
            submitted[s.name] = time.monotonic()
            await _create(manager, JOBS, NAMESPACE, _managed(_job(s, self.args.gpu, self.args.time_scale)), retries=60)

        await asyncio.gather(*(submit(s) for s in stream))
        await _until(
            lambda: True if len({j for j, _ in seen.finished.values()}) >= len(stream) else None, self.args.timeout
        )
        for inf in informers:
            await inf.stop()
        ran = {key: job for key, (job, _) in seen.finished.items()}
        waits: dict[str, list[float]] = {c: [] for c in CLASSES}
        for key, job in ran.items():
            if key in seen.reserved and job in submitted:
                waits.setdefault(klass.get(job, "other"), []).append(seen.reserved[key][1] - submitted[job])
        everything = [w for ws in waits.values() for w in ws]
        ran_uids = {uid for _, uid in ran}
        needless = sum(1 for who in seen.preemptions.values() if who and who not in ran_uids)
        ran_keys = {(worker, job) for (worker, _uid), job in ran.items()}
        binding = [
            seen.scheduled[(w, j)] - seen.reserved[(w, u)][1]
            for (w, u), j in ran.items()
            if (w, u) in seen.reserved and (w, j) in seen.scheduled
        ]
        # When the job really started: submission to its pod bound to a node on the worker that ran it.
        started = [seen.scheduled[(w, j)] - submitted[j] for (w, _u), j in ran.items() if (w, j) in seen.scheduled]
        return {
            "jobs": len(stream),
            "finished": len(set(ran.values())),
            "ran_twice": len(ran) - len(set(ran.values())),
            # The stronger test: the job's pods were bound on two workers (its copy really ran twice).
            "pods_on_two_workers": sum(
                1 for j in set(ran.values()) if len({w for (w, jj) in seen.scheduled if jj == j}) > 1
            ),
            "ran_twice_on": {
                j: sorted(w for (w, _u), jj in ran.items() if jj == j)
                for j in {jj for jj in ran.values() if list(ran.values()).count(jj) > 1}
            },
            "admission_wait_mean_s": {c: round(statistics.fmean(v), 3) if v else None for c, v in waits.items()},
            "admission_wait_p95_s": {c: round(p95(v), 3) if v else None for c, v in waits.items()},
            "admission_wait_mean_all_s": round(statistics.fmean(everything), 3) if everything else None,
            "makespan_s": round(max(t for _, t in seen.finished.values()) - start, 2) if seen.finished else None,
            "copies_created": len(seen.created),
            "preemptions": len(seen.preemptions),
            "needless_preemptions": needless,
            "wait_steps_mean_s": _stages(seen, submitted, ran),
            "start_wait_mean_s": round(statistics.fmean(started), 3) if started else None,
            "start_wait_p95_s": round(p95(started), 3) if started else None,
            "reserved_to_pod_bound_mean_s": round(statistics.fmean(binding), 3) if binding else None,
            "reserved_to_pod_bound_p95_s": round(p95(binding), 3) if binding else None,
            "unschedulable_after_admission": len(ran_keys & seen.unschedulable),
        }

    async def _failover(self, config: str) -> float | None:
        """One Job running for long; its worker's API server stopped; seconds until a copy elsewhere is admitted."""
        seen = Seen()
        informers = [Informer(self.clients[w], WORKLOADS, _handler(seen, w), namespace=NAMESPACE) for w in self.workers]
        for inf in informers:
            inf.start()
        job = copy.deepcopy(_managed(_job(self.gen.stream()[0], self.args.gpu, 1.0)))
        job["metadata"]["name"] = name = f"failover-{config.lower()}"
        job["spec"]["template"]["metadata"]["annotations"]["sim.dispatcher.io/run-seconds"] = "600"
        try:
            await _create(self.clients["manager"], JOBS, NAMESPACE, job, retries=60)
            victim = None
            deadline = time.monotonic() + 180
            while victim is None and time.monotonic() < deadline:
                victim = await self._where(name)
                await asyncio.sleep(0.5)
            if victim is None:
                return None
            await asyncio.sleep(2.0)
            await self.post(f"/clusters/{victim}/fault", {"mode": "stop"})
            lost = time.monotonic()
            elsewhere = await _until(
                lambda: next(
                    (t for k, (j, t) in seen.reserved.items() if j == name and k[0] != victim and t > lost), None
                ),
                self.args.lost_timeout * 3 + 120,
            )
            return round(elsewhere - lost, 1) if elsewhere is not None else None
        finally:
            for w in self.workers:
                await self.post(f"/clusters/{w}/fault", {"mode": "none"})
            for inf in informers:
                await inf.stop()

    async def _where(self, job: str) -> str | None:
        """The worker a Job runs on: its manager Workload's ``clusterName`` (MultiKueue), else the dispatcher's
        labels on the manager Job once its copy is admitted (standalone)."""
        manager = self.clients["manager"]
        with contextlib.suppress(KubeError):
            for wl in (await manager.list(WORKLOADS, NAMESPACE)).get("items") or []:
                if any(o.get("name") == job for o in wl["metadata"].get("ownerReferences") or []):
                    cluster = (wl.get("status") or {}).get("clusterName")
                    if cluster:
                        return str(cluster)
            labels = (((await manager.get(JOBS, NAMESPACE, job)) or {}).get("metadata") or {}).get("labels") or {}
            if labels.get("kueue-dispatcher.io/state") in ("Admitted", "Running"):
                return str(labels.get("kueue-dispatcher.io/cluster"))
        return None

    async def _clean(self) -> None:
        """Delete the run's Jobs on the manager and wait until no copy is left on any worker."""
        manager = self.clients["manager"]
        with contextlib.suppress(KubeError):
            await manager.request(
                "DELETE",
                JOBS.path(NAMESPACE),
                body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
            )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            left = 0
            for name in ("manager", *self.workers):
                with contextlib.suppress(KubeError):
                    left += len((await self.clients[name].list(JOBS, NAMESPACE)).get("items") or [])
                    if name != "manager":
                        left += len((await self.clients[name].list(WORKLOADS, NAMESPACE)).get("items") or [])
            if not left:
                return
            await asyncio.sleep(1.0)


def _managed(job: Obj) -> Obj:
    """A Job as written for MultiKueue: managedBy instead of suspended."""
    job["spec"].pop("suspend", None)
    job["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    return job


async def _create(client: ClusterClient, res: Resource, namespace: str | None, obj: Obj, *, retries: int = 30) -> None:
    """Create, retrying while webhooks come up (a restarting Kueue refuses for a few seconds)."""
    for attempt in range(retries):
        try:
            await client.create(res, namespace, obj)
            return
        except KubeError as exc:
            if exc.already_exists:
                return
            if attempt == retries - 1:
                raise
            await asyncio.sleep(1.0)


async def _until(probe: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value is not None:
            return value
        await asyncio.sleep(0.25)
    return None


def _ratios(configs: dict[str, Obj]) -> Obj:
    """Each configuration against real AllAtOnce (wait, copies, makespan), as the issue's targets state them."""
    base = configs.get("allAtOnce")
    if not base:
        return {}
    out: Obj = {}
    for name, fig in configs.items():
        if name == "allAtOnce":
            continue
        row: Obj = {}
        for key in ("admission_wait_mean_all_s", "start_wait_mean_s", "copies_created", "makespan_s"):
            a, b = fig.get(key), base.get(key)
            row[key] = round(a / b, 3) if a is not None and b else None
        out[name] = row
    return {"against_all_at_once": out}


async def run_real(args: argparse.Namespace, gen: Generator) -> Obj:
    """Every configuration of ``args.configs`` on one real rig; the figures and the ratios to real AllAtOnce."""
    directory = Path(tempfile.mkdtemp(prefix="quality-real-", dir=args.scratch))  # bench/quality.py's run directory
    bench = Bench(args, gen, directory)
    out: Obj = {
        "real": True,
        "time_scale": args.time_scale,
        "worker_factors": args.factors,
        "cluster_queues": len(gen.queues()),
        "jobs": gen.workload_count(),
        "lost_timeout_s": args.lost_timeout,
        "gpu": args.gpu,
        "configs": {},
    }
    try:
        await bench.start()
        for config in args.configs:
            t0 = time.monotonic()
            figures = await bench.run(config)
            figures["wall_s"] = round(time.monotonic() - t0, 1)
            out["configs"][config] = figures
            print(f"{config}: {json.dumps(figures)}", file=sys.stderr, flush=True)
    finally:
        await bench.stop()
    out.update(_ratios(out["configs"]))
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``bench/quality.py``'s options of the real run."""
    parser.add_argument("--real", action="store_true", help="on one real rig against real MultiKueue (see above)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="--real: default %(default)s")
    parser.add_argument("--lost-timeout", type=float, default=30.0, help="--real: workerLostTimeout = lostTimeout, s")
    parser.add_argument("--failover", action="store_true", help="--real: also time a worker's loss per configuration")


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    args.configs = [c.strip() for c in str(args.configs).split(",") if c.strip()]
    bad = [c for c in args.configs if c not in CONFIGS]
    if bad:
        parser.error(f"--configs: {bad[0]!r} is not one of {', '.join(CONFIGS)}")
