"""The dispatcher's own least-privilege RBAC from ``deploy/``, applied on the rig so that the dispatcher runs there
with exactly the rights a production install grants it: a missing verb shows as a 403 on the real rig."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..kube.client import ClusterClient, Resource
from .apply import Applier, load_manifests

__all__ = ["agent_identity", "deploy_dir", "dispatcher_rbac"]

Obj = dict[str, Any]
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")


def deploy_dir() -> Path:
    """``deploy/`` of the source checkout (beside the package, or under the current directory)."""
    for candidate in (Path(__file__).resolve().parents[2] / "deploy", Path.cwd() / "deploy"):
        if (candidate / "worker" / "rbac.yaml").is_file():
            return candidate
    raise FileNotFoundError(
        "the real rig applies the dispatcher's RBAC from the project's deploy/ folder: run it from a checkout"
    )


def dispatcher_rbac(*, worker: bool, native: bool = False) -> tuple[str, list[Obj]]:
    """The namespace of the dispatcher's ServiceAccount and the objects that create it with its roles; ``native``:
    with the roles of Kueue-native mode too (deploy/native/, for a manager that runs Kueue with MultiKueue)."""
    d = deploy_dir()
    if worker:
        return "kueue-system", load_manifests(d / "worker" / "serviceaccount.yaml", d / "worker" / "rbac.yaml")
    extra = [d / "native" / "rbac.yaml"] if native else []
    return "dispatcher-system", load_manifests(d / "namespace.yaml", d / "serviceaccount.yaml", d / "rbac.yaml", *extra)


def agent_rbac() -> list[Obj]:
    """The fencing agent's ServiceAccount and roles (deploy/worker/agent/), without its Deployment: the rig runs
    ``dispatcher agent`` as a process of its own with that identity."""
    return [o for o in load_manifests(deploy_dir() / "worker" / "agent" / "agent.yaml") if o["kind"] != "Deployment"]


async def agent_identity(client: ClusterClient, applier: Applier) -> str:
    """Apply the agent's RBAC and return a token of its ServiceAccount (TokenRequest API)."""
    objs = agent_rbac()
    for obj in objs:
        await applier.create(obj)
    [sa] = [o for o in objs if o["kind"] == "ServiceAccount"]
    meta = sa["metadata"]
    answer = await client.request(
        "POST",
        SERVICE_ACCOUNTS.path(meta["namespace"], meta["name"], "token"),
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 2592000}},
    )
    return str(answer["status"]["token"])
