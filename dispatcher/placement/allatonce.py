"""``strategy: allAtOnce``, MultiKueue's default dispatcher: a suspended copy on every eligible worker.

The first copy the worker's Kueue admits (QuotaReserved) wins; every other copy is deleted at once, and a copy
admitted a moment later on another worker is deleted too, never run. This module only decides *which workers*
get copies (no I/O); the service creates, watches and deletes them (:mod:`dispatcher.race`).

Eligible, as MultiKueue sees it: every worker that is connected (Ready), not cordoned, serves the kind, matches
the workload's cluster selector and was not tried before. Free quota is not considered (MultiKueue does not
look at it): a worker whose ClusterQueue is full right now still gets a copy, which waits in its queue. Only a
worker that could never admit the workload (no LocalQueue of that name, a pod larger than any node) is left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from .engine import Decision
from .verdicts import Verdict
from .worker import WorkerCapacity

__all__ = ["eligible", "nominate"]

#: Pre-check reasons that pass by themselves but mean "not connected / not usable now" for MultiKueue too.
_UNUSABLE = ("cluster is ", "capacity view of the cluster has not synced")


def _usable(v: Verdict, w: WorkerCapacity) -> bool:
    if v.feasible:
        return True
    if not v.transient:
        return False
    if w.health != "Ready" or w.cordoned or not w.synced:
        return False
    return not v.reason.startswith(_UNUSABLE)


def eligible(decision: Decision, workers: Sequence[WorkerCapacity]) -> list[str]:
    """Names of the workers that get a copy, sorted by name (MultiKueue's order)."""
    by_name = {w.name: w for w in workers}
    return sorted(v.cluster for v in decision.verdicts if v.cluster in by_name and _usable(v, by_name[v.cluster]))


def nominate(decision: Decision, workers: Sequence[WorkerCapacity]) -> list[str]:
    """allAtOnce nominates every eligible worker in one go."""
    return eligible(decision, workers)
