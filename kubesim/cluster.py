"""One simulated cluster: store, API semantics, HTTP server, emulated controllers, faults."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import yaml

from .api import Api
from .controllers.base import Controller, LocalClient
from .controllers.gc import GarbageCollector, NamespaceController
from .controllers.jobs import JobController
from .controllers.kubelet import Kubelet
from .controllers.scheduler import Extender, Scheduler
from .faults import FaultState
from .http import ApiServer
from .http.common import BOOKMARK_INTERVAL
from .registry import Registry
from .store import Store
from .tls import TlsMaterial, make_tls
from .topology import KUEUE_CONFIG_KEY, KUEUE_CONFIG_NAME, KUEUE_CONFIG_NAMESPACE, NodeGroup

__all__ = ["ClusterOptions", "SimCluster"]

Obj = dict[str, Any]

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass
class ClusterOptions:
    """Which controllers run, and tuning. Each emulated controller can be switched off."""

    kueue: bool = True
    hami: bool = False
    jobs: bool = True
    #: The JobSet controller, the Kubeflow training operator and KubeRay.
    operators: bool = True
    #: API groups whose CRDs this cluster does not have (e.g. ``("ray.io",)``: KubeRay not installed); their
    #: operators and Kueue integrations do not run either.
    without_groups: tuple[str, ...] = ()
    scheduler: bool = True
    kubelet: bool = True
    default_run_seconds: float = 2.0
    bookmark_interval: float = BOOKMARK_INTERVAL
    log_size: int = 100_000
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    #: The credential of the worker's own fencing agent, a client inside the cluster: a ``partition`` does not cut
    #: it off (see :meth:`SimCluster.agent_kubeconfig`).
    agent_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    port: int = 0
    #: Serve HTTPS with a self-signed certificate made at construction (kubectl sends bearer tokens only
    #: over TLS); ``False`` serves plain http.
    tls: bool = True


class SimCluster:
    """A simulated Kubernetes cluster on 127.0.0.1."""

    def __init__(self, name: str, options: ClusterOptions | None = None) -> None:
        self.name = name
        self.options = options or ClusterOptions()
        self.store = Store(log_size=self.options.log_size)
        registry = Registry.default()
        if self.options.without_groups:
            registry = Registry(tuple(rt for rt in registry.types if rt.group not in self.options.without_groups))
        self.api = Api(self.store, registry)
        self.faults = FaultState()
        #: The cluster's own CA and serving certificate (``None`` when serving plain http).
        self.tls: TlsMaterial | None = make_tls(name) if self.options.tls else None
        self.server = ApiServer(
            name,
            self.api,
            self.options.token,
            port=self.options.port,
            faults=self.faults,
            bookmark_interval=self.options.bookmark_interval,
            tls=self.tls,
            inside_tokens=(self.options.agent_token,),
        )
        self.client = LocalClient(self.api, "sim-setup")
        self.controllers: dict[str, Controller] = {}
        self.gpu_nodes: dict[str, Any] = {}
        self._bootstrap()

    # -- setup ---------------------------------------------------------------------------------------

    def _bootstrap(self) -> None:
        for ns in SYSTEM_NAMESPACES:
            self.ensure_namespace(ns)
        opts = self.options
        if opts.kueue:
            self.ensure_namespace(KUEUE_CONFIG_NAMESPACE)  # where a Kueue install lives (and the fencing Leases)
        self.controllers["garbage-collector"] = GarbageCollector(self.api)
        self.controllers["namespace-controller"] = NamespaceController(self.api)
        extender: Extender | None = None
        if opts.hami:
            from .controllers.hami import HamiController

            hami = HamiController(self.api, self.gpu_nodes)
            self.controllers["hami"] = hami
            extender = hami
        if opts.scheduler:
            self.controllers["scheduler"] = Scheduler(self.api, extender)
        if opts.kubelet:
            self.controllers["kubelet"] = Kubelet(self.api, default_run_seconds=opts.default_run_seconds)
        if opts.jobs:
            self.controllers["job-controller"] = JobController(self.api)
        if opts.operators:
            from .controllers.jobset import JobSetController
            from .controllers.kuberay import KubeRayOperator
            from .controllers.training import TrainingOperator

            without = set(opts.without_groups)
            if "jobset.x-k8s.io" not in without:
                self.controllers["jobset-controller"] = JobSetController(self.api)
            if "kubeflow.org" not in without:
                self.controllers["training-operator"] = TrainingOperator(self.api)
            if "ray.io" not in without:
                self.controllers["kuberay-operator"] = KubeRayOperator(self.api)
        if opts.kueue:
            from .controllers.kueue import KueueController
            from .controllers.kueue_integrations import all_integrations
            from .controllers.kueue_jobs import BatchJobIntegration

            integrations = [
                i for i in (BatchJobIntegration(), *all_integrations()) if i.group not in opts.without_groups
            ]
            self.controllers["kueue"] = KueueController(self.api, integrations)

    def ensure_namespace(self, name: str) -> None:
        if self.store.get("namespaces", "", name) is None:
            self.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def apply(self, obj: Obj) -> Obj:
        """Create or replace an object (used to preload topology objects)."""
        rt = self.client.rt_of(obj)
        meta = obj.get("metadata") or {}
        if rt.namespaced:
            self.ensure_namespace(meta.get("namespace") or "default")
        existing = self.client.get(rt, meta.get("namespace"), meta["name"])
        if existing is None:
            return self.client.create(obj)
        obj = {**obj, "metadata": {**meta, "resourceVersion": existing["metadata"]["resourceVersion"]}}
        return self.client.update(obj)

    def add_nodes(self, group: NodeGroup) -> list[str]:
        names = []
        for i in range(1, group.count + 1):
            name = f"{self.name}-{group.prefix}-{i}"
            capacity: dict[str, str] = {
                "cpu": group.cpu,
                "memory": group.memory,
                "pods": str(group.pods),
                "ephemeral-storage": "100Gi",
            }
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **group.labels_of(i),
            }
            if group.gpus is not None:
                capacity["nvidia.com/gpu"] = str(group.gpus.count * group.gpus.split)
                self.gpu_nodes[name] = group.gpus
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels, "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
                "spec": {"taints": list(group.taints)} if group.taints else {},
            }
            created = self.client.create(node)
            created["status"] = {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": created["metadata"]["creationTimestamp"],
                        "lastTransitionTime": created["metadata"]["creationTimestamp"],
                    }
                ],
                "nodeInfo": {
                    "kubeletVersion": "v1.36.0-sim",
                    "containerRuntimeVersion": "containerd://2.0.0",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "kernelVersion": "6.1.0",
                    "osImage": "Simulated",
                    "kubeProxyVersion": "",
                    "machineID": name,
                    "systemUUID": name,
                    "bootID": name,
                },
                "addresses": [{"type": "InternalIP", "address": "172.18.0.2"}, {"type": "Hostname", "address": name}],
            }
            self.client.update_status(created)
            names.append(name)
        return names

    def set_kueue_config(self, config: Obj) -> None:
        """Store Kueue's Configuration where a real install keeps it (a ConfigMap in kueue-system)."""
        self.ensure_namespace(KUEUE_CONFIG_NAMESPACE)
        self.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": KUEUE_CONFIG_NAME, "namespace": KUEUE_CONFIG_NAMESPACE},
                "data": {KUEUE_CONFIG_KEY: yaml.safe_dump(config, sort_keys=False)},
            }
        )

    # -- lifecycle -----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def token(self) -> str:
        return self.options.token

    async def start(self) -> None:
        for c in self.controllers.values():
            c.start()
        await self.server.start()

    async def stop(self) -> None:
        await self.server.stop()
        for c in self.controllers.values():
            await c.stop()
        self.store.close_all_subscriptions()

    def kubeconfig(self, *, context: str | None = None, user: str = "admin", token: str | None = None) -> Obj:
        ctx = context or self.name
        cluster: Obj = {"server": self.url}
        if self.tls is not None:
            cluster["certificate-authority-data"] = self.tls.ca_data
        name = f"{self.name}-{user}"
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": self.name, "cluster": cluster}],
            "users": [{"name": name, "user": {"token": token or self.token}}],
            "contexts": [{"name": ctx, "context": {"cluster": self.name, "user": name, "namespace": "default"}}],
            "current-context": ctx,
        }

    def agent_kubeconfig(self) -> Obj:
        """The fencing agent's kubeconfig: a client inside the cluster, which a ``partition`` does not cut off."""
        return self.kubeconfig(user="fencing-agent", token=self.options.agent_token)

    # -- faults --------------------------------------------------------------------------------------

    async def set_fault(
        self, mode: str, *, latency: float = 0.0, error_rate: float = 0.0, downtime: float = 0.5
    ) -> None:
        """Put the cluster into a fault mode (see :mod:`.faults`); ``none`` heals it."""
        previous = self.faults.mode
        if mode == "restart":
            self.faults.set("none")
            await self.server.restart(downtime)
            return
        self.faults.set(mode, latency=latency, error_rate=error_rate)
        if mode in ("stop", "down"):
            if mode == "down":
                for c in self.controllers.values():
                    c.pause()
            if self.server.running:
                await self.server.stop()
            return
        if previous == "down":
            for c in self.controllers.values():
                c.resume()
        if previous in ("stop", "down") and not self.server.running:
            await self.server.start()

    def compact(self) -> None:
        """Forget the watch history (as an etcd compaction does): old resourceVersions answer 410."""
        self.store.compact()

    def describe(self) -> Obj:
        """A summary for the ``sim up`` table: nodes, CPU, memory, GPUs."""
        from kubecommon.quantity import parse_quantity

        cpu = sum(
            (
                parse_quantity((n.get("status") or {}).get("allocatable", {}).get("cpu", "0"))
                for n in self.store.list("nodes")
            ),
            start=parse_quantity("0"),
        )
        mem = sum(
            (
                parse_quantity((n.get("status") or {}).get("allocatable", {}).get("memory", "0"))
                for n in self.store.list("nodes")
            ),
            start=parse_quantity("0"),
        )
        gpus = sum(g.count for g in self.gpu_nodes.values())
        return {
            "name": self.name,
            "url": self.url,
            "nodes": self.store.count("nodes"),
            "cpu": int(cpu),
            "memoryGi": int(mem / 2**30),
            "gpus": gpus,
            "kueue": self.options.kueue,
            "hami": self.options.hami,
        }

    @property
    def down(self) -> bool:
        """The whole cluster is down (fault ``down``): nothing runs there."""
        return self.faults.mode == "down"
