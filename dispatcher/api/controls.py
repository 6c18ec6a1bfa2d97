"""``POST /api/v1/workloads/{namespace}/{name}/stop|resume|cancel``: an operator's controls on one workload
(admin token), what ``dispatcher stop|resume|cancel NS/NAME`` calls. See :mod:`dispatcher.control`."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from ..control import ACTIONS, ControlError
from ..fencing import Deposed
from .common import DISPATCHER, name_param, query_params
from .errors import ApiError, json_response

__all__ = ["workload_action"]

log = logging.getLogger("dispatcher.api")

#: An action waits for a busy workload up to 15 s and deletes a copy (retrying while the worker is unreachable):
#: past this, the API answers 504 and the action goes on.
ACTION_TIMEOUT = 45.0


async def workload_action(request: web.Request) -> web.Response:
    query_params(request, ())
    action = request.path.rstrip("/").rsplit("/", 1)[-1]
    if action not in ACTIONS:
        raise ApiError(404, f"no workload action {action!r}; one of {', '.join(ACTIONS)}")
    namespace = name_param("namespace", request.match_info["namespace"], subdomain=False)
    name = name_param("name", request.match_info["name"], subdomain=True)
    d = request.app[DISPATCHER]
    control = getattr(d, "control", None)
    if not callable(control):
        raise ApiError(501, "this dispatcher cannot stop, resume or cancel workloads (it has no Dispatcher.control)")
    task = asyncio.ensure_future(control(action, namespace, name))
    try:
        async with asyncio.timeout(ACTION_TIMEOUT):
            body = await asyncio.shield(task)
    except TimeoutError:
        log.warning("API: %s %s/%s is still running after %gs", action, namespace, name, ACTION_TIMEOUT)
        raise ApiError(
            504,
            f"the {action} of {namespace}/{name} is still in progress (the worker is slow to answer) and goes on; "
            f"GET /api/v1/workloads/{namespace}/{name} shows when it took effect",
        ) from None
    except ControlError as exc:
        raise ApiError(exc.status, str(exc)) from None
    except Deposed:
        raise ApiError(503, f"this replica is a standby and changes nothing; {action} on the leader") from None
    log.info("API: %s %s/%s from %s: %s", action, namespace, name, request.remote or "?", body.get("message"))
    return json_response(body)
