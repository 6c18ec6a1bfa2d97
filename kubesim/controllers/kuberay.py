"""KubeRay, simulated: RayCluster pods and state, RayJob deployment through a cluster and a submitter Job.

* **RayCluster**: unsuspended, it gets a head pod (``<cluster>-head``) and the worker groups' pods
  (``<cluster>-<group>-worker-<i>``, ``replicas`` x ``numOfHosts``), which run until deleted (a pod that
  exits is replaced); ``status.state`` is ``ready`` once all of them run. Suspended: pods deleted,
  ``state: suspended``.
* **RayJob**: unsuspended, ``jobDeploymentStatus`` goes ``Initializing`` (its RayCluster
  ``<job>-raycluster`` is created), ``Running`` (the cluster is ready; in ``K8sJobMode`` the submitter Job
  ``<job>`` is created from ``submitterPodTemplate`` or KubeRay's default), then ``Complete`` with
  ``jobStatus: SUCCEEDED`` or ``Failed`` with ``FAILED`` as the submitter Job ends (other modes: after the
  RayJob's ``sim.dispatcher.io/run-seconds``). With ``shutdownAfterJobFinishes`` the cluster is deleted at
  the end. Suspended: cluster and submitter deleted, ``jobDeploymentStatus: Suspended``.
"""

from __future__ import annotations

import copy
from typing import Any

from ..api import now_rfc3339
from ..constants import DEFAULT_RUN_SECONDS, RUN_SECONDS
from .kueue_integrations import KUBERAY_OPERATOR, ray_submitter_template
from .operators import OwnerController, owner_ref, pod_terminal, true_condition

__all__ = ["KubeRayOperator"]

Obj = dict[str, Any]

PODS = "pods"
JOBS = "jobs.batch"
RAYCLUSTERS = "rayclusters.ray.io"
RAYJOBS = "rayjobs.ray.io"
#: Ray containers serve until stopped: a year, for the simulated kubelet.
FOREVER = "31536000"


class KubeRayOperator(OwnerController):
    name = "kuberay-operator"
    kinds = {RAYCLUSTERS: "RayCluster", RAYJOBS: "RayJob"}
    children = (PODS, JOBS)
    own_controller = KUBERAY_OPERATOR

    def sync(self, resource: str, obj: Obj) -> None:
        if resource == RAYCLUSTERS:
            self._cluster(obj)
        else:
            self._job(obj)

    # -- RayCluster ----------------------------------------------------------------------------------------

    def _cluster(self, rc: Obj) -> None:
        spec = rc.get("spec") or {}
        name = rc["metadata"]["name"]
        status = copy.deepcopy(rc.get("status") or {})
        pods = {p["metadata"]["name"]: p for p in self.owned(PODS, rc)}
        if spec.get("suspend"):
            for p in pods.values():
                self.delete_child(PODS, p)
            status.update(state="suspended", readyWorkerReplicas=0, availableWorkerReplicas=0)
            self.write_status(rc, status)
            return
        wanted: dict[str, tuple[Obj, str, str]] = {
            f"{name}-head": (spec.get("headGroupSpec") or {}, "head", "headgroup")
        }
        desired = 0
        for group in spec.get("workerGroupSpecs") or []:
            count = int(group.get("replicas", 1)) * max(1, int(group.get("numOfHosts", 1)))
            desired += count
            for i in range(count):
                wanted[f"{name}-{group.get('groupName', 'group')}-worker-{i}"] = (
                    group,
                    "worker",
                    str(group.get("groupName")),
                )
        for pod_name, pod in list(pods.items()):
            if pod_terminal(pod) or pod_name not in wanted:
                self.delete_child(PODS, pod)
                del pods[pod_name]
        for pod_name, (group, node_type, group_name) in wanted.items():
            if pod_name not in pods:
                self.create_child(self._pod(rc, group, node_type, group_name, pod_name))
        running = [p for p in pods.values() if (p.get("status") or {}).get("phase") == "Running"]
        workers_ready = sum(
            1 for p in running if (p["metadata"].get("labels") or {}).get("ray.io/node-type") == "worker"
        )
        status.update(
            desiredWorkerReplicas=desired,
            readyWorkerReplicas=workers_ready,
            availableWorkerReplicas=workers_ready,
            observedGeneration=rc["metadata"].get("generation", 1),
        )
        head = pods.get(f"{name}-head")
        if head is not None:
            status["head"] = {"podName": head["metadata"]["name"], "podIP": (head.get("status") or {}).get("podIP", "")}
        if len(running) == len(wanted):
            if status.get("state") != "ready":
                status["state"] = "ready"
                status["lastUpdateTime"] = now_rfc3339()
        elif status.get("state") == "suspended":
            status.pop("state", None)
        self.write_status(rc, status)

    def _pod(self, rc: Obj, group: Obj, node_type: str, group_name: str, pod_name: str) -> Obj:
        meta = rc["metadata"]
        template = copy.deepcopy(group.get("template") or {})
        tmeta = template.get("metadata") or {}
        annotations = {RUN_SECONDS: FOREVER, **(tmeta.get("annotations") or {})}
        spec = template.get("spec") or {}
        spec.setdefault("restartPolicy", "Never")
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "namespace": meta.get("namespace"),
                "labels": {
                    **(tmeta.get("labels") or {}),
                    "ray.io/cluster": meta["name"],
                    "ray.io/node-type": node_type,
                    "ray.io/group": group_name,
                    "app.kubernetes.io/created-by": "kuberay-operator",
                },
                "annotations": annotations,
                "ownerReferences": [owner_ref(rc)],
            },
            "spec": spec,
        }

    # -- RayJob --------------------------------------------------------------------------------------------

    def _job(self, rj: Obj) -> None:
        spec = rj.get("spec") or {}
        meta = rj["metadata"]
        name = meta["name"]
        status = copy.deepcopy(rj.get("status") or {})
        deployment = status.get("jobDeploymentStatus") or ""
        clusters = self.owned(RAYCLUSTERS, rj)
        submitters = self.owned(JOBS, rj)
        if deployment in ("Complete", "Failed"):
            if spec.get("shutdownAfterJobFinishes"):
                for c in clusters:
                    self.delete_child(RAYCLUSTERS, c)
            return
        if spec.get("suspend"):
            for c in clusters:
                self.delete_child(RAYCLUSTERS, c)
            for j in submitters:
                self.delete_child(JOBS, j)
            status["jobDeploymentStatus"] = "Suspended"
            for key in ("rayClusterName", "jobStatus", "rayClusterStatus"):
                status.pop(key, None)
            self.write_status(rj, status)
            return
        cluster_name = f"{name}-raycluster"
        cluster = next((c for c in clusters if c["metadata"]["name"] == cluster_name), None)
        if deployment in ("", "New", "Suspended"):
            if cluster is None:
                self.create_child(
                    {
                        "apiVersion": "ray.io/v1",
                        "kind": "RayCluster",
                        "metadata": {
                            "name": cluster_name,
                            "namespace": meta.get("namespace"),
                            "labels": {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": name},
                            "ownerReferences": [owner_ref(rj)],
                        },
                        "spec": copy.deepcopy(spec.get("rayClusterSpec") or {}),
                    }
                )
            status.update(
                jobDeploymentStatus="Initializing",
                rayClusterName=cluster_name,
                jobId=f"{name}-{meta['uid'][:8]}",
                startTime=now_rfc3339(),
            )
            self.write_status(rj, status)
            return
        mode = str(spec.get("submissionMode") or "K8sJobMode")
        if deployment == "Initializing":
            if cluster is None or (cluster.get("status") or {}).get("state") != "ready":
                return  # woken by the cluster's status change
            if mode == "K8sJobMode" and not submitters:
                self.create_child(self._submitter(rj))
            status.update(jobDeploymentStatus="Running", jobStatus="RUNNING")
            status["rayClusterStatus"] = {"state": "ready"}
            self.write_status(rj, status)
            if mode != "K8sJobMode":
                self.requeue_after((RAYJOBS, meta.get("namespace", ""), name), self._run_seconds(rj))
            return
        if deployment != "Running":
            return
        if mode == "K8sJobMode":
            submitter = submitters[0] if submitters else None
            if submitter is None:
                return
            sstatus = submitter.get("status") or {}
            if true_condition(sstatus, "Complete"):
                self._finish(rj, status, True, "")
            elif true_condition(sstatus, "Failed"):
                self._finish(rj, status, False, "the submitter Job failed")
            return
        started = status.get("startTime")
        if started and _elapsed(started) >= self._run_seconds(rj):
            self._finish(rj, status, True, "")
        else:
            self.requeue_after((RAYJOBS, meta.get("namespace", ""), name), 0.5)

    def _finish(self, rj: Obj, status: Obj, ok: bool, message: str) -> None:
        status.update(
            jobDeploymentStatus="Complete" if ok else "Failed",
            jobStatus="SUCCEEDED" if ok else "FAILED",
            endTime=now_rfc3339(),
        )
        if not ok:
            status.update(reason="AppFailed", message=message)
        self.write_status(rj, status)
        if (rj.get("spec") or {}).get("shutdownAfterJobFinishes"):
            for c in self.owned(RAYCLUSTERS, rj):
                self.delete_child(RAYCLUSTERS, c)

    def _run_seconds(self, rj: Obj) -> float:
        try:
            return float((rj["metadata"].get("annotations") or {}).get(RUN_SECONDS, DEFAULT_RUN_SECONDS))
        except ValueError:
            return DEFAULT_RUN_SECONDS

    def _submitter(self, rj: Obj) -> Obj:
        meta = rj["metadata"]
        template = ray_submitter_template(rj)
        tmeta = template.setdefault("metadata", {})
        run = (meta.get("annotations") or {}).get(RUN_SECONDS)
        if run is not None:
            tmeta["annotations"] = {RUN_SECONDS: run, **(tmeta.get("annotations") or {})}
        template.setdefault("spec", {}).setdefault("restartPolicy", "Never")
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "labels": {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": meta["name"]},
                "ownerReferences": [owner_ref(rj)],
            },
            "spec": {"backoffLimit": 0, "template": template},
        }


def _elapsed(stamp: str) -> float:
    from datetime import UTC, datetime

    try:
        started = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return (datetime.now(UTC) - started).total_seconds()
