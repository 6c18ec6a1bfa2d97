"""One worker's verdict for one workload, evaluated in full (checks 1-7 of :mod:`.engine`).

:class:`Evaluator` holds the checks in the engine's order: the worker's own state, then what depends on the
workload's identity (kind served, cluster selector, workers tried before, in-flight limit), then its shape:
LocalQueue and ClusterQueue, the largest node, Kueue's flavor assignment with preemption and partial admission
(:mod:`.kueue.flavors`, :mod:`.partial`), and HAMi's fit (:mod:`.gpu`); with the reason for a worker that cannot
take the workload, naming the resource and both numbers. It is the base of :class:`~.engine.PlacementEngine`,
which keeps these verdicts per workload shape and decides from them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..config import Policy
from ..quantity import format_kueue_value, kueue_value
from ..resources import transform
from .depth import (
    fair_share,
    fair_share_json,
    fair_share_term,
    missing_topology,
    placement_words,
    preemption_words,
    tas_shortfall,
    tas_usage,
    topology_term,
)
from .kueue.assignment import FlavorAssignmentMode, preemption_targets
from .kueue.flavors import assign_flavors
from .kueue.revalidate import FitCheck, fit_checks
from .kueue.workloads import PodSetRequest, pod_requests
from .partial import PartialAdmission, can_be_partially_admitted, partial_counts
from .verdicts import GpuFitter, GpuVerdict, Verdict, _ShapeCache
from .worker import WorkerCapacity, latency_term
from .workload import PendingWorkload, PodSetSpec

__all__ = ["Evaluator"]


#: Resources HAMi manages on a GPU worker; kube-scheduler (and so the static node check) ignores them there.
HAMI_RESOURCES = frozenset(
    {"nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/gpumem-percentage"}
)


def _never_fits_quota(w: WorkerCapacity, cq: str, pod_sets: Sequence[PodSetRequest]) -> str | None:
    """Why the ClusterQueue could never admit these pod sets, whatever frees up, or None: some pod set asks for
    more of a resource than any flavor of its resource group could ever hold (``PotentialAvailable``: nominal quota
    plus what the cohort could lend, within borrowing and lending limits, with nothing in use). Per pod set, so a
    gang that could be split over flavors is never called impossible; a pod set with a ``minCount`` at that many
    pods, since Kueue may admit it partially."""
    spec = w.cluster_queues[cq]
    covered = {r for g in spec.resource_groups for r in g.covered_resources}
    for ps in pod_sets:
        missing = sorted(r for r, v in ps.requests.items() if v and r not in covered)
        if missing:
            return f"ClusterQueue {cq} has no quota for {missing[0]} (not in any resource group's coveredResources)"
        count = ps.count if ps.min_count is None else min(ps.count, ps.min_count)
        for group in spec.resource_groups:
            wanted = {r: ps.requests.get(r, 0) * count for r in group.covered_resources if ps.requests.get(r, 0)}
            if not wanted:
                continue
            best: dict[str, int] = {}
            possible = False
            for flavor in group.flavors:
                room = {r: w.tree.potential_available(cq, flavor.name, r) for r in wanted}
                if all(wanted[r] <= room[r] for r in wanted):
                    possible = True
                    break
                for r, v in room.items():
                    best[r] = max(best.get(r, 0), v)
            if not possible:
                res = next(r for r in sorted(wanted) if wanted[r] > best.get(r, 0))
                least = f" (at its minCount of {count} pods)" if count != ps.count else ""
                return (
                    f"ClusterQueue {cq} can never admit pod set {ps.name}: it asks for "
                    f"{format_kueue_value(res, wanted[res])} {res}{least}, and no flavor could ever hold more than "
                    f"{format_kueue_value(res, best.get(res, 0))} (nominal quota plus what the cohort can lend)"
                )
    return None


def _tas_requests(ps: PodSetSpec) -> dict[str, int]:
    """Per-pod requests TAS places by: the template's own requests (``NewRequestsFromPodSpec``: no limits, no
    transformations)."""
    spec = (ps.template.get("spec") or {}) if ps.template else {}
    return pod_requests(spec if isinstance(spec, dict) else {}, limits_as_requests=False)


def _pod_set_requests(worker: WorkerCapacity, ps: PodSetSpec) -> dict[str, int]:
    """Per-pod Kueue requests of a pod set on this worker (its transformations and exclusions applied; a negative
    output of a transformation stays, as in Kueue)."""
    per_pod = transform(ps.requests, worker.transformations, worker.excluded_prefixes)
    return {k: kueue_value(k, v) for k, v in per_pod.items() if v != 0}


class Evaluator:
    """One worker's verdict for one workload, evaluated afresh (not scored, not cached).

    The base of :class:`~.engine.PlacementEngine`, which sets these attributes: the policy, the HAMi fitter and
    the quota checks of the last ``Fit`` verdict evaluated (for its re-validation).
    """

    policy: Policy
    gpu: GpuFitter | None
    _last_checks: tuple[FitCheck, ...] | None

    # -- verdicts ------------------------------------------------------------------------------------
    @staticmethod
    def _worker_check(w: WorkerCapacity) -> Verdict | None:
        """The checks that depend on the worker alone (cached with the shape's verdicts)."""
        if w.health != "Ready":
            why = f" ({w.health_reason})" if w.health_reason else ""
            return Verdict(w.name, False, f"cluster is {w.health}, not Ready{why}")
        if w.cordoned:
            return Verdict(w.name, False, "cluster is cordoned (no new placements)")
        if not w.synced:
            return Verdict(w.name, False, "capacity view of the cluster has not synced yet")
        return None

    def _pre_check(self, wl: PendingWorkload, w: WorkerCapacity) -> Verdict | None:
        """Checks that depend on the workload's identity, not its shape (never cached)."""
        early = self._worker_check(w)
        if early is not None:
            return early
        return self._workload_check(wl, w)

    @staticmethod
    def _workload_check(wl: PendingWorkload, w: WorkerCapacity) -> Verdict | None:
        if wl.kind and wl.kind in w.unserved_kinds:
            return Verdict(w.name, False, f"the cluster does not serve {wl.kind} (its CRD is not installed)")
        if wl.selector:
            for key, value in wl.selector.items():
                have = w.labels.get(key)
                if have != value:
                    return Verdict(
                        w.name,
                        False,
                        f"excluded by the workload's cluster selector {key}={value} "
                        f"(cluster has {key}={have or '<unset>'})",
                        transient=False,
                    )
        if w.name in wl.excluded:
            return Verdict(
                w.name, False, "tried before for this workload (not admitted in time, or rejected)", transient=False
            )
        if w.in_flight >= w.max_in_flight:
            return Verdict(w.name, False, f"{w.in_flight} placements in flight, the cluster's maximum (maxInFlight)")
        return None

    @staticmethod
    def _kueue_pod_sets(wl: PendingWorkload, w: WorkerCapacity, entry: _ShapeCache) -> list[PodSetRequest]:
        """The pod sets as Kueue's flavor assigner sees them on ``w`` (per-pod requests after its resource
        transformations): they depend only on its Kueue configuration, so workers configured alike share them."""
        key = w.kueue_config_key
        pod_sets = entry.kueue_pod_sets.get(key)
        if pod_sets is None:
            pod_sets = entry.kueue_pod_sets[key] = [
                PodSetRequest(
                    name=ps.name,
                    count=ps.count,
                    requests=_pod_set_requests(w, ps),
                    node_selector=ps.node_selector,
                    tolerations=ps.tolerations,
                    node_affinity=ps.node_affinity,
                    group=ps.topology.group if ps.topology is not None else None,
                    min_count=ps.min_count,
                    topology=ps.topology,
                    tas_requests=_tas_requests(ps),
                )
                for ps in wl.pod_sets
            ]
        return pod_sets

    def _evaluate(
        self, wl: PendingWorkload, w: WorkerCapacity, entry: _ShapeCache
    ) -> tuple[Verdict, tuple[FitCheck, ...] | None]:
        """The verdict in full (Kueue's flavor assignment, then HAMi), and for a Fit the checks that can
        re-validate it."""
        verdict = self._evaluate_verdict(wl, w, entry)
        checks = self._last_checks
        self._last_checks = None
        return verdict, checks if verdict.feasible else None

    def _evaluate_verdict(self, wl: PendingWorkload, w: WorkerCapacity, entry: _ShapeCache) -> Verdict:
        cq_name = w.local_queues.get((wl.namespace, wl.queue))
        if cq_name is None:
            return Verdict(w.name, False, f"no LocalQueue {wl.queue} in namespace {wl.namespace}", transient=False)
        if wl.priority_class and w.priority_classes is not None and wl.priority_class not in w.priority_classes:
            return Verdict(
                w.name,
                False,
                f"no WorkloadPriorityClass {wl.priority_class} on the cluster (its Kueue would not admit the copy)",
                transient=False,
            )
        cq = w.cluster_queues.get(cq_name)
        if cq is None:
            return Verdict(
                w.name, False, f"LocalQueue {wl.queue} points to ClusterQueue {cq_name}, which does not exist"
            )
        if cq.is_stopped:
            return Verdict(w.name, False, f"ClusterQueue {cq_name} is stopped (stopPolicy {cq.stop_policy})")
        inactive = missing_topology(w, cq)
        if inactive is not None:
            return Verdict(w.name, False, inactive, cluster_queue=cq_name)
        gpu_worker = w.gpu is not None
        if entry.pod_values is None:
            entry.pod_values = [
                [(res, kueue_value(res, amount)) for res, amount in ps.requests.items() if amount > 0]
                for ps in wl.pod_sets
            ]
        for ps, values in zip(wl.pod_sets, entry.pod_values, strict=True):
            for res, value in values:
                if gpu_worker and res in HAMI_RESOURCES:
                    continue  # HAMi fits these per GPU below
                cap = w.max_node.get(res)
                if cap is None:
                    what = "HAMi GPU nodes" if res in HAMI_RESOURCES else f"node with {res}"
                    return Verdict(
                        w.name, False, f"pod set {ps.name} asks for {res}; the cluster has no {what}", transient=False
                    )
                if value > cap:
                    return Verdict(
                        w.name,
                        False,
                        f"pod set {ps.name}: one pod asks for {format_kueue_value(res, value)} {res}, "
                        f"the largest node has {format_kueue_value(res, cap)}",
                        transient=False,
                    )
        pod_sets = self._kueue_pod_sets(wl, w, entry)
        fair, tas, now = w.fair_sharing, w.tas, time.time()
        assignment = assign_flavors(
            w.tree,
            cq_name,
            pod_sets,
            w.flavors,
            priority=wl.priority,
            queue_order_time=wl.created,
            now=now,
            fair_sharing=fair,
            tas=tas,
        )
        mode = assignment.mode
        preempts = 0
        reasons = ""
        reduced: PartialAdmission | None = None
        if mode is FlavorAssignmentMode.NO_FIT or mode is FlavorAssignmentMode.PREEMPT:
            victims = (
                preemption_targets(
                    w.tree,
                    assignment,
                    priority=wl.priority,
                    queue_order_time=wl.created,
                    now=now,
                    fair_sharing=fair,
                    tas=tas,
                )
                if mode is FlavorAssignmentMode.PREEMPT
                else []
            )
            full = assignment
            if not victims and can_be_partially_admitted(pod_sets):
                # Kueue's scheduler tries fewer pods only now: the full counts neither fit nor preempt.
                reduced = partial_counts(
                    w.tree,
                    cq_name,
                    pod_sets,
                    w.flavors,
                    priority=wl.priority,
                    queue_order_time=wl.created,
                    now=now,
                    fair_sharing=fair,
                    tas=tas,
                )
                if reduced is not None:
                    assignment, victims = reduced.assignment, reduced.targets
            if not victims and reduced is None:
                never = _never_fits_quota(w, cq_name, pod_sets)
                if never is not None:
                    return Verdict(w.name, False, never, cluster_queue=cq_name, transient=False)
                why = tas_shortfall(w, cq_name, full) or self._shortfall(w, cq_name, full, pod_sets)
                if can_be_partially_admitted(pod_sets):
                    why += "; fewer pods, down to minCount, do not fit either"
                return Verdict(w.name, False, why, cluster_queue=cq_name)
            preempts = len(victims)
            reasons = preemption_words([v.reason for v in victims])
        gpu_verdict: GpuVerdict | None = None
        if entry.wants_gpu is None:
            entry.wants_gpu = self.gpu is not None and self.gpu.wants(wl.pod_sets)
        if self.gpu is not None and entry.wants_gpu:
            if w.gpu is None:
                return Verdict(
                    w.name,
                    False,
                    "the workload asks for HAMi vGPUs and the cluster has no HAMi GPU nodes",
                    transient=False,
                )
            gpu_verdict = self._fit_gpus(wl, w, entry, self.gpu)
            if not gpu_verdict.ok:
                return Verdict(
                    w.name, False, gpu_verdict.reason, cluster_queue=cq_name, transient=not gpu_verdict.permanent
                )
        flavors = {ps.name: {res: a.flavor for res, a in ps.flavors.items()} for ps in assignment.pod_sets}
        verdict = Verdict(
            w.name,
            True,
            cluster_queue=cq_name,
            usage=dict(assignment.usage),
            flavors=flavors,
            preempts=preempts,
            gpu=gpu_verdict,
            preemption_reasons=reasons,
        )
        if assignment.tas_requests:
            verdict.topology = placement_words(assignment)
            verdict.tas_usage = tas_usage(assignment)
        if reduced is not None:
            requested = sum(ps.count for ps in pod_sets)
            verdict.admitted_share = sum(reduced.counts) / requested if requested else 1.0
            verdict.reduced = reduced.describe(pod_sets)
        verdict.terms = self._terms(w, cq_name, verdict)
        term = topology_term(assignment)
        if term is not None:
            verdict.terms["topology"] = term
        if preempts == 0 and reduced is None:
            # A partial verdict is evaluated afresh each time: its re-validation would have to redo the search.
            self._last_checks = fit_checks(assignment)
        return verdict

    def _fit_gpus(self, wl: PendingWorkload, w: WorkerCapacity, entry: _ShapeCache, gpu: GpuFitter) -> GpuVerdict:
        if entry.gpu_key is None:
            entry.gpu_key = gpu.key(wl.pod_sets, self.policy.mode)
        return gpu.fit(w, wl.pod_sets, self.policy.mode, entry.gpu_key)

    def _shortfall(self, w: WorkerCapacity, cq: str, assignment: Any, pod_sets: Sequence[PodSetRequest]) -> str:
        """Kueue's reason, plus the resource whose request exceeds what any flavor has free, with both numbers."""
        spec = w.cluster_queues[cq]
        totals: dict[str, int] = {}
        for ps in pod_sets:
            for res, v in ps.requests.items():
                totals[res] = totals.get(res, 0) + v * ps.count
        covered = {r for g in spec.resource_groups for r in g.covered_resources}
        for res in sorted(totals):
            if res not in covered:
                return f"ClusterQueue {cq} has no quota for {res} (not in any resource group's coveredResources)"
        for group in spec.resource_groups:
            for res in group.covered_resources:
                want = totals.get(res)
                if not want:
                    continue
                best_flavor, best_free = None, -1
                for flavor in group.flavors:
                    free = w.tree.available(cq, flavor.name, res)
                    if free > best_free:
                        best_flavor, best_free = flavor.name, free
                if best_flavor is not None and want > best_free:
                    where = ""
                    if len(pod_sets) > 1:  # a gang: name the pod set that no longer fits after those before it
                        so_far = 0
                        for ps in pod_sets:
                            so_far += ps.requests.get(res, 0) * ps.count
                            if so_far > best_free:
                                where = f"pod set {ps.name} does not fit with the pod sets before it: "
                                break
                    elif pod_sets:
                        where = f"pod set {pod_sets[0].name}: "
                    return (
                        f"ClusterQueue {cq}: {where}{res} requested {format_kueue_value(res, want)}, "
                        f"free {format_kueue_value(res, max(best_free, 0))} in flavor {best_flavor} "
                        f"(cohort borrowing included)"
                    )
        message = assignment.message() if hasattr(assignment, "message") else ""
        return f"ClusterQueue {cq}: {message}" if message else f"ClusterQueue {cq} cannot admit it"

    def _terms(self, w: WorkerCapacity, cq: str, v: Verdict) -> dict[str, float]:
        share = w.tree.headroom(cq, v.usage)
        terms = {
            "quotaHeadroom": (share + 1.0) / 2.0,
            "backlog": 1.0 / (1.0 + w.pending_by_cq.get(cq, 0) / 10.0),
            "latency": latency_term(w.latency),
        }
        if v.gpu is not None:
            terms["vgpuFit"] = v.gpu.score
        if v.preempts:
            terms["preemption"] = 0.0
        drs = fair_share(w, cq, v.usage)
        if drs is not None:
            terms["fairShare"] = fair_share_term(drs)
            v.fair_share = fair_share_json(drs)
        return terms
