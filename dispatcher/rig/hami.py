"""HAMi's scheduler on a real rig's GPU worker: the real kube-scheduler with HAMi's scheduler extender.

HAMi schedules vGPU pods as a kube-scheduler whose configuration names an HTTP *extender* (HAMi's own
``scheduler`` binary): kube-scheduler runs its own filters, ignoring the GPU resources the extender manages
(``managedResources`` with ``ignoredByScheduler``), then asks the extender to ``filter`` the nodes left and to
``bind`` the pod. HAMi's Filter reads every node's GPUs from ``hami.io/node-nvidia-register``, rebuilds their usage
from the allocations of the pods bound there, picks the node and devices, and writes the allocation onto the pod;
its Bind binds it. HAMi's Go module is not served by the Go module proxy, so the rig cannot build HAMi itself
(README, "Real components"). This extender is the stand-in: it speaks kube-scheduler's real extender protocol
(``k8s.io/kube-scheduler/extender/v1``) to the real kube-scheduler, and decides with the **simulator's** HAMi
rules (:mod:`kubesim.hami`, written from HAMi's source independently of the dispatcher's placement model), so the
dispatcher's model of HAMi meets a second implementation here, not itself.

What HAMi does that this does not: the node lock its Bind takes (kube-scheduler binds one pod at a time here
anyway), the handshake/health loop (a node with a decodable register annotation is registered), the device
plugin's ``Allocate`` (the pod gets the annotations it leaves, ``bind-phase: success``, in the Filter's write), and
the separate ``hami-scheduler`` name (the default scheduler carries the extender; kube-scheduler sends it only pods
that ask for a managed resource, the same pods HAMi's webhook would hand to ``hami-scheduler``). The webhook's
defaults are applied to the pod before the fit, as the real webhook would have applied them at creation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from kubesim.hami.config import (
    ASSIGNED_NODE_ANNOTATION,
    DEFAULT_CONFIG,
    REGISTER_ANNOTATION,
    HamiAdmissionError,
    HamiConfig,
    HamiFormatError,
    HamiSchedulingError,
)
from kubesim.hami.devices import (
    DeviceInfo,
    DeviceUsage,
    PodAllocation,
    bind_annotations,
    node_devices_from_annotations,
    node_usage,
)
from kubesim.hami.fit import schedule_pod
from kubesim.hami.requests import mutate_pod

from ..kube.client import ClusterClient, KubeError, Resource
from ..kube.informer import Informer

__all__ = ["HamiExtender", "scheduler_config"]

log = logging.getLogger("dispatcher.rig")
Obj = dict[str, Any]

PODS = Resource("", "v1", "pods", "Pod")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
TERMINAL = ("Succeeded", "Failed")


def scheduler_config(kubeconfig: Path, extender: Obj | None) -> Obj:
    """A KubeSchedulerConfiguration for the rig: its own client, no leader election, and HAMi's extender on GPU
    workers (kube-scheduler ignores the deprecated ``--kubeconfig``/``--leader-elect`` flags once ``--config`` is
    given, so they are set here)."""
    config: Obj = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
    }
    if extender is not None:
        config["extenders"] = [extender]
    return config


class HamiExtender:
    """HAMi's Filter and Bind for one cluster, served on ``127.0.0.1:port`` to its kube-scheduler."""

    def __init__(self, cluster: str, client: ClusterClient, cfg: HamiConfig = DEFAULT_CONFIG) -> None:
        self.cluster = cluster
        self.client = client
        self.cfg = cfg
        #: Registered GPU nodes: name -> (its devices, the node's annotations, its GPU pair scores).
        self._nodes: dict[str, tuple[tuple[DeviceInfo, ...], Mapping[str, str], dict[str, dict[str, int]]]] = {}
        #: Allocations of pods HAMi counts (bound by HAMi, not terminated), by pod uid: (node, allocation).
        self._pods: dict[str, tuple[str, PodAllocation]] = {}
        #: What this Filter chose and wrote, until the pod informer shows it (kube-scheduler moves on at once).
        self._assumed: dict[str, tuple[str, PodAllocation]] = {}
        self._informers = [
            Informer(client, NODES, self._on_node),
            Informer(client, PODS, self._on_pod),
        ]
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.filtered = self.bound = 0

    def extender_config(self) -> Obj:
        """The ``extenders`` entry of kube-scheduler's configuration, as HAMi's chart writes it."""
        managed = [
            r
            for r in (
                self.cfg.resource_count,
                self.cfg.resource_memory,
                self.cfg.resource_memory_percentage,
                self.cfg.resource_cores,
            )
            if r
        ]
        return {
            "urlPrefix": f"http://127.0.0.1:{self.port}",
            "filterVerb": "filter",
            "bindVerb": "bind",
            "enableHTTPS": False,
            "nodeCacheCapable": True,
            "weight": 1,
            "httpTimeout": "30s",
            "ignorable": False,
            "managedResources": [{"name": r, "ignoredByScheduler": True} for r in managed],
        }

    # -- running -----------------------------------------------------------------------------------

    async def start(self, port: int) -> None:
        for inf in self._informers:
            inf.start()
        app = web.Application()
        app.router.add_post("/filter", self._filter)
        app.router.add_post("/bind", self._bind)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        self.port = port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for inf in self._informers:
            await inf.stop()

    # -- the cache (informer callbacks) -----------------------------------------------------------------

    def _on_node(self, kind: str, node: Obj, _old: Obj | None) -> None:
        meta = node.get("metadata") or {}
        name = str(meta.get("name", ""))
        annotations: Mapping[str, str] = meta.get("annotations") or {}
        if kind == "DELETED":
            self._nodes.pop(name, None)
            return
        try:
            devices, scores = node_devices_from_annotations(annotations)
        except HamiFormatError as exc:
            if REGISTER_ANNOTATION in annotations:
                log.warning("%s: node %s: HAMi cannot read its GPUs: %s", self.cluster, name, exc)
            self._nodes.pop(name, None)
            return
        if not devices:
            self._nodes.pop(name, None)
            return
        self._nodes[name] = (tuple(devices), dict(annotations), scores)

    def _on_pod(self, kind: str, pod: Obj, _old: Obj | None) -> None:
        uid = str((pod.get("metadata") or {}).get("uid", ""))
        allocation = None if kind == "DELETED" else PodAllocation.from_pod(pod)
        if allocation is None:
            self._pods.pop(uid, None)
            if kind == "DELETED" or (pod.get("status") or {}).get("phase") in TERMINAL:
                self._assumed.pop(uid, None)
            return
        node = str(((pod.get("metadata") or {}).get("annotations") or {}).get(ASSIGNED_NODE_ANNOTATION, ""))
        self._pods[uid] = (node, allocation)
        self._assumed.pop(uid, None)

    def _usage(self, names: list[str], pod_uid: str) -> tuple[dict[str, list[DeviceUsage]], dict[str, str]]:
        """Per-GPU usage of the candidate nodes; the pod being scheduled holds nothing yet (an earlier Filter's
        annotations on it, from a cycle that did not bind, are not counted against it)."""
        held: dict[str, list[PodAllocation]] = {}
        for source in (self._pods, self._assumed):
            for uid, (node, allocation) in source.items():
                if uid != pod_uid:
                    held.setdefault(node, []).append(allocation)
        usage: dict[str, list[DeviceUsage]] = {}
        failed: dict[str, str] = {}
        for name in names:
            entry = self._nodes.get(name)
            if entry is None:
                failed[name] = "node unregistered"
            else:
                usage[name] = node_usage(entry[0], held.get(name, ()))
        return usage, failed

    # -- the verbs ---------------------------------------------------------------------------------------

    async def _filter(self, request: web.Request) -> web.Response:
        args = await request.json()
        pod: Obj = args.get("Pod") or args.get("pod") or {}
        names = [str(n) for n in (args.get("NodeNames") or args.get("nodenames") or [])]
        if not all(inf.synced.is_set() for inf in self._informers):
            return web.json_response({"NodeNames": [], "FailedNodes": {}, "Error": "HAMi's caches are not synced"})
        meta = pod.get("metadata") or {}
        try:
            pod = mutate_pod(pod, self.cfg)
        except HamiAdmissionError as exc:
            return web.json_response({"NodeNames": [], "FailedNodes": {}, "Error": exc.message})
        usage, failed = self._usage(names, str(meta.get("uid", "")))
        annotations = {n: self._nodes[n][1] for n in usage}
        scores = {n: self._nodes[n][2] for n in usage}
        try:
            result = schedule_pod(usage, pod, self.cfg, node_annotations=annotations, pair_scores=scores)
        except HamiSchedulingError as exc:
            return web.json_response({"NodeNames": [], "FailedNodes": {}, "Error": f"calcScore failed {exc}"})
        failed.update(result.failed)
        if result.node is None or result.fit is None:
            return web.json_response({"NodeNames": [], "FailedNodes": failed, "Error": ""})
        written = bind_annotations(result.node, result.fit.devices, time.time())
        try:
            await self.client.patch(
                PODS,
                str(meta.get("namespace", "")),
                str(meta.get("name", "")),
                {"metadata": {"annotations": written}},
                field_manager="hami-scheduler",
            )
        except KubeError as exc:
            return web.json_response({"NodeNames": [], "FailedNodes": {}, "Error": f"patch pod annotations: {exc}"})
        allocation = PodAllocation.from_pod({"metadata": {"annotations": written}, "spec": pod.get("spec") or {}})
        if allocation is not None:
            self._assumed[str(meta.get("uid", ""))] = (result.node, allocation)
        self.filtered += 1
        return web.json_response({"NodeNames": [result.node], "FailedNodes": failed, "Error": ""})

    async def _bind(self, request: web.Request) -> web.Response:
        args = await request.json()
        namespace, name = str(args.get("PodNamespace", "")), str(args.get("PodName", ""))
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": str(args.get("PodUID", ""))},
            "target": {"apiVersion": "v1", "kind": "Node", "name": str(args.get("Node", ""))},
        }
        try:
            await self.client.request("POST", PODS.path(namespace, name, "binding"), body=binding)
        except KubeError as exc:
            self._assumed.pop(str(args.get("PodUID", "")), None)
            return web.json_response({"Error": str(exc)})
        self.bound += 1
        return web.json_response({"Error": ""})
