"""One simulated kube-apiserver over aiohttp: :class:`ApiServer`, its lifecycle (start, stop, restart on the same
port), faults and authentication as middlewares, and the routing of a request to health, version, discovery or
resource endpoints (the parts it is put together from: :mod:`.discovery`, :mod:`.resources`, :mod:`.watch`)."""

from __future__ import annotations

import asyncio
import hmac
import json
from typing import Any

import yaml
from aiohttp import web

from .. import errors
from ..api import Api
from ..errors import ApiError
from ..faults import FaultState
from ..tls import TlsMaterial
from .common import BOOKMARK_INTERVAL, KUBE_VERSION, PUBLIC_PATHS, Handler, _error, _json
from .discovery import Discovery
from .resources import Resources

__all__ = ["ApiServer"]


class ApiServer(Resources, Discovery):
    """One simulated kube-apiserver listening on 127.0.0.1."""

    def __init__(
        self,
        name: str,
        api: Api,
        token: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: FaultState | None = None,
        bookmark_interval: float = BOOKMARK_INTERVAL,
        tls: TlsMaterial | None = None,
        inside_tokens: tuple[str, ...] = (),
    ) -> None:
        """``tls``: serve HTTPS with that certificate (the default for a :class:`SimCluster`); ``None``: plain http.
        ``inside_tokens``: credentials of clients inside the cluster (the fencing agent): a ``partition`` cuts the
        path from outside only, so they are still answered."""
        self.name = name
        self.api = api
        self.token = token
        self.inside_tokens = tuple(t for t in inside_tokens if t)
        self.host = host
        self.port = port
        self.faults = faults or FaultState()
        self.bookmark_interval = bookmark_interval
        self.ready = True
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._watch_tasks: set[asyncio.Task[Any]] = set()
        self._openapi_cache: dict[tuple[str, str], bytes] = {}
        self._discovery_cache: dict[str, bytes] = {}
        #: Encoded watch events by (resource, version, type, uid, resourceVersion): N watchers of one change
        #: share one encoding. Bounded by clearing; an object's state is fixed by its resourceVersion.
        self._event_cache: dict[tuple[str, str, str, str, str], bytes] = {}
        self.tls = tls
        #: Made once, so a restart serves the same certificate on the same port.
        self._ssl_context = tls.server_context() if tls is not None else None
        self.app = self._make_app()

    # -- lifecycle -----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._site is not None

    async def start(self) -> None:
        if self._site is not None:
            return
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        self._site = web.TCPSite(
            self._runner, self.host, self.port, reuse_address=True, backlog=1024, ssl_context=self._ssl_context
        )
        await self._site.start()
        if self.port == 0:
            server = self._site._server
            assert server is not None
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        """Close the listener and every connection (clients see connection refused / reset)."""
        for task in list(self._watch_tasks):
            task.cancel()
        runner, self._runner, self._site = self._runner, None, None
        if runner is not None:
            await runner.cleanup()

    async def restart(self, downtime: float = 0.5) -> None:
        await self.stop()
        await asyncio.sleep(downtime)
        await self.start()

    # -- app -----------------------------------------------------------------------------------------

    def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._fault_mw, self._auth_mw], client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    @web.middleware
    async def _fault_mw(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        faults = self.faults
        if faults.mode == "partition" and not self._inside(request):
            await faults.wait_healed()
        elif faults.mode == "slow" and faults.latency > 0:
            await asyncio.sleep(faults.latency)
        elif faults.mode == "flaky" and not request.path.startswith(PUBLIC_PATHS):
            code = faults.roll_error()
            if code == 500:
                return _error(ApiError(500, "InternalError", "Internal error occurred: injected fault (flaky)"))
            if code == 429:
                err = ApiError(
                    429,
                    "TooManyRequests",
                    "The server has received too many requests and has asked us to try again later",
                    {"retryAfterSeconds": 1},
                    headers={"Retry-After": "1"},
                )
                return _error(err)
        return await handler(request)

    @web.middleware
    async def _auth_mw(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        given = auth[7:].strip() if auth.startswith("Bearer ") else ""
        public = request.path.rstrip("/") in PUBLIC_PATHS or request.path.startswith(
            ("/readyz/", "/livez/", "/healthz/")
        )
        if public and not auth:
            return await handler(request)  # anonymous: the health endpoints are public
        # A token that does not authenticate is refused everywhere, health endpoints included (kube-apiserver
        # never falls back to anonymous for a bad credential).
        if not given or not (hmac.compare_digest(given.encode(), self.token.encode()) or self._inside(request)):
            return _error(errors.unauthorized())
        return await handler(request)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._route(request)
        except ApiError as err:
            return _error(err)
        except (json.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as exc:
            return _error(errors.bad_request(f"couldn't get version/kind; json parse error: {exc}"))

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz") or path.startswith(("/healthz/", "/livez/", "/readyz/")):
            if path.startswith("/readyz") and not self.ready:
                return web.Response(text="[-]simulated not ready\nreadyz check failed", status=500)
            if "verbose" in request.query:
                return web.Response(text=f"[+]ping ok\n[+]etcd ok\n{path[1:]} check passed\n")
            return web.Response(text="ok")
        if path == "/version":
            return _json(KUBE_VERSION)
        if path == "/api":
            return _json(
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.host}:{self.port}"}
                    ],
                }
            )
        if path == "/apis":
            return _json(self._group_list())
        if path.startswith("/openapi/"):
            return self._openapi(path)
        parts = path.strip("/").split("/")
        if parts[0] == "apis" and len(parts) == 2:
            group = self._group(parts[1])
            if group is None:
                return _error(ApiError(404, "NotFound", "the server could not find the requested resource"))
            return _json(group)
        if (parts[0] == "api" and len(parts) == 2) or (parts[0] == "apis" and len(parts) == 3):
            return self._resource_list(parts)
        target = self._parse(parts)
        if target is None:
            return _error(ApiError(404, "NotFound", "the server could not find the requested resource"))
        return await self._serve(request, target)
