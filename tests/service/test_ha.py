"""High availability: ``dispatcher run --leader-elect`` replicas on one PostgreSQL, a Lease on the manager.

The replicas are real child processes (SIGKILL, SIGSTOP/SIGCONT), the clusters are simulated in the test's
process, and the timings are short (lease 3 s, renew deadline 2 s, retry 0.5 s) to keep the tests fast.
"""

from __future__ import annotations

import asyncio
import io
import json
import signal
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from realrig import RealRig, clean
from sqlalchemy import func, select

from dispatcher import labels as L
from dispatcher.cli import main
from dispatcher.ha_drill import JOBS, HaDrillOptions, _leader_kill, drill_job, ha_world, wait_for, wait_leading
from dispatcher.store.models import AuditEvent, Placement, Workload, WorkloadState

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]

LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
TIMINGS = {"lease_duration": LEASE, "renew_deadline": RENEW, "retry_period": RETRY}


async def _rig(real_rig: RealRig | None) -> Path | None:
    """The real rig's directory, cleaned of earlier tests' work (None on the simulator)."""
    if real_rig is None:
        return None
    await clean(real_rig)
    return real_rig.directory


def _micro(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def _sql_snapshot(ha: Any) -> tuple[Any, ...]:
    """Everything a leader writes: workloads, placements, events, the term."""
    async with ha.repo.sessions() as s:
        workloads = sorted(
            (await s.execute(select(Workload.id, Workload.state, Workload.generation, Workload.updated_at))).all()
        )
        placements = sorted((await s.execute(select(Placement.id, Placement.state, Placement.remote_uid))).all())
        events = (await s.execute(select(func.count(AuditEvent.id)))).scalar_one()
    return tuple(workloads), tuple(placements), events, await ha.repo.leadership()


async def _remote_copies(ha: Any) -> set[tuple[str, str, str]]:
    out = set()
    for name, client in ha.workers.items():
        items, _ = await client.list_all(JOBS, "team-a", label_selector=L.ORIGIN)
        out |= {(name, o["metadata"]["name"], o["metadata"]["uid"]) for o in items}
    return out


@pytest.mark.real_rig
async def test_one_replica_leads_the_lease_names_it_and_a_kill_hands_over(
    tmp_path: Path, pg_url: str, real_rig: RealRig | None
) -> None:
    async with ha_world(tmp_path, pg_url, workers=2, rig=await _rig(real_rig), **TIMINGS) as ha:
        for name in ("a", "b"):
            await ha.replicas.start(name)
        for name in ("a", "b"):
            await wait_for(lambda n=name: _ready(ha, n), f"{name} ready", 60)

        async def one_leader() -> list[str] | None:
            leaders = await ha.replicas.leaders()
            return leaders if len(leaders) == 1 else None

        [leader] = await wait_for(one_leader, "exactly one leader", 60)
        other = "b" if leader == "a" else "a"
        lease = await ha.replicas.lease(ha.manager)
        assert lease is not None
        spec = lease["spec"]
        assert spec["holderIdentity"] == leader and spec["leaseDurationSeconds"] == int(LEASE)
        assert spec["acquireTime"] and spec["renewTime"] and spec["leaseTransitions"] >= 0
        term, holder, _ = await ha.repo.leadership()
        assert holder == leader and term >= 1
        standby = await ha.replicas.readyz(other)
        assert standby is not None and standby["status"] == "ready" and standby["leader"] is False

        last_renew = _micro((await ha.replicas.lease(ha.manager) or {})["spec"]["renewTime"])
        ha.replicas.signal(leader, signal.SIGKILL)
        new_term = await wait_leading(ha, other, 30)
        lease = await ha.replicas.lease(ha.manager)
        assert lease is not None and lease["spec"]["holderIdentity"] == other
        assert lease["spec"]["leaseTransitions"] == spec["leaseTransitions"] + 1 and new_term == term + 1
        # Handed over within lease duration + retry period of the dead leader's last renewal (the Lease's own
        # timestamps, written by the API server's clients; a little slack for a loaded machine).
        handover = (_micro(lease["spec"]["acquireTime"]) - last_renew).total_seconds()
        assert handover <= LEASE + RETRY + 1.0, handover
        assert await ha.replicas.leaders() == [other]


@pytest.mark.real_rig
async def test_leader_sigkilled_while_100_jobs_are_dispatched_all_finish_on_exactly_one_worker(
    tmp_path: Path, pg_url: str, real_rig: RealRig | None
) -> None:
    options = HaDrillOptions(db_url=pg_url, replicas=2, jobs=100, run_seconds=1.0, **TIMINGS)
    async with ha_world(tmp_path, pg_url, run_seconds=1.0, rig=await _rig(real_rig), **TIMINGS) as ha:
        report = await _leader_kill(ha, options, io.StringIO())
        assert report["killed"] and report["new_leader"] and report["new_leader"] != report["killed"], report
        assert report["jobs_succeeded"] == 100 and report["lost"] == 0, report
        assert report["duplicates"] == 0 and report["completed_more_than_once"] == 0, report
        copies = await _remote_copies(ha)
        per_workload: dict[str, int] = {}
        for _, name, _ in copies:
            per_workload[name] = per_workload.get(name, 0) + 1
        assert len(per_workload) == 100 and set(per_workload.values()) == {1}, "each job on exactly one worker"


async def test_frozen_leader_resumed_after_a_takeover_writes_nothing_and_steps_down(
    tmp_path: Path, pg_url: str
) -> None:
    async with ha_world(tmp_path, pg_url, workers=2, run_seconds=30.0, **TIMINGS) as ha:
        await ha.replicas.start("old")
        await wait_leading(ha, "old", 60)
        # `run` settles the cyclic GC once started (kubecommon/gcpolicy.py).
        settled = "objects moved out of the cyclic GC's sight, GC thresholds (50000, 20, 100)"
        await wait_for(lambda: _log_has(tmp_path / "old.log", settled), "the started heap frozen", 10)
        await ha.replicas.start("new")
        await wait_for(lambda: _ready(ha, "new"), "the standby ready", 60)
        # Work in flight when the leader freezes: jobs being placed and mirrored.
        for i in range(20):
            await ha.manager.create(JOBS, "team-a", drill_job(i, 30.0, "frozen"))

        async def some_placed() -> bool:
            return len(await _remote_copies(ha)) >= 3

        await wait_for(some_placed, "some copies created", 30)
        ha.replicas.signal("old", signal.SIGSTOP)  # frozen mid-stream, its lease runs out
        term_new = await wait_leading(ha, "new", 30)
        for i in range(20, 30):
            await ha.manager.create(JOBS, "team-a", drill_job(i, 30.0, "frozen"))

        async def all_placed() -> bool:
            return len(await _remote_copies(ha)) == 30

        await wait_for(all_placed, "every job placed by the new leader", 60)
        # Freeze the new leader too: from here on, any write can only come from the old one.
        ha.replicas.signal("new", signal.SIGSTOP)
        sql_before, copies_before = await _sql_snapshot(ha), await _remote_copies(ha)
        ha.replicas.signal("old", signal.SIGCONT)

        async def stepped_down() -> bool:
            body = await ha.replicas.readyz("old")
            return body is not None and body["leader"] is False

        await wait_for(stepped_down, "the old leader answering as a standby", 30)
        # Give its woken tasks (mirrors, syncs, batches) every chance to write, well within the new lease.
        await wait_for(lambda: _log_has(tmp_path / "old.log", "standing by"), "the old leader standing by", 10)
        assert await _sql_snapshot(ha) == sql_before, "the deposed leader changed SQL"
        assert await _remote_copies(ha) == copies_before, "the deposed leader created or deleted a copy"
        term, holder, _ = await ha.repo.leadership()
        assert (term, holder) == (term_new, "new")
        ha.replicas.signal("new", signal.SIGCONT)
        await wait_for(lambda: _one_leader(ha), "one leader after both resumed", 30)


@pytest.mark.parametrize("fault", ["flaky", "restart"])
async def test_manager_api_failing_during_renewal_leader_steps_down_then_leads_again(
    tmp_path: Path, pg_url: str, fault: str
) -> None:
    async with ha_world(tmp_path, pg_url, workers=2, run_seconds=1.0, **TIMINGS) as ha:
        await ha.replicas.start("only")
        term = await wait_leading(ha, "only", 60)
        await ha.manager.create(JOBS, "team-a", drill_job(0, 1.0, "fault"))
        manager = ha.world.manager
        if fault == "flaky":
            await manager.set_fault("flaky", error_rate=1.0)  # every call answers 500 or 429
        else:
            await manager.set_fault("restart", downtime=RENEW + 2 * RETRY + 1.0)
        try:

            async def stepped_down() -> bool:
                body = await ha.replicas.readyz("only")
                return body is not None and body["leader"] is False

            await wait_for(stepped_down, "the leader stepping down", 30)
            if fault == "flaky":  # (a restarted server may already be back, and the Lease taken again)
                assert (await ha.repo.leadership())[0] == term, "nobody took a term while the manager failed"
        finally:
            await manager.set_fault("none")

        async def leads_again() -> bool:
            body = await ha.replicas.readyz("only")
            return body is not None and body["leader"] is True and (await ha.repo.leadership())[0] == term + 1

        await wait_for(leads_again, "leadership re-acquired with a new fencing term", 30)
        await ha.manager.create(JOBS, "team-a", drill_job(1, 1.0, "fault"))

        async def both_done() -> bool:
            counts = await ha.repo.count_by_state()
            return counts.get(WorkloadState.SUCCEEDED, 0) == 2

        await wait_for(both_done, "both jobs succeeded", 60)
        copies = await _remote_copies(ha)
        assert sorted(n for _, n, _ in copies) == ["fault-00000", "fault-00001"], "one copy each"


async def test_leader_elect_with_sqlite_is_refused_naming_the_database_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "clusters.yaml"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    config.write_text(f"manager:\n  kubeconfig: {kubeconfig}\nworkers:\n  - name: w1\n    kubeconfig: {kubeconfig}\n")
    url = f"sqlite+aiosqlite:///{tmp_path / 'one.sqlite'}"
    code = main(["run", "--config", str(config), "--db-url", url, "--leader-elect"])
    err = capsys.readouterr().err
    assert code == 2
    assert url in err and "--leader-elect" in err and "PostgreSQL" in err
    assert "Traceback" not in err


def test_drill_cli_refuses_leader_kill_without_postgresql(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["drill", "--sim", "--mode", "leader-kill", "--db-url", "sqlite+aiosqlite:///x.sqlite", "--json"])
    assert code == 2 and "postgresql" in capsys.readouterr().err


async def _ready(ha: Any, name: str) -> bool:
    body = await ha.replicas.readyz(name)
    return body is not None and body.get("status") == "ready"


async def _one_leader(ha: Any) -> bool:
    return len(await ha.replicas.leaders()) == 1


async def _log_has(path: Path, text: str) -> bool:
    return text in await asyncio.to_thread(path.read_text, errors="replace")


async def test_leader_kill_drill_cli_prints_the_json_report(pg_url: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dispatcher", "drill", "--sim", "--mode", "leader-kill", "--replicas", "2",
        "--jobs", "12", "--db-url", pg_url, "--lease-duration", "3", "--renew-deadline", "2",
        "--retry-period", "0.5", "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-2000:]
    report = json.loads(out)
    assert {"takeover_seconds", "duplicates", "lost", "jobs_succeeded"} <= set(report)
    assert report["jobs_succeeded"] == 12 and report["duplicates"] == 0 and report["lost"] == 0
    assert report["takeover_seconds"] > 0
