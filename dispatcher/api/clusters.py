"""``/api/v1/clusters``: the workers as the dispatcher sees them (health, capacity, fencing), and an operator's
``cordon``, ``uncordon`` and ``drain`` of one (admin token), what ``dispatcher cluster ...`` calls."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

from ..fencing import Deposed
from ..logs import redact_text
from . import overview, views
from .common import DISPATCHER, PENDING_ACTIONS, ROLE, name_param, query_params, show_value
from .errors import ApiError, json_response

__all__ = ["cancel_actions", "cordon", "drain", "get_cluster", "list_clusters", "uncordon"]

log = logging.getLogger("dispatcher.api")
#: A cordon or drain longer than this (a slow database, an unreachable worker) answers 202 and goes on.
ACTION_TIMEOUT = 30.0


def _cluster(request: web.Request) -> str:
    d = request.app[DISPATCHER]
    name = name_param("name", request.match_info["name"], subdomain=False)
    if name not in d.capacities:
        known = ", ".join(d.capacities) or "none"
        raise ApiError(404, f"no cluster {name!r}; the workers are: {known} (GET /api/v1/clusters)")
    return name


async def list_clusters(request: web.Request) -> web.Response:
    query_params(request, ())
    d = request.app[DISPATCHER]
    since = await overview.health_since(request)
    items = [
        views.cluster_summary(cap, d.clients.get(name), since.get(name), _fencing(d, name))
        for name, cap in d.capacities.items()
    ]
    return json_response({"items": items})


def _fencing(d: Any, name: str) -> dict[str, Any] | None:
    """The worker's fencing as the dispatcher sees it (its Lease renewals, its agent's heartbeat)."""
    leases = getattr(d, "leases", None)
    return leases.describe(name) if leases is not None else None


async def get_cluster(request: web.Request) -> web.Response:
    query_params(request, ())
    d = request.app[DISPATCHER]
    name = _cluster(request)
    since = await overview.health_since(request)
    detail = views.cluster_detail(d.capacities[name], d.clients.get(name), since.get(name), _fencing(d, name))
    return json_response(detail)


async def _cluster_action(request: web.Request, action: str) -> web.Response:
    d = request.app[DISPATCHER]
    params = query_params(request, ("running",) if action == "drain" else ())
    name = _cluster(request)
    running = False
    if "running" in params:
        if params["running"] not in ("true", "false"):
            raise ApiError(400, f"running: expected true or false, got {show_value(params['running'])}")
        running = params["running"] == "true"
    attr = "drain" if action == "drain" else "cordon"
    method = getattr(d, attr, None)
    if not callable(method):
        raise ApiError(
            501,
            f"this dispatcher cannot {action} workers yet (it has no Dispatcher.{attr}); run a dispatcher version "
            "that supports it",
        )
    peer = request.remote or "?"
    call = method(name, running) if action == "drain" else method(name, action == "cordon")
    task: asyncio.Future[Any] = asyncio.ensure_future(call)
    actions = request.app[PENDING_ACTIONS]
    actions.add(task)
    task.add_done_callback(actions.discard)
    try:
        async with asyncio.timeout(ACTION_TIMEOUT):
            result = await asyncio.shield(task)
    except TimeoutError:
        task.add_done_callback(lambda t: _log_late_failure(t, action, name))
        log.warning("API: %s %s is still running after %gs; it goes on in the background", action, name, ACTION_TIMEOUT)
        return json_response(
            {
                "cluster": views.cluster_summary(d.capacities[name], d.clients.get(name), None, _fencing(d, name)),
                "message": f"the {action} of {name} is still in progress (the database or the worker is slow to "
                f"answer) and goes on in the background; GET /api/v1/clusters/{name} shows when it took effect",
            },
            status=202,
        )
    except LookupError:
        raise ApiError(404, f"no cluster {name!r} (it went away); list them with GET /api/v1/clusters") from None
    except Deposed:
        leader = getattr(d, "leader_identity", None) or "another replica"
        raise ApiError(
            503, f"this replica is a standby and changes nothing; {action} {name} on the leader ({leader})"
        ) from None
    except ValueError as exc:
        raise ApiError(409, f"cannot {action} {name}: {redact_text(str(exc))[:500]}") from None
    log.info("API: %s %s by a %s token from %s", action, name, ROLE.get(), peer)
    since = (await overview.health_since(request)).get(name)
    summary = views.cluster_summary(d.capacities[name], d.clients.get(name), since, _fencing(d, name))
    body: dict[str, Any] = {"cluster": summary}
    if action == "drain":
        body.update(moved=int(result), running=running)
    return json_response(body)


def _log_late_failure(task: asyncio.Future[Any], action: str, name: str) -> None:
    """Log how an action answered with 202 ended, if it failed (a failure after the 202 is not lost)."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.warning("API: the %s of %s failed: %s", action, name, redact_text(f"{type(exc).__name__}: {exc}")[:500])


async def cancel_actions(app: web.Application) -> None:
    actions: set[asyncio.Future[Any]] = app[PENDING_ACTIONS]
    pending = list(actions)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=5.0)


async def cordon(request: web.Request) -> web.Response:
    return await _cluster_action(request, "cordon")


async def uncordon(request: web.Request) -> web.Response:
    return await _cluster_action(request, "uncordon")


async def drain(request: web.Request) -> web.Response:
    return await _cluster_action(request, "drain")


# -- handlers: workloads ------------------------------------------------------------------------------------
