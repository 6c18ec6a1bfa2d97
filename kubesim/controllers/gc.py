"""kube-controller-manager's garbage collector and namespace controller, simulated.

- Dependents (``ownerReferences``) of a deleted owner are deleted (Background propagation).
- ``orphan`` finalizer: the owner's dependents lose their owner reference, then the finalizer goes.
- ``foregroundDeletion`` finalizer: dependents are deleted first, then the owner.
- A namespace marked for deletion has all its content deleted, then its ``kubernetes`` finalizer
  is removed and it disappears.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from ..api import Api
from ..patch import clone
from ..store import StoreEvent
from .base import Controller

__all__ = ["GarbageCollector", "NamespaceController"]

Obj = dict[str, Any]


class GarbageCollector(Controller):
    name = "garbage-collector"

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self.resources = tuple(rt.key for rt in api.registry.types)
        #: owner uid -> dependents (resource, namespace, name)
        self._dependents: dict[str, set[tuple[str, str, str]]] = {}

    def _index(self, resource: str, obj: Obj, add: bool) -> None:
        meta = obj["metadata"]
        ref = (resource, meta.get("namespace", ""), meta["name"])
        for owner in meta.get("ownerReferences") or ():
            uid = owner.get("uid")
            if not uid:
                continue
            if add:
                self._dependents.setdefault(uid, set()).add(ref)
            else:
                deps = self._dependents.get(uid)
                if deps is not None:
                    deps.discard(ref)
                    if not deps:
                        del self._dependents[uid]

    def initial_keys(self) -> Iterable[Hashable]:
        for resource in self.resources:
            for obj in self.api.store.iter_all(resource):
                self._index(resource, obj, True)
        return super().initial_keys()

    def keys_for(self, event: StoreEvent) -> Iterable[Hashable]:
        if event.prev is not None:
            self._index(event.resource, event.prev, False)
        if event.type != "DELETED":
            self._index(event.resource, event.obj, True)
        meta = event.obj["metadata"]
        keys: list[Hashable] = []
        if event.type == "DELETED":
            uid = meta.get("uid")
            if uid and uid in self._dependents:
                keys.append(("orphaned-by", uid))
        elif meta.get("deletionTimestamp") or meta.get("ownerReferences"):
            keys.append((event.resource, meta.get("namespace", ""), meta["name"]))
        return keys

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        if key[0] == "orphaned-by":
            self._delete_dependents(key[1])
            return
        resource, namespace, name = key
        obj = self.api.store.get(resource, namespace, name)
        if obj is None:
            return
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            finalizers = meta.get("finalizers") or []
            if "orphan" in finalizers:
                self._orphan_dependents(meta["uid"])
                self._drop_finalizer(resource, namespace, name, "orphan")
            elif "foregroundDeletion" in finalizers:
                if self._dependents.get(meta["uid"]):
                    self._delete_dependents(meta["uid"])
                    self.requeue_after(key, 0.05)
                else:
                    self._drop_finalizer(resource, namespace, name, "foregroundDeletion")
            return
        # A dependent whose owners are all gone is garbage (the owner was deleted while it was created).
        owners = meta.get("ownerReferences") or []
        if owners and all(self.api.store.by_uid(o.get("uid", "")) is None for o in owners):
            rt = self.api.registry.by_key(resource)
            self.client.delete(rt, namespace or None, name)

    def _delete_dependents(self, uid: str) -> None:
        for resource, namespace, name in list(self._dependents.get(uid, ())):
            rt = self.api.registry.by_key(resource)
            obj = self.api.store.get(resource, namespace, name)
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                continue
            self.client.delete(rt, namespace or None, name, propagation="Background")

    def _orphan_dependents(self, uid: str) -> None:
        for resource, namespace, name in list(self._dependents.get(uid, ())):
            rt = self.api.registry.by_key(resource)
            obj = self.client.get(rt, namespace, name)
            if obj is None:
                continue
            obj["metadata"]["ownerReferences"] = [
                o for o in obj["metadata"].get("ownerReferences") or [] if o.get("uid") != uid
            ]
            if not obj["metadata"]["ownerReferences"]:
                del obj["metadata"]["ownerReferences"]
            self.client.update(obj)

    def _drop_finalizer(self, resource: str, namespace: str, name: str, finalizer: str) -> None:
        rt = self.api.registry.by_key(resource)
        obj = self.client.get(rt, namespace, name)
        if obj is None:
            return
        obj["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
        self.client.update(obj)


class NamespaceController(Controller):
    name = "namespace-controller"
    resources = ("namespaces",)

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        _, _, name = key
        ns = self.api.store.get("namespaces", "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        remaining = 0
        for rt in self.api.registry.types:
            if not rt.namespaced:
                continue
            for obj in list(self.api.store.list(rt.key, name)):
                remaining += 1
                if not obj["metadata"].get("deletionTimestamp"):
                    self.client.delete(rt, name, obj["metadata"]["name"])
        if remaining:
            self.requeue_after(key, 0.1)
            return
        new = clone(ns)
        spec = new.setdefault("spec", {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != "kubernetes"]
        meta = new["metadata"]
        rv = self.api.store.next_rv()
        if not meta.get("finalizers") and not spec["finalizers"]:
            self.api.store.remove("namespaces", "", name, rv)
            return
        meta["resourceVersion"] = str(rv)
        self.api.store.put("namespaces", new, rv, created=False)
