"""What every command shares: the one-line error a user can fix, the database URL, the configuration, logging."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ..config import DispatcherConfig

if TYPE_CHECKING:
    pass

__all__ = ["DEFAULT_DB", "UsageError", "db_url", "load_config", "setup_logging"]

DEFAULT_DB = "sqlite+aiosqlite:///dispatcher.sqlite"


class UsageError(Exception):
    """A problem the user can fix; printed without a traceback, exit status 2."""


def db_url(args: argparse.Namespace, config_url: str | None = None) -> str:
    return str(getattr(args, "db_url", None) or os.environ.get("DISPATCHER_DB_URL") or config_url or DEFAULT_DB)


def load_config(path: str, *, kubeconfigs: bool = False) -> DispatcherConfig:
    """The configuration; with ``kubeconfigs``, every kubeconfig it names is read too. All problems at once."""
    from ..config import ConfigError, load_config
    from ..kubeconfigs import check_kubeconfigs

    try:
        config = load_config(path)
        if kubeconfigs:
            check_kubeconfigs(config, path)
        return config
    except ConfigError as exc:
        raise UsageError(f"configuration error: {exc}") from None


def setup_logging(level: str) -> None:
    from ..logs import setup_logging

    setup_logging(level)
