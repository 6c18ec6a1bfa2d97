"""A verdict's JSON (every decision record holds one per worker) is kept until what scoring changes changes."""

from __future__ import annotations

from dispatcher.config import Policy
from dispatcher.placement.scoring import score_verdict
from dispatcher.placement.verdicts import Verdict


def test_the_kept_json_follows_each_decisions_score_and_cluster_weight() -> None:
    policy = Policy()
    v = Verdict("w1", True, cluster_queue="cq", terms={"quotaHeadroom": 0.5})
    score_verdict(v, 1.0, 1.0, policy)
    first = v.to_json()
    assert first["score"] == round(v.score, 4) and first["terms"]["clusterWeight"] == 1.0
    assert v.to_json() is first, "unchanged: the same answer, not built again"
    # The next decision sees a heavier worker elsewhere: this worker's clusterWeight term and score drop.
    score_verdict(v, 1.0, 4.0, policy)
    second = v.to_json()
    assert second["terms"]["clusterWeight"] == 0.25
    assert second["score"] == round(v.score, 4) < first["score"]
    # Scored back as before: the answer is right again, whatever was kept.
    score_verdict(v, 1.0, 1.0, policy)
    assert v.to_json() == first


def test_an_infeasible_verdict_says_its_reason() -> None:
    v = Verdict("w2", False, "cluster is cordoned (no new placements)")
    assert v.to_json() == {"cluster": "w2", "feasible": False, "reason": "cluster is cordoned (no new placements)"}
