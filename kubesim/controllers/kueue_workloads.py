"""The simulated Kueue's workload controller: the conditions of Workloads the scheduler is not deciding about.

Follows Kueue v0.17 ``pkg/controller/core/workload_controller.go`` for what matters without admission checks and
PodsReady: orphaned Workloads are finished and released (``FinalizeOrphanedWorkload``); a deactivated Workload
holding quota is evicted; ``Requeued=False`` after a stopped LocalQueue or ClusterQueue turns ``True`` again when
the queue restarts; a Workload without quota gets its ``QuotaReserved=False`` reason when it cannot be queued at
all (missing or stopped queue, namespace selector; ``syncQuotaReservedFalseCondition``) and ``Admitted`` follows
``QuotaReserved`` (``SyncAdmittedCondition``); ``HoldAndDrain`` on a LocalQueue or ClusterQueue evicts its
admitted Workloads.
"""

from __future__ import annotations

from ..patch import clone
from .kueue_cache import WL, KueueBase, Obj, labels_of, stop_policy
from .kueue_model import (
    JOB_UID_LABEL,
    UNADMITTED_WORKLOADS_OBSERVABILITY,
    condition,
    has_quota_reservation,
    is_active,
    is_admitted,
    is_evicted,
    is_finished,
    now_rfc3339,
    set_condition,
    set_requeued_condition,
    sync_admitted_condition,
)

__all__ = ["WorkloadControllerMixin"]

#: QuotaReserved=False reasons the scheduler sets and the workload controller keeps until the next cycle.
_SCHEDULER_REASONS = frozenset(
    {
        "WaitingForQuota",
        "NoMatchingFlavor",
        "ExceedsMaxQuota",
        "TopologyPlacementFailed",
        "WaitingForPreemptedWorkloads",
        "WaitingForPodsReady",
        "PendingEvaluation",
    }
)


class WorkloadControllerMixin(KueueBase):
    """The workload controller part of the Kueue controller (see the module docstring)."""

    def _reconcile_workload(self, ns: str, name: str) -> None:
        """The parts of Kueue's workload controller that matter without admission checks and PodsReady."""
        wl = self.api.store.get(WL, ns, name)
        if wl is None:
            return
        meta = wl["metadata"]
        if not meta.get("ownerReferences") and (meta.get("deletionTimestamp") or labels_of(wl).get(JOB_UID_LABEL)):
            # FinalizeOrphanedWorkload: finish (releasing quota) unless being deleted, drop the finalizer.
            if not meta.get("deletionTimestamp") and not is_finished(wl):
                self._finish(wl, "OwnerNotFound", "The workload's owner no longer exists")
                wl = self.api.store.get(WL, ns, name) or wl
            self._remove_finalizer(wl)
            return
        if is_finished(wl):
            return
        if not is_active(wl):
            if has_quota_reservation(wl) and not is_evicted(wl):
                self._evict(wl, "Deactivated", "The workload is deactivated")
            return
        queue = str((wl.get("spec") or {}).get("queueName") or "")
        lq = self._lqs.get((ns, queue))
        lq_active = stop_policy(lq) == "None"
        cq_name = str(((lq or {}).get("spec") or {}).get("clusterQueue") or "")
        cq = self._cq_objs.get(cq_name)
        requeued = condition(wl, "Requeued")
        if requeued is not None and requeued.get("status") == "False":
            if requeued.get("reason") == "LocalQueueStopped" and lq is not None and lq_active:
                new = clone(wl)
                set_requeued_condition(
                    new, "LocalQueueRestarted", "The LocalQueue was restarted after being stopped", True, now_rfc3339()
                )
                self._write_status(new)
                return
            if requeued.get("reason") == "ClusterQueueStopped" and cq is not None and stop_policy(cq) == "None":
                new = clone(wl)
                set_requeued_condition(
                    new,
                    "ClusterQueueRestarted",
                    "The ClusterQueue was restarted after being stopped",
                    True,
                    now_rfc3339(),
                )
                self._write_status(new)
                return
        if not is_admitted(wl):
            new = clone(wl)
            now = now_rfc3339()
            changed = False
            if not has_quota_reservation(new):
                changed = self._sync_quota_reserved_false(new, lq, lq_active, cq_name, cq, now)
            if sync_admitted_condition(new, now):
                changed = True
            if changed:
                self._write_status(new)
                return
        if has_quota_reservation(wl) and is_admitted(wl) and not is_evicted(wl):
            if stop_policy(lq) == "HoldAndDrain":
                self._evict(wl, "LocalQueueStopped", "The LocalQueue is stopped")
            elif cq is not None and stop_policy(cq) == "HoldAndDrain":
                self._evict(wl, "ClusterQueueStopped", "The ClusterQueue is stopped")

    def _sync_quota_reserved_false(
        self, wl: Obj, lq: Obj | None, lq_active: bool, cq_name: str, cq: Obj | None, now: str
    ) -> bool:
        """``syncQuotaReservedFalseCondition``: why a workload without quota is not being considered."""
        queue = str((wl.get("spec") or {}).get("queueName") or "")
        reason = message = ""
        if lq is None:
            reason, message = "Misconfigured", f"LocalQueue {queue} doesn't exist"
        elif not lq_active:
            reason, message = "Suspended", f"LocalQueue {queue} is inactive"
        elif cq is None or cq_name not in self._cq_specs:
            reason, message = "Misconfigured", f"ClusterQueue {cq_name} doesn't exist"
        elif not self._cq_active(cq_name):
            reason, message = "Suspended", f"ClusterQueue {cq_name} is inactive"
        elif UNADMITTED_WORKLOADS_OBSERVABILITY and not self._cq_specs[cq_name].matches_namespace(
            self._ns_labels.get(wl["metadata"]["namespace"], {})
        ):
            reason, message = "Misconfigured", "workload namespace doesn't match ClusterQueue selector"
        current = condition(wl, "QuotaReserved")
        if not UNADMITTED_WORKLOADS_OBSERVABILITY:
            if not message:
                return False
            reason = "Inadmissible"
        elif not reason:
            if current is None or current.get("reason") in _SCHEDULER_REASONS:
                return False
            reason, message = "PendingEvaluation", "Workload is pending evaluation in the scheduling queue"
        generation = int(wl["metadata"].get("generation") or 0)
        return set_condition(
            wl.setdefault("status", {}),
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": reason,
                "message": message,
                "observedGeneration": generation,
                "lastTransitionTime": now,
            },
            now,
        )
