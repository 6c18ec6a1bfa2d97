"""The component schemas of the HTTP API's OpenAPI document (:mod:`.openapi`): what every response object
carries, property by property (``additionalProperties: false``), so a handler that drifts fails the checks."""

from __future__ import annotations

from typing import Any

from ..store.models import WorkloadState

__all__ = ["SCHEMAS"]

Obj = dict[str, Any]

DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: Event types, comma-separated (``type`` of GET /api/v1/events), without the anchors.
EVENT_TYPES_PATTERN = "[A-Za-z]{1,32}(,[A-Za-z]{1,32}){0,19}"
DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

STR: Obj = {"type": "string"}
NSTR: Obj = {"type": "string", "nullable": True}
INT: Obj = {"type": "integer"}
COUNT: Obj = {"type": "integer", "minimum": 0}
BOOL: Obj = {"type": "boolean"}
TIME: Obj = {"type": "string", "format": "date-time"}
NTIME: Obj = {"type": "string", "format": "date-time", "nullable": True}
STRING_MAP: Obj = {"type": "object", "additionalProperties": {"type": "string"}}


def _ref(name: str) -> Obj:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(properties: Obj, description: str | None = None, *, nullable: bool = False) -> Obj:
    out: Obj = {"type": "object", "required": list(properties), "properties": properties, "additionalProperties": False}
    if description:
        out["description"] = description
    if nullable:
        out["nullable"] = True
    return out


def _json(schema: str, description: str) -> Obj:
    return {"description": description, "content": {"application/json": {"schema": _ref(schema)}}}


def _error(description: str) -> Obj:
    return _json("Error", description)


CLUSTER_SUMMARY: Obj = {
    "name": STR,
    "health": {**STR, "description": "Unknown, Ready, Suspect, Lost, Recovering or NotReady"},
    "healthSince": {**NTIME, "description": "when the worker entered this health; null when not known"},
    "reason": {
        **NSTR,
        "description": "why a NotReady worker refuses the dispatcher (Unauthorized, or Forbidden and what)",
    },
    "capacityKnown": {
        **BOOL,
        "description": "its quota and GPU numbers are current (listed, and Ready or Suspect); false: Lost, "
        "NotReady, Unknown or Recovering, and the numbers are the last ones seen",
    },
    "cordoned": {**BOOL, "description": "a cordoned worker takes no new workloads"},
    "weight": {"type": "number", "minimum": 0},
    "labels": STRING_MAP,
    "synced": {**BOOL, "description": "the worker's informers have listed everything once"},
    "inFlight": {**COUNT, "description": "placements the worker's Kueue has not admitted yet"},
    "maxInFlight": COUNT,
    "latencySeconds": {"type": "number", "minimum": 0, "description": "recent latency of the worker's API server"},
    "apiCalls": COUNT,
    "apiErrors": COUNT,
    "hamiGpus": {**BOOL, "description": "the worker has nodes with usable HAMi GPUs"},
    "fencing": _obj(
        {
            "mode": {
                **STR,
                "enum": ["agent", "none"],
                "description": "agent: a fencing agent stops the copies of a partitioned worker before failover "
                "(exactly once); none: failover from a partitioned worker is at-least-once",
            },
            "summary": {**STR, "description": "one line: the mode, and whether the agent is seen running"},
            "leaseDurationSeconds": {"type": "number", "nullable": True},
            "graceSeconds": {"type": "number", "nullable": True},
            "renewing": {
                "type": "boolean",
                "nullable": True,
                "description": "false once the worker is Lost (its agent then fences)",
            },
            "lastRenewedSecondsAgo": {"type": "number", "nullable": True},
            "renewRefused": {**NSTR, "description": "why the worker refuses the fencing Lease (401/403)"},
            "agentUp": {
                "type": "boolean",
                "nullable": True,
                "description": "the agent's heartbeat arrives; null before one was seen",
            },
            "agentLastSeenSecondsAgo": {"type": "number", "nullable": True},
            "agentExpired": {
                "type": "boolean",
                "nullable": True,
                "description": "the agent reports this dispatcher's Lease expired (it is fencing)",
            },
            "agentFenced": {
                "type": "integer",
                "nullable": True,
                "description": "copies of this dispatcher the agent has fenced since it started",
            },
        },
        "the worker's fencing (dispatcher/agent.py)",
    ),
}

GPU_COUNTS: Obj = {
    "gpus": COUNT,
    "healthyGpus": COUNT,
    "vgpuSlots": COUNT,
    "vgpuSlotsUsed": COUNT,
    "memoryTotalMiB": COUNT,
    "memoryUsedMiB": COUNT,
    "memoryFreeMiB": COUNT,
    "coresTotal": COUNT,
    "coresUsed": COUNT,
}

AMOUNTS = ("nominal", "used", "reserved", "free", "borrowed")
NINT: Obj = {"type": "integer", "nullable": True}

QUOTA_ROW: Obj = _obj(
    {
        "clusterQueue": STR,
        "cohort": {**NSTR, "description": "the ClusterQueue's Cohort, which it borrows from and lends to"},
        "flavor": STR,
        "resource": STR,
        "nominal": {**INT, "description": "Kueue units: milli-cores for cpu, bytes for memory, else whole units"},
        "used": {**INT, "description": "admitted by the worker's Kueue"},
        "reserved": {**INT, "description": "held for our placements the worker has not admitted yet"},
        "free": {**INT, "description": "what a new workload can still get (cohort borrowing included)"},
        "borrowed": {
            **INT,
            "description": "used + reserved beyond nominal, borrowed from the Cohort (0 outside one)",
        },
        "borrowingLimit": {**NINT, "description": "at most this much may be borrowed; null: no limit"},
        "lendingLimit": {**NINT, "description": "at most this much of the nominal quota is lent; null: no limit"},
        "quantities": _obj(dict.fromkeys(AMOUNTS, STR), "the same amounts as Kubernetes quantities"),
    }
)

VGPU: Obj = _obj(
    {
        "total": _obj({"nodes": COUNT, **GPU_COUNTS, "reservations": COUNT}),
        "byType": {"type": "array", "items": _obj({"type": STR, **GPU_COUNTS})},
        "unusableNodes": {**STRING_MAP, "description": "nodes HAMi does not use, and why"},
    },
    "HAMi's view of the worker's GPUs (reservations for placements not admitted yet included); null without GPUs",
    nullable=True,
)

CLUSTER_DETAIL: Obj = {
    **CLUSTER_SUMMARY,
    "capacity": _obj(
        {
            "quota": {"type": "array", "items": QUOTA_ROW},
            "localQueues": {
                "type": "array",
                "items": _obj({"namespace": STR, "name": STR, "clusterQueue": STR}),
            },
            "nodes": _obj({"total": COUNT, "schedulable": COUNT}),
            "pendingOnWorker": {
                "type": "object",
                "additionalProperties": COUNT,
                "description": "workloads waiting in the worker's own Kueue, per ClusterQueue",
            },
        }
    ),
    "vgpu": VGPU,
}

WORKLOAD_SUMMARY: Obj = {
    "id": INT,
    "uid": {**STR, "description": "the manager object's uid"},
    "namespace": STR,
    "name": STR,
    "kind": STR,
    "apiVersion": STR,
    "queue": {**STR, "description": "the LocalQueue name (kueue.x-k8s.io/queue-name)"},
    "priority": INT,
    "priorityClass": NSTR,
    "state": {"type": "string", "enum": list(WorkloadState.ALL)},
    "cluster": {**NSTR, "description": "the worker it is placed on"},
    "generation": {**INT, "description": "raised each time a placement is abandoned"},
    "reason": NSTR,
    "problem": {**NSTR, "description": "what no worker can honour in the object itself; it waits until fixed"},
    "deleted": BOOL,
    "createdAt": NTIME,
    "submittedAt": TIME,
    "placedAt": NTIME,
    "admittedAt": NTIME,
    "startedAt": NTIME,
    "finishedAt": NTIME,
    "updatedAt": TIME,
}

PLACEMENT: Obj = _obj(
    {
        "id": INT,
        "generation": INT,
        "cluster": STR,
        "strategy": STR,
        "score": {"type": "number", "nullable": True},
        "state": STR,
        "outcome": NSTR,
        "remoteUid": NSTR,
        "summary": {**NSTR, "description": "the decision's one-line why"},
        "createdAt": TIME,
        "mirroredAt": NTIME,
        "admittedAt": NTIME,
        "finishedAt": NTIME,
        "endedAt": NTIME,
    }
)

WORKLOAD_DETAIL: Obj = {
    **WORKLOAD_SUMMARY,
    "objectGeneration": INT,
    "statusMode": {**STR, "description": "status (spec.managedBy) or annotations (suspended Job)"},
    "noFailover": BOOL,
    "clusterSelector": {**STRING_MAP, "nullable": True},
    "excluded": {"type": "array", "items": STR, "description": "workers not to try again"},
    "podSets": {"type": "array", "items": {"type": "object"}},
    "placementId": {"type": "integer", "nullable": True},
    "decisionSummary": NSTR,
    "remoteStatus": {"type": "object", "nullable": True, "description": "the worker's Job status when it finished"},
    "cleanedAt": NTIME,
    "placements": {"type": "array", "items": _ref("Placement"), "description": "every attempt, oldest first"},
}

DECISION: Obj = {
    "type": "object",
    "description": "Every worker's verdict at decision time, as stored in SQL (dispatcher explain prints it).",
    "properties": {
        "strategy": STR,
        "mode": {**STR, "description": "binpack or spread"},
        "at": {"type": "number", "description": "Unix time of the decision"},
        "chosen": NSTR,
        "score": {"type": "number", "nullable": True},
        "summary": STR,
        "workers": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "cluster": STR,
                    "feasible": BOOL,
                    "score": {"type": "number"},
                    "terms": {"type": "object", "additionalProperties": {"type": "number"}},
                    "clusterQueue": NSTR,
                    "reason": STR,
                },
            },
        },
    },
}

SCHEMAS: Obj = {
    "Error": _obj(
        {
            "error": _obj(
                {
                    "code": {"type": "integer", "minimum": 400, "maximum": 599},
                    "reason": {**STR, "description": "BadRequest, Unauthorized, Forbidden, NotFound, ..."},
                    "message": {**STR, "description": "what went wrong and what to do"},
                }
            )
        }
    ),
    "Health": _obj({"status": {"type": "string", "enum": ["ok"]}}),
    "Ready": _obj(
        {
            "status": {"type": "string", "enum": ["ready", "not ready"]},
            "reason": NSTR,
            "checks": _obj(
                {
                    "started": BOOL,
                    "database": {"type": "string", "enum": ["ok", "unreachable"]},
                    "manager": {
                        "type": "string",
                        "enum": ["ok", "refused"],
                        "description": "refused: the manager answers the dispatcher's informers with 401/403",
                    },
                }
            ),
            "leader": {**BOOL, "description": "this replica leads (always true without leader election)"},
            "leaderIdentity": {**NSTR, "description": "the Lease's holder as this replica saw it (HA only)"},
        }
    ),
    "ClusterSummary": _obj(CLUSTER_SUMMARY),
    "ClusterList": _obj({"items": {"type": "array", "items": _ref("ClusterSummary")}}),
    "Policy": _obj(
        {
            "mode": {"type": "string", "enum": ["binpack", "spread"]},
            "strategy": {"type": "string", "enum": ["scored", "allAtOnce", "incremental"]},
            "admissionTimeoutSeconds": {"type": "number", "minimum": 0},
            "lostTimeoutSeconds": {"type": "number", "minimum": 0},
            "suspectAfterSeconds": {"type": "number", "minimum": 0},
            "finishedRetentionSeconds": {"type": "number", "minimum": 0},
        }
    ),
    "ClusterDetail": _obj(CLUSTER_DETAIL),
    "CordonResult": _obj({"cluster": _ref("ClusterSummary")}),
    "WorkloadControlResult": _obj(
        {
            "workload": {**STR, "description": "namespace/name"},
            "state": {**STR, "description": "the workload's state after the action"},
            "stopped": {**BOOL, "description": "stopped by an operator: never placed until resumed"},
            "changed": {**BOOL, "description": "false when it was already so (the action is idempotent)"},
            "message": {**STR, "description": "what happened, in one line"},
        }
    ),
    "ActionPending": _obj(
        {
            "cluster": _ref("ClusterSummary"),
            "message": {**STR, "description": "what is still running, and how to see when it took effect"},
        }
    ),
    "DrainResult": _obj(
        {
            "cluster": _ref("ClusterSummary"),
            "moved": {**COUNT, "description": "workloads being moved to other workers"},
            "running": {**BOOL, "description": "whether running workloads were moved too"},
        }
    ),
    "WorkloadSummary": _obj(WORKLOAD_SUMMARY),
    "WorkloadList": _obj(
        {
            "items": {"type": "array", "items": _ref("WorkloadSummary")},
            "continue": {**NSTR, "description": "pass as ?continue= for the next page; null on the last page"},
        }
    ),
    "Placement": PLACEMENT,
    "Event": _obj(
        {
            "id": INT,
            "at": TIME,
            "type": {**STR, "description": "FailedOver, WorkerLost, Fenced, TimedOut, WorkerHealth, Placed, ..."},
            "cluster": {**NSTR, "description": "the worker it happened on"},
            "workloadId": {"type": "integer", "nullable": True},
            "workload": {**NSTR, "description": "namespace/name of the workload, while it is stored"},
            "message": STR,
        }
    ),
    "EventList": _obj({"items": {"type": "array", "items": _ref("Event"), "description": "newest first"}}),
    "Summary": _obj(
        {
            "total": _ref("StateCounts"),
            "queues": {
                "type": "array",
                "description": "per LocalQueue (namespace and queue name), by namespace then name",
                "items": _obj({"namespace": STR, "queue": STR, "counts": _ref("StateCounts"), "total": COUNT}),
            },
            "namespaces": {
                "type": "array",
                "items": _obj({"namespace": STR, "counts": _ref("StateCounts"), "total": COUNT}),
            },
            "clusters": {
                "type": "array",
                "description": "per worker, workloads placed there (finished ones included)",
                "items": _obj({"cluster": STR, "counts": _ref("StateCounts"), "total": COUNT}),
            },
        }
    ),
    "StateCounts": _obj(dict.fromkeys(WorkloadState.ALL, COUNT), "workloads per state, every state present"),
    "WorkloadDetail": _obj(WORKLOAD_DETAIL),
    "Decision": DECISION,
    "Explanation": _obj(
        {
            "namespace": STR,
            "name": STR,
            "state": {"type": "string", "enum": list(WorkloadState.ALL)},
            "cluster": NSTR,
            "generation": INT,
            "reason": NSTR,
            "problem": NSTR,
            "decision": {**DECISION, "nullable": True},
            "placements": {
                "type": "array",
                "items": _obj(
                    {
                        "id": INT,
                        "generation": INT,
                        "cluster": STR,
                        "score": {"type": "number", "nullable": True},
                        "state": STR,
                        "outcome": NSTR,
                        "decision": _ref("Decision"),
                    }
                ),
            },
            "text": {**STR, "description": "the same, as `dispatcher explain` prints it"},
        }
    ),
}
