"""bench/quality.py: the generator reader (Kueue's scheduler-perf format) and the figures, as units."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import quality

TWO_COHORTS = """
cohorts:
  - className: team
    count: 2
    queuesSets:
      - className: cq
        count: 3
        nominalQuota: 10
        borrowingLimit: 5
        reclaimWithinCohort: LowerPriority
        withinClusterQueue: Never
        workloadsSets:
          - count: 4
            creationIntervalMs: 50
            workloads:
              - {className: small, runtimeMs: 100, priority: 1, request: 1}
              - {className: medium, runtimeMs: 300, priority: 2, request: 2.5}
"""


def test_the_baseline_file_has_the_issue_figures() -> None:
    gen = quality.read_generator(quality.DEFAULT_GENERATOR)
    queues = gen.queues()
    assert len(queues) == 30 and len({q.cohort for q in queues}) == 5
    assert {(q.spec.nominal_quota, q.spec.borrowing_limit) for q in queues} == {(20.0, 100.0)}
    assert gen.workload_count() == 30 * (350 + 100 + 50)
    sets = queues[0].spec.workloads_sets
    assert [(s.count, s.interval_ms, s.classes[0].name, s.classes[0].request, s.classes[0].runtime_ms,
             s.classes[0].priority) for s in sets] == [
        (350, 100, "small", 1.0, 200, 50), (100, 500, "medium", 5.0, 500, 100), (50, 1200, "large", 20.0, 1000, 200)
    ]  # fmt: skip
    quick = gen.scaled(cohorts=1, counts=0.1)
    assert len(quick.queues()) == 6 and quick.workload_count() == 6 * (35 + 10 + 5)


def test_a_file_with_two_cohorts(tmp_path: Path) -> None:
    path = tmp_path / "generator.yaml"
    path.write_text(TWO_COHORTS)
    gen = quality.read_generator(path)
    names = [q.name for q in gen.queues()]
    assert names == ["team-0-cq-0", "team-0-cq-1", "team-0-cq-2", "team-1-cq-0", "team-1-cq-1", "team-1-cq-2"]
    assert gen.workload_count() == 6 * 4 * 2
    stream = gen.stream()
    assert len(stream) == 48 and len({s.name for s in stream}) == 48
    assert [s.at_ms for s in stream] == sorted(s.at_ms for s in stream)
    assert max(s.at_ms for s in stream) == 150
    assert gen.queues()[0].spec.reclaim_within_cohort == "LowerPriority"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("cohorts: [{className: c, count: 1, queueSets: []}]", "cohorts[0].queueSets: unknown key"),
        (TWO_COHORTS.replace("nominalQuota: 10", "nominalQuota: lots"), "cohorts[0].queuesSets[0].nominalQuota"),
        (TWO_COHORTS.replace("runtimeMs: 300", "runtimeMs: -1"), "workloadsSets[0].workloads[1].runtimeMs"),
        (TWO_COHORTS.replace("reclaimWithinCohort: LowerPriority", "reclaimWithinCohort: Sometimes"),
         "queuesSets[0].reclaimWithinCohort"),
        ("cohorts: []", "cohorts: expected a non-empty list"),
        ("- just a list", "expected a mapping"),
    ],
)  # fmt: skip
def test_a_malformed_file_names_the_bad_key(tmp_path: Path, text: str, names: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(quality.GeneratorError) as err:
        quality.read_generator(path)
    assert names in str(err.value)


def test_the_cli_reports_a_bad_file_without_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("cohorts: [{className: c, count: 1, queuesSets: [{className: q, count: 1}]}]")
    assert quality.main(["--generator", str(path), "--strategies", "scored"]) == 2
    assert "cohorts[0].queuesSets[0].workloadsSets" in capsys.readouterr().err


def test_figures() -> None:
    assert quality.p95([]) == 0.0
    assert quality.p95([float(i) for i in range(1, 101)]) == 95.0
    assert quality.p95([3.0, 1.0, 2.0]) == 3.0
    out = quality.ratios(
        {
            "scored": {"admission_wait_mean_all_s": 1.0, "copies_created": 100, "makespan_s": 9.0},
            "allAtOnce": {"admission_wait_mean_all_s": 4.0, "copies_created": 400, "makespan_s": 10.0},
        }
    )
    assert out == {
        "wait_ratio_vs_allatonce": 0.25,
        "copies_ratio_vs_allatonce": 0.25,
        "makespan_ratio_vs_allatonce": 0.9,
    }
    assert quality.ratios({"scored": {}}) == {}


def test_quota_mapping_scales_per_worker_and_maps_gpus() -> None:
    gen = quality.parse_generator(__import__("yaml").safe_load(TWO_COHORTS))
    q = gen.queues()[0]
    cq = quality._cluster_queue(q, 0.5, gpu=False)
    res = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert res == {"name": "cpu", "nominalQuota": "5", "borrowingLimit": "2500m"}
    assert cq["spec"]["cohortName"] == "team-0"
    gpu = quality._cluster_queue(q, 1.0, gpu=True)["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {r["name"]: r["nominalQuota"] for r in gpu} == {
        "nvidia.com/gpu": "10",
        "nvidia.com/total-gpumem": "40960",
        "nvidia.com/total-gpucores": "100",
    }  # 10 CPU of quota -> one GPU's worth
    small = quality._job(next(s for s in gen.stream() if s.klass.name == "small"), gpu=True, scale=2.0)
    limits = small["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192", "nvidia.com/gpucores": "20"}
    assert small["spec"]["template"]["metadata"]["annotations"]["sim.dispatcher.io/run-seconds"] == "0.2"
