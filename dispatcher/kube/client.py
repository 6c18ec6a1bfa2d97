"""Per-cluster API clients: the only place that talks to Kubernetes.

kubernetes_asyncio provides what is hard to get right (kubeconfig loading, exec and token plugins,
TLS, in-cluster credentials); requests go out on its HTTP session with its credentials and raw JSON
in and out (:meth:`ClusterClient._send`), which keeps the hot path free of model (de)serialisation.
Every call has a deadline, so a worker that accepts connections and never answers fails calls
instead of hanging tasks.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
import yaml
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration

from kubecommon import fastjson

from ..config import KubeconfigRef
from .gate import Gate
from .pools import MANAGER_REQUEST_CONNECTIONS, REQUEST_CONNECTIONS, is_control_path, own_sessions

__all__ = [
    "MANAGER_REQUEST_CONNECTIONS",
    "REQUEST_CONNECTIONS",
    "ClusterClient",
    "KubeError",
    "Resource",
    "connect",
]

Obj = dict[str, Any]

FIELD_MANAGER = "kueue-dispatcher"


@dataclass(frozen=True, slots=True)
class Resource:
    """A REST resource: where its objects live."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


class KubeError(Exception):
    """A failed call: HTTP ``code`` (0 for transport errors), the Status ``reason`` and message."""

    def __init__(
        self, code: int, reason: str, message: str, status: Obj | None = None, retry_after: float | None = None
    ):
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.status = status or {}
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Worth retrying: transport errors, throttling, server errors, timeouts."""
        return self.code in (0, 429) or self.code >= 500

    @property
    def rejected(self) -> bool:
        """The server refused our credentials (401) or our rights (403): retrying will not help."""
        return self.code in (401, 403)

    def rejection(self) -> str:
        """``Unauthorized`` or ``Forbidden: <the server's message>`` (the message names the user and the verb,
        never a credential)."""
        if self.code == 401:
            return "Unauthorized: the API server refused the credentials"
        return f"Forbidden: {self.message}"

    @property
    def not_found(self) -> bool:
        return self.code == 404

    @property
    def conflict(self) -> bool:
        return self.code == 409 and self.reason == "Conflict"

    @property
    def already_exists(self) -> bool:
        return self.code == 409 and self.reason == "AlreadyExists"


class ClusterClient:
    """One cluster's API, with deadlines, error mapping and an API-latency estimate."""

    def __init__(
        self,
        name: str,
        api_client: ApiClient,
        *,
        timeout: float = 10.0,
        watch_session: aiohttp.ClientSession | None = None,
        control_session: aiohttp.ClientSession | None = None,
        requests: int = 0,
    ) -> None:
        self.name = name
        self._api = api_client
        #: Watches' own session (see :func:`_own_sessions`); ``None``: they share the requests' session.
        self._watch_session = watch_session
        #: Health probes' and Leases' own session (:func:`is_control_path`); ``None``: the requests' session.
        self._control_session = control_session
        self.timeout = timeout
        #: Turns on the requests' connections (:mod:`.gate`), one per connection; ``None`` (``requests=0``): calls
        #: queue in aiohttp's pool, their deadline counting the wait.
        self.gate = Gate(requests) if requests > 0 else None
        #: Exponentially weighted mean of successful request latency, in seconds.
        self.latency = 0.0
        self.last_success = 0.0
        #: When a request (not a watch's stream) was last answered with our credentials accepted: a health probe
        #: right after it would tell nothing more (:func:`dispatcher.capacity.probe_worker`).
        self.last_answered = 0.0
        self.last_failure = 0.0
        self.consecutive_failures = 0
        self.calls = 0
        self.errors = 0
        #: Health probes answered by a recent request instead of a call of their own.
        self.probes_skipped = 0
        #: Called right before every request that changes something (not GET); raising stops the request.
        #: Leader election sets it to the fence's check, so a deposed leader's write never leaves the process.
        self.guard: Callable[[], None] | None = None

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    async def close(self) -> None:
        for session in (self._watch_session, self._control_session):
            if session is not None:
                await session.close()
        await self._api.close()

    def _observe(self, started: float, ok: bool) -> None:
        now = time.monotonic()
        self.calls += 1
        if ok:
            elapsed = now - started
            self.latency = elapsed if self.latency == 0 else 0.8 * self.latency + 0.2 * elapsed
            self.last_success = now
            self.consecutive_failures = 0
        else:
            self.errors += 1
            self.last_failure = now
            self.consecutive_failures += 1

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | aiohttp.ClientTimeout | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> aiohttp.ClientResponse:
        """One request on kubernetes_asyncio's session, with its credentials, and no more of its machinery.

        ``ApiClient.call_api`` walks every body in Python (``sanitize_for_serialization``) and encodes it with
        ``json``; with its header, query and auth handling that was about a tenth of the client's CPU per call
        (0.26 -> 0.235 ms on 2 KB bodies against a simulated API server, bench/RESULTS.md). This
        does what it does for a raw call (``auth_settings=["BearerToken"]``, ``_preload_content=False``), in the
        same order: the default headers, the bearer token through ``Configuration.auth_settings`` (so an exec or
        token-file credential is still refreshed before each call), the host, the query as ``urlencode`` writes
        it, the kubeconfig's proxy and TLS server name, and the body as JSON (orjson)."""
        if self.guard is not None and method != "GET":
            self.guard()
        if session is None and self._control_session is not None and is_control_path(path):
            session = self._control_session
        api, rest = self._api, self._api.rest_client
        cfg = api.configuration
        headers = {"Content-Type": content_type, "Accept": "application/json", **api.default_headers}
        if api.cookie:
            headers["Cookie"] = api.cookie
        bearer = (await cfg.auth_settings()).get("BearerToken")
        if bearer:
            headers[bearer["key"]] = bearer["value"]
        url = str(cfg.host) + path
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        if params:
            url += "?" + urlencode(params)
        deadline = timeout if timeout is not None else self.timeout
        args: dict[str, Any] = {
            "timeout": deadline
            if isinstance(deadline, aiohttp.ClientTimeout)
            else aiohttp.ClientTimeout(total=deadline or None),
            "headers": headers,
        }
        if rest.proxy:
            args["proxy"] = rest.proxy
        if rest.proxy_headers:
            args["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            args["server_hostname"] = rest.server_hostname
        if method != "GET" and body is not None:
            args["data"] = fastjson.dumps(body)
        try:
            resp: aiohttp.ClientResponse = await (session or rest.pool_manager).request(method, url, **args)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise KubeError(0, type(exc).__name__, f"{self.name}: {_describe(exc)}") from None
        return resp

    def turn(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold one turn on the requests' connections (:mod:`.gate`) for several calls in a row, or to look again
        at what the calls are for once the wait is over; the calls inside skip the queue."""
        return self.gate.turn() if self.gate is not None else contextlib.nullcontext()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Obj:
        """One call, its JSON answer, or :class:`KubeError`.

        A call on the requests' connections first waits for a turn at :attr:`gate`; ``timeout`` (default
        :attr:`timeout`) then bounds the call itself. An explicit ``timeout`` bounds the wait and the call together."""
        gate = self.gate
        if gate is None or (self._control_session is not None and is_control_path(path)):
            return await self._request(method, path, query, body, content_type, timeout)
        if timeout is None:
            async with gate.turn():  # a no-op when this task holds a turn already (as below)
                return await self._request(method, path, query, body, content_type, None)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with contextlib.AsyncExitStack() as stack:
            try:
                async with asyncio.timeout_at(deadline):
                    await stack.enter_async_context(gate.turn())
            except TimeoutError:
                # Not counted against the server (:meth:`_observe`): it never saw the call.
                raise KubeError(
                    0, "TimeoutError", f"{self.name}: no free connection of {gate.limit} within {timeout:g}s"
                ) from None
            return await self._request(method, path, query, body, content_type, max(0.001, deadline - loop.time()))

    async def _request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: float | None,
    ) -> Obj:
        started = time.monotonic()
        try:
            resp = await self._send(method, path, query=query, body=body, content_type=content_type, timeout=timeout)
            async with resp:
                async with asyncio.timeout(timeout if timeout is not None else self.timeout):
                    raw = await resp.read()
                status = resp.status
                retry_after = resp.headers.get("Retry-After")
        except KubeError:
            self._observe(started, False)
            raise
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            self._observe(started, False)
            raise KubeError(0, type(exc).__name__, f"{self.name}: {_describe(exc)}") from None
        if status >= 400:
            # A refusal (401/403) is an API error an operator must see, not a healthy answer.
            answered = status < 500 and status not in (401, 403, 429)
            self._observe(started, answered)
            if answered:
                self.last_answered = self.last_success
            raise _error_from(status, raw, retry_after)
        self._observe(started, True)
        self.last_answered = self.last_success
        if not raw:
            return {}
        try:
            data: Obj = fastjson.loads(raw)
        except json.JSONDecodeError:
            return {"raw": raw.decode(errors="replace")}
        return data

    # -- verbs ---------------------------------------------------------------------------------------

    async def get(
        self, res: Resource, namespace: str | None, name: str, *, subresource: str | None = None
    ) -> Obj | None:
        try:
            return await self.request("GET", res.path(namespace, name, subresource))
        except KubeError as e:
            if e.not_found:
                return None
            raise

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
    ) -> Obj:
        query = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": limit,
            "continue": continue_token,
            "resourceVersion": resource_version,
        }
        return await self.request("GET", res.path(namespace), query=query, timeout=timeout)

    async def list_all(
        self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None, page: int = 500
    ) -> tuple[builtins.list[Obj], str]:
        """Every object, page by page; returns (items, resourceVersion of the list)."""
        items: list[Obj] = []
        token: str | None = None
        rv = ""
        while True:
            data = await self.list(res, namespace, label_selector=label_selector, limit=page, continue_token=token)
            items.extend(data.get("items") or [])
            meta = data.get("metadata") or {}
            rv = meta.get("resourceVersion", rv)
            token = meta.get("continue")
            if not token:
                return items, rv

    async def create(
        self,
        res: Resource,
        namespace: str | None,
        body: Obj,
        *,
        field_manager: str = FIELD_MANAGER,
        timeout: float | None = None,
    ) -> Obj:
        return await self.request(
            "POST", res.path(namespace), query={"fieldManager": field_manager}, body=body, timeout=timeout
        )

    async def replace(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
        field_manager: str = FIELD_MANAGER,
    ) -> Obj:
        return await self.request(
            "PUT", res.path(namespace, name, subresource), query={"fieldManager": field_manager}, body=body
        )

    async def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
        field_manager: str = FIELD_MANAGER,
        force: bool = False,
        timeout: float | None = None,
    ) -> Obj:
        content_type = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
            "apply": "application/apply-patch+yaml",
        }[patch_type]
        query: dict[str, Any] = {"fieldManager": field_manager}
        if force:
            query["force"] = "true"
        return await self.request(
            "PATCH",
            res.path(namespace, name, subresource),
            query=query,
            body=patch,
            content_type=content_type,
            timeout=timeout,
        )

    async def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        propagation: str = "Background",
        uid: str | None = None,
    ) -> Obj | None:
        """Delete; None when it was already gone. ``uid`` guards against deleting a newer object."""
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            return await self.request("DELETE", res.path(namespace, name), body=body)
        except KubeError as e:
            if e.not_found:
                return None
            raise

    async def readyz(self, timeout: float = 3.0) -> bool:
        """The server's own readiness, within ``timeout`` seconds."""
        return await self.probe(timeout) is True

    async def probe(self, timeout: float = 3.0) -> bool | str:
        """``/readyz`` within ``timeout``: True (ready), False (no answer, or not ready), or the rejection
        (:meth:`KubeError.rejection`) when the server answers but refuses our credentials."""
        try:
            await self.request("GET", "/readyz", timeout=timeout)
        except KubeError as exc:
            return exc.rejection() if exc.rejected else False
        return True

    async def watch(
        self,
        res: Resource,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        idle_timeout: float = 90.0,
    ) -> AsyncIterator[tuple[str, Obj]]:
        """Stream watch events. Ends when the server closes the stream; raises :class:`KubeError` on
        errors, including ``410`` for an expired resourceVersion (the caller relists) and a transport
        error when nothing (not even a bookmark) arrives for ``idle_timeout`` seconds."""
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
        }
        started = time.monotonic()
        timeout = aiohttp.ClientTimeout(
            total=None, connect=self.timeout, sock_connect=self.timeout, sock_read=idle_timeout
        )
        resp = await self._send("GET", res.path(namespace), query=query, timeout=timeout, session=self._watch_session)
        try:
            if resp.status >= 400:
                raw = await resp.read()
                self._observe(started, resp.status < 500)
                raise _error_from(resp.status, raw, resp.headers.get("Retry-After"))
            self._observe(started, True)
            while True:
                try:
                    line = await resp.content.readline()
                except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                    raise KubeError(
                        0, type(exc).__name__, f"{self.name}: watch interrupted: {_describe(exc)}"
                    ) from None
                if not line:
                    return
                self.last_success = time.monotonic()
                try:
                    event = fastjson.loads(line)
                except json.JSONDecodeError:
                    raise KubeError(0, "BadWatchEvent", f"{self.name}: undecodable watch event") from None
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    code = int(obj.get("code") or 500)
                    raise KubeError(code, str(obj.get("reason", "")), str(obj.get("message", "")), obj)
                yield kind, obj
        finally:
            resp.release()


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.split("\n", 1)[0][:200]


def _error_from(status: int, raw: bytes, retry_after: str | None) -> KubeError:
    try:
        body = fastjson.loads(raw) if raw else {}
    except json.JSONDecodeError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    delay = None
    if retry_after:
        try:
            delay = float(retry_after)
        except ValueError:
            delay = None
    return KubeError(
        status,
        str(body.get("reason") or ("Timeout" if status == 504 else "Error")),
        str(body.get("message") or raw[:200].decode(errors="replace")),
        body,
        delay,
    )


async def _read_secret_kubeconfig(manager: ClusterClient, ref: KubeconfigRef) -> Obj:
    secrets = Resource("", "v1", "secrets", "Secret")
    secret = await manager.get(secrets, ref.secret_namespace, ref.secret_name or "")
    where = f"Secret {ref.secret_namespace}/{ref.secret_name}"
    if secret is None:
        raise KubeError(404, "NotFound", f"{where} not found")
    encoded = (secret.get("data") or {}).get(ref.secret_key)
    if not encoded:
        raise KubeError(422, "Invalid", f"{where} has no key {ref.secret_key!r}")
    try:
        loaded = yaml.safe_load(base64.b64decode(encoded))
    except (ValueError, yaml.YAMLError):
        raise KubeError(422, "Invalid", f"{where} key {ref.secret_key!r} is not a kubeconfig") from None
    if not isinstance(loaded, dict):
        raise KubeError(422, "Invalid", f"{where} key {ref.secret_key!r} is not a kubeconfig")
    return loaded


async def connect(
    name: str,
    ref: KubeconfigRef,
    *,
    manager: ClusterClient | None = None,
    timeout: float = 10.0,
    pool: int = 64,
    requests: int | None = None,
) -> ClusterClient:
    """A client for a cluster described by ``ref`` (file, Secret on the manager, or in-cluster).

    ``pool``: connections for watches (each holds one for its life); ``requests``: connections for every other
    call (default :data:`REQUEST_CONNECTIONS`)."""
    cfg = Configuration()
    try:
        if ref.in_cluster:
            kube_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        elif ref.secret_name:
            if manager is None:
                raise KubeError(0, "Config", f"{name}: a secretRef needs the manager cluster's client")
            loaded = await _read_secret_kubeconfig(manager, ref)
            await kube_config.load_kube_config_from_dict(loaded, context=ref.context, client_configuration=cfg)
        else:
            await kube_config.load_kube_config(config_file=ref.path, context=ref.context, client_configuration=cfg)
    except KubeError:
        raise
    except Exception as exc:  # kubernetes_asyncio raises ConfigException, OSError, yaml errors…
        raise KubeError(
            0, "Config", f"{name}: cannot load credentials from {ref.describe()}: {_describe(exc)}"
        ) from None
    cfg.connection_pool_maxsize = pool
    api = ApiClient(configuration=cfg)
    watches, control = own_sessions(api, cfg, requests if requests is not None else REQUEST_CONNECTIONS)
    return ClusterClient(
        name,
        api,
        timeout=timeout,
        watch_session=watches,
        control_session=control,
        requests=requests if requests is not None else REQUEST_CONNECTIONS,
    )
