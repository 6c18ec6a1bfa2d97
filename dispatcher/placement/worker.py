"""What one worker cluster can take: its Kueue queues and quota, its nodes, its HAMi GPUs.

A :class:`WorkerCapacity` is plain state, changed incrementally by ``dispatcher.capacity`` from watch
events (ClusterQueues, Cohorts, ResourceFlavors, Topologies, LocalQueues, Workloads, Nodes, Pods, Kueue's
configuration, with its fair sharing) and by the placement engine's reservations. Its :attr:`WorkerCapacity.tas`
is Kueue's TAS view of the cluster: Topologies, the Ready nodes and their labels, the pods outside TAS and the
topology domains admitted TAS workloads (and our reservations) hold. Nothing here does I/O. Every change takes a new
:attr:`WorkerCapacity.version` from one process-wide sequence and is written to the change journal
(:mod:`.journal`), so the engine visits only the workers that changed since it last decided a workload of a shape,
not every worker. A change that only adds one of our reservations records its scope (the quota tree it used,
whether it took GPUs): a verdict for another quota tree, or one without GPUs, cannot have changed, and a ``Fit``
verdict in the same tree can be re-validated cell by cell instead of assigned again
(:attr:`WorkerCapacity.base_version` stays).

Usage has two sources: workloads the worker's Kueue admitted (from their ``status.admission``), and
reservations for our own placements that the worker has not admitted yet, so that concurrent
decisions never overcommit a worker before its status catches up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..quantity import QuantityError, kueue_value, parse_quantity
from ..resources import ResourceTransformation
from .journal import JOURNAL, RESCORE, ChangeMarks, Scope
from .kueue.amounts import FlavorResource
from .kueue.specs import ClusterQueueSpec, CohortSpec, FairSharingConfig, ResourceFlavorSpec
from .kueue.tas import TASCache, node_from_object, non_tas_pod_usage
from .kueue.topology import TASUsage, TopologySpec
from .kueue.tree import QuotaTree
from .kueue.workloads import AdmittedWorkload, pod_requests

__all__ = [
    "LATENCY_TERM_STEP",
    "NodeInfo",
    "Reservation",
    "WorkerCapacity",
    "latency_term",
]

Obj = dict[str, Any]

#: How far the ``latency`` score term must move before the worker's verdicts are scored again (see
#: :attr:`WorkerCapacity.latency`).
LATENCY_TERM_STEP = 0.02


def latency_term(seconds: float) -> float:
    """The ``latency`` score term: ``1 / (1 + seconds / 0.1)``."""
    return 1.0 / (1.0 + seconds / 0.1)


@dataclass(slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, Any], ...]
    #: Allocatable in Kueue units (cpu in milli-cores).
    allocatable: Mapping[str, int]
    unschedulable: bool = False


@dataclass(slots=True)
class Reservation:
    """Capacity promised to one of our placements until the worker's Kueue admits (or drops) it."""

    uid: str
    cluster_queue: str
    usage: Mapping[FlavorResource, int]
    #: HAMi devices assumed taken: node -> [(device id, mem MiB, cores, slots)].
    gpu: Mapping[str, list[tuple[str, int, int, int]]] = field(default_factory=dict)
    #: TAS: the topology domains the placement's pods were predicted to take.
    tas: tuple[TASUsage, ...] = ()


def _reservation_key(uid: str) -> str:
    """The TAS cache key of a reservation's topology usage (never a Workload's ``namespace/name``)."""
    return f"reservation:{uid}"


def _condition_true(obj: Mapping[str, Any], ctype: str) -> bool:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return bool(c.get("status") == "True")
    return False


def _owner_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


class WorkerCapacity:
    """The placement engine's view of one worker."""

    def __init__(
        self, name: str, *, weight: float = 1.0, labels: Mapping[str, str] | None = None, max_in_flight: int = 500
    ) -> None:
        self.name = name
        self.weight = weight
        self.labels = dict(labels or {})
        self.max_in_flight = max_in_flight
        self.version = 0
        #: The last change of each scope (kept by :data:`JOURNAL`).
        self.marks = ChangeMarks()
        #: The version of the last change other than adding one of our reservations.
        self.base_version = 0
        self._health = "Unknown"
        self._health_reason = ""
        self._priority_classes: frozenset[str] | None = None
        self._cordoned = False
        self._synced = False
        #: Workload kinds whose resource the cluster does not serve (no CRD): never placed there.
        self.unserved_kinds: set[str] = set()
        self._latency = 0.0
        self.tree = QuotaTree()
        self.cluster_queues: dict[str, ClusterQueueSpec] = {}
        self.cohorts: dict[str, CohortSpec] = {}
        self.flavors: dict[str, ResourceFlavorSpec] = {}
        #: (namespace, LocalQueue name) -> ClusterQueue name
        self.local_queues: dict[tuple[str, str], str] = {}
        self.transformations: tuple[ResourceTransformation, ...] = ()
        self.excluded_prefixes: tuple[str, ...] = ()
        #: Kueue's fair sharing (``None``: off, classical admission order and preemption).
        self.fair_sharing: FairSharingConfig | None = None
        #: Kueue's TAS cache for this cluster (Topologies, nodes, pods outside TAS, TAS usage).
        self.tas = TASCache()
        #: Equal for workers whose Kueue configuration turns requests into the same quota usage.
        self.kueue_config_key = repr(((), ()))
        #: Remote Workload key (namespace/name) -> ClusterQueue, for admitted workloads (usage in the tree).
        self._admitted: dict[str, str] = {}
        #: Admitted Workloads of a ClusterQueue not seen yet (the informers list independently): added to the
        #: quota tree when their ClusterQueue arrives. ClusterQueue name -> Workload key -> the admission.
        self._awaiting_cq: dict[str, dict[str, Any]] = {}
        #: Remote Workload key -> ClusterQueue for pending (not admitted, not finished) workloads.
        self._pending: dict[str, str] = {}
        self.pending_by_cq: Counter[str] = Counter()
        #: Remote Workload key -> owner (Job) uid, to recognise our own.
        self.workload_owner: dict[str, str] = {}
        self.reservations: dict[str, Reservation] = {}
        #: How many of :attr:`reservations` still hold quota (kept by reserve/settle/release: O(1) per check).
        self._in_flight = 0
        self.nodes: dict[str, NodeInfo] = {}
        #: Per resource, the largest allocatable of any schedulable node (a pod bigger never runs here).
        self.max_node: dict[str, int] = {}
        #: HAMi state, managed by :mod:`dispatcher.placement.gpu` helpers (None when the worker has no GPUs).
        self.gpu: Any = None

    # -- bookkeeping -----------------------------------------------------------------------------------

    def touch(self, scope: Scope = None) -> None:
        """Record a change (``scope``: see :data:`Scope`; only :meth:`reserve` passes one)."""
        self.version = JOURNAL.record(self, scope)
        if scope is None:
            self.base_version = self.version

    # Health, cordon and sync are read by every verdict: setting them is a change.

    @property
    def health(self) -> str:
        return self._health

    @health.setter
    def health(self, value: str) -> None:
        if value != self._health:
            self._health = value
            self.touch()

    @property
    def latency(self) -> float:
        """The API latency (seconds) the worker's verdicts are scored with.

        The client's estimate moves with every call. Setting it is a change only once the ``latency`` term it gives
        moved by :data:`LATENCY_TERM_STEP` or more since the value kept here; then every verdict of the worker is
        scored again (:data:`RESCORE`), so a cached verdict never keeps a latency the worker no longer has."""
        return self._latency

    @latency.setter
    def latency(self, value: float) -> None:
        if value != self._latency and abs(latency_term(value) - latency_term(self._latency)) >= LATENCY_TERM_STEP:
            self._latency = value
            self.touch(RESCORE)

    @property
    def priority_classes(self) -> frozenset[str] | None:
        """The worker's WorkloadPriorityClasses (None until listed: a priority class is not checked then)."""
        return self._priority_classes

    @priority_classes.setter
    def priority_classes(self, value: frozenset[str] | None) -> None:
        if value != self._priority_classes:
            self._priority_classes = value
            self.touch()

    @property
    def health_reason(self) -> str:
        """Why the worker is not Ready when it says (NotReady: the 401/403 it answers the dispatcher with)."""
        return self._health_reason

    @health_reason.setter
    def health_reason(self, value: str) -> None:
        if value != self._health_reason:
            self._health_reason = value
            self.touch()

    @property
    def cordoned(self) -> bool:
        return self._cordoned

    @cordoned.setter
    def cordoned(self, value: bool) -> None:
        if value != self._cordoned:
            self._cordoned = value
            self.touch()

    @property
    def synced(self) -> bool:
        return self._synced

    @synced.setter
    def synced(self, value: bool) -> None:
        if value != self._synced:
            self._synced = value
            self.touch()

    def quota_root(self, cluster_queue: str) -> str | None:
        """The root of ``cluster_queue``'s quota tree (``cohort/<name>``, or ``cq/<name>`` without a cohort):
        usage added anywhere else cannot change what the queue admits."""
        try:
            root = self.tree.root_cohort(cluster_queue)
        except KeyError:
            return None
        return f"cohort/{root}" if root is not None else f"cq/{cluster_queue}"

    @property
    def in_flight(self) -> int:
        """Placements whose copy the worker's Kueue has not admitted yet."""
        return self._in_flight

    # -- Kueue objects --------------------------------------------------------------------------------

    def set_cluster_queue(self, obj: Obj) -> bool:
        """Take a ClusterQueue as listed or watched; False when nothing admission reads changed. Kueue writes a
        ClusterQueue's status (usage, pending counts) on every admission, and that is no change here: the usage
        comes from the Workloads, and every verdict on the worker is kept."""
        spec = ClusterQueueSpec.from_object(obj)
        if self.cluster_queues.get(spec.name) == spec and spec.name not in self._awaiting_cq:
            return False
        self.cluster_queues[spec.name] = spec
        self.tree.set_cluster_queue(spec)
        for key, admitted in self._awaiting_cq.pop(spec.name, {}).items():
            self._admitted[key] = admitted.cluster_queue
            self.tree.add_workload(admitted)
            if admitted.tas_usage:
                self.tas.add_workload(admitted.key, admitted.tas_usage)
        self.touch()
        return True

    def delete_cluster_queue(self, name: str) -> None:
        self.cluster_queues.pop(name, None)
        self.tree.delete_cluster_queue(name)
        self.touch()

    def set_cohort(self, obj: Obj) -> None:
        spec = CohortSpec.from_object(obj)
        self.cohorts[spec.name] = spec
        self.tree.set_cohort(spec)
        self.touch()

    def delete_cohort(self, name: str) -> None:
        self.cohorts.pop(name, None)
        self.tree.delete_cohort(name)
        self.touch()

    def set_flavor(self, obj: Obj) -> None:
        spec = ResourceFlavorSpec.from_object(obj)
        self.flavors[spec.name] = spec
        self.touch()

    def delete_flavor(self, name: str) -> None:
        self.flavors.pop(name, None)
        self.touch()

    def set_topology(self, obj: Obj) -> None:
        try:
            spec = TopologySpec.from_object(obj)
        except ValueError:
            return
        self.tas.set_topology(spec)
        self.touch()

    def delete_topology(self, name: str) -> None:
        self.tas.delete_topology(name)
        self.touch()

    @property
    def uses_tas(self) -> bool:
        """Whether a ResourceFlavor here names a Topology (the pods informer then feeds the TAS view). A Topology
        that no flavor names places nothing, and watching every pod of the worker for it cost the dispatcher a
        pod event or three per Job on every worker of the simulator's default topology."""
        return any(f.topology_name for f in self.flavors.values())

    def set_local_queue(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        cq = (obj.get("spec") or {}).get("clusterQueue")
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if cq:
            self.local_queues[key] = str(cq)
        else:
            self.local_queues.pop(key, None)
        self.touch()

    def delete_local_queue(self, namespace: str, name: str) -> None:
        self.local_queues.pop((namespace, name), None)
        self.touch()

    def set_kueue_config(self, config: Mapping[str, Any] | None) -> None:
        """Kueue's Configuration (resource transformations, excluded prefixes, fair sharing) from its ConfigMap."""
        self.fair_sharing = FairSharingConfig.from_config(config)
        resources = (config or {}).get("resources") or {}
        try:
            self.transformations = tuple(
                ResourceTransformation.from_config(t) for t in resources.get("transformations") or []
            )
        except (KeyError, TypeError, QuantityError):
            self.transformations = ()
        self.excluded_prefixes = tuple(str(p) for p in resources.get("excludeResourcePrefixes") or [])
        self.kueue_config_key = repr((self.transformations, self.excluded_prefixes))
        self.touch()

    # -- workloads ------------------------------------------------------------------------------------

    def workload_event(self, kind: str, obj: Obj) -> str | None:
        """Track a remote Workload. Returns its owner uid (the remote Job's uid) when known."""
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        owner = _owner_uid(obj)
        if owner:
            self.workload_owner[key] = owner
        self._forget(key)
        if kind == "DELETED":
            self.workload_owner.pop(key, None)
            self.touch()
            return owner
        finished = _condition_true(obj, "Finished")
        admission = (obj.get("status") or {}).get("admission")
        if not finished and admission and _condition_true(obj, "QuotaReserved"):
            try:
                admitted = AdmittedWorkload.from_object(obj)
            except (ValueError, QuantityError):
                admitted = None
            if admitted is not None:
                if admitted.cluster_queue in self.cluster_queues:
                    self._admitted[key] = admitted.cluster_queue
                    self.tree.add_workload(admitted)
                    if admitted.tas_usage:
                        self.tas.add_workload(admitted.key, admitted.tas_usage)
                else:
                    self._awaiting_cq.setdefault(admitted.cluster_queue, {})[key] = admitted
        elif not finished:
            queue = str((obj.get("spec") or {}).get("queueName", ""))
            cq = self.local_queues.get((str(meta.get("namespace", "")), queue), "")
            self._pending[key] = cq
            self.pending_by_cq[cq] += 1
        self.touch()
        return owner

    def _forget(self, key: str) -> None:
        for waiting in self._awaiting_cq.values():
            waiting.pop(key, None)
        cq = self._admitted.pop(key, None)
        if cq is not None:
            self.tree.remove_workload(cq, key)
            self.tas.remove_workload(key)
        pcq = self._pending.pop(key, None)
        if pcq is not None:
            self.pending_by_cq[pcq] -= 1
            if self.pending_by_cq[pcq] <= 0:
                del self.pending_by_cq[pcq]

    def admitted(self, key: str) -> bool:
        return key in self._admitted

    @property
    def active_workloads(self) -> int:
        """Workloads the worker's Kueue holds, admitted or pending, not finished (ours and anyone's)."""
        return len(self._admitted) + len(self._pending)

    # -- nodes ----------------------------------------------------------------------------------------

    def node_event(self, kind: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        if kind == "DELETED":
            self.nodes.pop(name, None)
            self.tas.delete_node(name)
        else:
            alloc: dict[str, int] = {}
            for res, qty in ((obj.get("status") or {}).get("allocatable") or {}).items():
                try:
                    alloc[str(res)] = kueue_value(str(res), parse_quantity(qty))
                except QuantityError:
                    continue
            spec = obj.get("spec") or {}
            self.nodes[name] = NodeInfo(
                name=name,
                labels=dict(meta.get("labels") or {}),
                taints=tuple(spec.get("taints") or ()),
                allocatable=alloc,
                unschedulable=bool(spec.get("unschedulable")),
            )
            self.tas.set_node(*node_from_object(obj))
        self._recompute_max_node()
        self.touch()

    def pod_event(self, kind: str, obj: Obj) -> bool:
        """A pod, for the TAS view: bound and not terminated, outside TAS, it takes its requests from its node
        (Kueue's non-TAS usage cache). Returns whether the view changed."""
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        before = self.tas.version
        if kind == "DELETED":
            self.tas.delete_pod(key)
        else:
            spec = obj.get("spec") or {}
            try:
                requests = pod_requests(spec, limits_as_requests=False)
            except QuantityError:
                requests = {}
            self.tas.set_pod(key, non_tas_pod_usage(obj, requests))
        if self.tas.version == before:
            return False
        self.touch()
        return True

    def _recompute_max_node(self) -> None:
        best: dict[str, int] = {}
        for node in self.nodes.values():
            if node.unschedulable:
                continue
            for res, value in node.allocatable.items():
                if value > best.get(res, -1):
                    best[res] = value
        self.max_node = best

    # -- reservations ---------------------------------------------------------------------------------

    def reserve(self, reservation: Reservation) -> None:
        """Hold capacity for one of our placements (idempotent per uid)."""
        self.release(reservation.uid)
        self.reservations[reservation.uid] = reservation
        if reservation.usage:
            self._in_flight += 1
        self.tree.add_usage(reservation.cluster_queue, reservation.usage)
        took_gpus = self.gpu is not None and bool(reservation.gpu)
        if took_gpus:
            self.gpu.assume(reservation.uid, reservation.gpu)
        if reservation.tas:
            # Topology domains are shared by every ClusterQueue using the flavor: anything may have changed.
            self.tas.add_workload(_reservation_key(reservation.uid), reservation.tas)
            self.touch()
            return
        root = self.quota_root(reservation.cluster_queue)
        # Only usage was added: verdicts elsewhere stand, and Fit verdicts in this tree can be re-validated.
        self.touch((root, took_gpus) if root is not None else None)

    def settle(self, uid: str) -> bool:
        """The worker's Kueue admitted the copy: its Workload now carries the quota usage, so the quota part
        of the reservation goes. The HAMi part stays until the pods are bound (their annotations then carry
        it) or the workload ends, so a GPU promised to it is not offered again in between."""
        reservation = self.reservations.get(uid)
        if reservation is None or not reservation.usage:
            return False
        self.tree.remove_usage(reservation.cluster_queue, reservation.usage)
        self.tas.remove_workload(_reservation_key(uid))
        self._in_flight -= 1
        if reservation.gpu:
            self.reservations[uid] = Reservation(reservation.uid, reservation.cluster_queue, {}, reservation.gpu)
        else:
            del self.reservations[uid]
        self.touch()
        return True

    def release(self, uid: str) -> Reservation | None:
        reservation = self.reservations.pop(uid, None)
        if reservation is not None:
            if reservation.usage:
                self._in_flight -= 1
                self.tree.remove_usage(reservation.cluster_queue, reservation.usage)
                self.tas.remove_workload(_reservation_key(uid))
            if self.gpu is not None and reservation.gpu:
                self.gpu.forget(uid)
            self.touch()
        return reservation

    # -- reports --------------------------------------------------------------------------------------

    def quota_report(self) -> list[dict[str, Any]]:
        """Per ClusterQueue and flavor: nominal / used / reserved / free / borrowed and the limits (for the API, the
        CLI and the metrics)."""
        reserved: dict[tuple[str, str, str], int] = {}
        for r in self.reservations.values():
            for (flavor, res), v in r.usage.items():
                reserved[(r.cluster_queue, flavor, res)] = reserved.get((r.cluster_queue, flavor, res), 0) + v
        out = []
        for cq in sorted(self.cluster_queues):
            for rep in self.tree.cluster_queue_report(cq):
                held = reserved.get((cq, rep.flavor, rep.resource), 0)
                out.append(
                    {
                        "clusterQueue": cq,
                        "flavor": rep.flavor,
                        "resource": rep.resource,
                        "nominal": rep.nominal,
                        "used": rep.used - held,
                        "reserved": held,
                        "free": rep.available,
                        # Beyond nominal, from the Cohort (what Kueue's status calls borrowed); limits None: none.
                        "borrowed": rep.borrowed,
                        "borrowingLimit": rep.borrowing_limit,
                        "lendingLimit": rep.lending_limit,
                    }
                )
        return out

    def describe_local_queues(self) -> Iterable[tuple[str, str, str]]:
        for (ns, name), cq in sorted(self.local_queues.items()):
            yield ns, name, cq
