"""The in-process controller pattern of the simulator: watch the store, queue keys, reconcile.

Controllers act through :class:`LocalClient`, which calls the same :class:`~kubesim.api.Api`
as the HTTP layer, so a simulated controller obeys every rule a real client meets (validation,
conflicts, status subresource, finalizers). Reconcilers are synchronous: nothing in the simulated
world blocks, and each reconcile sees a consistent store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Hashable, Iterable
from typing import Any

from kubecommon.tasks import cancel_and_wait

from ..api import Api, RequestOptions, WriteResult, now_rfc3339
from ..errors import ApiError
from ..patch import clone
from ..registry import ResourceType
from ..store import StoreEvent

__all__ = ["Controller", "LocalClient", "record_event"]

log = logging.getLogger("kubesim")
Obj = dict[str, Any]


class LocalClient:
    """A client of one simulated API server, in process, on storage versions."""

    def __init__(self, api: Api, manager: str) -> None:
        self.api = api
        self.manager = manager
        self._opts = RequestOptions(field_manager=manager)

    def rt_of(self, obj: Obj) -> ResourceType:
        group = str(obj.get("apiVersion", "")).rpartition("/")[0]
        return self.api.rt(group, obj["kind"])

    def rt(self, group: str, kind: str) -> ResourceType:
        return self.api.rt(group, kind)

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        """A private copy of the object, or None."""
        obj = self.api.store.get(rt.key, namespace or "", name)
        return clone(obj) if obj is not None else None

    def peek(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        """The stored object itself: shared, never to be modified."""
        return self.api.store.get(rt.key, namespace or "", name)

    def list(self, rt: ResourceType, namespace: str | None = None) -> list[Obj]:
        """Stored objects (shared, read-only)."""
        return self.api.store.list(rt.key, namespace)

    def create(self, obj: Obj) -> Obj:
        rt = self.rt_of(obj)
        ns = obj.get("metadata", {}).get("namespace")
        return self.api.create(rt, rt.storage_version, ns, obj, self._opts).obj

    def update(self, obj: Obj) -> Obj:
        rt = self.rt_of(obj)
        meta = obj["metadata"]
        return self.api.update(rt, rt.storage_version, meta.get("namespace"), meta["name"], obj, self._opts).obj

    def update_status(self, obj: Obj) -> Obj:
        rt = self.rt_of(obj)
        meta = obj["metadata"]
        return self.api.update(
            rt, rt.storage_version, meta.get("namespace"), meta["name"], obj, self._opts, subresource="status"
        ).obj

    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: str = "application/merge-patch+json",
        subresource: str | None = None,
    ) -> Obj:
        return self.api.patch(
            rt, rt.storage_version, namespace, name, patch_type, patch, self._opts, subresource=subresource
        ).obj

    def delete(
        self, rt: ResourceType, namespace: str | None, name: str, *, propagation: str = "Background"
    ) -> WriteResult | None:
        try:
            return self.api.delete(rt, rt.storage_version, namespace, name, {"propagationPolicy": propagation})
        except ApiError as e:
            if e.code == 404:
                return None
            raise


def record_event(
    client: LocalClient,
    involved: Obj,
    *,
    reason: str,
    message: str,
    type: str = "Normal",
    component: str,
) -> None:
    """Write a core/v1 Event about ``involved``, as a controller's event recorder does."""
    meta = involved["metadata"]
    namespace = meta.get("namespace") or "default"
    now = now_rfc3339()
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion"),
            "kind": involved.get("kind"),
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": message,
        "type": type,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    with contextlib.suppress(ApiError):
        client.create(event)


class Controller:
    """Base: subscribe to store resources, queue keys (deduplicated), reconcile one at a time.

    Subclasses set ``resources`` (store keys) and implement :meth:`keys_for` and :meth:`reconcile`.
    A reconcile that hits a 409 Conflict is retried shortly; one that wants to look again later
    calls :meth:`requeue_after`.
    """

    name = "controller"
    resources: tuple[str, ...] = ()

    def __init__(self, api: Api) -> None:
        self.api = api
        self.client = LocalClient(api, self.name)
        self._queue: asyncio.Queue[Hashable] = asyncio.Queue()
        self._pending: set[Hashable] = set()
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.enabled = True
        self._running = asyncio.Event()
        self._running.set()

    # -- queue ---------------------------------------------------------------------------------------

    def enqueue(self, key: Hashable) -> None:
        if key not in self._pending:
            self._pending.add(key)
            self._queue.put_nowait(key)

    def requeue_after(self, key: Hashable, delay: float) -> None:
        """Look at ``key`` again after ``delay`` seconds (an earlier timer for it is kept if sooner)."""
        loop = asyncio.get_running_loop()
        existing = self._timers.get(key)
        when = loop.time() + delay
        if existing is not None and existing.when() <= when:
            return
        if existing is not None:
            existing.cancel()

        def fire() -> None:
            self._timers.pop(key, None)
            self.enqueue(key)

        self._timers[key] = loop.call_at(when, fire)

    # -- hooks for subclasses ------------------------------------------------------------------------

    def keys_for(self, event: StoreEvent) -> Iterable[Hashable]:
        meta = event.obj["metadata"]
        return [(event.resource, meta.get("namespace", ""), meta["name"])]

    def initial_keys(self) -> Iterable[Hashable]:
        for resource in self.resources:
            for obj in self.api.store.iter_all(resource):
                meta = obj["metadata"]
                yield (resource, meta.get("namespace", ""), meta["name"])

    def reconcile(self, key: Hashable) -> None:
        raise NotImplementedError

    # -- running -------------------------------------------------------------------------------------

    def start(self) -> None:
        sub = self.api.store.subscribe(frozenset(self.resources), maxsize=1_000_000)
        for key in self.initial_keys():
            self.enqueue(key)
        self._tasks = [
            asyncio.create_task(self._feed(sub), name=f"{self.name}-feed"),
            asyncio.create_task(self._work(), name=f"{self.name}-work"),
        ]

    async def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        await cancel_and_wait(self._tasks, what=f"controller {type(self).__name__}")
        self._tasks = []

    def pause(self) -> None:
        """Hold all work (the cluster is down): events and timers still queue keys, nothing is reconciled."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    async def _feed(self, sub: Any) -> None:
        async for event in sub:
            if not self.enabled:
                continue
            for key in self.keys_for(event):
                self.enqueue(key)

    async def _work(self) -> None:
        count = 0
        while True:
            key = await self._queue.get()
            await self._running.wait()
            self._pending.discard(key)
            if not self.enabled:
                continue
            try:
                self.reconcile(key)
            except ApiError as e:
                if e.code in (409, 404):
                    self.requeue_after(key, 0.05)
                else:
                    log.warning("%s: reconcile %s failed: %s", self.name, key, e.message)
                    self.requeue_after(key, 1.0)
            except Exception:
                log.exception("%s: reconcile %s crashed", self.name, key)
                self.requeue_after(key, 1.0)
            count += 1
            if count % 50 == 0:
                # Let HTTP handlers and other controllers run during bursts.
                await asyncio.sleep(0)
