"""What a real worker runs besides Kubernetes itself: the Kueue manager, the JobSet controller, and the
dispatcher's fencing agent (``dispatcher agent``, with the least-privilege identity of ``deploy/worker/agent.yaml``).
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

import aiohttp

from ..kube.client import Resource
from .apply import Applier
from .deploy import agent_identity
from .pki import ClusterPki
from .webhooks import (
    JOBSET_NAMESPACE,
    KUEUE_CONFIG_KEY,
    KUEUE_CONFIG_NAME,
    KUEUE_NAMESPACE,
    dump,
    jobset_config,
    kueue_config,
    kueue_secret,
    webhook_configurations,
    write_serving_files,
)

if TYPE_CHECKING:
    from .cluster import RealCluster

__all__ = ["kueue_configuration", "reconfigure_kueue", "start_agent", "start_jobset", "start_kueue"]

Obj = dict[str, Any]
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
#: The agent's heartbeat on the rig: short, so that a test sees a stopped agent within seconds.
AGENT_HEARTBEAT = 1.0


def kueue_configuration(cluster: RealCluster) -> Obj:
    """A worker's Kueue Configuration (its topology's, e.g. HAMi's transformations), or the manager's (MultiKueue)."""
    if cluster.plan.worker:
        worker = cluster.topology.gpu_worker if cluster.plan.gpu else cluster.topology.cpu_worker
        extra = worker.kueue_config
    else:
        extra = cluster.plan.kueue_config
    return kueue_config(
        webhook_port=cluster.ports["kueue-webhook"],
        probe_port=cluster.ports["kueue-probe"],
        cert_dir=cluster.dir / "kueue-certs",
        extra=extra,
    )


async def reconfigure_kueue(cluster: RealCluster, extra: Obj) -> None:
    """Restart a running Kueue with ``extra`` merged into its Configuration (the file its process reads and the
    ConfigMap the dispatcher reads), e.g. another MultiKueue dispatcher on the manager."""
    config = kueue_config(
        webhook_port=cluster.ports["kueue-webhook"],
        probe_port=cluster.ports["kueue-probe"],
        cert_dir=cluster.dir / "kueue-certs",
        extra=extra,
    )
    await asyncio.to_thread((cluster.dir / "kueue-config.yaml").write_text, dump(config))
    await cluster.client.patch(
        CONFIGMAPS, KUEUE_NAMESPACE, KUEUE_CONFIG_NAME, {"data": {KUEUE_CONFIG_KEY: dump(config)}}
    )
    proc = cluster.procs["kueue"]
    await proc.stop()
    await proc.start()
    probe, webhook = cluster.ports["kueue-probe"], cluster.ports["kueue-webhook"]

    async def ready() -> bool:
        async with (
            aiohttp.ClientSession() as s,
            s.get(f"http://127.0.0.1:{probe}/readyz", timeout=aiohttp.ClientTimeout(total=2)) as r,
        ):
            if r.status != 200:
                return False
        async with asyncio.timeout(1.0):
            _, writer = await asyncio.open_connection("127.0.0.1", webhook)
        writer.close()
        return True

    await proc.wait_ready(ready, timeout=90)


async def start_kueue(cluster: RealCluster, applier: Applier) -> None:
    assert cluster.pki is not None
    webhook_ca = await asyncio.to_thread(
        ClusterPki,
        f"{cluster.name}-kueue",
        cluster.dir / "pki-kueue",
        ca_dns="kueue-ca",
        service_accounts=False,
        rsa_ca=True,
    )
    cert, key = write_serving_files(
        webhook_ca, "kueue-webhook", "kueue-webhook-service", KUEUE_NAMESPACE, cluster.dir / "kueue-certs"
    )
    config = kueue_configuration(cluster)
    path = cluster.dir / "kueue-config.yaml"
    await asyncio.to_thread(path.write_text, dump(config))
    # As a Kueue deployment mounts it: the dispatcher reads the same Configuration from this ConfigMap.
    await applier.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": KUEUE_CONFIG_NAME, "namespace": KUEUE_NAMESPACE},
            "data": {KUEUE_CONFIG_KEY: dump(config)},
        }
    )
    await applier.create(kueue_secret(webhook_ca, cert, key))
    # The CRDs' conversion webhooks were pointed at this port with the cluster CA; the rotator injects its own.
    for hook in webhook_configurations(
        cluster.binaries.manifests / "kueue" / "webhook" / "manifests.yaml",
        prefix="kueue",
        port=cluster.ports["kueue-webhook"],
        ca_data=webhook_ca.ca_data,
    ):
        await applier.create(hook)
    kubeconfig = cluster.component_kubeconfig("kueue", "kueue-controller-manager", ("system:masters",))
    await cluster.process(
        "kueue",
        [str(cluster.binaries.path("kueue")), f"--config={path}", "--feature-gates=VisibilityOnDemand=false"],
        env={"KUBECONFIG": str(kubeconfig)},
    ).start()


async def start_jobset(cluster: RealCluster) -> None:
    assert cluster.pki is not None
    write_serving_files(
        cluster.pki, "jobset-webhook", "jobset-webhook-service", JOBSET_NAMESPACE, cluster.dir / "jobset-certs"
    )
    config = jobset_config(
        webhook_port=cluster.ports["jobset-webhook"],
        probe_port=cluster.ports["jobset-probe"],
        cert_dir=cluster.dir / "jobset-certs",
    )
    path = cluster.dir / "jobset-config.yaml"
    await asyncio.to_thread(path.write_text, dump(config))
    applier = Applier(cluster.client)
    for hook in webhook_configurations(
        cluster.binaries.manifests / "jobset" / "webhook" / "manifests.yaml",
        prefix="jobset",
        port=cluster.ports["jobset-webhook"],
        ca_data=cluster.pki.ca_data,
    ):
        await applier.create(hook)
    kubeconfig = cluster.component_kubeconfig("jobset", "jobset-controller-manager", ("system:masters",))
    await cluster.process(
        "jobset", [str(cluster.binaries.path("jobset")), f"--config={path}"], env={"KUBECONFIG": str(kubeconfig)}
    ).start()


async def start_agent(cluster: RealCluster, applier: Applier) -> None:
    """``dispatcher agent`` inside the worker: a process of its own with its own ServiceAccount token (the RBAC of
    deploy/worker/agent.yaml) and the worker's direct address, which a partition does not cut."""
    token = await agent_identity(cluster.client, applier)
    path = cluster.agent_kubeconfig_path
    cluster.write_kubeconfig(path, cluster.kubeconfig_doc("kueue-dispatcher-agent", {"token": token}, inside=True))
    port = cluster.ports["agent"]
    proc = cluster.process(
        "fencing-agent",
        [
            sys.executable,
            "-m",
            "dispatcher",
            "agent",
            f"--kubeconfig={path}",
            f"--namespace={KUEUE_NAMESPACE}",
            f"--identity={cluster.name}-fencing-agent",
            f"--heartbeat-interval={AGENT_HEARTBEAT:g}",
            f"--listen=127.0.0.1:{port}",
        ],
    )
    await proc.start()

    async def ready() -> bool:
        async with (
            aiohttp.ClientSession() as s,
            s.get(f"http://127.0.0.1:{port}/readyz", timeout=aiohttp.ClientTimeout(total=2)) as r,
        ):
            return r.status == 200

    await proc.wait_ready(ready, timeout=60)
