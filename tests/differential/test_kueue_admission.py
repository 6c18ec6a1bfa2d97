"""Kueue admission, differential: the same ClusterQueue/cohort/flavor setups and Job streams admitted by real Kueue
(the real rig's worker-2) and by the simulator's Kueue, and the product's quota model asked, before each Job, what
real Kueue will do with it.

Each scenario is submitted one Job at a time; after each, Kueue is left to settle and the outcome recorded: admitted
(with the flavors it assigned) or pending, and which running workloads it preempted. The real rig's outcomes are the
truth: the simulator must match them step by step, and so must the quota model's prediction (``Fit``: admitted with
those flavors and no preemption; ``Preempt``: admitted after preempting; ``NoFit``: pending).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from realrig import RealRig, clean

from dispatcher.config import KubeconfigRef
from dispatcher.kube.client import ClusterClient, KubeError, Resource, connect
from dispatcher.placement.kueue.assignment import FlavorAssignmentMode, preemption_targets
from dispatcher.placement.kueue.flavors import assign_flavors
from dispatcher.placement.kueue.specs import ClusterQueueSpec, CohortSpec, ResourceFlavorSpec
from dispatcher.placement.kueue.tree import QuotaTree
from dispatcher.placement.kueue.workloads import AdmittedWorkload, workload_pod_sets
from dispatcher.placement.partial import partial_counts

Obj = dict[str, Any]
KUEUE = "kueue.x-k8s.io"
FLAVORS = Resource(KUEUE, "v1beta2", "resourceflavors", "ResourceFlavor", namespaced=False)
CQS = Resource(KUEUE, "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
COHORTS = Resource(KUEUE, "v1beta2", "cohorts", "Cohort", namespaced=False)
LQS = Resource(KUEUE, "v1beta2", "localqueues", "LocalQueue")
WORKLOADS = Resource(KUEUE, "v1beta2", "workloads", "Workload")
JOBS = Resource("batch", "v1", "jobs", "Job")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
PRIORITY = {"low": 100, "high": 1000}


@dataclass(frozen=True)
class Step:
    queue: str  # "a" or "b": the LocalQueue (and ClusterQueue) of the scenario
    cpu: str  # per pod
    priority: str | None = None
    parallelism: int = 1  # pods (and completions)
    min_parallelism: int | None = None  # kueue.x-k8s.io/job-min-parallelism: partial admission down to that
    node_selector: dict[str, str] | None = None  # the pod template's nodeSelector


@dataclass(frozen=True)
class Scenario:
    name: str
    #: ClusterQueue "a"/"b": list of (flavor, nominal, borrowingLimit, lendingLimit) and extra spec fields.
    queues: dict[str, tuple[list[tuple[str, str, str | None, str | None]], Obj]]
    steps: list[Step]
    flavors: tuple[str, ...] = ("f1",)
    cohort: Obj = field(default_factory=dict)  # the Cohort's spec (its own quota, hierarchical cohorts)
    flavor_labels: dict[str, dict[str, str]] = field(default_factory=dict)  # ResourceFlavor nodeLabels per flavor


def _resources(nominal: str, borrowing: str | None, lending: str | None) -> Obj:
    r: Obj = {"name": "cpu", "nominalQuota": nominal}
    if borrowing is not None:
        r["borrowingLimit"] = borrowing
    if lending is not None:
        r["lendingLimit"] = lending
    return r


ZONE = "diff.kueue-dispatcher.io/zone"
POB_A = {
    "preemption": {
        "withinClusterQueue": "LowerPriority",
        "reclaimWithinCohort": "LowerPriority",
        "borrowWithinCohort": {"policy": "LowerPriority"},
    },
    "flavorFungibility": {
        "whenCanBorrow": "TryNextFlavor",
        "whenCanPreempt": "TryNextFlavor",
        "preference": "PreemptionOverBorrowing",
    },
}

SCENARIOS = [
    Scenario(
        "borrow",  # borrowing up to a's borrowingLimit; b gets what is left; no reclaim
        {"a": ([("f1", "4", "2", None)], {}), "b": ([("f1", "4", None, None)], {})},
        [Step("a", "3"), Step("a", "3"), Step("a", "1"), Step("b", "3"), Step("b", "2")],
    ),
    Scenario(
        "lend",  # a lends at most 1 of its 4; b borrows it; a cannot take back what b holds without reclaim
        {"a": ([("f1", "4", None, "1")], {}), "b": ([("f1", "4", None, None)], {})},
        [Step("b", "5"), Step("b", "1"), Step("a", "3"), Step("a", "1")],
    ),
    Scenario(
        "preempt",  # within the ClusterQueue, a higher priority preempts a lower one
        {
            "a": ([("f1", "4", None, None)], {"preemption": {"withinClusterQueue": "LowerPriority"}}),
            "b": ([("f1", "4", None, None)], {}),
        },
        [Step("a", "3", "low"), Step("a", "1", "low"), Step("a", "3", "high"), Step("a", "2", "low")],
    ),
    Scenario(
        "reclaim",  # b takes back its nominal quota from a workload of a that borrowed it
        {
            "a": ([("f1", "4", None, None)], {}),
            "b": ([("f1", "4", None, None)], {"preemption": {"reclaimWithinCohort": "Any"}}),
        },
        [Step("a", "4"), Step("a", "3"), Step("b", "3"), Step("b", "2")],
    ),
    Scenario(
        "fungible",  # two flavors in one resource group: the first that fits, then the next
        {"a": ([("f1", "2", None, None), ("f2", "3", None, None)], {}), "b": ([("f1", "0", None, None)], {})},
        [Step("a", "2"), Step("a", "2"), Step("a", "1"), Step("a", "1")],
        flavors=("f1", "f2"),
    ),
    Scenario(
        "trynext",  # whenCanBorrow: TryNextFlavor: a flavor without borrowing beats borrowing in the first one
        {
            "a": (
                [("f1", "2", None, None), ("f2", "4", None, None)],
                {"flavorFungibility": {"whenCanBorrow": "TryNextFlavor"}},
            ),
            "b": ([("f1", "4", None, None), ("f2", "0", None, None)], {}),
        },
        [Step("a", "2"), Step("a", "2"), Step("a", "3"), Step("a", "1"), Step("a", "2")],
        flavors=("f1", "f2"),
    ),
    Scenario(
        "cohortquota",  # the Cohort's own quota, shared by its ClusterQueues
        {"a": ([("f1", "1", None, None)], {}), "b": ([("f1", "1", None, None)], {})},
        [Step("a", "3"), Step("b", "3"), Step("a", "1"), Step("b", "1")],
        cohort={
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "diff-f1", "resources": [_resources("4", None, None)]}],
                }
            ]
        },
    ),
    Scenario(
        "reclaimlow",  # reclaimWithinCohort: LowerPriority takes back only from lower priorities
        {
            "a": ([("f1", "4", None, None)], {}),
            "b": ([("f1", "4", None, None)], {"preemption": {"reclaimWithinCohort": "LowerPriority"}}),
        },
        [Step("a", "4", "high"), Step("a", "3", "low"), Step("b", "3"), Step("b", "3", "high")],
    ),
    Scenario(
        "partial",  # job-min-parallelism: the largest count that fits (Kueue's PodSetReducer), never below minCount
        {"a": ([("f1", "5", "0", None)], {}), "b": ([("f1", "2", None, None)], {})},
        [
            Step("a", "1"),
            Step("a", "1", parallelism=8, min_parallelism=2),  # 4 of 8: a has 4 left and may not borrow
            Step("a", "1", parallelism=3, min_parallelism=2),  # nothing left: pending, even at minCount
            Step("b", "1", parallelism=3, min_parallelism=1),  # 2 of 3: b's own quota, a lends nothing
        ],
    ),
    Scenario(
        "partialpreempt",  # 6 pods never fit in 4; 4 do once the lower priority Job is preempted
        {
            "a": ([("f1", "4", "0", None)], {"preemption": {"withinClusterQueue": "LowerPriority"}}),
            "b": ([("f1", "0", None, None)], {}),
        },
        [
            Step("a", "1", "low", parallelism=2),
            Step("a", "1", "high", parallelism=6, min_parallelism=2),
        ],
    ),
    Scenario(
        "nodeselector",  # v0.17.0 reduces a node selector to the label keys of all the resource group's flavors
        {"a": ([("zone-a", "1", None, None), ("plain", "4", None, None)], {})},
        [
            Step("a", "2", node_selector={ZONE: "a"}),  # zone-a too small; plain has no zone label: pending
            Step("a", "1", node_selector={ZONE: "a"}),  # zone-a
            Step("a", "2"),  # no selector: zone-a is full, plain
            Step("a", "1", node_selector={"diff.kueue-dispatcher.io/other": "x"}),  # a key no flavor labels: plain
        ],
        flavors=("zone-a", "plain"),
        flavor_labels={"zone-a": {ZONE: "a"}},
    ),
    Scenario(
        "preemptoverborrowing",  # v0.17 isPreferred: no candidates at borrowing 0 beats a fit at borrowing 1
        {
            "a": ([("f1", "4", None, None), ("f2", "0", None, None)], POB_A),
            "b": ([("f1", "0", None, None), ("f2", "2", None, None)], {}),
        },
        [
            Step("b", "4", "high"),  # b borrows all of a's f1
            # a's f1 is lent to a higher priority: no candidates, borrowing 0; f2 fits borrowing 1: f1 kept, pending
            # (Kueue main, kueue#13616, admits it in f2)
            Step("a", "2", "low"),
        ],
        flavors=("f1", "f2"),
    ),
]


@dataclass
class Outcome:
    admitted: bool
    flavors: dict[str, str] = field(default_factory=dict)
    preempted: list[str] = field(default_factory=list)
    predicted: str = ""
    #: The admitted pod count (``podSetAssignments[0].count``), and for a Job allowing partial admission its
    #: ``spec.parallelism`` once Kueue started it.
    count: int | None = None
    parallelism: int | None = None

    def shown(self) -> tuple[bool, dict[str, str], list[str], int | None, int | None]:
        return self.admitted, self.flavors, self.preempted, self.count, self.parallelism


def _cq(sc: Scenario, q: str) -> Obj:
    flavors, extra = sc.queues[q]
    return {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": f"diff-{sc.name}-{q}"},
        "spec": {
            "cohortName": f"diff-{sc.name}",
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": f"diff-{f}", "resources": [_resources(n, b, lend)]} for f, n, b, lend in flavors
                    ],
                }
            ],
            **extra,
        },
    }


def _job(sc: Scenario, i: int, step: Step) -> Obj:
    labels = {f"{KUEUE}/queue-name": step.queue}
    if step.priority:
        labels[f"{KUEUE}/priority-class"] = step.priority
    meta: Obj = {"name": f"j{i}", "namespace": f"diff-{sc.name}", "labels": labels}
    if step.min_parallelism is not None:
        meta["annotations"] = {f"{KUEUE}/job-min-parallelism": str(step.min_parallelism)}
    pod: Obj = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": step.cpu}}}],
    }
    if step.node_selector:
        pod["nodeSelector"] = dict(step.node_selector)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "suspend": True,
            "parallelism": step.parallelism,
            "completions": step.parallelism,
            "template": {"metadata": {"annotations": {"sim.dispatcher.io/run-seconds": "3600"}}, "spec": pod},
        },
    }


def _cond(obj: Obj, ctype: str) -> Obj | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None)


def _true(obj: Obj, ctype: str) -> bool:
    c = _cond(obj, ctype)
    return c is not None and c.get("status") == "True"


async def _create(client: ClusterClient, res: Resource, namespace: str | None, obj: Obj) -> None:
    try:
        await client.create(res, namespace, obj)
    except KubeError as exc:
        if not exc.already_exists:
            raise


async def _eventually(probe: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = await probe()
        if got:
            return got
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def _into_next_second() -> None:
    """Let the next admission fall in a later second than this one.

    Kueue orders preemption candidates by their QuotaReserved time, which the API keeps to the second; two workloads
    admitted within one second tie there, and Kueue's in-memory cache may still order them by the sub-second time
    it assumed, which no client can read. A real cluster cannot predict that either, so the scenarios keep their
    admissions a second apart (CI once saw Kueue preempt the later of two same-second workloads, the model the other
    by UID)."""
    now = time.time()
    await asyncio.sleep(math.floor(now) + 1.05 - now)


async def _setup(client: ClusterClient, sc: Scenario) -> None:
    ns = f"diff-{sc.name}"
    await _create(client, NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for f in sc.flavors:
        spec: Obj = {"nodeLabels": dict(sc.flavor_labels[f])} if f in sc.flavor_labels else {}
        await _create(
            client,
            FLAVORS,
            None,
            {
                "apiVersion": f"{KUEUE}/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": f"diff-{f}"},
                "spec": spec,
            },
        )
    await _create(
        client,
        COHORTS,
        None,
        {
            "apiVersion": f"{KUEUE}/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": f"diff-{sc.name}"},
            "spec": sc.cohort,
        },
    )
    for q in sc.queues:
        await _create(client, CQS, None, _cq(sc, q))
        await _create(
            client,
            LQS,
            ns,
            {
                "apiVersion": f"{KUEUE}/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": q, "namespace": ns},
                "spec": {"clusterQueue": f"diff-{sc.name}-{q}"},
            },
        )

    async def active() -> bool:
        for q in sc.queues:
            obj = await client.get(CQS, None, f"diff-{sc.name}-{q}")
            if obj is None or not _true(obj, "Active"):
                return False
        return True

    await _eventually(active, f"{sc.name}'s ClusterQueues Active")


async def _teardown(client: ClusterClient, sc: Scenario) -> None:
    ns = f"diff-{sc.name}"
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    await client.request("DELETE", JOBS.path(ns), body=body)

    async def no_workloads() -> bool:
        return not (await client.list(WORKLOADS, ns)).get("items")

    await _eventually(no_workloads, f"{sc.name}'s Workloads deleted", timeout=60)
    for q in sc.queues:
        await client.delete(LQS, ns, q)
        await client.delete(CQS, None, f"diff-{sc.name}-{q}")
    await client.delete(COHORTS, None, f"diff-{sc.name}")


def _predict(
    cqs: list[Obj], cohorts: list[Obj], flavors: list[Obj], admitted: list[Obj], job: Obj, sc: Scenario, step: Step
) -> str:
    """What the product's quota model says Kueue will do with ``job``: ``FIT {flavors} x<pods>``, ``PREEMPT
    [victims]`` (the Jobs of the workloads Kueue's preemptor would evict; none: the workload waits) or ``NOFIT``.
    When the full count neither fits nor preempts, fewer pods down to ``minCount`` (:func:`partial_counts`)."""
    tree = QuotaTree([ClusterQueueSpec.from_object(c) for c in cqs], [CohortSpec.from_object(c) for c in cohorts])
    owners = {}
    for wl in admitted:
        tree.add_workload(AdmittedWorkload.from_object(wl))
        owners[wl["metadata"]["name"]] = wl["metadata"]["ownerReferences"][0]["name"]
    pod_set: Obj = {"name": "main", "count": step.parallelism, "template": job["spec"]["template"]}
    if step.min_parallelism is not None:
        pod_set["minCount"] = step.min_parallelism
    wl = {"metadata": {"name": "new"}, "spec": {"podSets": [pod_set]}}
    priority = PRIORITY.get(step.priority or "", 0)
    now = time.time()
    cq = f"diff-{sc.name}-{step.queue}"
    pod_sets = workload_pod_sets(wl)
    rfs = {f["metadata"]["name"]: ResourceFlavorSpec.from_object(f) for f in flavors}
    assignment = assign_flavors(tree, cq, pod_sets, rfs, priority=priority, queue_order_time=now, now=now)
    targets = []
    if assignment.mode == FlavorAssignmentMode.PREEMPT:
        targets = preemption_targets(tree, assignment, priority=priority, queue_order_time=now, now=now)
    if assignment.mode != FlavorAssignmentMode.FIT and not targets:
        partial = partial_counts(tree, cq, pod_sets, rfs, priority=priority, queue_order_time=now, now=now)
        if partial is not None:
            assignment, targets = partial.assignment, partial.targets
    if assignment.mode == FlavorAssignmentMode.FIT:
        flavors_of = {r: a.flavor for ps in assignment.pod_sets for r, a in ps.flavors.items()}
        return f"FIT {flavors_of} x{assignment.pod_sets[0].count}"
    if assignment.mode == FlavorAssignmentMode.PREEMPT:
        return f"PREEMPT {sorted(owners.get(t.workload.key.split('/')[-1], t.workload.key) for t in targets)}"
    return "NOFIT"


async def _run(client: ClusterClient, sc: Scenario) -> tuple[list[Outcome], dict[str, dict[str, str]]]:
    """The scenario's steps on one cluster; returns each step's outcome and the final admitted set."""
    ns = f"diff-{sc.name}"
    await _setup(client, sc)
    outcomes: list[Outcome] = []
    try:
        for i, step in enumerate(sc.steps):
            workloads = (await client.list(WORKLOADS, ns)).get("items") or []
            evicted_before = {w["metadata"]["name"] for w in workloads if _true(w, "Evicted")}
            cqs = [o for o in (await client.list(CQS)).get("items") or [] if o["metadata"]["name"].startswith(ns)]
            cohorts = [o for o in (await client.list(COHORTS)).get("items") or [] if o["metadata"]["name"] == ns]
            flavors = (await client.list(FLAVORS)).get("items") or []
            admitted = [w for w in workloads if _true(w, "QuotaReserved")]
            job = _job(sc, i, step)
            job_name = job["metadata"]["name"]
            predicted = _predict(cqs, cohorts, flavors, admitted, job, sc, step)
            created = await client.create(JOBS, ns, job)
            uid = created["metadata"]["uid"]

            async def settled(
                uid: str = uid, evicted_before: set[str] = evicted_before, step: Step = step, name: str = job_name
            ) -> Outcome | None:
                items = (await client.list(WORKLOADS, ns)).get("items") or []
                mine = [
                    w for w in items if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or [])
                ]
                if not mine:
                    return None
                wl = mine[0]
                victims = sorted(
                    w["metadata"]["ownerReferences"][0]["name"]
                    for w in items
                    if _true(w, "Evicted") and w["metadata"]["name"] not in evicted_before
                )
                # A preemption in flight: a victim still holds its quota.
                if any(_true(w, "Evicted") and _true(w, "QuotaReserved") for w in items):
                    return None
                if _true(wl, "QuotaReserved"):
                    assignment = ((wl["status"].get("admission") or {}).get("podSetAssignments") or [{}])[0]
                    parallelism = None
                    if step.min_parallelism is not None:
                        # Kueue lowers a partially admissible Job's parallelism to the count when it starts it.
                        started = await client.get(JOBS, ns, name)
                        if started is None or started["spec"].get("suspend"):
                            return None
                        parallelism = started["spec"].get("parallelism")
                    flavors = dict(assignment.get("flavors") or {})
                    return Outcome(True, flavors, victims, count=assignment.get("count"), parallelism=parallelism)
                pending = _cond(wl, "QuotaReserved")
                if pending is not None and pending.get("reason") == "Pending":
                    return Outcome(False, {}, victims)
                return None

            outcome = await _eventually(settled, f"{sc.name} step {i} settled")
            # A pending verdict may still turn: give Kueue another moment and read it again.
            if not outcome.admitted:
                await asyncio.sleep(1.5)
                outcome = await _eventually(settled, f"{sc.name} step {i} settled")
            outcome.predicted = predicted
            outcomes.append(outcome)
            if outcome.admitted:
                await _into_next_second()
        final: dict[str, dict[str, str]] = {}
        for w in (await client.list(WORKLOADS, ns)).get("items") or []:
            if _true(w, "QuotaReserved"):
                a = ((w["status"].get("admission") or {}).get("podSetAssignments") or [{}])[0]
                final[w["metadata"]["ownerReferences"][0]["name"]] = dict(a.get("flavors") or {})
        return outcomes, final
    finally:
        await _teardown(client, sc)


def _agrees(o: Outcome) -> bool:
    """The model's prediction agrees with what Kueue did."""
    if o.predicted.startswith("FIT"):
        return o.admitted and not o.preempted and o.predicted == f"FIT {o.flavors} x{o.count}"
    if o.predicted.startswith("PREEMPT"):
        victims = o.predicted.removeprefix("PREEMPT ")
        if victims == "[]":  # Preempt mode without candidates: Kueue leaves it pending
            return not o.admitted and not o.preempted
        return o.admitted and victims == str(o.preempted)
    return not o.admitted and not o.preempted


@pytest.mark.real_rig
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
async def test_kueue_admits_as_predicted(
    scenario: Scenario, backend: str, real_rig: RealRig | None, tmp_path: Path
) -> None:
    world = None
    if real_rig is not None:
        await clean(real_rig)
        client = await real_rig.client("worker-2")
    else:
        from kubesim.world import SimWorld, WorldOptions

        world = SimWorld(WorldOptions(workers=1, gpu_workers=0))
        await world.start()
        await asyncio.to_thread(world.write_files, tmp_path)
        client = await connect("sim-worker", KubeconfigRef(path=str(tmp_path / "worker-1.kubeconfig")))
    try:
        outcomes, final = await _run(client, scenario)
    finally:
        await client.close()
        if world is not None:
            await world.stop()
    table = "\n".join(
        f"  step {i} {s}: admitted={o.admitted} flavors={o.flavors} preempted={o.preempted} count={o.count} "
        f"parallelism={o.parallelism} model={o.predicted}"
        for i, (s, o) in enumerate(zip(scenario.steps, outcomes, strict=True))
    )
    EXPECTED[(scenario.name, backend)] = ([o.shown() for o in outcomes], final)
    disagreements = [i for i, o in enumerate(outcomes) if not _agrees(o)]
    assert not disagreements, f"{backend} Kueue and the quota model disagree at steps {disagreements}:\n{table}"
    for s, o in zip(scenario.steps, outcomes, strict=True):
        if s.min_parallelism is not None and o.admitted:
            assert o.parallelism == o.count, f"{backend} Kueue started the Job with another parallelism:\n{table}"
    other = EXPECTED.get((scenario.name, "real" if backend == "sim" else "sim"))
    if other is not None:
        assert other == EXPECTED[(scenario.name, backend)], f"the simulator and real Kueue differ:\n{table}\n{other}"


#: Outcomes per (scenario, backend), so that whichever backend runs second compares with the first.
EXPECTED: dict[tuple[str, str], Any] = {}
