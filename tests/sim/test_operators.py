"""The simulated JobSet controller, training operator and KubeRay, with and without the simulated Kueue."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from simclient import wait_for

from kubesim.cluster import SimCluster
from kubesim.world import SimWorld, WorldOptions

Obj = dict[str, Any]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WL = "workloads.kueue.x-k8s.io"


def example(kind: str, *, managed: bool = True) -> Obj:
    obj: Obj = yaml.safe_load((EXAMPLES / f"{kind.lower()}.yaml").read_text())
    if not managed:
        holder = obj["spec"]["runPolicy"] if kind in ("PyTorchJob", "TFJob") else obj["spec"]
        holder.pop("managedBy")
    return obj


@pytest.fixture
async def world() -> AsyncIterator[SimWorld]:
    w = SimWorld(WorldOptions(workers=1, gpu_workers=1, default_run_seconds=0.5, tls=False))
    await w.start()
    try:
        yield w
    finally:
        await w.stop()


def get(cluster: SimCluster, obj: Obj) -> Obj | None:
    return cluster.client.get(cluster.client.rt_of(obj), obj["metadata"]["namespace"], obj["metadata"]["name"])


async def test_operators_on_the_manager_leave_objects_managed_by_another_controller_alone(world: SimWorld) -> None:
    manager = world.manager
    objs = [example(k) for k in ("JobSet", "PyTorchJob", "RayJob", "RayCluster")]
    for obj in objs:
        manager.client.create(copy.deepcopy(obj))
    plain = example("JobSet", managed=False)
    plain["metadata"]["name"] = "runs-here"
    manager.client.create(plain)
    # No Kueue on the manager: the unmanaged JobSet gets its Jobs (the proof that the operators run there).
    jobs = manager.client.rt("batch", "Job")
    await wait_for(
        lambda: manager.client.get(jobs, "team-a", "runs-here-leader-0") is not None,
        "the plain JobSet's Jobs on the manager",
        timeout=10,
    )
    for obj in objs:
        assert not (get(manager, obj) or {}).get("status"), f"{obj['kind']} untouched"
    owners = {
        ref["name"]
        for kind in (("batch", "Job"), ("", "Pod"), ("ray.io", "RayCluster"))
        for child in manager.client.list(manager.client.rt(*kind), "team-a")
        for ref in child["metadata"].get("ownerReferences") or []
    }
    assert "runs-here" in owners
    assert not owners & {obj["metadata"]["name"] for obj in objs}, "no children of the handed-over objects"


async def test_kueue_creates_gang_workloads_and_runs_each_kind(world: SimWorld) -> None:
    worker = world.workers[0]
    objs = [example(k, managed=False) for k in ("JobSet", "PyTorchJob", "TFJob", "RayJob", "RayCluster")]
    for obj in objs:
        created = worker.client.create(copy.deepcopy(obj))
        assert created["kind"] and (
            created["spec"].get("suspend") or created["spec"].get("runPolicy", {}).get("suspend")
        ), "Kueue's webhook creates it suspended"
    expected = {
        "JobSet": [("leader", 1), ("workers", 4)],
        "PyTorchJob": [("master", 1), ("worker", 2)],
        "TFJob": [("ps", 1), ("worker", 2)],
        "RayJob": [("head", 1), ("workers", 2), ("submitter", 1)],
        "RayCluster": [("head", 1), ("workers", 2)],
    }

    def workloads() -> dict[str, Obj]:
        return {
            wl["metadata"]["ownerReferences"][0]["kind"]: wl
            for wl in worker.client.list(worker.client.rt("kueue.x-k8s.io", "Workload"), "team-a")
        }

    await wait_for(lambda: len(workloads()) == 5, "a Workload per object", timeout=10)
    for kind, wl in workloads().items():
        assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == expected[kind]

    def done(obj: Obj) -> bool:
        status = (get(worker, obj) or {}).get("status") or {}
        conds = {c["type"]: c["status"] for c in status.get("conditions") or []}
        return {
            "JobSet": lambda: conds.get("Completed") == "True",
            "PyTorchJob": lambda: conds.get("Succeeded") == "True",
            "TFJob": lambda: conds.get("Succeeded") == "True",
            "RayJob": lambda: (
                status.get("jobDeploymentStatus") == "Complete" and status.get("jobStatus") == "SUCCEEDED"
            ),
            "RayCluster": lambda: status.get("state") == "ready",
        }[obj["kind"]]()

    for obj in objs:
        await wait_for(lambda obj=obj: done(obj), f"{obj['kind']} done", timeout=30)
    # The RayJob shut its cluster down when it finished.
    await wait_for(
        lambda: (
            worker.client.get(worker.client.rt("ray.io", "RayCluster"), "team-a", "rayjob-example-raycluster") is None
        ),
        "the RayJob's cluster deleted",
        timeout=10,
    )
