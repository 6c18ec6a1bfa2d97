"""JobSet (``jobset.x-k8s.io/v1alpha2``): one pod set per replicated job, replicas x pods per Job.

Taken when ``spec.managedBy`` names the dispatcher or when ``spec.suspend`` is true. The copy keeps the
spec, drops ``spec.managedBy`` (the worker's JobSet controller runs it) and is created suspended for the
worker's Kueue. Finished on the ``Completed`` or ``Failed`` condition (Kueue's ``JobSet.Finished``).
"""

from __future__ import annotations

from typing import Any

from ..kube.client import Resource
from ..resources import PodSet, pod_requests
from .base import Adapter, Intake, RemotePhase, condition_true, dig, now_rfc3339

__all__ = ["JobSetAdapter"]

Obj = dict[str, Any]


def _int(value: Any, default: int) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else default


def pods_per_replica(job_spec: Obj) -> int:
    """Kueue's ``PodsCountPerReplica``: parallelism (default 1), capped by completions."""
    parallelism = _int(job_spec.get("parallelism"), 1)
    completions = _int(job_spec.get("completions"), parallelism)
    return min(parallelism, completions)


class JobSetAdapter(Adapter):
    kind = "JobSet"
    resource = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
    own_controller = "jobset.sigs.k8s.io/jobset-controller"

    def intake(self, obj: Obj, controller_name: str) -> Intake:
        return self.standard_intake(obj, controller_name, "spec.suspend", "spec.managedBy")

    def pod_selector(self, obj: Obj) -> str | None:
        uid = dig(obj, "metadata", "uid")
        return f"jobset.sigs.k8s.io/jobset-uid={uid}" if uid else None

    def pod_sets(self, obj: Obj) -> list[PodSet]:
        out = []
        for i, rj in enumerate(dig(obj, "spec", "replicatedJobs") or []):
            job_spec = dig(rj, "template", "spec") or {}
            template = job_spec.get("template") or {}
            count = _int(rj.get("replicas"), 1) * pods_per_replica(job_spec)
            path = f"spec.replicatedJobs[{i}].template.spec.template.spec"
            out.append(
                PodSet(
                    str(rj.get("name", f"rj-{i}")).lower(),
                    count,
                    pod_requests(template.get("spec") or {}, path),
                    template,
                )
            )
        return out

    def remote_copy(self, obj: Obj, labels: dict[str, str], annotations: dict[str, str]) -> Obj:
        return self.suspended_copy(obj, labels, annotations)

    def phase(self, remote: Obj) -> RemotePhase:
        status = remote.get("status") or {}
        done = condition_true(status, "Completed")
        if done:
            return RemotePhase(True, True, False, done.get("reason") or "Completed", done.get("message") or "")
        failed = condition_true(status, "Failed")
        if failed:
            return RemotePhase(True, False, False, failed.get("reason") or "Failed", failed.get("message") or "")
        active = any(
            _int(r.get("active"), 0) > 0 or _int(r.get("ready"), 0) > 0
            for r in status.get("replicatedJobsStatus") or []
        )
        return RemotePhase(False, False, active and not dig(remote, "spec", "suspend"))

    def activate_patch(self, local: Obj) -> Obj | None:
        return {"spec": {"suspend": False}} if dig(local, "spec", "suspend") else None

    def failed_status(self, local: Obj, message: str, reason: str = "WorkerLost") -> Obj | None:
        now = now_rfc3339()
        status = dict(local.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Failed"]
        conditions.append(
            {"type": "Failed", "status": "True", "reason": reason, "message": message[:1000], "lastTransitionTime": now}
        )
        status["conditions"] = conditions
        status["terminalState"] = "Failed"
        return status
