"""Least privilege: the RBAC in deploy/ grants exactly what the dispatcher's code uses, nothing more.

``NEEDS`` below is the table: per cluster (manager or worker), API group, resource and verbs, the call in the
code that needs it. The tests prove, in four ways:

1. every entry's code reference is really in that file (the table cannot silently go stale);
2. what deploy/rbac.yaml and deploy/worker/rbac.yaml grant (as ``kubectl kustomize`` renders them) equals the
   table, tuple for tuple: no verb missing, none extra, no wildcard, every role bound to the dispatcher's
   ServiceAccount;
3. every Kubernetes resource and API path the code names (outside the simulator and the demo/drill tools)
   has an entry in the table;
4. the dispatcher, run on the simulated clusters through a placement in each status mode, a clean-up after
   the retention, a name clash, a worker reached through a secretRef and a HAMi worker, makes only calls that
   an RBAC authorizer evaluating the rendered roles allows (resourceNames and list/watch field selectors
   included), and uses every granted verb except the entries that say why the run cannot reach them.
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploytools import REPO, kustomize

from dispatcher import DEFAULT_CONTROLLER_NAME
from dispatcher.config import KubeconfigRef, Policy, load_config
from dispatcher.kube.client import ClusterClient, Resource, connect
from dispatcher.service import Dispatcher
from dispatcher.store.engine import make_engine
from dispatcher.store.migrate import upgrade
from dispatcher.store.models import WorkloadState
from dispatcher.store.repo import Repo
from kubesim.world import SimWorld, WorldOptions

Obj = dict[str, Any]
MANAGER, WORKER = "manager", "worker"
#: Kueue-native mode's roles on the manager (deploy/native/, applied after deploy/).
NATIVE = "native"
#: Where the RBAC of each side is, as applied (kubectl apply -k).
SOURCES = {MANAGER: "deploy", WORKER: "deploy/worker", NATIVE: "deploy/native"}
DISPATCHER_NS = "dispatcher-system"  # deploy/namespace.yaml
KUEUE_NS = "kueue-system"


@dataclass(frozen=True)
class Need:
    """What one cluster must allow the dispatcher, and the code that calls it."""

    cluster: str
    group: str | None  # None: a non-resource URL
    resource: str  # plural, plural/subresource, or the URL
    verbs: tuple[str, ...]
    code: str  # "FILE: SNIPPET", SNIPPET being the call; "" for a grant ahead of its code (see audit)
    namespace: str | None = None  # a Role in that namespace; None: a ClusterRole
    names: tuple[str, ...] = ()  # resourceNames
    audit: str = ""  # why the simulator run below does not exercise it; "" when it does


K = "kueue.x-k8s.io"
#: The job kinds besides batch/v1 Job (dispatcher/adapters/): (group, plural).
CRD_KINDS = (
    ("jobset.x-k8s.io", "jobsets"),
    ("kubeflow.org", "pytorchjobs"),
    ("kubeflow.org", "tfjobs"),
    ("ray.io", "rayjobs"),
    ("ray.io", "rayclusters"),
)
ONLY_JOBS = "the audit run submits Jobs only (tests/service/test_kinds.py runs every kind end to end)"
FENCING_AUDIT = (
    "the audit run declares no worker with fencing: agent (tests/service/test_fencing.py renews on the real rig's RBAC)"
)
PRIORITY_AUDIT = "the audit run changes no priority (tests/service/test_priority.py does, on the real rig's RBAC)"
NATIVE_AUDIT = (
    "kueue-external mode needs real MultiKueue, which the simulator has not: tests/native/test_on_real_multikueue.py "
    "runs it on the real rig with deploy/native/'s RBAC"
)
NEEDS: tuple[Need, ...] = (
    # -- manager ----------------------------------------------------------------------------------------------
    # The intake informer on manager Jobs labelled with a queue name, in every namespace.
    Need(MANAGER, "batch", "jobs", ("list", "watch"), "dispatcher/intake.py: label_selector=L.QUEUE_NAME,"),
    # Annotations on the manager Job; the unsuspend of a managedBy Job at remote admission (merge patches).
    Need(MANAGER, "batch", "jobs", ("patch",),
         'dispatcher/status.py: {"metadata": {"annotations": annotations, "labels": labels}}'),
    # The remote Job's status written to a managedBy Job's /status.
    Need(MANAGER, "batch", "jobs/status", ("patch",),
         'dispatcher/status.py: {"status": patch}, subresource="status")'),
    # The same for the other job kinds: their informers run (list, watch); the writes only with such objects.
    *(
        need
        for g, plural in CRD_KINDS
        for need in (
            Need(MANAGER, g, plural, ("list", "watch"), "dispatcher/intake.py: label_selector=L.QUEUE_NAME,"),
            Need(MANAGER, g, plural, ("patch",),
                 'dispatcher/status.py: {"metadata": {"annotations": annotations, "labels": labels}}',
                 audit=ONLY_JOBS),
            Need(MANAGER, g, f"{plural}/status", ("patch",),
                 'dispatcher/status.py: {"status": patch}, subresource="status")', audit=ONLY_JOBS),
        )
    ),
    # Events about manager Jobs, in each Job's namespace (repeats are counted in memory, never updated).
    Need(MANAGER, "", "events", ("create",), "dispatcher/events.py: await self.client.create(EVENTS,"),
    # WorkloadPriorityClass values for kueue.x-k8s.io/priority-class.
    Need(MANAGER, K, "workloadpriorityclasses", ("list", "watch"),
         "dispatcher/intake.py: Informer(self.manager, PRIORITY_CLASSES,"),
    # Worker kubeconfigs given by secretRef, read once at start, by name.
    Need(MANAGER, "", "secrets", ("get",),
         "dispatcher/kube/client.py: await manager.get(secrets, ref.secret_namespace,",
         namespace=DISPATCHER_NS, names=("worker-1-kubeconfig", "worker-2-kubeconfig")),
    # Leader election between replicas (--leader-elect): the Lease is created once, then read and renewed by name.
    Need(MANAGER, "coordination.k8s.io", "leases", ("create",),
         'dispatcher/leader.py: await self.client.request("POST", LEASES.path(cfg.namespace)', namespace=DISPATCHER_NS,
         audit="the run below is a single replica without leader election (tests/service/test_ha.py elects)"),
    Need(MANAGER, "coordination.k8s.io", "leases", ("get", "update"),
         'dispatcher/leader.py: "PUT", LEASES.path(self.config.namespace, self.config.name)', namespace=DISPATCHER_NS,
         names=("kueue-dispatcher-leader",),
         audit="the run below is a single replica without leader election (tests/service/test_ha.py elects)"),
    # -- manager, Kueue-native mode (deploy/native/) ------------------------------------------------------------
    # Informers on the manager's Workloads and AdmissionChecks (which are MultiKueue's).
    Need(NATIVE, K, "workloads", ("list", "watch"),
         "dispatcher/native/run.py: Informer(self.manager, WORKLOADS, nominator.on_workload)", audit=NATIVE_AUDIT),
    Need(NATIVE, K, "admissionchecks", ("list", "watch"),
         "dispatcher/native/run.py: Informer(self.manager, ADMISSION_CHECKS, self._on_check)", audit=NATIVE_AUDIT),
    # status.nominatedClusterNames, by server-side apply as Kueue's kueue-admission field manager.
    Need(NATIVE, K, "workloads/status", ("patch",),
         "dispatcher/native/nominator.py: nomination_apply(mw.obj, names),", audit=NATIVE_AUDIT),
    # A new Workload's job, for its cluster-selector annotation (Kueue does not copy it onto the Workload): a list by
    # metadata.name, which deploy/ grants on every job kind (the audit run reaches these through the intake).
    *(
        Need(MANAGER, g, plural, ("list",),
             'dispatcher/native/owners.py: field_selector=f"metadata.name={name}")')
        for g, plural in (("batch", "jobs"), *CRD_KINDS)
    ),
    # The manager's Kueue Configuration (its multiKueue.dispatcherName), one ConfigMap by a metadata.name selector.
    Need(NATIVE, "", "configmaps", ("list", "watch"),
         'dispatcher/native/run.py: field_selector=f"metadata.name={config_name}",', namespace=KUEUE_NS,
         names=("kueue-manager-config",), audit=NATIVE_AUDIT),
    # -- worker -----------------------------------------------------------------------------------------------
    # The suspended copy; read back when the create answers AlreadyExists (ours after a crash, or a clash).
    Need(WORKER, "batch", "jobs", ("create",),
         "dispatcher/copies.py: created = await client.create(res, namespace, body)"),
    Need(WORKER, "batch", "jobs", ("get",), "dispatcher/copies.py: existing = await client.get(res, namespace, name)"),
    # Copies deleted after the retention, on an admission timeout, by the GC, and by fencing.
    Need(WORKER, "batch", "jobs", ("delete",), "dispatcher/copies.py: await client.delete(res, namespace, name,"),
    # A priority-class change on the manager object, followed by the copy (its label).
    Need(WORKER, "batch", "jobs", ("patch",),
         "dispatcher/sync.py: await self.rt.clients[cluster].patch(adapter.resource, live.namespace, live.name, patch)",
         audit=PRIORITY_AUDIT),
    # The informer on our copies (origin label), and fencing's list of them.
    Need(WORKER, "batch", "jobs", ("list", "watch"),
         'dispatcher/capacity.py: label_selector=f"{L.ORIGIN}={self.origin}",'),
    # The same for the other job kinds.
    *(
        need
        for g, plural in CRD_KINDS
        for need in (
            Need(WORKER, g, plural, ("create",),
                 "dispatcher/copies.py: created = await client.create(res, namespace, body)", audit=ONLY_JOBS),
            Need(WORKER, g, plural, ("get",),
                 "dispatcher/copies.py: existing = await client.get(res, namespace, name)", audit=ONLY_JOBS),
            Need(WORKER, g, plural, ("delete",),
                 "dispatcher/copies.py: await client.delete(res, namespace, name,", audit=ONLY_JOBS),
            Need(WORKER, g, plural, ("patch",),
                 "dispatcher/sync.py: await self.rt.clients[cluster].patch(adapter.resource, live.namespace,",
                 audit=ONLY_JOBS),
            Need(WORKER, g, plural, ("list", "watch"),
                 'dispatcher/capacity.py: label_selector=f"{L.ORIGIN}={self.origin}",'),
        )
    ),
    # The Job's namespace when it is missing (policy.createNamespaces).
    Need(WORKER, "", "namespaces", ("create",), "dispatcher/copies.py: NAMESPACES, None,",
         audit="a copy goes only where the worker has the LocalQueue, so its namespace exists: the create "
         "answers NotFound only in a race with a namespace being deleted"),
    # Node sizes and HAMi's GPU registration; HAMi's allocations on pods (once a node shows HAMi).
    Need(WORKER, "", "nodes", ("list", "watch"), "dispatcher/capacity.py: Informer(self.client, NODES,"),
    Need(WORKER, "", "pods", ("list", "watch"), "dispatcher/capacity.py: PODS,"),
    # strategy allAtOnce/incremental: the race's scheduling gate lifted from the winning copy's pods.
    Need(WORKER, "", "pods", ("patch",), "dispatcher/race.py: await client.patch(",
         audit="the run below uses the scored strategy (tests/service/test_strategies.py races copies)"),
    # Kueue's quota tree, queues, the Workloads of our copies, the priority classes a copy may name, and the
    # Topologies of TAS flavors.
    *(
        Need(WORKER, K, plural, ("list", "watch"),
             "dispatcher/capacity.py: Informer(self.client, kueue_resource(plural, version), handler)")
        for plural in ("clusterqueues", "cohorts", "resourceflavors", "localqueues", "workloads",
                       "workloadpriorityclasses", "topologies")
    ),
    # Kueue's Configuration (resource transformations): one ConfigMap, by a metadata.name field selector.
    Need(WORKER, "", "configmaps", ("list", "watch"), "dispatcher/capacity.py: Informer(self.client, CONFIGMAPS,",
         namespace=KUEUE_NS, names=("kueue-manager-config",)),
    # The fencing Lease on a worker with fencing: agent (renewed by a patch, created when missing), deleted from a
    # worker without fencing; the fencing agent's heartbeat Lease, by a metadata.name field selector.
    Need(WORKER, "coordination.k8s.io", "leases", ("create",),
         "dispatcher/worker_lease.py: await client.create(LEASES, ns, lease, timeout=timeout)", namespace=KUEUE_NS,
         audit=FENCING_AUDIT),
    Need(WORKER, "coordination.k8s.io", "leases", ("patch",),
         "dispatcher/worker_lease.py: await client.patch(LEASES, ns, name, body, timeout=timeout)", namespace=KUEUE_NS,
         audit=FENCING_AUDIT),
    Need(WORKER, "coordination.k8s.io", "leases", ("delete",),
         "dispatcher/worker_lease.py: await client.delete(LEASES, self.policy.namespace,", namespace=KUEUE_NS),
    Need(WORKER, "coordination.k8s.io", "leases", ("list", "watch"),
         'dispatcher/worker_lease.py: field_selector=f"metadata.name={AGENT_LEASE}",', namespace=KUEUE_NS,
         names=("kueue-dispatcher-agent",), audit=FENCING_AUDIT),
    # The health probe, and the discovery of the Kueue API version served.
    Need(WORKER, None, "/readyz", ("get",), 'dispatcher/kube/client.py: await self.request("GET", "/readyz",'),
    Need(WORKER, None, "/apis/kueue.x-k8s.io", ("get",),
         'dispatcher/capacity.py: await self.client.request("GET", f"/apis/{KUEUE_GROUP}",'),
    Need(WORKER, None, "/apis/kueue.x-k8s.io/*", ("get",),
         'dispatcher/capacity.py: await self.client.request("GET", f"/apis/{KUEUE_GROUP}/{version}",'),
)  # fmt: skip

#: Code that never runs against real clusters with the deployed identity: the rigs, and the demo and drill commands
#: (they submit Jobs as a user would, on simulated clusters). The simulator is a package of its own (kubesim/), not
#: scanned.
NOT_DEPLOYED = ("dispatcher/rig/", "dispatcher/demo.py", "dispatcher/drill.py")

# A granted permission: (cluster, namespace of the Role or None, group or None, resource or URL, verb, names).
Grant = tuple[str, str | None, str | None, str, str, tuple[str, ...]]


def _expand_needs() -> set[Grant]:
    return {
        (n.cluster, n.namespace, n.group, n.resource, verb, tuple(sorted(n.names))) for n in NEEDS for verb in n.verbs
    }


@dataclass(frozen=True)
class Rule:
    cluster: str
    namespace: str | None
    groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    names: tuple[str, ...]
    urls: tuple[str, ...]

    def grants(self) -> Iterable[Grant]:
        for verb in self.verbs:
            for url in self.urls:
                yield (self.cluster, None, None, url, verb, ())
            for group in self.groups:
                for resource in self.resources:
                    yield (self.cluster, self.namespace, group, resource, verb, tuple(sorted(self.names)))


def _roles(cluster: str) -> list[Obj]:
    roles = [o for o in kustomize(SOURCES[cluster]) if o["kind"] in ("Role", "ClusterRole")]
    return roles


def _rules() -> list[Rule]:
    out = []
    for cluster in SOURCES:
        for role in _roles(cluster):
            namespace = role["metadata"]["namespace"] if role["kind"] == "Role" else None
            for r in role.get("rules") or []:
                out.append(
                    Rule(
                        cluster,
                        namespace,
                        tuple(r.get("apiGroups") or ()),
                        tuple(r.get("resources") or ()),
                        tuple(r["verbs"]),
                        tuple(r.get("resourceNames") or ()),
                        tuple(r.get("nonResourceURLs") or ()),
                    )
                )
    return out


def _granted() -> set[Grant]:
    return {g for rule in _rules() for g in rule.grants()}


# -- 1. the table points at real code ----------------------------------------------------------------------------


@pytest.mark.parametrize("need", [n for n in NEEDS if n.code], ids=lambda n: f"{n.cluster}:{n.resource}:{n.verbs}")
def test_every_entry_names_code_that_is_there(need: Need) -> None:
    path, _, snippet = need.code.partition(": ")
    text = (REPO / path).read_text()
    assert snippet in text, f"{path} no longer has {snippet!r}: update NEEDS (and the RBAC) to the code"


def test_entries_without_code_say_why() -> None:
    for need in NEEDS:
        assert need.code or need.audit, need


# -- 2. the RBAC grants the table, exactly ------------------------------------------------------------------------


def test_granted_equals_the_table() -> None:
    needed, granted = _expand_needs(), _granted()
    missing = sorted(needed - granted, key=str)
    extra = sorted(granted - needed, key=str)
    assert not missing, f"the code needs what the RBAC does not grant: {missing}"
    assert not extra, f"the RBAC grants what no code needs: {extra}"


def test_no_wildcards_or_escalation() -> None:
    for rule in _rules():
        for value in (*rule.groups, *rule.resources, *rule.verbs, *rule.names):
            assert "*" not in value, rule
        for url in rule.urls:
            assert "*" not in url[:-1] and (not url.endswith("*") or url.endswith("/*")), rule
        assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule.verbs), rule
        assert not (rule.urls and (rule.groups or rule.resources)), "a rule is either for resources or for URLs"
        assert not (rule.namespace and rule.urls), "non-resource URLs only in a ClusterRole"


@pytest.mark.parametrize("cluster", list(SOURCES))
def test_every_role_is_bound_to_the_dispatchers_service_account_only(cluster: str) -> None:
    objs = kustomize(SOURCES[cluster])
    # deploy/native/ binds the ServiceAccount deploy/ makes.
    [sa] = [
        o
        for o in kustomize(SOURCES[MANAGER] if cluster == NATIVE else SOURCES[cluster])
        if o["kind"] == "ServiceAccount"
    ]
    subject = {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"]}
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in _roles(cluster)}
    bound = set()
    for binding in (o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert binding["subjects"] == [subject]
        ref = binding["roleRef"]
        assert ref["apiGroup"] == "rbac.authorization.k8s.io"
        namespace = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        if binding["kind"] == "ClusterRoleBinding":
            assert ref["kind"] == "ClusterRole", "a ClusterRoleBinding of a Role binds nothing"
        bound.add((ref["kind"], namespace, ref["name"]))
    assert bound == roles, "every role bound, every binding to an existing role"
    if cluster == NATIVE:
        assert not [o for o in objs if o["kind"] in ("ServiceAccount", "Deployment")], "deploy/native/ adds roles only"
    elif cluster == MANAGER:
        deployment = next(o for o in objs if o["kind"] == "Deployment")
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]
    else:
        assert sa["metadata"]["namespace"] == KUEUE_NS
        assert "--service-account SA" in (REPO / "deploy/worker/mint-kubeconfig.sh").read_text()
        assert f"SERVICE_ACCOUNT={sa['metadata']['name']}" in (REPO / "deploy/worker/mint-kubeconfig.sh").read_text()


# -- 3. everything the code names is in the table -----------------------------------------------------------------


def _deployed_sources() -> list[Path]:
    return [
        p
        for p in sorted((REPO / "dispatcher").rglob("*.py"))
        if not any(p.relative_to(REPO).as_posix().startswith(x) for x in NOT_DEPLOYED)
    ]


def test_every_resource_and_path_the_code_names_is_in_the_table() -> None:
    from dispatcher.capacity import _KUEUE_KINDS, KUEUE_GROUP

    named: set[tuple[str | None, str]] = set()
    for path in _deployed_sources():
        text = path.read_text()
        for group, plural in re.findall(r'Resource\(\s*"([^"]*)",\s*"[^"]+",\s*"([^"]+)"', text):
            named.add((group, plural))
        for url in re.findall(r'request\(\s*"GET",\s*f?"(/[^"]*)"', text):
            named.add((None, url.replace("{KUEUE_GROUP}", KUEUE_GROUP).replace("/{version}", "/*")))
    named |= {(KUEUE_GROUP, plural) for plural in _KUEUE_KINDS}
    in_table = {(n.group, n.resource.split("/")[0] if n.group is not None else n.resource) for n in NEEDS}
    missing = sorted(named - in_table, key=str)
    assert not missing, f"the code uses resources the RBAC table does not know: {missing}"
    assert ("batch", "jobs") in named and ("", "secrets") in named, "the scan finds the code's resources"


# -- 4. the dispatcher on the simulator: every call allowed, every grant used --------------------------------------


@dataclass(frozen=True)
class Call:
    cluster: str
    method: str
    path: str
    query: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Attributes:
    """What the API server's RBAC authorizer decides on (k8s.io/apiserver RequestInfo)."""

    resource_request: bool
    verb: str
    group: str = ""
    resource: str = ""  # plural[/subresource]
    namespace: str = ""
    name: str = ""
    path: str = ""


def attributes(call: Call) -> Attributes:
    parts = [p for p in call.path.split("/") if p]
    query = dict(call.query)
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        rest = []
    if not rest:
        return Attributes(False, call.method.lower(), path=call.path)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else ""
    if call.method == "GET":
        verb = "get" if name else ("watch" if query.get("watch") in ("true", "1") else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(call.method, "")
        if call.method == "DELETE":
            verb = "delete" if name else "deletecollection"
    if not name and verb in ("list", "watch"):
        selector = query.get("fieldSelector", "")
        if re.fullmatch(r"metadata\.name=[^,]+", selector):
            name = selector.split("=", 1)[1]
    return Attributes(True, verb, group, f"{resource}/{sub}" if sub else resource, namespace, name)


def authorizing(rules: list[Rule], cluster: str, attrs: Attributes) -> list[Grant]:
    """The grants (of ``rules``) that allow ``attrs`` on ``cluster``: empty when RBAC denies it."""
    out = []
    for rule in rules:
        if rule.cluster != cluster:
            continue
        for grant in rule.grants():
            _, namespace, group, resource, verb, names = grant
            if verb != attrs.verb:
                continue
            if not attrs.resource_request:
                if group is None and (
                    resource == attrs.path or (resource.endswith("*") and attrs.path.startswith(resource[:-1]))
                ):
                    out.append(grant)
                continue
            if group is None or group != attrs.group or resource != attrs.resource:
                continue
            if namespace is not None and namespace != attrs.namespace:
                continue
            if names and attrs.name not in names:
                continue
            out.append(grant)
    return out


def _job(name: str, *, managed: bool = False) -> Obj:
    spec: Obj = {
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
                ],
            }
        },
    }
    if managed:
        spec["managedBy"] = DEFAULT_CONTROLLER_NAME
    else:
        spec["suspend"] = True
    labels = {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/priority-class": "high"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "labels": labels},
        "spec": spec,
    }


JOBS = Resource("batch", "v1", "jobs", "Job")


async def _eventually(probe: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await probe():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


@pytest.mark.timeout(180)
async def test_on_the_simulator_every_call_is_allowed_and_every_grant_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Call] = []
    watched: set[str] = set()
    original = ClusterClient._send

    async def recording(self: ClusterClient, method: str, path: str, **kwargs: Any) -> Any:
        if self.name in watched:
            query = tuple(sorted((str(k), str(v)) for k, v in (kwargs.get("query") or {}).items() if v is not None))
            calls.append(Call(MANAGER if self.name == "manager" else WORKER, method, path, query))
        return await original(self, method, path, **kwargs)

    monkeypatch.setattr(ClusterClient, "_send", recording)

    world = SimWorld(WorldOptions(workers=2, gpu_workers=1, default_run_seconds=0.5, bookmark_interval=1.0))
    await world.start()
    admin: dict[str, ClusterClient] = {}
    dispatcher: Dispatcher | None = None
    engine = None
    try:
        await asyncio.to_thread(world.write_files, tmp_path)
        loaded = load_config(tmp_path / "clusters.yaml")
        gpu_worker = loaded.workers[-1].name
        assert gpu_worker == "worker-2"
        # worker-2 is reached through a secretRef: the Secret is one the Role names.
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{gpu_worker}-kubeconfig", "namespace": DISPATCHER_NS},
            "data": {"kubeconfig": base64.b64encode(yaml.safe_dump(world.workers[-1].kubeconfig()).encode()).decode()},
        }
        world.manager.apply(secret)
        ref = KubeconfigRef(secret_namespace=DISPATCHER_NS, secret_name=f"{gpu_worker}-kubeconfig")
        workers = tuple(replace(w, kube=ref) if w.name == gpu_worker else w for w in loaded.workers)
        policy = Policy(
            admission_timeout=60.0, lost_timeout=30.0, suspect_after=10.0, finished_retention=0.5, gc_interval=1.0
        )
        url = f"sqlite+aiosqlite:///{tmp_path / 'dispatcher.sqlite'}"
        config = replace(loaded, workers=workers, policy=policy, database_url=url)

        admin["manager"] = await connect("test-manager", loaded.manager)
        for w in loaded.workers:
            admin[w.name] = await connect(f"test-{w.name}", w.kube)
        # A Job of that name that is not ours, on every worker: the copy's create answers AlreadyExists.
        for w in loaded.workers:
            foreign = _job("clash")
            del foreign["metadata"]["labels"]
            await admin[w.name].create(JOBS, "team-a", foreign)

        engine = make_engine(url)
        await upgrade(engine)
        repo = Repo(engine)
        watched.update({"manager", *(w.name for w in workers)})
        dispatcher = Dispatcher(config, repo, probe_interval=0.3)
        await dispatcher.start()

        await admin["manager"].create(JOBS, "team-a", _job("audit-annotations"))
        await admin["manager"].create(JOBS, "team-a", _job("audit-status", managed=True))
        await admin["manager"].create(JOBS, "team-a", _job("clash"))

        def seen(cluster: str, method: str, fragment: str) -> bool:
            return any(c.cluster == cluster and c.method == method and fragment in c.path for c in calls)

        async def done() -> bool:
            for name in ("audit-annotations", "audit-status"):
                row = await repo.get_workload("team-a", name)
                if row is None or row.state != WorkloadState.SUCCEEDED or row.cleaned_at is None:
                    return False
            return (
                seen(WORKER, "DELETE", "/jobs/audit-annotations")
                and seen(WORKER, "DELETE", "/jobs/audit-status")
                and seen(WORKER, "GET", "/namespaces/team-a/jobs/clash")
                and seen(MANAGER, "POST", "/events")
                and seen(MANAGER, "PATCH", "/jobs/audit-status/status")
                and seen(WORKER, "GET", "/api/v1/pods")
            )

        await _eventually(done, "both Jobs finished and cleaned up, the clash seen, events written")
    finally:
        if dispatcher is not None:
            await dispatcher.stop()
        watched.clear()
        for client in admin.values():
            await client.close()
        if engine is not None:
            await engine.dispose()
        await world.stop()

    rules = _rules()
    denied: list[str] = []
    used: set[Grant] = set()
    for call in calls:
        attrs = attributes(call)
        grants = authorizing(rules, call.cluster, attrs)
        if not grants:
            denied.append(f"{call.cluster}: {call.method} {call.path} {dict(call.query)} -> {attrs}")
        used.update(grants)
    assert not denied, "RBAC would deny:\n" + "\n".join(sorted(set(denied)))

    excused = {
        (n.cluster, n.namespace, n.group, n.resource, verb, tuple(sorted(n.names)))
        for n in NEEDS
        if n.audit
        for verb in n.verbs
    }
    unused = sorted(_granted() - used - excused, key=str)
    assert not unused, f"granted but never used by the dispatcher on the simulator: {unused}"
    assert not (excused & used), "an entry says the run cannot reach it, yet it did: drop its audit note"
