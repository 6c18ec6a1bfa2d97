"""The score of a feasible worker, and the words that explain the winner.

Each term is in [0, 1]; the score is their weighted mean (weights from ``policy.weights``), with a
term left out when it does not apply:

- ``quotaHeadroom``: the ClusterQueue's nominal quota left after placing the workload, the tightest
  requested flavor-resource deciding; ``(free_after / nominal + 1) / 2``, so a placement that has to
  borrow from the cohort scores below 0.5 and one that leaves the queue empty-handed near 0.5.
- ``vgpuFit``: HAMi packing of the GPUs the pods would get (``binpack``: fuller GPUs score higher, to
  keep whole GPUs free; ``spread``: emptier GPUs score higher). Only for workloads asking for vGPUs.
- ``backlog``: ``1 / (1 + pending / 10)`` over the workloads already waiting in that ClusterQueue.
- ``clusterWeight``: the worker's configured weight over the largest weight among the workers (all of them, so
  that a worker's score does not depend on which others can take the workload).
- ``latency``: ``1 / (1 + seconds / 0.1)`` of the worker's recent API latency.
- ``topology``: TAS, for pod sets with a preferred topology level: 1 when the worker's Kueue places them in one
  domain of that level, ``1/n`` when over ``n`` (:mod:`.depth`).
- ``fairShare``: fair sharing on the worker's Kueue: ``1 / (1 + share / 1000)`` of the ClusterQueue's dominant
  resource share after admission (1 when it does not borrow): a lower share wins Kueue's admission tournament
  and is the last to be preempted (:mod:`.depth`).

A worker whose Kueue would have to preempt lower-priority workloads to admit is feasible but its
score is quartered, so it wins only when no worker can take the workload without preempting. A worker
whose Kueue would admit only some of the pods (partial admission, down to the pod sets' ``minCount``)
is feasible too, its score quartered and scaled by the share of the pods it admits: a worker that
admits them all wins, and among partial ones the one admitting the most.
Ties go to the worker whose name sorts first.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..config import Policy

if TYPE_CHECKING:
    from .verdicts import Verdict

__all__ = ["TERM_WEIGHT", "best_two", "rank_key", "score_verdict", "summary"]

#: Term name -> attribute of ScoringWeights.
TERM_WEIGHT = {
    "quotaHeadroom": "quota_headroom",
    "vgpuFit": "vgpu_fit",
    "backlog": "backlog",
    "clusterWeight": "cluster_weight",
    "latency": "latency",
    "topology": "topology",
    "fairShare": "fair_share",
}

_PHRASES = {
    "quotaHeadroom": "most free quota in its ClusterQueue",
    "backlog": "shortest queue of waiting workloads",
    "clusterWeight": "highest cluster weight",
    "latency": "fastest API",
    "topology": "its preferred topology domain holds every pod",
    "fairShare": "lowest fair-sharing share after admission",
}


def _vgpu_phrase(mode: str) -> str:
    return "tightest vGPU packing (keeps whole GPUs free)" if mode == "binpack" else "most free nvidia.com/gpumem"


def _term_weights(policy: Policy) -> tuple[dict[str, float], float]:
    """Term -> weight (clusterWeight left out) and clusterWeight's weight, per weights object (cached)."""
    weights = policy.weights
    cached = _TERM_WEIGHTS.get(id(weights))
    if cached is None or cached[0] is not weights:
        table = {t: float(getattr(weights, a)) for t, a in TERM_WEIGHT.items() if t != "clusterWeight"}
        cached = _TERM_WEIGHTS[id(weights)] = (weights, table, float(weights.cluster_weight))
    return cached[1], cached[2]


_TERM_WEIGHTS: dict[int, tuple[object, dict[str, float], float]] = {}


def score_verdict(v: Verdict, weight: float, top_weight: float, policy: Policy) -> float:
    """Score a feasible verdict in place (``v.score``, ``v.terms["clusterWeight"]``) and return the score."""
    terms = v.terms
    partial = v.partial
    table, cluster_weight = _term_weights(policy)
    if partial is None or partial[0] is not policy.weights:
        # Every term but clusterWeight, in the terms' order; clusterWeight is always the last term (added
        # here), so the sums below are the same operations, in the same order, as summing all terms.
        total = 0.0
        norm = 0.0
        for term, value in terms.items():
            w = table.get(term)
            if w is None:
                continue
            total += w * value
            norm += w
        partial = v.partial = (policy.weights, total, norm)
    cw = terms["clusterWeight"] = weight / top_weight if top_weight else 1.0
    total = partial[1] + cluster_weight * cw
    norm = partial[2] + cluster_weight
    score = total / norm if norm else 0.0
    if v.preempts:
        score /= 4.0
    if v.reduced:
        score *= v.admitted_share / 4.0
    v.score = score
    return score


def rank_key(v: Verdict) -> tuple[float, str]:
    """Best first: highest score, then first by name."""
    return (-v.score, v.cluster)


def summary(best: Verdict | None, runner: Verdict | None, verdicts: Sequence[Verdict], policy: Policy) -> str:
    """The one-line summary of a decision: the winner and the term that made it win, or every reason."""
    if best is None:
        if not verdicts:
            return "no worker clusters configured"
        reasons = "; ".join(f"{v.cluster}: {v.reason}" for v in verdicts)
        if not any(v.transient for v in verdicts):
            # Distinct from waiting for capacity: nothing that frees up will help, only a change of the Job or
            # of the workers (it is decided again when they change).
            return "no worker can ever hold this: " + reasons
        return "no worker can take it now: " + reasons
    if runner is None:
        why = "the only worker that can take it"
    else:
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
        kinds = f" ({best.preemption_reasons})" if best.preemption_reasons else ""
        why += f"; its Kueue will preempt {best.preempts} workload(s){kinds}"
    if best.topology:
        why += f"; topology: {best.topology}"
    if best.fair_share is not None and best.fair_share.get("share"):
        fs = best.fair_share
        why += (
            f"; fair sharing: ClusterQueue {best.cluster_queue}'s dominant resource share becomes {fs['share']} "
            f"({fs['resource']}, weight {fs['weight']:g})"
        )
    if best.reduced:
        why += f"; partial admission: {best.reduced} on {best.cluster}"
    return f"placed on {best.cluster}, score {best.score:.2f}: {why}"


def best_two(verdicts: Sequence[Verdict]) -> tuple[Verdict | None, Verdict | None]:
    """The best feasible verdict and the runner-up (already scored), without sorting them all."""
    ranked = heapq.nsmallest(2, (v for v in verdicts if v.feasible), key=rank_key)
    return (ranked[0] if ranked else None), (ranked[1] if len(ranked) > 1 else None)
