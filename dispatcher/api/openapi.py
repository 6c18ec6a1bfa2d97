"""The OpenAPI 3.0 document of the HTTP API, written by hand to match :mod:`.app` and :mod:`.views` exactly.

Response objects list every property they carry (``additionalProperties: false``), so a handler that drifts
from this document fails the schema checks in ``tests/api``. Served at ``GET /api/v1/openapi.json``.
"""

from __future__ import annotations

import json
from typing import Any

from .. import __version__
from ..store.models import WorkloadState

__all__ = ["openapi_document"]

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
    "reason": {
        **NSTR,
        "description": "why a NotReady worker refuses the dispatcher (Unauthorized, or Forbidden and what)",
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

AMOUNTS = ("nominal", "used", "reserved", "free")

QUOTA_ROW: Obj = _obj(
    {
        "clusterQueue": STR,
        "flavor": STR,
        "resource": STR,
        "nominal": {**INT, "description": "Kueue units: milli-cores for cpu, bytes for memory, else whole units"},
        "used": {**INT, "description": "admitted by the worker's Kueue"},
        "reserved": {**INT, "description": "held for our placements the worker has not admitted yet"},
        "free": {**INT, "description": "what a new workload can still get (cohort borrowing included)"},
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
            "type": {**STR, "description": "FailedOver, Fenced, TimedOut, Drained, Rejected, Placed, ..."},
            "cluster": {**NSTR, "description": "the worker it happened on"},
            "workloadId": {"type": "integer", "nullable": True},
            "workload": {**NSTR, "description": "namespace/name of the workload, while it is stored"},
            "message": STR,
        }
    ),
    "EventList": _obj({"items": {"type": "array", "items": _ref("Event"), "description": "newest first"}}),
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


def _path_param(name: str, description: str, *, subdomain: bool) -> Obj:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {
            "type": "string",
            "minLength": 1,
            "maxLength": 253 if subdomain else 63,
            "pattern": DNS_SUBDOMAIN if subdomain else DNS_LABEL,
        },
    }


def _query_param(name: str, description: str, schema: Obj) -> Obj:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


PARAMETERS: Obj = {
    "ClusterName": _path_param("name", "the worker's name, as in clusters.yaml", subdomain=False),
    "Namespace": _path_param("namespace", "the manager object's namespace", subdomain=False),
    "WorkloadName": _path_param("name", "the manager object's name", subdomain=True),
}

E400 = _error("a bad parameter; the message names it")
E401 = {
    **_error("no token, or one this dispatcher does not know"),
    "headers": {"WWW-Authenticate": {"schema": {"type": "string"}, "description": 'Bearer realm="kueue-dispatcher"'}},
}
E403 = _error("the token has the read role; this needs an admin token")
E500 = _error("an unexpected error; the message has an id to find it in the dispatcher's log")
E503 = _error("the database does not answer")


def _op(op_id: str, summary: str, ok: Obj, *, errors: Obj, params: list[Obj] | None = None, **extra: Any) -> Obj:
    out: Obj = {"operationId": op_id, "summary": summary, "responses": {"200": ok, **errors}, **extra}
    if params:
        out["parameters"] = params
    return out


def _cluster_action(op_id: str, summary: str, result: str, params: list[Obj] | None = None) -> Obj:
    return {
        "post": _op(
            op_id,
            summary,
            _json(result, "done"),
            params=params,
            errors={
                "202": _json("ActionPending", "still running after 30 s (a slow database or worker); goes on"),
                "400": E400,
                "401": E401,
                "403": E403,
                "404": _error("no such worker"),
                "409": _error("the dispatcher refused the change; the message says why"),
                "500": E500,
                "501": _error("this dispatcher version cannot do it yet"),
            },
        ),
        "parameters": [{"$ref": "#/components/parameters/ClusterName"}],
    }


_WORKLOAD_PARAMS = [
    {"$ref": "#/components/parameters/Namespace"},
    {"$ref": "#/components/parameters/WorkloadName"},
]
_READ_ERRORS = {"400": E400, "401": E401, "500": E500}

PATHS: Obj = {
    "/healthz": {
        "get": _op(
            "healthz",
            "Liveness: the process answers",
            _json("Health", "alive"),
            errors={},
            security=[],
            tags=["health"],
        )
    },
    "/readyz": {
        "get": _op(
            "readyz",
            "Readiness: started, and the database answers",
            _json("Ready", "ready"),
            errors={"503": _json("Ready", "not ready; reason says why")},
            security=[],
            tags=["health"],
        )
    },
    "/metrics": {
        "get": _op(
            "metrics",
            "Prometheus metrics (kueue_dispatcher_*)",
            {
                "description": "the Prometheus text format, or OpenMetrics when the Accept header asks for it",
                "content": {
                    "text/plain": {"schema": {"type": "string"}},
                    "application/openmetrics-text": {"schema": {"type": "string"}},
                },
            },
            errors={},
            security=[],
            tags=["health"],
        )
    },
    "/api/v1/openapi.json": {
        "get": _op(
            "openapi",
            "This document",
            {"description": "OpenAPI 3.0", "content": {"application/json": {"schema": {"type": "object"}}}},
            errors={"401": E401},
            tags=["meta"],
        )
    },
    "/api/v1/policy": {
        "get": _op(
            "getPolicy",
            "The placement and failover settings: mode, strategy, admission and lost timeouts",
            _json("Policy", "the settings"),
            errors=_READ_ERRORS,
            tags=["clusters"],
        )
    },
    "/api/v1/clusters": {
        "get": _op(
            "listClusters",
            "Every worker: health, cordon, weight, labels, sync, in-flight placements, latency",
            _json("ClusterList", "the workers, in configuration order"),
            errors=_READ_ERRORS,
            tags=["clusters"],
        )
    },
    "/api/v1/clusters/{name}": {
        "get": _op(
            "getCluster",
            "One worker, with its free quota per ClusterQueue and flavor and its HAMi vGPUs",
            _json("ClusterDetail", "the worker"),
            errors={**_READ_ERRORS, "404": _error("no such worker")},
            tags=["clusters"],
        ),
        "parameters": [{"$ref": "#/components/parameters/ClusterName"}],
    },
    "/api/v1/clusters/{name}/cordon": _cluster_action(
        "cordonCluster", "Place no new workloads on the worker (those on it stay)", "CordonResult"
    ),
    "/api/v1/clusters/{name}/uncordon": _cluster_action(
        "uncordonCluster", "Place workloads on the worker again", "CordonResult"
    ),
    "/api/v1/clusters/{name}/drain": _cluster_action(
        "drainCluster",
        "Cordon the worker and move its workloads that have not started elsewhere (with running=true, also "
        "the running ones, which restart elsewhere)",
        "DrainResult",
        params=[_query_param("running", "also move running workloads (default false)", {"type": "boolean"})],
    ),
    "/api/v1/workloads": {
        "get": _op(
            "listWorkloads",
            "Workloads, newest first (order=oldest for the other way), filtered and paginated",
            _json("WorkloadList", "one page"),
            errors={**_READ_ERRORS, "503": E503},
            params=[
                _query_param("state", "only this state", {"type": "string", "enum": list(WorkloadState.ALL)}),
                _query_param(
                    "cluster",
                    "only those on this worker",
                    {"type": "string", "minLength": 1, "maxLength": 63, "pattern": DNS_LABEL},
                ),
                _query_param(
                    "queue",
                    "only those of this LocalQueue name",
                    {"type": "string", "minLength": 1, "maxLength": 253, "pattern": DNS_SUBDOMAIN},
                ),
                _query_param(
                    "namespace",
                    "only those of this namespace",
                    {"type": "string", "minLength": 1, "maxLength": 63, "pattern": DNS_LABEL},
                ),
                _query_param(
                    "order",
                    "newest (default: the most recently submitted first) or oldest",
                    {"type": "string", "enum": ["newest", "oldest"]},
                ),
                _query_param("limit", "page size (default 100)", {"type": "integer", "minimum": 1, "maximum": 1000}),
                _query_param(
                    "continue",
                    "the continue value of the previous page (with the same filters)",
                    {"type": "string", "minLength": 1},
                ),
            ],
            tags=["workloads"],
        )
    },
    "/api/v1/workloads/{namespace}/{name}": {
        "get": _op(
            "getWorkload",
            "One workload (the newest of that name) with its placement history",
            _json("WorkloadDetail", "the workload"),
            errors={**_READ_ERRORS, "404": _error("no such workload"), "503": E503},
            tags=["workloads"],
        ),
        "parameters": _WORKLOAD_PARAMS,
    },
    "/api/v1/workloads/{namespace}/{name}/explain": {
        "get": _op(
            "explainWorkload",
            "Why it went where it went, or why it waits: every worker's score or reason",
            _json("Explanation", "the stored decision, as JSON and as text"),
            errors={**_READ_ERRORS, "404": _error("no such workload"), "503": E503},
            tags=["workloads"],
        ),
        "parameters": _WORKLOAD_PARAMS,
    },
}


def _dashboard_file(op_id: str, summary: str, media_type: str) -> Obj:
    return {
        "get": _op(
            op_id,
            summary,
            {"description": "the file", "content": {media_type: {"schema": {"type": "string"}}}},
            errors={"400": E400},
            security=[],
            tags=["dashboard"],
        )
    }


PATHS.update(
    {
        "/api/v1/events": {
            "get": _op(
                "listEvents",
                "Recent audit events of the given types (failovers, fencing, timeouts, ...), newest first",
                _json("EventList", "the events"),
                errors={**_READ_ERRORS, "503": E503},
                params=[
                    _query_param(
                        "type",
                        "event types, comma-separated (default FailedOver,Fenced,TimedOut)",
                        {"type": "string", "pattern": f"^{EVENT_TYPES_PATTERN}$"},
                    ),
                    _query_param(
                        "limit", "at most this many (default 20)", {"type": "integer", "minimum": 1, "maximum": 200}
                    ),
                ],
                tags=["events"],
            )
        },
        "/": _dashboard_file(
            "dashboard", "The dashboard: workers, workloads, recent failovers (no token)", "text/html"
        ),
        "/dashboard.js": _dashboard_file("dashboardScript", "The dashboard's script", "text/javascript"),
        "/dashboard.css": _dashboard_file("dashboardStyle", "The dashboard's style sheet", "text/css"),
    }
)

DOCUMENT: Obj = {
    "openapi": "3.0.3",
    "info": {
        "title": "kueue-dispatcher API",
        "version": __version__,
        "description": (
            "Workers, workloads and placement decisions of a kueue-dispatcher. Every route under /api/v1 needs "
            "'Authorization: Bearer TOKEN' (a read token for GET, an admin token for POST); /healthz, /readyz, "
            "/metrics and the dashboard's files (/, /dashboard.js, /dashboard.css) need none. "
            'Errors are {"error": {"code", "reason", "message"}}.'
        ),
    },
    "servers": [{"url": "/"}],
    "security": [{"bearerAuth": []}],
    "tags": [
        {"name": "health", "description": "probes and metrics (no token)"},
        {"name": "clusters", "description": "the worker clusters"},
        {"name": "workloads", "description": "the workloads the dispatcher took"},
        {"name": "events", "description": "what the dispatcher did and why"},
        {"name": "dashboard", "description": "a page showing the workers and workloads (its data calls need a token)"},
        {"name": "meta", "description": "this API"},
    ],
    "paths": PATHS,
    "components": {
        "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        "schemas": SCHEMAS,
        "parameters": PARAMETERS,
    },
}


def openapi_document() -> Obj:
    """A fresh copy of the document, without shared sub-objects (callers may change it)."""
    result: Obj = json.loads(json.dumps(DOCUMENT))
    return result
