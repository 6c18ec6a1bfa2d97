"""Shared pieces of the simulated operators (JobSet, Kubeflow training operator, KubeRay).

Each operator is a :class:`OwnerController`: it watches its kinds and the children it creates (Jobs,
Pods, RayClusters), maps a child's event to its controlling owner, and reconciles the owner. Like the real
operators, it leaves alone an object whose managedBy names another controller (a manager cluster's object
handed to a dispatcher).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from ..api import Api, now_rfc3339
from ..errors import ApiError
from ..store import StoreEvent
from .base import Controller

__all__ = ["OwnerController", "owner_ref", "set_condition", "true_condition"]

Obj = dict[str, Any]


def owner_ref(obj: Obj) -> Obj:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def true_condition(status: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in status.get("conditions") or ())


def set_condition(status: Obj, ctype: str, value: str, reason: str, message: str, *, update_time: bool = False) -> None:
    """Set a condition (``lastTransitionTime`` moves only when the status changes)."""
    now = now_rfc3339()
    conditions = status.setdefault("conditions", [])
    for c in conditions:
        if c.get("type") == ctype:
            if c.get("status") != value:
                c["lastTransitionTime"] = now
                if update_time:
                    c["lastUpdateTime"] = now
            c.update({"status": value, "reason": reason, "message": message})
            return
    new = {"type": ctype, "status": value, "reason": reason, "message": message, "lastTransitionTime": now}
    if update_time:
        new["lastUpdateTime"] = now
    conditions.append(new)


class OwnerController(Controller):
    """Reconciles objects of ``kinds`` (store keys); events on children are mapped to their owner."""

    #: store key -> kind of the objects this controller owns.
    kinds: dict[str, str] = {}
    #: store keys of children whose events wake their owner.
    children: tuple[str, ...] = ()
    #: The managedBy value of this operator; another value means "not mine".
    own_controller = ""

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self.resources = (*self.kinds, *self.children)
        self._by_kind = {kind: key for key, kind in self.kinds.items()}

    def keys_for(self, event: StoreEvent) -> Iterable[Hashable]:
        meta = event.obj["metadata"]
        ns = meta.get("namespace", "")
        out: list[Hashable] = []
        if event.resource in self.kinds:
            out.append((event.resource, ns, meta["name"]))
        for ref in meta.get("ownerReferences") or ():
            key = self._by_kind.get(str(ref.get("kind")))
            if key is not None and ref.get("controller"):
                out.append((key, ns, str(ref.get("name"))))
        return out

    def initial_keys(self) -> Iterable[Hashable]:
        for key in self.kinds:
            for obj in self.api.store.iter_all(key):
                yield (key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])

    def managed_by(self, obj: Obj) -> str | None:
        value = (obj.get("spec") or {}).get("managedBy")
        return str(value) if value else None

    def mine(self, obj: Obj) -> bool:
        managed_by = self.managed_by(obj)
        return not managed_by or managed_by == self.own_controller

    def owned(self, resource: str, obj: Obj) -> list[Obj]:
        """Children of ``obj`` in ``resource`` (controller owner reference to its uid)."""
        uid = obj["metadata"]["uid"]
        return [
            c
            for c in self.api.store.list(resource, obj["metadata"].get("namespace"))
            if any(r.get("uid") == uid and r.get("controller") for r in c["metadata"].get("ownerReferences") or ())
        ]

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        resource, ns, name = key
        obj = self.api.store.get(resource, ns, name)
        if obj is None or obj["metadata"].get("deletionTimestamp") or not self.mine(obj):
            return
        self.sync(resource, obj)

    def sync(self, resource: str, obj: Obj) -> None:
        raise NotImplementedError

    def write_status(self, obj: Obj, status: Obj) -> None:
        if status == (obj.get("status") or {}):
            return
        new = dict(obj)
        new["status"] = status
        self.client.update_status(new)

    def create_child(self, child: Obj) -> None:
        try:
            self.client.create(child)
        except ApiError as e:
            if e.code != 409:
                raise

    def delete_child(self, resource: str, child: Obj) -> None:
        rt = self.api.registry.by_key(resource)
        self.client.delete(rt, child["metadata"].get("namespace"), child["metadata"]["name"])


def pod_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
