"""KubeRay RayJob (``ray.io/v1``): the RayCluster's pod sets, plus the submitter in ``K8sJobMode``.

Kueue's ``RayJob.PodSets``: head and worker groups of ``spec.rayClusterSpec`` (see ``raycluster.py``), then
a ``submitter`` pod set of one pod (``spec.submitterPodTemplate``, or KubeRay's default submitter) when
``spec.submissionMode`` is ``K8sJobMode`` (the CRD's default); in ``SidecarMode`` the submitter container
is added to the head instead. Taken on ``spec.managedBy`` or ``spec.suspend``. Finished when
``status.jobDeploymentStatus`` is ``Complete`` or ``Failed`` (succeeded when ``jobStatus`` is
``SUCCEEDED``); running while it is ``Running``.
"""

from __future__ import annotations

import copy as _copy
from typing import Any

from ..kube.client import Resource
from ..resources import PodSet, pod_requests
from .base import Adapter, Intake, RemotePhase, dig, now_rfc3339
from .raycluster import KUBERAY_OPERATOR, ray_cluster_pod_sets

__all__ = ["RayJobAdapter", "submitter_template"]

Obj = dict[str, Any]

#: KubeRay's default submitter container resources (``GetDefaultSubmitterContainer``).
SUBMITTER_RESOURCES: Obj = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}
SUBMITTER_CONTAINER = "ray-job-submitter"


def submission_mode(obj: Obj) -> str:
    return str(dig(obj, "spec", "submissionMode") or "K8sJobMode")


def submitter_template(obj: Obj) -> Obj:
    """``spec.submitterPodTemplate``, or KubeRay's default submitter pod (the head's image)."""
    given = dig(obj, "spec", "submitterPodTemplate")
    if isinstance(given, dict):
        return _copy.deepcopy(given)
    head = dig(obj, "spec", "rayClusterSpec", "headGroupSpec", "template", "spec", "containers") or [{}]
    return {
        "spec": {
            "containers": [
                {
                    "name": SUBMITTER_CONTAINER,
                    "image": head[0].get("image", "rayproject/ray"),
                    "resources": _copy.deepcopy(SUBMITTER_RESOURCES),
                }
            ],
            "restartPolicy": "Never",
        }
    }


class RayJobAdapter(Adapter):
    kind = "RayJob"
    resource = Resource("ray.io", "v1", "rayjobs", "RayJob")
    own_controller = KUBERAY_OPERATOR

    def intake(self, obj: Obj, controller_name: str) -> Intake:
        if dig(obj, "spec", "clusterSelector"):
            return Intake(False)  # runs on an existing RayCluster: not Kueue's to admit (``RayJob.Skip``)
        return self.standard_intake(obj, controller_name, "spec.suspend", "spec.managedBy")

    def pod_selector(self, obj: Obj) -> str | None:
        """The RayCluster's pods (KubeRay names it in the status); the submitter Job's are the Job controller's."""
        name = dig(obj, "status", "rayClusterName")
        return f"ray.io/cluster={name}" if name else None

    def pod_sets(self, obj: Obj) -> list[PodSet]:
        annotations = dig(obj, "metadata", "annotations") or {}
        mode = submission_mode(obj)
        extra = None
        if mode == "SidecarMode":
            extra = [{"name": SUBMITTER_CONTAINER, "resources": _copy.deepcopy(SUBMITTER_RESOURCES)}]
        spec = dig(obj, "spec", "rayClusterSpec") or {}
        out = ray_cluster_pod_sets(spec, annotations, "spec.rayClusterSpec", extra)
        if mode == "K8sJobMode":
            template = submitter_template(obj)
            out.append(
                PodSet(
                    "submitter", 1, pod_requests(template.get("spec") or {}, "spec.submitterPodTemplate.spec"), template
                )
            )
        return out

    def remote_copy(self, obj: Obj, labels: dict[str, str], annotations: dict[str, str]) -> Obj:
        return self.suspended_copy(obj, labels, annotations)

    def phase(self, remote: Obj) -> RemotePhase:
        status = remote.get("status") or {}
        deployment = status.get("jobDeploymentStatus")
        reason = str(status.get("reason") or deployment or "")
        message = str(status.get("message") or "")
        if deployment in ("Complete", "Failed"):
            ok = status.get("jobStatus") == "SUCCEEDED"
            return RemotePhase(True, ok, False, reason or ("Complete" if ok else "Failed"), message)
        return RemotePhase(False, False, deployment == "Running" and not dig(remote, "spec", "suspend"))

    def activate_patch(self, local: Obj) -> Obj | None:
        return {"spec": {"suspend": False}} if dig(local, "spec", "suspend") else None

    def failed_status(self, local: Obj, message: str, reason: str = "WorkerLost") -> Obj | None:
        status = dict(local.get("status") or {})
        status.update(
            jobDeploymentStatus="Failed",
            jobStatus="FAILED",
            reason=reason,
            message=message[:1000],
            endTime=now_rfc3339(),
        )
        return status
