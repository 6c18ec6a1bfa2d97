"""What Kubeflow training jobs (``kubeflow.org/v1``) share: replica specs, ``spec.runPolicy``, conditions.

Kueue's ``KubeflowJob``: one pod set per replica type present, in the kind's order, named by the type in
lower case, with ``replicas`` (default 1) pods. Suspension and managedBy live in ``spec.runPolicy``. Finished
on the ``Succeeded`` or ``Failed`` condition; running on ``Running``. A kind is a subclass naming its
resource, its replica-specs field and the order of its replica types (see ``pytorchjob.py``, ``tfjob.py``).
"""

from __future__ import annotations

from typing import Any

from ..resources import PodSet, pod_requests
from .base import Adapter, Intake, RemotePhase, condition_true, dig, now_rfc3339

__all__ = ["TRAINING_OPERATOR", "KubeflowAdapter"]

Obj = dict[str, Any]

TRAINING_OPERATOR = "kubeflow.org/training-operator"


class KubeflowAdapter(Adapter):
    own_controller = TRAINING_OPERATOR
    suspend_at = ("spec", "runPolicy")
    #: ``spec.<field>``: the map of replica type to replica spec.
    replica_specs_field: str
    #: Replica types in Kueue's order (``OrderedReplicaTypes``).
    replica_types: tuple[str, ...]

    def managed_by(self, obj: Obj) -> str | None:
        value = dig(obj, "spec", "runPolicy", "managedBy")
        return str(value) if value else None

    def intake(self, obj: Obj, controller_name: str) -> Intake:
        return self.standard_intake(obj, controller_name, "spec.runPolicy.suspend", "spec.runPolicy.managedBy")

    def ordered_replicas(self, obj: Obj) -> list[tuple[str, Obj]]:
        specs = dig(obj, "spec", self.replica_specs_field) or {}
        return [(t, specs[t]) for t in self.replica_types if isinstance(specs.get(t), dict)]

    def pod_selector(self, obj: Obj) -> str | None:
        name = dig(obj, "metadata", "name")
        return f"training.kubeflow.org/job-name={name}" if name else None

    def pod_sets(self, obj: Obj) -> list[PodSet]:
        out = []
        for rtype, rspec in self.ordered_replicas(obj):
            template = rspec.get("template") or {}
            replicas = rspec.get("replicas")
            count = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1
            path = f"spec.{self.replica_specs_field}.{rtype}.template.spec"
            out.append(PodSet(rtype.lower(), count, pod_requests(template.get("spec") or {}, path), template))
        return out

    def remote_copy(self, obj: Obj, labels: dict[str, str], annotations: dict[str, str]) -> Obj:
        return self.suspended_copy(obj, labels, annotations, self.suspend_at)

    def phase(self, remote: Obj) -> RemotePhase:
        status = remote.get("status") or {}
        for ctype, ok in (("Succeeded", True), ("Failed", False)):
            c = condition_true(status, ctype)
            if c:
                return RemotePhase(True, ok, False, c.get("reason") or ctype, c.get("message") or "")
        running = condition_true(status, "Running") is not None and not self.suspended(remote)
        return RemotePhase(False, False, running)

    def activate_patch(self, local: Obj) -> Obj | None:
        return {"spec": {"runPolicy": {"suspend": False}}} if self.suspended(local) else None

    def failed_status(self, local: Obj, message: str, reason: str = "WorkerLost") -> Obj | None:
        now = now_rfc3339()
        status = dict(local.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") not in ("Running", "Failed")]
        conditions.append(
            {
                "type": "Failed",
                "status": "True",
                "reason": reason,
                "message": message[:1000],
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            }
        )
        status["conditions"] = conditions
        status.setdefault("replicaStatuses", {})
        status["completionTime"] = now
        return status
