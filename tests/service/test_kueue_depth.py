"""Fair sharing and topology aware scheduling end to end (issue "Kueue in depth", items 2, 3 and 5), on the simulator
and on the real rig: the decision ``dispatcher explain`` shows (the worker, the rack, the workloads Kueue would
preempt and why) is where and how the worker's Kueue admits the copy.

- TAS: every worker gets a TAS flavor over block ``b1`` of the shared topology (kubesim/topology.py: racks of two
  8-CPU nodes), a ClusterQueue and a LocalQueue for it; Jobs sent to the workers directly fill the racks of two of
  them; a Job of 8 pods that requires one rack fits only in worker-1's free rack, and worker-1's Kueue puts it there.
- Fair sharing: worker-1's Kueue runs with ``fairSharing``; on every worker team-b's Job borrows the whole cohort; a
  team-a Job that must borrow is admitted only where fair sharing lets team-a preempt the borrower
  (``InCohortFairSharing``); classical preemption finds no candidate for a borrowing preemptor.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import JOBS, Rig, eventually, job, start_rig, stop_rig
from realrig import RealRig

from dispatcher.explain import render_decision
from dispatcher.kube.client import ClusterClient, KubeError, Resource
from dispatcher.placement.kueue.topology import decode_assignment
from dispatcher.store.models import WorkloadState
from kubesim.topology import (
    BLOCK_LABEL,
    KUEUE_CONFIG_KEY,
    KUEUE_CONFIG_NAME,
    KUEUE_CONFIG_NAMESPACE,
    RACK_LABEL,
    TOPOLOGY_NAME,
)

KUEUE = "kueue.x-k8s.io"
WORKLOADS = Resource(KUEUE, "v1beta2", "workloads", "Workload")
FLAVORS = Resource(KUEUE, "v1beta2", "resourceflavors", "ResourceFlavor", namespaced=False)
CQS = Resource(KUEUE, "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
LQS = Resource(KUEUE, "v1beta2", "localqueues", "LocalQueue")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
REQUIRED = f"{KUEUE}/podset-required-topology"
Obj = dict[str, Any]

TAS_FLAVOR, TAS_CQ, TAS_QUEUE = "depth-tas", "depth-tas", "depth-tas"
#: Pods of 1.9 CPU: four to an 8-CPU node even beside small pods of the cluster's own.
POD_CPU = "1900m"
FAIR_SHARING: Obj = {"fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}


def _racked(name: str, parallelism: int, *, queue: str = TAS_QUEUE, seconds: float = 3600) -> Obj:
    """A Job of ``parallelism`` pods that requires one rack (the annotation is on the pod template, as Kueue reads)."""
    obj = job(name, cpu=POD_CPU, parallelism=parallelism, seconds=seconds, queue=queue)
    obj["spec"]["template"]["metadata"]["annotations"][REQUIRED] = RACK_LABEL
    return obj


async def _tas_queue(client: ClusterClient) -> None:
    """A TAS flavor over block b1's nodes (Kueue requires node labels on one), its ClusterQueue and LocalQueue."""
    flavor = {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": TAS_FLAVOR},
        "spec": {"nodeLabels": {BLOCK_LABEL: "b1"}, "topologyName": TOPOLOGY_NAME},
    }
    quota = [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "256Gi"}]
    cq = {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": TAS_CQ},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {"coveredResources": ["cpu", "memory"], "flavors": [{"name": TAS_FLAVOR, "resources": quota}]}
            ],
        },
    }
    lq = {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": TAS_QUEUE, "namespace": "team-a"},
        "spec": {"clusterQueue": TAS_CQ},
    }
    await client.create(FLAVORS, None, flavor)
    await client.create(CQS, None, cq)
    await client.create(LQS, "team-a", lq)


async def _drop_tas_queue(client: ClusterClient) -> None:
    """What :func:`_tas_queue` made, and the Jobs in its queue (the real rig outlives the test)."""
    for name in ("fill-1", "fill-2", "racked"):
        with contextlib.suppress(KubeError):
            await client.delete(JOBS, "team-a", name)
    for res, ns, name in ((LQS, "team-a", TAS_QUEUE), (CQS, None, TAS_CQ), (FLAVORS, None, TAS_FLAVOR)):
        with contextlib.suppress(KubeError):
            await client.delete(res, ns, name)


async def _workload_of(client: ClusterClient, namespace: str, job_name: str) -> Obj | None:
    for wl in (await client.list(WORKLOADS, namespace)).get("items") or []:
        owners = {o.get("name") for o in wl["metadata"].get("ownerReferences") or [] if o.get("kind") == "Job"}
        if job_name in owners:
            return dict(wl)
    return None


async def _admitted(client: ClusterClient, namespace: str, job_name: str, what: str) -> Obj:
    async def probe() -> Obj | None:
        wl = await _workload_of(client, namespace, job_name)
        return wl if wl is not None and (wl.get("status") or {}).get("admission") else None

    return await eventually(probe, timeout=60, what=what)


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


async def _racks_of(client: ClusterClient, wl: Obj) -> dict[str, int]:
    """The racks of a Workload's topology assignment, with their pods."""
    racks = {
        n["metadata"]["name"]: n["metadata"]["labels"].get(RACK_LABEL, "") for n in (await client.list(NODES))["items"]
    }
    out: dict[str, int] = {}
    for psa in wl["status"]["admission"]["podSetAssignments"]:
        placed = decode_assignment(psa.get("topologyAssignment"))
        assert placed is not None, f"no topology assignment in {psa}"
        for d in placed.domains:
            rack = racks[d.values[-1]]
            out[rack] = out.get(rack, 0) + d.count
    return out


@pytest.mark.real_rig
async def test_a_job_that_requires_one_rack_goes_where_a_rack_holds_it(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    r = await start_rig(tmp_path, db_url, real=real_rig)
    try:
        for client in r.workers.values():
            await _tas_queue(client)
        # worker-1: 2 pods in one rack (it holds 6 more; the other rack 8). worker-2, worker-3: 6 pods in each rack
        # (4 on one node, 2 on the other: 2 more fit per rack).
        fills = {"worker-1": ["fill-1"], "worker-2": ["fill-1", "fill-2"], "worker-3": ["fill-1", "fill-2"]}
        used: dict[str, dict[str, int]] = {}
        for wname, names in fills.items():
            client, used[wname] = r.workers[wname], {}
            for name in names:
                await client.create(JOBS, "team-a", _racked(name, 2 if wname == "worker-1" else 6))
                wl = await _admitted(client, "team-a", name, f"{wname}'s {name} admitted")
                for rack, n in (await _racks_of(client, wl)).items():
                    used[wname][rack] = used[wname].get(rack, 0) + n
        assert used["worker-1"] in ({"r1": 2}, {"r2": 2}), used
        assert used["worker-2"] == used["worker-3"] == {"r1": 6, "r2": 6}, used

        async def seen() -> bool | None:
            return all(len(r.dispatcher.capacities[w].tas.usage) == len(n) for w, n in fills.items()) or None

        await eventually(seen, timeout=20, what="the dispatcher sees the workers' topology assignments")

        await r.submit(_racked("racked", 8, seconds=30))
        row = await r.wait_state(
            "team-a", "racked", WorkloadState.ADMITTED, WorkloadState.RUNNING, WorkloadState.SUCCEEDED, timeout=60
        )
        decision = row.last_decision
        assert row.cluster == "worker-1" and decision is not None, decision
        verdicts = {w["cluster"]: w for w in decision["workers"]}
        assert verdicts["worker-1"]["topology"] == "pod set main: 8 pods in one rack"
        for wname in ("worker-2", "worker-3"):
            assert not verdicts[wname]["feasible"]
            assert (
                f"pod set main needs 8 pods in one rack; largest free rack on {wname} holds 2"
                in verdicts[wname]["reason"]
            ), verdicts[wname]
        rendered = "\n".join(render_decision(decision))
        assert "topology: pod set main: 8 pods in one rack" in rendered

        # worker-1's Kueue admits the copy in one rack: the one the fill left free.
        client = r.workers["worker-1"]
        wl = await _admitted(client, "team-a", "racked", "the copy admitted on worker-1")
        placed = await _racks_of(client, wl)
        assert len(placed) == 1 and set(placed) != set(used["worker-1"]) and sum(placed.values()) == 8, placed

        async def running() -> bool | None:
            pods = (await client.list(PODS, "team-a")).get("items") or []
            mine = [
                p for p in pods if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == "racked"
            ]
            nodes = [p["spec"].get("nodeName") for p in mine if not p["spec"].get("schedulingGates")]
            return (len(nodes) == 8 and all(nodes)) or None

        await eventually(running, timeout=60, what="the copy's 8 pods ungated and bound to nodes")
    finally:
        for client in r.workers.values():
            await _drop_tas_queue(client)
        await stop_rig(r)


async def _kueue_config(r: Rig, worker: str, extra: Obj | None) -> None:
    """Merge ``extra`` into a CPU worker's Kueue Configuration (``None``: back to the rig's own): the real rig restarts
    its Kueue with it; the simulated Kueue and the dispatcher read the ConfigMap."""
    if r.real is not None:
        await r.real.post(f"/clusters/{worker}/kueue-config", {"extra": extra or {}})
        return
    client = r.workers[worker]
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **(extra or {})}
    data = {KUEUE_CONFIG_KEY: yaml.safe_dump(config)}
    if await client.get(CONFIGMAPS, KUEUE_CONFIG_NAMESPACE, KUEUE_CONFIG_NAME) is None:
        body = {"metadata": {"name": KUEUE_CONFIG_NAME, "namespace": KUEUE_CONFIG_NAMESPACE}, "data": data}
        await client.create(CONFIGMAPS, KUEUE_CONFIG_NAMESPACE, {"apiVersion": "v1", "kind": "ConfigMap", **body})
    else:
        await client.patch(CONFIGMAPS, KUEUE_CONFIG_NAMESPACE, KUEUE_CONFIG_NAME, {"data": data})


@pytest.mark.real_rig
async def test_fair_sharing_lets_a_borrowing_job_preempt_on_the_worker_that_has_it(
    tmp_path: Path, db_url: str, real_rig: RealRig | None
) -> None:
    r = await start_rig(tmp_path, db_url, real=real_rig)
    try:
        await _kueue_config(r, "worker-1", FAIR_SHARING)

        async def fair() -> bool | None:
            return r.dispatcher.capacities["worker-1"].fair_sharing is not None or None

        await eventually(fair, timeout=60, what="the dispatcher reads worker-1's fair sharing")
        # team-b borrows all the cohort's 24 CPUs on every worker (4 pods of 6 CPUs, one to a node).
        hogs, caps = [], []
        for wname, client in r.workers.items():
            hog = job("hog", "team-b", cpu="6", parallelism=4, seconds=3600)
            await client.create(JOBS, "team-b", hog)
            hogs.append(await _admitted(client, "team-b", "hog", f"{wname}'s team-b hog admitted"))
            caps.append(r.dispatcher.capacities[wname])

        async def seen() -> bool | None:
            return all(f"team-b/{_name(wl)}" in c._admitted for c, wl in zip(caps, hogs, strict=True)) or None

        await eventually(seen, timeout=20, what="the dispatcher sees the hogs admitted")

        # team-a wants 12 CPUs: 4 beyond its 8. Its share after admission (4 of the 24 the cohort lends) is below
        # team-b's (16 of 24): LessThanInitialShare lets it preempt the hog on worker-1; elsewhere no candidate.
        await r.submit(job("fair", cpu="3", parallelism=4, seconds=30))
        row = await r.wait_state(
            "team-a", "fair", WorkloadState.ADMITTED, WorkloadState.RUNNING, WorkloadState.SUCCEEDED, timeout=60
        )
        decision = row.last_decision
        assert row.cluster == "worker-1" and decision is not None, decision
        verdicts = {w["cluster"]: w for w in decision["workers"]}
        chosen = verdicts["worker-1"]
        assert chosen["preempts"] == 1 and chosen["preemptionReasons"] == "InCohortFairSharing: 1", chosen
        assert chosen["fairShare"]["resource"] == "cpu" and chosen["fairShare"]["share"] > 0, chosen
        assert not verdicts["worker-2"]["feasible"] and not verdicts["worker-3"]["feasible"], verdicts
        assert "(InCohortFairSharing: 1)" in "\n".join(render_decision(decision))

        client = r.workers["worker-1"]

        async def preempted() -> Obj | None:
            wl = await _workload_of(client, "team-b", "hog")
            conds = {c["type"]: c for c in ((wl or {}).get("status") or {}).get("conditions") or []}
            cond = conds.get("Preempted")
            return cond if cond is not None and cond.get("status") == "True" else None

        cond = await eventually(preempted, timeout=60, what="worker-1's hog preempted")
        assert cond["reason"] == "InCohortFairSharing", cond
        await _admitted(client, "team-a", "fair", "the copy admitted on worker-1")
        for wname in ("worker-2", "worker-3"):
            wl = await _workload_of(r.workers[wname], "team-b", "hog")
            assert wl is not None and (wl.get("status") or {}).get("admission"), f"{wname}'s hog still admitted"
    finally:
        with contextlib.suppress(Exception):
            await _kueue_config(r, "worker-1", None)
        for client in r.workers.values():
            with contextlib.suppress(KubeError):
                await client.delete(JOBS, "team-b", "hog")
        await stop_rig(r)
