"""Real Kueue and the JobSet controller on a rig worker: their configuration, CRDs and webhooks on loopback.

Both are controller-runtime managers that serve admission webhooks. In a cluster the API server reaches them
through a Service; on the rig there is no Service network, so their own webhook configurations (from the same
Go modules the binaries are built from) are rewritten to call ``https://127.0.0.1:PORT/<path>`` with the rig's
CA, and the CRD conversion webhooks of Kueue's multi-version kinds likewise. Defaulting and validation are then
Kueue's and JobSet's own.

Kueue keeps its internal certificate management on (with it off, v0.17 insists on certificates under
``/etc/kueue``): its rotator finds the Secret ``kueue-webhook-server-cert`` already holding a CA and a serving
certificate it accepts (valid for ``kueue-webhook-service.kueue-system.svc``, and for 127.0.0.1 so the API
server's calls verify), keeps them, and injects the same CA into the webhook configurations and CRDs.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import yaml

from .apply import load_manifests
from .pki import ClusterPki, write_private

__all__ = [
    "JOBSET_NAMESPACE",
    "KUEUE_CONFIG_KEY",
    "KUEUE_CONFIG_NAME",
    "KUEUE_FRAMEWORKS",
    "KUEUE_NAMESPACE",
    "crds_with_conversion",
    "jobset_config",
    "kueue_config",
    "kueue_secret",
    "webhook_configurations",
    "write_serving_files",
]

Obj = dict[str, Any]

KUEUE_NAMESPACE = "kueue-system"
KUEUE_CONFIG_NAME = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
KUEUE_SERVICE = "kueue-webhook-service"
KUEUE_SECRET = "kueue-webhook-server-cert"
JOBSET_NAMESPACE = "jobset-system"
#: Kueue's integrations for the job kinds the dispatcher mirrors (Kueue's own framework names).
KUEUE_FRAMEWORKS = (
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "ray.io/rayjob",
    "ray.io/raycluster",
)


def kueue_config(*, webhook_port: int, probe_port: int, cert_dir: Path, extra: Obj | None = None) -> Obj:
    """Kueue's Configuration for a rig worker; ``extra`` (e.g. resource transformations) is merged on top."""
    config: Obj = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": KUEUE_SERVICE,
            "webhookSecretName": KUEUE_SECRET,
        },
        "clientConnection": {"qps": 100, "burst": 200},
        # As Kueue's released Configuration (config/components/manager/controller_manager_config.yaml of v0.17.0)
        # sets them: five reconcilers for Jobs, Pods and Workloads (MultiKueue's workload controller among them).
        # Without it each controller runs controller-runtime's one, and the manager's MultiKueue became the
        # slowest step of every MultiKueue configuration on the rig (bench/RESULTS.md, 2026-11-28).
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 5,
                "LocalQueue.kueue.x-k8s.io": 1,
                "Cohort.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
    }
    for key, value in (extra or {}).items():
        if key in ("apiVersion", "kind"):
            continue
        config[key] = copy.deepcopy(value)
    return config


def jobset_config(*, webhook_port: int, probe_port: int, cert_dir: Path) -> Obj:
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
    }


def write_serving_files(
    pki: ClusterPki, stem: str, service: str, namespace: str, cert_dir: Path
) -> tuple[bytes, bytes]:
    """A serving certificate for a webhook server on 127.0.0.1 (and its in-cluster Service name), written as
    ``tls.crt``/``tls.key`` into ``cert_dir`` where controller-runtime's webhook server reads them."""
    pair = pki.serving(stem, service, ("127.0.0.1", "localhost", f"{service}.{namespace}.svc"))
    cert_dir.mkdir(parents=True, exist_ok=True)
    (cert_dir / "tls.crt").write_bytes(pair.cert_pem)
    write_private(cert_dir / "tls.key", pair.key_pem)
    return pair.cert_pem, pair.key_pem


def kueue_secret(pki: ClusterPki, cert: bytes, key: bytes) -> Obj:
    """The Secret Kueue's certificate rotator reads: our CA (with its key, so the rotator could renew) and cert."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": KUEUE_SECRET, "namespace": KUEUE_NAMESPACE},
        "type": "Opaque",
        "data": {"ca.crt": b64(pki.ca_pem), "ca.key": b64(pki.ca_key_pem), "tls.crt": b64(cert), "tls.key": b64(key)},
    }


def webhook_configurations(manifest: Path, *, prefix: str, port: int, ca_data: str) -> list[Obj]:
    """The project's webhook configurations with each Service reference turned into a loopback URL."""
    out = []
    for loaded in load_manifests(manifest):
        obj = copy.deepcopy(loaded)
        obj["metadata"]["name"] = f"{prefix}-{obj['metadata']['name']}"
        for hook in obj.get("webhooks") or []:
            service = (hook.get("clientConfig") or {}).get("service") or {}
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{service.get('path', '/')}", "caBundle": ca_data}
        out.append(obj)
    return out


def crds_with_conversion(crd_dir: Path, conversion_dir: Path | None, *, port: int, ca_data: str) -> list[Obj]:
    """The CRDs, with the conversion webhook Kueue's kustomization adds (when given) pointed at loopback."""
    conversions: dict[str, Obj] = {}
    if conversion_dir is not None:
        for patch in load_manifests(*sorted(conversion_dir.glob("*.yaml"))):
            conversions[patch["metadata"]["name"]] = patch["spec"]["conversion"]
    out = []
    for crd in load_manifests(*sorted(crd_dir.glob("*.yaml"))):
        name = crd["metadata"]["name"]
        if name in conversions:
            conversion = copy.deepcopy(conversions[name])
            hook = conversion.setdefault("webhook", {})
            path = ((hook.get("clientConfig") or {}).get("service") or {}).get("path", "/convert")
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_data}
            crd["spec"]["conversion"] = conversion
        out.append(crd)
    return out


def dump(config: Obj) -> str:
    return yaml.safe_dump(config, sort_keys=False)
