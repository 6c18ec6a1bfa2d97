"""The simulated Kueue's cache: what it knows of queues, flavors, Cohorts and Workloads, fed by watch events.

Like Kueue's ``pkg/cache`` (the scheduler cache and the queue manager), it is fed by the store's events (re-reading
the current object, so the cache never goes back to an older state than a write the controller already made) and
keeps: the quota tree (:mod:`kubesim.kueue.quota`) with every Workload holding quota, the pending queue of
each ClusterQueue (:mod:`kubesim.kueue.queues`), the LocalQueues and the counts and usage the queue status
reconcilers report. Changes that may make a parked Workload admissible (quota released, queue or flavor changes,
namespace labels) put parked Workloads back in their queues and ask for a scheduling cycle.

The controller itself (:class:`~kubesim.controllers.kueue.KueueController`) adds the scheduler, the
workload controller, the job reconciler and the status reconcilers on top of this class.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..api import Admission, Api
from ..errors import ApiError
from ..kueue.queues import ClusterQueueQueue, order_key, queue_order_timestamp
from ..kueue.quota import AdmittedWorkload, QuotaTree
from ..kueue.requests import FlavorResource, PodSet, pod_requests, resource_value
from ..kueue.specs import ClusterQueueSpec, CohortSpec, FlavorSpec
from ..kueue.tasstate import TasState
from ..patch import clone
from ..store import StoreEvent
from ..topology import KUEUE_CONFIG_KEY, KUEUE_CONFIG_NAME, KUEUE_CONFIG_NAMESPACE
from .base import Controller, record_event
from .kueue_integrations import all_integrations
from .kueue_jobs import BatchJobIntegration, JobIntegration
from .kueue_model import (
    RESOURCE_IN_USE_FINALIZER,
    KueueConfig,
    condition,
    has_quota_reservation,
    is_active,
    is_admitted,
    is_finished,
    now_rfc3339,
    set_evicted_condition,
    set_finished_condition,
)

__all__ = ["COHORT", "CQ", "LQ", "RF", "TOPO", "WL", "WPC", "KueueBase", "LqKey", "Obj", "WlKey"]

log = logging.getLogger("kubesim.kueue")

Obj = dict[str, Any]
WlKey = tuple[str, str]  # (namespace, name)
LqKey = tuple[str, str]

WL = "workloads.kueue.x-k8s.io"
CQ = "clusterqueues.kueue.x-k8s.io"
LQ = "localqueues.kueue.x-k8s.io"
RF = "resourceflavors.kueue.x-k8s.io"
COHORT = "cohorts.kueue.x-k8s.io"
WPC = "workloadpriorityclasses.kueue.x-k8s.io"
TOPO = "topologies.kueue.x-k8s.io"

#: Least time between two status writes of one ClusterQueue or LocalQueue.
STATUS_PERIOD = 0.15


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def priority_of(wl: Mapping[str, Any]) -> int:
    value = (wl.get("spec") or {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def stop_policy(obj: Mapping[str, Any] | None) -> str:
    if obj is None:
        return "None"
    return str((obj.get("spec") or {}).get("stopPolicy") or "None")


@dataclass
class _Reserved:
    cq: str
    lq: LqKey
    usage: dict[FlavorResource, int]
    admitted: bool


class KueueBase(Controller):
    """State and event feed of the simulated Kueue (see the module docstring)."""

    name = "kueue"

    def __init__(self, api: Api, integrations: Iterable[JobIntegration] | None = None) -> None:
        super().__init__(api)
        self.integrations: dict[str, JobIntegration] = {
            i.resource_key: i
            for i in (integrations if integrations is not None else (BatchJobIntegration(), *all_integrations()))
        }
        self._by_kind: dict[tuple[str, str], JobIntegration] = {
            (i.group, i.kind): i for i in self.integrations.values()
        }
        self.resources = (
            *self.integrations,
            WL,
            CQ,
            LQ,
            RF,
            COHORT,
            TOPO,
            "configmaps",
            "namespaces",
            "nodes",
            "pods",
        )
        for key, integration in self.integrations.items():
            api.add_mutating_hook(key, self._webhook(integration))
        # -- cache ---------------------------------------------------------------------------------------
        self.tree = QuotaTree()
        self._cq_objs: dict[str, Obj] = {}
        self._cq_specs: dict[str, ClusterQueueSpec] = {}
        self._flavor_objs: dict[str, Obj] = {}
        self._flavors: dict[str, FlavorSpec] = {}
        self._cohorts: dict[str, CohortSpec] = {}
        self._lqs: dict[LqKey, Obj] = {}
        self._queues: dict[str, ClusterQueueQueue] = {}
        self._pending_wl: dict[WlKey, tuple[str, LqKey]] = {}
        self._pending_lq: dict[LqKey, set[WlKey]] = {}
        self._reserved: dict[WlKey, _Reserved] = {}
        self._cq_counts: dict[str, list[int]] = {}
        self._lq_counts: dict[LqKey, list[int]] = {}
        self._lq_usage: dict[LqKey, dict[FlavorResource, int]] = {}
        self._lq_wls: dict[LqKey, set[WlKey]] = {}
        self._wl_lq: dict[WlKey, LqKey] = {}
        self._wl_owner: dict[WlKey, tuple[str, str, str]] = {}
        self._owned: dict[tuple[str, str, str], set[str]] = {}
        self._ns_labels: dict[str, dict[str, str]] = {}
        #: TAS: Topologies, Ready nodes, pods outside TAS, the topology usage of admitted Workloads.
        self.tas = TasState()
        self._config = KueueConfig()
        self._config_text: str | None = None
        self._config_version = 0
        self._ps_cache: dict[WlKey, tuple[tuple[Any, ...], list[PodSet]]] = {}
        self._arrival: dict[WlKey, int] = {}
        self._seq = 0
        #: ``LastAssignment`` of pending Workloads: flavors tried last, the ClusterQueue generation then, and the
        #: Workload's resourceVersion (Kueue's queue replaces its Info, and loses this, when the object changes).
        self._last: dict[WlKey, tuple[list[dict[str, int]], int, str]] = {}
        #: Admissions and evictions done by this controller (for benchmarks and tests).
        self.admissions = 0
        self.preemptions = 0

    # ---- webhook --------------------------------------------------------------------------------------------

    def _webhook(self, integration: JobIntegration) -> Any:
        def hook(adm: Admission) -> None:
            if adm.operation == "CREATE" and adm.subresource is None:
                integration.default(adm.obj)

        return hook

    # ---- event feed -> cache --------------------------------------------------------------------------------

    def initial_keys(self) -> Iterable[Hashable]:
        store = self.api.store
        for ns in store.iter_all("namespaces"):
            self._ns_labels[ns["metadata"]["name"]] = labels_of(ns)
        cm = store.get("configmaps", KUEUE_CONFIG_NAMESPACE, KUEUE_CONFIG_NAME)
        if cm is not None:
            self._sync_config(cm)
        for obj in store.iter_all(TOPO):
            self._sync_topology(obj["metadata"]["name"])
        for obj in store.iter_all("nodes"):
            self.tas.set_node(obj, obj["metadata"]["name"])
        for obj in store.iter_all("pods"):
            self._sync_pod(obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        for obj in store.iter_all(COHORT):
            self._sync_cohort(obj["metadata"]["name"])
        for obj in store.iter_all(CQ):
            self._sync_cluster_queue(obj["metadata"]["name"])
        for obj in store.iter_all(LQ):
            self._sync_local_queue(obj["metadata"]["namespace"], obj["metadata"]["name"])
        keys: list[Hashable] = []
        for obj in store.iter_all(RF):
            keys += self._sync_flavor(obj["metadata"]["name"])
        for obj in store.iter_all(WL):
            meta = obj["metadata"]
            keys += self._sync_workload(meta["namespace"], meta["name"])
        for rk in self.integrations:
            for obj in store.iter_all(rk):
                meta = obj["metadata"]
                keys.append(("job", rk, meta.get("namespace", ""), meta["name"]))
        keys.append(("schedule",))
        self._emit(keys)
        return []

    def _emit(self, keys: Iterable[Hashable]) -> None:
        """Queue follow-up work; queue status keys are coalesced (one write per queue per STATUS_PERIOD)."""
        for key in keys:
            if isinstance(key, tuple) and key[0] in ("cqstatus", "lqstatus"):
                self.requeue_after(key, STATUS_PERIOD)
            else:
                self.enqueue(key)

    def keys_for(self, event: StoreEvent) -> Iterable[Hashable]:
        self._emit(self._on_event(event))
        return []

    def _on_event(self, event: StoreEvent) -> list[Hashable]:
        meta = event.obj["metadata"]
        ns = meta.get("namespace", "")
        name = meta["name"]
        resource = event.resource
        if resource in self.integrations:
            return [("job", resource, ns, name)]
        if resource == WL:
            keys = self._sync_workload(ns, name)
            current = self.api.store.get(WL, ns, name)
            if current is not None and self.tas.topologies:
                psas = ((current.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ()
                if any(p.get("topologyAssignment") for p in psas):
                    keys.append(("ungate", ns, name))
            return keys
        if resource == CQ:
            return self._sync_cluster_queue(name)
        if resource == LQ:
            return self._sync_local_queue(ns, name)
        if resource == RF:
            return self._sync_flavor(name)
        if resource == COHORT:
            return self._sync_cohort(name)
        if resource == TOPO:
            return self._sync_topology(name)
        if resource == "nodes":
            changed = self.tas.set_node(self.api.store.get("nodes", "", name), name)
            return self._requeue_everything() if changed and self.tas.topologies else []
        if resource == "pods":
            changed = self._sync_pod(ns, name)
            return (
                (self._requeue_everything() + self._ungate_keys(ns, name))
                if changed and self.tas.topologies
                else (self._ungate_keys(ns, name))
            )
        if resource == "configmaps":
            if ns == KUEUE_CONFIG_NAMESPACE and name == KUEUE_CONFIG_NAME:
                return self._sync_config(self.api.store.get("configmaps", ns, name))
            return []
        if resource == "namespaces":
            current = self.api.store.get("namespaces", "", name)
            labels = labels_of(current) if current is not None else None
            if labels != self._ns_labels.get(name):
                if labels is None:
                    self._ns_labels.pop(name, None)
                else:
                    self._ns_labels[name] = labels
                return self._requeue_everything()
        return []

    # -- structure --------------------------------------------------------------------------------------------

    def _requeue_everything(self) -> list[Hashable]:
        """A change that may make any parked workload admissible: they all compete again."""
        for q in self._queues.values():
            q.requeue_all()
        return [("schedule",)]

    def _sync_config(self, cm: Obj | None) -> list[Hashable]:
        text = ((cm or {}).get("data") or {}).get(KUEUE_CONFIG_KEY)
        if text == self._config_text:
            return []
        self._config_text = text
        config = KueueConfig.from_yaml(text)
        if config == self._config:
            return []
        self._config = config
        self._config_version += 1
        self._ps_cache.clear()
        return self._requeue_everything()

    def _sync_flavor(self, name: str) -> list[Hashable]:
        obj = self.api.store.get(RF, "", name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            if self._flavors.pop(name, None) is None:
                return []
            self._flavor_objs.pop(name, None)
        else:
            spec = FlavorSpec.from_object(obj)
            self._flavor_objs[name] = obj
            if self._flavors.get(name) == spec:
                return []
            self._flavors[name] = spec
        return self._structure_changed(self._cq_specs)

    def _sync_topology(self, name: str) -> list[Hashable]:
        obj = self.api.store.get(TOPO, "", name)
        levels = (
            tuple(str(level.get("nodeLabel") or "") for level in (obj.get("spec") or {}).get("levels") or ())
            if obj is not None and not obj["metadata"].get("deletionTimestamp")
            else None
        )
        if self.tas.topologies.get(name) == levels:
            return []
        if levels is None:
            self.tas.topologies.pop(name, None)
        else:
            self.tas.topologies[name] = levels
        return self._structure_changed(self._cq_specs)

    def _sync_pod(self, ns: str, name: str) -> bool:
        """TAS: a pod outside TAS bound to a node takes its requests from the node (``nonTasUsageCache``)."""
        pod = self.api.store.get("pods", ns, name)
        requests: dict[str, int] = {}
        if pod is not None:
            spec = pod.get("spec") or {}
            requests = {r: resource_value(r, a) for r, a in pod_requests(spec, limits=False).items()}
        return self.tas.set_pod((ns, name), pod, requests)

    def _ungate_keys(self, ns: str, name: str) -> list[Hashable]:
        """Hook for the topology ungater (the controller adds it)."""
        return []

    def _sync_cohort(self, name: str) -> list[Hashable]:
        obj = self.api.store.get(COHORT, "", name)
        if obj is None:
            if self._cohorts.pop(name, None) is None:
                return []
            self.tree.delete_cohort(name)
        else:
            spec = CohortSpec.from_object(obj)
            if self._cohorts.get(name) == spec:
                return []
            self._cohorts[name] = spec
            self.tree.set_cohort(spec)
        return self._structure_changed(self._cq_specs)

    def _sync_cluster_queue(self, name: str) -> list[Hashable]:
        obj = self.api.store.get(CQ, "", name)
        keys: list[Hashable] = [("cqstatus", name)]
        if obj is None:
            self._cq_objs.pop(name, None)
            if self._cq_specs.pop(name, None) is None:
                return []
            self.tree.delete_cluster_queue(name)
            q = self._queues.pop(name, None)
            if q is not None:
                for key in list(q.members):
                    self._drop_pending(key)
            for key, res in list(self._reserved.items()):
                if res.cq == name:
                    self._drop_reserved(key)
            return self._structure_changed([name]) + self._lqs_of(name)
        old = self._cq_objs.get(name)
        self._cq_objs[name] = obj
        active_before = condition(old, "Active") if old is not None else None
        active_now = condition(obj, "Active")
        status_keys: list[Hashable] = []
        if (active_before or {}).get("status") != (active_now or {}).get("status"):
            status_keys = self._lqs_of(name)
        spec = ClusterQueueSpec.from_object(obj)
        deleting = bool(obj["metadata"].get("deletionTimestamp"))
        was_deleting = bool(old is not None and old["metadata"].get("deletionTimestamp"))
        if old is not None and self._cq_specs.get(name) == spec and deleting == was_deleting:
            # A status or metadata write: only a missing finalizer needs the status reconciler.
            if not deleting and RESOURCE_IN_USE_FINALIZER not in (obj["metadata"].get("finalizers") or ()):
                return [*keys, *status_keys]
            return status_keys
        self._cq_specs[name] = spec
        self.tree.set_cluster_queue(spec)
        q = self._queues.get(name)
        if q is None:
            self._queues[name] = ClusterQueueQueue(spec.strict_fifo)
        elif q.strict != spec.strict_fifo:
            q.strict = spec.strict_fifo
        # Workloads of LocalQueues pointing here may become queueable.
        for lq_key, lq in self._lqs.items():
            if (lq.get("spec") or {}).get("clusterQueue") == name:
                for wl_key in list(self._lq_wls.get(lq_key, ())):
                    keys += self._sync_workload(*wl_key)
        return [*keys, *status_keys, *self._structure_changed([name]), *self._lqs_of(name)]

    def _lqs_of(self, cq: str) -> list[Hashable]:
        return [("lqstatus", *k) for k, lq in self._lqs.items() if (lq.get("spec") or {}).get("clusterQueue") == cq]

    def _structure_changed(self, cqs: Iterable[str]) -> list[Hashable]:
        """Quota, flavors or queue settings changed: re-evaluate parked workloads, statuses and conditions."""
        keys: list[Hashable] = [("cqstatus", name) for name in cqs]
        for cq in cqs:
            for lq_key, lq in self._lqs.items():
                if (lq.get("spec") or {}).get("clusterQueue") == cq:
                    keys.append(("lqstatus", *lq_key))
                    keys += [("wl", *k) for k in self._lq_wls.get(lq_key, ()) if k not in self._reserved]
        return keys + self._requeue_everything()

    def _sync_local_queue(self, ns: str, name: str) -> list[Hashable]:
        key = (ns, name)
        obj = self.api.store.get(LQ, ns, name)
        old = self._lqs.get(key)
        if obj is None:
            if self._lqs.pop(key, None) is None:
                return []
        else:
            self._lqs[key] = obj
            if old is not None and old.get("spec") == obj.get("spec"):
                return []
        keys: list[Hashable] = []
        for wl_key in list(self._lq_wls.get(key, ())):
            keys += self._sync_workload(*wl_key)
        if obj is not None:
            keys.append(("lqstatus", ns, name))
        return keys + self._requeue_everything()

    # -- workloads --------------------------------------------------------------------------------------------

    def _cq_active(self, name: str) -> bool:
        spec = self._cq_specs.get(name)
        if spec is None or spec.is_stopped:
            return False
        obj = self._cq_objs.get(name)
        if obj is not None and obj["metadata"].get("deletionTimestamp"):
            return False
        return not self._missing_flavors(spec) and not self._missing_topologies(spec)

    def _missing_flavors(self, spec: ClusterQueueSpec) -> list[str]:
        return [f for f in spec.flavor_names() if f not in self._flavors]

    def _missing_topologies(self, spec: ClusterQueueSpec) -> list[tuple[str, str]]:
        """``isTASViolated``: (Topology, flavor) for each TAS flavor whose Topology does not exist."""
        out = []
        for f in spec.flavor_names():
            flavor = self._flavors.get(f)
            if flavor is not None and flavor.topology is not None and flavor.topology not in self.tas.topologies:
                out.append((flavor.topology, f))
        return out

    def _sync_workload(self, ns: str, name: str) -> list[Hashable]:
        """Bring the cache in line with the stored Workload: quota held, pending queue membership, indexes."""
        key = (ns, name)
        obj = self.api.store.get(WL, ns, name)
        keys: list[Hashable] = [("wl", ns, name)]
        last = self._last.get(key)
        if last is not None and (obj is None or obj["metadata"].get("resourceVersion") != last[2]):
            del self._last[key]
        # ownership index (jobs find their workloads; workload events wake their jobs)
        owner: tuple[str, str, str] | None = None
        if obj is not None:
            for ref in obj["metadata"].get("ownerReferences") or ():
                if not ref.get("controller"):
                    continue
                group = str(ref.get("apiVersion", "")).rpartition("/")[0]
                integration = self._by_kind.get((group, ref.get("kind", "")))
                if integration is not None:
                    owner = (integration.resource_key, ns, ref["name"])
                    keys.append(("job", *owner))
                break
        old_owner = self._wl_owner.get(key)
        if old_owner != owner:
            if old_owner is not None:
                self._owned.get(old_owner, set()).discard(name)
                keys.append(("job", *old_owner))
            if owner is not None:
                self._wl_owner[key] = owner
                self._owned.setdefault(owner, set()).add(name)
            else:
                self._wl_owner.pop(key, None)
        finished = obj is None or is_finished(obj)
        # LocalQueue index of unfinished workloads
        lq_key: LqKey | None = None
        if obj is not None and not finished:
            queue = (obj.get("spec") or {}).get("queueName")
            if queue:
                lq_key = (ns, str(queue))
        old_lq = self._wl_lq.get(key)
        if old_lq != lq_key:
            if old_lq is not None:
                self._lq_wls.get(old_lq, set()).discard(key)
            if lq_key is not None:
                self._wl_lq[key] = lq_key
                self._lq_wls.setdefault(lq_key, set()).add(key)
            else:
                self._wl_lq.pop(key, None)
        # quota reservation
        reserved: AdmittedWorkload | None = None
        if obj is not None and not finished and has_quota_reservation(obj):
            cq = ((obj.get("status") or {}).get("admission") or {}).get("clusterQueue")
            if cq in self._cq_specs:
                reserved = AdmittedWorkload.from_object(obj)
        if reserved is not None:
            self._set_reserved(key, reserved, lq_key or (ns, ""), is_admitted(obj or {}))
        elif key in self._reserved:
            released = self._drop_reserved(key)
            if released is not None:
                keys += self._on_release(released)
        # pending queue
        target: tuple[str, tuple[int, float, str]] | None = None
        if obj is not None and reserved is None and not finished and lq_key is not None and self._queueable(obj):
            lq = self._lqs.get(lq_key)
            if lq is not None and stop_policy(lq) == "None":
                cq_name = str((lq.get("spec") or {}).get("clusterQueue") or "")
                if cq_name in self._queues:
                    sort = self._order_key(key, obj)
                    target = (cq_name, sort)
        current = self._pending_wl.get(key)
        if current is not None and (target is None or target[0] != current[0] or current[1] != lq_key):
            keys += self._drop_pending(key)
            current = None
        if target is not None and lq_key is not None:
            cq_name, sort = target
            q = self._queues[cq_name]
            if current is None:
                self._pending_wl[key] = (cq_name, lq_key)
                self._pending_lq.setdefault(lq_key, set()).add(key)
                keys += [("cqstatus", cq_name), ("lqstatus", *lq_key)]
            if q.members.get(key) != sort:
                q.add(key, sort)
                keys.append(("schedule",))
        if obj is None:
            self._ps_cache.pop(key, None)
            self._arrival.pop(key, None)
        return keys

    def _order_key(self, key: WlKey, wl: Obj) -> tuple[int, float, str]:
        """Kueue's queue order (priority, then queue-order timestamp); timestamps have second precision, so
        ties are broken by arrival order, as a FIFO queue would, rather than arbitrarily."""
        seq = self._arrival.get(key)
        if seq is None:
            self._seq += 1
            seq = self._arrival[key] = self._seq
        return order_key(priority_of(wl), queue_order_timestamp(wl), f"{seq:012d}")

    def _drop_pending(self, key: WlKey) -> list[Hashable]:
        self._last.pop(key, None)
        current = self._pending_wl.pop(key, None)
        if current is None:
            return []
        cq_name, lq_key = current
        q = self._queues.get(cq_name)
        if q is not None:
            q.remove(key)
        self._pending_lq.get(lq_key, set()).discard(key)
        return [("cqstatus", cq_name), ("lqstatus", *lq_key)]

    @staticmethod
    def _queueable(wl: Mapping[str, Any]) -> bool:
        """Whether the queue manager holds this workload: active, not being deleted, and not waiting for a
        stopped queue to restart (``Requeued=False``) or for an eviction to complete."""
        if not is_active(wl) or wl["metadata"].get("deletionTimestamp"):
            return False
        requeued = condition(wl, "Requeued")
        return not (requeued is not None and requeued.get("status") == "False")

    def _set_reserved(self, key: WlKey, wl: AdmittedWorkload, lq: LqKey, admitted: bool) -> None:
        old = self._reserved.get(key)
        if old is not None:
            self._account(old, -1)
            if old.cq != wl.cluster_queue:
                self.tree.remove_workload(old.cq, f"{key[0]}/{key[1]}")
        self.tree.add_workload(wl)
        self.tas.add_workload(wl.key, wl.tas)
        new = _Reserved(wl.cluster_queue, lq, dict(wl.usage), admitted)
        self._reserved[key] = new
        self._account(new, +1)
        if old is None or old.usage != new.usage or old.admitted != new.admitted or old.cq != new.cq:
            self._mark_status(new.cq, lq)
            if old is not None and old.cq != new.cq:
                self._mark_status(old.cq, old.lq)

    def _drop_reserved(self, key: WlKey) -> _Reserved | None:
        old = self._reserved.pop(key, None)
        if old is None:
            return None
        self._account(old, -1)
        if old.cq in self._cq_specs:
            self.tree.remove_workload(old.cq, f"{key[0]}/{key[1]}")
        self.tas.remove_workload(f"{key[0]}/{key[1]}")
        self._mark_status(old.cq, old.lq)
        return old

    def _account(self, res: _Reserved, sign: int) -> None:
        counts = self._cq_counts.setdefault(res.cq, [0, 0])
        counts[0] += sign
        counts[1] += sign if res.admitted else 0
        lq_counts = self._lq_counts.setdefault(res.lq, [0, 0])
        lq_counts[0] += sign
        lq_counts[1] += sign if res.admitted else 0
        usage = self._lq_usage.setdefault(res.lq, {})
        for fr, value in res.usage.items():
            usage[fr] = usage.get(fr, 0) + sign * value

    def _on_release(self, released: _Reserved) -> list[Hashable]:
        """Quota came free: parked workloads of every ClusterQueue sharing the cohort tree compete again."""
        if released.cq in self._cq_specs:
            for name in self.tree.cluster_queues_in_tree(released.cq):
                q = self._queues.get(name)
                if q is not None:
                    q.requeue_all()
        return [("schedule",)]

    def _mark_status(self, cq: str, lq: LqKey) -> None:
        self.requeue_after(("cqstatus", cq), STATUS_PERIOD)
        if lq[1]:
            self.requeue_after(("lqstatus", *lq), STATUS_PERIOD)

    # ---- writes shared by the workload controller and the job reconciler ------------------------------------

    def _write_status(self, wl: Obj) -> Obj | None:
        try:
            return self.client.update_status(wl)
        except ApiError as err:
            if err.code in (404, 409):
                raise
            log.warning("kueue: status of workload %s failed: %s", wl["metadata"]["name"], err.message)
            return None

    def _remove_finalizer(self, wl: Obj) -> None:
        finalizers = list(wl["metadata"].get("finalizers") or ())
        if RESOURCE_IN_USE_FINALIZER not in finalizers:
            return
        new = clone(wl)
        new["metadata"]["finalizers"] = [f for f in finalizers if f != RESOURCE_IN_USE_FINALIZER]
        new.pop("status", None)
        try:
            self.client.update(new)
        except ApiError as err:
            if err.code != 404:
                raise

    def _finish(self, wl: Obj, reason: str, message: str) -> None:
        if is_finished(wl):
            return
        new = clone(wl)
        set_finished_condition(new, reason, message, now_rfc3339())
        self.client.update_status(new)
        self._emit(self._sync_workload(wl["metadata"]["namespace"], wl["metadata"]["name"]))

    def _evict(self, wl: Obj, reason: str, message: str) -> None:
        new = clone(wl)
        set_evicted_condition(new, reason, message, now_rfc3339())
        self.client.update_status(new)
        self._emit(self._sync_workload(wl["metadata"]["namespace"], wl["metadata"]["name"]))
        record_event(self.client, wl, reason=f"EvictedDueTo{reason}", message=message, component="kueue")
