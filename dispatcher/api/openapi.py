"""The OpenAPI 3.0 document of the HTTP API, written by hand to match :mod:`.app` and :mod:`.views` exactly.

Response objects list every property they carry (``additionalProperties: false``), so a handler that drifts
from this document fails the schema checks in ``tests/api``. Served at ``GET /api/v1/openapi.json``.
"""

from __future__ import annotations

import json
from typing import Any

from .. import __version__
from ..store.models import WorkloadState
from .schemas import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    EVENT_TYPES_PATTERN,
    SCHEMAS,
    Obj,
    _error,
    _json,
)

__all__ = ["openapi_document"]


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


def _workload_action(op_id: str, summary: str) -> Obj:
    return {
        "post": _op(
            op_id,
            summary,
            _json("WorkloadControlResult", "done, or already so"),
            errors={
                "400": E400,
                "401": E401,
                "403": E403,
                "404": _error("no such workload"),
                "409": _error("it has finished, or it changed or stayed busy meanwhile; the message says why"),
                "500": E500,
                "501": _error("this dispatcher version cannot do it yet"),
                "503": _error("a standby replica changes nothing"),
                "504": _error("still deleting the copy after 45 s (a slow worker); goes on"),
            },
            tags=["workloads"],
        ),
        "parameters": _WORKLOAD_PARAMS,
    }


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
    "/api/v1/workloads/{namespace}/{name}/stop": _workload_action(
        "stopWorkload",
        "Stop the workload (kueuectl stop workload): its copy is deleted and it is not placed until resumed",
    ),
    "/api/v1/workloads/{namespace}/{name}/resume": _workload_action(
        "resumeWorkload", "Resume a stopped workload: it may be placed again"
    ),
    "/api/v1/workloads/{namespace}/{name}/cancel": _workload_action(
        "cancelWorkload",
        "Cancel the workload for good (its copy is deleted; the manager object stays, marked Cancelled)",
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
                errors={**_READ_ERRORS, "404": _error("no such workload"), "503": E503},
                params=[
                    _query_param(
                        "type",
                        "event types, comma-separated (default FailedOver,Fenced,TimedOut; with workload or "
                        "cluster: every type)",
                        {"type": "string", "pattern": f"^{EVENT_TYPES_PATTERN}$"},
                    ),
                    _query_param(
                        "workload",
                        "only this workload's events: NAMESPACE/NAME (the newest workload of that name)",
                        {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
                    ),
                    _query_param(
                        "cluster",
                        "only those on this worker (type=WorkerHealth: its health history)",
                        {"type": "string", "minLength": 1, "maxLength": 63, "pattern": DNS_LABEL},
                    ),
                    _query_param(
                        "limit", "at most this many (default 20)", {"type": "integer", "minimum": 1, "maximum": 200}
                    ),
                ],
                tags=["events"],
            )
        },
        "/api/v1/summary": {
            "get": _op(
                "getSummary",
                "How many workloads are in each state, per LocalQueue, per namespace and per worker",
                _json("Summary", "the counts"),
                errors={**_READ_ERRORS, "503": E503},
                tags=["workloads"],
            )
        },
        "/": _dashboard_file(
            "dashboard", "The dashboard: workers, workloads, recent failovers (no token)", "text/html"
        ),
        "/dashboard.js": _dashboard_file("dashboardScript", "The dashboard's script", "text/javascript"),
        "/format.js": _dashboard_file(
            "dashboardFormat", "The dashboard's DOM and unit formatting (an ES module)", "text/javascript"
        ),
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
            "/metrics and the dashboard's files (/, /dashboard.js, /format.js, /dashboard.css) need none. "
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
