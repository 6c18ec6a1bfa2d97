"""The read-only views behind the dashboard: counts per LocalQueue, namespace and worker, audit events by type,
workload or worker, and since when each worker has been in its health.

=========================================================  ===========  =============================================
route                                                      token        what
=========================================================  ===========  =============================================
``GET /api/v1/summary``                                    read         workloads per state per LocalQueue, per
                                                                        namespace and per worker (SQL GROUP BY)
``GET /api/v1/events?type=&workload=&cluster=&limit=``     read         recent audit events, newest first
=========================================================  ===========  =============================================

A team asks "how many of my jobs wait, and where do the others run": a listing pages through every record to
answer that, the summary is one GROUP BY. The events endpoint serves the failover list (its default types), a
workload's own story (``workload=NS/NAME``: every type) and a worker's health history (``cluster=NAME``,
``type=WorkerHealth``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from datetime import UTC, datetime

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from ..store.models import WorkloadState
from . import views
from .common import DISPATCHER, LIMIT, METRICS, name_param, query_params, run_sql, show_value
from .errors import ApiError, json_response
from .schemas import EVENT_TYPES_PATTERN

__all__ = ["DEFAULT_EVENT_TYPES", "get_summary", "health_since", "list_events"]

log = logging.getLogger("dispatcher.api")

_EVENT_TYPES = re.compile(EVENT_TYPES_PATTERN)
#: The failover list's types: what moved or ended a workload because of a worker, and the fencing behind it.
DEFAULT_EVENT_TYPES = ("FailedOver", "Fenced", "TimedOut")
MAX_EVENTS = 200
DEFAULT_EVENTS = 20
#: How long the cluster views wait for the database to say since when each worker has its health; they still
#: answer without it (the workers' state is in memory, and a dashboard must show it while the database is down).
HEALTH_SINCE_TIMEOUT = 2.0


# -- since when each worker has its health ------------------------------------------------------------------


async def health_since(request: web.Request) -> dict[str, datetime]:
    """When each worker entered the health it has now: from SQL (``clusters.health_since``, kept across restarts
    by :meth:`~dispatcher.store.repo.Repo.record_health`) when it agrees with the health in memory, else from the
    health monitor (a monotonic clock, converted). A "capacity unknown: worker Lost since …" needs the time."""
    d = request.app[DISPATCHER]
    out: dict[str, datetime] = {}
    try:
        async with asyncio.timeout(HEALTH_SINCE_TIMEOUT):
            rows = await d.repo.clusters()
    except (SQLAlchemyError, OSError) as exc:  # TimeoutError is an OSError
        request.app[METRICS].sql_error()
        log.warning("API: no worker health times, the database did not answer (%s)", type(exc).__name__)
        rows = []
    for row in rows:
        cap = d.capacities.get(row.name)
        if cap is not None and row.health == cap.health and row.health_since is not None:
            out[row.name] = row.health_since
    machines = getattr(getattr(d, "health", None), "machines", None) or {}
    wall, mono = time.time(), time.monotonic()
    for name, cap in d.capacities.items():
        m = machines.get(name)
        if name not in out and m is not None and m.state == cap.health and m.since > 0:
            out[name] = datetime.fromtimestamp(wall - (mono - m.since), UTC)
    return out


# -- the summary ----------------------------------------------------------------------------------------------


def _counts(states: dict[str, int]) -> dict[str, int]:
    """Every state, in lifecycle order, zero where there is none (a client need not guess the states)."""
    return {s: int(states.get(s, 0)) for s in WorkloadState.ALL}


async def get_summary(request: web.Request) -> web.Response:
    """Workloads per state per LocalQueue, per namespace and per worker, counted in SQL."""
    query_params(request, ())
    repo = request.app[DISPATCHER].repo
    counts = await run_sql(request, repo.workload_counts)
    total: dict[str, int] = {}
    for states in counts.queues.values():
        for state, n in states.items():
            total[state] = total.get(state, 0) + n
    return json_response(
        {
            "total": _counts(total),
            "queues": [
                {"namespace": ns, "queue": q, "counts": _counts(s), "total": sum(s.values())}
                for (ns, q), s in sorted(counts.queues.items())
            ],
            "namespaces": [
                {"namespace": ns, "counts": _counts(s), "total": sum(s.values())}
                for ns, s in sorted(counts.namespaces().items())
            ],
            "clusters": [
                {"cluster": c, "counts": _counts(s), "total": sum(s.values())}
                for c, s in sorted(counts.clusters.items())
            ],
        }
    )


# -- events ---------------------------------------------------------------------------------------------------


async def list_events(request: web.Request) -> web.Response:
    """Recent audit events, newest first. Without ``workload`` or ``cluster`` the default types are the failover
    list's; with either, every type (a workload's page shows its whole story)."""
    params = query_params(request, ("type", "workload", "cluster", "limit"))
    types: tuple[str, ...] | None = DEFAULT_EVENT_TYPES
    if "workload" in params or "cluster" in params:
        types = None
    if "type" in params:
        if not _EVENT_TYPES.fullmatch(params["type"]):
            raise ApiError(
                400,
                f"type: {show_value(params['type'])} is not a list of event types; give up to 20 names of letters, "
                "comma-separated, e.g. FailedOver,Fenced,TimedOut",
            )
        types = tuple(dict.fromkeys(params["type"].split(",")))
    limit = DEFAULT_EVENTS
    if "limit" in params:
        raw = params["limit"]
        if not LIMIT.fullmatch(raw) or not 1 <= int(raw) <= MAX_EVENTS:
            raise ApiError(400, f"limit: expected a whole number from 1 to {MAX_EVENTS}, got {show_value(raw)}")
        limit = int(raw)
    cluster = name_param("cluster", params["cluster"], subdomain=False) if "cluster" in params else None
    repo = request.app[DISPATCHER].repo
    workload_id: int | None = None
    if "workload" in params:
        namespace, sep, name = params["workload"].partition("/")
        if not sep:
            raise ApiError(
                400, f"workload: {show_value(params['workload'])} is not NAMESPACE/NAME, e.g. team-a/train-1"
            )
        namespace = name_param("workload: the namespace", namespace, subdomain=False)
        name = name_param("workload: the name", name, subdomain=True)
        wl = await run_sql(request, lambda: repo.get_workload(namespace, name))
        if wl is None:
            raise ApiError(
                404, f"no workload {namespace}/{name}; list them with GET /api/v1/workloads?namespace={namespace}"
            )
        workload_id = int(wl.id)
    events = await run_sql(request, lambda: repo.recent_events(types, limit, workload_id=workload_id, cluster=cluster))
    ids = [int(e.workload_id) for e in events if e.workload_id is not None]
    names = await run_sql(request, lambda: repo.workload_names(ids))
    return json_response({"items": [views.event_view(e, names) for e in events]})
