"""The per-kind seam: everything the core needs to know about a workload kind.

Adding a kind is one module implementing :class:`Adapter` plus its tests; intake, placement, mirror,
status sync and failover stay as they are.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from .. import labels as L
from ..kube.client import Resource
from ..patch_util import strip_server_fields
from ..resources import PodSet

__all__ = ["Adapter", "Intake", "RemotePhase"]

Obj = dict[str, Any]


@dataclass(frozen=True)
class Intake:
    """Whether the dispatcher takes a manager object.

    ``take``: it is ours to place. ``warning``: not taken, and the user should be told why (a Warning
    Event). Neither: silently not ours (managed by another controller).
    """

    take: bool
    status_mode: str = "annotations"  # "status" when we own the object's status through managedBy
    warning: str | None = None


@dataclass(frozen=True)
class RemotePhase:
    """What the remote copy is doing, as far as its kind tells."""

    finished: bool = False
    succeeded: bool = False
    running: bool = False
    reason: str = ""
    message: str = ""


class Adapter(ABC):
    """One workload kind (``batch/v1`` Job, JobSet, …)."""

    kind: str
    resource: Resource

    def queue_name(self, obj: Obj) -> str | None:
        return ((obj.get("metadata") or {}).get("labels") or {}).get(L.QUEUE_NAME)

    def priority_class(self, obj: Obj) -> str | None:
        """The WorkloadPriorityClass named by the label, else the pod template's PriorityClass."""
        label = ((obj.get("metadata") or {}).get("labels") or {}).get(L.PRIORITY_CLASS)
        if label:
            return str(label)
        for ps in self.pod_sets(obj):
            name = (ps.template.get("spec") or {}).get("priorityClassName")
            if name:
                return str(name)
        return None

    @abstractmethod
    def intake(self, obj: Obj, controller_name: str) -> Intake:
        """Whether to take ``obj`` (see :class:`Intake`)."""

    @abstractmethod
    def pod_sets(self, obj: Obj) -> list[PodSet]:
        """The pod sets as Kueue computes them for this kind; raises ``InvalidRequest``."""

    @abstractmethod
    def remote_copy(self, obj: Obj, labels: dict[str, str], annotations: dict[str, str]) -> Obj:
        """The object to create on a worker: same name and namespace, origin labels, managedBy cleared,
        suspended so the worker's Kueue admits it."""

    @abstractmethod
    def phase(self, remote: Obj) -> RemotePhase:
        """Finished / succeeded / running, from the remote copy's status."""

    def remote_status(self, remote: Obj) -> Obj:
        """What is copied back to the manager: the whole ``status``, as MultiKueue does."""
        status = remote.get("status")
        return dict(status) if isinstance(status, dict) else {}

    def manager_status(self, local: Obj, remote: Obj) -> Obj | None:
        """The status to write on a manager object the dispatcher manages, or None to leave it."""
        return self.remote_status(remote)

    def activate_patch(self, local: Obj) -> Obj | None:
        """A patch that shows a managed manager object as running (e.g. unsuspend), or None."""
        return None

    def base_copy(self, obj: Obj, labels: dict[str, str], annotations: dict[str, str]) -> Obj:
        """The common part of a remote copy: metadata cleaned of server fields, origin labels added."""
        meta = obj.get("metadata") or {}
        copy = strip_server_fields(obj)
        cmeta = copy.setdefault("metadata", {})
        cmeta["name"] = meta["name"]
        cmeta["namespace"] = meta.get("namespace", "default")
        cmeta["labels"] = {**dict(meta.get("labels") or {}), **labels}
        kept = {
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if k != "kubectl.kubernetes.io/last-applied-configuration" and not k.startswith(L.DOMAIN + "/")
        }
        cmeta["annotations"] = {**kept, **annotations}
        copy.pop("status", None)
        return copy
