"""KubeRay RayCluster (``ray.io/v1``): pod sets ``head`` and one per worker group.

Kueue's ``raycluster.BuildPodSets``: the head (1 pod; KubeRay's autoscaler sidecar added when in-tree
autoscaling is on; the Redis clean-up Job's requests folded into the Ray container when GCS fault
tolerance is on), then each worker group, named by its group name in lower case, with ``replicas``
(default 1) times ``numOfHosts`` pods. Taken on ``spec.managedBy`` or ``spec.suspend``. A RayCluster never
finishes: it is running once ``status.state`` is ``ready`` and stays placed until it is deleted.
"""

from __future__ import annotations

import copy as _copy
from typing import Any

from ..kube.client import Resource
from ..quantity import parse_quantity
from ..resources import PodSet, pod_requests
from .base import Adapter, Intake, RemotePhase, dig, now_rfc3339

__all__ = ["KUBERAY_OPERATOR", "RayClusterAdapter", "ray_cluster_pod_sets"]

Obj = dict[str, Any]

KUBERAY_OPERATOR = "ray.io/kuberay-operator"
FT_ANNOTATION = "ray.io/ft-enabled"

#: KubeRay's autoscaler sidecar when ``autoscalerOptions.resources`` is unset.
AUTOSCALER_RESOURCES: Obj = {
    "requests": {"cpu": "500m", "memory": "512Mi"},
    "limits": {"cpu": "500m", "memory": "512Mi"},
}
#: KubeRay's Redis clean-up Job (GCS fault tolerance).
REDIS_CLEANUP_REQUESTS = {"cpu": "200m", "memory": "256Mi"}


def _int(value: Any, default: int) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else default


def _gcs_fault_tolerance(spec: Obj, annotations: dict[str, str]) -> bool:
    return annotations.get(FT_ANNOTATION) == "true" or isinstance(spec.get("gcsFaultToleranceOptions"), dict)


def _merge_keep_max(requests: dict[str, Any], extra: dict[str, str]) -> dict[str, Any]:
    out = dict(requests)
    for name, value in extra.items():
        have = out.get(name)
        try:
            if have is None or parse_quantity(have) < parse_quantity(value):
                out[name] = value
        except Exception:  # an unparsable user value is reported by pod_requests with its path
            pass
    return out


def _head_template(spec: Obj, annotations: dict[str, str]) -> Obj:
    template = _copy.deepcopy(dig(spec, "headGroupSpec", "template") or {})
    pod = template.setdefault("spec", {})
    containers = pod.setdefault("containers", [])
    if _gcs_fault_tolerance(spec, annotations) and containers:
        resources = containers[0].setdefault("resources", {})
        resources["requests"] = _merge_keep_max(resources.get("requests") or {}, REDIS_CLEANUP_REQUESTS)
    if spec.get("enableInTreeAutoscaling") is True:
        resources = dig(spec, "autoscalerOptions", "resources")
        containers.append(
            {
                "name": "autoscaler",
                "resources": _copy.deepcopy(resources if isinstance(resources, dict) else AUTOSCALER_RESOURCES),
            }
        )
    return template


def ray_cluster_pod_sets(
    spec: Obj, annotations: dict[str, str], path: str, head_extra: list[Obj] | None = None
) -> list[PodSet]:
    """Kueue's ``BuildPodSets`` for a RayClusterSpec at ``path``; ``head_extra`` are containers added to the head."""
    head = _head_template(spec, annotations)
    if head_extra:
        head["spec"]["containers"].extend(_copy.deepcopy(head_extra))
    out = [PodSet("head", 1, pod_requests(head.get("spec") or {}, f"{path}.headGroupSpec.template.spec"), head)]
    for i, group in enumerate(spec.get("workerGroupSpecs") or []):
        template = group.get("template") or {}
        count = _int(group.get("replicas"), 1)
        hosts = _int(group.get("numOfHosts"), 1)
        if hosts > 1:
            count *= hosts
        requests = pod_requests(template.get("spec") or {}, f"{path}.workerGroupSpecs[{i}].template.spec")
        out.append(PodSet(str(group.get("groupName", f"group-{i}")).lower(), count, requests, template))
    return out


def ray_phase_running(state: Any) -> bool:
    return bool(state == "ready")


class RayClusterAdapter(Adapter):
    kind = "RayCluster"
    resource = Resource("ray.io", "v1", "rayclusters", "RayCluster")
    own_controller = KUBERAY_OPERATOR

    def intake(self, obj: Obj, controller_name: str) -> Intake:
        return self.standard_intake(obj, controller_name, "spec.suspend", "spec.managedBy")

    def pod_selector(self, obj: Obj) -> str | None:
        name = dig(obj, "metadata", "name")
        return f"ray.io/cluster={name}" if name else None

    def pod_sets(self, obj: Obj) -> list[PodSet]:
        annotations = dig(obj, "metadata", "annotations") or {}
        return ray_cluster_pod_sets(obj.get("spec") or {}, annotations, "spec")

    def remote_copy(self, obj: Obj, labels: dict[str, str], annotations: dict[str, str]) -> Obj:
        return self.suspended_copy(obj, labels, annotations)

    def phase(self, remote: Obj) -> RemotePhase:
        state = dig(remote, "status", "state")
        running = ray_phase_running(state) and not dig(remote, "spec", "suspend")
        return RemotePhase(False, False, running, str(state or ""), str(dig(remote, "status", "reason") or ""))

    def activate_patch(self, local: Obj) -> Obj | None:
        return {"spec": {"suspend": False}} if dig(local, "spec", "suspend") else None

    def failed_status(self, local: Obj, message: str, reason: str = "WorkerLost") -> Obj | None:
        status = dict(local.get("status") or {})
        status.update(state="failed", reason=f"{reason}: {message}"[:1000], lastUpdateTime=now_rfc3339())
        return status
