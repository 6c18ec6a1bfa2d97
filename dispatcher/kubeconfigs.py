"""The kubeconfig files a configuration names, checked at start: every problem in one error, before any connection
is tried, and never a credential in it (only names and paths)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .config import ConfigError, DispatcherConfig, KubeconfigRef

__all__ = ["check_kubeconfigs"]


def _kubeconfig_problems(ref: KubeconfigRef, where: str) -> list[str]:
    """What is wrong with one kubeconfig file: missing, not YAML, no such context, a context without its cluster,
    server or user. Never shows a credential (only names and paths)."""
    if ref.path is None:
        return []
    path = Path(ref.path)
    head = f"{where}.kubeconfig {path}"
    try:
        loaded = yaml.safe_load(path.read_text())
    except OSError as exc:
        return [f"{head}: cannot read it: {exc.strerror}"]
    except yaml.YAMLError:
        return [f"{head}: not valid YAML"]
    if not isinstance(loaded, dict):
        return [f"{head}: not a kubeconfig (expected a mapping with clusters, users and contexts)"]

    def named(section: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for entry in loaded.get(section) or []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                out[entry["name"]] = entry.get(section[:-1]) or {}
        return out

    contexts, clusters, users = named("contexts"), named("clusters"), named("users")
    name = ref.context or loaded.get("current-context")
    if not name:
        return [f"{head}: names no context (set {where}.context, or current-context in the file)"]
    if name not in contexts:
        known = ", ".join(sorted(contexts)) or "none"
        return [f"{head}: context {name!r} not found (contexts: {known})"]
    context = contexts[name] if isinstance(contexts[name], dict) else {}
    problems = []
    cluster = context.get("cluster")
    if cluster not in clusters:
        problems.append(f"{head}: context {name!r} names cluster {cluster!r}, which the file does not define")
    elif not (clusters[cluster] or {}).get("server"):
        problems.append(f"{head}: cluster {cluster!r} has no server")
    user = context.get("user")
    if user is not None and user not in users:
        problems.append(f"{head}: context {name!r} names user {user!r}, which the file does not define")
    return problems


def check_kubeconfigs(config: DispatcherConfig, source: str | Path | None = None) -> None:
    """Read every kubeconfig file the configuration names and raise one :class:`ConfigError` listing every problem
    (at start, before any connection is tried). ``source``: the configuration file, named in each message."""
    prefix = f"{source}: " if source else ""
    problems = _kubeconfig_problems(config.manager, "manager")
    for i, w in enumerate(config.workers):
        problems += _kubeconfig_problems(w.kube, f"workers[{i}]")
    if problems:
        raise ConfigError([prefix + p for p in problems])
