"""MultiKueue's rules for an external dispatcher (Kueue v0.17.0), as :mod:`dispatcher.native.rules` applies them."""

from __future__ import annotations

from fractions import Fraction

import pytest
from nativebuild import T1, admission_check, workload

from dispatcher.native.rules import (
    ADMISSION_FIELD_MANAGER,
    ManagerWorkload,
    Phase,
    multikueue_checks,
    nomination_apply,
)

CHECKS = frozenset({"multikueue"})


def test_only_multikueue_admission_checks_count() -> None:
    names = multikueue_checks(
        [admission_check("multikueue"), admission_check("prov", "kueue.x-k8s.io/provisioning-request")]
    )
    assert names == {"multikueue"}


@pytest.mark.parametrize(
    ("obj", "phase"),
    [
        (workload(), Phase.DISPATCHING),
        (workload(reserved=None), Phase.QUEUED),
        (workload(evicted=True), Phase.DISPATCHING),  # Kueue's own dispatchers nominate then too
        (workload(check="Retry", check_message="Reserving remote lost"), Phase.RETRYING),
        (workload(check="Ready", cluster="worker-1"), Phase.ASSIGNED),
        (workload(check="Ready", cluster="worker-1", finished="Succeeded"), Phase.FINISHED),
        (workload(check="Rejected"), Phase.OTHER),
    ],
    ids=["dispatching", "queued", "evicted-quota-kept", "retrying", "assigned", "finished", "rejected"],
)
def test_phases(obj: dict[str, object], phase: str) -> None:
    assert ManagerWorkload(obj, CHECKS).phase == phase


def test_a_workload_without_a_multikueue_check_is_not_ours() -> None:
    assert ManagerWorkload(workload(), frozenset({"other"})).phase == Phase.OTHER


def test_a_new_quota_reservation_or_an_eviction_is_a_new_cycle() -> None:
    first = ManagerWorkload(workload(), CHECKS)
    again = ManagerWorkload(workload(reserved=T1), CHECKS)
    evicted = ManagerWorkload(workload(evicted=True), CHECKS)
    assert len({first.cycle, again.cycle, evicted.cycle}) == 3
    assert ManagerWorkload(workload(reserved=None), CHECKS).cycle == ""


def test_the_nomination_is_kueues_own_admission_apply_with_only_the_nominations_changed() -> None:
    obj = workload(nominated=None)
    body = nomination_apply(obj, ["worker-2", "worker-1"])
    assert ADMISSION_FIELD_MANAGER == "kueue-admission"
    assert body["apiVersion"] == "kueue.x-k8s.io/v1beta2" and body["kind"] == "Workload"
    meta = body["metadata"]
    # Strict: the resourceVersion makes a write over a newer Workload a conflict.
    assert meta["resourceVersion"] == "100" and meta["uid"] == "wl-uid-1" and meta["name"] == obj["metadata"]["name"]
    status = body["status"]
    assert status["nominatedClusterNames"] == ["worker-2", "worker-1"]
    # Everything the admission field manager owns is carried unchanged: leaving it out would delete it.
    assert status["admission"] == obj["status"]["admission"]
    assert status["admissionChecks"] == obj["status"]["admissionChecks"]
    assert [c["type"] for c in status["conditions"]] == ["QuotaReserved"]
    assert status["resourceRequests"] == []  # with an admission, as Kueue writes it
    assert "clusterName" not in status


def test_the_apply_keeps_only_the_admission_managed_conditions() -> None:
    obj = workload()
    obj["status"]["conditions"].append({"type": "PodsReady", "status": "False", "reason": "x", "message": ""})
    body = nomination_apply(obj, ["worker-1"])
    assert [c["type"] for c in body["status"]["conditions"]] == ["QuotaReserved"]


def test_the_workload_as_the_engine_takes_it() -> None:
    mw = ManagerWorkload(workload(cpu="2", count=3), CHECKS)
    pending = mw.pending(7, 2, ["worker-1"])
    assert (pending.id, pending.generation, pending.name, pending.kind) == (7, 2, "train", "Job")
    assert pending.queue == "user-queue" and pending.namespace == "team-a"
    assert pending.excluded == {"worker-1"}
    [ps] = pending.pod_sets
    assert ps.count == 3 and ps.requests["cpu"] == Fraction(2)
