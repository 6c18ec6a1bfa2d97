"""The placement engine: for one pending workload, every worker's verdict and the best worker.

For each worker, in order, the first failing check gives the reason it cannot take the workload:

1. the worker is not Ready, is cordoned, or its capacity view has not synced;
2. the workload's cluster selector excludes it, or it was tried before (admission timeout, rejection);
3. it has as many placements in flight as it allows;
4. no LocalQueue of the workload's queue name in its namespace, or its ClusterQueue is missing/stopped;
5. a requested resource no node of the worker has enough of, even empty (a pod that can never run);
6. the ClusterQueue's free quota, per flavor and counting cohort borrowing, is below the request
   (Kueue's own flavor assignment decides; the reason names the resource and both numbers);
7. HAMi: no node whose GPUs can hold every pod's ``nvidia.com/gpu`` × ``gpumem`` / ``gpucores``.

Feasible workers are scored (:mod:`.scoring`), the best wins, and its capacity is reserved until the
worker's Kueue admits the copy. A verdict depends only on the workload's shape and the worker's
state, so it is cached per (worker, shape) and reused until that worker changes
(:attr:`WorkerCapacity.version`): a decision costs one evaluation per changed worker, not per worker.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from ..config import Policy
from ..quantity import format_kueue_value, kueue_value, parse_quantity
from ..resources import transform
from .quota import (
    FlavorAssignmentMode,
    FlavorResource,
    NodeSelectorRequirement,
    PodSetRequest,
    Toleration,
    assign_flavors,
    pod_constraints,
    preemption_targets,
)
from .scoring import score_verdicts
from .worker import Reservation, WorkerCapacity

__all__ = ["Decision", "GpuFitter", "GpuVerdict", "PendingWorkload", "PlacementEngine", "PodSetSpec", "Verdict"]

Obj = dict[str, Any]

#: Resources HAMi manages on a GPU worker; kube-scheduler (and so the static node check) ignores them there.
HAMI_RESOURCES = frozenset(
    {"nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/gpumem-percentage"}
)


@dataclass(slots=True, frozen=True)
class PodSetSpec:
    """A pod set as the engine keeps it in memory."""

    name: str
    count: int
    #: Per-pod requests, before any worker's Kueue transformations.
    requests: Mapping[str, Fraction]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    node_affinity: tuple[tuple[NodeSelectorRequirement, ...], ...] | None = None
    #: The pod template (for HAMi: annotations and containers); shared, read-only.
    template: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> PodSetSpec:
        """From the pod set as SQL keeps it (``dispatcher.resources.PodSet.to_json`` plus its template)."""
        template = raw.get("template") or {}
        pod_spec = template.get("spec") if isinstance(template, Mapping) else None
        node_selector, tolerations, affinity = pod_constraints(pod_spec if isinstance(pod_spec, Mapping) else {})
        return cls(
            name=str(raw.get("name", "main")),
            count=int(raw.get("count", 1)),
            requests={k: _quantity(v) for k, v in (raw.get("requests") or {}).items()},
            node_selector=node_selector,
            tolerations=tolerations,
            node_affinity=affinity,
            template=template,
        )

    def shape(self) -> tuple[Any, ...]:
        return (
            self.name,
            self.count,
            tuple(sorted(self.requests.items())),
            tuple(sorted(self.node_selector.items())),
            self.tolerations,
            self.node_affinity,
            _gpu_shape(self.template),
        )


@functools.lru_cache(maxsize=4096, typed=True)
def _quantity(value: str | int | float) -> Fraction:
    """``parse_quantity`` for the few distinct request strings that 100,000 workloads repeat (a Fraction is
    immutable, so one is shared by every pod set that asks for the same amount)."""
    return parse_quantity(value)


def _gpu_shape(template: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a template matters to HAMi beyond requests: its selection annotations."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    return tuple(sorted((k, v) for k, v in annotations.items() if k.startswith(("nvidia.com/", "hami.io/"))))


@dataclass(slots=True)
class PendingWorkload:
    """A workload waiting for a worker, as the engine and the pending queue see it."""

    id: int
    uid: str
    namespace: str
    name: str
    queue: str
    priority: int
    created: float
    generation: int
    pod_sets: tuple[PodSetSpec, ...]
    selector: Mapping[str, str] | None = None
    excluded: frozenset[str] = frozenset()
    kind: str = ""
    _shape: tuple[Any, ...] | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def shape(self) -> tuple[Any, ...]:
        """Everything a worker's verdict depends on (cache key)."""
        if self._shape is None:
            self._shape = (self.namespace, self.queue, self.priority, tuple(ps.shape() for ps in self.pod_sets))
        return self._shape

    @property
    def group(self) -> tuple[Any, ...]:
        """Workloads of one group get the same verdicts: if the best of them cannot be placed, none can."""
        return (self.kind, self.shape, tuple(sorted((self.selector or {}).items())), tuple(sorted(self.excluded)))


@dataclass(slots=True)
class GpuVerdict:
    ok: bool
    reason: str = ""
    #: 0..1: packing quality of the chosen GPUs (binpack: tighter is higher; spread: emptier is higher).
    score: float = 0.5
    #: node -> [(device id, mem MiB, cores, slots)] assumed taken if placed.
    allocations: dict[str, list[tuple[str, int, int, int]]] = field(default_factory=dict)


class GpuFitter(Protocol):
    """HAMi fitting of pod sets onto a worker's GPU nodes (see :mod:`.gpu`)."""

    def wants(self, pod_sets: Sequence[PodSetSpec]) -> bool: ...

    def fit(self, worker: WorkerCapacity, pod_sets: Sequence[PodSetSpec], mode: str) -> GpuVerdict: ...


@dataclass(slots=True)
class Verdict:
    """One worker's answer for one workload."""

    cluster: str
    feasible: bool
    reason: str = ""
    #: Not feasible now for a reason that passes by itself (not ready, in-flight limit, quota in use).
    transient: bool = True
    cluster_queue: str | None = None
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)
    terms: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    preempts: int = 0
    gpu: GpuVerdict | None = None
    #: (policy weights, weighted sum, sum of weights) of every term but clusterWeight, kept by the scoring so
    #: that a cached verdict is not summed again for every decision.
    partial: tuple[Any, float, float] | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> Obj:
        out: Obj = {"cluster": self.cluster, "feasible": self.feasible}
        if self.feasible:
            out["score"] = round(self.score, 4)
            out["terms"] = {k: round(v, 4) for k, v in self.terms.items()}
            out["clusterQueue"] = self.cluster_queue
            out["flavors"] = self.flavors
            if self.preempts:
                out["preempts"] = self.preempts
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass(slots=True)
class Decision:
    workload: PendingWorkload
    verdicts: list[Verdict]
    chosen: Verdict | None
    summary: str
    strategy: str = "scored"
    mode: str = "binpack"
    at: float = field(default_factory=time.time)

    def explanation(self) -> Obj:
        """What SQL keeps and ``dispatcher explain`` prints: every worker's score or reason."""
        return {
            "strategy": self.strategy,
            "mode": self.mode,
            "at": self.at,
            "chosen": self.chosen.cluster if self.chosen else None,
            "score": round(self.chosen.score, 4) if self.chosen else None,
            "summary": self.summary,
            "workers": [v.to_json() for v in self.verdicts],
        }

    @property
    def permanent_block(self) -> str | None:
        """When no worker could ever take it (every reason permanent): the reasons, for a Warning Event."""
        if self.chosen is not None or not self.verdicts or any(v.transient for v in self.verdicts):
            return None
        return "; ".join(f"{v.cluster}: {v.reason}" for v in self.verdicts)


def _pod_set_requests(worker: WorkerCapacity, ps: PodSetSpec) -> dict[str, int]:
    """Per-pod Kueue requests of a pod set on this worker (its transformations and exclusions applied)."""
    per_pod = transform(ps.requests, worker.transformations, worker.excluded_prefixes)
    return {k: kueue_value(k, v) for k, v in per_pod.items() if v > 0}


@dataclass(slots=True)
class _ShapeCache:
    """What the engine keeps per workload shape."""

    #: worker name -> (worker version, verdict)
    verdicts: dict[str, tuple[int, Verdict]] = field(default_factory=dict)
    #: worker name -> (its transformations, its excluded prefixes, per-pod-set Kueue requests there)
    requests: dict[str, tuple[Any, Any, list[dict[str, int]]]] = field(default_factory=dict)
    #: whether the shape asks HAMi for vGPUs (None: not known yet)
    wants_gpu: bool | None = None


class PlacementEngine:
    """Verdicts, scores and decisions for pending workloads (no I/O)."""

    def __init__(self, policy: Policy, gpu: GpuFitter | None = None) -> None:
        self.policy = policy
        self.gpu = gpu
        #: shape -> what the engine keeps for it (verdicts per worker, Kueue requests per worker, vGPU or not), so
        #: that a decision hashes the (large) shape once, not once per worker.
        self._cache: dict[tuple[Any, ...], _ShapeCache] = {}
        self._cached = 0
        self.evaluations = 0
        self.cache_hits = 0

    # -- verdicts ------------------------------------------------------------------------------------

    def _pre_check(self, wl: PendingWorkload, w: WorkerCapacity) -> Verdict | None:
        """Checks that depend on the workload's identity, not its shape (never cached)."""
        if w.health != "Ready":
            return Verdict(w.name, False, f"cluster is {w.health}, not Ready")
        if w.cordoned:
            return Verdict(w.name, False, "cluster is cordoned (no new placements)")
        if not w.synced:
            return Verdict(w.name, False, "capacity view of the cluster has not synced yet")
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

    def evaluate(self, wl: PendingWorkload, w: WorkerCapacity) -> Verdict:
        return self._evaluate_cached(wl, w, self._shape_cache(wl))

    def _shape_cache(self, wl: PendingWorkload) -> _ShapeCache:
        entry = self._cache.get(wl.shape)
        if entry is None:
            if self._cached > 200_000:
                self._cache.clear()
                self._cached = 0
            entry = self._cache[wl.shape] = _ShapeCache()
        return entry

    def _evaluate_cached(self, wl: PendingWorkload, w: WorkerCapacity, entry: _ShapeCache) -> Verdict:
        early = self._pre_check(wl, w)
        if early is not None:
            return early
        cached = entry.verdicts.get(w.name)
        if cached is not None and cached[0] == w.version:
            self.cache_hits += 1
            return cached[1]
        verdict = self._evaluate(wl, w, entry)
        self.evaluations += 1
        if cached is None:
            self._cached += 1
        entry.verdicts[w.name] = (w.version, verdict)
        return verdict

    @staticmethod
    def _kueue_requests(wl: PendingWorkload, w: WorkerCapacity, entry: _ShapeCache) -> list[dict[str, int]]:
        """Per-pod Kueue requests of each pod set on ``w``: they change only with its Kueue configuration."""
        hit = entry.requests.get(w.name)
        if hit is not None and hit[0] is w.transformations and hit[1] is w.excluded_prefixes:
            return hit[2]
        requests = [_pod_set_requests(w, ps) for ps in wl.pod_sets]
        entry.requests[w.name] = (w.transformations, w.excluded_prefixes, requests)
        return requests

    def _evaluate(self, wl: PendingWorkload, w: WorkerCapacity, entry: _ShapeCache) -> Verdict:
        cq_name = w.local_queues.get((wl.namespace, wl.queue))
        if cq_name is None:
            return Verdict(w.name, False, f"no LocalQueue {wl.queue} in namespace {wl.namespace}", transient=False)
        cq = w.cluster_queues.get(cq_name)
        if cq is None:
            return Verdict(
                w.name, False, f"LocalQueue {wl.queue} points to ClusterQueue {cq_name}, which does not exist"
            )
        if cq.is_stopped:
            return Verdict(w.name, False, f"ClusterQueue {cq_name} is stopped (stopPolicy {cq.stop_policy})")
        requests = self._kueue_requests(wl, w, entry)
        gpu_worker = w.gpu is not None
        for ps in wl.pod_sets:
            for res, amount in ps.requests.items():
                if amount <= 0 or (gpu_worker and res in HAMI_RESOURCES):
                    continue  # HAMi fits these per GPU below
                cap = w.max_node.get(res)
                if cap is None:
                    what = "HAMi GPU nodes" if res in HAMI_RESOURCES else f"node with {res}"
                    return Verdict(
                        w.name, False, f"pod set {ps.name} asks for {res}; the cluster has no {what}", transient=False
                    )
                value = kueue_value(res, amount)
                if value > cap:
                    return Verdict(
                        w.name,
                        False,
                        f"pod set {ps.name}: one pod asks for {format_kueue_value(res, value)} {res}, "
                        f"the largest node has {format_kueue_value(res, cap)}",
                        transient=False,
                    )
        pod_sets = [
            PodSetRequest(
                name=ps.name,
                count=ps.count,
                requests=req,
                node_selector=ps.node_selector,
                tolerations=ps.tolerations,
                node_affinity=ps.node_affinity,
            )
            for ps, req in zip(wl.pod_sets, requests, strict=True)
        ]
        assignment = assign_flavors(
            w.tree, cq_name, pod_sets, w.flavors, priority=wl.priority, queue_order_time=wl.created, now=time.time()
        )
        mode = assignment.mode
        preempts = 0
        if mode is FlavorAssignmentMode.NO_FIT:
            return Verdict(w.name, False, self._shortfall(w, cq_name, assignment, pod_sets), cluster_queue=cq_name)
        if mode is FlavorAssignmentMode.PREEMPT:
            victims = preemption_targets(
                w.tree, assignment, priority=wl.priority, queue_order_time=wl.created, now=time.time()
            )
            if not victims:
                return Verdict(w.name, False, self._shortfall(w, cq_name, assignment, pod_sets), cluster_queue=cq_name)
            preempts = len(victims)
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
            gpu_verdict = self.gpu.fit(w, wl.pod_sets, self.policy.mode)
            if not gpu_verdict.ok:
                return Verdict(w.name, False, gpu_verdict.reason, cluster_queue=cq_name)
        flavors = {ps.name: {res: a.flavor for res, a in ps.flavors.items()} for ps in assignment.pod_sets}
        verdict = Verdict(
            w.name,
            True,
            cluster_queue=cq_name,
            usage=dict(assignment.usage),
            flavors=flavors,
            preempts=preempts,
            gpu=gpu_verdict,
        )
        verdict.terms = self._terms(w, cq_name, verdict, borrowing=assignment.borrows)
        return verdict

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

    def _terms(self, w: WorkerCapacity, cq: str, v: Verdict, *, borrowing: bool) -> dict[str, float]:
        headroom = 1.0
        for (flavor, res), amount in v.usage.items():
            if amount <= 0:
                continue
            nominal = w.tree.nominal(cq, flavor, res)
            if nominal <= 0:
                share = -1.0
            else:
                used = w.tree.usage(cq, flavor, res)
                share = max(-1.0, min(1.0, (nominal - used - amount) / nominal))
            headroom = min(headroom, (share + 1.0) / 2.0)
        terms = {
            "quotaHeadroom": headroom,
            "backlog": 1.0 / (1.0 + w.pending_by_cq.get(cq, 0) / 10.0),
            "latency": 1.0 / (1.0 + w.latency / 0.1),
        }
        if v.gpu is not None:
            terms["vgpuFit"] = v.gpu.score
        if v.preempts:
            terms["preemption"] = 0.0
        return terms

    # -- decisions -----------------------------------------------------------------------------------

    def decide(self, wl: PendingWorkload, workers: Sequence[WorkerCapacity]) -> Decision:
        entry = self._shape_cache(wl)
        cached = entry.verdicts
        plain = not wl.selector and not wl.excluded
        kind = wl.kind
        verdicts = []
        hits = 0
        for w in workers:
            # The common case inline (a Ready worker with room, a verdict cached at its version): what
            # ``_evaluate_cached`` would do, without a call per worker. Anything else takes the full path.
            hit = cached.get(w.name) if plain else None
            if (
                hit is not None
                and hit[0] == w.version
                and w.health == "Ready"
                and not w.cordoned
                and w.synced
                and not (kind and kind in w.unserved_kinds)
                and w.in_flight < w.max_in_flight
            ):
                hits += 1
                verdicts.append(hit[1])
            else:
                verdicts.append(self._evaluate_cached(wl, w, entry))
        self.cache_hits += hits
        chosen, summary = score_verdicts(verdicts, workers, self.policy)
        return Decision(wl, verdicts, chosen, summary, strategy="scored", mode=self.policy.mode)

    def reserve(self, decision: Decision, workers: Mapping[str, WorkerCapacity]) -> Reservation | None:
        """Hold the chosen worker's capacity for this workload until its Kueue admits the copy."""
        chosen = decision.chosen
        if chosen is None or chosen.cluster_queue is None:
            return None
        reservation = Reservation(
            uid=decision.workload.uid,
            cluster_queue=chosen.cluster_queue,
            usage=chosen.usage,
            gpu=chosen.gpu.allocations if chosen.gpu is not None else {},
        )
        workers[chosen.cluster].reserve(reservation)
        return reservation
