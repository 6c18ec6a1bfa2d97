"""A verdict's record is kept between decisions, and made again once the verdict is scored again."""

from __future__ import annotations

from dispatcher.config import Policy
from dispatcher.placement.scoring import score_verdict
from dispatcher.placement.verdicts import Verdict


def test_the_record_is_reused_until_the_verdict_is_scored_again() -> None:
    policy = Policy()
    v = Verdict("worker-1", True, cluster_queue="team-a", terms={"quotaHeadroom": 0.75, "backlog": 1.0})
    score_verdict(v, 1.0, 1.0, policy)
    first = v.to_json()
    assert v.to_json() is first  # a cached verdict is not serialised again for every decision
    assert first["terms"]["clusterWeight"] == 1.0
    # Another worker with twice the weight joins: this worker's clusterWeight and score drop.
    score_verdict(v, 1.0, 2.0, policy)
    second = v.to_json()
    assert second is not first
    assert second["terms"]["clusterWeight"] == 0.5 and second["score"] < first["score"]
    assert second["score"] == round(v.score, 4)
