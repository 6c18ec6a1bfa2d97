"""The ``dispatcher`` command line: every subcommand and its options."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .. import __version__

if TYPE_CHECKING:
    pass
from .common import DEFAULT_DB
from .remote import cmd_cluster, cmd_control, cmd_explain, cmd_status, cmd_workloads
from .rigs import cmd_demo, cmd_drill, cmd_rig_down, cmd_rig_up, cmd_sim_up
from .serve import cmd_agent, cmd_db_upgrade, cmd_run

__all__ = ["build_parser"]


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
    up.add_argument(
        "--processes",
        type=int,
        default=1,
        help="spread the clusters over this many processes (one core each at most; default 1)",
    )
    up.add_argument("--shard", help=argparse.SUPPRESS)  # i/N: one process of a --processes world
    up.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)  # exit when this process does
    up.set_defaults(func=cmd_sim_up)

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
    rup.set_defaults(func=cmd_rig_up, no_fencing_agents=False)
    rdown = rig_sub.add_parser("down", help="stop the rig of `rig up --real --dir D`; nothing is left running")
    rdown.add_argument("--dir", required=True)
    rdown.set_defaults(func=cmd_rig_down)

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
    run.set_defaults(func=cmd_run)

    demo = sub.add_parser("demo", help="simulated clusters + SQLite + the dispatcher, ~30 mixed Jobs, a summary")
    demo.add_argument("--json", action="store_true", help="print the summary as one JSON document")
    demo.add_argument("--jobs", type=int, default=30, help="how many Jobs to submit (default 30)")
    demo.add_argument("--timeout", type=float, default=170.0, help="give up after this many seconds")
    demo.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    demo.set_defaults(func=cmd_demo)

    exp = sub.add_parser("explain", help="why a workload went where it went (or waits): every worker's score or reason")
    exp.add_argument("workload", help="NAMESPACE/NAME of the manager Job")
    exp.add_argument("--config", help="clusters.yaml (for its database.url)")
    exp.add_argument(
        "--db-url", help=f"SQLAlchemy URL (default: config database.url, $DISPATCHER_DB_URL, {DEFAULT_DB})"
    )
    exp.add_argument("--api", help="ask a running dispatcher's API instead of the database (e.g. http://HOST:8080)")
    exp.add_argument("--token", help="bearer token for --api (a read token; default: $DISPATCHER_API_TOKEN)")
    exp.set_defaults(func=cmd_explain)

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
    drill.set_defaults(func=cmd_drill)

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
    status.set_defaults(func=cmd_status)
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
    wls.set_defaults(func=cmd_workloads)
    for action, what in (
        ("stop", "stop a workload (as kueuectl stop workload): its copy is deleted, it waits until resumed"),
        ("resume", "resume a stopped workload: it may be placed again"),
        ("cancel", "cancel a workload for good: its copy is deleted; the manager object stays, marked Cancelled"),
    ):
        ctl = sub.add_parser(action, help=what)
        api_args(ctl)
        ctl.add_argument("workload", help="NAMESPACE/NAME (or NAME with -n)")
        ctl.add_argument("-n", "--namespace", default="default")
        ctl.set_defaults(func=cmd_control, action=action)
    cl = sub.add_parser("cluster", help="workers and operator controls: list, cordon, uncordon, drain")
    cl.add_argument("action", choices=["list", "cordon", "uncordon", "drain"])
    cl.add_argument("name", nargs="?", help="worker cluster name (not for list)")
    cl.add_argument("--running", action="store_true", help="drain: also move admitted and running workloads")
    api_args(cl)
    cl.set_defaults(func=cmd_cluster)

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
    agent.set_defaults(func=cmd_agent)

    db = sub.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    upg = db_sub.add_parser("upgrade", help="apply the Alembic migrations")
    upg.add_argument(
        "--db-url", help=f"SQLAlchemy URL (default: config database.url, $DISPATCHER_DB_URL, {DEFAULT_DB})"
    )
    upg.add_argument("--config", help="clusters.yaml (for its database.url)")
    upg.set_defaults(func=cmd_db_upgrade)
    return parser
