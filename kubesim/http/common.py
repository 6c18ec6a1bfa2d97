"""What the parts of a simulated API server share: JSON responses, Warning headers and Status errors as the real
server writes them, boolean query parameters as Go reads them, the version it reports, the target a request's
path names, and :class:`ServerBase`: the server's state as its parts see it, and who is inside the cluster."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kubecommon import fastjson

from ..api import Api
from ..errors import ApiError
from ..faults import FaultState
from ..registry import ResourceType

__all__ = ["KUBE_VERSION", "PUBLIC_PATHS", "ServerBase"]

Obj = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

KUBE_VERSION = {
    "major": "1",
    "minor": "36",
    "emulationMajor": "1",
    "emulationMinor": "36",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "35",
    "gitVersion": "v1.36.0-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")

#: Seconds without a bookmark before a watch with ``allowWatchBookmarks`` gets one: kube-apiserver's cacher sends
#: them "roughly every minute" (``defaultBookmarkFrequency``). A client that needs more often (a health check
#: counting on them) would be fooled by a simulator that sends more.
BOOKMARK_INTERVAL = 60.0


_dumps = fastjson.dumps


def _json(obj: Any, status: int = 200, warnings: list[str] | None = None) -> web.Response:
    resp = web.Response(body=_dumps(obj), status=status, content_type="application/json")
    for w in warnings or ():
        resp.headers.add("Warning", '299 - "' + w.replace('"', '\\"') + '"')
    return resp


def _flag(value: str | None) -> bool:
    """A boolean query parameter as Go's ``strconv.ParseBool`` reads it (clients send ``true``, ``True`` or ``1``)."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def _error(err: ApiError) -> web.Response:
    resp = _json(err.status(), err.code, err.warnings)
    for k, v in err.headers.items():
        resp.headers[k] = v
    return resp


@dataclass(frozen=True)
class _Target:
    rt: ResourceType
    version: str
    namespace: str | None
    name: str | None
    subresource: str | None


class ServerBase:
    """The state of an :class:`~kubesim.http.ApiServer` that its parts (discovery, resources, watch) use, set by its
    ``__init__``; and whether a request comes from inside the cluster."""

    api: Api
    inside_tokens: tuple[str, ...]
    faults: FaultState
    bookmark_interval: float
    _watch_tasks: set[asyncio.Task[Any]]
    _openapi_cache: dict[tuple[str, str], bytes]
    _discovery_cache: dict[str, bytes]
    _event_cache: dict[tuple[str, str, str, str, str], bytes]

    def _inside(self, request: web.Request) -> bool:
        auth = request.headers.get("Authorization", "")
        given = auth[7:].strip() if auth.startswith("Bearer ") else ""
        return bool(given) and any(hmac.compare_digest(given.encode(), t.encode()) for t in self.inside_tokens)
