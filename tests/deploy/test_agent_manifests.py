"""deploy/worker/agent/: the fencing agent's least-privilege RBAC is exactly what dispatcher/agent.py calls, bound to
its own ServiceAccount only, and its Deployment runs that ServiceAccount with arguments the CLI accepts.

The real rig applies the same RBAC (without the Deployment) and runs ``dispatcher agent`` with a token of that
ServiceAccount, so a missing verb shows there as a 403 in the fencing tests (tests/service/test_fencing.py).
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from deploytools import REPO, kustomize

Obj = dict[str, Any]
SOURCE = "deploy/worker/agent"
K = "kueue.x-k8s.io"
NS, LEASE = "kueue-system", "coordination.k8s.io"
KINDS = (("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("kubeflow.org", "pytorchjobs"),
         ("kubeflow.org", "tfjobs"), ("ray.io", "rayjobs"), ("ray.io", "rayclusters"))  # fmt: skip
COPIES = "dispatcher/agent.py: Informer(self.client, adapter.resource, handler, label_selector=L.ORIGIN)"
SUSPEND = "dispatcher/agent.py: await self.client.patch(adapter.resource,"
#: (namespace or None, group or None, resource or URL, verb, resourceNames) -> the code that calls it.
NEEDS: dict[tuple[str | None, str | None, str, str, tuple[str, ...]], str] = {
    **{(None, g, r, v, ()): COPIES for g, r in KINDS for v in ("list", "watch")},
    **{(None, g, r, "patch", ()): SUSPEND for g, r in KINDS},
    (None, K, "workloads", "list", ()): "dispatcher/agent.py: Informer(self.client, self.workload_resource,",
    (None, K, "workloads", "watch", ()): "dispatcher/agent.py: Informer(self.client, self.workload_resource,",
    (None, K, "workloads", "patch", ()): "dispatcher/agent.py: self.workload_resource,",
    (None, "", "events", "create", ()): "dispatcher/events.py: await self.client.create(EVENTS,",
    (None, "", "pods", "list", ()): "dispatcher/agent.py: await self.client.list(PODS, namespace,",
    (None, "", "pods", "delete", ()): "dispatcher/agent.py: await self.client.delete(PODS, namespace,",
    (None, None, "/apis/kueue.x-k8s.io", "get", ()): 'dispatcher/agent.py: request("GET", f"/apis/{KUEUE_GROUP}"',
    (None, None, "/apis/kueue.x-k8s.io/*", "get", ()): 'dispatcher/agent.py: request("GET", f"/apis/{KUEUE_GROUP}"',
    (NS, LEASE, "leases", "list", ()): "dispatcher/agent.py: Informer(self.client, LEASES,",
    (NS, LEASE, "leases", "watch", ()): "dispatcher/agent.py: Informer(self.client, LEASES,",
    (NS, LEASE, "leases", "create", ()): "dispatcher/agent.py: await self.client.create(LEASES, ns, lease)",
    (NS, LEASE, "leases", "patch", ("kueue-dispatcher-agent",)):
        "dispatcher/agent.py: await self.client.patch(LEASES, ns, AGENT_LEASE, body)",
}  # fmt: skip


def _granted() -> set[tuple[str | None, str | None, str, str, tuple[str, ...]]]:
    out = set()
    for role in (o for o in kustomize(SOURCE) if o["kind"] in ("Role", "ClusterRole")):
        namespace = role["metadata"]["namespace"] if role["kind"] == "Role" else None
        for rule in role.get("rules") or []:
            names = tuple(sorted(rule.get("resourceNames") or ()))
            for verb in rule["verbs"]:
                for url in rule.get("nonResourceURLs") or ():
                    out.add((None, None, url, verb, ()))
                for group in rule.get("apiGroups") or ():
                    for resource in rule.get("resources") or ():
                        out.add((namespace, group, resource, verb, names))
    return out


@pytest.mark.parametrize("code", sorted(set(NEEDS.values())))
def test_every_entry_names_code_that_is_there(code: str) -> None:
    path, _, snippet = code.partition(": ")
    assert snippet in (REPO / path).read_text(), f"{path} no longer has {snippet!r}: update NEEDS and the RBAC"


def test_the_agent_is_granted_exactly_what_its_code_calls() -> None:
    granted, needed = _granted(), set(NEEDS)
    assert not needed - granted, f"the agent needs what its RBAC does not grant: {sorted(needed - granted, key=str)}"
    assert not granted - needed, f"the agent's RBAC grants what no code needs: {sorted(granted - needed, key=str)}"
    # The one deletion: a fenced copy's pods (its controller would delete them too, later). Never the copies.
    deletes = {g for g in granted if g[3] == "delete"}
    assert deletes == {(None, "", "pods", "delete", ())}, deletes
    assert not any("*" in str(g[2])[:-1] or g[3] in ("update", "escalate", "bind") for g in granted)


def test_every_role_is_bound_to_the_agents_service_account_only() -> None:
    objs = kustomize(SOURCE)
    [sa] = [o for o in objs if o["kind"] == "ServiceAccount"]
    subject = {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"]}
    roles = {(o["kind"], o["metadata"]["name"]) for o in objs if o["kind"] in ("Role", "ClusterRole")}
    bindings = [o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert all(b["subjects"] == [subject] for b in bindings)
    assert {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in bindings} == roles
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == sa["metadata"]["name"] == "kueue-dispatcher-agent"
    assert sa["metadata"]["namespace"] == deployment["metadata"]["namespace"] == "kueue-system"


def test_the_deployment_runs_the_agent_with_arguments_the_cli_accepts_and_is_hardened() -> None:
    from dispatcher.cli import build_parser

    deployment = next(o for o in kustomize(SOURCE) if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = build_parser().parse_args(container["args"])
    except SystemExit:
        pytest.fail(f"dispatcher {' '.join(container['args'])}: {errors.getvalue()}")
    assert args.command == "agent" and args.in_cluster and args.namespace == "kueue-system"
    port = int(args.listen.rsplit(":", 1)[1])
    assert {p["containerPort"] for p in container["ports"]} == {port}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["securityContext"]["runAsNonRoot"] and container["securityContext"]["readOnlyRootFilesystem"]
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "POD_NAME" in {e["name"] for e in container["env"]}
