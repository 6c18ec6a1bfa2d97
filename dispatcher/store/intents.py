"""What the steps hand the store to write: new workloads, placement and race intents, guarded transitions."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["NewWorkload", "PlacementIntent", "RaceIntent", "Transition", "WorkloadCounts"]


@dataclass
class NewWorkload:
    uid: str
    namespace: str
    name: str
    kind: str
    api_version: str
    queue: str
    priority: int
    priority_class: str | None
    pod_sets: list[dict[str, Any]]
    status_mode: str
    no_failover: bool
    cluster_selector: dict[str, str] | None
    created_at: datetime | None
    object_generation: int = 1
    problem: str | None = None
    reason: str | None = None


@dataclass
class PlacementIntent:
    """A decision to create a copy of a workload on ``cluster`` at ``generation``."""

    workload_id: int
    generation: int
    cluster: str
    strategy: str
    score: float | None
    decision: dict[str, Any]
    #: Set by :meth:`Repo.begin_placements` when the intent was recorded.
    placement_id: int | None = None


@dataclass
class RaceIntent:
    """MultiKueue-style strategies: copies of one workload at one generation on several workers at once."""

    workload_id: int
    generation: int
    strategy: str
    clusters: list[str]
    decision: dict[str, Any]
    #: Set when recorded: placement id per cluster.
    placement_ids: dict[str, int] = field(default_factory=dict)


@dataclass
class WorkloadCounts:
    """Workloads per state, per LocalQueue ``(namespace, queue)`` and per worker (only states with any)."""

    queues: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    clusters: dict[str, dict[str, int]] = field(default_factory=dict)

    def namespaces(self) -> dict[str, dict[str, int]]:
        """Per namespace: the sum over its LocalQueues."""
        out: dict[str, dict[str, int]] = {}
        for (namespace, _queue), states in sorted(self.queues.items()):
            into = out.setdefault(namespace, {})
            for state, n in states.items():
                into[state] = into.get(state, 0) + n
        return out


@dataclass
class Transition:
    """A guarded update of a workload (and optionally its placement), applied in a batch."""

    workload_id: int
    generation: int
    values: dict[str, Any]
    #: Only when the workload is in one of these states (empty: any non-terminal state).
    from_states: tuple[str, ...] = ()
    placement_id: int | None = None
    placement_values: dict[str, Any] = field(default_factory=dict)
    event: tuple[str, str, dict[str, Any] | None] | None = None  # (type, message, data)
    cluster: str | None = None
