"""The Job controller, as kube-controller-manager runs it: pods for an unsuspended Job, status kept.

It keeps ``active``, ``ready``, ``succeeded``, ``failed``, ``terminating``, ``startTime``,
``completionTime`` and the conditions (``Suspended``, ``SuccessCriteriaMet`` then ``Complete``,
``FailureTarget`` then ``Failed``) in the order the API server's Job status rules demand. A Job whose
``spec.managedBy`` names another controller is left alone, as the real controller leaves it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from datetime import UTC, datetime
from typing import Any

from ..api import Api, now_rfc3339
from ..constants import JOB_CONTROLLER_NAME
from ..errors import ApiError
from ..patch import clone
from ..store import StoreEvent
from .base import Controller, record_event

__all__ = ["JobController"]

Obj = dict[str, Any]


def _condition(status: Obj, ctype: str) -> Obj | None:
    for c in status.get("conditions") or []:
        if c.get("type") == ctype:
            return c  # type: ignore[no-any-return]
    return None


def _true(status: Obj, ctype: str) -> bool:
    c = _condition(status, ctype)
    return c is not None and c.get("status") == "True"


def _set_condition(status: Obj, ctype: str, value: str, reason: str, message: str, now: str) -> None:
    conditions = status.setdefault("conditions", [])
    for c in conditions:
        if c.get("type") == ctype:
            if c.get("status") != value:
                c["lastTransitionTime"] = now
            c.update({"status": value, "reason": reason, "message": message, "lastProbeTime": now})
            return
    conditions.append(
        {
            "type": ctype,
            "status": value,
            "reason": reason,
            "message": message,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
    )


def is_finished(job: Obj) -> bool:
    status = job.get("status") or {}
    return _true(status, "Complete") or _true(status, "Failed")


class JobController(Controller):
    name = "job-controller"
    resources = ("jobs.batch", "pods")

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self._pods_of: dict[str, set[tuple[str, str]]] = {}

    def keys_for(self, event: StoreEvent) -> Iterable[Hashable]:
        meta = event.obj["metadata"]
        if event.resource == "jobs.batch":
            if event.type == "DELETED":
                self._pods_of.pop(meta.get("uid", ""), None)
                return []
            return [(meta.get("namespace", ""), meta["name"])]
        for owner in meta.get("ownerReferences") or ():
            if owner.get("kind") == "Job" and owner.get("controller"):
                pods = self._pods_of.setdefault(owner["uid"], set())
                ref = (meta.get("namespace", ""), meta["name"])
                if event.type == "DELETED":
                    pods.discard(ref)
                else:
                    pods.add(ref)
                return [(meta.get("namespace", ""), owner["name"])]
        return []

    def initial_keys(self) -> Iterable[Hashable]:
        for pod in self.api.store.iter_all("pods"):
            self.keys_for(StoreEvent(0, "pods", "ADDED", pod, None))
        for job in self.api.store.iter_all("jobs.batch"):
            yield (job["metadata"].get("namespace", ""), job["metadata"]["name"])

    def _pods(self, job: Obj) -> list[Obj]:
        out = []
        for ns, name in list(self._pods_of.get(job["metadata"]["uid"], ())):
            pod = self.api.store.get("pods", ns, name)
            if pod is not None:
                out.append(pod)
        return out

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        namespace, name = key
        job = self.api.store.get("jobs.batch", namespace, name)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        spec = job.get("spec") or {}
        managed_by = spec.get("managedBy")
        if managed_by and managed_by != JOB_CONTROLLER_NAME:
            return
        status = clone(job.get("status") or {})
        before = clone(status)
        now = now_rfc3339()
        pods = self._pods(job)
        active = [
            p
            for p in pods
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not p["metadata"].get("deletionTimestamp")
        ]
        terminating = [
            p
            for p in pods
            if p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
        failed = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
        rt_pods = self.api.rt("", "Pod")
        if is_finished(job):
            for p in active:
                self.client.delete(rt_pods, namespace, p["metadata"]["name"])
            return
        if spec.get("suspend"):
            for p in active:
                self.client.delete(rt_pods, namespace, p["metadata"]["name"])
            if not _true(status, "Suspended"):
                _set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", now)
                record_event(self.client, job, reason="Suspended", message="Job suspended", component="job-controller")
            status.pop("startTime", None)
            active = []
        else:
            if _true(status, "Suspended"):
                _set_condition(status, "Suspended", "False", "JobResumed", "Job resumed", now)
                record_event(self.client, job, reason="Resumed", message="Job resumed", component="job-controller")
            if not status.get("startTime"):
                status["startTime"] = now
            completions = spec.get("completions")
            parallelism = int(spec.get("parallelism", 1))
            backoff = int(spec.get("backoffLimit", 6))
            deadline = spec.get("activeDeadlineSeconds")
            started = datetime.fromisoformat(status["startTime"].replace("Z", "+00:00"))
            elapsed = (datetime.now(UTC) - started).total_seconds()
            fail_reason = None
            if failed > backoff:
                fail_reason = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
            elif deadline is not None and elapsed >= int(deadline):
                fail_reason = ("DeadlineExceeded", "Job was active longer than specified deadline")
            elif deadline is not None:
                self.requeue_after(key, int(deadline) - elapsed + 0.01)
            if fail_reason is not None:
                for p in active:
                    self.client.delete(rt_pods, namespace, p["metadata"]["name"])
                _set_condition(status, "FailureTarget", "True", fail_reason[0], fail_reason[1], now)
                _set_condition(status, "Failed", "True", fail_reason[0], fail_reason[1], now)
                record_event(
                    self.client,
                    job,
                    reason=fail_reason[0],
                    message=fail_reason[1],
                    type="Warning",
                    component="job-controller",
                )
                active = []
            else:
                done = succeeded >= completions if completions is not None else (succeeded > 0 and not active)
                if done:
                    for p in active:
                        self.client.delete(rt_pods, namespace, p["metadata"]["name"])
                    active = []
                    _set_condition(
                        status,
                        "SuccessCriteriaMet",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                        now,
                    )
                    _set_condition(
                        status,
                        "Complete",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                        now,
                    )
                    status["completionTime"] = now
                    record_event(
                        self.client, job, reason="Completed", message="Job completed", component="job-controller"
                    )
                else:
                    if completions is not None:
                        want = min(parallelism, completions - succeeded) - len(active)
                    else:
                        want = (parallelism - len(active)) if succeeded == 0 else 0
                    for i in range(max(0, want)):
                        index = None
                        if spec.get("completionMode") == "Indexed":
                            taken = {
                                (p["metadata"].get("annotations") or {}).get("batch.kubernetes.io/job-completion-index")
                                for p in pods
                                if (p.get("status") or {}).get("phase") != "Failed"
                            }
                            free = [str(n) for n in range(int(completions or 0)) if str(n) not in taken]
                            if i >= len(free):
                                break
                            index = free[i]
                        pod = self._new_pod(job, index)
                        try:
                            active.append(self.client.create(pod))
                        except ApiError:
                            break
        status["active"] = len(active)
        status["ready"] = sum(
            1
            for p in active
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        )
        status["succeeded"] = succeeded
        status["failed"] = failed
        status["terminating"] = len(terminating)
        status["uncountedTerminatedPods"] = {}
        for k in ("active", "succeeded", "failed"):
            if status[k] == 0 and k not in before:
                del status[k]
        if status != before:
            new = dict(job)
            new["status"] = status
            self.client.update_status(new)

    def _new_pod(self, job: Obj, index: str | None) -> Obj:
        meta = job["metadata"]
        template = clone((job.get("spec") or {}).get("template") or {})
        tmeta = template.get("metadata") or {}
        annotations = dict(tmeta.get("annotations") or {})
        labels = dict(tmeta.get("labels") or {})
        generate = f"{meta['name']}-"
        if index is not None:
            annotations["batch.kubernetes.io/job-completion-index"] = index
            labels["batch.kubernetes.io/job-completion-index"] = index
            generate = f"{meta['name']}-{index}-"
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": generate,
                "namespace": meta.get("namespace"),
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": template.get("spec") or {},
        }
