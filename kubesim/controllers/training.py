"""The Kubeflow training operator, simulated: one pod per replica of a PyTorchJob or TFJob.

An unsuspended job gets a pod per replica (``<job>-<type>-<index>``, labelled ``training.kubeflow.org/*``,
owned by the job). Conditions as the operator sets them: ``Created``, then ``Running`` once every pod runs,
then ``Succeeded`` (the master or chief succeeded, or every worker when there is none) or ``Failed`` (a pod
failed; no restarts are simulated). ``status.replicaStatuses`` counts active, succeeded and failed pods per
replica type. A suspended job has its pods deleted and ``Suspended`` set; finishing deletes running pods
(``cleanPodPolicy: Running``).

Its validating webhook rejects a ``spec.runPolicy.managedBy`` other than its own or MultiKueue's, as the
operator's webhook does.
"""

from __future__ import annotations

import copy
from typing import Any

from ..api import Admission, Api, now_rfc3339
from ..constants import RUN_SECONDS
from ..errors import ApiError, Cause, go_repr
from .kueue_integrations import KUBEFLOW_KINDS, TRAINING_OPERATOR
from .operators import OwnerController, owner_ref, pod_terminal, set_condition, true_condition

__all__ = ["TrainingOperator"]

Obj = dict[str, Any]

PODS = "pods"
SUPPORTED_MANAGED_BY = (TRAINING_OPERATOR, "kueue.x-k8s.io/multikueue")
#: Replica types whose success is the job's success, per kind (else: every worker).
LEADERS = {"PyTorchJob": ("Master",), "TFJob": ("Chief", "Master")}


class TrainingOperator(OwnerController):
    name = "training-operator"
    kinds = {f"{k.lower()}s.kubeflow.org": k for k in KUBEFLOW_KINDS}
    children = (PODS,)
    own_controller = TRAINING_OPERATOR

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        for key in self.kinds:
            api.add_validating_hook(key, self._validate)

    def _validate(self, adm: Admission) -> None:
        if adm.subresource is not None or adm.operation not in ("CREATE", "UPDATE"):
            return
        value = ((adm.obj.get("spec") or {}).get("runPolicy") or {}).get("managedBy")
        if value is None or value in SUPPORTED_MANAGED_BY:
            return
        kind = adm.obj.get("kind", "")
        name = (adm.obj.get("metadata") or {}).get("name", "")
        supported = ", ".join(go_repr(v) for v in SUPPORTED_MANAGED_BY)
        cause = Cause(
            "spec.runPolicy.managedBy",
            f"Unsupported value: {go_repr(value)}: supported values: {supported}",
            "FieldValueNotSupported",
        )
        raise ApiError(
            422,
            "Invalid",
            f'admission webhook "validate-kubeflow-org-v1-{kind.lower()}.kubeflow.org" denied the request: '
            f'{kind}.kubeflow.org "{name}" is invalid: {cause.render()}',
            {"name": name, "group": "kubeflow.org", "kind": kind, "causes": [cause.to_dict()]},
        )

    def managed_by(self, obj: Obj) -> str | None:
        value = ((obj.get("spec") or {}).get("runPolicy") or {}).get("managedBy")
        return str(value) if value else None

    def sync(self, resource: str, job: Obj) -> None:
        kind = self.kinds[resource]
        specs_field, types = KUBEFLOW_KINDS[kind]
        spec = job.get("spec") or {}
        replicas = {t: s for t, s in (spec.get(specs_field) or {}).items() if t in types and isinstance(s, dict)}
        name = job["metadata"]["name"]
        ns = job["metadata"].get("namespace", "")
        status = copy.deepcopy(job.get("status") or {})
        pods = {p["metadata"]["name"]: p for p in self.owned(PODS, job)}
        finished = true_condition(status, "Succeeded") or true_condition(status, "Failed")
        suspended = bool((spec.get("runPolicy") or {}).get("suspend"))
        if not any(c.get("type") == "Created" for c in status.get("conditions") or ()):
            set_condition(status, "Created", "True", f"{kind}Created", f"{kind} {name} is created.", update_time=True)
        if finished or suspended:
            for p in list(pods.values()):
                if not pod_terminal(p):
                    self.delete_child(PODS, p)
                    del pods[p["metadata"]["name"]]
        if suspended and not finished:
            set_condition(
                status, "Running", "False", f"{kind}Suspended", f"{kind} {name} is suspended.", update_time=True
            )
            set_condition(
                status, "Suspended", "True", f"{kind}Suspended", f"{kind} {name} is suspended.", update_time=True
            )
            status.pop("startTime", None)
        elif not finished:
            if true_condition(status, "Suspended"):
                set_condition(
                    status, "Suspended", "False", f"{kind}Resumed", f"{kind} {name} is resumed.", update_time=True
                )
            status.setdefault("startTime", now_rfc3339())
            for rtype, rspec in replicas.items():
                for i in range(int(rspec.get("replicas", 1))):
                    pod_name = f"{name}-{rtype.lower()}-{i}"
                    if pod_name not in pods:
                        self.create_child(self._pod(job, kind, rtype, rspec, i, pod_name))
            pods = {p["metadata"]["name"]: p for p in self.owned(PODS, job)}
        counts: dict[str, Obj] = {}
        for rtype in replicas:
            mine = [p for p in pods.values() if (p["metadata"].get("labels") or {}).get(_REPLICA_TYPE) == rtype.lower()]
            phases = [(p.get("status") or {}).get("phase") for p in mine]
            counts[rtype] = {
                "active": sum(1 for ph in phases if ph not in ("Succeeded", "Failed")),
                "succeeded": phases.count("Succeeded"),
                "failed": phases.count("Failed"),
            }
        status["replicaStatuses"] = counts
        if not finished and not suspended:
            expected = sum(int(s.get("replicas", 1)) for s in replicas.values())
            running = [p for p in pods.values() if (p.get("status") or {}).get("phase") == "Running"]
            leaders = [t for t in LEADERS[kind] if t in replicas]
            if any(c["failed"] for c in counts.values()):
                set_condition(
                    status, "Running", "False", f"{kind}Failed", f"{kind} {name} is failed.", update_time=True
                )
                set_condition(
                    status,
                    "Failed",
                    "True",
                    f"{kind}Failed",
                    f"{kind} {ns}/{name} has failed because a replica failed.",
                    update_time=True,
                )
                finished = True
            elif (leaders and all(counts[t]["succeeded"] >= int(replicas[t].get("replicas", 1)) for t in leaders)) or (
                not leaders
                and "Worker" in replicas
                and counts["Worker"]["succeeded"] >= int(replicas["Worker"].get("replicas", 1))
            ):
                set_condition(
                    status, "Running", "False", f"{kind}Succeeded", f"{kind} {name} is finished.", update_time=True
                )
                set_condition(
                    status,
                    "Succeeded",
                    "True",
                    f"{kind}Succeeded",
                    f"{kind} {ns}/{name} successfully completed.",
                    update_time=True,
                )
                finished = True
            elif expected and len(running) == expected:
                set_condition(
                    status, "Running", "True", f"{kind}Running", f"{kind} {ns}/{name} is running.", update_time=True
                )
            if finished:
                status["completionTime"] = now_rfc3339()
                for p in pods.values():
                    if not pod_terminal(p):
                        self.delete_child(PODS, p)
        self.write_status(job, status)

    def _pod(self, job: Obj, kind: str, rtype: str, rspec: Obj, index: int, name: str) -> Obj:
        meta = job["metadata"]
        template = copy.deepcopy(rspec.get("template") or {})
        tmeta = template.get("metadata") or {}
        labels = {
            **(tmeta.get("labels") or {}),
            "training.kubeflow.org/job-name": meta["name"],
            "training.kubeflow.org/operator-name": kind.lower().replace("job", "job-controller"),
            _REPLICA_TYPE: rtype.lower(),
            "training.kubeflow.org/replica-index": str(index),
        }
        annotations = dict(tmeta.get("annotations") or {})
        run = (meta.get("annotations") or {}).get(RUN_SECONDS)
        if run is not None:
            annotations.setdefault(RUN_SECONDS, run)
        pod_spec = template.get("spec") or {}
        pod_spec["restartPolicy"] = "Never"  # restarts are not simulated
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": meta.get("namespace"),
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [owner_ref(job)],
            },
            "spec": pod_spec,
        }


_REPLICA_TYPE = "training.kubeflow.org/replica-type"
