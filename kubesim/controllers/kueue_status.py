"""The simulated Kueue's ClusterQueue and LocalQueue status reconcilers.

Follows Kueue v0.17 ``pkg/controller/core/clusterqueue_controller.go`` and ``localqueue_controller.go``: the
``resource-in-use`` finalizer, ``flavorsReservation`` / ``flavorsUsage`` (the quota in use per flavor and covered
resource, and what is borrowed), the reserving, admitted and pending Workload counts, and the ``Active`` condition
with Kueue's reasons (``Stopped``, ``FlavorNotFound``, ``Terminating``; ``ClusterQueueDoesNotExist``,
``ClusterQueueIsInactive`` for a LocalQueue). Writes are coalesced per queue (see :data:`.kueue_cache.STATUS_PERIOD`).
"""

from __future__ import annotations

import copy

from ..kueue.requests import quantity_string
from ..patch import clone
from .kueue_cache import CQ, LQ, KueueBase, Obj, stop_policy
from .kueue_model import RESOURCE_IN_USE_FINALIZER, condition, now_rfc3339, set_condition

__all__ = ["QueueStatusMixin"]


class QueueStatusMixin(KueueBase):
    """The queue status part of the Kueue controller (see the module docstring)."""

    def _reconcile_cq_status(self, name: str) -> None:
        obj = self.api.store.get(CQ, "", name)
        if obj is None:
            return
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or ())
        counts = self._cq_counts.get(name, [0, 0])
        if meta.get("deletionTimestamp"):
            if RESOURCE_IN_USE_FINALIZER in finalizers and counts[0] <= 0:
                new = clone(obj)
                new["metadata"]["finalizers"] = [f for f in finalizers if f != RESOURCE_IN_USE_FINALIZER]
                self.client.update(new)
                return
        elif RESOURCE_IN_USE_FINALIZER not in finalizers:
            new = clone(obj)
            new["metadata"]["finalizers"] = [*finalizers, RESOURCE_IN_USE_FINALIZER]
            obj = self.client.update(new)
        spec = self._cq_specs.get(name)
        if spec is None:
            return
        status = clone(obj.get("status") or {})
        before = clone(status)
        reservation = self.tree.flavors_reservation(name)
        status["flavorsReservation"] = reservation
        status["flavorsUsage"] = copy.deepcopy(reservation)
        status["reservingWorkloads"] = counts[0]
        status["admittedWorkloads"] = counts[1]
        q = self._queues.get(name)
        status["pendingWorkloads"] = len(q.members) if q is not None else 0
        if meta.get("deletionTimestamp"):
            value, reason, message = "False", "Terminating", "Can't admit new workloads; clusterQueue is terminating"
        elif self._cq_active(name):
            value, reason, message = "True", "Ready", "Can admit new workloads"
        else:
            reasons: list[str] = []
            messages: list[str] = []
            if spec.is_stopped:
                reasons.append("Stopped")
                messages.append("is stopped")
            missing = self._missing_flavors(spec)
            if missing:
                reasons.append("FlavorNotFound")
                messages.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
            for topology, flavor in self._missing_topologies(spec):
                reasons.append("TopologyNotFound")
                messages.append(f'there is no Topology "{topology}" for TAS flavor "{flavor}"')
            value = "False"
            reason = reasons[0] if reasons else "Unknown"
            message = f"Can't admit new workloads: {', '.join(messages)}." if messages else "Can't admit new workloads."
        set_condition(
            status,
            {
                "type": "Active",
                "status": value,
                "reason": reason,
                "message": message,
                "observedGeneration": int(meta.get("generation") or 1),
            },
            now_rfc3339(),
        )
        if status != before:
            new = clone(obj)
            new["status"] = status
            self.client.update_status(new)

    def _reconcile_lq_status(self, ns: str, name: str) -> None:
        obj = self.api.store.get(LQ, ns, name)
        if obj is None:
            return
        key = (ns, name)
        status = clone(obj.get("status") or {})
        before = clone(status)
        cq_name = str((obj.get("spec") or {}).get("clusterQueue") or "")
        cq = self.api.store.get(CQ, "", cq_name)
        counts = self._lq_counts.get(key, [0, 0])
        flavors: list[Obj] = []
        if stop_policy(obj) != "None":
            value, reason, message = "False", "Stopped", "LocalQueue is stopped"
            pending = 0
        elif cq is None:
            value, reason, message = "False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue"
            pending = len(self._pending_lq.get(key, ()))
            counts = [0, 0]
        else:
            active = condition(cq, "Active")
            if active is not None and active.get("status") == "True":
                value, reason, message = "True", "Ready", "Can submit new workloads to localQueue"
            else:
                value, reason, message = "False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"
            pending = len(self._pending_lq.get(key, ()))
        spec = self._cq_specs.get(cq_name)
        if spec is not None and cq is not None:
            usage = self._lq_usage.get(key, {})
            for rg in spec.groups:
                for flavor in rg.flavors:
                    resources = [
                        {"name": r, "total": quantity_string(r, usage.get((flavor, r), 0))} for r in sorted(rg.covered)
                    ]
                    flavors.append({"name": flavor, "resources": resources})
        status["pendingWorkloads"] = pending
        status["reservingWorkloads"] = counts[0]
        status["admittedWorkloads"] = counts[1]
        status["flavorsReservation"] = flavors
        status["flavorsUsage"] = copy.deepcopy(flavors)
        set_condition(
            status,
            {
                "type": "Active",
                "status": value,
                "reason": reason,
                "message": message,
                "observedGeneration": int(obj["metadata"].get("generation") or 1),
            },
            now_rfc3339(),
        )
        if status != before:
            new = clone(obj)
            new["status"] = status
            self.client.update_status(new)
