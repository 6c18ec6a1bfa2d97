"""The REST and watch protocol of a simulated API server, over aiohttp.

Paths, verbs, query parameters, content types, status codes and the watch stream format are the
real server's, so kubernetes_asyncio and kubectl talk to it unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from . import errors
from .api import Api, RequestOptions, WatchStream
from .api.types import APPLY_PATCH, PATCH_TYPES
from .errors import ApiError
from .faults import FaultState
from .registry import ResourceType
from .schema import openapi_v3_document, openapi_v3_paths
from .schema.openapi import ResourceRoute
from .table import to_table
from .tls import TlsMaterial

__all__ = ["ApiServer"]

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


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _dumps(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode()


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


class ApiServer:
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
        bookmark_interval: float = 5.0,
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

    def _inside(self, request: web.Request) -> bool:
        auth = request.headers.get("Authorization", "")
        given = auth[7:].strip() if auth.startswith("Bearer ") else ""
        return bool(given) and any(hmac.compare_digest(given.encode(), t.encode()) for t in self.inside_tokens)

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

    # -- discovery -----------------------------------------------------------------------------------

    def _group_entry(self, group: str, versions: list[str]) -> Obj:
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}

    def _group_list(self) -> Obj:
        groups = [self._group_entry(g, vs) for g, vs in self.api.registry.groups().items() if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _group(self, name: str) -> Obj | None:
        versions = self.api.registry.groups().get(name)
        if not versions:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group_entry(name, versions)}

    def _resource_list(self, parts: list[str]) -> web.Response:
        group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
        key = f"{group}/{version}"
        cached = self._discovery_cache.get(key)
        if cached is None:
            types = self.api.registry.in_group_version(group, version)
            if not types:
                return _error(ApiError(404, "NotFound", "the server could not find the requested resource"))
            resources: list[Obj] = []
            for rt in types:
                entry: Obj = {
                    "name": rt.plural,
                    "singularName": rt.singular,
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": list(rt.verbs),
                    "storageVersionHash": hashlib.sha256(f"{rt.key}/{rt.storage_version}".encode()).hexdigest()[:12],
                }
                if rt.short_names:
                    entry["shortNames"] = list(rt.short_names)
                if rt.categories:
                    entry["categories"] = list(rt.categories)
                resources.append(entry)
                for sub in sorted(rt.subresources):
                    verbs = ["get", "patch", "update"]
                    kind = rt.kind
                    if sub == "binding":
                        verbs, kind = ["create"], "Binding"
                    elif sub == "log":
                        verbs, kind = ["get"], "Pod"
                    elif sub == "finalize":
                        verbs = ["update"]
                    elif sub == "scale":
                        kind = "Scale"
                    resources.append(
                        {
                            "name": f"{rt.plural}/{sub}",
                            "singularName": "",
                            "namespaced": rt.namespaced,
                            "kind": kind,
                            "verbs": verbs,
                        }
                    )
            body = {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version,
                "resources": resources,
            }
            cached = _dumps(body)
            self._discovery_cache[key] = cached
        return web.Response(body=cached, content_type="application/json")

    def _openapi(self, path: str) -> web.Response:
        if path in ("/openapi/v3", "/openapi/v3/"):
            gvs = []
            for group, versions in self.api.registry.groups().items():
                for v in versions:
                    gvs.append((group, v))
            return _json(openapi_v3_paths(gvs))
        if path.startswith("/openapi/v3/"):
            rest = path[len("/openapi/v3/") :].strip("/").split("/")
            if rest[0] == "api" and len(rest) == 2:
                group, version = "", rest[1]
            elif rest[0] == "apis" and len(rest) == 3:
                group, version = rest[1], rest[2]
            else:
                return _error(ApiError(404, "NotFound", "the server could not find the requested resource"))
            cached = self._openapi_cache.get((group, version))
            if cached is None:
                types = self.api.registry.in_group_version(group, version)
                if not types:
                    return _error(ApiError(404, "NotFound", "the server could not find the requested resource"))
                routes = [
                    ResourceRoute(
                        kind=rt.kind,
                        plural=rt.plural,
                        namespaced=rt.namespaced,
                        subresources=tuple(sorted(rt.subresources)),
                        verbs=tuple(rt.verbs),
                    )
                    for rt in types
                ]
                cached = _dumps(openapi_v3_document(group, version, routes))
                self._openapi_cache[(group, version)] = cached
            return web.Response(body=cached, content_type="application/json")
        return _error(ApiError(404, "NotFound", "the server could not find the requested resource"))

    # -- resources -----------------------------------------------------------------------------------

    def _parse(self, parts: list[str]) -> _Target | None:
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace: str | None = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and not (group == "" and len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        plural = rest[0]
        rt = self.api.registry.lookup(group, version, plural)
        if rt is None:
            return None
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) >= 3 else None
        if len(rest) > 3:
            return None
        if sub is not None and sub not in rt.subresources:
            return None
        if namespace is not None and not rt.namespaced:
            return None
        return _Target(rt, version, namespace, name, sub)

    def _options(self, request: web.Request) -> RequestOptions:
        q = request.query
        fv = q.get("fieldValidation") or "Warn"
        if fv not in ("Strict", "Warn", "Ignore"):
            raise errors.bad_request(f"fieldValidation must be one of Ignore, Warn, or Strict, got {fv!r}")
        return RequestOptions(
            field_manager=q.get("fieldManager"),
            dry_run=q.get("dryRun") == "All",
            field_validation=fv,
            force=_flag(q.get("force")),
            user_agent=request.headers.get("User-Agent", ""),
        )

    async def _require_type(self, request: web.Request, t: _Target, body: Any) -> None:
        """A custom resource's body must name its kind and apiVersion (the unstructured decoder has no default from
        the URL, unlike built-in kinds): 400 as kube-apiserver words it (``transformDecodeError``, 30 bytes shown)."""
        if not isinstance(body, dict) or (body.get("kind") and body.get("apiVersion")):
            return
        raw = (await request.read()).decode(errors="replace")
        missing = "Kind" if not body.get("kind") else "apiVersion"
        summary = raw if len(raw) <= 30 else raw[:30] + " ..."
        raise errors.bad_request(
            f"the object provided is unrecognized (must be of type {t.rt.kind}): "
            f"Object '{missing}' is missing in '{raw}' ({summary})"
        )

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return None
        ctype = request.content_type
        if ctype == APPLY_PATCH:
            return yaml.safe_load(raw.decode())
        return json.loads(raw)

    async def _serve(self, request: web.Request, t: _Target) -> web.StreamResponse:
        method = request.method
        api = self.api
        q = request.query
        wants_table = "as=Table" in request.headers.get("Accept", "")
        if t.name is None:
            if method == "GET":
                if _flag(q.get("watch")):
                    return await self._watch(request, t, wants_table)
                listed = api.list(
                    t.rt,
                    t.version,
                    t.namespace,
                    label_selector=q.get("labelSelector"),
                    field_selector=q.get("fieldSelector"),
                    limit=int(q["limit"]) if q.get("limit") else None,
                    continue_token=q.get("continue"),
                )
                if wants_table:
                    return _json(
                        to_table(
                            t.rt,
                            t.version,
                            listed.items,
                            resource_version=listed.resource_version,
                            include=q.get("includeObject", "Metadata"),
                            continue_token=listed.continue_token,
                            remaining=listed.remaining,
                        )
                    )
                meta: Obj = {"resourceVersion": listed.resource_version}
                if listed.continue_token:
                    meta["continue"] = listed.continue_token
                    if listed.remaining is not None:
                        meta["remainingItemCount"] = listed.remaining
                return _json(
                    {
                        "kind": t.rt.list_kind,
                        "apiVersion": t.rt.api_version(t.version),
                        "metadata": meta,
                        "items": listed.items,
                    }
                )
            if method == "POST":
                if t.rt.namespaced and t.namespace is None:
                    raise errors.method_not_supported(t.rt.plural, t.rt.group, "create")
                body = await self._body(request)
                if not t.rt.builtin:
                    await self._require_type(request, t, body)
                res = api.create(t.rt, t.version, t.namespace, body, self._options(request))
                return _json(res.obj, 201, res.warnings)
            if method == "DELETE":
                if "deletecollection" not in t.rt.verbs:
                    raise errors.method_not_supported(t.rt.plural, t.rt.group, "deletecollection")
                body = await self._body(request)
                opts = self._delete_options(request, body)
                deleted = api.delete_collection(
                    t.rt,
                    t.version,
                    t.namespace,
                    opts,
                    label_selector=q.get("labelSelector"),
                    field_selector=q.get("fieldSelector"),
                    dry_run=q.get("dryRun") == "All",
                )
                return _json(
                    {
                        "kind": t.rt.list_kind,
                        "apiVersion": t.rt.api_version(t.version),
                        "metadata": {"resourceVersion": str(api.store.rv)},
                        "items": deleted,
                    }
                )
            raise errors.method_not_supported(t.rt.plural, t.rt.group, method.lower())
        name = t.name
        if t.subresource == "log":
            obj = api.get(t.rt, t.version, t.namespace, name)
            node = (obj.get("spec") or {}).get("nodeName", "<none>")
            return web.Response(text=f"simulated container output of pod {name} on node {node}\n")
        if t.subresource == "binding":
            if method != "POST":
                raise errors.method_not_supported(t.rt.plural, t.rt.group, method.lower())
            return self._bind(t, name, await self._body(request))
        if method == "GET":
            obj = api.get(t.rt, t.version, t.namespace, name)
            if wants_table:
                return _json(
                    to_table(t.rt, t.version, [obj], resource_version=obj["metadata"].get("resourceVersion", ""))
                )
            return _json(obj)
        if method == "PUT":
            sub = t.subresource if t.subresource in ("status",) else None
            body = await self._body(request)
            if not t.rt.builtin:
                await self._require_type(request, t, body)
            res = api.update(t.rt, t.version, t.namespace, name, body, self._options(request), subresource=sub)
            return _json(res.obj, 200, res.warnings)
        if method == "PATCH":
            ctype = request.content_type
            if ctype not in PATCH_TYPES:
                raise errors.unsupported_media_type(ctype, list(PATCH_TYPES))
            sub = t.subresource if t.subresource in ("status",) else None
            res = api.patch(
                t.rt,
                t.version,
                t.namespace,
                name,
                ctype,
                await self._body(request),
                self._options(request),
                subresource=sub,
            )
            return _json(res.obj, 201 if res.created else 200, res.warnings)
        if method == "DELETE":
            body = await self._body(request)
            res = api.delete(
                t.rt,
                t.version,
                t.namespace,
                name,
                self._delete_options(request, body),
                dry_run=q.get("dryRun") == "All",
            )
            if res.removed and t.rt.key != "pods":
                return _json(
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Success",
                        "details": {
                            "name": name,
                            **({"group": t.rt.group} if t.rt.group else {}),
                            "kind": t.rt.plural,
                            "uid": res.obj["metadata"].get("uid"),
                        },
                    },
                    200,
                    res.warnings,
                )
            return _json(res.obj, 200, res.warnings)
        raise errors.method_not_supported(t.rt.plural, t.rt.group, method.lower())

    def _delete_options(self, request: web.Request, body: Any) -> Obj:
        opts: Obj = dict(body) if isinstance(body, dict) else {}
        q = request.query
        if "propagationPolicy" in q:
            opts["propagationPolicy"] = q["propagationPolicy"]
        if "gracePeriodSeconds" in q:
            opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
        if "orphanDependents" in q:
            opts["orphanDependents"] = _flag(q["orphanDependents"])
        return opts

    def _bind(self, t: _Target, name: str, body: Any) -> web.Response:
        target = (body or {}).get("target") or {}
        node = target.get("name")
        if not node:
            raise errors.invalid(
                "Binding", "", name, [errors.Cause("target.name", "Required value", "FieldValueRequired")]
            )
        self.api.bind_pod(t.namespace or "", name, node, (body.get("metadata") or {}).get("annotations"))
        return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201)

    # -- watch ---------------------------------------------------------------------------------------

    async def _watch(self, request: web.Request, t: _Target, table: bool) -> web.StreamResponse:
        q = request.query
        bookmarks = _flag(q.get("allowWatchBookmarks"))
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else random.uniform(1800, 3600)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache"})
        try:
            stream = self.api.watch(
                t.rt,
                t.version,
                t.namespace,
                resource_version=q.get("resourceVersion"),
                label_selector=q.get("labelSelector"),
                field_selector=q.get("fieldSelector"),
                send_initial_events=_flag(q.get("sendInitialEvents")),
            )
        except ApiError as err:
            if err.code != 410:
                raise
            # A too-old version is answered inside a 200 stream, as an ERROR event carrying the Status.
            await resp.prepare(request)
            await resp.write(_dumps({"type": "ERROR", "object": err.status()}) + b"\n")
            await resp.write_eof()
            return resp
        task = asyncio.current_task()
        assert task is not None
        self._watch_tasks.add(task)
        try:
            await resp.prepare(request)
            await self._pump(resp, stream, t, table, bookmarks, timeout, inside=self._inside(request))
        except ConnectionResetError:
            return resp  # the client went away: the watch simply ends, as on a real server
        except asyncio.CancelledError:
            stream.close()
            raise
        finally:
            stream.close()
            self._watch_tasks.discard(task)
        with contextlib.suppress(ConnectionResetError):
            await resp.write_eof()
        return resp

    async def _pump(
        self,
        resp: web.StreamResponse,
        stream: WatchStream,
        t: _Target,
        table: bool,
        bookmarks: bool,
        seconds: float,
        *,
        inside: bool = False,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        first = True
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            wait = min(remaining, self.bookmark_interval) if bookmarks else remaining
            try:
                event = await asyncio.wait_for(stream.next(), wait)
            except TimeoutError:
                if bookmarks and loop.time() < deadline:
                    if not inside:
                        await self.faults.wait_healed()
                    await resp.write(_dumps({"type": "BOOKMARK", "object": self.api.bookmark(t.rt, t.version)}) + b"\n")
                continue
            if event is None:
                break
            if not inside:
                await self.faults.wait_healed()
            kind, obj = event
            if kind == "BOOKMARK" and not bookmarks:
                continue
            if table and kind != "BOOKMARK":
                obj = to_table(
                    t.rt, t.version, [obj], resource_version=obj["metadata"].get("resourceVersion", ""), header=first
                )
                first = False
                await resp.write(_dumps({"type": kind, "object": obj}) + b"\n")
            else:
                await resp.write(self._event_line(t, kind, obj))

    def _event_line(self, t: _Target, kind: str, obj: Obj) -> bytes:
        meta = obj.get("metadata") or {}
        uid, rv = meta.get("uid"), meta.get("resourceVersion")
        if kind == "BOOKMARK" or not uid or not rv:
            return _dumps({"type": kind, "object": obj}) + b"\n"
        key = (t.rt.key, t.version, kind, str(uid), str(rv))
        line = self._event_cache.get(key)
        if line is None:
            if len(self._event_cache) >= 4096:
                self._event_cache.clear()
            line = self._event_cache[key] = _dumps({"type": kind, "object": obj}) + b"\n"
        return line
