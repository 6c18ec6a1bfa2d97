"""Refused credentials are loud (issue 16, item 1), on the simulator and on the real rig.

- A worker that answers 401/403 is NotReady with the reason, visible in the API, the CLI table and the metrics;
  placement skips it and it is never failed over from (it is alive: its copies could not be fenced).
- A manager that refuses the dispatcher's credentials fails the start with one clear line naming the kubeconfig,
  never the secret; one that starts refusing later turns /readyz not ready.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

import pytest
import yaml
from harness import eventually, job, start_rig, stop_rig
from realrig import RealRig, clean

from dispatcher.api.views import cluster_summary
from dispatcher.config import Policy
from dispatcher.health import HealthMachine, HealthState
from dispatcher.kube.client import KubeError, Resource
from dispatcher.remote import clusters_table
from dispatcher.store.models import WorkloadState

WRONG = "not-the-token-4f9c1e"
FAST = Policy(admission_timeout=60.0, lost_timeout=3.0, suspect_after=1.0, finished_retention=600.0, gc_interval=5.0)
EVENTS = Resource("", "v1", "events", "Event")


# -- the health machine --------------------------------------------------------------------------------------------


def test_a_refusal_is_not_ready_with_its_reason_and_never_lost_while_it_answers() -> None:
    m = HealthMachine(suspect_after=1.0, lost_timeout=3.0, since=0.0)
    assert m.probe("Unauthorized: the API server refused the credentials", 0.5) == HealthState.NOT_READY
    assert m.reason.startswith("Unauthorized")
    for t in range(1, 20):  # it keeps answering (with refusals) long past the lost timeout
        assert m.probe("Unauthorized: the API server refused the credentials", float(t)) is None
    assert m.state == HealthState.NOT_READY
    assert m.probe(True, 21.0) == HealthState.READY and m.reason == ""
    # A refusal from a Lost worker keeps it Lost: it cannot be fenced until it accepts the dispatcher.
    lost = HealthMachine(suspect_after=1.0, lost_timeout=3.0, state=HealthState.LOST, since=0.0)
    assert lost.probe("Forbidden: no", 1.0) is None and lost.state == HealthState.LOST
    # A NotReady worker that goes silent becomes Suspect, then Lost, as any other.
    assert m.probe("Forbidden: x", 22.0) == HealthState.NOT_READY
    assert m.probe(False, 23.5) == HealthState.SUSPECT
    assert m.probe(False, 26.0) == HealthState.LOST


# -- end to end ---------------------------------------------------------------------------------------------------


@pytest.mark.real_rig
async def test_a_worker_refusing_the_token_is_not_ready_unauthorized_skipped_and_never_failed_over(
    tmp_path: Path, db_url: str, real_rig: RealRig | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    r = await start_rig(
        tmp_path, db_url, policy=FAST, weights={"worker-1": 10.0}, tokens={"worker-1": WRONG}, real=real_rig
    )
    try:
        cap = r.dispatcher.capacities["worker-1"]
        await eventually(lambda: _async(cap.health == HealthState.NOT_READY), what="worker-1 NotReady")
        summary = cluster_summary(cap, r.dispatcher.clients["worker-1"])
        assert summary["health"] == "NotReady" and summary["reason"].startswith("Unauthorized"), summary
        assert summary["apiErrors"] > 0, "a refusal is an API error"
        assert "NotReady" in clusters_table({"items": [summary]}) and "Unauthorized" in clusters_table(
            {"items": [summary]}
        )
        rendered = r.dispatcher.metrics.render()[0].decode()
        assert 'kueue_dispatcher_worker_health{cluster="worker-1",state="NotReady"} 1.0' in rendered

        # The heaviest worker refuses: the Job goes elsewhere, and the decision says why not worker-1.
        await r.submit(job("elsewhere", seconds=1))
        row = await r.wait_state("team-a", "elsewhere", WorkloadState.SUCCEEDED, timeout=60)
        assert row.cluster in ("worker-2", "worker-3")
        verdicts = {w["cluster"]: w for w in (row.last_decision or {})["workers"]}
        assert verdicts["worker-1"]["reason"].startswith("cluster is NotReady, not Ready (Unauthorized")

        # Alive, so never Lost and never failed over from, however long it refuses.
        machine = r.dispatcher.health.machines["worker-1"]
        await eventually(
            lambda: _async(time.monotonic() - machine.since > FAST.lost_timeout * 2),
            timeout=30,
            what="twice the lost timeout in NotReady",
        )
        assert machine.state == HealthState.NOT_READY
        events = await r.repo.recent_events(["FailedOver", "WorkerLost"])
        assert not events
    finally:
        await stop_rig(r)
    errors = [rec for rec in caplog.records if rec.levelno >= logging.ERROR and "worker-1" in rec.getMessage()]
    assert errors, "an ERROR line names the refusing worker"
    assert all(WRONG not in rec.getMessage() for rec in caplog.records), "the token never reaches a log line"


@pytest.mark.real_rig
async def test_a_manager_refusing_the_credentials_fails_the_start_naming_the_kubeconfig(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    with pytest.raises(KubeError) as err:
        await start_rig(tmp_path, db_url, tokens={"manager": WRONG}, real=real_rig)
    message = str(err.value)
    assert err.value.code == 401, message
    assert "the manager (kubeconfig" in message and "manager.token.kubeconfig" in message
    assert "refuses the dispatcher: Unauthorized" in message and WRONG not in message


@pytest.mark.real_rig
async def test_dispatcher_run_with_a_refused_manager_token_exits_with_one_line(
    tmp_path: Path, real_rig: RealRig | None, backend: str
) -> None:
    world = None
    if real_rig is not None:
        source = real_rig.directory
    else:
        from kubesim.world import SimWorld, WorldOptions

        world = SimWorld(WorldOptions(workers=1, gpu_workers=0))
        await world.start()
        await asyncio.to_thread(world.write_files, tmp_path / "sim")
        source = tmp_path / "sim"
    try:
        bad = await asyncio.to_thread(_config_with_manager_token, source, tmp_path, WRONG)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "dispatcher", "run", "--config", str(tmp_path / "clusters.yaml"),
            "--db-url", f"sqlite+aiosqlite:///{tmp_path / 'd.sqlite'}", "--api-listen", "127.0.0.1:0",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(60):
            _out, err = await proc.communicate()
    finally:
        if world is not None:
            await world.stop()
    text = err.decode()
    assert proc.returncode == 2, text
    last = text.strip().splitlines()[-1]
    assert last.startswith("dispatcher: 401 Unauthorized: the manager (kubeconfig ") and str(bad) in last, text
    assert "Traceback" not in text and WRONG not in text


def _config_with_manager_token(source: Path, tmp: Path, token: str) -> Path:
    """``tmp/clusters.yaml``: ``source``'s, with the manager's kubeconfig authenticating with ``token``."""
    raw = yaml.safe_load((source / "clusters.yaml").read_text())
    kubeconfig = yaml.safe_load(Path(raw["manager"]["kubeconfig"]).read_text())
    for user in kubeconfig["users"]:
        user["user"] = {"token": token}
    bad = tmp / "bad-manager.kubeconfig"
    bad.write_text(yaml.safe_dump(kubeconfig))
    raw["manager"]["kubeconfig"] = str(bad)
    (tmp / "clusters.yaml").write_text(yaml.safe_dump(raw))
    return bad


async def test_a_manager_that_starts_refusing_turns_readyz_not_ready(tmp_path: Path, db_url: str) -> None:
    """Simulator only: its manager's token is changed under a running dispatcher, then the connections drop."""
    from dispatcher.api.app import readyz

    r = await start_rig(tmp_path, db_url)
    try:

        class Request:
            app = {}

        from dispatcher.api import app as api_app

        Request.app = {api_app.DISPATCHER: r.dispatcher, api_app.METRICS: r.dispatcher.metrics}
        ok = await readyz(Request())  # type: ignore[arg-type]
        assert ok.status == 200
        world = r.sim()
        world.manager.server.token = "rotated-elsewhere"
        await world.manager.set_fault("restart", downtime=0.2)  # informers reconnect, and are refused

        async def refused() -> bool:
            return r.dispatcher.manager_rejection() is not None

        await eventually(refused, timeout=30, what="the manager's refusal seen")
        answer = await readyz(Request())  # type: ignore[arg-type]
        assert answer.status == 503
        assert b"the manager cluster refuses the dispatcher (Unauthorized" in answer.body  # type: ignore[operator]
    finally:
        await stop_rig(r)


async def _async(value: bool) -> bool:
    return value


async def test_a_worker_whose_rbac_is_missing_is_not_ready_forbidden_naming_what(
    tmp_path: Path, real_rig_session: RealRig
) -> None:
    """Real rig only (the simulator has no RBAC): a ServiceAccount token the worker accepts, without the
    dispatcher's role: /readyz answers, the informers are refused, and the reason names the missing right."""
    await clean(real_rig_session)
    admin = await real_rig_session.client("worker-1")
    sas = Resource("", "v1", "serviceaccounts", "ServiceAccount")
    try:
        if await admin.get(sas, "kueue-system", "no-rights") is None:
            await admin.create(sas, "kueue-system", {"metadata": {"name": "no-rights"}})
        answer = await admin.request(
            "POST", sas.path("kueue-system", "no-rights", "token"), body={"spec": {"expirationSeconds": 3600}}
        )
    finally:
        await admin.close()
    r = await start_rig(
        tmp_path, "sqlite+aiosqlite:///" + str(tmp_path / "d.sqlite"), policy=FAST,
        tokens={"worker-1": answer["status"]["token"]}, real=real_rig_session,
    )  # fmt: skip
    try:
        cap = r.dispatcher.capacities["worker-1"]
        await eventually(lambda: _async(cap.health == HealthState.NOT_READY), what="worker-1 NotReady")
        assert cap.health_reason.startswith("Forbidden: "), cap.health_reason
        assert "system:serviceaccount:kueue-system:no-rights" in cap.health_reason
        assert "cannot list resource" in cap.health_reason
    finally:
        await stop_rig(r)
