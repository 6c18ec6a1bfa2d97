"""Job integrations of the simulated Kueue beyond ``batch/v1``: JobSet, Kubeflow, KubeRay.

Each follows Kueue's ``pkg/controller/jobs/<kind>``: the pod sets it builds for the Workload (one per
replicated job, per replica type, head / worker groups / submitter), how it is suspended (``spec.suspend``,
or ``spec.runPolicy.suspend`` for Kubeflow), when it is active and when finished, and how the admission's
pod set info is merged into (and restored from) its pod templates. An object whose managedBy names a
controller other than the kind's own operator is not Kueue's on this cluster (``CanDefaultManagedBy``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..kueue.tasstate import build_topology_request
from .kueue_jobs import JobIntegration
from .kueue_model import PodSetInfo, PodSetMergeError

if TYPE_CHECKING:
    from .base import LocalClient

__all__ = [
    "JOBSET_CONTROLLER",
    "KUBERAY_OPERATOR",
    "TRAINING_OPERATOR",
    "JobSetIntegration",
    "KubeflowIntegration",
    "RayClusterIntegration",
    "RayJobIntegration",
    "all_integrations",
    "ray_submitter_template",
]

Obj = dict[str, Any]

JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"
TRAINING_OPERATOR = "kubeflow.org/training-operator"
KUBERAY_OPERATOR = "ray.io/kuberay-operator"

#: Replica types in Kueue's order, per Kubeflow kind: (kind, replica-specs field, types).
KUBEFLOW_KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "PyTorchJob": ("pytorchReplicaSpecs", ("Master", "Worker")),
    "TFJob": ("tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator")),
}

SUBMITTER_RESOURCES: Obj = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}

#: A place in an object that holds a pod template: how to get it (creating parents when asked).
TemplateRef = Callable[[Obj, bool], Obj | None]


def _get(obj: Any, *keys: str | int) -> Any:
    cur = obj
    for k in keys:
        if isinstance(k, int):
            if not isinstance(cur, list) or k >= len(cur):
                return None
            cur = cur[k]
        else:
            if not isinstance(cur, dict):
                return None
            cur = cur.get(k)
    return cur


def _true(obj: Mapping[str, Any], ctype: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype and c.get("status") == "True":
            return dict(c)
    return None


def _int(value: Any, default: int) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else default


class TemplatesIntegration(JobIntegration):
    """A kind whose pod sets are pod templates at fixed places in the object."""

    own_controller: str = ""

    # -- per kind --------------------------------------------------------------------------------------

    def managed_by(self, job: Mapping[str, Any]) -> str | None:
        return _get(job, "spec", "managedBy")  # type: ignore[no-any-return]

    def suspend_path(self) -> tuple[str, ...]:
        return ("spec", "suspend")

    def templates(self, job: Obj, create: bool = False) -> list[tuple[str, int, Obj | None]]:
        """``(pod set name, count, template)`` in Kueue's order; ``create`` makes missing templates."""
        raise NotImplementedError

    # -- JobIntegration ------------------------------------------------------------------------------------

    def is_managed(self, job: Mapping[str, Any]) -> bool:
        managed_by = self.managed_by(job)
        if managed_by and managed_by != self.own_controller:
            return False
        return super().is_managed(job)

    def default(self, job: Obj) -> None:
        if self.is_managed(job) and not self.is_suspended(job):
            self._set_suspend(job, True)

    def _set_suspend(self, job: Obj, value: bool) -> None:
        *parents, last = self.suspend_path()
        cur = job
        for k in parents:
            cur = cur.setdefault(k, {})
        cur[last] = value

    def is_suspended(self, job: Mapping[str, Any]) -> bool:
        return bool(_get(job, *self.suspend_path()))

    def pod_sets(self, job: Mapping[str, Any]) -> list[Obj]:
        out: list[Obj] = []
        for name, count, template in self.templates(copy.deepcopy(dict(job))):
            pod_set: Obj = {"name": name, "count": count, "template": copy.deepcopy(template or {})}
            annotations = ((template or {}).get("metadata") or {}).get("annotations") or {}
            request = build_topology_request(annotations)
            if request is not None:
                pod_set["topologyRequest"] = request
            out.append(pod_set)
        return out

    def run(self, client: LocalClient, job: Obj, infos: Sequence[PodSetInfo]) -> None:
        new = copy.deepcopy(job)
        new.pop("status", None)
        templates = self.templates(new, create=True)
        if len(infos) != len(templates):
            raise PodSetMergeError(f"invalid podset infos: expecting {len(templates)} podsets, got {len(infos)}")
        self._set_suspend(new, False)
        for (_name, _count, template), info in zip(templates, infos, strict=True):
            if template is not None:
                info.merge_into(template)
        client.update(new)

    def stop(self, client: LocalClient, job: Obj, infos: Sequence[PodSetInfo] | None) -> bool:
        was_running = not self.is_suspended(job)
        new = copy.deepcopy(job)
        new.pop("status", None)
        self._set_suspend(new, True)
        changed = was_running
        if infos:
            templates = self.templates(new)
            if len(templates) == len(infos):
                for (_name, _count, template), info in zip(templates, infos, strict=True):
                    if template is not None:
                        changed = info.restore_into(template) or changed
        if changed:
            client.update(new)
        return was_running


class JobSetIntegration(TemplatesIntegration):
    """``pkg/controller/jobs/jobset``: one pod set per replicated job, ``replicas`` x pods per Job."""

    group = "jobset.x-k8s.io"
    version = "v1alpha2"
    kind = "JobSet"
    resource_key = "jobsets.jobset.x-k8s.io"
    own_controller = JOBSET_CONTROLLER

    def templates(self, job: Obj, create: bool = False) -> list[tuple[str, int, Obj | None]]:
        out: list[tuple[str, int, Obj | None]] = []
        for rj in _get(job, "spec", "replicatedJobs") or []:
            spec = _get(rj, "template", "spec") or {}
            parallelism = _int(spec.get("parallelism"), 1)
            per_job = min(parallelism, _int(spec.get("completions"), parallelism))
            template = spec.get("template")
            if template is None and create:
                template = rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
            out.append((str(rj.get("name", "")).lower(), _int(rj.get("replicas"), 1) * per_job, template))
        return out

    def is_active(self, job: Mapping[str, Any]) -> bool:
        return any(_int(r.get("active"), 0) > 0 for r in _get(job, "status", "replicatedJobsStatus") or ())

    def finished(self, job: Mapping[str, Any]) -> tuple[str, bool, bool]:
        for ctype, ok in (("Completed", True), ("Failed", False)):
            c = _true(job, ctype)
            if c:
                return str(c.get("message") or ""), ok, True
        return "", False, False


class KubeflowIntegration(TemplatesIntegration):
    """``pkg/controller/jobs/kubeflow``: one pod set per replica type present, ``replicas`` pods each."""

    group = "kubeflow.org"
    version = "v1"
    own_controller = TRAINING_OPERATOR

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.resource_key = f"{kind.lower()}s.kubeflow.org"
        self.specs_field, self.types = KUBEFLOW_KINDS[kind]

    def managed_by(self, job: Mapping[str, Any]) -> str | None:
        return _get(job, "spec", "runPolicy", "managedBy")  # type: ignore[no-any-return]

    def suspend_path(self) -> tuple[str, ...]:
        return ("spec", "runPolicy", "suspend")

    def templates(self, job: Obj, create: bool = False) -> list[tuple[str, int, Obj | None]]:
        specs = _get(job, "spec", self.specs_field) or {}
        out: list[tuple[str, int, Obj | None]] = []
        for rtype in self.types:
            rspec = specs.get(rtype)
            if not isinstance(rspec, dict):
                continue
            template = rspec.get("template")
            if template is None and create:
                template = rspec.setdefault("template", {})
            out.append((rtype.lower(), _int(rspec.get("replicas"), 1), template))
        return out

    def is_active(self, job: Mapping[str, Any]) -> bool:
        statuses = _get(job, "status", "replicaStatuses") or {}
        return any(_int((s or {}).get("active"), 0) != 0 for s in statuses.values())

    def finished(self, job: Mapping[str, Any]) -> tuple[str, bool, bool]:
        for c in (job.get("status") or {}).get("conditions") or ():
            if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True":
                return str(c.get("message") or ""), c.get("type") != "Failed", True
        return "", True, False


def _ray_cluster_templates(spec: Obj, create: bool) -> list[tuple[str, int, Obj | None]]:
    head = _get(spec, "headGroupSpec", "template")
    if head is None and create:
        head = spec.setdefault("headGroupSpec", {}).setdefault("template", {})
    out: list[tuple[str, int, Obj | None]] = [("head", 1, head)]
    for group in spec.get("workerGroupSpecs") or []:
        count = _int(group.get("replicas"), 1)
        hosts = _int(group.get("numOfHosts"), 1)
        template = group.get("template")
        if template is None and create:
            template = group.setdefault("template", {})
        out.append((str(group.get("groupName", "")).lower(), count * hosts if hosts > 1 else count, template))
    return out


def ray_submitter_template(job: Mapping[str, Any]) -> Obj:
    """KubeRay's default submitter pod (``GetDefaultSubmitterTemplate``): the head's image, default resources."""
    given = _get(job, "spec", "submitterPodTemplate")
    if isinstance(given, dict):
        return copy.deepcopy(given)
    image = _get(job, "spec", "rayClusterSpec", "headGroupSpec", "template", "spec", "containers", 0, "image")
    return {
        "spec": {
            "containers": [
                {
                    "name": "ray-job-submitter",
                    "image": image or "rayproject/ray",
                    "resources": copy.deepcopy(SUBMITTER_RESOURCES),
                }
            ],
            "restartPolicy": "Never",
        }
    }


class RayClusterIntegration(TemplatesIntegration):
    """``pkg/controller/jobs/raycluster``: head and worker groups; never finished."""

    group = "ray.io"
    version = "v1"
    kind = "RayCluster"
    resource_key = "rayclusters.ray.io"
    own_controller = KUBERAY_OPERATOR

    def templates(self, job: Obj, create: bool = False) -> list[tuple[str, int, Obj | None]]:
        return _ray_cluster_templates(job.setdefault("spec", {}), create)

    def is_active(self, job: Mapping[str, Any]) -> bool:
        return bool(_get(job, "status", "state") == "ready")

    def finished(self, job: Mapping[str, Any]) -> tuple[str, bool, bool]:
        return str(_get(job, "status", "reason") or ""), _get(job, "status", "state") != "failed", False


class RayJobIntegration(TemplatesIntegration):
    """``pkg/controller/jobs/rayjob``: the cluster's pod sets plus the ``submitter`` in K8sJobMode."""

    group = "ray.io"
    version = "v1"
    kind = "RayJob"
    resource_key = "rayjobs.ray.io"
    own_controller = KUBERAY_OPERATOR

    def is_managed(self, job: Mapping[str, Any]) -> bool:
        if _get(job, "spec", "clusterSelector"):
            return False  # ``Skip``: it runs on an existing RayCluster
        return super().is_managed(job)

    def templates(self, job: Obj, create: bool = False) -> list[tuple[str, int, Obj | None]]:
        spec = job.setdefault("spec", {})
        out = _ray_cluster_templates(spec.setdefault("rayClusterSpec", {}), create)
        if str(spec.get("submissionMode") or "K8sJobMode") == "K8sJobMode":
            template = spec.get("submitterPodTemplate")
            if template is None:
                template = ray_submitter_template(job)
                if create:
                    spec["submitterPodTemplate"] = template
            out.append(("submitter", 1, template))
        return out

    def is_active(self, job: Mapping[str, Any]) -> bool:
        return _get(job, "status", "jobDeploymentStatus") not in (None, "", "New", "Suspended")

    def finished(self, job: Mapping[str, Any]) -> tuple[str, bool, bool]:
        status = job.get("status") or {}
        done = status.get("jobDeploymentStatus") in ("Complete", "Failed")
        return str(status.get("message") or ""), status.get("jobStatus") == "SUCCEEDED", done


def all_integrations() -> list[JobIntegration]:
    """Every integration besides ``batch/v1`` Job."""
    return [
        JobSetIntegration(),
        KubeflowIntegration("PyTorchJob"),
        KubeflowIntegration("TFJob"),
        RayJobIntegration(),
        RayClusterIntegration(),
    ]
