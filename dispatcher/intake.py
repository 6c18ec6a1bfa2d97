"""Intake: manager objects labelled with a queue name become workload rows.

An informer per supported kind watches the manager (label selector: the queue-name label exists).
Each object is judged by its kind's adapter: taken (suspended, or ``managedBy`` the dispatcher),
silently left (another controller's), or left with a Warning Event saying why (running unsuspended).
Taken objects are written to SQL in batches (intent first: nothing is placed before its row exists)
and handed to the placement loop. Deleted manager objects cancel their workload.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubecommon.tasks import cancel_and_wait

from . import labels as L
from .adapters.base import Adapter
from .config import KubeconfigRef
from .events import EventRecorder
from .kube.client import ClusterClient, KubeError, Resource
from .kube.informer import Informer
from .placement.hami.webhook import hami_problem
from .resources import InvalidRequest
from .store.models import Workload, WorkloadState
from .store.repo import NewWorkload, Repo

__all__ = ["PRIORITY_CLASSES", "Intake", "check_manager_access", "parse_cluster_selector"]

log = logging.getLogger("dispatcher.intake")
PRIORITY_CLASSES = Resource("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass", False)
Obj = dict[str, Any]


def parse_cluster_selector(value: str | None) -> dict[str, str] | None:
    """``"gpu=true,zone=zone-1"`` → ``{"gpu": "true", "zone": "zone-1"}``; raises ValueError on junk."""
    if not value:
        return None
    out: dict[str, str] = {}
    for raw in value.split(","):
        part = raw.strip()
        if not part:
            continue
        key, sep, val = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected key=value pairs separated by commas, got {part!r}")
        out[key.strip()] = val.strip()
    return out or None


def _created(obj: Obj) -> datetime | None:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass
class PriorityResolver:
    """Priority values of WorkloadPriorityClasses (kept current by an informer on the manager)."""

    values: dict[str, int]

    def priority(self, name: str | None, template_priority: int | None) -> int:
        if name and name in self.values:
            return self.values[name]
        return template_priority or 0

    def on_event(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        """The informer on the manager's WorkloadPriorityClasses."""
        name = (obj.get("metadata") or {}).get("name")
        if name and kind == "DELETED":
            self.values.pop(name, None)
        elif name:
            self.values[name] = int(obj.get("value") or 0)


class Intake:
    def __init__(
        self,
        manager: ClusterClient,
        repo: Repo,
        adapters: Sequence[Adapter],
        events: EventRecorder,
        *,
        controller_name: str,
        namespace_allowed: Callable[[str], bool],
        on_new: Callable[[list[Workload]], None],
        on_deleted: Callable[[str], None],
        on_changed: Callable[[str, Obj], None],
        priorities: PriorityResolver,
        active: bool = True,
    ) -> None:
        self.manager = manager
        self.repo = repo
        self.adapters = {a.kind: a for a in adapters}
        self.events = events
        self.controller_name = controller_name
        self.namespace_allowed = namespace_allowed
        self.on_new = on_new
        self.on_deleted = on_deleted
        self.on_changed = on_changed
        self.priorities = priorities
        self.informers: list[Informer] = []
        self.priority_informer: Informer | None = None
        self._queue: asyncio.Queue[NewWorkload] = asyncio.Queue()
        self._known: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        #: Manager objects by uid, as last seen (the status sync reads them to patch).
        self.objects: dict[str, Obj] = {}
        self._origin: dict[str, Adapter] = {}  # uid -> the adapter whose informer lists it
        self.taken = 0
        self.ignored = 0
        #: Inactive (a standby replica): the informers keep ``objects`` current, nothing is taken or written.
        self.active = active

    def know(self, uids: Sequence[str]) -> None:
        """Uids already in SQL (from recovery): not inserted again."""
        self._known.update(uids)

    def activate(self, known: Sequence[str]) -> None:
        """Start taking objects (this replica leads): ``known`` are the uids already in SQL; every object the
        informers hold that is not among them is considered now, as if it had just been added."""
        self._known = set(known)
        self.active = True
        for obj in list(self.objects.values()):
            uid = (obj.get("metadata") or {}).get("uid")
            adapter = self._adapter_of(obj)
            if uid and uid not in self._known and adapter is not None:
                self._consider(adapter, obj)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._writer(), name="intake-writer")

    def deactivate(self) -> None:
        """Stop taking objects (this replica stands by); what was queued and not written is dropped, SQL and
        the next leader's :meth:`activate` pick it up again."""
        self.active = False
        self._known = set()
        self._queue = asyncio.Queue()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def _adapter_of(self, obj: Obj) -> Adapter | None:
        """The adapter whose informer lists ``obj`` (list items carry no kind on a real API server)."""
        return self._origin.get((obj.get("metadata") or {}).get("uid", ""))

    def start(self) -> None:
        # The priority values the manager's WorkloadPriorityClasses give (read by every workload taken in).
        self.priority_informer = Informer(self.manager, PRIORITY_CLASSES, self.priorities.on_event)
        self.priority_informer.start()
        for adapter in self.adapters.values():
            inf = Informer(
                self.manager,
                adapter.resource,
                self._handler(adapter),
                label_selector=L.QUEUE_NAME,
            )
            inf.start()
            self.informers.append(inf)
        if self.active:
            self._task = asyncio.create_task(self._writer(), name="intake-writer")

    def rejection(self) -> str | None:
        """Why the manager refuses the dispatcher now (401/403 on these informers), if it does."""
        informers = [*self.informers, *([self.priority_informer] if self.priority_informer is not None else [])]
        return next((inf.rejected.rejection() for inf in informers if inf.rejected is not None), None)

    async def stop(self) -> None:
        if self.priority_informer is not None:
            await self.priority_informer.stop()
        for inf in self.informers:
            await inf.stop()
        if self._task is not None:
            await cancel_and_wait([self._task], what="intake")

    async def wait_synced(self) -> None:
        await asyncio.gather(*(inf.synced.wait() for inf in self.informers))

    def _handler(self, adapter: Adapter) -> Callable[[str, Obj, Obj | None], None]:
        def handle(kind: str, obj: Obj, old: Obj | None) -> None:
            meta = obj.get("metadata") or {}
            uid = meta.get("uid")
            if not uid:
                return
            if kind == "DELETED":
                self.objects.pop(uid, None)
                self._origin.pop(uid, None)
                if uid in self._known and self.active:
                    self.on_deleted(uid)
                return
            self.objects[uid] = obj
            self._origin[uid] = adapter
            if not self.active:
                return
            if uid in self._known:
                self.on_changed(uid, obj)
                return
            self._consider(adapter, obj)

        return handle

    def _consider(self, adapter: Adapter, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace", "default")
        if meta.get("deletionTimestamp"):
            return
        if not self.namespace_allowed(namespace):
            self.events.emit(
                obj,
                "Warning",
                "NamespaceNotAllowed",
                f"namespace {namespace} is not in the dispatcher's policy.allowedNamespaces; not dispatched",
            )
            self.ignored += 1
            return
        report = {**(meta.get("labels") or {}), **(meta.get("annotations") or {})}
        if report.get(L.STATE) in WorkloadState.TERMINAL:
            # Finished already (our own report on it says so): its record may have been deleted after
            # policy.recordRetention, which must never make it run again.
            self.ignored += 1
            return
        decision = adapter.intake(obj, self.controller_name)
        if not decision.take:
            if decision.warning:
                self.events.emit(obj, "Warning", "NotDispatched", decision.warning)
            self.ignored += 1
            return
        self._known.add(meta["uid"])
        self._queue.put_nowait(self._new_workload(adapter, obj, decision.status_mode))

    def _new_workload(self, adapter: Adapter, obj: Obj, status_mode: str) -> NewWorkload:
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        problem: str | None = None
        pod_sets_json: list[dict[str, Any]] = []
        template_priority: int | None = None
        priority_class: str | None = None
        try:
            pod_sets = adapter.pod_sets(obj)
            pod_sets_json = [ps.to_json() for ps in pod_sets]
            for ps, js in zip(pod_sets, pod_sets_json, strict=True):
                spec = ps.template.get("spec") or {}
                if template_priority is None and isinstance(spec.get("priority"), int):
                    template_priority = spec["priority"]
                issue = hami_problem(spec)
                if issue:
                    problem = f"pod set {ps.name}: {issue}"
                js["template"] = ps.template
            priority_class = adapter.priority_class(obj)
        except InvalidRequest as exc:
            problem = f"{exc.field}: {exc.why}: {exc.value!r}"
        selector = None
        try:
            selector = parse_cluster_selector(annotations.get(L.CLUSTER_SELECTOR))
        except ValueError as exc:
            problem = f"metadata.annotations[{L.CLUSTER_SELECTOR}]: {exc}"
        if problem:
            self.events.emit(obj, "Warning", "InvalidWorkload", f"not dispatched until fixed: {problem}")
        return NewWorkload(
            uid=meta["uid"],
            namespace=meta.get("namespace", "default"),
            name=meta["name"],
            kind=adapter.kind,
            api_version=adapter.resource.api_version,
            queue=adapter.queue_name(obj) or "",
            priority=self.priorities.priority(priority_class, template_priority),
            priority_class=priority_class,
            pod_sets=pod_sets_json,
            status_mode=status_mode,
            no_failover=str(annotations.get(L.NO_FAILOVER, "")).lower() == "true",
            cluster_selector=selector,
            created_at=_created(obj),
            object_generation=int(meta.get("generation") or 1),
            problem=problem,
        )

    async def _writer(self) -> None:
        """Insert taken workloads in batches; a failed batch is retried (nothing is dropped)."""
        while True:
            first = await self._queue.get()
            batch = [first]
            while not self._queue.empty() and len(batch) < 500:
                batch.append(self._queue.get_nowait())
            while True:
                try:
                    rows = await self.repo.add_workloads(batch)
                    break
                except Exception as exc:  # database down: keep the batch and retry
                    log.warning("intake: writing %d workloads failed (%s); retrying", len(batch), exc)
                    await asyncio.sleep(1.0)
            self.taken += len(rows)
            if rows:
                self.on_new(rows)


async def check_manager_access(manager: ClusterClient, adapters: Sequence[Adapter], ref: KubeconfigRef) -> None:
    """Fail the start when the manager refuses the dispatcher's credentials or rights: a dispatcher that can
    never list Jobs would otherwise start, report ready and take nothing. (An unreachable manager is not an
    error here: it may come up later, and the informers keep trying.)"""
    jobs = next((a.resource for a in adapters if a.kind == "Job"), adapters[0].resource)
    try:
        await manager.list(jobs, limit=1)
    except KubeError as exc:
        if not exc.rejected:
            log.warning("the manager does not answer yet (%s); the dispatcher keeps trying", exc)
            return
        hint = (
            "check the credentials of that kubeconfig"
            if exc.code == 401
            else "grant the dispatcher its RBAC on the manager (deploy/rbac.yaml)"
        )
        raise KubeError(
            exc.code,
            exc.reason,
            f"the manager ({ref.describe()}) refuses the dispatcher: {exc.rejection()}; {hint}",
        ) from None
