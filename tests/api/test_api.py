"""The HTTP API (dispatcher/api) and the metrics (dispatcher/metrics.py), without simulated clusters.

A small stand-in for the Dispatcher carries real WorkerCapacity objects (Kueue quota, a HAMi GPU worker) and a
real Repo on a temporary SQLite database with the migrations applied; workloads and placements are written
through the Repo as the service writes them. Every response is checked against the OpenAPI document.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate as validate_spec
from prometheus_client.parser import text_string_to_metric_families

import dispatcher.api.clusters as api_clusters
from dispatcher.api import (
    ApiConfigError,
    TokenError,
    TokenStore,
    bound_address,
    make_app,
    openapi_document,
    serve,
    start_api,
)
from dispatcher.config import DispatcherConfig, KubeconfigRef, Policy, WorkerConfig
from dispatcher.events import EventRecorder
from dispatcher.health import HealthMachine, HealthMonitor
from dispatcher.live import Live, LiveSet
from dispatcher.metrics import Metrics, Outcome
from dispatcher.placement.gpu import WorkerGpus, sync_worker
from dispatcher.placement.hami.names import HANDSHAKE_ANNOTATION, REGISTER_ANNOTATION
from dispatcher.placement.hami.nodecodec import encode_node_devices, register_device
from dispatcher.placement.queue import PendingQueue
from dispatcher.placement.worker import Reservation, WorkerCapacity
from dispatcher.store.engine import make_engine
from dispatcher.store.migrate import upgrade
from dispatcher.store.models import PlacementState, WorkloadState, utcnow
from dispatcher.store.repo import NewWorkload, PlacementIntent, Repo, Transition
from dispatcher.worker_lease import no_fencing

Client = TestClient[web.Request, web.Application]

READ_TOKEN = "rd-PLANTED-5b1f0e7c2a9d4e68"
ADMIN_TOKEN = "ad-PLANTED-93c4d2a1f0b87e65"
OTHER_TOKEN = "xx-PLANTED-unknown-77aa01bc"
KUBE_TOKEN = "PLANTED-KUBE-TOKEN-abcdef0123456789"
KUBE_KEY = "PLANTEDKEYDATA0123456789"
KUBECONFIG = f"""apiVersion: v1
kind: Config
clusters:
- name: w
  cluster: {{server: "https://10.1.2.3:6443", certificate-authority-data: QUJD}}
users:
- name: u
  user:
    token: {KUBE_TOKEN}
    client-key-data: {KUBE_KEY}
"""
SECRETS = (READ_TOKEN, ADMIN_TOKEN, OTHER_TOKEN, KUBE_TOKEN, KUBE_KEY)

READ = {"Authorization": f"Bearer {READ_TOKEN}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

DOC = openapi_document()
NOW = datetime(2025, 6, 1, 12, 0, 0)


def assert_schema(body: Any, schema: str) -> None:
    """``body`` matches ``#/components/schemas/<schema>`` of the OpenAPI document."""
    OAS30Validator({"$ref": f"#/components/schemas/{schema}", "components": DOC["components"]}).validate(body)


def assert_error(resp_body: Any, code: int, *words: str) -> str:
    assert_schema(resp_body, "Error")
    err = resp_body["error"]
    assert err["code"] == code
    for w in words:
        assert w in err["message"], (w, err["message"])
    return str(err["message"])


# -- the world ------------------------------------------------------------------------------------------------


def cq(name: str, cpu: str, memory: str, *, cohort: str = "org", extra: list[dict[str, Any]] | None = None) -> Any:
    groups = [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": "default",
                    "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}],
                }
            ],
        },
        *(extra or []),
    ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"cohortName": cohort, "namespaceSelector": {}, "resourceGroups": groups},
    }


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def gpu_node(name: str, gpus: int = 4) -> dict[str, Any]:
    devices = [register_device(f"GPU-{name}-{i}", i, 40960, "A100-SXM4-40GB") for i in range(gpus)]
    return {
        "metadata": {
            "name": name,
            "labels": {"hami.io/vgpu": "true"},
            "annotations": {
                REGISTER_ANNOTATION: encode_node_devices(devices),
                HANDSHAKE_ANNOTATION: "Requesting_" + NOW.strftime("%Y-%m-%d %H:%M:%S"),
            },
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": str(gpus * 10)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def worker(name: str, *, gpu: bool = False, health: str = "Ready") -> WorkerCapacity:
    cap = WorkerCapacity(name, weight=2.0 if gpu else 1.0, labels={"zone": f"zone-{name[-1]}"}, max_in_flight=50)
    cap.health = health
    cap.synced = True
    cap.set_flavor({"kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}})
    cap.set_cluster_queue(cq("cq-a", "8", "32Gi"))
    cap.set_cluster_queue(cq("cq-b", "4", "16Gi"))
    for ns in ("team-a", "team-b"):
        cap.set_local_queue({"metadata": {"namespace": ns, "name": "user-queue"}, "spec": {"clusterQueue": "cq-a"}})
    for i in range(2):
        cap.node_event("ADDED", node(f"{name}-node-{i}"))
    cap.reserve(Reservation("reserved-uid", "cq-a", {("default", "cpu"): 1500, ("default", "memory"): 2 * 2**30}))
    if gpu:
        gpus = WorkerGpus(clock=lambda: NOW)
        cap.node_event("ADDED", gpu_node(f"{name}-gpu-0"))
        changed = gpus.node_event("ADDED", gpu_node(f"{name}-gpu-0"))
        sync_worker(cap, gpus, changed)
        assert cap.gpu is not None
    return cap


def admitted(name: str, cluster_queue: str, cpu: str, memory: str) -> dict[str, Any]:
    """A Workload the worker's Kueue admitted: its usage counts against ``cluster_queue`` (flavor default)."""
    usage = {"cpu": cpu, "memory": memory}
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "ownerReferences": [{"uid": f"job-{name}", "controller": True}],
        },
        "spec": {"queueName": "user-queue"},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {
                "clusterQueue": cluster_queue,
                "podSetAssignments": [
                    {"name": "main", "flavors": dict.fromkeys(usage, "default"), "resourceUsage": usage, "count": 1}
                ],
            },
        },
    }


@dataclass
class FakeGate:
    """What the metrics read of a client's gate (dispatcher/kube/gate.py)."""

    waiting: int
    waited: float


class FakeClient:
    """What the API and the metrics read of a ClusterClient."""

    def __init__(self, latency: float, calls: int, errors: int, gate: FakeGate | None = None) -> None:
        self.latency = latency
        self.calls = calls
        self.errors = errors
        self.gate = gate


class FakeDispatcher:
    """The attributes of dispatcher.service.Dispatcher that the API reads (no clusters, a real Repo)."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.capacities = {"worker-1": worker("worker-1"), "worker-2": worker("worker-2", health="Suspect")}
        self.capacities["worker-3"] = worker("worker-3", gpu=True)
        self.clients = {
            "worker-1": FakeClient(0.012, 120, 3),
            "worker-2": FakeClient(0.4, 40, 17, FakeGate(waiting=3, waited=12.5)),
            "worker-3": FakeClient(0.02, 80, 0),
        }
        kube = KubeconfigRef(path=KUBECONFIG)  # a kubeconfig where a path belongs: it must never be shown
        self.config = DispatcherConfig(
            manager=kube, workers=tuple(WorkerConfig(n, kube) for n in self.capacities), policy=Policy()
        )
        self.policy = self.config.policy
        self.live = LiveSet()
        self.queue = PendingQueue()
        self.health = HealthMonitor(interval=1.0, on_change=lambda *_: None)
        self.started = asyncio.Event()
        self.metrics = Metrics(self)


class ActingDispatcher(FakeDispatcher):
    """With the cordon/drain methods the service is to grow."""

    def __init__(self, repo: Repo) -> None:
        super().__init__(repo)
        self.calls: list[tuple[str, str, bool]] = []
        self.fail: BaseException | None = None

    async def cordon(self, name: str, cordoned: bool) -> None:
        if self.fail is not None:
            raise self.fail
        self.calls.append(("cordon", name, cordoned))
        self.capacities[name].cordoned = cordoned

    async def drain(self, name: str, running: bool) -> int:
        if self.fail is not None:
            raise self.fail
        self.calls.append(("drain", name, running))
        self.capacities[name].cordoned = True
        return 4 if running else 2

    async def control(self, action: str, namespace: str, name: str) -> dict[str, Any]:
        """As :meth:`Dispatcher.control` answers, from the stored rows (the real one is tested end to end)."""
        from dispatcher.control import ControlError

        row = await self.repo.get_workload(namespace, name)
        if row is None:
            raise ControlError(404, f"no workload {namespace}/{name}; list them with dispatcher workloads")
        if row.state in WorkloadState.TERMINAL:
            raise ControlError(409, f"{namespace}/{name} has finished ({row.state})")
        self.calls.append((action, f"{namespace}/{name}", True))
        state = WorkloadState.CANCELLED if action == "cancel" else WorkloadState.PENDING
        return {"workload": f"{namespace}/{name}", "state": state, "stopped": action == "stop", "changed": True,
                "message": f"{namespace}/{name} {action}ped"}  # fmt: skip


def new_workload(i: int, namespace: str, queue: str = "user-queue") -> NewWorkload:
    return NewWorkload(
        uid=f"uid-{namespace}-{i}",
        namespace=namespace,
        name=f"train-{i}",
        kind="Job",
        api_version="batch/v1",
        queue=queue,
        priority=100 if i % 2 else 0,
        priority_class="high" if i % 2 else None,
        pod_sets=[{"name": "main", "count": 1, "requests": {"cpu": "1", "memory": "1Gi"}}],
        status_mode="annotations",
        no_failover=False,
        cluster_selector={"zone": "zone-1"} if i == 0 else None,
        created_at=utcnow(),
    )


def decision(chosen: str) -> dict[str, Any]:
    return {
        "strategy": "scored",
        "mode": "binpack",
        "at": time.time(),
        "chosen": chosen,
        "score": 0.69,
        "summary": f"placed on {chosen}, score 0.69: the only worker that can take it",
        "workers": [
            {
                "cluster": chosen,
                "feasible": True,
                "score": 0.69,
                "terms": {"backlog": 1.0, "quotaHeadroom": 0.77},
                "clusterQueue": "cq-a",
                "flavors": {"cpu": "default"},
            },
            {"cluster": "worker-9", "feasible": False, "reason": "not Ready (Suspect)"},
        ],
    }


async def populate(repo: Repo) -> dict[str, int]:
    """12 workloads in team-a, 3 in team-b; team-a/train-1 with two placements (a timeout, then running)."""
    rows = await repo.add_workloads([new_workload(i, "team-a") for i in range(12)])
    rows += await repo.add_workloads([new_workload(i, "team-b", queue="other-queue") for i in range(3)])
    ids = {f"{r.namespace}/{r.name}": r.id for r in rows}
    wid = ids["team-a/train-1"]
    (first,) = await repo.begin_placements([PlacementIntent(wid, 1, "worker-2", "scored", 0.5, decision("worker-2"))])
    assert first.placement_id is not None
    await repo.update_placement(
        first.placement_id, state=PlacementState.TIMED_OUT, outcome="not admitted in time", ended_at=utcnow()
    )
    await repo.apply(
        [
            Transition(
                wid,
                1,
                {"state": WorkloadState.PENDING, "generation": 2, "cluster": None, "excluded": ["worker-2"]},
                from_states=(WorkloadState.PLACING,),
            )
        ]
    )
    (second,) = await repo.begin_placements([PlacementIntent(wid, 2, "worker-1", "scored", 0.69, decision("worker-1"))])
    now = utcnow()
    ok = await repo.apply(
        [
            Transition(
                wid,
                2,
                {"state": WorkloadState.RUNNING, "placed_at": now, "admitted_at": now, "started_at": now},
                from_states=(WorkloadState.PLACING,),
                placement_id=second.placement_id,
                placement_values={"state": PlacementState.RUNNING, "remote_uid": "remote-1", "mirrored_at": now},
            )
        ]
    )
    assert ok == [True]
    (third,) = await repo.begin_placements(
        [PlacementIntent(ids["team-a/train-2"], 1, "worker-3", "scored", 0.8, decision("worker-3"))]
    )
    assert third.placement_id is not None
    return ids


@dataclass
class World:
    dispatcher: FakeDispatcher
    tokens: TokenStore
    ids: dict[str, int]
    tmp: Path
    engines: list[Any] = field(default_factory=list)


async def build_world(tmp_path: Path, cls: type[FakeDispatcher] = FakeDispatcher) -> World:
    engine = make_engine(f"sqlite+aiosqlite:///{tmp_path / 'api.sqlite'}")
    await upgrade(engine)
    repo = Repo(engine)
    ids = await populate(repo)
    d = cls(repo)
    for row in await repo.load_open():
        d.live.add(Live.from_row(row, time.monotonic(), time.time()))
    d.started.set()
    tokens = TokenStore([("read", READ_TOKEN), ("admin", ADMIN_TOKEN)])
    return World(d, tokens, ids, tmp_path, [engine])


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    w = await build_world(tmp_path, ActingDispatcher)
    yield w
    for e in w.engines:
        await e.dispose()


@pytest.fixture
async def client(world: World) -> AsyncIterator[Client]:
    async with TestClient(TestServer(make_app(world.dispatcher, world.tokens))) as c:  # type: ignore[arg-type]
        yield c


async def get_json(client: Client, path: str, status: int = 200, headers: dict[str, str] | None = None) -> Any:
    resp = await client.get(path, headers=READ if headers is None else headers)
    body = await resp.json()
    assert resp.status == status, body
    assert resp.headers["Content-Type"].startswith("application/json")
    return body


# -- health, readiness, metrics ----------------------------------------------------------------------------------


async def test_healthz_and_readyz_need_no_token(client: Client, world: World) -> None:
    body = await get_json(client, "/healthz", headers={})
    assert_schema(body, "Health")
    body = await get_json(client, "/readyz", headers={})
    assert body == {
        "status": "ready",
        "reason": None,
        "checks": {"started": True, "database": "ok", "manager": "ok"},
        "leader": True,  # a single replica always leads
        "leaderIdentity": None,
    }
    assert_schema(body, "Ready")


async def test_readyz_is_503_until_started(client: Client, world: World) -> None:
    world.dispatcher.started.clear()
    body = await get_json(client, "/readyz", 503, headers={})
    assert_schema(body, "Ready")
    assert body["status"] == "not ready" and "starting" in body["reason"]
    assert body["checks"] == {"started": False, "database": "ok", "manager": "ok"}


async def test_readyz_and_queries_are_503_while_the_database_is_unreachable(client: Client, world: World) -> None:
    # A database whose folder disappears after the engine was made: every connection then fails.
    (world.tmp / "gone-dir").mkdir()
    broken = make_engine(f"sqlite+aiosqlite:///{world.tmp / 'gone-dir' / 'db.sqlite'}")
    (world.tmp / "gone-dir").rmdir()
    world.engines.append(broken)
    world.dispatcher.repo = Repo(broken)
    body = await get_json(client, "/readyz", 503, headers={})
    assert body["checks"]["database"] == "unreachable" and "database" in body["reason"]
    for path in ("/api/v1/workloads", "/api/v1/workloads/team-a/train-1", "/api/v1/workloads/team-a/train-1/explain"):
        assert_error(await get_json(client, path, 503), 503, "database does not answer", "/readyz")
    families = {f.name: f for f in text_string_to_metric_families(await (await client.get("/metrics")).text())}
    assert families["kueue_dispatcher_sql_errors"].samples[0].value == 4


async def test_metrics_are_open_parse_and_carry_every_family(client: Client, world: World) -> None:
    m = world.dispatcher.metrics
    m.placed("worker-1")
    m.placed("worker-2", Outcome.TIMED_OUT)
    m.placement_ended("worker-3", PlacementState.DRAINED)
    m.placement_ended("worker-3", "Superseded")
    m.observe_submit_to_placed(1.2)
    m.observe_placed_to_admitted(0.3)
    m.sync_requested(1)
    m.sync_requested(1)  # the earliest request counts
    m.sync_finished([1, 2])
    m.observe_status_sync_lag(0.02)
    m.failover("worker-2")
    m.sql_error()
    m.admitted("worker-1", "cluster-queue", "team-a", "user-queue", "high", 3.0)
    m.admitted("worker-1", "cluster-queue", "team-a", "user-queue", "high", 4000.0)
    m.evicted_on_worker("worker-1", "cluster-queue", "Preempted", "", "InCohortReclamation")
    m.evicted_on_worker("worker-1", "cluster-queue", "PodsReadyTimeout", "", None)
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(await resp.text())}
    expected = {
        "kueue_dispatcher_placements": "counter",
        "kueue_dispatcher_submit_to_placed_seconds": "histogram",
        "kueue_dispatcher_placed_to_admitted_seconds": "histogram",
        "kueue_dispatcher_status_sync_lag_seconds": "histogram",
        "kueue_dispatcher_failovers": "counter",
        "kueue_dispatcher_worker_health": "gauge",
        "kueue_dispatcher_local_queue_pending_workloads": "gauge",
        "kueue_dispatcher_admission_wait_time_seconds": "histogram",
        "kueue_dispatcher_local_queue_admission_wait_time_seconds": "histogram",
        "kueue_dispatcher_evicted_workloads": "counter",
        "kueue_dispatcher_preempted_workloads": "counter",
        "kueue_dispatcher_cluster_queue_nominal_quota": "gauge",
        "kueue_dispatcher_cluster_queue_resource_usage": "gauge",
        "kueue_dispatcher_cluster_queue_resource_reservation": "gauge",
        "kueue_dispatcher_sql_errors": "counter",
        "kueue_dispatcher_api_call_errors": "counter",
        "kueue_dispatcher_api_calls_queued": "gauge",
        "kueue_dispatcher_api_call_queue_seconds": "counter",
        "kueue_dispatcher_workloads": "gauge",
        "kueue_dispatcher_worker_cordoned": "gauge",
        "kueue_dispatcher_worker_in_flight": "gauge",
        "kueue_dispatcher_build_info": "gauge",
        "kueue_dispatcher_events_written": "counter",
        "kueue_dispatcher_events_dropped": "counter",
        "kueue_dispatcher_events_queued": "gauge",
    }
    for name, kind in expected.items():
        assert families[name].type == kind, name
    assert not any(n.endswith("_created") for n in families)

    def value(family: str, sample: str, **labels: str) -> float:
        for s in families[family].samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
        raise AssertionError(f"no sample {sample}{labels}")

    P = "kueue_dispatcher_"
    assert value(P + "placements", P + "placements_total", cluster="worker-1", outcome="placed") == 1
    assert value(P + "placements", P + "placements_total", cluster="worker-2", outcome="timed_out") == 1
    assert value(P + "placements", P + "placements_total", cluster="worker-3", outcome="rejected") == 0
    assert value(P + "placements", P + "placements_total", cluster="worker-3", outcome="drained") == 1
    assert value(P + "placements", P + "placements_total", cluster="worker-3", outcome="superseded") == 1
    assert value(P + "status_sync_lag_seconds", P + "status_sync_lag_seconds_count") == 2
    assert value(P + "submit_to_placed_seconds", P + "submit_to_placed_seconds_sum") == pytest.approx(1.2)
    assert value(P + "failovers", P + "failovers_total", from_cluster="worker-2") == 1
    assert value(P + "worker_health", P + "worker_health", cluster="worker-1", state="Ready") == 1
    assert value(P + "worker_health", P + "worker_health", cluster="worker-1", state="Suspect") == 0
    assert value(P + "worker_health", P + "worker_health", cluster="worker-2", state="Suspect") == 1
    assert value(P + "api_call_errors", P + "api_call_errors_total", cluster="worker-2") == 17
    assert value(P + "api_calls_queued", P + "api_calls_queued", cluster="worker-2") == 3
    assert value(P + "api_call_queue_seconds", P + "api_call_queue_seconds_total", cluster="worker-2") == 12.5
    assert not any(s.labels.get("cluster") == "worker-1" for s in families[P + "api_calls_queued"].samples)
    assert value(P + "worker_in_flight", P + "worker_in_flight", cluster="worker-1") == 1
    # From the live set: 12 + 3 workloads, two of them taken off Pending (train-1 running, train-2 placing).
    lq = P + "local_queue_pending_workloads"
    assert value(lq, lq, name="user-queue", namespace="team-a", status="active") == 10
    assert value(lq, lq, name="other-queue", namespace="team-b", status="active") == 3
    # Kueue's names, labels and buckets (1, 2.5, 5, ...): a Kueue dashboard reads these as it reads Kueue's.
    wait = P + "admission_wait_time_seconds"
    labels = {"cluster": "worker-1", "cluster_queue": "cluster-queue", "priority_class": "high"}
    assert value(wait, wait + "_count", **labels) == 2
    assert value(wait, wait + "_bucket", le="2.5", **labels) == 0
    assert value(wait, wait + "_bucket", le="5.0", **labels) == 1
    lq_wait = P + "local_queue_admission_wait_time_seconds"
    assert value(lq_wait, lq_wait + "_count", name="user-queue", namespace="team-a", priority_class="high") == 2
    evicted = P + "evicted_workloads"
    assert value(evicted, evicted + "_total", cluster="worker-1", reason="Preempted") == 1
    assert value(evicted, evicted + "_total", cluster="worker-1", reason="PodsReadyTimeout") == 1
    preempted = P + "preempted_workloads"
    assert value(preempted, preempted + "_total", cluster="worker-1", reason="InCohortReclamation") == 1
    assert len(families[preempted].samples) == 1, "an eviction that was not a preemption is not counted as one"
    # Each worker's ClusterQueue quota, in Kueue's base units (cores, bytes), with our reservation apart.
    q = {"cluster": "worker-1", "cohort": "org", "cluster_queue": "cq-a", "flavor": "default"}
    nominal = P + "cluster_queue_nominal_quota"
    assert value(nominal, nominal, resource="cpu", **q) == 8.0
    assert value(nominal, nominal, resource="memory", **q) == 32 * 2**30
    reservation = P + "cluster_queue_resource_reservation"
    assert value(reservation, reservation, resource="cpu", **q) == 1.5
    assert value(P + "workloads", P + "workloads", state="Running") == 1
    assert value(P + "workloads", P + "workloads", state="Placing") == 1
    assert value(P + "workloads", P + "workloads", state="Succeeded") == 0
    assert value(P + "sql_errors", P + "sql_errors_total") == 1


async def test_metrics_speak_openmetrics_when_asked(client: Client) -> None:
    resp = await client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families

    names = {f.name for f in openmetrics_families(await resp.text())}
    assert "kueue_dispatcher_placements" in names and "kueue_dispatcher_worker_health" in names
    weird = await client.get("/metrics", headers={"Accept": "text/plain; version=nonsense"})
    assert weird.status == 200


def test_metrics_registries_are_independent() -> None:
    a, b = Metrics(), Metrics()
    a.placed("worker-1")
    text_b = b.render()[0].decode()
    assert 'cluster="worker-1"' not in text_b
    assert 'kueue_dispatcher_placements_total{cluster="worker-1",outcome="placed"} 1.0' in a.render()[0].decode()


def test_metrics_count_events_written_dropped_and_queued() -> None:
    class Service:
        class rt:
            events = EventRecorder(cast(Any, None), queue_size=2)

    recorder = Service.rt.events
    for i in range(5):  # not started: two wait, three find the queue full
        recorder.emit({"metadata": {"uid": f"u{i}", "name": f"j{i}"}}, "Normal", "Placed", "placed")
    recorder.written = 7
    families = {f.name: f for f in text_string_to_metric_families(Metrics(Service()).render()[0].decode())}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    assert samples[("kueue_dispatcher_events_written_total", ())] == 7
    assert samples[("kueue_dispatcher_events_dropped_total", (("reason", "queue_full"),))] == 3
    assert samples[("kueue_dispatcher_events_dropped_total", (("reason", "write_failed"),))] == 0
    assert samples[("kueue_dispatcher_events_queued", ())] == 2


def test_a_failing_section_does_not_fail_the_scrape(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        capacities = {"w": object()}  # no health attribute: the workers section fails

    m = Metrics(Broken())
    text = m.render()[0].decode()
    assert "kueue_dispatcher_build_info" in text
    assert "collecting metrics" in caplog.text


# -- clusters -------------------------------------------------------------------------------------------------


async def test_list_clusters(client: Client) -> None:
    body = await get_json(client, "/api/v1/clusters")
    assert_schema(body, "ClusterList")
    assert [c["name"] for c in body["items"]] == ["worker-1", "worker-2", "worker-3"]
    w1, w2, w3 = body["items"]
    assert w1 == {
        "name": "worker-1",
        "health": "Ready",
        "healthSince": None,  # no health change recorded in this world
        "reason": None,
        "capacityKnown": True,
        "cordoned": False,
        "weight": 1.0,
        "labels": {"zone": "zone-1"},
        "synced": True,
        "inFlight": 1,
        "maxInFlight": 50,
        "latencySeconds": 0.012,
        "apiCalls": 120,
        "apiErrors": 3,
        "hamiGpus": False,
        "fencing": no_fencing(),
    }
    assert w1["fencing"]["mode"] == "none" and "at-least-once" in w1["fencing"]["summary"]
    assert w2["health"] == "Suspect" and w3["hamiGpus"] is True


async def test_get_cluster_has_quota_per_queue_and_flavor_and_vgpus(client: Client) -> None:
    body = await get_json(client, "/api/v1/clusters/worker-3")
    assert_schema(body, "ClusterDetail")
    quota = {(r["clusterQueue"], r["flavor"], r["resource"]): r for r in body["capacity"]["quota"]}
    cpu = quota[("cq-a", "default", "cpu")]
    assert (cpu["nominal"], cpu["used"], cpu["reserved"]) == (8000, 0, 1500)
    assert cpu["quantities"]["nominal"] == "8" and cpu["quantities"]["reserved"] == "1500m"
    assert quota[("cq-a", "default", "memory")]["quantities"]["reserved"] == "2Gi"
    assert quota[("cq-b", "default", "cpu")]["reserved"] == 0
    assert {"namespace": "team-a", "name": "user-queue", "clusterQueue": "cq-a"} in body["capacity"]["localQueues"]
    assert body["capacity"]["nodes"] == {"total": 3, "schedulable": 3}
    vgpu = body["vgpu"]
    assert vgpu["total"]["gpus"] == 4 and vgpu["total"]["vgpuSlots"] == 40
    assert vgpu["byType"] == [
        {
            "type": "NVIDIA-A100-SXM4-40GB",
            "gpus": 4,
            "healthyGpus": 4,
            "vgpuSlots": 40,
            "vgpuSlotsUsed": 0,
            "memoryTotalMiB": 4 * 40960,
            "memoryUsedMiB": 0,
            "memoryFreeMiB": 4 * 40960,
            "coresTotal": 400,
            "coresUsed": 0,
        }
    ]
    plain = await get_json(client, "/api/v1/clusters/worker-1")
    assert_schema(plain, "ClusterDetail")
    assert plain["vgpu"] is None


async def test_borrowed_quota_is_reported_apart_from_nominal(client: Client, world: World) -> None:
    # cq-a (8 cores) shares cohort org with cq-b (4 cores): 10.5 cores admitted + 1.5 reserved is 12, 4 borrowed.
    world.dispatcher.capacities["worker-1"].workload_event("ADDED", admitted("big", "cq-a", "10500m", "16Gi"))
    body = await get_json(client, "/api/v1/clusters/worker-1")
    assert_schema(body, "ClusterDetail")
    quota = {(r["clusterQueue"], r["resource"]): r for r in body["capacity"]["quota"]}
    cpu = quota[("cq-a", "cpu")]
    assert (cpu["nominal"], cpu["used"], cpu["reserved"], cpu["borrowed"]) == (8000, 10500, 1500, 4000)
    assert cpu["cohort"] == "org" and cpu["quantities"]["borrowed"] == "4" and cpu["free"] == 0
    assert cpu["borrowingLimit"] is None and cpu["lendingLimit"] is None  # no limits in these ClusterQueues
    assert quota[("cq-a", "memory")]["borrowed"] == 0  # 18 GiB of 32
    assert quota[("cq-b", "cpu")]["borrowed"] == 0


async def test_a_worker_whose_numbers_are_not_current_says_so_and_since_when(client: Client, world: World) -> None:
    d = world.dispatcher
    await d.repo.ensure_clusters(d.capacities)
    await d.repo.record_health("worker-2", "Ready")
    before = time.time()
    await d.repo.record_health("worker-2", "Lost")
    d.capacities["worker-2"].health = "Lost"
    items = {c["name"]: c for c in (await get_json(client, "/api/v1/clusters"))["items"]}
    lost = items["worker-2"]
    assert lost["capacityKnown"] is False and before - 1 <= datetime.fromisoformat(lost["healthSince"]).timestamp()
    assert items["worker-1"]["capacityKnown"] is True and items["worker-1"]["healthSince"] is None  # never recorded
    detail = await get_json(client, "/api/v1/clusters/worker-2")
    assert_schema(detail, "ClusterDetail")
    assert detail["capacityKnown"] is False and detail["healthSince"] == lost["healthSince"]
    assert detail["capacity"]["quota"], "the last numbers stay available to the API; capacityKnown says what they are"
    # SQL does not say (yet): the health monitor's monotonic clock does.
    d.capacities["worker-1"].health = "NotReady"
    d.health.machines["worker-1"] = HealthMachine(1.0, 3.0, state="NotReady", since=time.monotonic() - 30)
    w1 = await get_json(client, "/api/v1/clusters/worker-1")
    assert w1["capacityKnown"] is False
    assert abs(datetime.fromisoformat(w1["healthSince"]).timestamp() - (time.time() - 30)) < 5
    # Ready, but its queues were never listed: nothing to show either.
    d.capacities["worker-3"].synced = False
    assert (await get_json(client, "/api/v1/clusters/worker-3"))["capacityKnown"] is False
    # A database that does not answer does not hide the workers: only the times from SQL are missing.
    (world.tmp / "gone").mkdir()
    broken = make_engine(f"sqlite+aiosqlite:///{world.tmp / 'gone' / 'db.sqlite'}")
    (world.tmp / "gone").rmdir()
    world.engines.append(broken)
    d.repo = Repo(broken)
    items = {c["name"]: c for c in (await get_json(client, "/api/v1/clusters"))["items"]}
    assert items["worker-2"]["healthSince"] is None and items["worker-1"]["healthSince"] is not None


async def test_unknown_and_malformed_clusters(client: Client) -> None:
    body = await get_json(client, "/api/v1/clusters/worker-9", 404)
    assert_error(body, 404, "no cluster 'worker-9'", "worker-1, worker-2, worker-3", "GET /api/v1/clusters")
    assert_error(await get_json(client, "/api/v1/clusters/Worker_1", 400), 400, "name:", "Kubernetes name")
    assert_error(await get_json(client, "/api/v1/clusters?x=1", 400), 400, "unknown query parameter 'x'")
    assert_error(await get_json(client, "/api/v1/nothing", 404), 404, "no route GET", "openapi.json")
    resp = await client.delete("/api/v1/clusters", headers=ADMIN)
    assert resp.status == 405
    assert_error(await resp.json(), 405, "DELETE is not allowed", "GET")


# -- cordon, uncordon, drain ----------------------------------------------------------------------------------


async def test_cordon_uncordon_drain(client: Client, world: World) -> None:
    d = world.dispatcher
    assert isinstance(d, ActingDispatcher)
    resp = await client.post("/api/v1/clusters/worker-1/cordon", headers=ADMIN)
    body = await resp.json()
    assert resp.status == 200, body
    assert_schema(body, "CordonResult")
    assert body["cluster"]["cordoned"] is True
    resp = await client.post("/api/v1/clusters/worker-1/uncordon", headers=ADMIN)
    assert (await resp.json())["cluster"]["cordoned"] is False
    resp = await client.post("/api/v1/clusters/worker-2/drain", headers=ADMIN)
    body = await resp.json()
    assert_schema(body, "DrainResult")
    assert body["moved"] == 2 and body["running"] is False and body["cluster"]["cordoned"] is True
    resp = await client.post("/api/v1/clusters/worker-3/drain?running=true", headers=ADMIN)
    assert (await resp.json())["moved"] == 4
    assert d.calls == [
        ("cordon", "worker-1", True),
        ("cordon", "worker-1", False),
        ("drain", "worker-2", False),
        ("drain", "worker-3", True),
    ]
    resp = await client.post("/api/v1/clusters/worker-3/drain?running=yes", headers=ADMIN)
    assert_error(await resp.json(), 400, "running: expected true or false")
    resp = await client.post("/api/v1/clusters/worker-9/cordon", headers=ADMIN)
    assert_error(await resp.json(), 404, "no cluster 'worker-9'")
    resp = await client.post("/api/v1/clusters/worker-1/cordon?running=true", headers=ADMIN)
    assert_error(await resp.json(), 400, "unknown query parameter 'running'")
    d.fail = ValueError("worker-1 is being drained already")
    resp = await client.post("/api/v1/clusters/worker-1/cordon", headers=ADMIN)
    assert_error(await resp.json(), 409, "cannot cordon worker-1: worker-1 is being drained already")
    assert len(d.calls) == 4


async def test_workload_controls_need_an_admin_token_and_name_the_workload(client: Client, world: World) -> None:
    d = world.dispatcher
    assert isinstance(d, ActingDispatcher)
    resp = await client.post("/api/v1/workloads/team-a/train-0/stop", headers=ADMIN)
    body = await resp.json()
    assert resp.status == 200, body
    assert_schema(body, "WorkloadControlResult")
    assert body["stopped"] is True and body["workload"] == "team-a/train-0"
    resp = await client.post("/api/v1/workloads/team-a/train-0/resume", headers=READ)
    assert_error(await resp.json(), 403)
    resp = await client.post("/api/v1/workloads/team-a/nothing/cancel", headers=ADMIN)
    assert_error(await resp.json(), 404, "no workload team-a/nothing")
    resp = await client.post("/api/v1/workloads/Team_A/x/cancel", headers=ADMIN)
    assert_error(await resp.json(), 400, "namespace")
    resp = await client.post("/api/v1/workloads/team-a/train-0/pause", headers=ADMIN)
    assert resp.status in (404, 405), "only stop, resume and cancel exist"
    assert d.calls == [("stop", "team-a/train-0", True)]


async def test_a_slow_action_is_answered_202_and_goes_on(
    client: Client, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = world.dispatcher
    assert isinstance(d, ActingDispatcher)
    gate = asyncio.Event()

    async def slow_drain(name: str, running: bool) -> int:
        await gate.wait()  # e.g. the database is down and the service retries
        d.calls.append(("drain", name, running))
        return 1

    monkeypatch.setattr(d, "drain", slow_drain)
    monkeypatch.setattr(api_clusters, "ACTION_TIMEOUT", 0.05)
    resp = await client.post("/api/v1/clusters/worker-2/drain", headers=ADMIN)
    body = await resp.json()
    assert resp.status == 202, body
    assert_schema(body, "ActionPending")
    assert "still in progress" in body["message"] and "GET /api/v1/clusters/worker-2" in body["message"]
    gate.set()
    for _ in range(100):
        if d.calls:
            break
        await asyncio.sleep(0.01)
    assert d.calls == [("drain", "worker-2", False)]


async def test_actions_are_501_until_the_dispatcher_has_them(tmp_path: Path) -> None:
    w = await build_world(tmp_path, FakeDispatcher)
    try:
        async with TestClient(TestServer(make_app(w.dispatcher, w.tokens))) as c:  # type: ignore[arg-type]
            for action, attr in (("cordon", "cordon"), ("uncordon", "cordon"), ("drain", "drain")):
                resp = await c.post(f"/api/v1/clusters/worker-1/{action}", headers=ADMIN)
                assert resp.status == 501
                assert_error(await resp.json(), 501, f"cannot {action} workers yet", f"Dispatcher.{attr}")
    finally:
        for e in w.engines:
            await e.dispose()


async def test_the_real_dispatcher_fits_the_api(world: World) -> None:
    """dispatcher.service.Dispatcher (not started: no clusters) has what the API reads and the actions it calls."""
    from dispatcher.service import Dispatcher

    real = Dispatcher(world.dispatcher.config, world.dispatcher.repo)
    await world.dispatcher.repo.ensure_clusters(real.capacities)
    async with TestClient(TestServer(make_app(real, world.tokens))) as c:
        ready = await get_json(c, "/readyz", 503, headers={})
        assert ready["checks"] == {"started": False, "database": "ok", "manager": "ok"}
        clusters = await get_json(c, "/api/v1/clusters")
        assert_schema(clusters, "ClusterList")
        assert [(w["name"], w["health"]) for w in clusters["items"]] == [(n, "Unknown") for n in real.capacities]
        assert_schema(await get_json(c, "/api/v1/clusters/worker-1"), "ClusterDetail")
        resp = await c.post("/api/v1/clusters/worker-1/cordon", headers=ADMIN)
        assert resp.status == 200 and (await resp.json())["cluster"]["cordoned"] is True
        resp = await c.post("/api/v1/clusters/worker-2/drain", headers=ADMIN)
        body = await resp.json()
        assert resp.status == 200, body
        assert body["moved"] == 0 and body["cluster"]["cordoned"] is True
        assert {r.name: r.cordoned for r in await world.dispatcher.repo.clusters()} == {
            "worker-1": True,
            "worker-2": True,
            "worker-3": False,
        }
        families = {f.name for f in text_string_to_metric_families(await (await c.get("/metrics")).text())}
        assert "kueue_dispatcher_worker_health" in families


# -- workloads ------------------------------------------------------------------------------------------------


async def test_list_workloads_paginates_with_an_opaque_token(client: Client, world: World) -> None:
    seen: list[int] = []
    path = "/api/v1/workloads?namespace=team-a&limit=5"
    pages = 0
    while True:
        body = await get_json(client, path)
        assert_schema(body, "WorkloadList")
        pages += 1
        seen += [w["id"] for w in body["items"]]
        assert all(w["namespace"] == "team-a" for w in body["items"])
        if body["continue"] is None:
            break
        assert str(world.ids["team-a/train-0"]) not in body["continue"] or len(body["continue"]) > 8
        path = f"/api/v1/workloads?namespace=team-a&limit=5&continue={body['continue']}"
    assert pages == 3 and seen == sorted(seen, reverse=True) and len(seen) == 12, "newest first by default"
    assert seen == sorted((v for k, v in world.ids.items() if k.startswith("team-a/")), reverse=True)
    oldest: list[int] = []
    path = "/api/v1/workloads?namespace=team-a&limit=5&order=oldest"
    while True:
        body = await get_json(client, path)
        oldest += [w["id"] for w in body["items"]]
        if body["continue"] is None:
            break
        path = f"/api/v1/workloads?namespace=team-a&limit=5&order=oldest&continue={body['continue']}"
    assert oldest == sorted(seen)
    everything = await get_json(client, "/api/v1/workloads")
    assert len(everything["items"]) == 15 and everything["continue"] is None
    exact = await get_json(client, "/api/v1/workloads?namespace=team-b&limit=3")
    assert len(exact["items"]) == 3 and exact["continue"] is None


async def test_list_workloads_filters(client: Client) -> None:
    body = await get_json(client, "/api/v1/workloads?state=Running")
    assert [(w["namespace"], w["name"], w["cluster"]) for w in body["items"]] == [("team-a", "train-1", "worker-1")]
    body = await get_json(client, "/api/v1/workloads?cluster=worker-3")
    assert [(w["name"], w["state"]) for w in body["items"]] == [("train-2", "Placing")]
    body = await get_json(client, "/api/v1/workloads?queue=other-queue&namespace=team-b")
    assert len(body["items"]) == 3
    body = await get_json(client, "/api/v1/workloads?queue=other-queue&namespace=team-a")
    assert body == {"items": [], "continue": None}


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("limit=-1", ("limit:", "1 to 1000", "'-1'")),
        ("limit=abc", ("limit:", "'abc'")),
        ("limit=0", ("limit:",)),
        ("limit=1001", ("limit:",)),
        ("limit=1&limit=2", ("limit: given 2 times",)),
        ("state=running", ("state:", "Pending, Placing")),
        ("namespace=Team_A", ("namespace:", "Kubernetes name")),
        ("cluster=", ("cluster:",)),
        ("color=blue", ("unknown query parameter 'color'", "state, cluster, queue, namespace, order, limit")),
        ("order=random", ("order:", "newest", "oldest")),
        ("continue=bm90LWEtdG9rZW4", ("continue: not a token this API issued",)),
        ("continue=%24%24%24", ("continue: not a token",)),
    ],
)
async def test_bad_list_parameters_are_400_naming_them(client: Client, query: str, words: tuple[str, ...]) -> None:
    assert_error(await get_json(client, f"/api/v1/workloads?{query}", 400), 400, *words)


async def test_a_continue_token_is_bound_to_its_filters(client: Client) -> None:
    body = await get_json(client, "/api/v1/workloads?namespace=team-a&limit=2")
    token = body["continue"]
    message = assert_error(
        await get_json(client, f"/api/v1/workloads?namespace=team-b&limit=2&continue={token}", 400), 400
    )
    assert "other filters" in message
    # The order is part of what a token means: a cursor taken newest-first cannot go on oldest-first.
    message = assert_error(
        await get_json(client, f"/api/v1/workloads?namespace=team-a&limit=2&order=oldest&continue={token}", 400), 400
    )
    assert "other filters" in message and "order" in message
    # The page size may change between pages.
    more = await get_json(client, f"/api/v1/workloads?namespace=team-a&limit=20&continue={token}")
    assert len(more["items"]) == 10


async def test_get_workload_with_placement_history(client: Client, world: World) -> None:
    body = await get_json(client, "/api/v1/workloads/team-a/train-1")
    assert_schema(body, "WorkloadDetail")
    assert body["id"] == world.ids["team-a/train-1"]
    assert (body["state"], body["cluster"], body["generation"]) == ("Running", "worker-1", 2)
    assert body["excluded"] == ["worker-2"]
    assert body["decisionSummary"].startswith("placed on worker-1")
    assert [(p["cluster"], p["state"], p["generation"]) for p in body["placements"]] == [
        ("worker-2", "TimedOut", 1),
        ("worker-1", "Running", 2),
    ]
    assert body["placements"][0]["outcome"] == "not admitted in time"
    assert body["placements"][1]["remoteUid"] == "remote-1"
    assert body["admittedAt"].endswith("Z")
    fresh = await get_json(client, "/api/v1/workloads/team-a/train-0")
    assert_schema(fresh, "WorkloadDetail")
    assert fresh["placements"] == [] and fresh["clusterSelector"] == {"zone": "zone-1"}


async def test_missing_workload_is_404_with_a_hint(client: Client) -> None:
    body = await get_json(client, "/api/v1/workloads/team-a/x", 404)
    assert body == {
        "error": {
            "code": 404,
            "reason": "NotFound",
            "message": "no workload team-a/x; list them with GET /api/v1/workloads?namespace=team-a",
        }
    }
    assert_error(await get_json(client, "/api/v1/workloads/team-a/x/explain", 404), 404, "no workload team-a/x")
    assert_error(await get_json(client, "/api/v1/workloads/Team-A/x", 400), 400, "namespace:")


async def test_explain(client: Client) -> None:
    body = await get_json(client, "/api/v1/workloads/team-a/train-1/explain")
    assert_schema(body, "Explanation")
    assert body["decision"]["chosen"] == "worker-1"
    assert [p["cluster"] for p in body["placements"]] == ["worker-2", "worker-1"]
    assert body["placements"][0]["decision"]["chosen"] == "worker-2"
    text = body["text"]
    assert text.startswith("Workload team-a/train-1 (Job, queue user-queue, priority 100)")
    assert "worker-1 *" in text and "Placements:" in text and "not Ready (Suspect)" in text
    waiting = await get_json(client, "/api/v1/workloads/team-a/train-3/explain")
    assert_schema(waiting, "Explanation")
    assert waiting["decision"] is None and "No decision yet" in waiting["text"]


async def test_summary_counts_workloads_per_queue_namespace_and_worker(client: Client, world: World) -> None:
    body = await get_json(client, "/api/v1/summary")
    assert_schema(body, "Summary")
    zero = dict.fromkeys(WorkloadState.ALL, 0)
    team_a = {**zero, "Pending": 10, "Placing": 1, "Running": 1}
    assert body["total"] == {**zero, "Pending": 13, "Placing": 1, "Running": 1}
    assert body["queues"] == [
        {"namespace": "team-a", "queue": "user-queue", "counts": team_a, "total": 12},
        {"namespace": "team-b", "queue": "other-queue", "counts": {**zero, "Pending": 3}, "total": 3},
    ]
    assert body["namespaces"] == [
        {"namespace": "team-a", "counts": team_a, "total": 12},
        {"namespace": "team-b", "counts": {**zero, "Pending": 3}, "total": 3},
    ]
    assert body["clusters"] == [
        {"cluster": "worker-1", "counts": {**zero, "Running": 1}, "total": 1},
        {"cluster": "worker-3", "counts": {**zero, "Placing": 1}, "total": 1},
    ]
    # Each count is what the filtered listing the dashboard links it to returns.
    for q in body["queues"]:
        for state, n in q["counts"].items():
            listed = await get_json(
                client, f"/api/v1/workloads?namespace={q['namespace']}&queue={q['queue']}&state={state}&limit=1000"
            )
            assert len(listed["items"]) == n, (q["queue"], state)
    assert_error(await get_json(client, "/api/v1/summary?namespace=team-a", 400), 400, "'namespace'", "takes none")
    (world.tmp / "gone").mkdir()
    broken = make_engine(f"sqlite+aiosqlite:///{world.tmp / 'gone' / 'db.sqlite'}")
    (world.tmp / "gone").rmdir()
    world.engines.append(broken)
    world.dispatcher.repo = Repo(broken)
    assert_error(await get_json(client, "/api/v1/summary", 503), 503, "database does not answer")


async def test_events_of_one_workload_and_of_one_worker(client: Client, world: World) -> None:
    repo = world.dispatcher.repo
    await repo.ensure_clusters(["worker-1", "worker-2"])
    await repo.record_health("worker-2", "Ready")
    await repo.record_health("worker-2", "NotReady", "Unauthorized: the API server refused the credentials")
    await repo.record_health("worker-1", "Ready")
    # A worker's health history, newest first.
    body = await get_json(client, "/api/v1/events?cluster=worker-2&type=WorkerHealth")
    assert_schema(body, "EventList")
    assert [(e["cluster"], e["message"]) for e in body["items"]] == [
        ("worker-2", "Ready -> NotReady: Unauthorized: the API server refused the credentials"),
        ("worker-2", "Unknown -> Ready"),
    ]
    # A workload's story: every type when no type is given, newest first.
    body = await get_json(client, "/api/v1/events?workload=team-a/train-1")
    assert_schema(body, "EventList")
    assert [(e["type"], e["cluster"], e["workload"]) for e in body["items"]] == [
        ("Placing", "worker-1", "team-a/train-1"),
        ("Placing", "worker-2", "team-a/train-1"),
        ("Submitted", None, "team-a/train-1"),
    ]
    body = await get_json(client, "/api/v1/events?workload=team-a/train-1&cluster=worker-2")
    assert [e["type"] for e in body["items"]] == ["Placing"]
    body = await get_json(client, "/api/v1/events?workload=team-a/train-1&type=Submitted,Placed&limit=5")
    assert [e["type"] for e in body["items"]] == ["Submitted"]
    # Without a workload or a worker, the failover list's types, as before: no health changes, no Placing.
    assert (await get_json(client, "/api/v1/events"))["items"] == []
    for query, status, words in (
        ("workload=team-a", 400, ("workload:", "NAMESPACE/NAME")),
        ("workload=Team-A/train-1", 400, ("workload: the namespace", "Kubernetes name")),
        ("workload=team-a/", 400, ("workload: the name",)),
        ("workload=team-a/nope", 404, ("no workload team-a/nope", "namespace=team-a")),
        ("cluster=Worker_2", 400, ("cluster:", "Kubernetes name")),
    ):
        assert_error(await get_json(client, f"/api/v1/events?{query}", status), status, *words)


# -- authentication and authorisation -------------------------------------------------------------------------


ROUTES = [
    ("GET", "/api/v1/openapi.json"),
    ("GET", "/api/v1/clusters"),
    ("GET", "/api/v1/clusters/worker-1"),
    ("POST", "/api/v1/clusters/worker-1/cordon"),
    ("POST", "/api/v1/clusters/worker-1/uncordon"),
    ("POST", "/api/v1/clusters/worker-1/drain"),
    ("GET", "/api/v1/workloads"),
    ("GET", "/api/v1/workloads/team-a/train-1"),
    ("GET", "/api/v1/workloads/team-a/train-1/explain"),
    ("GET", "/api/v1/summary"),
    ("GET", "/api/v1/events?workload=team-a/train-1"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_every_api_route_needs_a_known_token(client: Client, method: str, path: str) -> None:
    for headers, invalid in (
        ({}, False),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, False),
        ({"Authorization": "Bearer "}, False),
        ({"Authorization": f"Bearer {OTHER_TOKEN}"}, True),
        ({"Authorization": f"Bearer {READ_TOKEN}x"}, True),
    ):
        resp = await client.request(method, path, headers=headers)
        assert resp.status == 401, (method, path, headers)
        challenge = resp.headers["WWW-Authenticate"]
        assert challenge.startswith('Bearer realm="kueue-dispatcher"')
        assert ('error="invalid_token"' in challenge) is invalid
        assert_error(await resp.json(), 401, "token")
    resp = await client.request(method, path, headers=READ)
    if method == "POST":
        assert resp.status == 403
        assert_error(await resp.json(), 403, "needs an admin token", "read role")
    else:
        assert resp.status == 200
    resp = await client.request(method, path, headers=ADMIN)
    assert resp.status == 200


async def test_open_paths_ignore_tokens_even_bad_ones(client: Client) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        for headers in ({}, {"Authorization": f"Bearer {OTHER_TOKEN}"}):
            assert (await client.get(path, headers=headers)).status == 200


async def test_tokens_are_compared_in_constant_time_against_every_token(
    client: Client, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.tokens.merge(TokenStore([("read", "third-token-0123456789")]))
    calls: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def counting(a: Any, b: Any) -> bool:
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    for headers in (READ, ADMIN, {"Authorization": f"Bearer {OTHER_TOKEN}"}):
        calls.clear()
        await client.get("/api/v1/clusters", headers=headers)
        # Every stored token is compared (no early exit on the first, matching one), on fixed-length digests.
        assert calls == [(32, 32)] * 3
    calls.clear()
    await client.get("/healthz")
    assert calls == []


async def test_without_tokens_the_api_serves_only_on_loopback(world: World, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with pytest.raises(ApiConfigError, match=r"only listen on 127\.0\.0\.1 \(not 0\.0\.0\.0\).*DISPATCHER_API_TOKENS"):
        await serve(make_app(world.dispatcher, TokenStore()), "0.0.0.0", 0)  # type: ignore[arg-type]
    runner = await serve(make_app(world.dispatcher, TokenStore()), "127.0.0.1", 0)  # type: ignore[arg-type]
    try:
        assert "WITHOUT authentication" in caplog.text
        host, port = bound_address(runner)
        async with aiohttp.ClientSession() as s:
            async with s.post(f"http://{host}:{port}/api/v1/clusters/worker-1/cordon") as resp:
                assert resp.status == 200
            async with s.get(f"http://{host}:{port}/api/v1/workloads?limit=1") as resp:
                assert resp.status == 200
    finally:
        await runner.cleanup()


async def test_start_api_reads_tokens_from_the_environment_and_a_file(world: World) -> None:
    token_file = world.tmp / "tokens"
    token_file.write_text(f"# API tokens\nadmin {ADMIN_TOKEN}  # ops\n")
    runner = await start_api(
        world.dispatcher,  # type: ignore[arg-type]
        listen="127.0.0.1:0",
        token_file=token_file,
        environ={"DISPATCHER_API_TOKENS": f"read {READ_TOKEN}"},
    )
    try:
        host, port = bound_address(runner)
        async with aiohttp.ClientSession() as s:
            async with s.get(f"http://{host}:{port}/api/v1/clusters", headers=READ) as resp:
                assert resp.status == 200
            async with s.post(f"http://{host}:{port}/api/v1/clusters/worker-1/cordon", headers=READ) as resp:
                assert resp.status == 403
            async with s.post(f"http://{host}:{port}/api/v1/clusters/worker-1/cordon", headers=ADMIN) as resp:
                assert resp.status == 200
    finally:
        await runner.cleanup()
    with pytest.raises(ApiConfigError, match="HOST:PORT"):
        await start_api(world.dispatcher, listen="8080")  # type: ignore[arg-type]
    with pytest.raises(ApiConfigError) as info:
        await start_api(
            world.dispatcher, listen="127.0.0.1:0", environ={"DISPATCHER_API_TOKENS": f"reader {READ_TOKEN}"}
        )  # type: ignore[arg-type]
    assert "$DISPATCHER_API_TOKENS: entry 1" in str(info.value) and READ_TOKEN not in str(info.value)


# -- token sources ------------------------------------------------------------------------------------------


def test_token_file_format(tmp_path: Path) -> None:
    f = tmp_path / "tokens"
    f.write_text(f"# comment\n\n  read {READ_TOKEN}\nadmin\t{ADMIN_TOKEN} # ops team\n")
    store = TokenStore.from_file(f)
    assert len(store) == 2 and store.role_for(READ_TOKEN) == "read" and store.role_for(ADMIN_TOKEN) == "admin"
    assert store.role_for(OTHER_TOKEN) is None and store.role_for("") is None
    assert READ_TOKEN not in repr(store) and repr(store) == "TokenStore(1 read, 1 admin)"
    env = TokenStore.from_env(environ={"DISPATCHER_API_TOKENS": f"read {READ_TOKEN}; admin {ADMIN_TOKEN}\n"})
    assert env.counts() == {"read": 1, "admin": 1}
    assert not TokenStore.from_env(environ={})


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (f"read {READ_TOKEN}\nwriter {ADMIN_TOKEN}\n", ("line 2", "read or admin")),
        (f"# c\n{ADMIN_TOKEN} admin\n", ("line 2", "the role comes first")),
        (f"admin {ADMIN_TOKEN} extra\n", ("line 1", "found 3 fields")),
        (f"{ADMIN_TOKEN}\n", ("line 1", "found 1 field")),
        ("read short\n", ("line 1", "too short", "openssl rand")),
        (f"read {READ_TOKEN}\nadmin {READ_TOKEN}\n", ("line 2", "already listed")),
        ("read tökén-with-ünicode-1234\n", ("line 1", "visible ASCII")),
    ],
)
def test_token_file_errors_name_the_line_never_the_token(tmp_path: Path, text: str, words: tuple[str, ...]) -> None:
    f = tmp_path / "tokens"
    f.write_text(text)
    with pytest.raises(TokenError) as info:
        TokenStore.from_file(f)
    message = str(info.value)
    assert message.startswith(f"API token file {f}: ")
    for w in words:
        assert w in message, message
    for secret in (*SECRETS, "tökén"):
        assert secret not in message


def test_missing_token_file(tmp_path: Path) -> None:
    with pytest.raises(TokenError, match="No such file"):
        TokenStore.from_file(tmp_path / "nope")


# -- secrets never leak ---------------------------------------------------------------------------------------


async def test_planted_secrets_never_appear_in_responses_or_logs(
    client: Client, world: World, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    d = world.dispatcher
    assert isinstance(d, ActingDispatcher)
    bodies: list[str] = []
    header_sets = (READ, ADMIN, {"Authorization": f"Bearer {OTHER_TOKEN}"}, {"Authorization": f"bearer  {ADMIN_TOKEN}"})
    for method, path in [
        *ROUTES,
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
        ("GET", "/api/v1/clusters/worker-2"),
        ("GET", "/api/v1/nothing"),
        ("GET", "/api/v1/workloads?limit=abc"),
    ]:
        for headers in header_sets:
            resp = await client.request(method, path, headers=headers)
            bodies.append(f"{resp.status} {dict(resp.headers)} {await resp.text()}")
    # A dispatcher error that quotes a kubeconfig: a 500 with an error id, and a redacted log.
    d.fail = RuntimeError(f"cannot reach worker-1 with this kubeconfig:\n{KUBECONFIG}")
    resp = await client.post("/api/v1/clusters/worker-1/drain", headers=ADMIN)
    assert resp.status == 500
    body = await resp.json()
    assert_error(body, 500, "internal error (error id ")
    bodies.append(await resp.text())
    error_id = body["error"]["message"].split("error id ")[1].split(")")[0]
    assert error_id in caplog.text and "RuntimeError" in caplog.text
    d.fail = ValueError(f"refusing: token: {KUBE_TOKEN}")
    resp = await client.post("/api/v1/clusters/worker-1/cordon", headers=ADMIN)
    assert resp.status == 409
    bodies.append(await resp.text())
    captured = capsys.readouterr()
    everything = "\n".join([*bodies, caplog.text, captured.out, captured.err])
    assert "/api/v1/clusters" in caplog.text or bodies  # something was captured at all
    for secret in SECRETS:
        assert secret not in everything, secret
    assert "10.1.2.3" not in "\n".join(bodies)  # the kubeconfig's server is not shown either


# -- the OpenAPI document -------------------------------------------------------------------------------------


def test_openapi_document_is_valid() -> None:
    validate_spec(openapi_document())


async def test_openapi_document_lists_exactly_the_routes(client: Client, world: World) -> None:
    served = await get_json(client, "/api/v1/openapi.json")
    assert served == openapi_document()
    documented = {
        (method.upper(), path) for path, item in served["paths"].items() for method in item if method != "parameters"
    }
    app = make_app(world.dispatcher, world.tokens)  # type: ignore[arg-type]
    routed = {
        (r.method, r.resource.canonical) for r in app.router.routes() if r.method != "HEAD" and r.resource is not None
    }
    assert documented == routed


def _fuzz(strategy: Any, checks: list[Any], base_url: str, auth: dict[str, str]) -> None:
    from hypothesis import HealthCheck, Phase, given, settings

    @settings(
        max_examples=12,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        response = case.call(base_url=base_url, headers=auth, timeout=10)
        case.validate_response(response, checks=checks, headers=auth)

    run()


def _run_schemathesis(base_url: str, auth: dict[str, str]) -> list[str]:
    """Every operation, positive and negative data, a few examples each: no 5xx, every response as documented."""
    import schemathesis
    from schemathesis.checks import not_a_server_error
    from schemathesis.generation import GenerationMode
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        negative_data_rejection,
        response_headers_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    schema = schemathesis.openapi.from_dict(openapi_document())
    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
    ]
    known = {
        "name": "worker-1",
        "namespace": "team-a",
    }
    ran: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        path_names = {p.name for p in operation.path_parameters}
        variants: list[tuple[GenerationMode, dict[str, str] | None]] = [(GenerationMode.POSITIVE, None)]
        if path_names:
            fixed = {k: v for k, v in known.items() if k in path_names}
            if operation.path.startswith("/api/v1/workloads/"):
                fixed["name"] = "train-1"
            variants.append((GenerationMode.POSITIVE, fixed))
        if path_names or list(operation.query):
            variants.append((GenerationMode.NEGATIVE, None))
        for mode, fixed in variants:
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=fixed)
            mode_checks = [*checks, negative_data_rejection] if mode == GenerationMode.NEGATIVE else checks

            _fuzz(strategy, mode_checks, base_url, auth)
            ran.append(f"{operation.label} {mode.value}{' fixed' if fixed else ''}")
    return ran


async def test_schemathesis_finds_no_server_error_and_no_undocumented_response(world: World) -> None:
    runner = await serve(make_app(world.dispatcher, world.tokens), "127.0.0.1", 0)  # type: ignore[arg-type]
    try:
        host, port = bound_address(runner)
        started = time.monotonic()
        ran = await asyncio.to_thread(_run_schemathesis, f"http://{host}:{port}", ADMIN)
    finally:
        await runner.cleanup()
    assert len(ran) >= 12, ran
    assert time.monotonic() - started < 120


@pytest.fixture(autouse=True)
def _quiet_hypothesis() -> Iterator[None]:
    logging.getLogger("hypothesis").setLevel(logging.WARNING)
    yield
