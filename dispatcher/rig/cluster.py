"""One real cluster of the rig: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, and on
workers the real Kueue manager and JobSet controller, each a process of its own on loopback.

TLS everywhere (one CA per cluster), RBAC on. Users: ``rig-admin`` (a static token in ``system:masters``, in
``<cluster>.kubeconfig``, for kubectl and tests); the control-plane components with client certificates under the
names Kubernetes' bootstrap RBAC grants; the dispatcher, a ServiceAccount bound to the project's own
least-privilege roles (``deploy/``) with a token from the TokenRequest API, in ``<cluster>.dispatcher.kubeconfig``;
and on workers the fencing agent, likewise (``deploy/worker/agent.yaml``), in ``<cluster>.agent.kubeconfig``.

Two paths to the API server: from outside (the dispatcher, kubectl: ``<cluster>.kubeconfig`` and
``<cluster>.dispatcher.kubeconfig``) through a proxy that a ``partition`` cuts (:mod:`.proxy`), and from inside (the
components, the fencing agent, ``<cluster>.inside.kubeconfig``) directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from kubesim.topology import Topology

from ..config import KubeconfigRef
from ..kube.client import ClusterClient, KubeError, Resource, connect
from .addons import start_agent, start_jobset, start_kueue
from .apply import Applier, load_manifests
from .binaries import RigBinaries
from .deploy import dispatcher_rbac
from .hami import HamiExtender, scheduler_config
from .kwok import node_manifests, stages
from .pki import ClusterPki, write_private
from .ports import free_port
from .process import ComponentError, Process
from .proxy import PartitionProxy
from .webhooks import JOBSET_NAMESPACE, KUEUE_NAMESPACE, crds_with_conversion

__all__ = ["ClusterPlan", "RealCluster", "free_port"]

Obj = dict[str, Any]

ISSUER = "https://kubernetes.default.svc.cluster.local"
#: Components stopped, paused and resumed by faults, besides the API server and etcd.
CONTROLLERS = ("kube-controller-manager", "kube-scheduler", "kwok", "kueue", "jobset", "fencing-agent")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
CLUSTER_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)


@dataclass(frozen=True)
class ClusterPlan:
    name: str
    worker: bool
    gpu: bool = False
    kueue: bool = False
    jobset: bool = False
    #: On the manager: the ``multiKueue`` flavour (``all-at-once``, ``incremental``, ``external``) and the extra
    #: Kueue Configuration that makes it a MultiKueue manager (:mod:`.multikueue`); empty without Kueue there.
    multikueue: str = ""
    kueue_config: Obj | None = None


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
        self.proxy: PartitionProxy | None = None
        #: Called whenever a component (re)starts: the world rewrites rig.json with the pids.
        self.on_change: Callable[[], None] | None = None
        self._client: ClusterClient | None = None
        #: On GPU workers, HAMi's scheduler extender that kube-scheduler calls (:mod:`.hami`).
        self.hami: HamiExtender | None = None

    # -- files -------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The API server itself: the path from inside the cluster."""
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def outside_url(self) -> str:
        """The path from outside the cluster, which a ``partition`` cuts."""
        return f"https://127.0.0.1:{self.ports['proxy']}"

    @property
    def kubeconfig_path(self) -> Path:
        """The admin kubeconfig (kubectl, tests), named as ``dispatcher sim up`` names it."""
        return self.root / f"{self.name}.kubeconfig"

    @property
    def inside_kubeconfig_path(self) -> Path:
        """The admin kubeconfig from inside the cluster (a partition does not cut it): the rig's own client."""
        return self.root / f"{self.name}.inside.kubeconfig"

    @property
    def dispatcher_kubeconfig_path(self) -> Path:
        return self.root / f"{self.name}.dispatcher.kubeconfig"

    @property
    def agent_kubeconfig_path(self) -> Path:
        return self.root / f"{self.name}.agent.kubeconfig"

    def kubeconfig_doc(self, user: str, credentials: Obj, *, inside: bool = False) -> Obj:
        assert self.pki is not None
        ctx = self.name
        server = self.url if inside or "proxy" not in self.ports else self.outside_url
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": self.name, "cluster": {"server": server, "certificate-authority-data": self.pki.ca_data}}
            ],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": ctx, "context": {"cluster": self.name, "user": user, "namespace": "default"}}],
            "current-context": ctx,
        }

    def write_kubeconfig(self, path: Path, doc: Obj) -> None:
        write_private(path, yaml.safe_dump(doc, sort_keys=False))

    def admin_kubeconfig(self) -> Obj:
        return self.kubeconfig_doc(f"{self.name}-admin", {"token": self.token})

    def dispatcher_kubeconfig(self) -> Obj:
        return self.kubeconfig_doc(f"{self.name}-kueue-dispatcher", {"token": self.dispatcher_token})

    def component_kubeconfig(self, stem: str, user: str, groups: tuple[str, ...] = ()) -> Path:
        assert self.pki is not None
        pair = self.pki.client(stem, user, groups)
        path = self.dir / f"{stem}.kubeconfig"
        credentials = {"client-certificate": str(pair.cert_file), "client-key": str(pair.key_file)}
        self.write_kubeconfig(path, self.kubeconfig_doc(user, credentials, inside=True))
        return path

    def write_kubeconfigs(self) -> None:
        self.write_kubeconfig(self.kubeconfig_path, self.admin_kubeconfig())
        inside = self.kubeconfig_doc(f"{self.name}-admin", {"token": self.token}, inside=True)
        self.write_kubeconfig(self.inside_kubeconfig_path, inside)
        self.write_kubeconfig(self.dispatcher_kubeconfig_path, self.dispatcher_kubeconfig())

    def describe(self) -> Obj:
        return {
            "name": self.name,
            "url": self.url if "apiserver" in self.ports else "",
            "role": "worker" if self.plan.worker else "manager",
            "gpu": self.plan.gpu,
            "kueue": self.plan.kueue,
            "jobset": self.plan.jobset,
            "multikueue": self.plan.multikueue,
            "fault": self.fault,
            "components": {n: {"pid": p.pid, "running": p.running, "paused": p.paused} for n, p in self.procs.items()},
            "logs": str(self.dir / "logs"),
        }

    # -- start -------------------------------------------------------------------------------------

    def process(self, name: str, argv: list[str], *, env: dict[str, str] | None = None) -> Process:
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
            "proxy",
            "agent",
            "hami-extender",
        ):
            self.ports[key] = free_port()
        await self._start_etcd()
        await self._start_apiserver()
        self.proxy = PartitionProxy(self.name, self.ports["proxy"], self.ports["apiserver"])
        await self.proxy.start()
        await asyncio.to_thread(self.write_kubeconfigs)
        inside = KubeconfigRef(path=str(self.inside_kubeconfig_path))
        self._client = await connect(f"rig-{self.name}", inside, timeout=30.0)
        applier = Applier(self.client)
        await self._bootstrap(applier)
        await self._start_controllers()
        if self.plan.kueue:
            await start_kueue(self, applier)
        if self.plan.jobset:
            await start_jobset(self)
        await self._wait_controllers()
        await self._load_objects(applier)
        await self._dispatcher_identity(applier)
        await asyncio.to_thread(self.write_kubeconfigs)
        if self.plan.worker:
            await start_agent(self, applier)
        await self._wait_settled()

    async def _start_etcd(self) -> None:
        c, p = self.ports["etcd"], self.ports["etcd-peer"]
        proc = self.process(
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
            self.process("kube-apiserver", self._apiserver_argv())
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
        if self.plan.kueue:
            names.append(KUEUE_NAMESPACE)
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
        kcm = self.component_kubeconfig("kube-controller-manager", "system:kube-controller-manager")
        kcm_tls = self.pki.serving("kcm-serving", "kube-controller-manager", ("127.0.0.1", "localhost"))
        await self.process(
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
        sched = self.component_kubeconfig("kube-scheduler", "system:kube-scheduler")
        sched_tls = self.pki.serving("scheduler-serving", "kube-scheduler", ("127.0.0.1", "localhost"))
        if self.plan.gpu:
            self.hami = HamiExtender(self.name, self.client)
            await self.hami.start(self.ports["hami-extender"])
        sched_config = self.dir / "kube-scheduler.yaml"
        doc = scheduler_config(sched, self.hami.extender_config() if self.hami is not None else None)
        await asyncio.to_thread(sched_config.write_text, yaml.safe_dump(doc, sort_keys=False))
        await self.process(
            "kube-scheduler",
            [
                str(b.path("kube-scheduler")),
                f"--config={sched_config}",
                f"--authentication-kubeconfig={sched}",
                f"--authorization-kubeconfig={sched}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports['scheduler']}",
                f"--tls-cert-file={sched_tls.cert_file}",
                f"--tls-private-key-file={sched_tls.key_file}",
            ],
        ).start()
        kwok_config = self.dir / "kwok.yaml"
        docs = stages(self.binaries.manifests / "kwok", default_run_seconds=self.run_seconds)
        await asyncio.to_thread(kwok_config.write_text, yaml.safe_dump_all(docs, sort_keys=False))
        kwok = self.component_kubeconfig("kwok", "kwok-controller", ("system:masters",))
        await self.process(
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
        namespace, objs = dispatcher_rbac(worker=self.plan.worker, native=self.plan.kueue and not self.plan.worker)
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
        power loss); ``partition``: the path from outside is cut (connections accepted, never answered) while the
        cluster runs on and its components and fencing agent still reach it; ``hang``: the API server itself frozen;
        ``restart``: the API server stopped and started again after ``downtime``; ``none``: everything back."""
        api = self.procs["apiserver"]
        if self.proxy is not None and mode != "partition":
            self.proxy.heal()
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
            assert self.proxy is not None
            self.proxy.partition()
        elif mode == "hang":
            api.pause()
        elif mode == "restart":
            await api.stop()
            await asyncio.sleep(downtime)
            await self._start_apiserver()
            mode = "none"
        else:
            raise ValueError(
                f"fault mode {mode!r} is not available on the real rig (stop, down, partition, hang, restart, none)"
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
        if self.hami is not None:
            await self.hami.stop()
            self.hami = None
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
            self._client = None
        if self.proxy is not None:
            await self.proxy.stop()
        order = [*(n for n in reversed(CONTROLLERS) if n in self.procs), "apiserver", "etcd"]
        for name in order:
            if name in self.procs:
                await self.procs[name].stop()


def _listening(port: int) -> Any:
    async def check() -> bool:
        try:
            async with asyncio.timeout(1.0):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
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
