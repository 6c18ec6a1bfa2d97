"""One real cluster of the rig: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, and on
workers the real Kueue manager and JobSet controller, each a process of its own on loopback.

TLS everywhere (one CA per cluster), RBAC on. Users: ``rig-admin`` (a static token in ``system:masters``, in
``<cluster>.kubeconfig``, for kubectl and tests); the control-plane components with client certificates under the
names Kubernetes' bootstrap RBAC grants; and the dispatcher, a ServiceAccount bound to the project's own
least-privilege roles (``deploy/``) with a token from the TokenRequest API, in ``<cluster>.dispatcher.kubeconfig``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from ..config import KubeconfigRef
from ..kube.client import ClusterClient, KubeError, Resource, connect
from ..sim.topology import Topology
from .apply import Applier, load_manifests
from .binaries import RigBinaries
from .deploy import dispatcher_rbac
from .kwok import node_manifests, stages
from .pki import ClusterPki, write_private
from .process import ComponentError, Process
from .webhooks import (
    JOBSET_NAMESPACE,
    KUEUE_CONFIG_KEY,
    KUEUE_CONFIG_NAME,
    KUEUE_NAMESPACE,
    crds_with_conversion,
    dump,
    jobset_config,
    kueue_config,
    kueue_secret,
    webhook_configurations,
    write_serving_files,
)

__all__ = ["ClusterPlan", "RealCluster", "free_port"]

Obj = dict[str, Any]

ISSUER = "https://kubernetes.default.svc.cluster.local"
#: Components stopped, paused and resumed by faults, besides the API server and etcd.
CONTROLLERS = ("kube-controller-manager", "kube-scheduler", "kwok", "kueue", "jobset")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
CLUSTER_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now (the component binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class ClusterPlan:
    name: str
    worker: bool
    gpu: bool = False
    kueue: bool = False
    jobset: bool = False


class RealCluster:
    """A cluster's processes, credentials and files under ``root/<name>/``."""

    def __init__(
        self, plan: ClusterPlan, root: Path, binaries: RigBinaries, topology: Topology, *, run_seconds: float
    ) -> None:
        self.plan = plan
        self.name = plan.name
        self.root = root
        self.dir = root / plan.name
        self.binaries = binaries
        self.topology = topology
        self.run_seconds = run_seconds
        self.procs: dict[str, Process] = {}
        self.ports: dict[str, int] = {}
        self.token = secrets.token_urlsafe(24)
        self.dispatcher_token = ""
        self.fault = "none"
        self.pki: ClusterPki | None = None
        #: Called whenever a component (re)starts: the world rewrites rig.json with the pids.
        self.on_change: Callable[[], None] | None = None
        self._client: ClusterClient | None = None

    # -- files -------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def kubeconfig_path(self) -> Path:
        """The admin kubeconfig (kubectl, tests), named as ``dispatcher sim up`` names it."""
        return self.root / f"{self.name}.kubeconfig"

    @property
    def dispatcher_kubeconfig_path(self) -> Path:
        return self.root / f"{self.name}.dispatcher.kubeconfig"

    def _kubeconfig(self, user: str, credentials: Obj, *, context: str | None = None) -> Obj:
        assert self.pki is not None
        ctx = context or self.name
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": self.name, "cluster": {"server": self.url, "certificate-authority-data": self.pki.ca_data}}
            ],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": ctx, "context": {"cluster": self.name, "user": user, "namespace": "default"}}],
            "current-context": ctx,
        }

    def admin_kubeconfig(self) -> Obj:
        return self._kubeconfig(f"{self.name}-admin", {"token": self.token})

    def dispatcher_kubeconfig(self) -> Obj:
        return self._kubeconfig(f"{self.name}-kueue-dispatcher", {"token": self.dispatcher_token})

    def _component_kubeconfig(self, stem: str, user: str, groups: tuple[str, ...] = ()) -> Path:
        assert self.pki is not None
        pair = self.pki.client(stem, user, groups)
        path = self.dir / f"{stem}.kubeconfig"
        config = self._kubeconfig(user, {"client-certificate": str(pair.cert_file), "client-key": str(pair.key_file)})
        write_private(path, yaml.safe_dump(config, sort_keys=False))
        return path

    def write_kubeconfigs(self) -> None:
        write_private(self.kubeconfig_path, yaml.safe_dump(self.admin_kubeconfig(), sort_keys=False))
        write_private(self.dispatcher_kubeconfig_path, yaml.safe_dump(self.dispatcher_kubeconfig(), sort_keys=False))

    def describe(self) -> Obj:
        return {
            "name": self.name,
            "url": self.url if "apiserver" in self.ports else "",
            "role": "worker" if self.plan.worker else "manager",
            "gpu": self.plan.gpu,
            "kueue": self.plan.kueue,
            "jobset": self.plan.jobset,
            "fault": self.fault,
            "components": {n: {"pid": p.pid, "running": p.running, "paused": p.paused} for n, p in self.procs.items()},
            "logs": str(self.dir / "logs"),
        }

    # -- start -------------------------------------------------------------------------------------

    def _process(self, name: str, argv: list[str], *, env: dict[str, str] | None = None) -> Process:
        proc = Process(self.name, name, argv, self.dir / "logs" / f"{name}.log", env=env)
        proc.on_start = self.on_change
        self.procs[name] = proc
        return proc

    @property
    def client(self) -> ClusterClient:
        assert self._client is not None, "cluster not started"
        return self._client

    async def start(self) -> None:
        """Start every component and load the cluster's objects; ready when this returns."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o700)
        self.pki = await asyncio.to_thread(ClusterPki, self.name, self.dir / "pki")
        for key in (
            "etcd",
            "etcd-peer",
            "apiserver",
            "controller-manager",
            "scheduler",
            "kwok",
            "kueue-webhook",
            "kueue-probe",
            "jobset-webhook",
            "jobset-probe",
        ):
            self.ports[key] = free_port()
        await self._start_etcd()
        await self._start_apiserver()
        await asyncio.to_thread(self.write_kubeconfigs)
        self._client = await connect(f"rig-{self.name}", KubeconfigRef(path=str(self.kubeconfig_path)), timeout=30.0)
        applier = Applier(self.client)
        await self._bootstrap(applier)
        await self._start_controllers()
        if self.plan.kueue:
            await self._start_kueue(applier)
        if self.plan.jobset:
            await self._start_jobset()
        await self._wait_controllers()
        await self._load_objects(applier)
        await self._dispatcher_identity(applier)
        await asyncio.to_thread(self.write_kubeconfigs)
        await self._wait_settled()

    async def _start_etcd(self) -> None:
        c, p = self.ports["etcd"], self.ports["etcd-peer"]
        proc = self._process(
            "etcd",
            [
                str(self.binaries.path("etcd")),
                f"--name={self.name}",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{c}",
                f"--advertise-client-urls=http://127.0.0.1:{c}",
                f"--listen-peer-urls=http://127.0.0.1:{p}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{p}",
                f"--initial-cluster={self.name}=http://127.0.0.1:{p}",
                "--unsafe-no-fsync",  # a test rig: speed over durability across power loss
                "--log-level=warn",
            ],
        )
        await proc.start()

        async def healthy() -> bool:
            async with (
                aiohttp.ClientSession() as s,
                s.get(f"http://127.0.0.1:{c}/health", timeout=aiohttp.ClientTimeout(total=2)) as r,
            ):
                return r.status == 200 and (await r.json(content_type=None)).get("health") == "true"

        await proc.wait_ready(healthy, timeout=30)

    def _apiserver_argv(self) -> list[str]:
        assert self.pki is not None
        serving = self.pki.serving(
            "apiserver",
            "kube-apiserver",
            (
                "127.0.0.1",
                "localhost",
                "10.96.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
        )
        tokens = self.dir / "tokens.csv"
        write_private(tokens, f'{self.token},rig-admin,rig-admin,"system:masters"\n')
        return [
            str(self.binaries.path("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}",
            f"--tls-cert-file={serving.cert_file}",
            f"--tls-private-key-file={serving.key_file}",
            f"--client-ca-file={self.pki.ca_file}",
            f"--token-auth-file={tokens}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={self.pki.sa_pub_file}",
            f"--service-account-signing-key-file={self.pki.sa_key_file}",
            f"--api-audiences={ISSUER}",
            "--service-cluster-ip-range=10.96.0.0/16",
            # The "kubernetes" Service's endpoints would be 127.0.0.1, which Endpoints validation refuses.
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            "--profiling=false",
            f"--cert-dir={self.dir / 'apiserver-certs'}",
        ]

    async def _start_apiserver(self) -> None:
        if "apiserver" not in self.procs:
            self._process("kube-apiserver", self._apiserver_argv())
            self.procs["apiserver"] = self.procs.pop("kube-apiserver")
        proc = self.procs["apiserver"]
        await proc.start()
        assert self.pki is not None
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_file))
        headers = {"Authorization": f"Bearer {self.token}"}

        async def ready() -> bool:
            async with (
                aiohttp.ClientSession() as s,
                s.get(f"{self.url}/readyz", ssl=ctx, headers=headers, timeout=aiohttp.ClientTimeout(total=3)) as r,
            ):
                return r.status == 200

        await proc.wait_ready(ready, timeout=90)

    async def _bootstrap(self, applier: Applier) -> None:
        """Namespaces, CRDs and (on workers) the nodes, before any controller starts."""
        names = [*self.topology.namespaces, "dispatcher-system" if not self.plan.worker else KUEUE_NAMESPACE]
        if self.plan.jobset:
            names.append(JOBSET_NAMESPACE)
        for ns in dict.fromkeys(names):
            await applier.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        manifests = self.binaries.manifests
        assert self.pki is not None
        kueue_crds = crds_with_conversion(
            manifests / "kueue",
            manifests / "kueue" / "conversion" if self.plan.kueue else None,
            port=self.ports["kueue-webhook"],
            ca_data=self.pki.ca_data,
        )
        crds = kueue_crds + load_manifests(*sorted((manifests / "kueue" / "kinds").glob("*.yaml")))
        if (manifests / "jobset").is_dir():
            crds += load_manifests(*sorted((manifests / "jobset").glob("*.yaml")))
        for crd in crds:
            await applier.create(crd)
        if self.plan.worker:
            groups = self.topology.gpu_worker.nodes if self.plan.gpu else self.topology.cpu_worker.nodes
            for node in node_manifests(self.name, groups):
                await applier.create(node)

    async def _start_controllers(self) -> None:
        assert self.pki is not None
        b = self.binaries
        kcm = self._component_kubeconfig("kube-controller-manager", "system:kube-controller-manager")
        kcm_tls = self.pki.serving("kcm-serving", "kube-controller-manager", ("127.0.0.1", "localhost"))
        await self._process(
            "kube-controller-manager",
            [
                str(b.path("kube-controller-manager")),
                f"--kubeconfig={kcm}",
                f"--authentication-kubeconfig={kcm}",
                f"--authorization-kubeconfig={kcm}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports['controller-manager']}",
                f"--tls-cert-file={kcm_tls.cert_file}",
                f"--tls-private-key-file={kcm_tls.key_file}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={self.pki.sa_key_file}",
                f"--root-ca-file={self.pki.ca_file}",
                f"--cluster-name={self.name}",
            ],
        ).start()
        if not self.plan.worker:
            return
        sched = self._component_kubeconfig("kube-scheduler", "system:kube-scheduler")
        sched_tls = self.pki.serving("scheduler-serving", "kube-scheduler", ("127.0.0.1", "localhost"))
        await self._process(
            "kube-scheduler",
            [
                str(b.path("kube-scheduler")),
                f"--kubeconfig={sched}",
                f"--authentication-kubeconfig={sched}",
                f"--authorization-kubeconfig={sched}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports['scheduler']}",
                f"--tls-cert-file={sched_tls.cert_file}",
                f"--tls-private-key-file={sched_tls.key_file}",
                "--leader-elect=false",
            ],
        ).start()
        kwok_config = self.dir / "kwok.yaml"
        docs = stages(self.binaries.manifests / "kwok", default_run_seconds=self.run_seconds)
        await asyncio.to_thread(kwok_config.write_text, yaml.safe_dump_all(docs, sort_keys=False))
        kwok = self._component_kubeconfig("kwok", "kwok-controller", ("system:masters",))
        await self._process(
            "kwok",
            [
                str(b.path("kwok")),
                f"--kubeconfig={kwok}",
                f"--config={kwok_config}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-label-selector=type=kwok",
                f"--server-address=127.0.0.1:{self.ports['kwok']}",
                "--node-lease-duration-seconds=40",
                "--node-ip=10.0.0.1",
            ],
        ).start()

    def kueue_configuration(self) -> Obj:
        worker = self.topology.gpu_worker if self.plan.gpu else self.topology.cpu_worker
        return kueue_config(
            webhook_port=self.ports["kueue-webhook"],
            probe_port=self.ports["kueue-probe"],
            cert_dir=self.dir / "kueue-certs",
            extra=worker.kueue_config,
        )

    async def _start_kueue(self, applier: Applier) -> None:
        assert self.pki is not None
        webhook_ca = await asyncio.to_thread(
            ClusterPki,
            f"{self.name}-kueue",
            self.dir / "pki-kueue",
            ca_dns="kueue-ca",
            service_accounts=False,
            rsa_ca=True,
        )
        cert, key = write_serving_files(
            webhook_ca, "kueue-webhook", "kueue-webhook-service", KUEUE_NAMESPACE, self.dir / "kueue-certs"
        )
        config = self.kueue_configuration()
        path = self.dir / "kueue-config.yaml"
        await asyncio.to_thread(path.write_text, dump(config))
        # As a Kueue deployment mounts it: the dispatcher reads the same Configuration from this ConfigMap.
        await applier.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": KUEUE_CONFIG_NAME, "namespace": KUEUE_NAMESPACE},
                "data": {KUEUE_CONFIG_KEY: dump(config)},
            }
        )
        await applier.create(kueue_secret(webhook_ca, cert, key))
        # The CRDs' conversion webhooks were pointed at this port with the cluster CA; the rotator injects its own.
        for hook in webhook_configurations(
            self.binaries.manifests / "kueue" / "webhook" / "manifests.yaml",
            prefix="kueue",
            port=self.ports["kueue-webhook"],
            ca_data=webhook_ca.ca_data,
        ):
            await applier.create(hook)
        await self._process(
            "kueue",
            [str(self.binaries.path("kueue")), f"--config={path}", "--feature-gates=VisibilityOnDemand=false"],
            env={
                "KUBECONFIG": str(self._component_kubeconfig("kueue", "kueue-controller-manager", ("system:masters",)))
            },
        ).start()

    async def _start_jobset(self) -> None:
        assert self.pki is not None
        write_serving_files(
            self.pki, "jobset-webhook", "jobset-webhook-service", JOBSET_NAMESPACE, self.dir / "jobset-certs"
        )
        config = jobset_config(
            webhook_port=self.ports["jobset-webhook"],
            probe_port=self.ports["jobset-probe"],
            cert_dir=self.dir / "jobset-certs",
        )
        path = self.dir / "jobset-config.yaml"
        await asyncio.to_thread(path.write_text, dump(config))
        applier = Applier(self.client)
        for hook in webhook_configurations(
            self.binaries.manifests / "jobset" / "webhook" / "manifests.yaml",
            prefix="jobset",
            port=self.ports["jobset-webhook"],
            ca_data=self.pki.ca_data,
        ):
            await applier.create(hook)
        await self._process(
            "jobset",
            [str(self.binaries.path("jobset")), f"--config={path}"],
            env={
                "KUBECONFIG": str(
                    self._component_kubeconfig("jobset", "jobset-controller-manager", ("system:masters",))
                )
            },
        ).start()

    async def _wait_controllers(self) -> None:
        assert self.pki is not None
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_file))

        def probe(url: str, verify: ssl.SSLContext | bool) -> Any:
            async def check() -> bool:
                async with (
                    aiohttp.ClientSession() as s,
                    s.get(url, ssl=verify, timeout=aiohttp.ClientTimeout(total=2)) as r,
                ):
                    return r.status == 200

            return check

        waits = [
            self.procs["kube-controller-manager"].wait_ready(
                probe(f"https://127.0.0.1:{self.ports['controller-manager']}/healthz", ctx), timeout=60
            )
        ]
        if self.plan.worker:
            waits.append(
                self.procs["kube-scheduler"].wait_ready(
                    probe(f"https://127.0.0.1:{self.ports['scheduler']}/healthz", ctx), timeout=60
                )
            )
            waits.append(self.procs["kwok"].wait_ready(self._nodes_ready, timeout=60))
        # Readiness, then the webhook port: Kueue first runs a bootstrap manager whose /readyz has no checks.
        for name in ("kueue", "jobset"):
            if name in self.procs:
                ready = probe(f"http://127.0.0.1:{self.ports[name + '-probe']}/readyz", True)
                waits.append(
                    self.procs[name].wait_ready(_both(ready, _listening(self.ports[name + "-webhook"])), timeout=90)
                )
        await asyncio.gather(*waits)

    async def _nodes_ready(self) -> bool:
        nodes = (await self.client.list(Resource("", "v1", "nodes", "Node", namespaced=False))).get("items") or []

        def ready(n: Obj) -> bool:
            return any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or []
            )

        return bool(nodes) and all(ready(n) for n in nodes)

    async def _load_objects(self, applier: Applier) -> None:
        """The topology's Kueue objects, through Kueue's own webhooks (retried while they come up)."""
        if self.plan.worker:
            objs = (self.topology.gpu_worker if self.plan.gpu else self.topology.cpu_worker).objects
        else:
            objs = self.topology.manager_objects
        for obj in objs:
            for attempt in range(60):
                try:
                    await applier.create(obj, wait=30)
                    break
                except KubeError as exc:
                    if attempt == 59 or not (exc.code >= 500 or "webhook" in exc.message):
                        raise ComponentError(
                            f"{self.name}: {obj['kind']} {obj['metadata'].get('name')}: {exc}"
                        ) from None
                    await asyncio.sleep(0.5)

    async def _dispatcher_identity(self, applier: Applier) -> None:
        """The project's least-privilege roles for the dispatcher, and a token for its ServiceAccount."""
        namespace, objs = dispatcher_rbac(worker=self.plan.worker)
        for obj in objs:
            await applier.create(obj)
        answer = await self.client.request(
            "POST",
            SERVICE_ACCOUNTS.path(namespace, "kueue-dispatcher", "token"),
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 30 * 24 * 3600},
            },
        )
        self.dispatcher_token = str(answer["status"]["token"])

    async def _wait_settled(self) -> None:
        """Every ClusterQueue Active (Kueue took the flavors), and the ``default`` ServiceAccount in each namespace
        (kube-controller-manager made it: a pod created before it would be refused)."""
        for _ in range(300):
            done = True
            for ns in self.topology.namespaces:
                if await self.client.get(SERVICE_ACCOUNTS, ns, "default") is None:
                    done = False
            if self.plan.kueue:
                queues = (await self.client.list(CLUSTER_QUEUES)).get("items") or []
                for q in queues:
                    conds = (q.get("status") or {}).get("conditions") or []
                    if not any(c.get("type") == "Active" and c.get("status") == "True" for c in conds):
                        done = False
            if done:
                return
            await asyncio.sleep(0.2)
        raise ComponentError(f"{self.name}: ClusterQueues not Active or ServiceAccounts missing after 60 s")

    # -- faults ------------------------------------------------------------------------------------

    async def set_fault(self, mode: str, *, downtime: float = 0.5) -> None:
        """``stop``: the API server is stopped (connection refused); ``down``: also every controller frozen (a
        power loss); ``partition``: the API server frozen (connections accepted, never answered); ``restart``:
        the API server stopped and started again after ``downtime``; ``none``: everything back."""
        api = self.procs["apiserver"]
        if mode == "none":
            if api.paused:
                api.resume()
            for name in CONTROLLERS:
                if name in self.procs and self.procs[name].paused:
                    self.procs[name].resume()
            if not api.running:
                await self._start_apiserver()
        elif mode in ("stop", "down"):
            if mode == "down":
                for name in CONTROLLERS:
                    if name in self.procs:
                        self.procs[name].pause()
            await api.stop()
        elif mode == "partition":
            api.pause()
        elif mode == "restart":
            await api.stop()
            await asyncio.sleep(downtime)
            await self._start_apiserver()
            mode = "none"
        else:
            raise ValueError(
                f"fault mode {mode!r} is not available on the real rig (stop, down, partition, restart, none)"
            )
        self.fault = mode

    async def component(self, name: str, action: str) -> None:
        """Stop, start, pause or resume one component (e.g. Kueue) without touching the rest."""
        proc = self.procs.get(name)
        if proc is None:
            raise KeyError(name)
        if action == "stop":
            await proc.stop()
        elif action == "start":
            if name == "apiserver":
                await self._start_apiserver()
            else:
                await proc.start()
        elif action == "pause":
            proc.pause()
        elif action == "resume":
            proc.resume()
        else:
            raise ValueError(f"action must be stop, start, pause or resume, got {action!r}")

    def unexpected_exits(self) -> list[ComponentError]:
        """Components that exited on their own (not stopped by a fault or ``rig down``)."""
        return [
            p.failure() for p in self.procs.values() if p.proc is not None and not p.running and not p.expected_exit
        ]

    # -- stop --------------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Controllers first, then the API server, then etcd; every process is gone when this returns."""
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
            self._client = None
        order = [*(n for n in reversed(CONTROLLERS) if n in self.procs), "apiserver", "etcd"]
        for name in order:
            if name in self.procs:
                await self.procs[name].stop()


def _listening(port: int) -> Any:
    async def check() -> bool:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 1.0)
        except (OSError, TimeoutError):
            return False
        writer.close()
        return True

    return check


def _both(first: Any, second: Any) -> Any:
    async def check() -> bool:
        return bool(await first() and await second())

    return check


def rig_json(clusters: list[RealCluster], admin: str, pid: int) -> str:
    return json.dumps({"admin": admin, "pid": pid, "clusters": [c.describe() for c in clusters]}, indent=2)
