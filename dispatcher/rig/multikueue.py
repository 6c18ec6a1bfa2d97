"""Real MultiKueue on the rig's manager: ``dispatcher rig up --real --manager-kueue FLAVOUR``.

The manager then runs the real Kueue manager too, configured as a MultiKueue manager (Kueue's ``multiKueue``
Configuration section), and is connected to the workers the way Kueue's MultiKueue setup guide does it
(site/content/en/docs/tasks/manage/setup_multikueue.md and its ``create-multikueue-kubeconfig.sh``):

* on each worker, the ServiceAccount ``kueue-system/multikueue-sa`` bound to the guide's ClusterRole (create,
  delete, get, list and watch of the job kinds and Workloads; get of their status; patch and update of
  ``workloads/status``), and a token for it (TokenRequest API);
* on the manager, one Secret per worker in ``kueue-system`` holding a kubeconfig with that token and the
  worker's own CA as ``certificate-authority-data`` (MultiKueue refuses CA file paths, ``tokenFile`` and
  ``insecure-skip-tls-verify``), addressed to the worker's *outside* path, so that a ``partition`` fault cuts
  MultiKueue off as it cuts the dispatcher;
* a MultiKueueCluster per worker, a MultiKueueConfig listing them, an AdmissionCheck ``multikueue`` with
  controllerName ``kueue.x-k8s.io/multikueue``, and ClusterQueues ``default``/``team-a``/``team-b`` (cohort
  ``org``, quota the sum of the workers' quotas of that name) that use it, with the LocalQueues ``user-queue``.

Three flavours, one setting apart (Kueue's ``multiKueue.dispatcherName``): ``all-at-once`` (Kueue's default
dispatcher: a copy on every worker, the first admission wins), ``incremental`` (Kueue's incremental dispatcher:
three more workers every five minutes, in name order) and ``external`` (this project's dispatcher nominates, with
``dispatcher run --mode kueue-external``). The admin endpoint switches flavours on a running rig (the manager's
Kueue restarts with the new Configuration), so that a benchmark compares them on the same clusters.
"""

from __future__ import annotations

import asyncio
import base64
import copy
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import yaml

from ..kube.client import KubeError, Resource
from ..quantity import format_quantity, parse_quantity
from .apply import Applier
from .process import ComponentError
from .webhooks import KUEUE_NAMESPACE

if TYPE_CHECKING:
    from .cluster import RealCluster

__all__ = [
    "ADMISSION_CHECK",
    "DEFAULT_EXTERNAL_DISPATCHER",
    "FLAVOURS",
    "MULTIKUEUE_ORIGIN",
    "connect_multikueue",
    "dispatcher_name",
    "manager_queues",
    "multikueue_config",
    "worker_identity",
]

Obj = dict[str, Any]

K = "kueue.x-k8s.io"
#: ``multiKueue.dispatcherName`` per flavour (Kueue's two built-in names, and the external one's default).
DEFAULT_EXTERNAL_DISPATCHER = "kueue-dispatcher.io/scored"
FLAVOURS = {
    "all-at-once": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    "incremental": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
    "external": DEFAULT_EXTERNAL_DISPATCHER,
}
#: The AdmissionCheck, MultiKueueConfig and the label value MultiKueue puts on its remote objects.
ADMISSION_CHECK = "multikueue"
MULTIKUEUE_CONFIG = "multikueue"
MULTIKUEUE_ORIGIN = "multikueue"
MULTIKUEUE_SA = "multikueue-sa"
#: Kueue's controllerName for MultiKueue admission checks.
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ADMISSION_CHECKS = Resource(K, "v1beta2", "admissionchecks", "AdmissionCheck", namespaced=False)
MULTIKUEUE_CLUSTERS = Resource(K, "v1beta2", "multikueueclusters", "MultiKueueCluster", namespaced=False)
CLUSTER_QUEUES = Resource(K, "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)

#: The job kinds the rig serves, as Kueue's guide grants them to MultiKueue on a worker: (group, plural).
_JOB_KINDS = (
    ("batch", "jobs"),
    ("jobset.x-k8s.io", "jobsets"),
    ("kubeflow.org", "pytorchjobs"),
    ("kubeflow.org", "tfjobs"),
    ("ray.io", "rayjobs"),
    ("ray.io", "rayclusters"),
)
_OBJECT_VERBS = ["create", "delete", "get", "list", "watch"]


def dispatcher_name(flavour: str, external_name: str = DEFAULT_EXTERNAL_DISPATCHER) -> str:
    """Kueue's ``multiKueue.dispatcherName`` for a flavour; ValueError names the flavours."""
    if flavour not in FLAVOURS:
        raise ValueError(f"MultiKueue flavour must be one of {', '.join(FLAVOURS)}, got {flavour!r}")
    return external_name if flavour == "external" else FLAVOURS[flavour]


def multikueue_config(flavour: str, *, worker_lost_timeout: float, external_name: str = "") -> Obj:
    """The ``multiKueue`` section of the manager's Kueue Configuration (config.kueue.x-k8s.io/v1beta2)."""
    return {
        "multiKueue": {
            "gcInterval": "1m",
            "origin": MULTIKUEUE_ORIGIN,
            "workerLostTimeout": f"{worker_lost_timeout:g}s",
            "dispatcherName": dispatcher_name(flavour, external_name or DEFAULT_EXTERNAL_DISPATCHER),
        }
    }


def worker_role() -> list[Obj]:
    """``multikueue-sa`` with the ClusterRole of Kueue's guide, for the kinds the rig serves."""
    rules: list[Obj] = []
    for group, plural in _JOB_KINDS:
        rules.append({"apiGroups": [group], "resources": [plural], "verbs": list(_OBJECT_VERBS)})
        rules.append({"apiGroups": [group], "resources": [f"{plural}/status"], "verbs": ["get"]})
    rules.append({"apiGroups": [""], "resources": ["pods"], "verbs": list(_OBJECT_VERBS)})
    rules.append({"apiGroups": [K], "resources": ["workloads"], "verbs": list(_OBJECT_VERBS)})
    rules.append({"apiGroups": [K], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]})
    name = f"{MULTIKUEUE_SA}-role"
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": MULTIKUEUE_SA, "namespace": KUEUE_NAMESPACE},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{MULTIKUEUE_SA}-crb"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": MULTIKUEUE_SA, "namespace": KUEUE_NAMESPACE}],
        },
    ]


async def worker_identity(worker: RealCluster) -> Obj:
    """MultiKueue's identity on one worker; returns the kubeconfig the manager's Secret holds (token and CA data,
    the worker's outside address)."""
    applier = Applier(worker.client)
    for obj in worker_role():
        await applier.create(obj)
    answer = await worker.client.request(
        "POST",
        SERVICE_ACCOUNTS.path(KUEUE_NAMESPACE, MULTIKUEUE_SA, "token"),
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 2592000}},
    )
    return worker.kubeconfig_doc(f"{worker.name}-{MULTIKUEUE_SA}", {"token": str(answer["status"]["token"])})


def _sum_quota(workers: Sequence[RealCluster]) -> dict[str, Obj]:
    """Per ClusterQueue name, its spec with every flavor's nominal quota summed over the workers that have it
    (the usual MultiKueue sizing: the manager admits what the workers together could)."""
    specs: dict[str, Obj] = {}
    totals: dict[tuple[str, str, str], Fraction] = {}
    for w in workers:
        objs = (w.topology.gpu_worker if w.plan.gpu else w.topology.cpu_worker).objects
        for obj in objs:
            if obj.get("kind") != "ClusterQueue":
                continue
            name = obj["metadata"]["name"]
            spec = specs.setdefault(name, copy.deepcopy(obj.get("spec") or {}))
            groups = spec.setdefault("resourceGroups", [])
            for group in (obj.get("spec") or {}).get("resourceGroups") or []:
                covered = group.get("coveredResources") or []
                if not any(g.get("coveredResources") == covered for g in groups):
                    groups.append(copy.deepcopy(group))
                for flavor in group.get("flavors") or []:
                    for res in flavor.get("resources") or []:
                        key = (name, str(flavor["name"]), str(res["name"]))
                        totals[key] = totals.get(key, Fraction(0)) + parse_quantity(res.get("nominalQuota", 0))
    for name, spec in specs.items():
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for res in flavor.get("resources") or []:
                    total = totals.get((name, str(flavor["name"]), str(res["name"])), Fraction(0))
                    res["nominalQuota"] = format_quantity(total, binary="memory" in str(res["name"]))
                    for limit in ("borrowingLimit", "lendingLimit"):
                        res.pop(limit, None)
    return specs


def manager_queues(workers: Sequence[RealCluster]) -> list[Obj]:
    """The manager's ResourceFlavors, ClusterQueues (using the MultiKueue AdmissionCheck) and LocalQueues, named as
    the workers' so that a Job's queue means the same on both sides."""
    flavors: dict[str, Obj] = {}
    local_queues: dict[tuple[str, str], Obj] = {}
    for w in workers:
        for obj in (w.topology.gpu_worker if w.plan.gpu else w.topology.cpu_worker).objects:
            if obj.get("kind") == "ResourceFlavor":
                flavors.setdefault(obj["metadata"]["name"], copy.deepcopy(obj))
            elif obj.get("kind") == "LocalQueue":
                meta = obj["metadata"]
                local_queues.setdefault((meta.get("namespace", "default"), meta["name"]), copy.deepcopy(obj))
    queues = []
    for name, spec in sorted(_sum_quota(workers).items()):
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": ADMISSION_CHECK}]}
        spec.pop("admissionChecks", None)
        queues.append({"apiVersion": f"{K}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
    return [*flavors.values(), *queues, *local_queues.values()]


def _secret(worker: str, kubeconfig: Obj) -> Obj:
    data = base64.b64encode(yaml.safe_dump(kubeconfig, sort_keys=False).encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{worker}-multikueue", "namespace": KUEUE_NAMESPACE},
        "type": "Opaque",
        "data": {"kubeconfig": data},
    }


def _active(obj: Obj | None) -> bool:
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Active" and c.get("status") == "True" for c in conds)


async def connect_multikueue(manager: RealCluster, workers: Sequence[RealCluster], *, timeout: float = 90.0) -> None:
    """Connect the manager's MultiKueue to every worker and create its queues; returns once the MultiKueueClusters,
    the AdmissionCheck and the ClusterQueues are Active (Kueue connected to every worker)."""
    applier = Applier(manager.client)
    identities = await asyncio.gather(*(worker_identity(w) for w in workers))
    objs: list[Obj] = []
    for w, kubeconfig in zip(workers, identities, strict=True):
        objs.append(_secret(w.name, kubeconfig))
        objs.append(
            {
                "apiVersion": f"{K}/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": w.name},
                "spec": {
                    "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": f"{w.name}-multikueue"}}
                },
            }
        )
    objs.append(
        {
            "apiVersion": f"{K}/v1beta2",
            "kind": "MultiKueueConfig",
            "metadata": {"name": MULTIKUEUE_CONFIG},
            "spec": {"clusters": [w.name for w in workers]},
        }
    )
    objs.append(
        {
            "apiVersion": f"{K}/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": ADMISSION_CHECK},
            "spec": {
                "controllerName": MULTIKUEUE_CONTROLLER,
                "parameters": {"apiGroup": K, "kind": "MultiKueueConfig", "name": MULTIKUEUE_CONFIG},
            },
        }
    )
    objs += manager_queues(workers)
    for obj in objs:
        for attempt in range(60):
            try:
                await applier.create(obj, wait=30)
                break
            except KubeError as exc:  # Kueue's webhooks may still be coming up
                if attempt == 59 or not (exc.code >= 500 or "webhook" in exc.message):
                    raise ComponentError(f"manager: {obj['kind']} {obj['metadata'].get('name')}: {exc}") from None
                await asyncio.sleep(0.5)
    await wait_multikueue_active(manager, [w.name for w in workers], timeout=timeout)


async def wait_multikueue_active(manager: RealCluster, workers: Sequence[str], *, timeout: float = 90.0) -> None:
    """Every MultiKueueCluster connected, the AdmissionCheck and every ClusterQueue Active."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        missing: list[str] = []
        for name in workers:
            if not _active(await manager.client.get(MULTIKUEUE_CLUSTERS, None, name)):
                missing.append(f"MultiKueueCluster {name}")
        if not _active(await manager.client.get(ADMISSION_CHECKS, None, ADMISSION_CHECK)):
            missing.append(f"AdmissionCheck {ADMISSION_CHECK}")
        for cq in (await manager.client.list(CLUSTER_QUEUES)).get("items") or []:
            if not _active(cq):
                missing.append(f"ClusterQueue {cq['metadata']['name']}")
        if not missing:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise ComponentError(f"manager: MultiKueue not active after {timeout:g} s: {', '.join(missing)}")
        await asyncio.sleep(0.3)
