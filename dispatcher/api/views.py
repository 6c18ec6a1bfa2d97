"""JSON views of workers, workloads and decisions (pure; the shapes are those of :mod:`.openapi`).

Names are camelCase as in Kubernetes; times are RFC 3339 in UTC (``2025-06-01T12:00:00.123456Z``) or null;
quota amounts are Kueue's integer units (cpu in milli-cores, memory in bytes) with the quantity strings
beside them; a worker whose numbers are not current says so (``capacityKnown``). Nothing here reads a
worker's credentials: a worker's kubeconfig never reaches the API.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from ..placement.kueue.amounts import format_amount
from ..placement.worker import WorkerCapacity
from ..store.models import AuditEvent, Placement, Workload
from ..worker_lease import no_fencing

__all__ = [
    "CAPACITY_KNOWN_HEALTH",
    "capacity_known",
    "cluster_detail",
    "cluster_summary",
    "event_view",
    "explain_view",
    "gpu_view",
    "placement_view",
    "time_view",
    "workload_detail",
    "workload_summary",
]

Obj = dict[str, Any]


def time_view(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _number(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


# -- workers ---------------------------------------------------------------------------------------------


#: Healths in which the worker's watches are live, so its quota and GPU numbers are current. Otherwise (Lost,
#: NotReady: refusing our credentials, Unknown, Recovering while it is fenced) they are the last ones seen, and
#: a dashboard that drew them would show free quota nobody can use.
CAPACITY_KNOWN_HEALTH = frozenset({"Ready", "Suspect"})


def capacity_known(cap: WorkerCapacity) -> bool:
    """Whether the worker's capacity numbers are current: listed once, and its health lets the watches run."""
    return bool(cap.synced) and str(cap.health) in CAPACITY_KNOWN_HEALTH


def cluster_summary(
    cap: WorkerCapacity, client: Any = None, health_since: datetime | None = None, fencing: Obj | None = None
) -> Obj:
    latency = client.latency if client is not None else cap.latency
    return {
        "name": cap.name,
        "health": str(cap.health),
        "healthSince": time_view(health_since),
        "reason": str(cap.health_reason) or None,
        "capacityKnown": capacity_known(cap),
        "cordoned": bool(cap.cordoned),
        "weight": float(cap.weight),
        "labels": {str(k): str(v) for k, v in cap.labels.items()},
        "synced": bool(cap.synced),
        "inFlight": int(cap.in_flight),
        "maxInFlight": int(cap.max_in_flight),
        "latencySeconds": _number(latency) or 0.0,
        "apiCalls": int(client.calls) if client is not None else 0,
        "apiErrors": int(client.errors) if client is not None else 0,
        "hamiGpus": cap.gpu is not None,
        "fencing": fencing or no_fencing(),
    }


_GPU_FIELDS = (
    "gpus",
    "healthyGpus",
    "vgpuSlots",
    "vgpuSlotsUsed",
    "memoryTotalMiB",
    "memoryUsedMiB",
    "memoryFreeMiB",
    "coresTotal",
    "coresUsed",
)


def gpu_view(gpu: Any) -> Obj | None:
    """HAMi's view of the worker: ``WorkerGpus.summary()`` in total, and the same counts per GPU type."""
    if gpu is None:
        return None
    summary = gpu.summary()
    by_type: dict[str, dict[str, int]] = {}
    inv = gpu.inventory()
    for node in inv.states:
        for d in inv.devices(node):
            t = by_type.setdefault(str(d.info.type) or "unknown", dict.fromkeys(_GPU_FIELDS, 0))
            t["gpus"] += 1
            t["healthyGpus"] += int(bool(d.info.health))
            t["vgpuSlots"] += int(d.info.count)
            t["vgpuSlotsUsed"] += int(d.used)
            t["memoryTotalMiB"] += int(d.info.devmem)
            t["memoryUsedMiB"] += int(d.usedmem)
            t["memoryFreeMiB"] += max(int(d.info.devmem) - int(d.usedmem), 0)
            t["coresTotal"] += int(d.info.devcore)
            t["coresUsed"] += int(d.usedcores)
    total = {k: int(summary.get(k, 0)) for k in ("nodes", *_GPU_FIELDS, "reservations")}
    return {
        "total": total,
        "byType": [{"type": name, **counts} for name, counts in sorted(by_type.items())],
        "unusableNodes": {str(k): str(v) for k, v in (summary.get("unusableNodes") or {}).items()},
    }


def _limit(value: Any) -> int | None:
    return None if value is None else int(value)


def cluster_detail(
    cap: WorkerCapacity, client: Any = None, health_since: datetime | None = None, fencing: Obj | None = None
) -> Obj:
    quota = []
    for row in cap.quota_report():
        res = str(row["resource"])
        cq = str(row["clusterQueue"])
        spec = cap.cluster_queues.get(cq)
        # used + reserved beyond nominal comes from the Cohort: "8 / 8 + 4 borrowed", never "12 / 8".
        amounts = {k: int(row.get(k) or 0) for k in ("nominal", "used", "reserved", "free", "borrowed")}
        quota.append(
            {
                "clusterQueue": cq,
                "cohort": spec.cohort if spec is not None else None,
                "flavor": str(row["flavor"]),
                "resource": res,
                **amounts,
                "borrowingLimit": _limit(row.get("borrowingLimit")),
                "lendingLimit": _limit(row.get("lendingLimit")),
                "quantities": {k: format_amount(res, v) for k, v in amounts.items()},
            }
        )
    schedulable = sum(1 for n in cap.nodes.values() if not n.unschedulable)
    return {
        **cluster_summary(cap, client, health_since, fencing),
        "capacity": {
            "quota": quota,
            "localQueues": [
                {"namespace": ns, "name": name, "clusterQueue": cq} for ns, name, cq in cap.describe_local_queues()
            ],
            "nodes": {"total": len(cap.nodes), "schedulable": schedulable},
            "pendingOnWorker": {str(k): int(v) for k, v in sorted(cap.pending_by_cq.items()) if k},
        },
        "vgpu": gpu_view(cap.gpu),
    }


# -- workloads -------------------------------------------------------------------------------------------


def workload_summary(w: Workload) -> Obj:
    return {
        "id": int(w.id),
        "uid": w.uid,
        "namespace": w.namespace,
        "name": w.name,
        "kind": w.kind,
        "apiVersion": w.api_version,
        "queue": w.queue,
        "priority": int(w.priority),
        "priorityClass": w.priority_class,
        "state": w.state,
        "cluster": w.cluster,
        "generation": int(w.generation),
        "reason": w.reason,
        "problem": w.problem,
        "deleted": bool(w.deleted),
        "createdAt": time_view(w.created_at),
        "submittedAt": time_view(w.submitted_at),
        "placedAt": time_view(w.placed_at),
        "admittedAt": time_view(w.admitted_at),
        "startedAt": time_view(w.started_at),
        "finishedAt": time_view(w.finished_at),
        "updatedAt": time_view(w.updated_at),
    }


def placement_view(p: Placement) -> Obj:
    decision = p.decision or {}
    summary = decision.get("summary") if isinstance(decision, dict) else None
    return {
        "id": int(p.id),
        "generation": int(p.generation),
        "cluster": p.cluster,
        "strategy": p.strategy,
        "score": _number(p.score),
        "state": p.state,
        "outcome": p.outcome,
        "remoteUid": p.remote_uid,
        "summary": str(summary) if summary is not None else None,
        "createdAt": time_view(p.created_at),
        "mirroredAt": time_view(p.mirrored_at),
        "admittedAt": time_view(p.admitted_at),
        "finishedAt": time_view(p.finished_at),
        "endedAt": time_view(p.ended_at),
    }


def workload_detail(w: Workload) -> Obj:
    decision = w.last_decision if isinstance(w.last_decision, dict) else None
    return {
        **workload_summary(w),
        "objectGeneration": int(w.object_generation),
        "statusMode": w.status_mode,
        "noFailover": bool(w.no_failover),
        "clusterSelector": dict(w.cluster_selector) if w.cluster_selector else None,
        "excluded": [str(c) for c in (w.excluded or [])],
        "podSets": list(w.pod_sets or []),
        "placementId": int(w.placement_id) if w.placement_id is not None else None,
        "decisionSummary": str(decision["summary"]) if decision and decision.get("summary") is not None else None,
        "remoteStatus": w.remote_status if isinstance(w.remote_status, dict) else None,
        "cleanedAt": time_view(w.cleaned_at),
        "placements": [placement_view(p) for p in sorted(w.placements, key=lambda p: p.id)],
    }


def explain_view(w: Workload, text: str) -> Obj:
    decision = w.last_decision if isinstance(w.last_decision, dict) else None
    return {
        "namespace": w.namespace,
        "name": w.name,
        "state": w.state,
        "cluster": w.cluster,
        "generation": int(w.generation),
        "reason": w.reason,
        "problem": w.problem,
        "decision": decision,
        "placements": [
            {
                "id": int(p.id),
                "generation": int(p.generation),
                "cluster": p.cluster,
                "score": _number(p.score),
                "state": p.state,
                "outcome": p.outcome,
                "decision": p.decision if isinstance(p.decision, dict) else {},
            }
            for p in sorted(w.placements, key=lambda p: p.id)
        ],
        "text": text,
    }


# -- events ----------------------------------------------------------------------------------------------


def event_view(e: AuditEvent, names: dict[int, str]) -> Obj:
    """One audit event; ``names`` maps workload ids to ``namespace/name`` (a deleted workload has none)."""
    wid = int(e.workload_id) if e.workload_id is not None else None
    return {
        "id": int(e.id),
        "at": time_view(e.at),
        "type": e.type,
        "cluster": e.cluster,
        "workloadId": wid,
        "workload": names.get(wid) if wid is not None else None,
        "message": e.message,
    }
