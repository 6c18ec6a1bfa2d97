"""The commands that run the product: ``run`` (the dispatcher service), ``agent`` (a worker's fencing agent),
``db upgrade``."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubecommon import gcpolicy

from .common import UsageError, db_url, load_config, setup_logging

if TYPE_CHECKING:
    from ..leader import LeaderElectionConfig

__all__ = ["cmd_agent", "cmd_db_upgrade", "cmd_run"]


def cmd_agent(args: argparse.Namespace) -> int:
    import signal

    from ..agent import AgentOptions, serve
    from ..config import KubeconfigRef
    from ..logs import setup_logging

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


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from ..store.engine import DatabaseUrlError, make_engine, redact
    from ..store.migrate import current_revision, upgrade

    config_url = None
    if args.config:
        config_url = load_config(args.config).database_url
    url = db_url(args, config_url)

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


def cmd_run(args: argparse.Namespace) -> int:
    from ..api import ApiConfigError, start_api
    from ..kube.client import KubeError
    from ..service import Dispatcher
    from ..store.engine import DatabaseUrlError, make_engine, redact
    from ..store.migrate import upgrade
    from ..store.repo import REPLICA_APPLICATION_NAME, Repo

    config = load_config(args.config)
    if args.mode:
        config = dataclasses.replace(config, mode=args.mode)
    url = db_url(args, config.database_url)
    election = _election(args, url)
    if election is not None and config.mode != "standalone":
        raise UsageError("--leader-elect is for standalone mode; in kueue-external mode run one replica")
    # Every kubeconfig the configuration names, after what the command line alone decides.
    load_config(args.config, kubeconfigs=True)
    setup_logging(args.log_level)

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
            from ..native.run import NativeDispatcher

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
            # What the start built (informer caches, recovered workloads) lives as long as the process: out of the
            # cyclic GC's sight, and young objects collected in batches (kubecommon/gcpolicy.py).
            frozen = gcpolicy.settle()
            logging.getLogger("dispatcher").info(
                "started; %d objects moved out of the cyclic GC's sight, GC thresholds %s", frozen, gcpolicy.THRESHOLDS
            )
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

    from ..leader import LeaderElectionConfig, lease_namespace_default
    from ..store.engine import redact

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
