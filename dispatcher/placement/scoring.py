"""The score of a feasible worker, and the words that explain the winner.

Each term is in [0, 1]; the score is their weighted mean (weights from ``policy.weights``), with a
term left out when it does not apply:

- ``quotaHeadroom``: the ClusterQueue's nominal quota left after placing the workload, the tightest
  requested flavor-resource deciding; ``(free_after / nominal + 1) / 2``, so a placement that has to
  borrow from the cohort scores below 0.5 and one that leaves the queue empty-handed near 0.5.
- ``vgpuFit``: HAMi packing of the GPUs the pods would get (``binpack``: fuller GPUs score higher, to
  keep whole GPUs free; ``spread``: emptier GPUs score higher). Only for workloads asking for vGPUs.
- ``backlog``: ``1 / (1 + pending / 10)`` over the workloads already waiting in that ClusterQueue.
- ``clusterWeight``: the worker's configured weight over the largest weight among feasible workers.
- ``latency``: ``1 / (1 + seconds / 0.1)`` of the worker's recent API latency.

A worker whose Kueue would have to preempt lower-priority workloads to admit is feasible but its
score is quartered, so it wins only when no worker can take the workload without preempting.
Ties go to the worker whose name sorts first.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..config import Policy

if TYPE_CHECKING:
    from .engine import Verdict
    from .worker import WorkerCapacity

__all__ = ["TERM_WEIGHT", "score_verdicts"]

#: Term name -> attribute of ScoringWeights.
TERM_WEIGHT = {
    "quotaHeadroom": "quota_headroom",
    "vgpuFit": "vgpu_fit",
    "backlog": "backlog",
    "clusterWeight": "cluster_weight",
    "latency": "latency",
}

_PHRASES = {
    "quotaHeadroom": "most free quota in its ClusterQueue",
    "backlog": "shortest queue of waiting workloads",
    "clusterWeight": "highest cluster weight",
    "latency": "fastest API",
}


def _vgpu_phrase(mode: str) -> str:
    return "tightest vGPU packing (keeps whole GPUs free)" if mode == "binpack" else "most free nvidia.com/gpumem"


def score_verdicts(
    verdicts: Sequence[Verdict], workers: Sequence[WorkerCapacity], policy: Policy
) -> tuple[Verdict | None, str]:
    """Score the feasible verdicts in place; return the winner and a one-line summary."""
    feasible = [v for v in verdicts if v.feasible]
    if not feasible:
        if not verdicts:
            return None, "no worker clusters configured"
        return None, "no worker can take it now: " + "; ".join(f"{v.cluster}: {v.reason}" for v in verdicts)
    weights = {w.name: w.weight for w in workers}
    top_weight = max((weights.get(v.cluster, 1.0) for v in feasible), default=1.0) or 1.0
    term_weight = {term: float(getattr(policy.weights, attr)) for term, attr in TERM_WEIGHT.items()}
    cluster_weight = term_weight["clusterWeight"]
    for v in feasible:
        terms = v.terms
        partial = v.partial
        if partial is None or partial[0] is not policy.weights:
            # Every term but clusterWeight, in the terms' order; clusterWeight is always the last term (added
            # here), so the sums below are the same operations, in the same order, as summing all terms.
            total = 0.0
            norm = 0.0
            for term, value in terms.items():
                weight = term_weight.get(term)
                if weight is None or term == "clusterWeight":
                    continue
                total += weight * value
                norm += weight
            partial = v.partial = (policy.weights, total, norm)
        cw = terms["clusterWeight"] = weights.get(v.cluster, 1.0) / top_weight
        total = partial[1] + cluster_weight * cw
        norm = partial[2] + cluster_weight
        score = total / norm if norm else 0.0
        if v.preempts:
            score /= 4.0
        v.score = score
    # The best and the runner-up (highest score, then first by name) without sorting every feasible worker.
    ranked = heapq.nsmallest(2, feasible, key=lambda v: (-v.score, v.cluster))
    best = ranked[0]
    if len(ranked) == 1:
        why = "the only worker that can take it"
    else:
        runner = ranked[1]
        advantage = {
            term: float(getattr(policy.weights, TERM_WEIGHT[term]))
            * (best.terms.get(term, 0.0) - runner.terms.get(term, 0.0))
            for term in best.terms
            if term in TERM_WEIGHT
        }
        term = max(advantage, key=lambda t: advantage[t]) if advantage else ""
        if not term or advantage[term] <= 0:
            why = "tie on score, first by name"
        elif term == "vgpuFit":
            why = _vgpu_phrase(policy.mode)
        else:
            why = _PHRASES.get(term, term)
    if best.preempts:
        why += f"; its Kueue will preempt {best.preempts} lower-priority workload(s)"
    return best, f"placed on {best.cluster}, score {best.score:.2f}: {why}"
