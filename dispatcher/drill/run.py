"""The drill itself: submit, fail the victim, measure detection, re-placement, duplicates and their overlap, loss,
and the fencing of the stale copies when the victim returns; in-process (``--sim``) or against a running
dispatcher."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import secrets
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from .. import labels as L
from ..adapters.job import JobAdapter
from ..agent import AgentGroup
from ..config import ConfigError, DispatcherConfig, FencingPolicy, KubeconfigRef, Policy, load_config
from ..health import HealthState
from ..kube.client import ClusterClient, KubeError, connect
from ..remote import ApiError
from ..service import Dispatcher
from ..store.engine import make_engine
from ..store.migrate import upgrade
from ..store.models import WorkloadState
from ..store.repo import Repo
from .common import MODES, REPORT_KEYS, DrillError, DrillOptions, bar, drill_job
from .faults import AdminFault, CommandFault, Fault, ManualFault, SimFault
from .observe import ApiObserver, DuplicateSampler, KubeSampler, LocalObserver, Observer, Sampler, Seen

__all__ = ["run_drill", "run_remote_drill"]

Obj = dict[str, Any]


# -- the drill -----------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """What one drill needs, wherever the dispatcher runs."""

    observer: Observer
    sampler: Sampler
    fault_for: Callable[[str], Fault]
    submit: Callable[[list[str]], Awaitable[None]]
    prefix: str
    workers: list[str]
    heal_wait: float = 30.0
    #: Run on the victim before the fault (``--agent-down``: its fencing agent stopped first).
    before_fault: Callable[[str], Awaitable[None]] | None = None
    #: The sampler reaches the workers from inside: a partitioned victim is still looked into.
    look_inside: bool = False
    #: The victim's fencing (``agent`` or ``none``), and whether its agent was stopped for the drill.
    fencing: str = "none"
    agent_down: bool = False


async def _drill(plan: Plan, options: DrillOptions, progress: TextIO) -> Obj:
    names = [f"{plan.prefix}{i:05d}" for i in range(options.jobs)]
    await plan.submit(names)
    mine = set(names)

    async def drill_workloads() -> list[Seen]:
        return [s for s in await plan.observer.workloads() if s.name in mine]

    deadline = time.monotonic() + options.timeout
    while True:
        seen = await drill_workloads()
        running = sum(1 for s in seen if s.state == WorkloadState.RUNNING)
        bar(running, options.jobs, "jobs running", progress)
        if running >= options.jobs or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    progress.write("\n")

    by_worker: dict[str, list[Seen]] = {}
    for s in seen:
        if s.cluster and s.state in WorkloadState.ACTIVE:
            by_worker.setdefault(s.cluster, []).append(s)
    if options.cluster:
        victim = options.cluster
    elif by_worker:
        victim = max(sorted(by_worker), key=lambda w: len(by_worker[w]))
    else:
        raise DrillError(f"none of the {options.jobs} drill jobs was placed within {options.timeout:g}s")
    affected = {s.uid: s.generation for s in by_worker.get(victim, [])}
    if not affected:
        raise DrillError(f"worker {victim} holds none of the drill's jobs; nothing to fail over")
    if plan.before_fault is not None:
        await plan.before_fault(victim)
    plan.sampler.start()
    fault = plan.fault_for(victim)
    started = await fault.inject()
    if not (plan.look_inside and options.mode == "partition"):
        plan.sampler.hide(victim)
    fenced_before = await plan.observer.fenced()
    detection: float | None = None
    replacement: float | None = None
    note = ""
    while time.monotonic() - started < options.lost_timeout * 3 + 30:
        if await plan.observer.health(victim) == HealthState.LOST:
            lost_at = plan.observer.lost_at(victim) or time.monotonic()
            detection = lost_at - started
            break
        await asyncio.sleep(0.05)
    not_running = 0
    if detection is None:
        note = f"{victim} was never declared Lost (mode {options.mode}); nothing failed over"
    else:
        lost_at = started + detection
        while time.monotonic() < deadline:
            moved = 0
            for s in await drill_workloads():
                gen = affected.get(s.uid)
                if (
                    gen is not None
                    and s.generation > gen
                    and s.cluster != victim
                    and s.state in (WorkloadState.ADMITTED, WorkloadState.RUNNING)
                ):
                    moved += 1
            bar(moved, len(affected), f"re-placed off {victim}", progress)
            if moved >= len(affected):
                replacement = time.monotonic() - lost_at
                break
            await asyncio.sleep(0.05)
        progress.write("\n")
        # Lost: an affected job not running anywhere (allowing its pods a moment to start after admission).
        settle = time.monotonic() + 30
        while True:
            not_running = len(set(affected) - set(plan.sampler.sample()))
            if not_running == 0 or time.monotonic() > settle:
                break
            await asyncio.sleep(0.1)
    # Duplicates are judged while the worker is failed; on its return its stale copies are fenced (deleted)
    # before it is trusted, and the time that takes is reported separately. At risk: affected jobs whose copy on
    # the victim still runs now that they run elsewhere (nothing stopped it: no fencing agent, or it was down).
    last = plan.sampler.sample()
    at_risk = sum(1 for uid in affected if victim in last.get(uid, set()) and len(last[uid]) > 1)
    await plan.sampler.stop()
    job_names = {s.uid: s.name for s in await drill_workloads()}
    healed = time.monotonic()
    await fault.heal()
    fence_seconds: float | None = None
    if detection is not None:
        end = time.monotonic() + plan.heal_wait
        while time.monotonic() < end and await plan.observer.health(victim) != HealthState.READY:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if await plan.observer.health(victim) == HealthState.READY:
            fence_seconds = time.monotonic() - healed
    fenced_after = await plan.observer.fenced()
    if plan.agent_down and detection is not None:
        note = (
            f"the fencing agent on {victim} was down: {at_risk} of its {len(affected)} copies still ran there after "
            "their workloads started elsewhere (at risk until the worker returns and they are deleted)"
        )
    elif options.mode == "partition" and plan.sampler.duplicates:
        if plan.fencing == "agent":
            note = "duplicates despite a fencing agent on the victim: see its log and its FencedByAgent Events"
        else:
            note = (
                "a partitioned worker keeps running its copies while they run again elsewhere: failover is "
                f"at-least-once there (fencing: none); run the fencing agent there (deploy/worker/agent/, "
                f"fencing: agent), or annotate jobs with {L.NO_FAILOVER}=true to fail them instead"
            )
    elif options.mode == "partition" and detection is not None and not plan.look_inside:
        note = "a partitioned worker cannot be looked into: only copies on workers that answer were compared"
    return {
        "mode": options.mode,
        "victim": victim,
        "jobs": options.jobs,
        "lost_timeout": options.lost_timeout,
        "detection_seconds": round(detection, 3) if detection is not None else None,
        "replacement_seconds": round(replacement, 3) if replacement is not None else None,
        "affected": len(affected) if detection is not None else 0,
        "duplicates": len(plan.sampler.duplicates),
        "overlap_seconds": round(sum(plan.sampler.overlap.values()), 2),
        "overlap_seconds_max": round(max(plan.sampler.overlap.values(), default=0.0), 2),
        "overlap_per_job": {
            job_names.get(uid, uid): round(seconds, 2) for uid, seconds in sorted(plan.sampler.overlap.items())
        },
        "fencing": plan.fencing,
        "agent_down": plan.agent_down,
        "at_risk": at_risk,
        "lost": not_running,
        "fenced": fenced_after - fenced_before if fenced_after is not None and fenced_before is not None else None,
        "fence_seconds": round(fence_seconds, 3) if fence_seconds is not None else None,
        "samples": plan.sampler.samples,
        "note": note,
    }


def _print_report(report: Obj, options: DrillOptions, out: TextIO) -> int:
    if options.json:
        json.dump(report, out, indent=2)
        out.write("\n")
    else:
        for key in REPORT_KEYS:
            print(f"{key:<20} {report.get(key)}", file=out)
        if report.get("note"):
            print(f"\n{report['note']}", file=out)
    if report.get("detection_seconds") is None or report.get("replacement_seconds") is None:
        # A drill passes only on what it saw: the worker declared Lost and every affected job running elsewhere.
        unseen = (
            "the worker was never declared Lost"
            if report.get("detection_seconds") is None
            else ("not every affected job was seen running elsewhere")
        )
        print(f"dispatcher drill: FAILED: {unseen} within the drill's time", file=out)
        return 1
    return 1 if report.get("duplicates") or report.get("lost") else 0


async def _submit_to(manager: ClusterClient, namespace: str, queue: str, names: list[str]) -> None:
    sem = asyncio.Semaphore(32)

    async def one(name: str) -> None:
        async with sem:
            await manager.create(JobAdapter.resource, namespace, drill_job(name, namespace=namespace, queue=queue))

    await asyncio.gather(*(one(n) for n in names))


async def run_drill(options: DrillOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """``dispatcher drill --sim``: simulated clusters and a dispatcher of this process."""
    from kubesim.topology import default_topology
    from kubesim.world import SimWorld, WorldOptions

    if options.mode not in MODES:
        print(f"dispatcher drill: --mode must be down, partition or flaky, got {options.mode!r}", file=err)
        return 2
    if options.fencing not in ("agent", "none"):
        print(f"dispatcher drill: --fencing must be agent or none, got {options.fencing!r}", file=err)
        return 2
    if options.agent_down and options.fencing != "agent":
        print("dispatcher drill: --agent-down needs --fencing agent (there is no agent to stop)", file=err)
        return 2
    topo = default_topology()
    # Many small pods per node so that a worker can hold thousands of drill jobs.
    nodes = [dataclasses.replace(g, pods=2000) for g in topo.cpu_worker.nodes]
    topo = dataclasses.replace(topo, cpu_worker=dataclasses.replace(topo.cpu_worker, nodes=nodes))
    world = SimWorld(WorldOptions(workers=options.workers, gpu_workers=0, default_run_seconds=3600.0), topo)
    await world.start()
    report: Obj = {}
    try:
        with tempfile.TemporaryDirectory(prefix="dispatcher-drill-") as tmp:
            directory = Path(tmp)
            fencing = options.fencing == "agent"
            await asyncio.to_thread(functools.partial(world.write_files, directory, fencing=fencing))
            loaded = load_config(directory / "clusters.yaml")
            lost_timeout = options.lost_timeout
            policy = Policy(
                admission_timeout=max(60.0, lost_timeout * 4),
                lost_timeout=lost_timeout,
                suspect_after=min(lost_timeout / 2, 10.0),
                finished_retention=3600.0,
                gc_interval=30.0,
                fencing=FencingPolicy(
                    lease_duration=options.fencing_lease or max(2.0, lost_timeout),
                    grace=options.fencing_grace if options.fencing_grace is not None else max(1.0, lost_timeout / 2),
                ),
            )
            config = dataclasses.replace(
                loaded, policy=policy, database_url=f"sqlite+aiosqlite:///{directory / 'dispatcher.sqlite'}"
            )
            agents: AgentGroup | None = None
            if fencing:
                refs = {
                    w.name: KubeconfigRef(path=str(directory / f"{w.name}.agent.kubeconfig")) for w in world.workers
                }
                agents = await AgentGroup.start(refs)
            engine = make_engine(config.database_url or "")
            await upgrade(engine)
            dispatcher = Dispatcher(config, Repo(engine), probe_interval=min(1.0, lost_timeout / 5))
            sampler = DuplicateSampler(world, config.origin)
            manager = await connect("drill", config.manager)

            async def agent_down(victim: str) -> None:
                """The victim's agent stops first, and the dispatcher sees it stopped (as it would in life)."""
                assert agents is not None
                await agents.stop_one(victim)
                deadline = time.monotonic() + 30
                # The heartbeat's staleness is judged by the dispatcher's own clock: nothing to wait on but time.
                while dispatcher.leases.agent_up(victim) is not False and time.monotonic() < deadline:  # noqa: ASYNC110
                    await asyncio.sleep(0.1)

            try:
                await dispatcher.start()
                plan = Plan(
                    observer=LocalObserver(dispatcher),
                    sampler=sampler,
                    fault_for=lambda victim: SimFault(world.cluster(victim), options.mode),
                    submit=lambda names: _submit_to(manager, "team-a", "user-queue", names),
                    prefix="drill-",
                    workers=[w.name for w in config.workers],
                    before_fault=agent_down if options.agent_down and agents is not None else None,
                    look_inside=True,
                    fencing=options.fencing,
                    agent_down=options.agent_down and agents is not None,
                )
                report = await _drill(plan, options, err)
            finally:
                await sampler.stop()
                await manager.close()
                await dispatcher.stop()
                await engine.dispose()
                if agents is not None:
                    await agents.stop()
    except DrillError as exc:
        print(f"dispatcher drill: {exc}", file=err)
        return 2
    finally:
        await world.stop()
    return _print_report(report, options, out)


def _sim_admin_beside(config_path: Path) -> str | None:
    """The fault admin endpoint of ``dispatcher sim up`` or ``rig up --real``, from the ``sim.json`` or ``rig.json``
    it writes beside ``clusters.yaml`` (the same API: ``POST /clusters/NAME/fault``)."""
    for state in ("sim.json", "rig.json"):
        try:
            admin = json.loads((config_path.parent / state).read_text()).get("admin")
        except (OSError, ValueError, AttributeError):
            continue
        if admin:
            return str(admin)
    return None


async def run_remote_drill(options: DrillOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """``dispatcher drill --config clusters.yaml --api URL --cluster NAME``: a dispatcher that is running."""
    try:
        return await _run_remote(options, out, err)
    except (DrillError, ApiError) as exc:
        print(f"dispatcher drill: {exc}", file=err)
        return 2


async def _run_remote(options: DrillOptions, out: TextIO, err: TextIO) -> int:
    if options.mode not in MODES:
        raise DrillError(f"--mode must be down, partition or flaky, got {options.mode!r}")
    if not options.config or not options.api or not options.cluster:
        raise DrillError("--config, --api and --cluster are all needed for a drill against a running dispatcher")
    config_path = Path(options.config)
    try:
        config: DispatcherConfig = await asyncio.to_thread(load_config, config_path)
    except ConfigError as exc:
        raise DrillError(f"--config {config_path}: {exc}") from None
    workers = [w.name for w in config.workers]
    if options.cluster not in workers:
        known = ", ".join(workers)
        raise DrillError(f"--cluster: no worker named {options.cluster!r} in {config_path} (workers: {known})")
    if len(workers) < 2:
        raise DrillError(f"{config_path} names one worker; a drill needs another one to fail over to")
    # The dispatcher must be there and must know the worker before anything is submitted.
    observer = ApiObserver(options.api, options.token, options.namespace)
    health = await observer.health(options.cluster)
    if health != HealthState.READY:
        raise DrillError(f"worker {options.cluster} is {health}, not Ready; a drill starts from a healthy worker")
    # Wait by the service's own lost timeout (a guess would end the drill before the failover it came to see).
    options = dataclasses.replace(options, lost_timeout=await observer.lost_timeout())
    assert options.api is not None and options.cluster is not None

    clients: dict[str, ClusterClient] = {}
    manager: ClusterClient | None = None
    sampler: KubeSampler | None = None
    try:
        manager = await connect("drill-manager", config.manager)
        # From inside each worker where the rig wrote such a kubeconfig (``<worker>.inside.kubeconfig`` beside
        # clusters.yaml, as `sim up` and `rig up --real` do): a partitioned victim is still looked into.
        inside = {w.name: config_path.parent / f"{w.name}.inside.kubeconfig" for w in config.workers}
        look_inside = all(p.is_file() for p in inside.values())
        for w in config.workers:
            ref = KubeconfigRef(path=str(inside[w.name])) if look_inside else w.kube
            clients[w.name] = await connect(f"drill-{w.name}", ref)
        sampler = KubeSampler(clients, config.origin)
        admin = options.sim_admin or (None if options.fault_command else _sim_admin_beside(config_path))
        victim_client = clients[options.cluster]

        def fault_for(victim: str) -> Fault:
            if options.fault_command:
                return CommandFault(options.fault_command, options.heal_command)
            if admin:
                return AdminFault(admin, victim, options.mode)
            return ManualFault(victim_client, victim, err, options.timeout)

        prefix = f"drill-{secrets.token_hex(3)}-"
        man = manager
        plan = Plan(
            observer=ApiObserver(options.api, options.token, options.namespace),
            sampler=sampler,
            fault_for=fault_for,
            submit=lambda names: _submit_to(man, options.namespace, options.queue, names),
            prefix=prefix,
            workers=workers,
            heal_wait=options.timeout if not (options.fault_command or admin) else 60.0,
            look_inside=look_inside,
            fencing=await observer.fencing(options.cluster),
        )
        try:
            report = await _drill(plan, options, err)
        finally:
            if not options.keep:
                await _delete_jobs(manager, options.namespace, prefix, options.jobs)
        report["prefix"] = prefix
        return _print_report(report, options, out)
    except KubeError as exc:
        raise DrillError(f"a cluster of {config_path} refused the drill: {exc}") from None
    finally:
        if sampler is not None:
            await sampler.close()
        for c in clients.values():
            await c.close()
        if manager is not None:
            await manager.close()


async def _delete_jobs(manager: ClusterClient, namespace: str, prefix: str, count: int) -> None:
    """Remove the drill's Jobs from the manager (the dispatcher then deletes their copies)."""
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with sem:
            with contextlib.suppress(KubeError):
                await manager.delete(JobAdapter.resource, namespace, f"{prefix}{i:05d}", propagation="Background")

    await asyncio.gather(*(one(i) for i in range(count)))
