"""deploy/ and kind/manifests/: valid against the real schemas, consistent with each other and with the code.

- every object that ``kubectl kustomize`` renders from deploy/, deploy/worker/ and the kind overlay, and every
  object under kind/manifests/, decodes strictly against its kind's schema (an unknown or misspelt field, a
  wrong type or a missing required field fails, naming the field);
- the validator itself rejects such slips (so the checks above are not vacuous);
- the ConfigMap's clusters.yaml is a valid dispatcher configuration whose Secrets are the ones the Role lets
  the dispatcher read, the Deployment runs the ServiceAccount the RBAC binds, with the hardening asked for;
- the kind queues are the simulator's default topology, object for object.
"""

from __future__ import annotations

import contextlib
import copy
import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploytools import REPO, kustomize, validate, yaml_docs

from dispatcher.api.auth import ENV_VAR as API_TOKENS_VAR
from dispatcher.capacity import KUEUE_CONFIG
from dispatcher.config import parse_config
from kubesim.topology import HAMI_KUEUE_CONFIG, default_topology

Obj = dict[str, Any]
KIND = REPO / "kind" / "manifests"
RENDERED = ("deploy", "deploy/worker", "deploy/worker/agent", "kind/manifests/dispatcher")


def _one(objs: tuple[Obj, ...] | list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


@pytest.mark.parametrize("directory", RENDERED)
def test_rendered_objects_are_valid(directory: str) -> None:
    objs = kustomize(directory)
    assert objs
    for obj in objs:
        validate(obj)


def _kind_manifest_files() -> list[Path]:
    return sorted(
        p for p in KIND.rglob("*.yaml") if p.parent.name != "dispatcher" and p.name != "kind-gpu-cluster.yaml"
    )


@pytest.mark.parametrize("path", _kind_manifest_files(), ids=lambda p: str(p.relative_to(KIND)))
def test_kind_manifests_are_valid(path: Path) -> None:
    docs = yaml_docs(path)
    assert docs
    for obj in docs:
        validate(obj)


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d["spec"]["template"]["spec"]["containers"][0].update(readinesProbe={}), "readinesProbe"),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0]["ports"][0].update(containerPort="8080"), "int32"),
        (lambda d: d["spec"]["template"]["spec"]["securityContext"].update(runAsNonroot=True), "runAsNonroot"),
    ],
)
def test_the_validator_catches_field_slips_in_builtin_kinds(mutate: Any, needle: str) -> None:
    deployment = copy.deepcopy(_one(kustomize("deploy"), "Deployment"))
    mutate(deployment)
    with pytest.raises(AssertionError, match=needle):
        validate(deployment)


def test_the_validator_catches_field_slips_in_rbac_and_crds_and_service() -> None:
    role = copy.deepcopy(_one(kustomize("deploy"), "ClusterRole"))
    role["rules"][0]["verb"] = role["rules"][0].pop("verbs")
    with pytest.raises(AssertionError, match="verb"):
        validate(role)
    binding = copy.deepcopy(_one(kustomize("deploy"), "ClusterRoleBinding"))
    del binding["roleRef"]["name"]
    with pytest.raises(AssertionError, match="name"):
        validate(binding)
    service = copy.deepcopy(_one(kustomize("deploy"), "Service"))
    service["spec"]["ports"][0]["targetport"] = 8080
    with pytest.raises(AssertionError, match="targetport"):
        validate(service)
    queue = copy.deepcopy(yaml_docs(KIND / "worker-cpu" / "queues.yaml")[-1])
    queue["spec"]["cohort"] = queue["spec"].pop("cohortName")
    with pytest.raises(AssertionError, match="cohort"):
        validate(queue)


def test_deploy_config_is_a_valid_dispatcher_configuration_reading_the_granted_secrets() -> None:
    objs = kustomize("deploy")
    config_map = _one(objs, "ConfigMap", "kueue-dispatcher-config")
    config = parse_config(yaml.safe_load(config_map["data"]["clusters.yaml"]))
    assert config.manager.in_cluster
    role = _one(objs, "Role", "kueue-dispatcher")
    readable = {
        (role["metadata"]["namespace"], name)
        for rule in role["rules"]
        if "secrets" in rule.get("resources", []) and "get" in rule["verbs"]
        for name in rule.get("resourceNames", [])
    }
    refs = {(w.kube.secret_namespace, w.kube.secret_name) for w in config.workers}
    assert refs and all(w.kube.secret_name for w in config.workers)
    assert refs == readable, "every worker's secretRef, and nothing else, is readable by the dispatcher"
    assert config.database_url and config.database_url.startswith("sqlite+aiosqlite:////var/lib/dispatcher/")


def test_deployment_hardening_probes_and_wiring() -> None:
    objs = kustomize("deploy")
    deployment = _one(objs, "Deployment", "kueue-dispatcher")
    namespace = deployment["metadata"]["namespace"]
    # HA: two replicas with leader election, the Lease in the pod's namespace named after the pod.
    assert deployment["spec"]["replicas"] == 2 and deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    pod = deployment["spec"]["template"]["spec"]
    assert "--leader-elect" in pod["containers"][0]["args"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert "optional" not in env["DISPATCHER_DB_URL"]["valueFrom"]["secretKeyRef"], "PostgreSQL is required"
    kind = _one(kustomize("kind/manifests/dispatcher"), "Deployment", "kueue-dispatcher")
    assert kind["spec"]["replicas"] == 1 and kind["spec"]["strategy"]["type"] == "Recreate"
    assert "--leader-elect" not in kind["spec"]["template"]["spec"]["containers"][0]["args"], "kind: one on SQLite"
    sa = _one(objs, "ServiceAccount")
    assert pod["serviceAccountName"] == sa["metadata"]["name"] and sa["metadata"]["namespace"] == namespace
    for binding in (o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": namespace}
        ]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    [container] = pod["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    port = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert port == {"http": 8080}
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["port"] in ("http", 8080)
    # The configuration is mounted where the image's CMD and the args look for it; writable paths are volumes.
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert container["args"][:3] == ["run", "--config", "/etc/dispatcher/clusters.yaml"]
    assert mounts["/etc/dispatcher"]["readOnly"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/etc/dispatcher"]["name"]]["configMap"]["name"] == "kueue-dispatcher-config"
    assert {"/var/lib/dispatcher", "/tmp"} <= set(mounts)
    service = _one(objs, "Service")
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"


def test_deployment_args_are_accepted_by_the_cli() -> None:
    from dispatcher.cli import build_parser

    container = _one(kustomize("deploy"), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = build_parser().parse_args(container["args"])
    except SystemExit:
        pytest.fail(f"dispatcher {' '.join(container['args'])}: {errors.getvalue()}")
    assert args.command == "run" and args.config == "/etc/dispatcher/clusters.yaml"
    # The API on every address of the pod (probes and the Service reach it there); the dispatcher allows that
    # only with API tokens, which the Deployment takes from a required Secret.
    assert args.api_listen == "0.0.0.0:8080"
    env = {e["name"]: e for e in container["env"]}
    ref = env[API_TOKENS_VAR]["valueFrom"]["secretKeyRef"]
    assert not ref.get("optional", False)


def test_kind_overlay_runs_the_loaded_image_and_never_pulls() -> None:
    deployment = _one(kustomize("kind/manifests/dispatcher"), "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "kueue-dispatcher:dev" and container["imagePullPolicy"] == "Never"
    assert "kueue-dispatcher:dev" in (REPO / "kind" / "up.sh").read_text()


def _key(obj: Obj) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


def _by_key(objs: list[Obj]) -> dict[tuple[str, str, str], Obj]:
    out = {_key(o): o for o in objs}
    assert len(out) == len(objs), "duplicate objects"
    return out


def test_kind_queues_are_the_simulators_defaults() -> None:
    topo = default_topology()
    common = [
        *yaml_docs(KIND / "worker-common" / "20-topology.yaml"),
        *yaml_docs(KIND / "worker-common" / "30-local-queues.yaml"),
        *yaml_docs(KIND / "worker-common" / "40-priority-classes.yaml"),
    ]
    for cls, directory in ((topo.cpu_worker, "worker-cpu"), (topo.gpu_worker, "worker-gpu")):
        kind_objs = common + yaml_docs(KIND / directory / "queues.yaml")
        assert _by_key(kind_objs) == _by_key(list(cls.objects)), directory
    assert _by_key(yaml_docs(KIND / "manager" / "10-priority-classes.yaml")) == _by_key(list(topo.manager_objects))
    namespaces = {o["metadata"]["name"] for o in yaml_docs(KIND / "worker-common" / "00-namespaces.yaml")}
    assert namespaces | {"default"} == set(topo.namespaces)
    namespaces = {o["metadata"]["name"] for o in yaml_docs(KIND / "manager" / "00-namespaces.yaml")}
    assert namespaces | {"default"} == set(topo.namespaces)


#: Kueue's config.kueue.x-k8s.io/v1beta2 Configuration: its fields and those of the inlined ControllerManager.
KUEUE_CONFIGURATION_FIELDS = {
    "apiVersion", "kind", "namespace", "manageJobsWithoutQueueName", "managedJobsNamespaceSelector",
    "internalCertManagement", "waitForPodsReady", "clientConnection", "integrations", "multiKueue", "fairSharing",
    "admissionFairSharing", "resources", "featureGates", "objectRetentionPolicies", "visibilityServer",
    "webhook", "leaderElection", "metrics", "health", "pprofBindAddress", "controller", "tls",
}  # fmt: skip


def test_kind_gpu_worker_kueue_configuration_has_the_simulators_hami_transformations() -> None:
    [config_map] = yaml_docs(KIND / "kueue-hami-config.yaml")
    namespace, name, key = KUEUE_CONFIG
    assert (config_map["metadata"]["namespace"], config_map["metadata"]["name"]) == (namespace, name)
    config = yaml.safe_load(config_map["data"][key])
    assert set(config) <= KUEUE_CONFIGURATION_FIELDS
    assert config["apiVersion"] == HAMI_KUEUE_CONFIG["apiVersion"] and config["kind"] == "Configuration"
    assert config["resources"] == HAMI_KUEUE_CONFIG["resources"]
    assert "batch/job" in config["integrations"]["frameworks"]


def test_kind_gpu_cluster_has_the_nodes_up_sh_makes_gpu_nodes() -> None:
    cfg = yaml.safe_load((KIND / "kind-gpu-cluster.yaml").read_text())
    assert cfg["kind"] == "Cluster" and cfg["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    roles = [n["role"] for n in cfg["nodes"]]
    assert roles == ["control-plane", "worker", "worker"]
    # kind names the workers CLUSTER-worker, CLUSTER-worker2: the names up.sh labels and annotates.
    up = (REPO / "kind" / "up.sh").read_text()
    assert 'for node in "$cluster-worker" "$cluster-worker2"; do' in up


def test_a_secret_ref_without_a_namespace_reads_where_the_rbac_grants_secrets() -> None:
    """Issue 16, item 15: the default namespace of a secretRef is the one deploy/'s Role lets the dispatcher read."""
    role = _one(kustomize("deploy"), "Role", "kueue-dispatcher")
    config = parse_config(
        {"manager": {"inCluster": True}, "workers": [{"name": "w", "secretRef": {"name": "worker-1-kubeconfig"}}]}
    )
    assert config.workers[0].kube.secret_namespace == role["metadata"]["namespace"] == "dispatcher-system"


def test_a_disruption_budget_keeps_a_replica_and_the_network_policy_opens_only_the_http_port() -> None:
    """Issue 16, item 15: a PodDisruptionBudget and a NetworkPolicy for the Deployment's pods."""
    objs = kustomize("deploy")
    deployment = _one(objs, "Deployment", "kueue-dispatcher")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    pdb = _one(objs, "PodDisruptionBudget", "kueue-dispatcher")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert 1 <= pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"], "a drain may take one replica, not all"
    policy = _one(objs, "NetworkPolicy", "kueue-dispatcher")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    [rule] = policy["spec"]["ingress"]
    ports = {p["name"] for c in deployment["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
    assert [p["port"] for p in rule["ports"]] == ["http"] and "http" in ports
    assert "from" not in rule, "the probes and Prometheus come from anywhere in the cluster"
