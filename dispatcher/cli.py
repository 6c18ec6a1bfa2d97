"""The ``dispatcher`` command: run, demo, explain, sim, db (and more as they land).

Errors a user can fix (bad configuration, unreachable database, bad arguments) are printed as one
clear line and exit with status 2; nothing here prints a traceback for them.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .config import DispatcherConfig

if TYPE_CHECKING:
    from .leader import LeaderElectionConfig

__all__ = ["main"]

DEFAULT_DB = "sqlite+aiosqlite:///dispatcher.sqlite"


class UsageError(Exception):
    """A problem the user can fix; printed without a traceback, exit status 2."""


def _db_url(args: argparse.Namespace, config_url: str | None = None) -> str:
    return str(getattr(args, "db_url", None) or os.environ.get("DISPATCHER_DB_URL") or config_url or DEFAULT_DB)


# -- sim ---------------------------------------------------------------------------------------------


def _cmd_sim_up(args: argparse.Namespace) -> int:
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
    inside = None if args.no_fencing_agents else _fencing_agents
    try:
        return asyncio.run(run_sim_up(options, Path(args.dir).resolve(), topology, inside=inside))
    except TopologyError as exc:
        # An object of the topology that the simulated API server refused (e.g. an invalid ClusterQueue).
        raise UsageError(f"--topology {args.topology or '(default)'}: {exc}") from None


async def _fencing_agents(world: Any, directory: Path) -> Callable[[], Any]:
    """A fencing agent inside each simulated worker (as deploy/worker/agent/ runs one in a real worker)."""
    from .agent import AgentGroup
    from .config import KubeconfigRef

    refs = {w.name: KubeconfigRef(path=str(directory / f"{w.name}.agent.kubeconfig")) for w in world.workers}
    group = await AgentGroup.start(refs)
    return group.stop


# -- rig (real components) ------------------------------------------------------------------------------


def _cmd_rig_up(args: argparse.Namespace) -> int:
    if not args.real:
        if args.manager_kueue:
            raise UsageError("--manager-kueue needs --real: the simulator has no MultiKueue")
        return _cmd_sim_up(args)
    from kubesim.topology import TopologyError, load_topology

    from .rig.up import RigError, run_rig_up
    from .rig.world import RealWorldOptions

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


def _cmd_rig_down(args: argparse.Namespace) -> int:
    from .rig.up import RigError, rig_down

    try:
        print(rig_down(Path(args.dir).resolve()))
    except RigError as exc:
        raise UsageError(str(exc)) from None
    return 0


# -- agent -------------------------------------------------------------------------------------------


def _cmd_agent(args: argparse.Namespace) -> int:
    import signal

    from .agent import AgentOptions, serve
    from .config import KubeconfigRef
    from .logs import setup_logging

    if args.in_cluster == bool(args.kubeconfig):
        raise UsageError("agent: give --kubeconfig (the worker's) or --in-cluster, one of them")
    if args.heartbeat_interval <= 0:
        raise UsageError(f"agent: --heartbeat-interval must be > 0, got {args.heartbeat_interval}")
    if args.kubeconfig and not Path(args.kubeconfig).is_file():
        raise UsageError(f"agent: --kubeconfig {args.kubeconfig}: no such file")
    setup_logging(args.log_level)
    kube = (
        KubeconfigRef(in_cluster=True) if args.in_cluster else KubeconfigRef(path=args.kubeconfig, context=args.context)
    )
    options = AgentOptions(
        namespace=args.namespace, heartbeat_interval=args.heartbeat_interval, origins=tuple(args.origin or ())
    )
    if args.identity:
        options = AgentOptions(
            namespace=options.namespace,
            identity=args.identity,
            heartbeat_interval=options.heartbeat_interval,
            origins=options.origins,
        )

    async def run() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await serve(kube, options, args.listen, stop)

    return asyncio.run(run())


# -- db ----------------------------------------------------------------------------------------------


def _cmd_db_upgrade(args: argparse.Namespace) -> int:
    from .store.engine import DatabaseUrlError, make_engine, redact
    from .store.migrate import current_revision, upgrade

    config_url = None
    if args.config:
        config_url = _load_config(args.config).database_url
    url = _db_url(args, config_url)

    async def run() -> str | None:
        engine = make_engine(url)
        try:
            await upgrade(engine)
            return await current_revision(engine)
        finally:
            await engine.dispose()

    try:
        revision = asyncio.run(run())
    except DatabaseUrlError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot reach the database {redact(url)}: {exc.strerror or exc}") from None
    print(f"database {redact(url)} is at revision {revision}")
    return 0


def _load_config(path: str, *, kubeconfigs: bool = False) -> DispatcherConfig:
    """The configuration; with ``kubeconfigs``, every kubeconfig it names is read too. All problems at once."""
    from .config import ConfigError, check_kubeconfigs, load_config

    try:
        config = load_config(path)
        if kubeconfigs:
            check_kubeconfigs(config, path)
        return config
    except ConfigError as exc:
        raise UsageError(f"configuration error: {exc}") from None


# -- run / demo / explain ----------------------------------------------------------------------------


def _setup_logging(level: str) -> None:
    from .logs import setup_logging

    setup_logging(level)


def _cmd_run(args: argparse.Namespace) -> int:
    from .api import ApiConfigError, start_api
    from .kube.client import KubeError
    from .service import Dispatcher
    from .store.engine import DatabaseUrlError, make_engine, redact
    from .store.migrate import upgrade
    from .store.repo import REPLICA_APPLICATION_NAME, Repo

    config = _load_config(args.config)
    if args.mode:
        config = dataclasses.replace(config, mode=args.mode)
    url = _db_url(args, config.database_url)
    election = _election(args, url)
    if election is not None and config.mode != "standalone":
        raise UsageError("--leader-elect is for standalone mode; in kueue-external mode run one replica")
    # Every kubeconfig the configuration names, after what the command line alone decides.
    _load_config(args.config, kubeconfigs=True)
    _setup_logging(args.log_level)

    async def run() -> int:
        import signal

        engine_args: dict[str, Any] = {}
        if election is not None:
            # A leader frozen inside a transaction holds the fencing row FOR SHARE. The server ends a session
            # left idle in a transaction after the renew deadline; one frozen in the middle of a statement
            # (between asyncpg's prepare and execute) stays "active", and the next leader ends it at its
            # takeover, finding it by its application_name (Repo.end_stale_writers).
            ms = str(int(election.renew_deadline * 1000))
            engine_args["connect_args"] = {
                "server_settings": {
                    "idle_in_transaction_session_timeout": ms,
                    "application_name": REPLICA_APPLICATION_NAME,
                }
            }
        engine = make_engine(url, **engine_args)
        try:
            await upgrade(engine)
        except OSError as exc:
            raise UsageError(f"cannot reach the database {redact(url)}: {exc.strerror or exc}") from None
        dispatcher: Any
        if config.mode == "kueue-external":
            from .native.run import NativeDispatcher

            dispatcher = NativeDispatcher(config, Repo(engine))
        else:
            dispatcher = Dispatcher(config, Repo(engine), election=election)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            # The API first, so that /healthz and /readyz answer while the dispatcher starts.
            api = await start_api(dispatcher, listen=args.api_listen, token_file=args.api_tokens)
        except ApiConfigError as exc:
            await engine.dispose()
            raise UsageError(str(exc)) from None
        try:
            await dispatcher.start()
            await stop.wait()
        except KubeError as exc:
            raise UsageError(str(exc)) from None
        finally:
            await api.cleanup()
            await dispatcher.stop()
            await engine.dispose()
        return 0

    try:
        return asyncio.run(run())
    except DatabaseUrlError as exc:
        raise UsageError(str(exc)) from None


def _election(args: argparse.Namespace, url: str) -> LeaderElectionConfig | None:
    """The leader-election settings of ``run``, checked; None without ``--leader-elect``."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from .leader import LeaderElectionConfig, lease_namespace_default
    from .store.engine import redact

    if not args.leader_elect:
        return None
    try:
        backend = make_url(url).get_backend_name()
    except ArgumentError:
        backend = ""
    if backend != "postgresql":
        raise UsageError(
            f"--leader-elect needs PostgreSQL, but the database URL is {redact(url)}: SQLite serves one replica "
            "only (its file is not shared between pods, and it has no row locks to fence a deposed leader). Give "
            "a postgresql+asyncpg:// URL (--db-url, $DISPATCHER_DB_URL or database.url), or run one replica "
            "without --leader-elect"
        )
    election = LeaderElectionConfig(
        namespace=args.leader_elect_resource_namespace or lease_namespace_default(),
        name=args.leader_elect_resource_name,
        identity=args.leader_elect_identity or os.environ.get("POD_NAME", ""),
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
    )
    problems = election.problems()
    if problems:
        raise UsageError("; ".join(problems))
    return election


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import DemoOptions, run_demo

    _setup_logging(args.log_level)
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    options = DemoOptions(jobs=args.jobs, json=args.json, timeout=args.timeout)
    return asyncio.run(run_demo(options))


def _cmd_explain(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from .explain import explain
    from .store.engine import DatabaseUrlError, make_engine, redact
    from .store.repo import Repo

    namespace, sep, name = args.workload.partition("/")
    if not sep or not namespace or not name:
        raise UsageError(f"expected NAMESPACE/NAME, got {args.workload!r}")
    if args.api:
        # Ask the running dispatcher (with a read token): no database file needed here.
        from urllib.parse import quote

        body = _remote(args, "GET", f"/api/v1/workloads/{quote(namespace)}/{quote(name)}/explain")
        print(str(dict(body).get("text", "")) if isinstance(body, dict) else body)
        return 0
    config_url = _load_config(args.config).database_url if args.config else None
    url = _db_url(args, config_url)

    async def run() -> str | None:
        engine = make_engine(url, read_only=True)
        try:
            return await explain(Repo(engine), namespace, name)
        finally:
            await engine.dispose()

    try:
        text = asyncio.run(run())
    except DatabaseUrlError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot reach the database {redact(url)}: {exc.strerror or exc}") from None
    except SQLAlchemyError as exc:
        first = str(exc).splitlines()[0][:200]
        raise UsageError(
            f"the database {redact(url)} cannot be read as the dispatcher's ({first}); is it the right one? "
            "(`dispatcher db upgrade --db-url ...` creates the schema)"
        ) from None
    if text is None:
        raise UsageError(f"no workload {namespace}/{name} in the database {redact(url)}")
    print(text)
    return 0


def _cmd_drill(args: argparse.Namespace) -> int:
    from .drill import DrillOptions, run_drill, run_remote_drill

    _setup_logging(args.log_level)
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

    from .ha_drill import HaDrillOptions, run_leader_kill_drill
    from .leader import LeaderElectionConfig
    from .store.engine import redact

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


def _remote(args: argparse.Namespace, method: str, path: str) -> object:
    from .remote import ApiError, call_api

    try:
        return asyncio.run(call_api(args.api, method, path, token=args.token))
    except ApiError as exc:
        raise UsageError(str(exc)) from None


def _print(args: argparse.Namespace, body: object, table: str) -> None:
    import json

    print(json.dumps(body, indent=2) if args.json else table)


def _watching(args: argparse.Namespace, once: Callable[[], None]) -> int:
    """Run ``once``; with ``--watch``, again every ``--interval`` seconds (the screen cleared between, on a
    terminal) until interrupted, as ``kubectl get -w`` / ``watch`` users expect."""
    import time as _time

    if not getattr(args, "watch", False):
        once()
        return 0
    try:
        while True:
            if sys.stdout.isatty() and not args.json:
                print("\033[H\033[2J", end="")
            once()
            sys.stdout.flush()
            _time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from .remote import clusters_table

    def once() -> None:
        body = _remote(args, "GET", "/api/v1/clusters")
        _print(args, body, clusters_table(body))

    return _watching(args, once)


def _cmd_workloads(args: argparse.Namespace) -> int:
    from urllib.parse import urlencode

    from .remote import workloads_table

    query = {
        k: v
        for k, v in (
            ("state", args.state),
            ("cluster", args.cluster),
            ("namespace", args.namespace),
            ("queue", args.queue),
            ("order", args.order),
            ("limit", str(args.limit)),
        )
        if v
    }

    def once() -> None:
        body = _remote(args, "GET", "/api/v1/workloads?" + urlencode(query))
        _print(args, body, workloads_table(body))

    return _watching(args, once)


def _cmd_control(args: argparse.Namespace) -> int:
    """stop / resume / cancel one workload through the API (admin token)."""
    namespace, _, name = args.workload.rpartition("/")
    namespace = namespace or args.namespace
    if not name or "/" in namespace:
        raise UsageError(f"{args.action}: name the workload as NAMESPACE/NAME or NAME -n NAMESPACE")
    body = _remote(args, "POST", f"/api/v1/workloads/{namespace}/{name}/{args.action}")
    answer = dict(body) if isinstance(body, dict) else {}
    _print(args, body, f"{answer.get('message', '')} (now {answer.get('state', '?')})")
    return 0


def _cmd_cluster(args: argparse.Namespace) -> int:
    if args.action == "list":
        return _cmd_status(args)
    if not args.name:
        raise UsageError(f"cluster {args.action}: name the worker cluster")
    path = f"/api/v1/clusters/{args.name}/{args.action}"
    if args.action == "drain" and args.running:
        path += "?running=true"
    body = _remote(args, "POST", path)
    _print(args, body, _cluster_line(args.action, args.name, body))
    return 0


def _cluster_line(action: str, name: str, body: object) -> str:
    """One line an operator reads: what happened to the worker, and how it stands now."""
    answer = dict(body) if isinstance(body, dict) else {}
    cluster = dict(answer.get("cluster") or {})
    health = cluster.get("health", "?")
    cordoned = "cordoned" if cluster.get("cordoned") else "not cordoned"
    line = f"{name}: {action} done; now {health}, {cordoned}"
    if action == "drain":
        line += f"; {answer.get('moved', 0)} workload(s) moved" + (
            " (running ones too)" if answer.get("running") else ""
        )
    if answer.get("message"):
        line = f"{name}: {answer['message']}"
    return line


# -- parser ------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dispatcher",
        description="Multi-cluster dispatcher for Kubernetes batch and AI workloads (Kueue workers, HAMi vGPUs).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("sim", help="simulated clusters for tests, demos and drills")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True)
    up = sim_sub.add_parser("up", help="start a manager and N workers; write kubeconfigs and clusters.yaml")
    up.add_argument("--workers", type=int, default=3, help="worker clusters (default 3)")
    up.add_argument("--gpu-workers", type=int, default=1, help="how many of the last workers have HAMi GPU nodes")
    up.add_argument("--dir", required=True, help="directory for kubeconfigs, clusters.yaml and the ready file")
    up.add_argument("--topology", help="YAML file replacing the default nodes and Kueue objects")
    up.add_argument("--run-seconds", type=float, default=2.0, help="default run time of a simulated pod")
    up.add_argument("--manager-kueue", action="store_true", help="also run the Kueue emulation on the manager")
    up.add_argument(
        "--no-fencing-agents",
        action="store_true",
        help="run no fencing agent in the workers (clusters.yaml then says fencing: none: at-least-once failover)",
    )
    up.set_defaults(func=_cmd_sim_up)

    rig = sub.add_parser("rig", help="clusters to run the dispatcher against: simulated, or real components (--real)")
    rig_sub = rig.add_subparsers(dest="rig_command", required=True)
    rup = rig_sub.add_parser(
        "up", help="start a manager and N workers; write kubeconfigs and clusters.yaml (as `sim up` does)"
    )
    rup.add_argument(
        "--real",
        action="store_true",
        help="real kube-apiserver, etcd, controller manager, scheduler, kwok, Kueue and JobSet built by rig/build.sh",
    )
    rup.add_argument("--workers", type=int, default=2, help="worker clusters (default 2)")
    rup.add_argument("--gpu-workers", type=int, default=0, help="how many of the last workers have GPU nodes")
    rup.add_argument("--dir", required=True, help="directory for kubeconfigs, clusters.yaml, state and logs")
    rup.add_argument("--topology", help="YAML file replacing the default nodes and Kueue objects")
    rup.add_argument("--run-seconds", type=float, default=2.0, help="default run time of a pod")
    rup.add_argument("--bin-dir", help="folder of the built components (default $DISPATCHER_RIG_BIN, else rig/.bin)")
    rup.add_argument(
        "--manager-kueue",
        choices=["all-at-once", "incremental", "external"],
        help="--real: the manager runs real Kueue with MultiKueue connected to the workers, with this dispatcher "
        "(external: this project's, `dispatcher run --mode kueue-external`)",
    )
    rup.add_argument(
        "--worker-lost-timeout",
        type=float,
        default=60.0,
        help="MultiKueue's workerLostTimeout and the clusters.yaml lostTimeout, s (default %(default)s)",
    )
    rup.add_argument(
        "--dispatcher-name",
        default="kueue-dispatcher.io/scored",
        help="--manager-kueue external: Kueue's multiKueue.dispatcherName (default %(default)s)",
    )
    rup.set_defaults(func=_cmd_rig_up, no_fencing_agents=False)
    rdown = rig_sub.add_parser("down", help="stop the rig of `rig up --real --dir D`; nothing is left running")
    rdown.add_argument("--dir", required=True)
    rdown.set_defaults(func=_cmd_rig_down)

    run = sub.add_parser("run", help="run the dispatcher service until SIGTERM")
    run.add_argument("--config", required=True, help="clusters.yaml")
    run.add_argument(
        "--db-url", help=f"SQLAlchemy URL (default: config database.url, $DISPATCHER_DB_URL, {DEFAULT_DB})"
    )
    run.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    run.add_argument("--api-listen", default="127.0.0.1:8080", help="HOST:PORT of the REST API, /metrics and /healthz")
    run.add_argument("--api-tokens", help="file of 'ROLE TOKEN' lines (ROLE read or admin); or $DISPATCHER_API_TOKENS")
    run.add_argument(
        "--mode",
        choices=["standalone", "kueue-external"],
        help="standalone (default; the config's mode key): the dispatcher mirrors and syncs; kueue-external: it is "
        "the external dispatcher of the manager's MultiKueue and only nominates workers",
    )
    ha = run.add_argument_group(
        "leader election",
        "several replicas on one PostgreSQL: the holder of a coordination.k8s.io/v1 Lease on the "
        "manager acts, the others stand by (warm informers, read-only API)",
    )
    ha.add_argument("--leader-elect", action="store_true", help="take part in leader election (PostgreSQL only)")
    ha.add_argument(
        "--leader-elect-resource-namespace",
        help="namespace of the Lease (default: $POD_NAMESPACE, the pod's namespace, else dispatcher-system)",
    )
    ha.add_argument("--leader-elect-resource-name", default="kueue-dispatcher-leader", help="name of the Lease")
    ha.add_argument(
        "--leader-elect-identity", help="this replica's holderIdentity (default: $POD_NAME, else HOSTNAME_UUID)"
    )
    ha.add_argument(
        "--leader-elect-lease-duration", type=float, default=15.0, help="seconds a standby waits (default %(default)s)"
    )
    ha.add_argument(
        "--leader-elect-renew-deadline",
        type=float,
        default=10.0,
        help="seconds the leader keeps acting without a renewal (default %(default)s)",
    )
    ha.add_argument(
        "--leader-elect-retry-period", type=float, default=2.0, help="seconds between attempts (default %(default)s)"
    )
    run.set_defaults(func=_cmd_run)

    demo = sub.add_parser("demo", help="simulated clusters + SQLite + the dispatcher, ~30 mixed Jobs, a summary")
    demo.add_argument("--json", action="store_true", help="print the summary as one JSON document")
    demo.add_argument("--jobs", type=int, default=30, help="how many Jobs to submit (default 30)")
    demo.add_argument("--timeout", type=float, default=170.0, help="give up after this many seconds")
    demo.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    demo.set_defaults(func=_cmd_demo)

    exp = sub.add_parser("explain", help="why a workload went where it went (or waits): every worker's score or reason")
    exp.add_argument("workload", help="NAMESPACE/NAME of the manager Job")
    exp.add_argument("--config", help="clusters.yaml (for its database.url)")
    exp.add_argument(
        "--db-url", help=f"SQLAlchemy URL (default: config database.url, $DISPATCHER_DB_URL, {DEFAULT_DB})"
    )
    exp.add_argument("--api", help="ask a running dispatcher's API instead of the database (e.g. http://HOST:8080)")
    exp.add_argument("--token", help="bearer token for --api (a read token; default: $DISPATCHER_API_TOKEN)")
    exp.set_defaults(func=_cmd_explain)

    drill = sub.add_parser("drill", help="lose a worker under load; report detection, re-placement, duplicates")
    drill.add_argument("--sim", action="store_true", help="on simulated clusters with a dispatcher of its own")
    drill.add_argument("--workers", type=int, default=3, help="--sim: simulated workers (default %(default)s)")
    drill.add_argument("--mode", choices=["down", "partition", "flaky", "leader-kill"], default="down")
    drill.add_argument("--jobs", type=int, default=100)
    drill.add_argument(
        "--lost-timeout",
        type=float,
        default=5.0,
        help="--sim: seconds without answer before Lost (a running dispatcher uses its own policy)",
    )
    drill.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for each phase")
    drill.add_argument("--json", action="store_true")
    drill.add_argument("--config", help="the running dispatcher's clusters.yaml (manager and worker kubeconfigs)")
    drill.add_argument("--api", help="the running dispatcher's API, e.g. http://127.0.0.1:8080")
    drill.add_argument("--token", help="API bearer token, read role is enough (default: $DISPATCHER_API_TOKEN)")
    drill.add_argument("--cluster", help="the worker to fail")
    drill.add_argument("--namespace", default="team-a", help="namespace of the drill's Jobs (default %(default)s)")
    drill.add_argument("--queue", default="user-queue", help="LocalQueue of the drill's Jobs (default %(default)s)")
    drill.add_argument("--sim-admin", help="admin URL of `dispatcher sim up` (default: from sim.json beside --config)")
    drill.add_argument("--fault-command", help="shell command that fails the worker, e.g. docker stop …")
    drill.add_argument("--heal-command", help="shell command that brings it back, e.g. docker start …")
    drill.add_argument("--keep", action="store_true", help="keep the drill's Jobs on the manager afterwards")
    drill.add_argument(
        "--fencing",
        choices=["agent", "none"],
        default="agent",
        help="--sim: a fencing agent in each worker (exactly once) or none (at-least-once); default %(default)s",
    )
    drill.add_argument("--agent-down", action="store_true", help="--sim: stop the victim's fencing agent first")
    drill.add_argument("--fencing-lease", type=float, help="--sim: fencing Lease duration, s (default: lost timeout)")
    drill.add_argument("--fencing-grace", type=float, help="--sim: fencing grace, s (default: half the lost timeout)")
    drill.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    drill.add_argument("--replicas", type=int, default=2, help="leader-kill: dispatcher replicas (default 2)")
    drill.add_argument("--db-url", help="leader-kill: PostgreSQL server URL (a fresh database is made beside it)")
    drill.add_argument("--lease-duration", type=float, default=15.0, help="leader-kill: Lease duration (s)")
    drill.add_argument("--renew-deadline", type=float, default=10.0, help="leader-kill: renew deadline (s)")
    drill.add_argument("--retry-period", type=float, default=2.0, help="leader-kill: retry period (s)")
    drill.set_defaults(func=_cmd_drill)

    def api_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--api", default="http://127.0.0.1:8080", help="the dispatcher's API (default %(default)s)")
        p.add_argument("--token", help="bearer token (default: $DISPATCHER_API_TOKEN)")
        p.add_argument("--json", action="store_true", help="print the API's JSON")

    def watch_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("-w", "--watch", action="store_true", help="refresh until interrupted")
        p.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes (default 2)")

    status = sub.add_parser("status", help="worker clusters of a running dispatcher: health, in-flight, latency")
    api_args(status)
    watch_args(status)
    status.set_defaults(func=_cmd_status)
    wls = sub.add_parser(
        "workloads", help="workloads of a running dispatcher (per worker: --cluster, per queue: --queue)"
    )
    api_args(wls)
    watch_args(wls)
    wls.add_argument("--state")
    wls.add_argument("--cluster", help="only those on this worker")
    wls.add_argument("-n", "--namespace")
    wls.add_argument("--queue", help="only those of this LocalQueue")
    wls.add_argument("--order", choices=["newest", "oldest"], default="newest", help="default: newest first")
    wls.add_argument("--limit", type=int, default=100)
    wls.set_defaults(func=_cmd_workloads)
    for action, what in (
        ("stop", "stop a workload (as kueuectl stop workload): its copy is deleted, it waits until resumed"),
        ("resume", "resume a stopped workload: it may be placed again"),
        ("cancel", "cancel a workload for good: its copy is deleted; the manager object stays, marked Cancelled"),
    ):
        ctl = sub.add_parser(action, help=what)
        api_args(ctl)
        ctl.add_argument("workload", help="NAMESPACE/NAME (or NAME with -n)")
        ctl.add_argument("-n", "--namespace", default="default")
        ctl.set_defaults(func=_cmd_control, action=action)
    cl = sub.add_parser("cluster", help="workers and operator controls: list, cordon, uncordon, drain")
    cl.add_argument("action", choices=["list", "cordon", "uncordon", "drain"])
    cl.add_argument("name", nargs="?", help="worker cluster name (not for list)")
    cl.add_argument("--running", action="store_true", help="drain: also move admitted and running workloads")
    api_args(cl)
    cl.set_defaults(func=_cmd_cluster)

    agent = sub.add_parser(
        "agent",
        help="the fencing agent of one worker: stops the dispatcher's copies there when its Lease is not renewed",
    )
    agent.add_argument("--kubeconfig", help="the worker cluster's kubeconfig (the agent runs inside that cluster)")
    agent.add_argument("--context", help="context of --kubeconfig (default: its current context)")
    agent.add_argument("--in-cluster", action="store_true", help="use the pod's ServiceAccount (deploy/worker/)")
    agent.add_argument(
        "--namespace", default="kueue-system", help="namespace of the fencing Leases (default %(default)s)"
    )
    agent.add_argument(
        "--origin", action="append", help="fence only this dispatcher's copies (repeatable; default all)"
    )
    agent.add_argument("--identity", help="holderIdentity of the agent's heartbeat (default: $POD_NAME, else hostname)")
    agent.add_argument("--heartbeat-interval", type=float, default=5.0, help="seconds (default %(default)s)")
    agent.add_argument("--listen", help="HOST:PORT for /healthz, /readyz and /metrics (default: none)")
    agent.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    agent.set_defaults(func=_cmd_agent)

    db = sub.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    upg = db_sub.add_parser("upgrade", help="apply the Alembic migrations")
    upg.add_argument(
        "--db-url", help=f"SQLAlchemy URL (default: config database.url, $DISPATCHER_DB_URL, {DEFAULT_DB})"
    )
    upg.add_argument("--config", help="clusters.yaml (for its database.url)")
    upg.set_defaults(func=_cmd_db_upgrade)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
        return result
    except UsageError as exc:
        print(f"dispatcher: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
