"""MultiKueue's rules for an external dispatcher (Kueue v0.17.0), as pure functions on manager Workloads.

What Kueue's source says (``pkg/controller/admissionchecks/multikueue/workload.go``, ``pkg/workload/workload.go``,
``pkg/webhooks/workload_webhook.go``, ``pkg/controller/workloaddispatcher/incrementaldispatcher.go`` and the
Workload CRD's CEL rules), and what this module does about it:

* **When a Workload waits for a worker.** The manager's Kueue reserved quota for it (``QuotaReserved``), its
  MultiKueue admission check (an AdmissionCheck whose controllerName is ``kueue.x-k8s.io/multikueue``) is
  ``Pending``, it is not finished, and ``status.clusterName`` is unset: the incremental dispatcher nominates under
  exactly these conditions. With ``multiKueue.dispatcherName`` neither of Kueue's two built-in names, MultiKueue
  creates remote copies only on the clusters listed in ``status.nominatedClusterNames`` (and deletes the copies of
  clusters that leave the list, as long as no copy has been admitted); the first copy a worker *admits*
  (``MultiKueueWaitForWorkloadAdmitted``, on by default in v0.17; else quota reservation) wins.
* **Who writes what.** ``nominatedClusterNames``: the dispatcher (here, this one). ``clusterName``: only
  MultiKueue, when a copy is admitted, in the same write that clears the nominations; it must be one of the
  nominations the object had before that write (the validating webhook), it is immutable once set, and the CRD
  says ``clusterName and nominatedClusterNames are mutually exclusive``.
* **With which field manager.** Kueue writes both through ``workload.PatchAdmissionStatus``: a server-side apply
  of the status, forced, by the field manager ``kueue-admission``, of the whole admission part of the status
  (``PrepareWorkloadPatch``), with the resourceVersion (a stale write fails with a conflict). Clearing a field is
  *leaving it out* of that apply, which removes it only if ``kueue-admission`` owns it. So a nomination written by
  any other field manager (or by a merge patch) survives MultiKueue's clearing write, which then breaks the CEL
  rule and fails: the copy runs, but the manager Workload never gets its ``clusterName`` (seen on the real rig).
  :func:`nomination_apply` therefore builds the same apply as Kueue's own, as ``kueue-admission``.
* **When Kueue clears them.** Setting ``clusterName`` clears the nominations; any eviction (``prepareForEviction``
  → ``resetClusterNomination``) clears both: the admission check going to ``Retry`` (the reserving worker lost
  for ``workerLostTimeout``, or, with ``MultiKueueRedoAdmissionOnEvictionInWorker``, the copy evicted on the
  worker), a preemption or deactivation on the manager. The Workload is then requeued, its quota reserved again,
  its admission check ``Pending`` again: the dispatcher nominates afresh.
* **Never take a nomination back.** A worker may admit its copy at any moment; if it had just left the
  nominations, MultiKueue's ``clusterName`` write fails the webhook (not among the old nominations) and the
  Workload is stuck on that admitted copy. So a re-nomination (admission timeout, lost nominee) only *adds* a
  worker, as Kueue's incremental dispatcher does.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..placement.workload import PendingWorkload, PodSetSpec
from ..resources import InvalidRequest, PodSet, pod_requests

__all__ = [
    "ADMISSION_FIELD_MANAGER",
    "BUILTIN_DISPATCHERS",
    "MULTIKUEUE_CONTROLLER",
    "InvalidRequest",
    "ManagerWorkload",
    "Phase",
    "multikueue_checks",
    "nomination_apply",
]

Obj = dict[str, Any]

#: Kueue's field manager of the admission part of a Workload's status (``constants.AdmissionName``).
ADMISSION_FIELD_MANAGER = "kueue-admission"
#: The controllerName of MultiKueue's AdmissionChecks.
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
#: Kueue's own dispatchers: with one of these configured, MultiKueue (or Kueue's incremental dispatcher) writes the
#: nominations itself, and an external dispatcher must not.
BUILTIN_DISPATCHERS = (
    "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    "kueue.x-k8s.io/multikueue-dispatcher-incremental",
)
#: The conditions ``admissionStatusPatch`` carries (Kueue's ``admissionManagedConditions``), in Kueue's order.
ADMISSION_CONDITIONS = (
    "QuotaReserved",
    "BlockedOnPreemptionGates",
    "Evicted",
    "Admitted",
    "Preempted",
    "Requeued",
    "DeactivationTarget",
    "Finished",
)


class Phase:
    """Where a manager Workload is, as MultiKueue sees it."""

    #: Not handled by MultiKueue (no MultiKueue admission check), or its check Rejected.
    OTHER = "Other"
    #: Waiting for the manager's own quota (or requeued after an eviction).
    QUEUED = "Queued"
    #: Quota reserved, MultiKueue check Pending, no cluster yet: the dispatcher's turn.
    DISPATCHING = "Dispatching"
    #: Quota reserved, check in Retry: MultiKueue is about to evict it (worker lost, or evicted on the worker).
    RETRYING = "Retrying"

    #: ``clusterName`` set: a worker admitted MultiKueue's copy.
    ASSIGNED = "Assigned"
    FINISHED = "Finished"


def _condition(obj: Mapping[str, Any], ctype: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def _true(obj: Mapping[str, Any], ctype: str) -> bool:
    c = _condition(obj, ctype)
    return c is not None and c.get("status") == "True"


@dataclass(frozen=True)
class ManagerWorkload:
    """One manager Workload, read for the dispatcher (the object itself stays in ``obj``)."""

    obj: Mapping[str, Any]
    #: The names of the manager's MultiKueue AdmissionChecks.
    checks: frozenset[str]

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.obj.get("metadata") or {}

    @property
    def status(self) -> Mapping[str, Any]:
        return self.obj.get("status") or {}

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.obj.get("spec") or {}

    @property
    def uid(self) -> str:
        return str(self.meta.get("uid", ""))

    @property
    def namespace(self) -> str:
        return str(self.meta.get("namespace", "default"))

    @property
    def name(self) -> str:
        return str(self.meta.get("name", ""))

    @property
    def owner(self) -> Obj | None:
        """The job object the Workload is for (its controller owner reference)."""
        refs = self.meta.get("ownerReferences") or []
        for ref in refs:
            if ref.get("controller"):
                return dict(ref)
        return dict(refs[0]) if refs else None

    @property
    def job_name(self) -> str:
        """The name users know (the Job's), as ``dispatcher explain NS/NAME`` takes it."""
        owner = self.owner
        return str(owner.get("name")) if owner else self.name

    @property
    def kind(self) -> str:
        owner = self.owner
        return str(owner.get("kind")) if owner else "Workload"

    @property
    def api_version(self) -> str:
        owner = self.owner
        return str(owner.get("apiVersion")) if owner else "kueue.x-k8s.io/v1beta2"

    @property
    def check(self) -> Obj | None:
        """The Workload's MultiKueue admission check state."""
        for state in self.status.get("admissionChecks") or []:
            if state.get("name") in self.checks:
                return dict(state)
        return None

    @property
    def cluster_name(self) -> str | None:
        name = self.status.get("clusterName")
        return str(name) if name else None

    @property
    def nominated(self) -> tuple[str, ...]:
        return tuple(str(n) for n in self.status.get("nominatedClusterNames") or ())

    @property
    def resource_version(self) -> str:
        return str(self.meta.get("resourceVersion", ""))

    @property
    def created(self) -> datetime | None:
        stamp = self.meta.get("creationTimestamp")
        try:
            return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")) if stamp else None
        except ValueError:
            return None

    @property
    def finished(self) -> Obj | None:
        """The ``Finished`` condition when it is True (its reason: ``Succeeded`` or ``Failed``)."""
        c = _condition(self.obj, "Finished")
        return c if c is not None and c.get("status") == "True" else None

    @property
    def evicted(self) -> Obj | None:
        c = _condition(self.obj, "Evicted")
        return c if c is not None and c.get("status") == "True" else None

    @property
    def phase(self) -> str:
        check = self.check
        if check is None or check.get("state") == "Rejected":
            return Phase.FINISHED if self.finished and check is not None else Phase.OTHER
        if self.finished:
            return Phase.FINISHED
        if self.cluster_name:
            return Phase.ASSIGNED
        if not _true(self.obj, "QuotaReserved"):
            return Phase.QUEUED
        if check.get("state") == "Pending":
            return Phase.DISPATCHING
        return Phase.RETRYING

    @property
    def cycle(self) -> str:
        """This admission on the manager: when its quota was reserved and, once evicted, when. A new value means
        Kueue evicted the Workload since (and cleared cluster and nominations), whether or not it released the
        quota: a manager batch/v1 Job that MultiKueue already synced as started cannot be stopped (Kueue's restore of
        its pod template fails, the template being immutable then), so its eviction never releases the quota and
        MultiKueue dispatches it again within the same reservation (seen on the real rig, Kueue v0.17.0)."""
        c = _condition(self.obj, "QuotaReserved")
        if c is None or c.get("status") != "True":
            return ""
        evicted = self.evicted
        return f"{c.get('lastTransitionTime', '')}|{evicted.get('lastTransitionTime', '') if evicted else ''}"

    @property
    def priority(self) -> int:
        return int(self.spec.get("priority") or 0)

    @property
    def priority_class(self) -> str | None:
        ref = self.spec.get("priorityClassRef") or {}
        if ref.get("kind", "WorkloadPriorityClass") == "WorkloadPriorityClass" and ref.get("name"):
            return str(ref["name"])
        return None

    @property
    def queue(self) -> str:
        return str(self.spec.get("queueName", ""))

    def pod_sets(self) -> list[PodSet]:
        """Kueue's pod sets of the Workload, with per-pod requests computed as Kueue computes them; raises
        :class:`~dispatcher.resources.InvalidRequest` for a quantity that does not parse."""
        out = []
        for i, ps in enumerate(self.spec.get("podSets") or []):
            template = ps.get("template") or {}
            requests = pod_requests(template.get("spec") or {}, f"spec.podSets[{i}].template.spec")
            min_count = ps.get("minCount")
            out.append(
                PodSet(
                    name=str(ps.get("name", "main")),
                    count=int(ps.get("count", 1)),
                    requests=requests,
                    template=template,
                    min_count=int(min_count) if min_count is not None else None,
                )
            )
        return out

    def pending(
        self, workload_id: int, generation: int, excluded: Iterable[str], selector: Mapping[str, str] | None = None
    ) -> PendingWorkload:
        """The Workload as the placement engine takes it (the same engine as standalone mode)."""
        specs = tuple(PodSetSpec.from_json({**p.to_json(), "template": p.template}) for p in self.pod_sets())
        created = self.created
        return PendingWorkload(
            id=workload_id,
            uid=self.uid,
            namespace=self.namespace,
            name=self.job_name,
            queue=self.queue,
            priority=self.priority,
            created=created.timestamp() if created else 0.0,
            generation=generation,
            pod_sets=specs,
            selector=dict(selector) if selector else None,
            excluded=frozenset(excluded),
            kind=self.kind,
            priority_class=self.priority_class,
        )


def multikueue_checks(admission_checks: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The names of the AdmissionChecks MultiKueue runs (controllerName ``kueue.x-k8s.io/multikueue``)."""
    return frozenset(
        str((ac.get("metadata") or {}).get("name"))
        for ac in admission_checks
        if (ac.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER
    )


def nomination_apply(obj: Mapping[str, Any], names: Sequence[str]) -> Obj:
    """The server-side apply (field manager :data:`ADMISSION_FIELD_MANAGER`, forced) that sets
    ``status.nominatedClusterNames`` to ``names``: Kueue's ``PrepareWorkloadPatch`` of the Workload as read, strict
    (its resourceVersion: a Workload changed since it was read answers 409), with only the nominations changed.

    Everything Kueue's admission writes carries is carried unchanged (admission, requeue state, resource
    requests, the admission-managed conditions, past execution time, eviction counts, cluster name, unhealthy
    nodes, preemption gates, every admission check), so the apply takes nothing away from the fields that field
    manager owns."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    body_meta: Obj = {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    for key in ("labels", "annotations"):
        if meta.get(key):
            body_meta[key] = copy.deepcopy(meta[key])
    out: Obj = {}
    admission = status.get("admission")
    if admission is not None:
        out["admission"] = copy.deepcopy(admission)
    requeue = status.get("requeueState") or {}
    if requeue.get("count") is not None or requeue.get("requeueAt") is not None:
        out["requeueState"] = copy.deepcopy(requeue)
    if admission is not None:
        out["resourceRequests"] = []
    elif status.get("resourceRequests"):
        out["resourceRequests"] = copy.deepcopy(status["resourceRequests"])
    conditions = [c for t in ADMISSION_CONDITIONS if (c := _condition(obj, t)) is not None]
    if conditions:
        out["conditions"] = conditions
    if status.get("accumulatedPastExecutionTimeSeconds") is not None:
        out["accumulatedPastExecutionTimeSeconds"] = status["accumulatedPastExecutionTimeSeconds"]
    evictions = (status.get("schedulingStats") or {}).get("evictions")
    if evictions:
        out["schedulingStats"] = {"evictions": copy.deepcopy(evictions)}
    if status.get("clusterName"):
        out["clusterName"] = status["clusterName"]
    if names:
        out["nominatedClusterNames"] = list(names)
    for key in ("unhealthyNodes", "preemptionGates"):
        if status.get(key):
            out[key] = copy.deepcopy(status[key])
    if status.get("admissionChecks") is not None:
        out["admissionChecks"] = copy.deepcopy(status["admissionChecks"])
    return {
        "apiVersion": obj.get("apiVersion") or "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": body_meta,
        "status": out,
    }
