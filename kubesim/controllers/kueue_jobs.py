"""Job integrations of the simulated Kueue: what jobframework needs to know about one kind of job.

Kueue's ``jobframework.GenericJob`` is the seam between the generic reconciler (Workload creation,
start on admission, stop on eviction, finish) and a job kind. :class:`JobIntegration` is that seam
here; :class:`BatchJobIntegration` implements it for ``batch/v1`` Jobs following
``pkg/controller/jobs/job``. JobSet, Kubeflow or Ray integrations are further subclasses registered
with the controller; nothing in the controller is specific to ``batch/v1``.
"""

from __future__ import annotations

import contextlib
import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..constants import JOB_CONTROLLER_NAME, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from ..kueue.tasstate import build_topology_request
from .kueue_model import STOPPING_ANNOTATION, PodSetInfo, PodSetMergeError

if TYPE_CHECKING:
    from .base import LocalClient

__all__ = ["BatchJobIntegration", "JobIntegration"]

Obj = dict[str, Any]

#: Labels the Job controller manages; Kueue keeps them out of the Workload (except job-name) and puts the
#: current values back when it restores a template.
_JOB_MANAGED_LABELS = (
    "job-name",
    "controller-uid",
    "batch.kubernetes.io/job-name",
    "batch.kubernetes.io/controller-uid",
)
_JOB_MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
_JOB_COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"


class JobIntegration(ABC):
    """One job kind as Kueue's jobframework sees it (``GenericJob`` plus the optional interfaces used)."""

    group: str
    version: str
    kind: str
    resource_key: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    # -- identity ------------------------------------------------------------------------------------

    def queue_name(self, job: Mapping[str, Any]) -> str:
        return str(((job.get("metadata") or {}).get("labels") or {}).get(QUEUE_NAME_LABEL) or "")

    def priority_class_label(self, job: Mapping[str, Any]) -> str:
        return str(((job.get("metadata") or {}).get("labels") or {}).get(PRIORITY_CLASS_LABEL) or "")

    def is_managed(self, job: Mapping[str, Any]) -> bool:
        """Whether Kueue manages this object at all (``manageJobsWithoutQueueName`` is off: a queue name
        is required)."""
        return bool(self.queue_name(job))

    # -- webhook -------------------------------------------------------------------------------------

    @abstractmethod
    def default(self, job: Obj) -> None:
        """The mutating webhook on CREATE (``Default``), applied in place."""

    # -- state ---------------------------------------------------------------------------------------

    @abstractmethod
    def is_suspended(self, job: Mapping[str, Any]) -> bool: ...

    @abstractmethod
    def is_active(self, job: Mapping[str, Any]) -> bool:
        """Whether the job still has running pods (quota can be released only once it has none)."""

    @abstractmethod
    def finished(self, job: Mapping[str, Any]) -> tuple[str, bool, bool]:
        """``(message, success, finished)``."""

    @abstractmethod
    def pod_sets(self, job: Mapping[str, Any]) -> list[Obj]:
        """The Workload ``spec.podSets`` for this job."""

    def pod_priority_class(self, pod_sets: Sequence[Mapping[str, Any]]) -> str:
        """``extractPriorityFromPodSets``: the first pod template naming a PriorityClass."""
        for ps in pod_sets:
            name = (((ps.get("template") or {}).get("spec")) or {}).get("priorityClassName")
            if name:
                return str(name)
        return ""

    def reclaimable_pods(self, job: Mapping[str, Any]) -> list[Obj]:
        """``JobWithReclaimablePods``; none unless the kind implements it."""
        return []

    # -- actions -------------------------------------------------------------------------------------

    @abstractmethod
    def run(self, client: LocalClient, job: Obj, infos: Sequence[PodSetInfo]) -> None:
        """Start the job with the admission's pod set info, in one write (``RunWithPodSetsInfo``)."""

    @abstractmethod
    def stop(self, client: LocalClient, job: Obj, infos: Sequence[PodSetInfo] | None) -> bool:
        """Suspend the job and restore its templates; returns whether it was running until now."""


class BatchJobIntegration(JobIntegration):
    """``batch/v1`` Job (``pkg/controller/jobs/job/job_controller.go``)."""

    group = "batch"
    version = "v1"
    kind = "Job"
    resource_key = "jobs.batch"

    def is_managed(self, job: Mapping[str, Any]) -> bool:
        """A queue name, and no ``spec.managedBy`` naming a controller other than the Job controller: a Job
        handed to another controller (a MultiKueue-style dispatcher) is not Kueue's to suspend or admit here."""
        managed_by = (job.get("spec") or {}).get("managedBy")
        if managed_by and managed_by != JOB_CONTROLLER_NAME:
            return False
        return super().is_managed(job)

    def default(self, job: Obj) -> None:
        """``ApplyDefaultForSuspend``: a queued Job is created suspended, so nothing runs before admission."""
        if self.is_managed(job) and not self.is_suspended(job):
            job.setdefault("spec", {})["suspend"] = True

    def is_suspended(self, job: Mapping[str, Any]) -> bool:
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        return bool((job.get("spec") or {}).get("suspend")) and annotations.get(STOPPING_ANNOTATION) != "true"

    def is_active(self, job: Mapping[str, Any]) -> bool:
        return int((job.get("status") or {}).get("active") or 0) != 0

    def finished(self, job: Mapping[str, Any]) -> tuple[str, bool, bool]:
        for c in (job.get("status") or {}).get("conditions") or ():
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
                return str(c.get("message") or ""), c.get("type") != "Failed", True
        return "", True, False

    @staticmethod
    def _pods_count(job: Mapping[str, Any]) -> int:
        spec = job.get("spec") or {}
        count = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
        completions = spec.get("completions")
        if completions is not None and int(completions) < count:
            count = int(completions)
        return count

    def pod_sets(self, job: Mapping[str, Any]) -> list[Obj]:
        """One pod set ``main`` of ``min(parallelism, completions)`` pods; the template without the Job
        controller's labels except ``batch.kubernetes.io/job-name``; the completion index as the TAS pod
        index label (Topology Aware Scheduling is on by default, so Kueue always records it)."""
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        labels = (template.get("metadata") or {}).get("labels")
        if isinstance(labels, dict):
            for key in _JOB_MANAGED_LABELS:
                if key != "batch.kubernetes.io/job-name":
                    labels.pop(key, None)
        annotations_of_pods = (template.get("metadata") or {}).get("annotations") or {}
        pod_set: Obj = {
            "name": "main",
            "count": self._pods_count(job),
            "template": template,
            "topologyRequest": build_topology_request(annotations_of_pods, "batch.kubernetes.io/job-completion-index"),
        }
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        if _JOB_MIN_PARALLELISM in annotations:
            with contextlib.suppress(ValueError):
                pod_set["minCount"] = int(annotations[_JOB_MIN_PARALLELISM])
        return [pod_set]

    def reclaimable_pods(self, job: Mapping[str, Any]) -> list[Obj]:
        """Pods whose quota a partly finished parallel Job no longer needs (``ReclaimablePods``, NonIndexed)."""
        spec = job.get("spec") or {}
        parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
        completions = int(spec["completions"]) if spec.get("completions") is not None else parallelism
        succeeded = int((job.get("status") or {}).get("succeeded") or 0)
        if parallelism <= 1 or succeeded <= 0 or spec.get("completionMode") == "Indexed":
            return []
        remaining = max(completions - succeeded, 0)
        if remaining >= parallelism:
            return []
        return [{"name": "main", "count": parallelism - remaining}]

    @staticmethod
    def _min_pods_count(job: Mapping[str, Any]) -> int | None:
        """``minPodsCount``: the ``kueue.x-k8s.io/job-min-parallelism`` annotation (``None``: absent or no integer)."""
        raw = ((job.get("metadata") or {}).get("annotations") or {}).get(_JOB_MIN_PARALLELISM)
        try:
            return int(raw) if raw is not None else None
        except ValueError:
            return None

    @staticmethod
    def _set_parallelism(job: Obj, count: int) -> None:
        """``spec.parallelism`` to the admitted (or, on stop, the original) count; ``spec.completions`` too when
        ``kueue.x-k8s.io/job-completions-equal-parallelism`` is true."""
        spec = job["spec"]
        spec["parallelism"] = count
        sync = str(((job.get("metadata") or {}).get("annotations") or {}).get(_JOB_COMPLETIONS_EQUAL_PARALLELISM))
        if sync.lower() in ("1", "t", "true"):
            spec["completions"] = count

    def run(self, client: LocalClient, job: Obj, infos: Sequence[PodSetInfo]) -> None:
        """``RunWithPodSetsInfo``: unsuspend with the admission merged in; a Job that allows partial admission
        runs with the admitted count as its parallelism (Kueue writes it whether or not it was reduced)."""
        if len(infos) != 1:
            raise PodSetMergeError(f"invalid podset infos: expecting 1 podset, got {len(infos)}")
        new = copy.deepcopy(job)
        new.pop("status", None)
        new["spec"]["suspend"] = False
        if self._min_pods_count(job) is not None:
            self._set_parallelism(new, infos[0].count)
        infos[0].merge_into(new["spec"].setdefault("template", {}))
        client.update(new)

    def stop(self, client: LocalClient, job: Obj, infos: Sequence[PodSetInfo] | None) -> bool:
        """``Job.Stop``: suspend (marked with the ``stopping`` annotation so a crash in between is noticed),
        clear ``status.startTime`` (the API server lets scheduling directives change only while it is unset),
        then restore the template from the Workload and drop the annotation. Three writes, as in Kueue."""
        stopped_now = False
        current = job
        if not self.is_suspended(current):
            new = copy.deepcopy(current)
            new.pop("status", None)
            new["spec"]["suspend"] = True
            new["metadata"].setdefault("annotations", {})[STOPPING_ANNOTATION] = "true"
            current = client.update(new)
            stopped_now = True
        if (current.get("status") or {}).get("startTime"):
            new = copy.deepcopy(current)
            new["status"].pop("startTime", None)
            current = client.update_status(new)
        new = copy.deepcopy(current)
        new.pop("status", None)
        changed = False
        if infos and self._min_pods_count(new) is not None and (new["spec"].get("parallelism") or 0) != infos[0].count:
            # ``RestorePodSetsInfo``: the count the Workload asked for, undoing a partial admission's parallelism.
            self._set_parallelism(new, infos[0].count)
            changed = True
        if infos:
            info = copy.deepcopy(infos[0])
            template = new["spec"].setdefault("template", {})
            current_labels = (template.get("metadata") or {}).get("labels") or {}
            for key in _JOB_MANAGED_LABELS:
                if key in current_labels:
                    info.labels[key] = current_labels[key]
            changed = info.restore_into(template)
        annotations = new["metadata"].get("annotations") or {}
        if STOPPING_ANNOTATION in annotations:
            del annotations[STOPPING_ANNOTATION]
            if not annotations:
                new["metadata"].pop("annotations", None)
            changed = True
        if changed:
            client.update(new)
        return stopped_now
