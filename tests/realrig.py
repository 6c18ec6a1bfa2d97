"""The real rig for the end-to-end tests: one ``dispatcher rig up --real`` for the whole session (real
kube-apiserver, etcd, controller manager, scheduler, kwok, Kueue and JobSet per cluster), shared by every test
marked ``real_rig``; each test starts its own dispatcher and database on it, after the rig is cleaned of what
earlier tests left (Jobs, their Workloads and pods, Events, faults).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from dispatcher.config import KubeconfigRef
from dispatcher.kube.client import ClusterClient, KubeError, Resource, connect

Obj = dict[str, Any]

#: The real rig's layout, the same as the simulated test rig's: worker-3 is the GPU worker.
WORKERS = 3
GPU_WORKERS = 1
NAMESPACES = ("default", "team-a", "team-b")
START_TIMEOUT = 300.0
#: Kinds the tests create, cleaned between tests (plural paths).
KINDS = (
    Resource("batch", "v1", "jobs", "Job"),
    Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"),
    Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"),
    Resource("kubeflow.org", "v1", "tfjobs", "TFJob"),
    Resource("ray.io", "v1", "rayjobs", "RayJob"),
    Resource("ray.io", "v1", "rayclusters", "RayCluster"),
)
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
MUTATING = Resource(
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False
)
VALIDATING = Resource(
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False
)
PODS = Resource("", "v1", "pods", "Pod")
EVENTS = Resource("", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")


class RealRigError(RuntimeError):
    pass


@dataclass
class RealRig:
    """A running ``rig up --real``: its directory, admin endpoint and process."""

    directory: Path
    admin: str
    proc: subprocess.Popen[bytes]
    log: Path
    component_pids: list[int] = field(default_factory=list)

    def kubeconfig(self, cluster: str) -> Path:
        """The administrator's kubeconfig of a cluster (tests and kubectl; the dispatcher uses its own)."""
        return self.directory / f"{cluster}.kubeconfig"

    def inside_kubeconfig(self, cluster: str) -> Path:
        """The administrator's kubeconfig from inside the cluster: a ``partition`` does not cut it off."""
        return self.directory / f"{cluster}.inside.kubeconfig"

    async def client(self, cluster: str) -> ClusterClient:
        return await connect(f"{cluster}-admin", KubeconfigRef(path=str(self.kubeconfig(cluster))), timeout=30.0)

    async def post(self, path: str, body: Obj) -> Obj:
        async with aiohttp.ClientSession() as s, s.post(f"{self.admin}{path}", json=body) as r:
            answer: Obj = await r.json(content_type=None)
            if r.status != 200:
                raise RealRigError(f"rig admin {path}: {r.status} {answer}")
            return answer

    async def fault(self, cluster: str, mode: str) -> None:
        await self.post(f"/clusters/{cluster}/fault", {"mode": mode})

    async def component(self, cluster: str, component: str, action: str) -> None:
        await self.post(f"/clusters/{cluster}/components/{component}", {"action": action})

    def stop(self) -> None:
        """SIGTERM to ``rig up``; it stops every component. Fails if any component outlives it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise RealRigError("rig up did not stop within 90 s of SIGTERM") from None
        left = []
        for pid in self.component_pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 0)
                left.append(pid)
                os.killpg(pid, signal.SIGKILL)
        if left:
            raise RealRigError(f"rig components outlived `rig up`: pids {left}")


def start_real_rig(
    directory: Path, *, workers: int = WORKERS, gpu_workers: int = GPU_WORKERS, extra: tuple[str, ...] = ()
) -> RealRig:
    """``dispatcher rig up --real`` in a process of its own; returns once its ``ready`` file appears. ``extra``:
    more arguments of ``rig up`` (e.g. ``--manager-kueue external``)."""
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "rig-up.log"
    out = log.open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dispatcher",
            "rig",
            "up",
            "--real",
            "--workers",
            str(workers),
            "--gpu-workers",
            str(gpu_workers),
            "--run-seconds",
            "1",
            "--dir",
            str(directory),
            *extra,
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    out.close()
    deadline = time.monotonic() + START_TIMEOUT
    while not (directory / "ready").exists():
        if proc.poll() is not None:
            raise RealRigError(f"`dispatcher rig up --real` exited {proc.returncode}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            raise RealRigError(f"the real rig was not ready in {START_TIMEOUT:g} s:\n{log.read_text()[-4000:]}")
        time.sleep(0.2)
    state = json.loads((directory / "rig.json").read_text())
    pids = [int(p["pid"]) for c in state["clusters"] for p in c["components"].values() if p.get("pid")]
    return RealRig(directory, str(state["admin"]), proc, log, pids)


async def _kueue_webhooks(client: ClusterClient, policy: str) -> None:
    """Set the failurePolicy of every Kueue webhook (strategic merge by webhook name)."""
    for res, name in (
        (MUTATING, "kueue-mutating-webhook-configuration"),
        (VALIDATING, "kueue-validating-webhook-configuration"),
    ):
        config = await client.get(res, None, name)
        if config is None:
            continue
        hooks = [{"name": h["name"], "failurePolicy": policy} for h in config.get("webhooks") or []]
        await client.patch(res, None, name, {"webhooks": hooks}, patch_type="strategic")


async def hold_admission(rig: RealRig, worker: str, client: ClusterClient) -> None:
    """Make a worker's Kueue admit nothing, as a stopped Kueue controller on the simulator does: the Kueue
    process is stopped and its webhooks fail open (a stopped Kueue with failing-closed webhooks would refuse the
    copy's create instead, another scenario)."""
    await _kueue_webhooks(client, "Ignore")
    await rig.component(worker, "kueue", "stop")


async def _delete_collection(
    client: ClusterClient, res: Resource, namespace: str, *, label_selector: str | None = None
) -> None:
    try:
        await client.request(
            "DELETE",
            res.path(namespace),
            query={"labelSelector": label_selector},
            body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
        )
    except KubeError as exc:
        if exc.code not in (404, 405):
            raise


async def _left(client: ClusterClient, res: Resource) -> list[str]:
    out = []
    for ns in NAMESPACES:
        try:
            items = (await client.list(res, ns)).get("items") or []
        except KubeError as exc:
            if exc.not_found:
                continue
            raise
        out += [f"{res.kind} {ns}/{i['metadata']['name']}" for i in items]
    return out


async def clean(rig: RealRig, timeout: float = 90.0) -> None:
    """Heal every fault, delete every object the tests make in the test namespaces, wait until they are gone."""
    clusters = ["manager", *(f"worker-{i}" for i in range(1, WORKERS + 1))]
    for c in clusters:
        await rig.fault(c, "none")
        for component in ("kueue", "kube-controller-manager", "kube-scheduler", "kwok", "jobset", "fencing-agent"):
            with contextlib.suppress(RealRigError):
                await rig.component(c, component, "start")
    clients = {c: await rig.client(c) for c in clusters}
    try:
        for c, client in clients.items():
            if c != "manager":
                await _kueue_webhooks(client, "Fail")
            for ns in NAMESPACES:
                for res in KINDS:
                    await _delete_collection(client, res, ns)
                if c == "manager":
                    await _delete_collection(client, EVENTS, ns)
            if c == "manager":
                await _delete_collection(client, LEASES, "dispatcher-system")  # leader election of HA tests
            else:
                # Earlier tests' fencing Leases: no longer renewed, they would make the agents fence this test's copies.
                await _delete_collection(client, LEASES, "kueue-system", label_selector="kueue-dispatcher.io/fencing")
        deadline = time.monotonic() + timeout
        while True:
            left: list[str] = []
            for c, client in clients.items():
                kinds = [KINDS[0], PODS] + ([WORKLOADS] if c != "manager" else [])
                for res in kinds:
                    left += [f"{c}: {x}" for x in await _left(client, res)]
            if not left:
                return
            if time.monotonic() > deadline:
                raise RealRigError(f"objects of earlier tests still there after {timeout:g} s: {left[:10]}")
            await asyncio.sleep(0.3)
    finally:
        for client in clients.values():
            await client.close()
