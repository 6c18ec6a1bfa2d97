"""``strategy: incremental``, MultiKueue's Incremental dispatcher: nominate workers in rounds.

Each round adds ``workersPerRound`` (default 3) not yet nominated eligible workers, in name order, as Kueue's
``incrementaldispatcher.go`` does; a new round starts every ``roundInterval`` (default 5 minutes) until a copy is
admitted or every eligible worker has one. The first admission among the nominated wins, as with allAtOnce.
Eligibility is allAtOnce's (:func:`.allatonce.eligible`). No I/O here.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from .allatonce import eligible
from .engine import Decision
from .worker import WorkerCapacity

__all__ = ["next_round", "nominate"]


def next_round(candidates: Sequence[str], nominated: Collection[str], per_round: int) -> list[str]:
    """The next ``per_round`` candidates not nominated yet, in name order (empty: nothing left)."""
    if per_round < 1:
        raise ValueError(f"workersPerRound must be >= 1, got {per_round}")
    return sorted(c for c in set(candidates) if c not in nominated)[:per_round]


def nominate(
    decision: Decision, workers: Sequence[WorkerCapacity], nominated: Collection[str], per_round: int
) -> list[str]:
    """Workers that get a copy in this round."""
    return next_round(eligible(decision, workers), nominated, per_round)
