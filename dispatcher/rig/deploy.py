"""The dispatcher's own least-privilege RBAC from ``deploy/``, applied on the rig so that the dispatcher runs there
with exactly the rights a production install grants it: a missing verb shows as a 403 on the real rig."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .apply import load_manifests

__all__ = ["deploy_dir", "dispatcher_rbac"]

Obj = dict[str, Any]


def deploy_dir() -> Path:
    """``deploy/`` of the source checkout (beside the package, or under the current directory)."""
    for candidate in (Path(__file__).resolve().parents[2] / "deploy", Path.cwd() / "deploy"):
        if (candidate / "worker" / "rbac.yaml").is_file():
            return candidate
    raise FileNotFoundError(
        "the real rig applies the dispatcher's RBAC from the project's deploy/ folder: run it from a checkout"
    )


def dispatcher_rbac(*, worker: bool) -> tuple[str, list[Obj]]:
    """The namespace of the dispatcher's ServiceAccount and the objects that create it with its roles."""
    d = deploy_dir()
    if worker:
        return "kueue-system", load_manifests(d / "worker" / "serviceaccount.yaml", d / "worker" / "rbac.yaml")
    return "dispatcher-system", load_manifests(d / "namespace.yaml", d / "serviceaccount.yaml", d / "rbac.yaml")
