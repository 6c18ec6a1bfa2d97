"""The JobSet controller, simulated: child Jobs per replicated job, status and terminal conditions.

An unsuspended JobSet gets ``replicas`` Jobs per replicated job (``<jobset>-<replicatedJob>-<index>``,
labelled as the real controller labels them, owned by the JobSet); the Job controller runs them. Its
``status.replicatedJobsStatus`` counts them (ready, succeeded, failed, active, suspended); all Jobs
complete gives ``Completed`` (``terminalState: Completed``), any Job failed gives ``Failed`` (the default
failure policy: no restarts) and the remaining Jobs are deleted. A suspended JobSet has no running Jobs
(they are deleted, and made again from the templates when it resumes, so Kueue's node selectors apply).
"""

from __future__ import annotations

import copy
from typing import Any

from ..constants import RUN_SECONDS
from .operators import OwnerController, owner_ref, set_condition, true_condition

__all__ = ["JobSetController"]

Obj = dict[str, Any]

JOBS = "jobs.batch"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"


def _job_true(job: Obj, ctype: str) -> bool:
    return true_condition(job.get("status") or {}, ctype)


class JobSetController(OwnerController):
    name = "jobset-controller"
    kinds = {"jobsets.jobset.x-k8s.io": "JobSet"}
    children = (JOBS,)
    own_controller = "jobset.sigs.k8s.io/jobset-controller"

    def sync(self, resource: str, js: Obj) -> None:
        spec = js.get("spec") or {}
        status = copy.deepcopy(js.get("status") or {})
        jobs = {j["metadata"]["name"]: j for j in self.owned(JOBS, js)}
        finished = true_condition(status, "Completed") or true_condition(status, "Failed")
        suspended = bool(spec.get("suspend"))
        if finished or suspended:
            for j in jobs.values():
                if not (_job_true(j, "Complete") or _job_true(j, "Failed")):
                    self.delete_child(JOBS, j)
                    jobs.pop(j["metadata"]["name"], None)
        if suspended and not finished:
            set_condition(status, "Suspended", "True", "SuspendedJobs", "jobset is suspended")
        elif not finished:
            if true_condition(status, "Suspended"):
                set_condition(status, "Suspended", "False", "ResumeJobs", "jobset is resumed")
            for rj in spec.get("replicatedJobs") or []:
                for i in range(int(rj.get("replicas", 1))):
                    name = f"{js['metadata']['name']}-{rj['name']}-{i}"
                    if name not in jobs:
                        self.create_child(self._job(js, rj, i, name))
        summary = []
        any_failed = False
        all_done = True
        for rj in spec.get("replicatedJobs") or []:
            mine = [j for j in jobs.values() if (j["metadata"].get("labels") or {}).get(REPLICATED_JOB) == rj["name"]]
            succeeded = sum(1 for j in mine if _job_true(j, "Complete"))
            failed = sum(1 for j in mine if _job_true(j, "Failed"))
            active = sum(1 for j in mine if int((j.get("status") or {}).get("active") or 0) > 0)
            ready = sum(1 for j in mine if int((j.get("status") or {}).get("ready") or 0) > 0)
            susp = sum(1 for j in mine if (j.get("spec") or {}).get("suspend"))
            summary.append(
                {
                    "name": rj["name"],
                    "ready": ready,
                    "succeeded": succeeded,
                    "failed": failed,
                    "active": active,
                    "suspended": susp,
                }
            )
            any_failed = any_failed or failed > 0
            all_done = all_done and succeeded >= int(rj.get("replicas", 1))
        status["replicatedJobsStatus"] = summary
        if not finished and not suspended:
            if any_failed:
                set_condition(status, "Failed", "True", "FailedJobs", "jobset failed due to one or more job failures")
                status["terminalState"] = "Failed"
                for j in jobs.values():
                    if not (_job_true(j, "Complete") or _job_true(j, "Failed")):
                        self.delete_child(JOBS, j)
            elif all_done and spec.get("replicatedJobs"):
                set_condition(status, "Completed", "True", "AllJobsCompleted", "jobset completed successfully")
                status["terminalState"] = "Completed"
        status.setdefault("restarts", 0)
        self.write_status(js, status)

    def _job(self, js: Obj, rj: Obj, index: int, name: str) -> Obj:
        meta = js["metadata"]
        template = copy.deepcopy(rj.get("template") or {})
        tmeta = template.get("metadata") or {}
        labels = {
            **(tmeta.get("labels") or {}),
            JOBSET_NAME: meta["name"],
            REPLICATED_JOB: rj["name"],
            JOB_INDEX: str(index),
        }
        job_spec = template.get("spec") or {}
        pod = job_spec.setdefault("template", {})
        pmeta = pod.setdefault("metadata", {})
        pmeta["labels"] = {
            **(pmeta.get("labels") or {}),
            JOBSET_NAME: meta["name"],
            REPLICATED_JOB: rj["name"],
            JOB_INDEX: str(index),
        }
        run = (meta.get("annotations") or {}).get(RUN_SECONDS)
        if run is not None and RUN_SECONDS not in (pmeta.get("annotations") or {}):
            pmeta["annotations"] = {**(pmeta.get("annotations") or {}), RUN_SECONDS: run}
        job_spec.pop("suspend", None)
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": meta.get("namespace"),
                "labels": labels,
                "annotations": dict(tmeta.get("annotations") or {}),
                "ownerReferences": [owner_ref(js)],
            },
            "spec": job_spec,
        }
