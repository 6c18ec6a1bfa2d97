"""SQL state: workers, workloads, every placement attempt, and an audit trail.

The database is the dispatcher's memory across crashes: intent is written here before any cluster is
touched, so a restart resumes half-done work instead of guessing. Times are stored as UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    false,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

__all__ = [
    "AuditEvent",
    "Base",
    "Cluster",
    "Leadership",
    "Placement",
    "PlacementState",
    "Workload",
    "WorkloadState",
    "utcnow",
]


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python, on SQLite and PostgreSQL alike."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


JSONType = JSON().with_variant(JSONB(), "postgresql")
BigId = BigInteger().with_variant(Integer(), "sqlite")

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class WorkloadState:
    """Where a workload is in its life. Terminal: Succeeded, Failed, Cancelled."""

    PENDING = "Pending"  # waiting for a worker
    PLACING = "Placing"  # intent written, remote copy being created
    PLACED = "Placed"  # remote copy exists, waiting for the worker's Kueue
    ADMITTED = "Admitted"  # the worker's Kueue admitted it
    RUNNING = "Running"  # pods active on the worker
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"  # the manager object was deleted

    TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELLED})
    ACTIVE = frozenset({PLACING, PLACED, ADMITTED, RUNNING})
    ALL = (PENDING, PLACING, PLACED, ADMITTED, RUNNING, SUCCEEDED, FAILED, CANCELLED)


class PlacementState:
    CREATING = "Creating"  # intent: the remote copy may or may not exist yet
    CREATED = "Created"
    ADMITTED = "Admitted"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    TIMED_OUT = "TimedOut"  # not admitted within the admission timeout; copy deleted
    REJECTED = "Rejected"  # the worker refused the copy (validation, name clash)
    LOST = "Lost"  # the worker was lost; superseded by a newer generation
    CANCELLED = "Cancelled"
    DRAINED = "Drained"
    SUPERSEDED = "Superseded"  # another strategy's copy won (allAtOnce, incremental)
    FENCED = "Fenced"  # the worker's fencing agent stopped the copy (our fencing Lease expired there)

    OPEN = frozenset({CREATING, CREATED, ADMITTED, RUNNING})


class Cluster(Base):
    """A worker cluster as the dispatcher sees it."""

    __tablename__ = "clusters"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    health: Mapped[str] = mapped_column(String(16), default="Unknown")
    health_since: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    cordoned: Mapped[bool] = mapped_column(Boolean, default=False)
    last_seen: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    #: Bumped each time the worker comes back from Lost; copies of older workload generations there are fenced.
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class Workload(Base):
    """One manager object (a Job, JobSet, …) the dispatcher took."""

    __tablename__ = "workloads"
    __table_args__ = (
        Index("ix_workloads_state_priority", "state", "priority"),
        Index("ix_workloads_namespace_name", "namespace", "name"),
        Index("ix_workloads_cluster_state", "cluster", "state"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    uid: Mapped[str] = mapped_column(String(64), unique=True)
    namespace: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(253))
    kind: Mapped[str] = mapped_column(String(63))
    api_version: Mapped[str] = mapped_column(String(127))
    queue: Mapped[str] = mapped_column(String(253))
    priority: Mapped[int] = mapped_column(Integer, default=0)
    priority_class: Mapped[str | None] = mapped_column(String(253), nullable=True)
    #: [{"name", "count", "requests": {resource: quantity}, ...}] as Kueue computes pod sets.
    pod_sets: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    state: Mapped[str] = mapped_column(String(16), default=WorkloadState.PENDING)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: A problem with the object itself that no worker can honour (e.g. a gpumem HAMi cannot parse);
    #: the workload waits, unplaced, until the object changes.
    problem: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: The manager object's metadata.generation when it was last read (spec changes while pending).
    object_generation: Mapped[int] = mapped_column(Integer, default=1)
    #: Fencing: raised each time a placement is abandoned; remote copies of older generations are stale.
    generation: Mapped[int] = mapped_column(Integer, default=1)
    cluster: Mapped[str | None] = mapped_column(String(63), nullable=True)
    placement_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    #: "status" when the manager object is managed by the dispatcher (spec.managedBy), else "annotations".
    status_mode: Mapped[str] = mapped_column(String(16), default="annotations")
    no_failover: Mapped[bool] = mapped_column(Boolean, default=False)
    cluster_selector: Mapped[dict[str, str] | None] = mapped_column(JSONType, nullable=True)
    #: Workers not to try again for this workload (admission timeout, rejection).
    excluded: Mapped[list[str]] = mapped_column(JSONType, default=list)
    last_decision: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    remote_status: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    deleted: Mapped[bool] = mapped_column(Boolean, default=False)
    #: Stopped by an operator (``dispatcher stop``, as ``kueuectl stop workload``): never placed until resumed.
    stopped: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    placed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    admitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    cleaned_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)

    placements: Mapped[list[Placement]] = relationship(
        back_populates="workload", cascade="all, delete-orphan", order_by="Placement.id"
    )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class Placement(Base):
    """One attempt to run a workload on a worker, with the decision that chose it."""

    __tablename__ = "placements"
    __table_args__ = (Index("ix_placements_cluster_state", "cluster", "state"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id", ondelete="CASCADE"), index=True)
    generation: Mapped[int] = mapped_column(Integer)
    cluster: Mapped[str] = mapped_column(String(63))
    strategy: Mapped[str] = mapped_column(String(16), default="scored")
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Every worker's score or reason at decision time.
    decision: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    state: Mapped[str] = mapped_column(String(16), default=PlacementState.CREATING)
    outcome: Mapped[str | None] = mapped_column(Text, nullable=True)
    remote_uid: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    mirrored_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    admitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    workload: Mapped[Workload] = relationship(back_populates="placements")


class AuditEvent(Base):
    """What happened, when and why: the trail behind ``dispatcher explain`` and the API."""

    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_workload_id_at", "workload_id", "at"),
        Index("ix_events_cluster_at", "cluster", "at"),  # a worker's history (dashboard, events?cluster=)
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    workload_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    cluster: Mapped[str | None] = mapped_column(String(63), nullable=True)
    type: Mapped[str] = mapped_column(String(32))
    message: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)


class Leadership(Base):
    """The fencing term of the acting dispatcher replica (one row)."""

    __tablename__ = "leadership"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    term: Mapped[int] = mapped_column(BigInteger, default=0)
    holder: Mapped[str | None] = mapped_column(String(253), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
