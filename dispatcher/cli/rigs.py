"""The commands that start clusters: ``sim up``, ``rig up|down``, ``demo``, ``drill``."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass
from .common import UsageError, setup_logging

__all__ = ["cmd_demo", "cmd_drill", "cmd_rig_down", "cmd_rig_up", "cmd_sim_up"]


def cmd_sim_up(args: argparse.Namespace) -> int:
    from kubesim.shards import run_sharded, shard_numbers
    from kubesim.topology import TopologyError, load_topology
    from kubesim.up import run_sim_up
    from kubesim.world import WorldOptions

    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if args.gpu_workers < 0 or args.gpu_workers > args.workers:
        raise UsageError(f"--gpu-workers must be between 0 and --workers ({args.workers}), got {args.gpu_workers}")
    topology = None
    if args.topology:
        try:
            topology = load_topology(Path(args.topology))
        except (OSError, TopologyError) as exc:
            raise UsageError(f"--topology {args.topology}: {exc}") from None
    options = WorldOptions(
        workers=args.workers,
        gpu_workers=args.gpu_workers,
        default_run_seconds=args.run_seconds,
        manager_kueue=args.manager_kueue,
    )
    directory = Path(args.dir).resolve()
    processes = getattr(args, "processes", 1)  # `rig up` without --real comes here without the option
    if processes < 1 or processes > args.workers:
        raise UsageError(f"--processes must be between 1 and --workers ({args.workers}), got {processes}")
    shard = getattr(args, "shard", None)
    parent_pid = getattr(args, "parent_pid", None)
    if shard:
        index, _, count = shard.partition("/")
        options.worker_numbers = shard_numbers(args.workers, int(index), int(count))
        options.with_manager = int(index) == 0
    elif processes > 1:
        argv = ["--workers", str(args.workers), "--gpu-workers", str(args.gpu_workers)]
        argv += ["--run-seconds", str(args.run_seconds)]
        argv += ["--topology", str(Path(args.topology).resolve())] if args.topology else []
        argv += ["--manager-kueue"] if args.manager_kueue else []
        argv += ["--no-fencing-agents"] if args.no_fencing_agents else []
        fencing = not args.no_fencing_agents
        return asyncio.run(run_sharded(options, directory, processes, argv, fencing=fencing, parent_pid=parent_pid))
    inside = None if args.no_fencing_agents else _fencing_agents
    try:
        return asyncio.run(run_sim_up(options, directory, topology, inside=inside, parent_pid=parent_pid))
    except TopologyError as exc:
        # An object of the topology that the simulated API server refused (e.g. an invalid ClusterQueue).
        raise UsageError(f"--topology {args.topology or '(default)'}: {exc}") from None


async def _fencing_agents(world: Any, directory: Path) -> Callable[[], Any]:
    """A fencing agent inside each simulated worker (as deploy/worker/agent/ runs one in a real worker)."""
    from ..agent import AgentGroup
    from ..config import KubeconfigRef

    refs = {w.name: KubeconfigRef(path=str(directory / f"{w.name}.agent.kubeconfig")) for w in world.workers}
    group = await AgentGroup.start(refs)
    return group.stop


def cmd_rig_up(args: argparse.Namespace) -> int:
    if not args.real:
        if args.manager_kueue:
            raise UsageError("--manager-kueue needs --real: the simulator has no MultiKueue")
        return cmd_sim_up(args)
    from kubesim.topology import TopologyError, load_topology

    from ..rig.up import RigError, run_rig_up
    from ..rig.world import RealWorldOptions

    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if args.gpu_workers < 0 or args.gpu_workers > args.workers:
        raise UsageError(f"--gpu-workers must be between 0 and --workers ({args.workers}), got {args.gpu_workers}")
    try:
        topology = load_topology(Path(args.topology)) if args.topology else None
    except (OSError, TopologyError) as exc:
        raise UsageError(f"--topology {args.topology}: {exc}") from None
    if args.worker_lost_timeout <= 0:
        raise UsageError(f"--worker-lost-timeout must be positive, got {args.worker_lost_timeout:g}")
    options = RealWorldOptions(
        workers=args.workers,
        gpu_workers=args.gpu_workers,
        run_seconds=args.run_seconds,
        manager_kueue=args.manager_kueue or "",
        worker_lost_timeout=args.worker_lost_timeout,
        dispatcher_name=args.dispatcher_name,
    )
    try:
        return asyncio.run(run_rig_up(options, Path(args.dir).resolve(), bin_dir=args.bin_dir, topology=topology))
    except RigError as exc:
        raise UsageError(str(exc)) from None


def cmd_rig_down(args: argparse.Namespace) -> int:
    from ..rig.up import RigError, rig_down

    try:
        print(rig_down(Path(args.dir).resolve()))
    except RigError as exc:
        raise UsageError(str(exc)) from None
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import DemoOptions, run_demo

    setup_logging(args.log_level)
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    options = DemoOptions(jobs=args.jobs, json=args.json, timeout=args.timeout)
    return asyncio.run(run_demo(options))


def cmd_drill(args: argparse.Namespace) -> int:
    from ..drill import DrillOptions, run_drill, run_remote_drill

    setup_logging(args.log_level)
    given = (("--config", args.config), ("--api", args.api), ("--cluster", args.cluster))
    remote = [opt for opt, value in given if value]
    if args.sim == bool(remote):
        raise UsageError(
            "choose one: --sim (simulated clusters and a dispatcher of the drill's own) or "
            "--config clusters.yaml --api URL --cluster NAME (a running dispatcher)"
        )
    if args.mode == "leader-kill":
        if remote:
            raise UsageError("--mode leader-kill runs its own replicas on simulated clusters: use it with --sim")
        return _leader_kill_drill(args)
    if remote and len(remote) < 3:
        missing = {"--config", "--api", "--cluster"} - set(remote)
        raise UsageError(f"a drill against a running dispatcher also needs {', '.join(sorted(missing))}")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {args.jobs}")
    if args.sim and args.workers < 2:
        raise UsageError(f"--workers must be >= 2 (one to lose, one to fail over to), got {args.workers}")
    if args.lost_timeout <= 0:
        raise UsageError(f"--lost-timeout must be > 0, got {args.lost_timeout}")
    if args.heal_command and not args.fault_command:
        raise UsageError("--heal-command needs --fault-command")
    options = DrillOptions(
        workers=args.workers,
        mode=args.mode,
        jobs=args.jobs,
        lost_timeout=args.lost_timeout,
        json=args.json,
        timeout=args.timeout,
        config=args.config,
        api=args.api,
        token=args.token or os.environ.get("DISPATCHER_API_TOKEN"),
        cluster=args.cluster,
        namespace=args.namespace,
        queue=args.queue,
        sim_admin=args.sim_admin,
        fault_command=args.fault_command,
        heal_command=args.heal_command,
        keep=args.keep,
        fencing=args.fencing,
        fencing_lease=args.fencing_lease,
        fencing_grace=args.fencing_grace,
        agent_down=args.agent_down,
    )
    if remote and (args.agent_down or args.fencing_lease or args.fencing_grace is not None):
        raise UsageError(
            "--agent-down, --fencing-lease and --fencing-grace are for --sim (a running dispatcher has its own)"
        )
    if args.agent_down and args.fencing != "agent":
        raise UsageError("--agent-down needs --fencing agent (there is no agent to stop)")
    return asyncio.run(run_remote_drill(options) if remote else run_drill(options))


def _leader_kill_drill(args: argparse.Namespace) -> int:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from ..ha_drill import HaDrillOptions, run_leader_kill_drill
    from ..leader import LeaderElectionConfig
    from ..store.engine import redact

    url = args.db_url or os.environ.get("DISPATCHER_DB_URL") or ""
    try:
        backend = make_url(url).get_backend_name() if url else ""
    except ArgumentError:
        backend = ""
    if backend != "postgresql":
        shown = redact(url) if url else "(none given)"
        raise UsageError(
            f"--mode leader-kill runs replicas on PostgreSQL: --db-url must be a postgresql+asyncpg:// URL, got {shown}"
        )
    if args.replicas < 2:
        raise UsageError(f"--replicas must be at least 2 (one to kill, one to take over), got {args.replicas}")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    timings = LeaderElectionConfig(
        lease_duration=args.lease_duration, renew_deadline=args.renew_deadline, retry_period=args.retry_period
    )
    problems = [p.replace("--leader-elect-", "--") for p in timings.problems()]
    if problems:
        raise UsageError("; ".join(problems))
    options = HaDrillOptions(
        db_url=url,
        replicas=args.replicas,
        jobs=args.jobs,
        workers=args.workers,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        json=args.json,
    )
    return asyncio.run(run_leader_kill_drill(options))
