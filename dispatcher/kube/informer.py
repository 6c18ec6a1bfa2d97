"""List-then-watch informers with an in-memory cache, as client-go's reflector keeps one.

- Lists page by page, then watches from the list's resourceVersion with bookmarks on.
- ``410 Gone`` (the version was compacted away) relists; objects missing from the new list are
  reported as deleted, so handlers never keep ghosts.
- A dropped or silent connection re-watches from the last seen version, after a backoff with
  jitter (tenacity's exponential wait); a server that keeps failing is relisted.
- Handlers are plain callables run on the event loop; they must be quick (update memory, queue work).
- A resource the server does not serve (``404`` on the list: a CRD not installed) is an empty,
  synced cache, checked again every ``absent_recheck`` seconds; ``served`` says which, and
  ``on_served`` hears of every change.
- Objects are cached and handed to handlers without ``metadata.managedFields``, as Kueue's own
  caches keep them (controller-runtime's ``TransformStripManagedFields``): nothing here reads
  them, and they were 43 % of the bytes the dispatcher decoded on the dispatch benchmark. Dropped
  as soon as an object is decoded, they are freed before the cyclic GC ever walks them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from tenacity import wait_exponential, wait_random

from kubecommon.tasks import cancel_and_wait

from .client import ClusterClient, KubeError, Resource

__all__ = ["Informer", "strip_managed_fields"]

log = logging.getLogger("dispatcher.kube")
Obj = dict[str, Any]
Key = tuple[str, str]
Handler = Callable[[str, Obj, Obj | None], None]
#: How long 401/403 answers must last before they count as a refusal (a restarting kube-apiserver answers 403
#: while its RBAC cache warms up).
REFUSAL_GRACE = 5.0


def strip_managed_fields(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields`` (changed in place, and returned)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace", ""), meta.get("name", ""))


class Informer:
    """Keeps ``cache`` equal to the server's objects of one resource (optionally filtered)."""

    def __init__(
        self,
        client: ClusterClient,
        resource: Resource,
        handler: Handler,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        idle_timeout: float = 90.0,
        absent_recheck: float = 60.0,
        on_served: Callable[[bool], None] | None = None,
        on_rejected: Callable[[KubeError | None], None] | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.handler = handler
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.idle_timeout = idle_timeout
        self.absent_recheck = absent_recheck
        self.on_served = on_served
        #: Told when the server starts refusing our credentials or rights (the 401/403), and (None) when it stops.
        self.on_rejected = on_rejected
        #: The last 401/403 once refusals have lasted ``REFUSAL_GRACE``; cleared by the next successful list.
        self.rejected: KubeError | None = None
        self._refused_since: float | None = None
        #: None until the first list; False while the server answers the list with 404.
        self.served: bool | None = None
        self.cache: dict[Key, Obj] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        #: Monotonic time of the last answer from the server (list page, event or bookmark).
        self.last_contact = 0.0
        self.relists = 0
        self.rewatches = 0
        self.connected = False
        self._task: asyncio.Task[None] | None = None
        self._wait = wait_exponential(multiplier=0.2, max=30.0) + wait_random(0, 0.5)

    @property
    def name(self) -> str:
        return f"{self.client.name}/{self.resource.plural}"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"informer-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task], what=f"informer {self.name}")
            self._task = None

    def _emit(self, kind: str, obj: Obj, old: Obj | None) -> None:
        try:
            self.handler(kind, obj, old)
        except Exception:  # a handler bug must not kill the informer
            log.exception("informer %s: handler failed on %s", self.name, kind)

    async def _list(self) -> None:
        items: list[Obj] = []
        token: str | None = None
        rv = ""
        while True:
            data = await self.client.list(
                self.resource,
                self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                limit=self.page_size,
                continue_token=token,
            )
            self.last_contact = time.monotonic()
            page = data.get("items") or []
            for item in page:
                strip_managed_fields(item)
            items.extend(page)
            meta = data.get("metadata") or {}
            rv = meta.get("resourceVersion", rv)
            token = meta.get("continue")
            if not token:
                break
        fresh = {key_of(o): o for o in items}
        for key, old in list(self.cache.items()):
            if key not in fresh:
                del self.cache[key]
                self._emit("DELETED", old, old)
        for key, obj in fresh.items():
            previous = self.cache.get(key)
            self.cache[key] = obj
            if previous is None:
                self._emit("ADDED", obj, None)
            elif (previous.get("metadata") or {}).get("resourceVersion") != (obj.get("metadata") or {}).get(
                "resourceVersion"
            ):
                self._emit("MODIFIED", obj, previous)
        self.resource_version = rv
        self.relists += 1
        self._set_served(True)
        self._refused_since = None
        self._set_rejected(None)
        self.synced.set()

    def _set_rejected(self, error: KubeError | None) -> None:
        if (self.rejected is None) == (error is None):
            self.rejected = error
            return
        self.rejected = error
        if error is None:
            log.warning("informer %s: the API server accepts the dispatcher's credentials again", self.name)
        else:
            log.error(
                "informer %s: the API server refuses to list %s: %s %s",
                self.name,
                self.resource.plural,
                error.code,
                error.rejection(),
            )
        if self.on_rejected is not None:
            try:
                self.on_rejected(error)
            except Exception:
                log.exception("informer %s: on_rejected failed", self.name)

    def _set_served(self, served: bool) -> None:
        if self.served is served:
            return
        self.served = served
        if self.on_served is not None:
            try:
                self.on_served(served)
            except Exception:
                log.exception("informer %s: on_served failed", self.name)

    async def _watch(self) -> None:
        async for kind, obj in self.client.watch(
            self.resource,
            self.namespace,
            resource_version=self.resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=self.watch_timeout,
            idle_timeout=self.idle_timeout,
        ):
            self.last_contact = time.monotonic()
            self.connected = True
            strip_managed_fields(obj)
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if kind == "BOOKMARK":
                if rv:
                    self.resource_version = rv
                continue
            key = key_of(obj)
            old = self.cache.get(key)
            if kind == "DELETED":
                self.cache.pop(key, None)
                self._emit("DELETED", obj, old)
            else:
                self.cache[key] = obj
                self._emit("ADDED" if old is None else "MODIFIED", obj, old)
            if rv:
                self.resource_version = rv

    async def run(self) -> None:
        attempt = 0
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                self.connected = True
                await self._watch()
                attempt = 0  # the server closed the stream normally (timeoutSeconds): watch again
                self.rewatches += 1
            except asyncio.CancelledError:
                raise
            except KubeError as e:
                self.connected = False
                if e.code == 404 and need_list:
                    if self.served is not False:
                        log.info(
                            "informer %s: the server does not serve %s; skipping it (checking again every %.0fs)",
                            self.name,
                            self.resource.plural,
                            self.absent_recheck,
                        )
                    for key, old in list(self.cache.items()):
                        del self.cache[key]
                        self._emit("DELETED", old, old)
                    self._set_served(False)
                    self.synced.set()
                    await asyncio.sleep(self.absent_recheck)
                    continue
                if e.code == 410:
                    log.info("informer %s: resourceVersion %s expired, relisting", self.name, self.resource_version)
                    need_list = True
                    continue
                if e.rejected:
                    # Credentials or RBAC, retried at the usual backoff. A kube-apiserver that just restarted
                    # answers 403 for a few seconds until its RBAC cache is warm (seen on the real rig): a refusal
                    # counts (said once at ERROR, the worker NotReady) only once it lasts REFUSAL_GRACE.
                    now = time.monotonic()
                    if self._refused_since is None:
                        self._refused_since = now
                        log.info("informer %s: refused (%s %s); retrying", self.name, e.code, e.reason)
                    if now - self._refused_since >= REFUSAL_GRACE:
                        self._set_rejected(e)
                    need_list = True
                attempt += 1
                if attempt >= 5:
                    need_list = True
                delay = self._wait_for(attempt)
                if e.retry_after:
                    delay = max(delay, e.retry_after)
                log.debug("informer %s: %s; retrying in %.1fs", self.name, e, delay)
                await asyncio.sleep(delay)
            except Exception:
                self.connected = False
                attempt += 1
                log.exception("informer %s: unexpected error", self.name)
                await asyncio.sleep(self._wait_for(attempt))

    def _wait_for(self, attempt: int) -> float:
        from tenacity import RetryCallState

        state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
        state.attempt_number = attempt
        return float(self._wait(state))
