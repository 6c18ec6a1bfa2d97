"""The simulated Kueue's own admission rules (kubesim/kueue), case by case against Kueue v0.17's source.

Each case names the Kueue function it follows. Where the product's placement model (dispatcher/placement) reads
Kueue differently, the case says so: the simulator keeps Kueue's behaviour and the difference is reported, not
copied.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from kubesim.kueue.admission import decide, search_counts
from kubesim.kueue.flavors import Mode
from kubesim.kueue.queues import ClusterQueueQueue
from kubesim.kueue.quota import AdmittedWorkload, QuotaTree, available, potential_available
from kubesim.kueue.requests import (
    ResourceTransformation,
    effective_requests,
    pod_requests,
    quantity_string,
    workload_pod_sets,
)
from kubesim.kueue.specs import ClusterQueueSpec, CohortSpec, FlavorSpec

Obj = dict[str, Any]


def cq(name: str, flavors: list[tuple[str, str, str | None, str | None]], **spec: Any) -> ClusterQueueSpec:
    """A ClusterQueue with one resource group covering cpu: (flavor, nominal, borrowingLimit, lendingLimit)."""
    resources = []
    for flavor, nominal, borrowing, lending in flavors:
        quota: Obj = {"name": "cpu", "nominalQuota": nominal}
        if borrowing is not None:
            quota["borrowingLimit"] = borrowing
        if lending is not None:
            quota["lendingLimit"] = lending
        resources.append({"name": flavor, "resources": [quota]})
    body = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": resources}], **spec}
    return ClusterQueueSpec.from_object({"metadata": {"name": name}, "spec": body})


def pod_set(cpu: str, count: int = 1, **template: Any) -> Obj:
    return {
        "name": "main",
        "count": count,
        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **template}},
    }


def tree_of(*specs: ClusterQueueSpec, cohorts: tuple[CohortSpec, ...] = ()) -> QuotaTree:
    tree = QuotaTree()
    for c in cohorts:
        tree.set_cohort(c)
    for s in specs:
        tree.set_cluster_queue(s)
    return tree


def admit(
    tree: QuotaTree, key: str, cluster_queue: str, flavor: str, milli: int, priority: int = 0, reserved: float = 2.0
) -> None:
    fr = (flavor, "cpu")
    tree.add_workload(
        AdmittedWorkload(key, cluster_queue, {fr: milli}, frozenset({fr}), priority, 1.0, reserved, uid=key)
    )


# ---- requests (pkg/workload, pkg/resources) ----------------------------------------------------------------------


def test_pod_requests_take_limits_init_containers_sidecars_and_overhead() -> None:
    spec = {
        "containers": [{"resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}}],
        "initContainers": [
            {"resources": {"requests": {"cpu": "3"}}},
            {"restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
            {"resources": {"requests": {"cpu": "2800m"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    # Sidecar 500m stays (1.5 app+sidecar); init peaks: 3, then 2.8+0.5 = 3.3; plus overhead.
    assert pod_requests(spec) == {"cpu": Fraction(34, 10), "memory": Fraction(2**30)}


def test_transformations_use_kueue_quantity_values() -> None:
    """``applyResourceTransformations``: outputs are factor x ``Value()`` (rounded up) of the input; ``multiplyBy``
    multiplies the input by ``Value()`` of that resource, and ``Retain`` keeps the multiplied input. (The product's
    ``dispatcher.resources.transform`` now does the same: tests/placement/kueue/test_transformations.py.)"""
    transformations = [
        ResourceTransformation.from_config(
            {
                "input": "nvidia.com/gpumem",
                "strategy": "Retain",
                "multiplyBy": "nvidia.com/gpu",
                "outputs": {"nvidia.com/total-gpumem": "1"},
            }
        ),
        ResourceTransformation.from_config({"input": "example.com/half", "outputs": {"example.com/credits": "2"}}),
    ]
    got = effective_requests(
        {"nvidia.com/gpu": Fraction(2), "nvidia.com/gpumem": Fraction(1000), "example.com/half": Fraction(1, 2)},
        transformations,
        excluded_prefixes=("example.org/",),
    )
    assert got == {
        "nvidia.com/gpu": 2,
        "nvidia.com/gpumem": 2000,
        "nvidia.com/total-gpumem": 2000,
        "example.com/credits": 2,
        "example.com/half": Fraction(1, 2),
    }


def test_quantity_strings_are_kueues() -> None:
    assert quantity_string("cpu", 1500) == "1500m"
    assert quantity_string("cpu", 2000) == "2"
    assert quantity_string("memory", 3 * 2**30) == "3Gi"
    assert quantity_string("memory", 1_000_000) == "1M"
    assert quantity_string("example.com/gpu", 2000) == "2k"


def test_reclaimable_pods_reduce_the_count_but_not_the_partial_search_base() -> None:
    wl = {
        "spec": {"podSets": [{**pod_set("1", 4), "minCount": 2}]},
        "status": {"reclaimablePods": [{"name": "main", "count": 1}]},
    }
    [ps] = workload_pod_sets(wl)
    assert (ps.count, ps.spec_count, ps.min_count, ps.totals()) == (3, 4, 2, {"cpu": 3000})
    assert ps.scaled(2).totals() == {"cpu": 2000}


# ---- the quota tree (resource_node.go) --------------------------------------------------------------------------


def test_borrowing_and_lending_limits() -> None:
    a = cq("a", [("f", "4", "2", None)], cohortName="co")
    b = cq("b", [("f", "4", None, "1")], cohortName="co")
    tree = tree_of(a, b)
    node_a, node_b = tree.node("a"), tree.node("b")
    fr = ("f", "cpu")
    # a may borrow 2 (its borrowing limit), of the 1 b lends: 5 at most; b keeps 3 for itself and gets a's 4.
    assert (potential_available(node_a, fr), potential_available(node_b, fr)) == (5000, 8000)
    admit(tree, "ns/x", "b", "f", 7000)
    assert (available(node_a, fr), available(node_b, fr)) == (1000, 1000)
    assert node_b.borrowing_with(fr, 0) and not node_a.borrowing_with(fr, 0)


def test_a_cohorts_own_quota_is_shared_by_its_children() -> None:
    a = cq("a", [("f", "1", None, None)], cohortName="co")
    b = cq("b", [("f", "1", None, None)], cohortName="co")
    cohort = CohortSpec.from_object(
        {
            "metadata": {"name": "co"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
                    }
                ]
            },
        }
    )
    tree = tree_of(a, b, cohorts=(cohort,))
    admit(tree, "ns/x", "a", "f", 3000)
    assert available(tree.node("b"), ("f", "cpu")) == 3000
    # Without a lending limit nothing is kept local: all of a's usage counts against the Cohort's 6.
    assert tree.cohorts["co"].usage[("f", "cpu")] == 3000


def test_cohort_cycles_leave_their_cluster_queues_out() -> None:
    cohorts = tuple(
        CohortSpec.from_object({"metadata": {"name": n}, "spec": {"parentName": p}})
        for n, p in (("x", "y"), ("y", "x"))
    )
    tree = tree_of(cq("a", [("f", "1", None, None)], cohortName="x"), cohorts=cohorts)
    assert tree.in_cycle == {"a"} and tree.parent_cohort("a") is None


# ---- flavor assignment (flavorassigner.go) ----------------------------------------------------------------------


def test_node_selector_is_reduced_to_the_label_keys_of_the_whole_resource_group() -> None:
    """``flavorSelector(spec, rg.LabelKeys)``: a flavor without the ``zone`` label does not match a pod selecting a
    zone another flavor of the group defines. (The product's ``flavor_matches_pod_set`` now does the same:
    tests/placement/kueue/test_flavors.py.)"""
    spec = cq("cq", [("zone-a", "1", None, None), ("plain", "4", None, None)])
    flavors = {"zone-a": FlavorSpec("zone-a", {"zone": "a"}), "plain": FlavorSpec("plain")}
    pod_sets = workload_pod_sets({"spec": {"podSets": [pod_set("2", nodeSelector={"zone": "a"})]}})
    d = decide(tree_of(spec), spec, pod_sets, flavors, priority=0, timestamp=0, now=0)
    assert d.assignment.mode is Mode.NO_FIT
    assert "flavor plain doesn't match node affinity" in d.assignment.message()


def test_untolerated_taints_are_printed_as_kueue_prints_them() -> None:
    spec = cq("cq", [("spot", "4", None, None)])
    flavors = {"spot": FlavorSpec("spot", node_taints=({"key": "instance", "value": "spot", "effect": "NoSchedule"},))}
    pod_sets = workload_pod_sets({"spec": {"podSets": [pod_set("1")]}})
    d = decide(tree_of(spec), spec, pod_sets, flavors, priority=0, timestamp=0, now=0)
    assert d.assignment.message() == (
        "couldn't assign flavors to pod set main: untolerated taint {instance spot NoSchedule <nil>} in flavor spot"
    )


def test_preemption_over_borrowing_prefers_less_borrowing_even_without_candidates() -> None:
    """v0.17 ``isPreferred``: with ``PreemptionOverBorrowing`` the borrowing level decides first, so a flavor with no
    preemption candidates but no borrowing beats one that could preempt while borrowing; the Workload stays
    pending. (Kueue main, kueue#13616, ranks "no candidates" below any viable mode and would preempt in f2; the
    product's ``_is_preferred`` follows v0.17 too: tests/placement/kueue/test_flavors.py.)"""
    a = cq(
        "a",
        [("f1", "4", None, None), ("f2", "0", None, None)],
        cohortName="co",
        preemption={
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Never",
            "borrowWithinCohort": {"policy": "LowerPriority"},
        },
        flavorFungibility={
            "whenCanBorrow": "TryNextFlavor",
            "whenCanPreempt": "TryNextFlavor",
            "preference": "PreemptionOverBorrowing",
        },
    )
    b = cq("b", [("f1", "0", None, None), ("f2", "2", None, None)], cohortName="co")
    tree = tree_of(a, b)
    admit(tree, "ns/b1", "b", "f1", 4000)
    admit(tree, "ns/a1", "a", "f2", 2000)
    flavors = {f: FlavorSpec(f) for f in ("f1", "f2")}
    pod_sets = workload_pod_sets({"spec": {"podSets": [pod_set("2")]}})
    d = decide(tree, a, pod_sets, flavors, priority=100, timestamp=10, now=100)
    assert d.assignment.mode is Mode.PREEMPT and not d.targets
    assert d.assignment.pod_sets[0].flavors["cpu"].flavor == "f1"


def test_reclaim_within_cohort_takes_from_the_borrower() -> None:
    a = cq("a", [("f", "2", None, None)], cohortName="co", preemption={"reclaimWithinCohort": "Any"})
    b = cq("b", [("f", "2", None, None)], cohortName="co")
    tree = tree_of(a, b)
    admit(tree, "ns/old", "b", "f", 2000, reserved=1.0)
    admit(tree, "ns/new", "b", "f", 1000, reserved=5.0)
    pod_sets = workload_pod_sets({"spec": {"podSets": [pod_set("2")]}})
    d = decide(tree, a, pod_sets, {"f": FlavorSpec("f")}, priority=0, timestamp=0, now=100)
    # b borrows 1 of a's 2; the most recently reserved candidate goes first and is enough.
    assert d.assignment.mode is Mode.PREEMPT
    assert [(t.workload.key, t.reason) for t in d.targets] == [("ns/new", "InCohortReclamation")]
    assert available(tree.node("a"), ("f", "cpu")) == 1000  # the search left the tree as it was


def test_preemption_gives_back_victims_it_does_not_need() -> None:
    """``fillBackWorkloads``: candidates are removed until the Workload fits, then added back newest first."""
    a = cq("a", [("f", "3", None, None)], preemption={"withinClusterQueue": "LowerPriority"})
    tree = tree_of(a)
    admit(tree, "ns/small", "a", "f", 1000, reserved=5.0)
    admit(tree, "ns/large", "a", "f", 2000, reserved=1.0)
    pod_sets = workload_pod_sets({"spec": {"podSets": [pod_set("2")]}})
    d = decide(tree, a, pod_sets, {"f": FlavorSpec("f")}, priority=10, timestamp=0, now=100)
    assert [(t.workload.key, t.reason) for t in d.targets] == [("ns/large", "InClusterQueue")]


def test_partial_admission_finds_the_largest_count() -> None:
    spec = cq("cq", [("f", "6", None, None)])
    pod_sets = workload_pod_sets({"spec": {"podSets": [{**pod_set("1", 8), "minCount": 4}]}})
    d = decide(tree_of(spec), spec, pod_sets, {"f": FlavorSpec("f")}, priority=0, timestamp=0, now=0)
    assert d.assignment.mode is Mode.FIT
    assert d.assignment.to_admission() == [
        {"name": "main", "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "6"}, "count": 6}
    ]


@pytest.mark.parametrize(
    ("counts", "minimums", "limit", "want"),
    [
        ([1, 2], [None, 2], 2, None),  # podset_reducer_test.go: partial not available
        ([5, 5, 5, 5], [3, 4, 1, 2], 15, 15),
        ([5, 5, 5, 5], [3, None, None, None], 19, 19),
        ([5, 5, 5, 5], [3, 4, 1, 2], 10, 10),
        ([150_000] * 8, [1] * 8, 150_000, 150_000),
    ],
)
def test_pod_set_reducer_search(counts: list[int], minimums: list[int | None], limit: int, want: int | None) -> None:
    def fits(c: list[int]) -> tuple[int | None, bool]:
        return sum(c), sum(c) <= limit

    found, ok = search_counts(counts, minimums, fits)
    assert (found if ok else None) == want


# ---- queues (cluster_queue.go) ----------------------------------------------------------------------------------


def test_a_head_with_flavors_left_to_try_goes_back_at_once() -> None:
    q = ClusterQueueQueue(strict=False)
    q.add(("ns", "a"), (0, 1.0, "1"))
    q.add(("ns", "b"), (0, 2.0, "2"))
    assert q.pop_head() == ("ns", "a")
    q.requeue(("ns", "a"), immediate=True)
    assert q.pop_head() == ("ns", "a") and not q.inadmissible
    q.requeue(("ns", "a"))
    assert q.pop_head() == ("ns", "b") and q.inadmissible == {("ns", "a")}
