"""The dispatcher's HTTP API (aiohttp): health, readiness, metrics, workers, workloads and their decisions.

=========================================================  ===========  =============================================
route                                                      token        what
=========================================================  ===========  =============================================
``GET /healthz``                                           none         the process answers
``GET /readyz``                                            none         started and the database answers (else 503);
                                                                        ``leader``: this replica leads (HA)
``GET /metrics``                                           none         Prometheus exposition (:mod:`..metrics`)
``GET /api/v1/openapi.json``                               read         this API's OpenAPI 3.0 document
``GET /api/v1/policy``                                     read         placement and failover settings (timeouts, mode)
``GET /api/v1/clusters``                                   read         every worker: health, cordon, weight, ...
``GET /api/v1/clusters/{name}``                            read         + quota per ClusterQueue/flavor, HAMi vGPUs
``POST /api/v1/clusters/{name}/cordon`` / ``uncordon``     admin        stop / resume placing new workloads there
``POST /api/v1/clusters/{name}/drain?running=``            admin        cordon and move its workloads elsewhere
``POST /api/v1/workloads/{ns}/{name}/stop|resume|cancel``  admin        an operator's controls on one workload
``GET /api/v1/workloads?state=&cluster=&queue=&...``       read         newest first (``order``), paged (``continue``)
``GET /api/v1/workloads/{namespace}/{name}``               read         one workload with its placement history
``GET /api/v1/workloads/{namespace}/{name}/explain``       read         the stored decision, as JSON and as text
``GET /api/v1/summary``                                    read         workloads per state per LocalQueue, namespace,
                                                                        worker (:mod:`.overview`)
``GET /api/v1/events?type=&workload=&cluster=&limit=``     read         recent audit events (failovers, fencing, a
                                                                        workload's, a worker's health history)
``GET /``, ``/dashboard.js``, ``/format.js``, ``.css``     none         the dashboard (its data calls need a token)
=========================================================  ===========  =============================================

Tokens (``Authorization: Bearer …``) are described in :mod:`.auth`. When no token is configured at all,
:func:`serve` refuses any address but a loopback one (127.0.0.1, ::1) and the API then answers without a
token, with a warning in the log; the middleware also refuses token-less requests that arrive on any other
local address, in case the application is served some other way.

Errors are JSON (:mod:`.errors`). Unknown query parameters and bad values are 400 naming the parameter; a
database that does not answer is 503 (and counts in ``kueue_dispatcher_sql_errors_total``); anything
unexpected is 500 with an error id, logged (redacted) under that id. Nothing logs a header or a token.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import ipaddress
import json
import logging
import os
import re
import traceback
import uuid
from collections.abc import Awaitable, Callable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..explain import render_workload
from ..logs import redact_text
from ..metrics import Metrics
from ..store.models import WorkloadState
from . import clusters, controls, overview, views
from .auth import ADMIN, ENV_VAR, TokenError, TokenStore
from .common import (
    DISPATCHER,
    LIMIT,
    METRICS,
    PENDING_ACTIONS,
    ROLE,
    TOKENS,
    name_param,
    query_params,
    run_sql,
    show_value,
)
from .errors import ApiError, error_response, json_response
from .openapi import openapi_document

if TYPE_CHECKING:
    from ..service import Dispatcher

__all__ = [
    "DISPATCHER",
    "METRICS",
    "TOKENS",
    "ApiConfigError",
    "bound_address",
    "is_loopback",
    "make_app",
    "parse_listen",
    "serve",
    "start_api",
]

log = logging.getLogger("dispatcher.api")


#: The dashboard's files (``static/``): path -> (file, content type). The page holds no data; it fetches
#: the API with the token the user gives it.
DASHBOARD_FILES = {
    "/": ("index.html", "text/html"),
    "/dashboard.js": ("dashboard.js", "text/javascript"),
    "/format.js": ("format.js", "text/javascript"),
    "/dashboard.css": ("dashboard.css", "text/css"),
}
STATIC_DIR = Path(__file__).resolve().parent / "static"
#: The dashboard loads only its own files and talks only to this API.
DASHBOARD_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", *DASHBOARD_FILES})
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
REALM = 'Bearer realm="kueue-dispatcher"'
DEFAULT_LISTEN = "127.0.0.1:8080"

#: The readiness probe's database ping gives up after these many seconds (an API query: SQL_TIMEOUT).
PING_TIMEOUT = 2.0
MAX_LIMIT = 1000
DEFAULT_LIMIT = 100


#: The role of the request being handled (for the audit log line of the actions).


class ApiConfigError(ValueError):
    """The API cannot start as configured (no tokens on a public address, a bad token file, a busy port)."""


# -- helpers ------------------------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback IP literal (127.0.0.0/8, ::1). Names such as ``localhost`` do not count."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _local_is_loopback(request: web.Request) -> bool:
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    if isinstance(sockname, (tuple, list)) and sockname:
        return is_loopback(str(sockname[0]))
    return False


def _fingerprint(filters: Mapping[str, str]) -> str:
    canonical = json.dumps(sorted(filters.items()), separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _encode_continue(after_id: int, filters: Mapping[str, str]) -> str:
    raw = json.dumps({"v": 1, "after": after_id, "q": _fingerprint(filters)}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str, filters: Mapping[str, str]) -> int:
    bad = ApiError(
        400,
        "continue: not a token this API issued; pass the 'continue' value of the previous page unchanged, "
        "or start again without continue",
    )
    if not token or len(token) > 200 or not re.fullmatch(r"[A-Za-z0-9_-]+", token):
        raise bad
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError):
        raise bad from None
    if not isinstance(data, dict) or data.get("v") != 1:
        raise bad
    after, fp = data.get("after"), data.get("q")
    if not isinstance(after, int) or isinstance(after, bool) or after < 0 or not isinstance(fp, str):
        raise bad
    if fp != _fingerprint(filters):
        raise ApiError(
            400,
            "continue: this token belongs to a listing with other filters; repeat the same state, cluster, "
            "queue, namespace and order as on the first page, or start again without continue",
        )
    return after


def _redacted_traceback(exc: BaseException) -> str:
    return redact_text("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip())


# -- middlewares ------------------------------------------------------------------------------------------


def _http_message(request: web.Request, exc: web.HTTPException) -> str:
    path = show_value(request.path, 120)
    if exc.status == 404:
        return f"no route {request.method} {path}; the routes are listed by GET /api/v1/openapi.json"
    if exc.status == 405:
        allowed = exc.headers.get("Allow", "")
        return f"{request.method} is not allowed on {path}; use {allowed or 'another method'}"
    if exc.status == 413:
        return "the request body is too large; these endpoints take no body"
    return str(exc.reason)


@web.middleware
async def error_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return error_response(exc.code, exc.message, headers=exc.headers)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        keep = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
        return error_response(exc.status, _http_message(request, exc), headers=keep)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        error_id = uuid.uuid4().hex[:12]
        log.error("%s %s failed (error id %s):\n%s", request.method, request.path, error_id, _redacted_traceback(exc))
        return error_response(500, f"internal error (error id {error_id}); the dispatcher's log has the details")


@web.middleware
async def auth_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    if request.path in OPEN_PATHS:
        return await handler(request)
    store = request.app[TOKENS]
    if not store:
        if not _local_is_loopback(request):
            raise ApiError(
                401,
                "no API tokens are configured, so this API answers only on 127.0.0.1; configure tokens "
                f"(${ENV_VAR} or an API token file) to serve it on another address",
                headers={"WWW-Authenticate": REALM},
            )
        ROLE.set(f"{ADMIN} (no tokens configured)")
        return await handler(request)
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise ApiError(
            401,
            "this endpoint needs a token: send the header 'Authorization: Bearer TOKEN' with a read or admin "
            f"token (from the dispatcher's API token file or ${ENV_VAR})",
            headers={"WWW-Authenticate": REALM},
        )
    role = store.role_for(token)
    if role is None:
        raise ApiError(
            401,
            "the bearer token is not one this dispatcher knows; check it for typos, or get one from the "
            f"dispatcher's API token file or ${ENV_VAR}",
            headers={"WWW-Authenticate": f'{REALM}, error="invalid_token"'},
        )
    if request.method not in READ_METHODS and role != ADMIN:
        raise ApiError(
            403,
            f"{request.method} {show_value(request.path, 120)} changes the dispatcher and needs an admin token; "
            "this token has the read role",
        )
    ROLE.set(role)
    return await handler(request)


# -- handlers: health and metrics ---------------------------------------------------------------------------


async def healthz(_request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    d = request.app[DISPATCHER]
    started = d.started.is_set()
    database = "ok"
    try:
        async with asyncio.timeout(PING_TIMEOUT):
            await d.repo.ping()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        database = "unreachable"
        request.app[METRICS].sql_error()
        log.warning("readiness: the database does not answer (%s)", type(exc).__name__)
    reason: str | None = None
    refused_by = getattr(d, "manager_rejection", None)
    refused = refused_by() if callable(refused_by) else None
    if not started:
        reason = "the dispatcher is starting: connecting to the clusters and resuming open workloads from SQL"
    elif database != "ok":
        reason = f"the database does not answer within {PING_TIMEOUT:g}s; no decision can be recorded until it does"
    elif refused:
        reason = f"the manager cluster refuses the dispatcher ({refused}): no Job can be taken until it accepts it"
    body = {
        "status": "not ready" if reason else "ready",
        "reason": reason,
        "checks": {"started": started, "database": database, "manager": "refused" if refused else "ok"},
        # Ready means "can serve" (a standby serves the read-only API); leadership is shown, not required.
        "leader": bool(getattr(d, "is_leader", True)),
        "leaderIdentity": getattr(d, "leader_identity", None),
    }
    return json_response(body, status=503 if reason else 200)


async def metrics_handler(request: web.Request) -> web.Response:
    body, content_type = request.app[METRICS].render(request.headers.get("Accept", ""))
    return web.Response(body=body, headers={"Content-Type": content_type, "Cache-Control": "no-store"})


async def openapi(_request: web.Request) -> web.Response:
    return json_response(openapi_document())


# -- handlers: clusters -------------------------------------------------------------------------------------


async def get_policy(request: web.Request) -> web.Response:
    """The dispatcher's placement and failover settings (a drill against it reads its real lost timeout)."""
    query_params(request, ())
    p = request.app[DISPATCHER].policy
    return json_response(
        {
            "mode": p.mode,
            "strategy": p.strategy,
            "admissionTimeoutSeconds": float(p.admission_timeout),
            "lostTimeoutSeconds": float(p.lost_timeout),
            "suspectAfterSeconds": float(p.suspect_after),
            "finishedRetentionSeconds": float(p.finished_retention),
        }
    )


LIST_PARAMS = ("state", "cluster", "queue", "namespace", "order", "limit", "continue")


async def list_workloads(request: web.Request) -> web.Response:
    params = query_params(request, LIST_PARAMS)
    filters: dict[str, str] = {}
    if "state" in params:
        if params["state"] not in WorkloadState.ALL:
            raise ApiError(
                400, f"state: {show_value(params['state'])} is not a state; use one of {', '.join(WorkloadState.ALL)}"
            )
        filters["state"] = params["state"]
    if "cluster" in params:
        filters["cluster"] = name_param("cluster", params["cluster"], subdomain=False)
    if "queue" in params:
        filters["queue"] = name_param("queue", params["queue"], subdomain=True)
    if "namespace" in params:
        filters["namespace"] = name_param("namespace", params["namespace"], subdomain=False)
    order = params.get("order", "newest")
    if order not in ("newest", "oldest"):
        raise ApiError(400, f"order: expected newest or oldest, got {show_value(order)}")
    # The order is part of what a continue token belongs to (a cursor means something else the other way).
    filters["order"] = order
    limit = DEFAULT_LIMIT
    if "limit" in params:
        raw = params["limit"]
        if not LIMIT.fullmatch(raw) or not 1 <= int(raw) <= MAX_LIMIT:
            raise ApiError(400, f"limit: expected a whole number from 1 to {MAX_LIMIT}, got {show_value(raw)}")
        limit = int(raw)
    after = _decode_continue(params["continue"], filters) if "continue" in params else 0
    repo = request.app[DISPATCHER].repo
    rows = await run_sql(
        request,
        lambda: repo.list_workloads(
            state=filters.get("state"),
            cluster=filters.get("cluster"),
            queue=filters.get("queue"),
            namespace=filters.get("namespace"),
            limit=limit + 1,
            after_id=after,
            newest_first=order == "newest",
        ),
    )
    more = len(rows) > limit
    rows = rows[:limit]
    token = _encode_continue(rows[-1].id, filters) if more and rows else None
    return json_response({"items": [views.workload_summary(w) for w in rows], "continue": token})


async def _workload(request: web.Request) -> Any:
    query_params(request, ())
    namespace = name_param("namespace", request.match_info["namespace"], subdomain=False)
    name = name_param("name", request.match_info["name"], subdomain=True)
    repo = request.app[DISPATCHER].repo
    wl = await run_sql(request, lambda: repo.get_workload(namespace, name))
    if wl is None:
        raise ApiError(
            404, f"no workload {namespace}/{name}; list them with GET /api/v1/workloads?namespace={namespace}"
        )
    return wl


async def get_workload(request: web.Request) -> web.Response:
    return json_response(views.workload_detail(await _workload(request)))


async def explain_workload(request: web.Request) -> web.Response:
    wl = await _workload(request)
    return json_response(views.explain_view(wl, render_workload(wl)))


# -- handlers: the dashboard's files --------------------------------------------------------------------------


@cache
def _static(name: str) -> bytes:
    return (STATIC_DIR / name).read_bytes()


async def dashboard_file(request: web.Request) -> web.Response:
    query_params(request, ())
    name, content_type = DASHBOARD_FILES[request.path]
    headers = {
        "Content-Type": f"{content_type}; charset=utf-8",
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    if name == "index.html":
        headers["Content-Security-Policy"] = DASHBOARD_CSP
    return web.Response(body=await asyncio.to_thread(_static, name), headers=headers)


# -- the application ------------------------------------------------------------------------------------------


def make_app(dispatcher: Dispatcher, tokens: TokenStore, *, metrics: Metrics | None = None) -> web.Application:
    """The API of ``dispatcher``. Metrics: ``metrics``, else ``dispatcher.metrics``, else a new :class:`Metrics`."""
    app = web.Application(middlewares=[error_middleware, auth_middleware], client_max_size=64 * 1024)
    app[DISPATCHER] = dispatcher
    app[TOKENS] = tokens
    m = metrics if metrics is not None else getattr(dispatcher, "metrics", None)
    if not isinstance(m, Metrics):
        m = Metrics()
    if m.collector.dispatcher is None:
        m.bind(dispatcher)
    app[METRICS] = m
    app[PENDING_ACTIONS] = set()
    app.on_cleanup.append(clusters.cancel_actions)
    r = app.router
    r.add_get("/healthz", healthz)
    r.add_get("/readyz", readyz)
    r.add_get("/metrics", metrics_handler)
    r.add_get("/api/v1/openapi.json", openapi)
    r.add_get("/api/v1/policy", get_policy)
    r.add_get("/api/v1/clusters", clusters.list_clusters)
    r.add_get("/api/v1/clusters/{name}", clusters.get_cluster)
    r.add_post("/api/v1/clusters/{name}/cordon", clusters.cordon)
    r.add_post("/api/v1/clusters/{name}/uncordon", clusters.uncordon)
    r.add_post("/api/v1/clusters/{name}/drain", clusters.drain)
    r.add_get("/api/v1/workloads", list_workloads)
    r.add_get("/api/v1/workloads/{namespace}/{name}", get_workload)
    r.add_get("/api/v1/workloads/{namespace}/{name}/explain", explain_workload)
    for action in ("stop", "resume", "cancel"):
        r.add_post(f"/api/v1/workloads/{{namespace}}/{{name}}/{action}", controls.workload_action)
    r.add_get("/api/v1/summary", overview.get_summary)
    r.add_get("/api/v1/events", overview.list_events)
    for path in DASHBOARD_FILES:
        r.add_get(path, dashboard_file)
    return app


async def serve(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Listen on ``host:port`` (port 0: any free port, see :func:`bound_address`); ``await runner.cleanup()`` stops.

    Without any token configured, only a loopback address is allowed, and the API answers without a token.
    """
    if not app[TOKENS]:
        if not is_loopback(host):
            raise ApiConfigError(
                f"no API tokens are configured, so the API may only listen on 127.0.0.1 (not {host}); set "
                f"${ENV_VAR} or give an API token file ('ROLE TOKEN' per line, ROLE read or admin)"
            )
        log.warning(
            "no API tokens configured: the API on %s:%d answers WITHOUT authentication (loopback only)", host, port
        )
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise ApiConfigError(f"the API cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = bound_address(runner)
    log.info("API listening on http://%s:%d (%r)", bound[0], bound[1], app[TOKENS])
    return runner


def bound_address(runner: web.AppRunner) -> tuple[str, int]:
    """The (host, port) the runner listens on (the first, when several)."""
    addr = runner.addresses[0]
    return str(addr[0]), int(addr[1])


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPv6]:PORT`` → (host, port)."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ApiConfigError(f"API address {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080")
    return host.strip("[]"), int(port)


async def start_api(
    dispatcher: Dispatcher,
    *,
    listen: str = DEFAULT_LISTEN,
    token_file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> web.AppRunner:
    """Load the tokens (file and ``$DISPATCHER_API_TOKENS``), build the app and serve it. Raises ApiConfigError."""
    host, port = parse_listen(listen)
    try:
        tokens = await asyncio.to_thread(TokenStore.load, token_file, environ=environ)
    except TokenError as exc:
        raise ApiConfigError(str(exc)) from None
    return await serve(make_app(dispatcher, tokens), host, port)
