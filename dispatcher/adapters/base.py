"""The per-kind seam: everything the core needs to know about a workload kind.

Adding a kind is one module implementing :class:`Adapter` plus its tests; intake, placement, mirror,
status sync and failover stay as they are.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .. import labels as L
from ..kube.client import Resource
from ..patch_util import strip_server_fields
from ..resources import PodSet

__all__ = ["Adapter", "Intake", "RemotePhase", "condition_true", "dig", "now_rfc3339"]

Obj = dict[str, Any]


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def dig(obj: Any, *keys: str) -> Any:
    """``obj[k1][k2]…``, or None where a level is missing or not a mapping."""
    cur = obj
    for k in keys:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(k)
    return cur


def condition_true(status: Obj | None, ctype: str) -> Obj | None:
    """The condition of ``ctype`` in ``status.conditions`` when its status is True."""
    for c in (status or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == ctype and c.get("status") == "True":
            return c
    return None


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

    def failed_status(self, local: Obj, message: str, reason: str = "WorkerLost") -> Obj | None:
        """The status that marks a managed manager object Failed when no copy reports it (a lost worker
        with no failover), in the form the kind's status accepts; None writes no status."""
        return None

    # -- the common form of the CRD kinds: managedBy or suspension ------------------------------------------

    #: The kind's own operator's managedBy value (the object is not handed to anyone else).
    own_controller: str = ""
    #: Where the kind keeps ``suspend`` (``spec.runPolicy`` for Kubeflow): the fencing agent suspends a copy there.
    suspend_at: tuple[str, ...] = ("spec",)

    def managed_by(self, obj: Obj) -> str | None:
        """The object's managedBy value (where the kind keeps it)."""
        value = dig(obj, "spec", "managedBy")
        return str(value) if value else None

    def suspended(self, obj: Obj) -> bool:
        return bool(dig(obj, *self.suspend_at, "suspend"))

    def pod_selector(self, obj: Obj) -> str | None:
        """A label selector for the pods ``obj`` runs on its own cluster (``None``: not known for the kind).

        A fencing agent deletes them after suspending the copy: a suspend stops pods only when the kind's controller
        gets to it, and on a busy worker that takes seconds (seen on the real rig: the Job controller's status
        writes conflicting with the suspend, its pods gone 16 s later).
        """
        return None

    def finished(self, obj: Obj) -> bool:
        return self.phase(obj).finished

    def standard_intake(self, obj: Obj, controller_name: str, suspend_field: str, managed_by_field: str) -> Intake:
        """Taken when ``managedBy`` names the dispatcher (status mode) or when suspended (annotations mode);
        left alone when another controller manages it or it already finished; else a warning."""
        managed_by = self.managed_by(obj)
        if managed_by == controller_name:
            return Intake(True, status_mode="status")
        if managed_by and managed_by != self.own_controller:
            return Intake(False)
        if self.finished(obj):
            return Intake(False)
        if self.suspended(obj):
            return Intake(True, status_mode="annotations")
        return Intake(
            False,
            warning=(
                f"{self.kind} is labelled {L.QUEUE_NAME} but is neither suspended nor managed by {controller_name}, "
                "so it runs on this cluster and the dispatcher leaves it alone; to dispatch it, create it with "
                f"{suspend_field}: true or {managed_by_field}: {controller_name}"
            ),
        )

    def suspended_copy(
        self, obj: Obj, labels: dict[str, str], annotations: dict[str, str], at: tuple[str, ...] = ("spec",)
    ) -> Obj:
        """:meth:`base_copy` with the kind's ``managedBy`` cleared and ``suspend`` set, both under ``at``
        (``spec`` for JobSet and Ray, ``spec.runPolicy`` for Kubeflow): the worker's own controller runs it
        once the worker's Kueue admits it."""
        copy = self.base_copy(obj, labels, annotations)
        node = copy
        for key in at:
            node = node.setdefault(key, {})
        node.pop("managedBy", None)
        node["suspend"] = True
        return copy

    def base_copy(self, obj: Obj, labels: dict[str, str], annotations: dict[str, str]) -> Obj:
        """The common part of a remote copy: metadata cleaned of server fields, origin labels added."""
        meta = obj.get("metadata") or {}
        copy = strip_server_fields(obj)
        cmeta = copy.setdefault("metadata", {})
        cmeta["name"] = meta["name"]
        cmeta["namespace"] = meta.get("namespace", "default")
        # The manager object's own report labels (where it runs, in what state) say nothing true of a copy.
        own = {k: v for k, v in dict(meta.get("labels") or {}).items() if k not in (L.CLUSTER, L.STATE)}
        cmeta["labels"] = {**own, **labels}
        kept = {
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if k != "kubectl.kubernetes.io/last-applied-configuration" and not k.startswith(L.DOMAIN + "/")
        }
        cmeta["annotations"] = {**kept, **annotations}
        copy.pop("status", None)
        return copy
