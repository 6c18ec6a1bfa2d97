"""The ``dispatcher`` command: run, demo, explain, sim, db (and more as they land).

Errors a user can fix (bad configuration, unreachable database, bad arguments) are printed as one
clear line and exit with status 2; nothing here prints a traceback for them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .config import DispatcherConfig

__all__ = ["main"]

DEFAULT_DB = "sqlite+aiosqlite:///dispatcher.sqlite"


class UsageError(Exception):
    """A problem the user can fix; printed without a traceback, exit status 2."""


def _db_url(args: argparse.Namespace, config_url: str | None = None) -> str:
    return str(getattr(args, "db_url", None) or os.environ.get("DISPATCHER_DB_URL") or config_url or DEFAULT_DB)


# -- sim ---------------------------------------------------------------------------------------------


def _cmd_sim_up(args: argparse.Namespace) -> int:
    from .sim.topology import TopologyError, load_topology
    from .sim.up import run_sim_up
    from .sim.world import WorldOptions

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
    return asyncio.run(run_sim_up(options, Path(args.dir).resolve(), topology))


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


def _load_config(path: str) -> DispatcherConfig:
    from .config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        raise UsageError(f"configuration error: {exc}") from None


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
    up.set_defaults(func=_cmd_sim_up)

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
