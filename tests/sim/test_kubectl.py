"""The real kubectl against a simulated cluster: what a person types at a worker must work as on a real one.

Each test starts a ``SimCluster`` with the Kueue, job, scheduler and kubelet emulations on and the default worker
topology (nodes, ResourceFlavor, ClusterQueues, LocalQueue ``user-queue``), writes its kubeconfig (HTTPS with the
cluster's CA and a bearer token) and runs the kubectl binary of the test dependencies as a subprocess, never
blocking the event loop. Expected answers follow a real kube-apiserver with Kueue's CRDs installed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesim.cluster import ClusterOptions, SimCluster
from kubesim.constants import RUN_SECONDS
from kubesim.topology import default_topology

Obj = dict[str, Any]

KUBECTL = str(Path(sys.executable).parent / "kubectl")
if not os.access(KUBECTL, os.X_OK):
    KUBECTL = shutil.which("kubectl") or "kubectl"  # a test dependency: missing, the tests fail and say so


@dataclass
class Result:
    code: int
    out: str
    err: str


@dataclass
class Kubectl:
    """A started cluster and a kubectl bound to its kubeconfig."""

    cluster: SimCluster
    kubeconfig: Path
    cache: Path
    workdir: Path

    async def __call__(
        self, *args: str, stdin: str | None = None, kubeconfig: Path | None = None, timeout: float = 90.0
    ) -> Result:
        proc = await asyncio.create_subprocess_exec(
            KUBECTL,
            "--kubeconfig",
            str(kubeconfig or self.kubeconfig),
            "--cache-dir",
            str(self.cache),
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "HOME": str(self.workdir), "KUBECONFIG": ""},
        )
        try:
            async with asyncio.timeout(timeout):
                out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(f"kubectl {' '.join(args)} did not finish in {timeout}s") from None
        assert proc.returncode is not None
        return Result(proc.returncode, out.decode(), err.decode())

    async def ok(self, *args: str, stdin: str | None = None) -> str:
        res = await self(*args, stdin=stdin)
        assert res.code == 0, f"kubectl {' '.join(args)} failed ({res.code}): {res.err}"
        return res.out

    async def apply(self, manifest: Obj, *extra: str) -> Result:
        return await self("apply", "-f", "-", *extra, stdin=yaml.safe_dump(manifest))

    def write_kubeconfig(self, name: str, config: Obj) -> Path:
        path = self.workdir / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(config, f)
        return path


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    cluster = SimCluster("worker-1", ClusterOptions(default_run_seconds=1.0, bookmark_interval=1.0))
    topo = default_topology()
    for ns in topo.namespaces:
        cluster.ensure_namespace(ns)
    for group in topo.cpu_worker.nodes:
        cluster.add_nodes(group)
    for obj in topo.cpu_worker.objects:
        cluster.apply(obj)
    await cluster.start()
    k = Kubectl(cluster, tmp_path / "worker-1.kubeconfig", tmp_path / "cache", tmp_path)
    k.write_kubeconfig("worker-1.kubeconfig", cluster.kubeconfig())
    try:
        yield k
    finally:
        await cluster.stop()


def job(
    name: str,
    *,
    queue: str | None = None,
    suspend: bool = True,
    run_seconds: float | None = None,
    labels: dict[str, str] | None = None,
    parallelism: int | None = None,
) -> Obj:
    meta: Obj = {"name": name}
    all_labels = dict(labels or {})
    if queue:
        all_labels["kueue.x-k8s.io/queue-name"] = queue
    if all_labels:
        meta["labels"] = all_labels
    template: Obj = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sh", "-c", "echo hello"],
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        }
    }
    if run_seconds is not None:
        template["metadata"] = {"annotations": {RUN_SECONDS: str(run_seconds)}}
    spec: Obj = {"suspend": suspend, "template": template}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def table(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """Parse kubectl's aligned table output: header names and one dict per row (cells split at the header's
    column starts, so multi-word headers such as ``RESERVED IN`` and empty cells are read right)."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "empty table"
    # Header names are words joined by single spaces; kubectl pads columns with at least three.
    found = list(re.finditer(r"\S+(?: \S+)*", lines[0]))
    names = [m.group() for m in found]
    starts = [m.start() for m in found]
    rows = []
    for line in lines[1:]:
        cells = {}
        for n, (name, start) in enumerate(zip(names, starts, strict=True)):
            end = starts[n + 1] if n + 1 < len(starts) else len(line)
            cells[name] = line[start:end].strip()
        rows.append(cells)
    return names, rows


async def wait_until(predicate: Any, what: str, timeout: float = 30.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.1)


# ---- apply -------------------------------------------------------------------------------------------------------


async def test_apply_creates_then_unchanged_then_configured(kubectl: Kubectl) -> None:
    # Not queued for Kueue and suspended: nothing changes it after creation, so a re-apply has nothing to patch.
    manifest = job("plain")
    first = await kubectl.apply(manifest)
    assert first.code == 0, first.err
    assert first.out.strip() == "job.batch/plain created"
    again = await kubectl.apply(manifest)
    assert again.code == 0, again.err
    assert again.out.strip() == "job.batch/plain unchanged"
    manifest["metadata"]["labels"] = {"team": "a"}
    manifest["spec"]["parallelism"] = 2
    changed = await kubectl.apply(manifest)
    assert changed.code == 0, changed.err
    assert changed.out.strip() == "job.batch/plain configured"
    live = json.loads(await kubectl.ok("get", "job", "plain", "-o", "json"))
    assert live["metadata"]["labels"]["team"] == "a"
    assert live["spec"]["parallelism"] == 2
    assert live["metadata"]["generation"] == 2
    last = json.loads(live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["metadata"]["labels"] == {"team": "a"}
    # The same file once more: unchanged again.
    assert (await kubectl.apply(manifest)).out.strip() == "job.batch/plain unchanged"


async def test_server_side_apply_and_conflict_with_another_manager(kubectl: Kubectl) -> None:
    cm: Obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "1"}}
    first = await kubectl.apply(cm, "--server-side")
    assert first.code == 0, first.err
    assert first.out.strip() == "configmap/settings serverside-applied"
    # Re-applying the same configuration is fine.
    assert (await kubectl.apply(cm, "--server-side")).code == 0
    # Another field manager setting the same field to another value: 409 Conflict naming the field and owner.
    other = {**cm, "data": {"a": "2"}}
    conflict = await kubectl.apply(other, "--server-side", "--field-manager", "other")
    assert conflict.code != 0
    assert "Apply failed with 1 conflict" in conflict.err
    assert 'conflict with "kubectl"' in conflict.err
    assert ".data.a" in conflict.err
    live = json.loads(await kubectl.ok("get", "configmap", "settings", "-o", "json"))
    assert live["data"] == {"a": "1"}
    # A field no one else owns is no conflict; forcing takes the contested one over.
    forced = await kubectl.apply(
        {**cm, "data": {"a": "2", "b": "3"}}, "--server-side", "--field-manager", "other", "--force-conflicts"
    )
    assert forced.code == 0, forced.err
    live = json.loads(await kubectl.ok("get", "configmap", "settings", "-o", "json", "--show-managed-fields"))
    assert live["data"] == {"a": "2", "b": "3"}
    owners = {e["manager"]: e for e in live["metadata"]["managedFields"]}
    assert owners["other"]["operation"] == "Apply"
    assert set(owners["other"]["fieldsV1"]["f:data"]) == {"f:a", "f:b"}
    # kubectl lost .data.a to "other" and has nothing left.
    assert "kubectl" not in owners or "f:a" not in owners["kubectl"]["fieldsV1"].get("f:data", {})


async def test_server_side_apply_of_a_job_owns_only_what_it_sent(kubectl: Kubectl) -> None:
    manifest = job("ssa")
    res = await kubectl.apply(manifest, "--server-side")
    assert res.code == 0, res.err
    assert res.out.strip() == "job.batch/ssa serverside-applied"
    # Defaulted fields (parallelism) have no owner: another manager may set them without a conflict...
    manifest["spec"]["parallelism"] = 2
    res = await kubectl.apply(manifest, "--server-side", "--field-manager", "other")
    assert res.code == 0, res.err
    # ...and then kubectl changing it conflicts with "other".
    manifest["spec"]["parallelism"] = 3
    res = await kubectl.apply(manifest, "--server-side")
    assert res.code != 0
    assert 'conflict with "other"' in res.err and ".spec.parallelism" in res.err


# ---- get ---------------------------------------------------------------------------------------------------------


async def test_get_job_yaml_has_the_servers_defaults(kubectl: Kubectl) -> None:
    assert (await kubectl.apply(job("defaults"))).code == 0
    obj = yaml.safe_load(await kubectl.ok("get", "job", "defaults", "-o", "yaml"))
    meta, spec = obj["metadata"], obj["spec"]
    uid = meta["uid"]
    assert obj["apiVersion"] == "batch/v1" and obj["kind"] == "Job"
    assert meta["generation"] == 1
    assert meta["namespace"] == "default"
    assert int(meta["resourceVersion"]) > 0
    assert meta["creationTimestamp"].endswith("Z")
    job_labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "defaults",
        "controller-uid": uid,
        "job-name": "defaults",
    }
    assert meta["labels"] == job_labels
    assert "managedFields" not in meta  # kubectl hides them unless --show-managed-fields
    assert spec["backoffLimit"] == 6
    assert spec["completionMode"] == "NonIndexed"
    assert spec["manualSelector"] is False
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["parallelism"] == 1 and spec["completions"] == 1
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert spec["suspend"] is True
    template = spec["template"]
    assert template["metadata"]["labels"] == job_labels
    pod = template["spec"]
    assert pod["dnsPolicy"] == "ClusterFirst"
    assert pod["schedulerName"] == "default-scheduler"
    assert pod["terminationGracePeriodSeconds"] == 30
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"] == {}
    # enableServiceLinks is a Pod default (SetDefaults_Pod), not a pod-template one.
    assert "enableServiceLinks" not in pod
    container = pod["containers"][0]
    assert container["imagePullPolicy"] == "Always"  # untagged image
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "File"
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}

    # Only parallelism given: completions stays unset.
    assert (await kubectl.apply(job("par", parallelism=3))).code == 0
    par = yaml.safe_load(await kubectl.ok("get", "job", "par", "-o", "yaml"))
    assert par["spec"]["parallelism"] == 3
    assert "completions" not in par["spec"]


async def test_get_jobs_table(kubectl: Kubectl) -> None:
    assert (await kubectl.apply(job("suspended"))).code == 0
    assert (await kubectl.apply(job("wide", parallelism=3))).code == 0
    out = await kubectl.ok("get", "jobs")
    names, rows = table(out)
    assert names == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    by_name = {r["NAME"]: r for r in rows}
    assert by_name["suspended"]["STATUS"] == "Suspended"
    assert by_name["suspended"]["COMPLETIONS"] == "0/1"
    assert by_name["suspended"]["DURATION"] == ""
    assert by_name["suspended"]["AGE"].endswith("s")
    # parallelism without completions: "0/1 of 3", as the real printer writes it.
    assert by_name["wide"]["COMPLETIONS"] == "0/1 of 3"
    names, rows = table(await kubectl.ok("get", "jobs", "-o", "wide"))
    assert names == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    row = {r["NAME"]: r for r in rows}["suspended"]
    uid = json.loads(await kubectl.ok("get", "job", "suspended", "-o", "json"))["metadata"]["uid"]
    assert (row["CONTAINERS"], row["IMAGES"]) == ("main", "busybox")
    assert row["SELECTOR"] == f"batch.kubernetes.io/controller-uid={uid}"


async def test_wait_for_a_kueue_admitted_job_and_get_workloads_and_clusterqueues(kubectl: Kubectl) -> None:
    res = await kubectl.apply(job("queued", queue="user-queue", run_seconds=1))
    assert res.code == 0, res.err
    waited = await kubectl("wait", "--for=condition=complete", "job/queued", "--timeout=60s", timeout=90)
    assert waited.code == 0, waited.err
    assert waited.out.strip() == "job.batch/queued condition met"

    names, rows = table(await kubectl.ok("get", "jobs"))
    assert {r["NAME"]: r for r in rows}["queued"]["STATUS"] == "Complete"
    assert {r["NAME"]: r for r in rows}["queued"]["COMPLETIONS"] == "1/1"

    # Kueue's CRD printer columns for Workloads.
    names, rows = table(await kubectl.ok("get", "workloads"))
    assert names == ["NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "AGE"]
    assert len(rows) == 1
    wl = rows[0]
    assert wl["NAME"].startswith("job-queued-")
    assert (wl["QUEUE"], wl["RESERVED IN"], wl["ADMITTED"], wl["FINISHED"]) == ("user-queue", "default", "True", "True")

    # ClusterQueues: Strategy and Admitted Workloads are priority-1 columns, shown with -o wide.
    names, rows = table(await kubectl.ok("get", "clusterqueues"))
    assert names == ["NAME", "COHORT", "PENDING WORKLOADS", "AGE"]
    by_name = {r["NAME"]: r for r in rows}
    assert set(by_name) == {"default", "team-a", "team-b"}
    assert by_name["default"]["COHORT"] == "org"
    assert by_name["default"]["PENDING WORKLOADS"] == "0"
    names, rows = table(await kubectl.ok("get", "cq", "-o", "wide"))
    assert names == ["NAME", "COHORT", "STRATEGY", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "AGE"]
    assert {r["NAME"]: r for r in rows}["default"]["STRATEGY"] == "BestEffortFIFO"

    names, rows = table(await kubectl.ok("get", "localqueues"))
    assert names == ["NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "AGE"]
    assert rows[0]["NAME"] == "user-queue" and rows[0]["CLUSTERQUEUE"] == "default"


async def test_delete_job_removes_its_pods(kubectl: Kubectl) -> None:
    # Not suspended, not queued: the job controller starts a pod at once; it runs long enough to be deleted.
    assert (await kubectl.apply(job("doomed", suspend=False, run_seconds=600))).code == 0

    async def pod_names() -> list[str]:
        out = await kubectl.ok("get", "pods", "-l", "job-name=doomed", "-o", "name")
        return out.split()

    pods = await wait_until(pod_names, "the Job's pod")
    assert len(pods) == 1 and pods[0].startswith("pod/doomed-")
    res = await kubectl("delete", "job", "doomed")
    assert res.code == 0, res.err
    assert 'job.batch "doomed" deleted' in res.out
    missing = await kubectl("get", "job", "doomed")
    assert missing.code != 0
    assert 'jobs.batch "doomed" not found' in missing.err

    async def no_pods() -> bool:
        return not await pod_names()

    await wait_until(no_pods, "the Job's pods to be garbage collected")


# ---- explain, raw, auth ------------------------------------------------------------------------------------------


async def test_explain_builtin_and_crd_fields(kubectl: Kubectl) -> None:
    out = await kubectl.ok("explain", "job.spec.parallelism")
    lines = out.splitlines()
    assert "GROUP:      batch" in lines
    assert "KIND:       Job" in lines
    assert "VERSION:    v1" in lines
    assert "FIELD: parallelism <integer>" in lines
    assert "maximum desired number of pods" in out

    out = await kubectl.ok("explain", "clusterqueue.spec")
    lines = out.splitlines()
    assert "GROUP:      kueue.x-k8s.io" in lines
    assert "KIND:       ClusterQueue" in lines
    assert "FIELD: spec <Object>" in lines
    fields = {line.split()[0] for line in lines if line.startswith("  ") and not line.startswith("    ")}
    assert {"cohortName", "namespaceSelector", "queueingStrategy", "resourceGroups", "preemption"} <= fields

    out = await kubectl.ok("explain", "workloads.spec.podSets", "--api-version", "kueue.x-k8s.io/v1beta2")
    assert "FIELD: podSets <[]Object>" in out.splitlines()


async def test_get_raw_version(kubectl: Kubectl) -> None:
    version = json.loads(await kubectl.ok("get", "--raw", "/version"))
    assert (version["major"], version["minor"]) == ("1", "36")
    assert version["gitVersion"].startswith("v1.36.")
    out = await kubectl.ok("version", "-o", "json")
    assert json.loads(out)["serverVersion"]["gitVersion"] == version["gitVersion"]


async def test_wrong_token_is_unauthorized(kubectl: Kubectl) -> None:
    config = kubectl.cluster.kubeconfig()
    config["users"][0]["user"]["token"] = "not-the-token"
    bad = kubectl.write_kubeconfig("bad.kubeconfig", config)
    res = await kubectl("get", "jobs", kubeconfig=bad)
    assert res.code != 0
    # Discovery fails first; client-go words that 401 as a real cluster's expired token shows it.
    assert "error: You must be logged in to the server (" in res.err
    # A raw request decodes the 401 Status body: reason Unauthorized.
    raw = await kubectl("get", "--raw", "/api/v1/namespaces", kubeconfig=bad)
    assert raw.code != 0
    assert "error: You must be logged in to the server (Unauthorized)" in raw.err
    # A token that does not authenticate is refused even on /version (checked on the real rig: kube-apiserver
    # never falls back to anonymous for a bad credential).
    refused = await kubectl("get", "--raw", "/version", kubeconfig=bad)
    assert refused.code != 0 and "(Unauthorized)" in refused.err


async def test_server_certificate_is_verified(kubectl: Kubectl) -> None:
    config = kubectl.cluster.kubeconfig()
    assert config["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
    # Without the CA, kubectl refuses the self-signed certificate: the kubeconfig's CA is what makes it trusted.
    del config["clusters"][0]["cluster"]["certificate-authority-data"]
    untrusted = kubectl.write_kubeconfig("untrusted.kubeconfig", config)
    res = await kubectl("get", "--raw", "/version", kubeconfig=untrusted)
    assert res.code != 0
    assert "certificate signed by unknown authority" in res.err
    # Through "localhost" too (the certificate names DNS:localhost and IP:127.0.0.1).
    config = kubectl.cluster.kubeconfig()
    config["clusters"][0]["cluster"]["server"] = config["clusters"][0]["cluster"]["server"].replace(
        "127.0.0.1", "localhost"
    )
    by_name = kubectl.write_kubeconfig("localhost.kubeconfig", config)
    assert (await kubectl("get", "namespaces", kubeconfig=by_name)).code == 0


async def test_restart_fault_keeps_port_and_certificate(kubectl: Kubectl) -> None:
    url = kubectl.cluster.url
    await kubectl.cluster.set_fault("restart", downtime=0.1)
    assert kubectl.cluster.url == url
    # The kubeconfig written before the restart still works: same port, same CA.
    _, rows = table(await kubectl.ok("get", "namespaces"))
    assert "default" in {r["NAME"] for r in rows}


async def test_plain_http_option(tmp_path: Path) -> None:
    """``ClusterOptions(tls=False)`` serves plain http (for tests that need it); kubectl still reaches the public
    endpoints, and refuses to send the bearer token over http, which is why TLS is the default."""
    cluster = SimCluster("plain", ClusterOptions(tls=False, kueue=False, jobs=False, scheduler=False, kubelet=False))
    await cluster.start()
    try:
        config = cluster.kubeconfig()
        assert cluster.url.startswith("http://127.0.0.1:")
        assert "certificate-authority-data" not in config["clusters"][0]["cluster"]
        k = Kubectl(cluster, tmp_path / "plain.kubeconfig", tmp_path / "cache", tmp_path)
        k.write_kubeconfig("plain.kubeconfig", config)
        version = json.loads(await k.ok("get", "--raw", "/version"))
        assert version["major"] == "1"
        denied = await k("get", "namespaces")
        assert denied.code != 0 and "You must be logged in to the server" in denied.err
    finally:
        await cluster.stop()
