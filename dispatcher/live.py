"""The service's in-memory index of open workloads, mirroring their SQL rows.

SQL is the truth; a :class:`Live` record is loaded from a row at start and changed only after the
matching SQL write committed, so a crash loses nothing that was not also lost in SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .placement.workload import PendingWorkload, PodSetSpec
from .store.models import Workload, WorkloadState

__all__ = ["Live", "LiveSet"]


@dataclass
class Live:
    id: int
    uid: str
    namespace: str
    name: str
    kind: str
    queue: str
    priority: int
    generation: int
    state: str
    status_mode: str
    no_failover: bool
    pod_sets: list[dict[str, Any]]
    cluster_selector: dict[str, str] | None
    excluded: list[str]
    created: float
    cluster: str | None = None
    placement_id: int | None = None
    remote_uid: str | None = None
    problem: str | None = None
    #: The priority class the object names (its Kueue label, or its pods' PriorityClass).
    priority_class: str | None = None
    #: Monotonic time the copy was created (admission timeout counts from here).
    placed_at: float = 0.0
    #: The worker's informer has shown the current copy (or listed the worker after the copy was made), so its
    #: absence from the informer's cache means it is gone, not that the watch is behind.
    remote_seen: bool = False
    #: Monotonic time the workload finished (retention counts from here).
    finished_at: float = 0.0
    cleaned: bool = False
    deleted: bool = False
    #: A step in flight (mirror, delete): other steps wait for it.
    busy: bool = False
    #: What was last written to the manager object (to skip identical writes).
    reported: dict[str, Any] = field(default_factory=dict)
    decision_summary: str = ""
    #: Stopped by an operator: not placed until resumed.
    stopped: bool = False
    #: The last decision said no worker can ever hold it as it is (Kueue would call it inadmissible).
    never_fits: bool = False
    #: The worker ClusterQueue the copy was last seen in (for the metrics).
    cluster_queue: str = ""
    _pending: PendingWorkload | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.state in WorkloadState.TERMINAL

    @classmethod
    def from_row(cls, row: Workload, now_mono: float, now_wall: float) -> Live:
        created = row.created_at or row.submitted_at
        return cls(
            id=row.id,
            uid=row.uid,
            namespace=row.namespace,
            name=row.name,
            kind=row.kind,
            queue=row.queue,
            priority=row.priority,
            generation=row.generation,
            state=row.state,
            status_mode=row.status_mode,
            no_failover=row.no_failover,
            pod_sets=list(row.pod_sets or []),
            cluster_selector=dict(row.cluster_selector) if row.cluster_selector else None,
            excluded=list(row.excluded or []),
            created=created.timestamp() if created else now_wall,
            cluster=row.cluster,
            placement_id=row.placement_id,
            problem=row.problem,
            priority_class=row.priority_class,
            placed_at=now_mono,
            # Copies made before this process started are in the informers' first list when they exist.
            remote_seen=row.state in (WorkloadState.PLACED, WorkloadState.ADMITTED, WorkloadState.RUNNING),
            finished_at=now_mono if row.state in WorkloadState.TERMINAL else 0.0,
            cleaned=row.cleaned_at is not None,
            deleted=row.deleted,
            stopped=bool(row.stopped),
        )

    def pending(self) -> PendingWorkload:
        """The engine's view (rebuilt when generation or exclusions change)."""
        p = self._pending
        if p is None or p.generation != self.generation or p.excluded != frozenset(self.excluded):
            p = PendingWorkload(
                id=self.id,
                uid=self.uid,
                namespace=self.namespace,
                name=self.name,
                queue=self.queue,
                priority=self.priority,
                created=self.created,
                generation=self.generation,
                pod_sets=tuple(PodSetSpec.from_json(ps) for ps in self.pod_sets),
                selector=self.cluster_selector,
                excluded=frozenset(self.excluded),
                kind=self.kind,
                priority_class=self.workload_priority_class,
            )
            self._pending = p
        return p

    @property
    def workload_priority_class(self) -> str | None:
        """The WorkloadPriorityClass the ``kueue.x-k8s.io/priority-class`` label names (not a pods' PriorityClass,
        which the intake records the same way when there is no label)."""
        pc = self.priority_class
        if not pc:
            return None
        for ps in self.pod_sets:
            if (((ps.get("template") or {}).get("spec")) or {}).get("priorityClassName") == pc:
                return None
        return pc


class LiveSet:
    """Open workloads by id, manager uid and (cluster, remote uid)."""

    def __init__(self) -> None:
        self.by_id: dict[int, Live] = {}
        self.by_uid: dict[str, Live] = {}
        self.by_remote: dict[tuple[str, str], Live] = {}

    def __len__(self) -> int:
        return len(self.by_id)

    def add(self, live: Live) -> None:
        self.by_id[live.id] = live
        self.by_uid[live.uid] = live
        if live.cluster and live.remote_uid:
            self.by_remote[(live.cluster, live.remote_uid)] = live

    def set_remote(self, live: Live, cluster: str | None, remote_uid: str | None) -> None:
        if live.cluster and live.remote_uid:
            self.by_remote.pop((live.cluster, live.remote_uid), None)
        live.cluster = cluster
        live.remote_uid = remote_uid
        if cluster and remote_uid:
            self.by_remote[(cluster, remote_uid)] = live

    def drop(self, live: Live) -> None:
        self.by_id.pop(live.id, None)
        self.by_uid.pop(live.uid, None)
        if live.cluster and live.remote_uid:
            self.by_remote.pop((live.cluster, live.remote_uid), None)
