"""The nominator against a recorded manager (no cluster): decisions, SQL records, and the nominations it writes
as MultiKueue's external dispatcher, through admission, eviction, admission timeout and worker loss."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
from nativebuild import T1, workload

from dispatcher.config import DispatcherConfig, KubeconfigRef, NativeConfig, Policy
from dispatcher.explain import render_workload
from dispatcher.kube.client import KubeError
from dispatcher.native.nominator import Nominator
from dispatcher.placement.engine import PlacementEngine
from dispatcher.placement.worker import WorkerCapacity
from dispatcher.store.engine import make_engine
from dispatcher.store.migrate import upgrade
from dispatcher.store.models import PlacementState, WorkloadState
from dispatcher.store.native import NativeRecords
from dispatcher.store.repo import Repo

Obj = dict[str, Any]


class Manager:
    """Records the nominator's writes; answers as the API server would."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, Obj, dict[str, Any]]] = []
        #: The jobs on the manager, by (plural, namespace, name); a refusal answers every list.
        self.jobs: dict[tuple[str, str, str], Obj] = {}
        self.refusal: KubeError | None = None
        self.lists = 0

    async def list(self, res: Any, namespace: str, *, field_selector: str, **kw: Any) -> Obj:
        self.lists += 1
        if self.refusal is not None:
            raise self.refusal
        name = field_selector.removeprefix("metadata.name=")
        job = self.jobs.get((res.plural, namespace, name))
        return {"items": [job] if job else []}

    def add_job(self, name: str, uid: str, annotations: dict[str, str]) -> None:
        meta = {"name": name, "namespace": "team-a", "uid": uid, "annotations": annotations}
        self.jobs[("jobs", "team-a", name)] = {"metadata": meta}

    async def patch(self, res: Any, namespace: str, name: str, body: Obj, **kw: Any) -> Obj:
        self.patches.append((name, body, kw))
        return body

    def last_nominations(self) -> list[str]:
        return list(self.patches[-1][1]["status"].get("nominatedClusterNames") or [])


class Events:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, str]] = []

    def emit(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        self.emitted.append((reason, message))


def _worker(name: str, cpu: str, weight: float = 1.0, zone: str = "") -> WorkerCapacity:
    w = WorkerCapacity(name, weight=weight, labels={"zone": zone} if zone else None)
    w.set_flavor({"metadata": {"name": "default-flavor"}, "spec": {}})
    w.set_cluster_queue(
        {
            "metadata": {"name": "team-a"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "default-flavor",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": cpu},
                                    {"name": "memory", "nominalQuota": "64Gi"},
                                ],
                            }
                        ],
                    }
                ]
            },
        }
    )
    w.set_local_queue({"metadata": {"name": "user-queue", "namespace": "team-a"}, "spec": {"clusterQueue": "team-a"}})
    w.node_event(
        "ADDED",
        {"metadata": {"name": f"{name}-n"}, "spec": {}, "status": {"allocatable": {"cpu": "16", "memory": "64Gi"}}},
    )
    w.health, w.synced = "Ready", True
    return w


Setup = tuple[Nominator, Manager, Events, dict[str, WorkerCapacity], Repo, dict[str, str]]


@pytest.fixture
async def setup(db_url: str) -> AsyncIterator[Setup]:
    engine = make_engine(db_url)
    await upgrade(engine)
    repo = Repo(engine)
    # worker-1 has more quota: more headroom after the placement, the better score.
    workers = {"worker-1": _worker("worker-1", "12", zone="a"), "worker-2": _worker("worker-2", "8", zone="b")}
    health = {"worker-1": "Ready", "worker-2": "Ready"}
    config = DispatcherConfig(
        manager=KubeconfigRef(path="/dev/null"),
        workers=(),
        policy=Policy(admission_timeout=60.0),
        mode="kueue-external",
        native=NativeConfig(),
    )
    manager, events = Manager(), Events()
    nom = Nominator(
        config,
        manager,  # type: ignore[arg-type]
        NativeRecords(repo),
        PlacementEngine(config.policy),
        lambda: list(workers.values()),
        lambda name: health.get(name, "Unknown"),
        events,  # type: ignore[arg-type]
    )
    nom.on_checks(frozenset({"multikueue"}))
    try:
        yield nom, manager, events, workers, repo, health
    finally:
        await engine.dispose()


async def _see(nom: Nominator, obj: Obj) -> None:
    nom.on_workload("MODIFIED", obj, None)
    batch, nom._dirty = set(nom._dirty) | nom._due(), set()
    await nom._round(batch)


async def test_nominates_the_best_worker_as_kueues_admission_and_records_why(setup: Setup) -> None:
    nom, manager, events, workers, repo, _ = setup
    await _see(nom, workload())
    [(_name, body, kw)] = manager.patches
    assert kw == {
        "patch_type": "apply",
        "subresource": "status",
        "field_manager": "kueue-admission",
        "force": True,
    }
    assert body["status"]["nominatedClusterNames"] == ["worker-1"]
    assert workers["worker-1"].reservations  # held until worker-1's Kueue admits the copy
    row = await repo.get_workload("team-a", "train")
    assert row is not None and row.state == WorkloadState.PLACED and row.status_mode == "kueue-native"
    assert [(p.cluster, p.state, p.strategy) for p in row.placements] == [("worker-1", "Created", "kueue-external")]
    text = render_workload(row)
    assert "worker-1 *" in text and "worker-2" in text and "Nominated: worker-1" in text
    assert ("Nominated", "kueue-dispatcher nominated worker-1 for MultiKueue") in events.emitted

    # MultiKueue set clusterName: Admitted there, the reservation settles.
    await _see(nom, workload(check="Ready", cluster="worker-1", rv="101"))
    row = await repo.get_workload("team-a", "train")
    assert row is not None and row.state == WorkloadState.ADMITTED and row.cluster == "worker-1"
    assert row.placements[0].state == PlacementState.ADMITTED
    assert not workers["worker-1"].reservations
    await _see(nom, workload(check="Ready", cluster="worker-1", finished="Succeeded", rv="102"))
    row = await repo.get_workload("team-a", "train")
    assert row is not None and row.state == WorkloadState.SUCCEEDED
    assert len(manager.patches) == 1  # nothing else was ever written


async def test_an_eviction_on_the_worker_renominates_elsewhere_in_a_new_generation(setup: Setup) -> None:
    nom, manager, _, _, repo, _ = setup
    await _see(nom, workload())
    await _see(nom, workload(check="Ready", cluster="worker-1", rv="101"))
    # MultiKueue: the copy was evicted on worker-1 (Retry).
    note = 'Workload evicted on worker cluster: "worker-1", resetting for re-admission. Previously: "Ready"'
    await _see(nom, workload(check="Retry", cluster="worker-1", check_message=note, rv="102"))
    # Kueue evicts: clears cluster and nominations, resets the check to Pending; with a batch/v1 Job the manager's
    # quota stays reserved (its stop fails, see rules.cycle), so the nomination must come now, as Kueue's does.
    await _see(nom, workload(evicted=True, rv="103"))
    assert manager.last_nominations() == ["worker-2"]  # worker-1 evicted it: excluded this time
    row = await repo.get_workload("team-a", "train")
    assert row is not None and row.generation == 2 and row.state == WorkloadState.PLACED
    assert [(p.generation, p.cluster, p.state) for p in row.placements] == [
        (1, "worker-1", "Evicted"),
        (2, "worker-2", "Created"),
    ]


async def test_admission_timeout_adds_a_worker_and_never_takes_one_back(setup: Setup) -> None:
    nom, manager, events, _, repo, _ = setup
    nom.policy = dataclasses.replace(nom.policy, admission_timeout=0.0)
    await _see(nom, workload())
    assert manager.last_nominations() == ["worker-1"]
    await _see(nom, workload(nominated=["worker-1"], rv="101"))
    # worker-1 could still admit its copy at any moment: it stays nominated, worker-2 joins.
    assert manager.last_nominations() == ["worker-1", "worker-2"]
    row = await repo.get_workload("team-a", "train")
    assert row is not None
    assert {p.cluster: p.state for p in row.placements} == {"worker-1": "TimedOut", "worker-2": "Created"}
    assert any(reason == "AdmissionTimeout" for reason, _ in events.emitted)
    # worker-2 admits: worker-1's copy is superseded.
    await _see(nom, workload(check="Ready", cluster="worker-2", rv="102"))
    row = await repo.get_workload("team-a", "train")
    assert row is not None and row.cluster == "worker-2"
    assert {p.cluster: p.state for p in row.placements} == {"worker-1": "TimedOut", "worker-2": "Admitted"}


async def test_a_lost_nominee_gets_company_at_once(setup: Setup) -> None:
    nom, manager, _, workers, _, health = setup
    await _see(nom, workload())
    health["worker-1"] = "Lost"
    workers["worker-1"].health = "Lost"
    nom.on_health("worker-1", "Suspect", "Lost")
    await _see(nom, workload(nominated=["worker-1"], rv="101"))
    assert manager.last_nominations() == ["worker-1", "worker-2"]


async def test_nothing_is_nominated_while_kueue_names_another_dispatcher(setup: Setup) -> None:
    nom, manager, _, _, _repo, _ = setup
    nom.set_refusal(
        "the manager's Kueue has multiKueue.dispatcherName 'kueue.x-k8s.io/multikueue-dispatcher-all-at-once'"
    )
    await _see(nom, workload())
    assert manager.patches == []
    nom.set_refusal(None)
    await _see(nom, workload())
    assert manager.last_nominations() == ["worker-1"]


async def test_no_worker_fits_keeps_the_reasons_and_decides_again_when_capacity_changes(setup: Setup) -> None:
    nom, manager, _, workers, repo, _ = setup
    await _see(nom, workload(cpu="8", count=3))  # 24 CPU: more than either worker's quota
    assert manager.patches == []
    row = await repo.get_workload("team-a", "train")
    assert row is not None and row.state == WorkloadState.PENDING and row.last_decision is not None
    assert "worker-1" in render_workload(row)
    assert row.uid in nom.waiting
    workers["worker-1"].set_cluster_queue(
        {
            "metadata": {"name": "team-a"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "default-flavor",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "32"},
                                    {"name": "memory", "nominalQuota": "64Gi"},
                                ],
                            }
                        ],
                    }
                ]
            },
        }
    )
    workers["worker-1"].node_event(
        "MODIFIED",
        {"metadata": {"name": "worker-1-n"}, "spec": {}, "status": {"allocatable": {"cpu": "32", "memory": "64Gi"}}},
    )
    nom.on_capacity("worker-1")
    batch, nom._dirty = set(nom._dirty), set()
    await nom._round(batch)
    assert manager.last_nominations() == ["worker-1"]


async def test_an_eviction_that_releases_the_quota_keeps_the_nomination_made_meanwhile(setup: Setup) -> None:
    nom, manager, _, _, repo, _ = setup
    await _see(nom, workload())
    await _see(nom, workload(check="Ready", cluster="worker-1", rv="101"))
    await _see(nom, workload(evicted=True, rv="102"))
    assert manager.last_nominations() == ["worker-1"]
    # Kueue released the quota (the nomination survives: Kueue clears it only with an eviction) and reserves again.
    await _see(nom, workload(reserved=None, nominated=["worker-1"], rv="103"))
    await _see(nom, workload(reserved=T1, nominated=["worker-1"], rv="104"))
    assert len(manager.patches) == 2  # adopted, not written again
    row = await repo.get_workload("team-a", "train")
    assert row is not None and row.state == WorkloadState.PLACED and row.generation == 3
    assert "adopted" in (row.reason or "")


SELECTOR = "kueue-dispatcher.io/cluster-selector"


async def test_the_jobs_cluster_selector_is_honoured_and_survives_a_restart(setup: Setup, db_url: str) -> None:
    """Kueue does not copy a job's annotations onto its Workload: the selector is read from the owner job."""
    nom, manager, _, workers, repo, _ = setup
    manager.add_job("train", "job-uid-1", {SELECTOR: "zone=b"})
    await _see(nom, workload())
    # worker-1 scores higher (more quota), but the job may only run in zone b.
    assert manager.last_nominations() == ["worker-2"]
    row = await repo.get_workload("team-a", "train")
    assert row is not None and row.cluster_selector == {"zone": "b"}
    assert "excluded by the workload's cluster selector zone=b" in render_workload(row)
    # A new process: the selector comes back from SQL (the job is not read again), and a re-nomination keeps it.
    again = Nominator(
        nom.config, manager, NativeRecords(repo), PlacementEngine(nom.policy),  # type: ignore[arg-type]
        lambda: list(workers.values()), lambda name: "Ready", nom.events,
    )  # fmt: skip
    again.on_checks(frozenset({"multikueue"}))
    await again.recover()
    reads = manager.lists
    await _see(again, workload(check="Ready", cluster="worker-2", rv="101"))
    await _see(again, workload(evicted=True, rv="102"))
    assert manager.lists == reads
    assert manager.last_nominations() == ["worker-2"]  # not worker-1, though worker-2 evicted nothing here


async def test_a_job_of_another_uid_under_the_same_name_is_not_its_owner(setup: Setup) -> None:
    nom, manager, _, _, _, _ = setup
    manager.add_job("train", "another-uid", {SELECTOR: "zone=b"})
    await _see(nom, workload())
    assert manager.last_nominations() == ["worker-1"]


async def test_a_junk_selector_is_never_nominated_and_said_once(setup: Setup) -> None:
    nom, manager, events, _, repo, _ = setup
    manager.add_job("train", "job-uid-1", {SELECTOR: "zone"})
    await _see(nom, workload())
    await _see(nom, workload(rv="101"))
    assert manager.patches == []
    row = await repo.get_workload("team-a", "train")
    assert row is not None and row.state == WorkloadState.PENDING
    assert row.last_decision is not None
    assert "expected key=value pairs" in row.last_decision["summary"]
    warnings = [m for reason, m in events.emitted if reason == "NotNominated"]
    assert len(warnings) == 1 and SELECTOR in warnings[0]


async def test_a_job_that_cannot_be_read_is_not_nominated_until_it_can(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    nom, manager, events, _, repo, _ = setup
    manager.add_job("train", "job-uid-1", {SELECTOR: "zone=b"})
    manager.refusal = KubeError(403, "Forbidden", 'jobs.batch is forbidden: User "d" cannot list resource "jobs"')
    now = [1000.0]
    nom.owners.clock = lambda: now[0]
    await _see(nom, workload())
    await _see(nom, workload(rv="101"))
    assert manager.patches == [] and await repo.get_workload("team-a", "train") is None
    assert "wl-uid-1" in nom._dirty  # tried again on a later tick
    assert manager.lists == 1  # not read again within the back-off (1 s): one read per back-off, not per tick
    assert caplog.text.count("the manager refuses to list jobs") == 1
    assert [r for r, _ in events.emitted].count("OwnerUnreadable") == 1
    now[0] += 1.5
    await _see(nom, workload(rv="102"))
    assert manager.lists == 2  # read again: still refused, the back-off doubles
    manager.refusal = None
    now[0] += 1.5
    await _see(nom, workload(rv="103"))
    assert manager.lists == 2  # still within the 2 s back-off
    now[0] += 1.0
    await _see(nom, workload(rv="104"))
    assert manager.last_nominations() == ["worker-2"]
