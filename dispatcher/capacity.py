"""The capacity view of one worker: informers whose events keep a :class:`WorkerCapacity` current.

Per worker, list-then-watch informers follow Kueue's ClusterQueues, Cohorts, ResourceFlavors, Topologies,
LocalQueues and Workloads, the Nodes, Kueue's own configuration (for its resource transformations and fair
sharing), and — once a node shows HAMi's device registration, or the worker's Kueue has a Topology or a TAS
flavor — the Pods: their HAMi allocation annotations give per-GPU usage, and the pods outside TAS bound to a node
take from its free capacity in Kueue's TAS view. Every event changes the in-memory view incrementally; no decision
rescans anything.

The same informers serve the status sync: Workloads owned by our remote copies and our remote copies
themselves (selected by the origin label) are handed to the service's callbacks.

Kueue's API version is discovered (``v1beta2`` where served, else ``v1beta1``); kinds a worker's
Kueue does not serve (e.g. Cohorts on an old release) are skipped.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import yaml

from kubecommon.tasks import cancel_and_wait

from . import labels as L
from .health import Answered, HealthMachine, HealthMonitor
from .kube.client import ClusterClient, KubeError, Resource
from .kube.informer import Informer
from .placement.gpu import WorkerGpus
from .placement.hami.names import REGISTER_ANNOTATION
from .placement.worker import WorkerCapacity

__all__ = ["KUEUE_CONFIG", "WorkerView", "kueue_resource", "probe_worker", "watch_workers"]

log = logging.getLogger("dispatcher.capacity")
Obj = dict[str, Any]

KUEUE_GROUP = "kueue.x-k8s.io"
#: Where a Kueue installation keeps its Configuration: (namespace, ConfigMap, key).
KUEUE_CONFIG = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")

NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")

_KUEUE_KINDS = {
    "clusterqueues": ("ClusterQueue", False),
    "cohorts": ("Cohort", False),
    "resourceflavors": ("ResourceFlavor", False),
    "localqueues": ("LocalQueue", True),
    "workloads": ("Workload", True),
    "workloadpriorityclasses": ("WorkloadPriorityClass", False),
    "topologies": ("Topology", False),
}


def kueue_resource(plural: str, version: str) -> Resource:
    kind, namespaced = _KUEUE_KINDS[plural]
    return Resource(KUEUE_GROUP, version, plural, kind, namespaced=namespaced)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _owner_uid(obj: Obj) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


RemoteJobHandler = Callable[[str, str, Obj], None]
RemoteWorkloadHandler = Callable[[str, str, Obj], None]


class WorkerView:
    """Informers on one worker cluster feeding its :class:`WorkerCapacity` and the status sync."""

    def __init__(
        self,
        capacity: WorkerCapacity,
        client: ClusterClient,
        *,
        origin: str,
        job_resources: list[Resource],
        on_capacity: Callable[[str], None],
        on_remote_job: RemoteJobHandler,
        on_remote_workload: RemoteWorkloadHandler,
        on_race_pod: RemoteJobHandler | None = None,
    ) -> None:
        self.capacity = capacity
        self.client = client
        self.origin = origin
        self.job_resources = job_resources
        self.on_capacity = on_capacity
        self.on_remote_job = on_remote_job
        self.on_remote_workload = on_remote_workload
        #: allAtOnce / incremental: pods of race copies still behind the race gate, by uid.
        self.on_race_pod = on_race_pod
        self.gated_pods: dict[str, Obj] = {}
        self.kueue_version: str | None = None
        self.informers: dict[str, Informer] = {}
        #: Remote Workloads by the uid of their owner (the remote Job), for the status sync.
        self.workloads_by_owner: dict[str, Obj] = {}
        self._task: asyncio.Task[None] | None = None
        self._pods_started = False
        self._config_seen = False
        #: Discovery refused with 401/403 (before any informer exists).
        self.discovery_rejected: KubeError | None = None

    @property
    def name(self) -> str:
        return self.capacity.name

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"capacity-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task], what="capacity")
            self._task = None
        for inf in self.informers.values():
            await inf.stop()
        self.informers.clear()

    def last_contact(self) -> float:
        """Monotonic time of the newest answer from this worker (any informer, any call)."""
        contacts = [inf.last_contact for inf in self.informers.values()]
        return max([self.client.last_success, *contacts])

    def rejection(self) -> str | None:
        """Why this worker refuses the dispatcher, if it does: the first 401/403 of discovery or an informer
        (``Forbidden: ... cannot list resource "pods" ...`` names what the RBAC lacks)."""
        if self.discovery_rejected is not None:
            return self.discovery_rejected.rejection()
        for inf in self.informers.values():
            if inf.rejected is not None:
                return inf.rejected.rejection()
        return None

    def remote_jobs(self, plural: str) -> dict[tuple[str, str], Obj]:
        inf = self.informers.get(f"remote-{plural}")
        return inf.cache if inf is not None else {}

    def jobs_synced(self) -> bool:
        return all(inf.synced.is_set() for key, inf in self.informers.items() if key.startswith("remote-"))

    async def _run(self) -> None:
        attempt = 0
        while True:
            try:
                served = await self._discover()
                break
            except KubeError as exc:
                attempt += 1
                delay = min(30.0, 0.5 * 2 ** min(attempt, 6))
                if exc.rejected:
                    if self.discovery_rejected is None:
                        log.error("worker %s: Kueue API discovery refused: %s", self.name, exc.rejection())
                    self.discovery_rejected = exc
                else:
                    log.info("worker %s: Kueue API discovery failed (%s); retrying in %.0fs", self.name, exc, delay)
                await asyncio.sleep(delay)
        self.discovery_rejected = None
        self._start_informers(served)
        await asyncio.gather(*(inf.synced.wait() for inf in list(self.informers.values())))
        # The pods informer starts from a node, Topology or flavor event: wait for it too (TAS and HAMi usage).
        await asyncio.gather(*(inf.synced.wait() for inf in list(self.informers.values())))
        if not self._config_seen:
            self.capacity.set_kueue_config(None)
        if self.capacity.priority_classes is None and "workloadpriorityclasses" in self.informers:
            self.capacity.priority_classes = frozenset()  # listed: the worker has none
        self.capacity.synced = True
        self.capacity.touch()
        self.on_capacity(self.name)

    async def _discover(self) -> set[str]:
        group = await self.client.request("GET", f"/apis/{KUEUE_GROUP}", timeout=10.0)
        preferred = (group.get("preferredVersion") or {}).get("version")
        versions = [v.get("version") for v in group.get("versions") or []]
        version = "v1beta2" if "v1beta2" in versions else (preferred or "v1beta1")
        listing = await self.client.request("GET", f"/apis/{KUEUE_GROUP}/{version}", timeout=10.0)
        self.kueue_version = version
        return {str(r.get("name")) for r in listing.get("resources") or [] if "/" not in str(r.get("name"))}

    def _add(self, key: str, inf: Informer) -> None:
        self.informers[key] = inf
        inf.start()

    def _start_informers(self, served: set[str]) -> None:
        version = self.kueue_version or "v1beta2"
        handlers = {
            "clusterqueues": self._on_cluster_queue,
            "cohorts": self._on_cohort,
            "resourceflavors": self._on_flavor,
            "localqueues": self._on_local_queue,
            "workloads": self._on_workload,
            "workloadpriorityclasses": self._on_priority_class,
            "topologies": self._on_topology,
        }
        for plural, handler in handlers.items():
            if plural in served:
                self._add(plural, Informer(self.client, kueue_resource(plural, version), handler))
            elif plural not in ("cohorts", "topologies"):
                log.warning("worker %s: Kueue %s does not serve %s", self.name, version, plural)
        self._add("nodes", Informer(self.client, NODES, self._on_node))
        ns, name, _ = KUEUE_CONFIG
        self._add(
            "kueue-config",
            Informer(self.client, CONFIGMAPS, self._on_config, namespace=ns, field_selector=f"metadata.name={name}"),
        )
        if self.on_race_pod is not None:
            self._add(
                "race-pods",
                Informer(
                    self.client,
                    PODS,
                    self._on_race_pod,
                    label_selector=f"{L.RACE_GATE}={self.origin}",
                    field_selector="status.phase!=Succeeded,status.phase!=Failed",
                ),
            )
        for res in self.job_resources:
            self._add(
                f"remote-{res.plural}",
                Informer(
                    self.client,
                    res,
                    self._remote_job_handler(res.plural),
                    label_selector=f"{L.ORIGIN}={self.origin}",
                    on_served=self._served_handler(res.kind),
                ),
            )

    # -- handlers (quick, in memory) -------------------------------------------------------------------

    def _changed(self) -> None:
        if self.capacity.synced:
            self.on_capacity(self.name)

    def _on_cluster_queue(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        if kind == "DELETED":
            self.capacity.delete_cluster_queue(_name(obj))
        elif not self.capacity.set_cluster_queue(obj):
            return  # its status only: nothing to place anew
        self._changed()

    def _on_priority_class(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        names = set(self.capacity.priority_classes or ())
        if kind == "DELETED":
            names.discard(_name(obj))
        else:
            names.add(_name(obj))
        self.capacity.priority_classes = frozenset(names)
        self._changed()

    def _on_cohort(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        if kind == "DELETED":
            self.capacity.delete_cohort(_name(obj))
        else:
            self.capacity.set_cohort(obj)
        self._changed()

    def _on_flavor(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        if kind == "DELETED":
            self.capacity.delete_flavor(_name(obj))
        else:
            self.capacity.set_flavor(obj)
        self._start_pods()
        self._changed()

    def _on_topology(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        if kind == "DELETED":
            self.capacity.delete_topology(_name(obj))
        else:
            self.capacity.set_topology(obj)
        self._start_pods()
        self._changed()

    def _on_local_queue(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        meta = obj.get("metadata") or {}
        if kind == "DELETED":
            self.capacity.delete_local_queue(str(meta.get("namespace", "")), _name(obj))
        else:
            self.capacity.set_local_queue(obj)
        self._changed()

    def _on_workload(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        owner = self.capacity.workload_event(kind, obj) or _owner_uid(obj)
        if owner:
            if kind == "DELETED":
                self.workloads_by_owner.pop(owner, None)
            else:
                self.workloads_by_owner[owner] = obj
            self.on_remote_workload(self.name, kind, obj)
        self._changed()

    def _on_node(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        self.capacity.node_event(kind, obj)
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if self.capacity.gpu is None and kind != "DELETED" and REGISTER_ANNOTATION in annotations:
            self.capacity.gpu = WorkerGpus()
        if self.capacity.gpu is not None and self.capacity.gpu.node_event(kind, obj):
            self.capacity.touch()
        self._start_pods()
        self._changed()

    def _start_pods(self) -> None:
        """The pods informer, once the worker has HAMi GPUs or uses TAS."""
        if self._pods_started or (self.capacity.gpu is None and not self.capacity.uses_tas):
            return
        self._pods_started = True
        # HAMi usage lives on bound pods, and so does what TAS counts against a node; terminal pods hold nothing.
        self._add(
            "pods",
            Informer(
                self.client,
                PODS,
                self._on_pod,
                field_selector="status.phase!=Succeeded,status.phase!=Failed",
            ),
        )

    def _on_pod(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        changed = False
        gpu = self.capacity.gpu
        if gpu is not None and gpu.pod_event(kind, obj):
            self.capacity.touch()
            changed = True
        if self.capacity.uses_tas and self.capacity.pod_event(kind, obj):
            changed = True
        if changed:
            self._changed()

    def _on_race_pod(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        uid = str((obj.get("metadata") or {}).get("uid"))
        gates = (obj.get("spec") or {}).get("schedulingGates") or []
        if kind == "DELETED" or not any(g.get("name") == L.RACE_GATE for g in gates):
            self.gated_pods.pop(uid, None)
            return
        self.gated_pods[uid] = obj
        if self.on_race_pod is not None:
            self.on_race_pod(self.name, kind, obj)

    def _on_config(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        self._config_seen = True
        if kind == "DELETED":
            self.capacity.set_kueue_config(None)
        else:
            raw = (obj.get("data") or {}).get(KUEUE_CONFIG[2])
            try:
                config = yaml.safe_load(raw) if raw else None
            except yaml.YAMLError as exc:
                log.warning("worker %s: Kueue configuration is not YAML (%s); ignoring it", self.name, exc)
                config = None
            self.capacity.set_kueue_config(config if isinstance(config, dict) else None)
        self._changed()

    def _served_handler(self, kind: str) -> Callable[[bool], None]:
        def served(yes: bool) -> None:
            if yes:
                self.capacity.unserved_kinds.discard(kind)
            else:
                self.capacity.unserved_kinds.add(kind)
            self.capacity.touch()
            self._changed()

        return served

    def _remote_job_handler(self, plural: str) -> Callable[[str, Obj, Obj | None], None]:
        def handle(kind: str, obj: Obj, _old: Obj | None) -> None:
            self.on_remote_job(self.name, kind, obj)

        return handle


async def probe_worker(
    client: ClusterClient, view: WorkerView, timeout: float, answered_within: float = 0.0
) -> bool | str | Answered:
    """A worker's health probe: its ``/readyz``, and whether it refuses any of the dispatcher's reads (a
    ServiceAccount without the RBAC to list pods answers ``/readyz`` but cannot be placed on).

    When the worker answered one of our requests (a Lease renewal, a create, a list; not a watch's stream) within
    ``answered_within`` seconds and none failed since, that answer stands for the ``/readyz`` call, with contact
    dated then (:class:`~dispatcher.health.Answered`). It is the same evidence: the API server is up, reachable,
    and accepts our credentials. On a quiet fleet the probe's call is the only one besides the Lease renewals, so
    this is most of the dispatcher's idle cost per worker (``bench/RESULTS.md``). A request failed since, or none
    recent: the call is made."""
    last = client.last_answered
    if answered_within > 0 and last > client.last_failure and time.monotonic() - last < answered_within:
        client.probes_skipped += 1
        return view.rejection() or Answered(last)
    result = await client.probe(timeout)
    if result is True:
        refused = view.rejection()
        if refused:
            return refused
    return result


def watch_workers(
    clients: dict[str, ClusterClient],
    capacities: dict[str, WorkerCapacity],
    health: HealthMonitor,
    *,
    origin: str,
    job_resources: list[Resource],
    suspect_after: float,
    lost_timeout: float,
    on_capacity: Callable[[str], None],
    on_remote_job: RemoteJobHandler,
    on_remote_workload: RemoteWorkloadHandler,
    on_race_pod: RemoteJobHandler | None,
) -> dict[str, WorkerView]:
    """A started view of each worker, and its health machine (probes with short deadlines, contact from the view's
    watches)."""
    views = {}
    for name, client in clients.items():
        view = WorkerView(
            capacities[name],
            client,
            origin=origin,
            job_resources=job_resources,
            on_capacity=on_capacity,
            on_remote_job=on_remote_job,
            on_remote_workload=on_remote_workload,
            on_race_pod=on_race_pod,
        )
        views[name] = view
        health.add(
            name,
            HealthMachine(suspect_after=suspect_after, lost_timeout=lost_timeout),
            functools.partial(
                probe_worker, client, view, max(0.5, min(3.0, lost_timeout / 4)), answered_within=health.interval
            ),
            view.last_contact,
        )
        view.start()
    return views
