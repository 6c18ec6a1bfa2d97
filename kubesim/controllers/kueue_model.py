"""Pure pieces of the simulated Kueue: names, Workload conditions, pod set info, requests, configuration.

Everything here is a function of its arguments (no store, no API), so it can be tested on its own and
shared by the controller (:mod:`.kueue`) and the job integrations (:mod:`.kueue_jobs`). The behaviour
follows Kueue v1beta2 at the commit whose CRDs the project ships: ``pkg/controller/jobframework``
(workload names, priority, pod set info), ``pkg/workload`` (condition bookkeeping), ``pkg/podset``
(merging flavor node labels and tolerations into pod templates and restoring them) and the
``Configuration`` API (resource transformations and excluded prefixes).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..api import now_rfc3339 as _api_now
from ..kueue.fairsharing import FairSharing
from ..kueue.requests import PodSet, ResourceTransformation, quantity_string, workload_pod_sets

__all__ = [
    "CLUSTER_QUEUE_LABEL",
    "JOB_UID_LABEL",
    "KUEUE_API_VERSION",
    "LOCAL_QUEUE_LABEL",
    "PODSET_LABEL",
    "RESOURCE_IN_USE_FINALIZER",
    "STOPPING_ANNOTATION",
    "UNADMITTED_WORKLOADS_OBSERVABILITY",
    "WORKLOAD_ANNOTATION",
    "KueueConfig",
    "PodSetInfo",
    "PodSetMergeError",
    "condition",
    "condition_true",
    "has_quota_reservation",
    "is_admitted",
    "is_evicted",
    "is_finished",
    "now_rfc3339",
    "pod_set_request",
    "preemption_message",
    "resource_requests_status",
    "set_condition",
    "set_quota_reservation",
    "sync_admitted_condition",
    "unadmitted_reason",
    "unset_quota_reservation",
    "workload_name",
]

Obj = dict[str, Any]

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PODSET_LABEL = "kueue.x-k8s.io/podset"
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
STOPPING_ANNOTATION = "kueue.x-k8s.io/stopping"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
#: TAS: the scheduling gate of a TAS workload's pods, and the annotation implied TAS adds.
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
TAS_UNCONSTRAINED_ANNOTATION = "kueue.x-k8s.io/podset-unconstrained-topology"
PROVREQ_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"

#: Kueue's ``UnadmittedWorkloadsObservability`` feature gate (newer than v0.17): pending workloads carry granular
#: reasons (``WaitingForQuota``, ``Misconfigured``, ...) instead of the legacy ``Pending`` / ``Inadmissible``.
#: Off, as in Kueue v0.17.0, the release the real rig builds (its workloads say ``Pending``; found by
#: tests/differential/test_kueue_admission.py). Flip it to reproduce Kueue at HEAD.
UNADMITTED_WORKLOADS_OBSERVABILITY = False

_HASH_LENGTH = 5
_MAX_WORKLOAD_NAME = 253
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def now_rfc3339() -> str:
    """``metav1.Now()`` as it serializes: second precision, UTC."""
    return _api_now()


# --------------------------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------------------------


def workload_name(owner_name: str, owner_uid: str, kind: str, group: str) -> str:
    """``GetWorkloadNameForOwnerWithGVK``: ``<kind>-<owner>`` truncated, then 5 hex of a SHA-1 of the owner.

    The hash covers kind, group, name and UID, so a re-created Job of the same name gets a new Workload name
    and Jobs of different kinds with the same name never collide.
    """
    prefix = f"{kind.lower()}-{owner_name}"[: _MAX_WORKLOAD_NAME - 1 - _HASH_LENGTH]
    digest = hashlib.sha1(f"{kind}\n{group}\n{owner_name}\n{owner_uid}".encode(), usedforsecurity=False)
    return f"{prefix}-{digest.hexdigest()[:_HASH_LENGTH]}"


def is_dns1123_label(value: str) -> bool:
    return len(value) <= 63 and bool(_DNS1123_LABEL.match(value))


# --------------------------------------------------------------------------------------------------------------
# Conditions (apimeta.SetStatusCondition and pkg/workload)
# --------------------------------------------------------------------------------------------------------------


def condition(obj: Mapping[str, Any], ctype: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype:
            return c  # type: ignore[no-any-return]
    return None


def condition_true(obj: Mapping[str, Any], ctype: str) -> bool:
    c = condition(obj, ctype)
    return c is not None and c.get("status") == "True"


def set_condition(status: Obj, new: Obj, now: str) -> bool:
    """``meta.SetStatusCondition``: the transition time moves only when the status flips; returns whether
    anything changed. ``new`` carries type, status, reason, message and (optionally) observedGeneration."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    for c in conditions:
        if c.get("type") != new["type"]:
            continue
        changed = False
        if c.get("status") != new["status"]:
            c["status"] = new["status"]
            c["lastTransitionTime"] = new.get("lastTransitionTime") or now
            changed = True
        for key in ("reason", "message", "observedGeneration"):
            if key in new and c.get(key) != new[key]:
                c[key] = new[key]
                changed = True
        return changed
    entry: Obj = {"type": new["type"], "status": new["status"]}
    if "observedGeneration" in new:
        entry["observedGeneration"] = new["observedGeneration"]
    entry["lastTransitionTime"] = new.get("lastTransitionTime") or now
    entry["reason"] = new.get("reason", "")
    entry["message"] = new.get("message", "")
    conditions.append(entry)
    return True


def _truncate(message: str) -> str:
    """``api.TruncateConditionMessage``: conditions hold at most 32 KiB of message."""
    return message if len(message) <= 32 * 1024 else message[: 32 * 1024 - 3] + "..."


def unadmitted_reason(granular: str, fallback: str) -> str:
    """``UnadmittedWorkloadReasonWithFallback``."""
    return granular if UNADMITTED_WORKLOADS_OBSERVABILITY else fallback


def has_quota_reservation(wl: Mapping[str, Any]) -> bool:
    return condition_true(wl, "QuotaReserved")


def is_admitted(wl: Mapping[str, Any]) -> bool:
    return condition_true(wl, "Admitted")


def is_finished(wl: Mapping[str, Any]) -> bool:
    return condition_true(wl, "Finished")


def is_evicted(wl: Mapping[str, Any]) -> bool:
    return condition_true(wl, "Evicted")


def is_active(wl: Mapping[str, Any]) -> bool:
    return (wl.get("spec") or {}).get("active", True) is not False


def _gen(wl: Mapping[str, Any]) -> int:
    return int((wl.get("metadata") or {}).get("generation") or 0)


def sync_admitted_condition(wl: Obj, now: str) -> bool:
    """``SyncAdmittedCondition`` with no admission checks and no delayed topology requests."""
    status = wl.setdefault("status", {})
    reserved = has_quota_reservation(wl)
    admitted_cond = condition(wl, "Admitted")
    if UNADMITTED_WORKLOADS_OBSERVABILITY:
        if condition(wl, "QuotaReserved") is None and admitted_cond is None:
            return False
    elif is_admitted(wl) == reserved:
        return False
    new: Obj
    if reserved:
        new = {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"}
    else:
        new = {
            "type": "Admitted",
            "status": "False",
            "reason": "NoReservation",
            "message": "The workload has no reservation",
        }
    new["observedGeneration"] = _gen(wl)
    return set_condition(status, new, now)


def _reset_active_condition(wl: Obj, ctype: str, reason: str, now: str) -> bool:
    prev = condition(wl, ctype)
    if prev is None or prev.get("status") != "True":
        return False
    return set_condition(
        wl["status"],
        {
            "type": ctype,
            "status": "False",
            "reason": reason,
            "message": _truncate("Previously: " + str(prev.get("message", ""))),
            "observedGeneration": _gen(wl),
        },
        now,
    )


def set_quota_reservation(wl: Obj, admission: Obj, now: str) -> None:
    """``SetQuotaReservation`` then ``SyncAdmittedCondition``, as the scheduler prepares an admitted Workload."""
    status = wl.setdefault("status", {})
    status["admission"] = admission
    set_condition(
        status,
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "message": _truncate(f"Quota reserved in ClusterQueue {admission['clusterQueue']}"),
            "observedGeneration": _gen(wl),
        },
        now,
    )
    for ctype in ("Evicted", "Preempted", "BlockedOnPreemptionGates"):
        _reset_active_condition(wl, ctype, "QuotaReserved", now)
    sync_admitted_condition(wl, now)


def unset_quota_reservation(wl: Obj, reason: str, message: str, now: str) -> bool:
    """``UnsetQuotaReservationWithCondition``: QuotaReserved=False, admission dropped, Admitted synced."""
    status = wl.setdefault("status", {})
    changed = set_condition(
        status,
        {
            "type": "QuotaReserved",
            "status": "False",
            "reason": reason,
            "message": _truncate(message),
            "observedGeneration": _gen(wl),
        },
        now,
    )
    if status.get("admission") is not None:
        status.pop("admission", None)
        changed = True
    if sync_admitted_condition(wl, now):
        changed = True
    return changed


def set_requeued_condition(wl: Obj, reason: str, message: str, value: bool, now: str) -> bool:
    return set_condition(
        wl.setdefault("status", {}),
        {
            "type": "Requeued",
            "status": "True" if value else "False",
            "reason": reason,
            "message": _truncate(message),
            "observedGeneration": _gen(wl),
        },
        now,
    )


def set_evicted_condition(wl: Obj, reason: str, message: str, now: str) -> bool:
    """``prepareForEviction`` without admission checks: Evicted=True and the scheduling stats counted."""
    status = wl.setdefault("status", {})
    changed = set_condition(
        status,
        {
            "type": "Evicted",
            "status": "True",
            "reason": reason,
            "message": _truncate(message),
            "observedGeneration": _gen(wl),
        },
        now,
    )
    stats = status.setdefault("schedulingStats", {})
    evictions: list[Obj] = stats.setdefault("evictions", [])
    for e in evictions:
        if e.get("reason") == reason and not e.get("underlyingCause"):
            e["count"] = int(e.get("count", 0)) + 1
            break
    else:
        evictions.append({"reason": reason, "underlyingCause": "", "count": 1})
    return changed


def set_preempted_condition(wl: Obj, reason: str, message: str, now: str) -> bool:
    return set_condition(
        wl.setdefault("status", {}),
        {"type": "Preempted", "status": "True", "reason": reason, "message": _truncate(message)},
        now,
    )


def set_finished_condition(wl: Obj, reason: str, message: str, now: str) -> bool:
    return set_condition(
        wl.setdefault("status", {}),
        {
            "type": "Finished",
            "status": "True",
            "reason": reason,
            "message": _truncate(message),
            "observedGeneration": _gen(wl),
        },
        now,
    )


_PREEMPTION_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


def preemption_message(
    preemptor_uid: str, preemptor_job_uid: str, reason: str, preemptor_path: str, preemptee_path: str
) -> str:
    """Kueue's ``preemptionMessage`` (the Evicted / Preempted condition message of a victim)."""
    return (
        f"Preempted to accommodate a workload (UID: {preemptor_uid or 'UNKNOWN'}, "
        f"JobUID: {preemptor_job_uid or 'UNKNOWN'}) due to {_PREEMPTION_REASONS.get(reason, 'UNKNOWN')}; "
        f"preemptor path: {preemptor_path or 'UNKNOWN'}; preemptee path: {preemptee_path or 'UNKNOWN'}"
    )


# --------------------------------------------------------------------------------------------------------------
# Kueue Configuration (resources.transformations / excludeResourcePrefixes)
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KueueConfig:
    """What of Kueue's ``Configuration`` changes admission: how pod requests become quota usage, and fair sharing."""

    transformations: tuple[ResourceTransformation, ...] = ()
    excluded_prefixes: tuple[str, ...] = ()
    fair_sharing: FairSharing | None = None

    @classmethod
    def from_yaml(cls, text: str | None) -> KueueConfig:
        """Parse ``controller_manager_config.yaml``; anything unreadable counts as the defaults, as a Kueue
        that cannot read its configuration would not have started with it."""
        if not text:
            return cls()
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError:
            return cls()
        if not isinstance(raw, Mapping):
            return cls()
        fair = FairSharing.from_config(raw)
        res = raw.get("resources")
        if not isinstance(res, Mapping):
            return cls(fair_sharing=fair)
        transformations: list[ResourceTransformation] = []
        for t in res.get("transformations") or ():
            if isinstance(t, Mapping) and t.get("input"):
                try:
                    transformations.append(ResourceTransformation.from_config(t))
                except (ValueError, TypeError):
                    continue
        prefixes = tuple(str(p) for p in res.get("excludeResourcePrefixes") or () if isinstance(p, str))
        return cls(tuple(transformations), prefixes, fair)


def pod_set_request(pod_set: Mapping[str, Any], count: int, config: KueueConfig) -> PodSet:
    """A Workload ``spec.podSets[]`` entry as the flavor assigner sees it (``count`` pods), with the transformations
    and excluded prefixes of Kueue's configuration."""
    [ps] = workload_pod_sets(
        {"spec": {"podSets": [{**pod_set, "count": count}]}}, config.transformations, config.excluded_prefixes
    )
    return ps


def resource_requests_status(pod_sets: Sequence[PodSet]) -> list[Obj]:
    """``status.resourceRequests``: per pod set, the total (per pod x count) Kueue counts."""
    return [
        {"name": ps.name, "resources": {r: quantity_string(r, v) for r, v in sorted(ps.totals().items())}}
        for ps in pod_sets
    ]


# --------------------------------------------------------------------------------------------------------------
# Pod set info (pkg/podset)
# --------------------------------------------------------------------------------------------------------------


class PodSetMergeError(ValueError):
    """``ErrInvalidPodSetUpdate``: the admission conflicts with the pod template (a permanent failure)."""


@dataclass
class PodSetInfo:
    """What Kueue injects into (and later restores in) a pod template: ``podset.PodSetInfo``."""

    name: str
    count: int
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[Obj] = field(default_factory=list)
    scheduling_gates: list[Obj] = field(default_factory=list)

    @classmethod
    def from_assignment(
        cls, assignment: Mapping[str, Any], pod_set: Mapping[str, Any], flavors: Mapping[str, Obj | None]
    ) -> PodSetInfo:
        """``FromAssignment``: node labels and tolerations of every distinct assigned flavor, in order.

        ``flavors`` maps flavor names to ResourceFlavor objects (``None`` when missing, which is an error
        Kueue retries).
        """
        count = assignment.get("count")
        info = cls(
            name=str(assignment.get("name") or "main"),
            count=count if isinstance(count, int) else int(pod_set.get("count", 1) or 1),
        )
        if assignment.get("topologyAssignment") is not None:
            # TAS: the pods wait behind the topology gate until the ungater gives each its domain; implied TAS
            # gets the unconstrained annotation (so the pods count as TAS pods).
            request = pod_set.get("topologyRequest") or {}
            if not any(request.get(k) is not None for k in ("required", "preferred", "unconstrained")):
                info.annotations[TAS_UNCONSTRAINED_ANNOTATION] = "true"
            info.scheduling_gates.append({"name": TOPOLOGY_GATE})
        seen: set[str] = set()
        for flavor_name in (assignment.get("flavors") or {}).values():
            if flavor_name in seen:
                continue
            seen.add(flavor_name)
            flavor = flavors.get(flavor_name)
            if flavor is None:
                raise LookupError(f'resourceflavors.kueue.x-k8s.io "{flavor_name}" not found')
            spec = flavor.get("spec") or {}
            info.node_selector.update({str(k): str(v) for k, v in (spec.get("nodeLabels") or {}).items()})
            info.tolerations.extend(copy.deepcopy(list(spec.get("tolerations") or ())))
        return info

    @classmethod
    def from_pod_set(cls, pod_set: Mapping[str, Any]) -> PodSetInfo:
        """``FromPodSet``: the original template as the Workload recorded it, for restoring on stop."""
        template = pod_set.get("template") or {}
        meta = template.get("metadata") or {}
        spec = template.get("spec") or {}
        return cls(
            name=str(pod_set.get("name") or "main"),
            count=int(pod_set.get("count", 1) or 1),
            annotations=dict(meta.get("annotations") or {}),
            labels=dict(meta.get("labels") or {}),
            node_selector=dict(spec.get("nodeSelector") or {}),
            tolerations=copy.deepcopy(list(spec.get("tolerations") or ())),
            scheduling_gates=copy.deepcopy(list(spec.get("schedulingGates") or ())),
        )

    def merge_into(self, template: Obj) -> None:
        """``podset.Merge``: add this info to a pod template; a key present with another value is a
        permanent error (``ErrInvalidPodSetUpdate``), tolerations and gates are added when not yet there."""
        meta = template.setdefault("metadata", {})
        spec = template.setdefault("spec", {})
        for what, current, extra in (
            ("annotations", meta.get("annotations") or {}, self.annotations),
            ("labels", meta.get("labels") or {}, self.labels),
            ("nodeSelector", spec.get("nodeSelector") or {}, self.node_selector),
        ):
            for key, value in extra.items():
                if key in current and current[key] != value:
                    raise PodSetMergeError(
                        f"invalid admission check PodSetUpdate: conflict for {what}: "
                        f"conflict for key={key}, value1={current[key]}, value2={value}"
                    )
        if self.annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **self.annotations}
        if self.labels:
            meta["labels"] = {**(meta.get("labels") or {}), **self.labels}
        if self.node_selector:
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **self.node_selector}
        tolerations = list(spec.get("tolerations") or ())
        for t in self.tolerations:
            if t not in tolerations:
                tolerations.append(copy.deepcopy(t))
        if tolerations:
            spec["tolerations"] = tolerations
        gates = list(spec.get("schedulingGates") or ())
        for g in self.scheduling_gates:
            if g not in gates:
                gates.append(copy.deepcopy(g))
        if gates:
            spec["schedulingGates"] = gates

    def restore_into(self, template: Obj) -> bool:
        """``podset.RestorePodSpec``: put back annotations, labels, node selector, tolerations and gates."""
        meta = template.setdefault("metadata", {})
        spec = template.setdefault("spec", {})
        changed = False
        for container, key, value in (
            (meta, "annotations", self.annotations),
            (meta, "labels", self.labels),
            (spec, "nodeSelector", self.node_selector),
            (spec, "tolerations", self.tolerations),
            (spec, "schedulingGates", self.scheduling_gates),
        ):
            if (container.get(key) or type(value)()) != value:
                changed = True
                if value:
                    container[key] = copy.deepcopy(value)
                else:
                    container.pop(key, None)
        return changed
