"""The commands that talk to a running dispatcher (or its database): ``explain``, ``status``, ``workloads``,
``cluster``, ``stop|resume|cancel``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass
from .common import UsageError, db_url, load_config

__all__ = ["cmd_cluster", "cmd_control", "cmd_explain", "cmd_status", "cmd_workloads"]


def cmd_explain(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from ..explain import explain
    from ..store.engine import DatabaseUrlError, make_engine, redact
    from ..store.repo import Repo

    namespace, sep, name = args.workload.partition("/")
    if not sep or not namespace or not name:
        raise UsageError(f"expected NAMESPACE/NAME, got {args.workload!r}")
    if args.api:
        # Ask the running dispatcher (with a read token): no database file needed here.
        from urllib.parse import quote

        body = _remote(args, "GET", f"/api/v1/workloads/{quote(namespace)}/{quote(name)}/explain")
        print(str(dict(body).get("text", "")) if isinstance(body, dict) else body)
        return 0
    config_url = load_config(args.config).database_url if args.config else None
    url = db_url(args, config_url)

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


def _remote(args: argparse.Namespace, method: str, path: str) -> object:
    from ..remote import ApiError, call_api

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


def cmd_status(args: argparse.Namespace) -> int:
    from ..remote import clusters_table

    def once() -> None:
        body = _remote(args, "GET", "/api/v1/clusters")
        _print(args, body, clusters_table(body))

    return _watching(args, once)


def cmd_workloads(args: argparse.Namespace) -> int:
    from urllib.parse import urlencode

    from ..remote import workloads_table

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


def cmd_control(args: argparse.Namespace) -> int:
    """stop / resume / cancel one workload through the API (admin token)."""
    namespace, _, name = args.workload.rpartition("/")
    namespace = namespace or args.namespace
    if not name or "/" in namespace:
        raise UsageError(f"{args.action}: name the workload as NAMESPACE/NAME or NAME -n NAMESPACE")
    body = _remote(args, "POST", f"/api/v1/workloads/{namespace}/{name}/{args.action}")
    answer = dict(body) if isinstance(body, dict) else {}
    _print(args, body, f"{answer.get('message', '')} (now {answer.get('state', '?')})")
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    if args.action == "list":
        return cmd_status(args)
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
