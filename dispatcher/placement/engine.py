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
worker's Kueue admits the copy. Checks 4-7 depend only on the workload's shape and the worker's state, so
their verdicts are kept per (shape, worker) with a ranking of the feasible ones, and a decision looks only at
the workers that changed since the last decision of that shape (:class:`PlacementEngine`).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from ..config import Policy
from ..quantity import format_kueue_value, kueue_value, parse_quantity
from ..resources import transform
from .partial import PartialAdmission, can_be_partially_admitted, partial_counts
from .quota import (
    FitCheck,
    FlavorAssignmentMode,
    FlavorResource,
    NodeSelectorRequirement,
    PodSetRequest,
    Toleration,
    assign_flavors,
    fit_checks,
    fits_as_before,
    pod_constraints,
    preemption_targets,
)
from .scoring import best_two, score_verdict, summary
from .worker import JOURNAL, Reservation, WorkerCapacity

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
    #: Kueue's ``minCount``: the worker's Kueue may admit as few pods when all do not fit (partial admission).
    min_count: int | None = None

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> PodSetSpec:
        """From the pod set as SQL keeps it (``dispatcher.resources.PodSet.to_json`` plus its template)."""
        template = raw.get("template") or {}
        pod_spec = template.get("spec") if isinstance(template, Mapping) else None
        node_selector, tolerations, affinity = pod_constraints(pod_spec if isinstance(pod_spec, Mapping) else {})
        min_count = raw.get("minCount")
        return cls(
            name=str(raw.get("name", "main")),
            count=int(raw.get("count", 1)),
            requests={k: _quantity(v) for k, v in (raw.get("requests") or {}).items()},
            node_selector=node_selector,
            tolerations=tolerations,
            node_affinity=affinity,
            template=template,
            min_count=int(min_count) if min_count is not None else None,
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
            self.min_count,
        )


@functools.lru_cache(maxsize=4096, typed=True)
def _quantity(value: str | int | float) -> Fraction:
    """``parse_quantity`` for the few distinct request strings that 100,000 workloads repeat (a Fraction is
    immutable, so one is shared by every pod set that asks for the same amount)."""
    return parse_quantity(value)


def _gpu_shape(template: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a template matters to HAMi beyond the pod's summed requests: its selection annotations, and each
    container's own resources and privilege (HAMi fits per container, and its webhook skips privileged ones:
    two pods with the same sums can need different GPUs)."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    selected = tuple(sorted((k, v) for k, v in annotations.items() if k.startswith(("nvidia.com/", "hami.io/"))))
    spec = template.get("spec") or {}
    containers: list[tuple[Any, ...]] = []
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or ():
            if not isinstance(c, Mapping):
                continue
            resources = c.get("resources") or {}
            limits = resources.get("limits") or {}
            requests = resources.get("requests") or {}
            privileged = bool((c.get("securityContext") or {}).get("privileged"))
            containers.append(
                (group, tuple(sorted(map(str, limits.items()))), tuple(sorted(map(str, requests.items()))), privileged)
            )
    return (selected, tuple(containers))


_SHAPES: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_SHAPES_LIMIT = 65_536


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
    #: The WorkloadPriorityClass its Kueue label names: a worker without it would refuse the copy.
    priority_class: str | None = None
    _shape: tuple[Any, ...] | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def shape(self) -> tuple[Any, ...]:
        """Everything a worker's verdict depends on (cache key)."""
        if self._shape is None:
            shape = (
                self.namespace,
                self.queue,
                self.priority,
                self.priority_class,
                tuple(ps.shape() for ps in self.pod_sets),
            )
            # One tuple per distinct shape, shared by every workload of that shape (100,000 workloads of a few
            # hundred shapes would otherwise hold 100,000 copies).
            if len(_SHAPES) >= _SHAPES_LIMIT:
                _SHAPES.clear()
            self._shape = _SHAPES.setdefault(shape, shape)
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
    #: Not even on the worker's GPUs with nothing running: no amount of waiting helps (until its nodes change).
    permanent: bool = False


class GpuFitter(Protocol):
    """HAMi fitting of pod sets onto a worker's GPU nodes (see :mod:`.gpu`)."""

    def wants(self, pod_sets: Sequence[PodSetSpec]) -> bool: ...

    def key(self, pod_sets: Sequence[PodSetSpec], mode: str) -> Hashable: ...

    def fit(
        self, worker: WorkerCapacity, pod_sets: Sequence[PodSetSpec], mode: str, key: Hashable | None = None
    ) -> GpuVerdict: ...


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
    #: Partial admission: the fraction of the requested pods the worker's Kueue would admit (1.0: all of them),
    #: and what it admits, e.g. ``fits 6 of 8 pods (minCount 4)``.
    admitted_share: float = 1.0
    reduced: str = ""

    def to_json(self) -> Obj:
        out: Obj = {"cluster": self.cluster, "feasible": self.feasible}
        if self.feasible:
            out["score"] = round(self.score, 4)
            out["terms"] = {k: round(v, 4) for k, v in self.terms.items()}
            out["clusterQueue"] = self.cluster_queue
            out["flavors"] = self.flavors
            if self.preempts:
                out["preempts"] = self.preempts
            if self.reduced:
                out["partial"] = self.reduced
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


def _pod_set_requests(worker: WorkerCapacity, ps: PodSetSpec) -> dict[str, int]:
    """Per-pod Kueue requests of a pod set on this worker (its transformations and exclusions applied)."""
    per_pod = transform(ps.requests, worker.transformations, worker.excluded_prefixes)
    return {k: kueue_value(k, v) for k, v in per_pod.items() if v > 0}


#: How many verdicts (workload shapes x workers) the engine keeps; the least recently decided shapes go first.
CACHED_VERDICTS = 250_000


@dataclass(slots=True)
class _Slot:
    """One worker's verdict for one workload shape (the worker-side checks and the evaluation, scored)."""

    worker: WorkerCapacity
    #: The worker's version the verdict is current at.
    version: int
    #: The worker's base version and GPU-view version when it was evaluated (see :meth:`PlacementEngine._refresh`).
    base: int
    gpu: int
    verdict: Verdict
    #: For a ``Fit`` verdict: the quota checks that re-validate it after added usage (``quota.fit_checks``).
    checks: tuple[FitCheck, ...] | None
    #: The root of the verdict's quota tree on the worker: reservations in other trees cannot change it.
    root: str | None
    #: Unique per verdict: a ranking entry with another stamp is stale.
    stamp: int


@dataclass(slots=True)
class _ShapeCache:
    """What the engine keeps per workload shape: every worker's verdict, current as of :attr:`seen`."""

    #: worker name -> its slot, in the order of the fleet the verdicts were last brought up to date for
    slots: dict[str, _Slot] = field(default_factory=dict)
    #: the slots' verdicts in fleet order (copied into each decision)
    listing: list[Verdict] = field(default_factory=list)
    #: feasible verdicts, best first: (-score, worker name, stamp); entries whose stamp is not the slot's are stale
    ranking: list[tuple[float, str, int]] = field(default_factory=list)
    #: the fleet generation and journal sequence number the slots are current for
    fleet: int = -1
    seen: int = -1
    #: Kueue configuration (``WorkerCapacity.kueue_config_key``) -> the pod sets as its flavor assigner sees them
    kueue_pod_sets: dict[str, list[PodSetRequest]] = field(default_factory=dict)
    #: per pod set, each requested resource's per-pod amount in Kueue units (None: not computed yet)
    pod_values: list[list[tuple[str, int]]] | None = None
    #: whether the shape asks HAMi for vGPUs (None: not known yet)
    wants_gpu: bool | None = None
    #: the GPU fitter's key for the shape's pod sets (None: not known yet)
    gpu_key: Hashable | None = None


@dataclass(slots=True)
class _Fleet:
    """The workers decisions are made over (the sequence last passed to :meth:`PlacementEngine.decide`)."""

    generation: int
    ids: tuple[int, ...]
    workers: list[WorkerCapacity]
    members: dict[str, WorkerCapacity]
    index: dict[str, int]
    top_weight: float


def _gpu_version(w: WorkerCapacity) -> int:
    gpus = w.gpu
    return int(getattr(gpus, "version", -1)) if gpus is not None else -1


class PlacementEngine:
    """Verdicts, scores and decisions for pending workloads (no I/O).

    A decision does not look at every worker. Per workload shape the engine keeps every worker's verdict, scored,
    and a ranking of the feasible ones; :data:`~.worker.JOURNAL` says which workers changed since the shape was
    last decided, and only those are looked at again:

    * a change that only added one of our reservations in another quota tree (and took no GPUs, or the shape
      wants none) leaves the verdict as it is;
    * one in the same tree re-validates a ``Fit`` verdict cell by cell (``quota.fits_as_before``) and, when GPUs
      changed, fits the GPUs again (cached per worker);
    * anything else evaluates it again.

    What depends on the workload rather than its shape (cluster selector, workers tried before, the kind being
    served, the in-flight limit) is checked per decision: from the ranking's head for a plain workload, over
    every worker for one with a selector or exclusions.
    """

    def __init__(self, policy: Policy, gpu: GpuFitter | None = None) -> None:
        self.policy = policy
        self.gpu = gpu
        #: shape -> what the engine keeps for it, so that a decision hashes the (large) shape once.
        #: Least recently decided first; at most :data:`CACHED_VERDICTS` verdicts in all (shapes x workers).
        self._cache: OrderedDict[tuple[Any, ...], _ShapeCache] = OrderedDict()
        self._fleet: _Fleet | None = None
        self._stamps = itertools.count(1)
        #: Workers at their in-flight limit, and workers that do not serve some kind (checked per decision).
        self._full: set[str] = set()
        self._unserving: set[str] = set()
        self._dynamic_seen = -1
        self._last_checks: tuple[FitCheck, ...] | None = None
        #: Full evaluations, re-validations of a Fit verdict, and verdicts reused as they were.
        self.evaluations = 0
        self.revalidations = 0
        self.cache_hits = 0

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

    def evaluate(self, wl: PendingWorkload, w: WorkerCapacity) -> Verdict:
        """One worker's verdict for one workload, evaluated afresh (not scored)."""
        return self._pre_check(wl, w) or self._evaluate(wl, w, self._shape_cache(wl))[0]

    def _shape_cache(self, wl: PendingWorkload) -> _ShapeCache:
        cache = self._cache
        entry = cache.get(wl.shape)
        if entry is not None:
            cache.move_to_end(wl.shape)
        else:
            fleet = self._fleet
            keep = max(16, CACHED_VERDICTS // max(1, len(fleet.workers) if fleet is not None else 1))
            while len(cache) >= keep:
                cache.popitem(last=False)
            entry = self._cache[wl.shape] = _ShapeCache()
        return entry

    def _refresh(self, wl: PendingWorkload, w: WorkerCapacity, entry: _ShapeCache, old: _Slot | None) -> _Slot:
        """A current slot for ``w``: the worker checks, then a re-validation of the old Fit verdict when only our
        reservations were added since (same base version), else a full evaluation; scored when feasible."""
        verdict = self._worker_check(w)
        checks: tuple[FitCheck, ...] | None = None
        gpu = _gpu_version(w)
        root: str | None = None
        if verdict is None:
            again = None
            if old is not None and old.checks is not None and old.base == w.base_version and old.worker is w:
                again = self._revalidate(wl, w, entry, old, gpu)
            if again is not None and old is not None:
                verdict, checks = again
                root = old.root  # same queue, same tree: the tree's shape changes only with the base version
                self.revalidations += 1
            else:
                verdict, checks = self._evaluate(wl, w, entry)
                if verdict.cluster_queue:
                    root = w.quota_root(verdict.cluster_queue)
                self.evaluations += 1
        if verdict.feasible:
            fleet = self._fleet
            score_verdict(verdict, w.weight, fleet.top_weight if fleet is not None else 1.0, self.policy)
        return _Slot(w, w.version, w.base_version, gpu, verdict, checks, root, next(self._stamps))

    def _revalidate(
        self, wl: PendingWorkload, w: WorkerCapacity, entry: _ShapeCache, old: _Slot, gpu: int
    ) -> tuple[Verdict, tuple[FitCheck, ...] | None] | None:
        """The old Fit verdict again if its quota checks still pass (same flavors, same borrowing); the GPUs are
        fitted again only if the GPU view changed. ``None``: evaluate in full."""
        v = old.verdict
        cq = v.cluster_queue
        checks = old.checks
        if cq is None or checks is None or not fits_as_before(w.tree, cq, checks):
            return None
        gpu_verdict = v.gpu
        if gpu_verdict is not None and gpu != old.gpu:
            if self.gpu is None:
                return None
            gpu_verdict = self._fit_gpus(wl, w, entry, self.gpu)
            if not gpu_verdict.ok:
                return Verdict(w.name, False, gpu_verdict.reason, cluster_queue=cq), None
        verdict = Verdict(w.name, True, "", True, cq, v.usage, v.flavors, {}, 0.0, 0, gpu_verdict)
        verdict.terms = self._terms(w, cq, verdict)
        return verdict, checks

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
                    min_count=ps.min_count,
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
        assignment = assign_flavors(
            w.tree, cq_name, pod_sets, w.flavors, priority=wl.priority, queue_order_time=wl.created, now=time.time()
        )
        mode = assignment.mode
        preempts = 0
        reduced: PartialAdmission | None = None
        if mode is FlavorAssignmentMode.NO_FIT or mode is FlavorAssignmentMode.PREEMPT:
            victims = (
                preemption_targets(
                    w.tree, assignment, priority=wl.priority, queue_order_time=wl.created, now=time.time()
                )
                if mode is FlavorAssignmentMode.PREEMPT
                else []
            )
            if not victims and can_be_partially_admitted(pod_sets):
                # Kueue's scheduler tries fewer pods only now: the full counts neither fit nor preempt.
                reduced = partial_counts(
                    w.tree,
                    cq_name,
                    pod_sets,
                    w.flavors,
                    priority=wl.priority,
                    queue_order_time=wl.created,
                    now=time.time(),
                )
                if reduced is not None:
                    assignment, victims = reduced.assignment, reduced.targets
            if not victims and reduced is None:
                never = _never_fits_quota(w, cq_name, pod_sets)
                if never is not None:
                    return Verdict(w.name, False, never, cluster_queue=cq_name, transient=False)
                why = self._shortfall(w, cq_name, assignment, pod_sets)
                if can_be_partially_admitted(pod_sets):
                    why += "; fewer pods, down to minCount, do not fit either"
                return Verdict(w.name, False, why, cluster_queue=cq_name)
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
        )
        if reduced is not None:
            requested = sum(ps.count for ps in pod_sets)
            verdict.admitted_share = sum(reduced.counts) / requested if requested else 1.0
            verdict.reduced = reduced.describe(pod_sets)
        verdict.terms = self._terms(w, cq_name, verdict)
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
            "latency": 1.0 / (1.0 + w.latency / 0.1),
        }
        if v.gpu is not None:
            terms["vgpuFit"] = v.gpu.score
        if v.preempts:
            terms["preemption"] = 0.0
        return terms

    def _fleet_of(self, workers: Sequence[WorkerCapacity]) -> _Fleet:
        ids = tuple(map(id, workers))
        fleet = self._fleet
        if fleet is not None and fleet.ids == ids:
            return fleet
        listed = list(workers)
        top = max((w.weight for w in listed), default=1.0) or 1.0
        fleet = self._fleet = _Fleet(
            generation=fleet.generation + 1 if fleet is not None else 0,
            ids=ids,
            workers=listed,
            members={w.name: w for w in listed},
            index={w.name: i for i, w in enumerate(listed)},
            top_weight=top,
        )
        self._dynamic_seen = -1
        return fleet

    def _sync_dynamic(self, fleet: _Fleet) -> None:
        """Which workers are at their in-flight limit or do not serve some kind, from the changes since last time."""
        changes = JOURNAL.since(self._dynamic_seen) if self._dynamic_seen >= 0 else None
        workers: Iterable[WorkerCapacity]
        if changes is None:
            self._full.clear()
            self._unserving.clear()
            workers = fleet.workers
        else:
            workers = changes[0]
        members = fleet.members
        full, unserving = self._full, self._unserving
        for w in workers:
            name = w.name
            if members.get(name) is not w:
                continue
            if w.in_flight >= w.max_in_flight:
                full.add(name)
            else:
                full.discard(name)
            if w.unserved_kinds:
                unserving.add(name)
            else:
                unserving.discard(name)
        self._dynamic_seen = JOURNAL.seq

    def _sync(self, wl: PendingWorkload, entry: _ShapeCache, fleet: _Fleet) -> None:
        """Bring the shape's verdicts up to date: every worker when the fleet changed, else the changed ones."""
        changes = JOURNAL.since(entry.seen) if entry.fleet == fleet.generation else None
        if changes is None:
            slots: dict[str, _Slot] = {}
            old_slots = entry.slots
            for w in fleet.workers:
                slot = old_slots.get(w.name)
                if slot is None or slot.worker is not w or slot.version != w.version:
                    slot = self._refresh(wl, w, entry, slot)
                else:
                    self.cache_hits += 1
                    if slot.verdict.feasible:  # the fleet's top weight may differ
                        score_verdict(slot.verdict, w.weight, fleet.top_weight, self.policy)
                slots[w.name] = slot
            entry.slots = slots
            entry.listing = [slot.verdict for slot in slots.values()]
            entry.ranking = [(-s.verdict.score, name, s.stamp) for name, s in slots.items() if s.verdict.feasible]
            heapq.heapify(entry.ranking)
            entry.fleet = fleet.generation
            entry.seen = JOURNAL.seq
            return
        changed, scopes = changes
        entry.seen = JOURNAL.seq
        if not changed:
            return
        slots = entry.slots
        get = slots.get
        wants_gpu = entry.wants_gpu is not False
        relevant: dict[str, _Slot] = {}
        unaffected: dict[str, _Slot] = {}
        for w, scope in zip(changed, scopes, strict=True):
            name = w.name
            slot = get(name)
            if slot is None or slot.worker is not w or name in relevant:
                continue  # not in the fleet, or already to be refreshed
            root = slot.root
            if scope is None or (root is not None and (scope[0] == root or (scope[1] and wants_gpu))):
                relevant[name] = slot
            else:
                unaffected[name] = slot
        for name, slot in unaffected.items():
            if name not in relevant:
                slot.version = slot.worker.version
                self.cache_hits += 1
        ranking = entry.ranking
        listing = entry.listing
        index = fleet.index
        for name, old in relevant.items():
            new = slots[name] = self._refresh(wl, old.worker, entry, old)
            listing[index[name]] = new.verdict
            if new.verdict.feasible:
                heapq.heappush(ranking, (-new.verdict.score, name, new.stamp))
        if len(ranking) > 2 * len(slots) + 64:
            entry.ranking = [(-s.verdict.score, n, s.stamp) for n, s in slots.items() if s.verdict.feasible]
            heapq.heapify(entry.ranking)

    def _best_two(self, entry: _ShapeCache, kind: str) -> tuple[Verdict | None, Verdict | None]:
        """The two best feasible verdicts from the ranking, skipping workers blocked for this decision."""
        ranking = entry.ranking
        slots = entry.slots
        full, unserving = self._full, self._unserving
        found: list[Verdict] = []
        aside: list[tuple[float, str, int]] = []
        while ranking and len(found) < 2:
            item = heapq.heappop(ranking)
            slot = slots.get(item[1])
            if slot is None or slot.stamp != item[2]:
                continue  # stale: the worker has a newer verdict
            aside.append(item)
            name = item[1]
            if name in full or (kind and name in unserving and kind in slot.worker.unserved_kinds):
                continue
            found.append(slot.verdict)
        for item in aside:
            heapq.heappush(ranking, item)
        return (found[0] if found else None), (found[1] if len(found) > 1 else None)

    def decide(self, wl: PendingWorkload, workers: Sequence[WorkerCapacity]) -> Decision:
        fleet = self._fleet_of(workers)
        self._sync_dynamic(fleet)
        entry = self._shape_cache(wl)
        self._sync(wl, entry, fleet)
        verdicts = list(entry.listing)
        if not wl.selector and not wl.excluded:
            best, runner = self._best_two(entry, wl.kind)
            # Workers blocked for this decision show why (their cached verdict is kept for the next one).
            for name in self._full | self._unserving if (self._full or self._unserving) else ():
                i = fleet.index[name]
                w = fleet.workers[i]
                if self._worker_check(w) is None:
                    blocked = self._workload_check(wl, w)
                    if blocked is not None:
                        verdicts[i] = blocked
        else:
            for i, w in enumerate(fleet.workers):
                if self._worker_check(w) is None:
                    blocked = self._workload_check(wl, w)
                    if blocked is not None:
                        verdicts[i] = blocked
            best, runner = best_two(verdicts)
        text = summary(best, runner, verdicts, self.policy)
        return Decision(wl, verdicts, best, text, strategy="scored", mode=self.policy.mode)

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
