"""``batch/v1`` Job: taken when suspended or managed by the dispatcher; one pod set."""

from __future__ import annotations

import re
from typing import Any

from .. import labels as L
from ..kube.client import Resource
from ..resources import InvalidRequest, PodSet, pod_requests
from .base import Adapter, Intake, RemotePhase, dig, now_rfc3339

__all__ = ["JobAdapter"]

Obj = dict[str, Any]

JOB_CONTROLLER = "kubernetes.io/job-controller"
#: Kueue's partial admission annotation for ``batch/v1`` Jobs: the fewest pods the Job may run with.
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def _min_count(obj: Obj, count: int) -> int | None:
    """The pod set's ``minCount`` from ``kueue.x-k8s.io/job-min-parallelism`` (Kueue's Job integration), so that
    the engine predicts a worker's partial admission; Kueue then lowers the copy's ``spec.parallelism``.

    A value Kueue's Job webhook rejects (not an integer, or not in ``1..count-1``) is an error here too: no
    worker's Kueue would accept the copy."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(MIN_PARALLELISM)
    if raw is None:
        return None
    path = f"metadata.annotations[{MIN_PARALLELISM}]"
    if not isinstance(raw, str) or not re.fullmatch(r"[+-]?[0-9]+", raw):  # Go's strconv.Atoi
        raise InvalidRequest(path, raw, "not an integer (Kueue's webhook would reject the Job)")
    value = int(raw)
    if not 0 < value < count:
        raise InvalidRequest(path, value, f"should be between 0 and {count - 1} (Kueue's webhook would reject the Job)")
    return value


def _true(status: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in status.get("conditions") or [])


class JobAdapter(Adapter):
    kind = "Job"
    resource = Resource("batch", "v1", "jobs", "Job")

    def intake(self, obj: Obj, controller_name: str) -> Intake:
        spec = obj.get("spec") or {}
        managed_by = spec.get("managedBy")
        if managed_by == controller_name:
            return Intake(True, status_mode="status")
        if managed_by and managed_by != JOB_CONTROLLER:
            return Intake(False)  # another controller's object
        status = obj.get("status") or {}
        if _true(status, "Complete") or _true(status, "Failed"):
            return Intake(False)
        if spec.get("suspend"):
            return Intake(True, status_mode="annotations")
        return Intake(
            False,
            warning=(
                f"Job is labelled {L.QUEUE_NAME} but is neither suspended nor managed by {controller_name}, "
                "so it runs on this cluster and the dispatcher leaves it alone; to dispatch it, create it with "
                f"spec.suspend: true or spec.managedBy: {controller_name}"
            ),
        )

    def pod_selector(self, obj: Obj) -> str | None:
        uid = dig(obj, "metadata", "uid")
        return f"batch.kubernetes.io/controller-uid={uid}" if uid else None

    def pod_sets(self, obj: Obj) -> list[PodSet]:
        spec = obj.get("spec") or {}
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        count = parallelism if completions is None else min(parallelism, int(completions))
        template = spec.get("template") or {}
        requests = pod_requests(template.get("spec") or {}, "spec.template.spec")
        return [PodSet("main", count, requests, template, _min_count(obj, count))]

    def remote_copy(self, obj: Obj, labels: dict[str, str], annotations: dict[str, str]) -> Obj:
        copy = self.base_copy(obj, labels, annotations)
        meta = copy["metadata"]
        meta["labels"] = {k: v for k, v in meta["labels"].items() if k not in L.JOB_GENERATED_LABELS}
        spec = copy.setdefault("spec", {})
        spec.pop("managedBy", None)
        spec.pop("selector", None)
        spec.pop("manualSelector", None)
        spec["suspend"] = True
        tmeta = spec.setdefault("template", {}).setdefault("metadata", {})
        if isinstance(tmeta.get("labels"), dict):
            tmeta["labels"] = {k: v for k, v in tmeta["labels"].items() if k not in L.JOB_GENERATED_LABELS}
        return copy

    def phase(self, remote: Obj) -> RemotePhase:
        status = remote.get("status") or {}
        for c in status.get("conditions") or []:
            if c.get("status") != "True":
                continue
            if c.get("type") == "Complete":
                return RemotePhase(True, True, False, c.get("reason", "Completed"), c.get("message", ""))
            if c.get("type") == "Failed":
                return RemotePhase(True, False, False, c.get("reason", "Failed"), c.get("message", ""))
        running = int(status.get("active") or 0) > 0 and not (remote.get("spec") or {}).get("suspend")
        return RemotePhase(False, False, running)

    def manager_status(self, local: Obj, remote: Obj) -> Obj | None:
        """The remote status, written so the API server's Job status rules accept it: the terminal
        conditions come with their SuccessCriteriaMet / FailureTarget companions and times."""
        status = self.remote_status(remote)
        conditions = list(status.get("conditions") or [])
        types = {c.get("type") for c in conditions if c.get("status") == "True"}
        for final, companion in (("Complete", "SuccessCriteriaMet"), ("Failed", "FailureTarget")):
            if final in types and companion not in types:
                done = next(c for c in conditions if c.get("type") == final)
                conditions.insert(conditions.index(done), {**done, "type": companion})
        if conditions:
            status["conditions"] = conditions
        if ("Complete" in types or "Failed" in types) and not status.get("startTime"):
            status["startTime"] = (local.get("metadata") or {}).get("creationTimestamp")
        return status

    def activate_patch(self, local: Obj) -> Obj | None:
        if (local.get("spec") or {}).get("suspend"):
            return {"spec": {"suspend": False}}
        return None

    def failed_status(self, local: Obj, message: str, reason: str = "WorkerLost") -> Obj | None:
        """A Failed status in the form the Job status rules accept (``FailureTarget`` first, times set)."""
        now = now_rfc3339()
        status = dict(local.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") not in ("FailureTarget", "Failed")]
        for ctype in ("FailureTarget", "Failed"):
            conditions.append(
                {
                    "type": ctype,
                    "status": "True",
                    "reason": reason,
                    "message": message[:1000],
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                }
            )
        # A finished Job may not count active, ready or terminating pods, nor hold uncounted ones (the API server's
        # Job status rules); the lost copy's last counts are dropped.
        return {
            "conditions": conditions,
            "startTime": status.get("startTime") or now,
            "active": 0,
            "ready": 0,
            "terminating": 0,
            "uncountedTerminatedPods": None,
        }
