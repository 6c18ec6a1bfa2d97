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

The engine is split by concern: :mod:`.workload` holds the pending workload and its shape, :mod:`.verdicts` the
verdicts and the records of the per-shape cache, :mod:`.evaluation` one worker's verdict evaluated in full (the
:class:`~.evaluation.Evaluator` this engine extends); this module keeps the verdicts per shape and decides.
"""

from __future__ import annotations

import heapq
import itertools
import operator
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import Policy
from .evaluation import Evaluator
from .journal import JOURNAL
from .kueue.revalidate import FitCheck, fits_as_before
from .scoring import best_two, score_verdict, summary
from .verdicts import GpuFitter, Obj, Verdict, _Fleet, _gpu_version, _ShapeCache, _Slot
from .worker import Reservation, WorkerCapacity
from .workload import PendingWorkload

# PendingWorkload is defined in .workload; it is named here too because the service imports it from the engine.
__all__ = ["Decision", "PendingWorkload", "PlacementEngine"]


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


#: How many verdicts (workload shapes x workers) the engine keeps; the least recently decided shapes go first.
CACHED_VERDICTS = 250_000


class PlacementEngine(Evaluator):
    """Verdicts, scores and decisions for pending workloads (no I/O).

    A decision does not look at every worker. Per workload shape the engine keeps every worker's verdict, scored,
    and a ranking of the feasible ones; :data:`~.worker.JOURNAL` says which workers changed since the shape was
    last decided, and only those are looked at again:

    * a change that only added one of our reservations in another quota tree (and took no GPUs, or the shape
      wants none) leaves the verdict as it is;
    * a change of the worker's scores alone (:data:`~.worker.RESCORE`: its API latency) re-validates every
      verdict of the worker, as below;
    * one in the same tree re-validates a ``Fit`` verdict cell by cell (``kueue.flavors.fits_as_before``) and, when GPUs
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

    def _fleet_of(self, workers: Sequence[WorkerCapacity]) -> _Fleet:
        """The fleet for ``workers``: the last one when it holds the same workers, in the same order.

        The service passes one tuple per placement round (``Runtime.workers``), so this compares the workers one
        by one once per round, not once per decision: at 1,000 workers that walk touched every worker and was a
        tenth of a decision's time."""
        fleet = self._fleet
        if fleet is not None:
            if workers is fleet.source and type(workers) is tuple:
                return fleet
            known = fleet.workers
            if len(workers) == len(known) and all(map(operator.is_, workers, known)):
                fleet.source = workers
                return fleet
        listed = list(workers)
        top = max((w.weight for w in listed), default=1.0) or 1.0
        fleet = self._fleet = _Fleet(
            generation=fleet.generation + 1 if fleet is not None else 0,
            source=workers,
            workers=listed,
            members={w.name: w for w in listed},
            index={w.name: i for i, w in enumerate(listed)},
            top_weight=top,
        )
        self._dynamic_seen = -1
        return fleet

    def _sync_dynamic(self, fleet: _Fleet) -> None:
        """Which workers are at their in-flight limit or do not serve some kind, from the changes since last time."""
        changed = JOURNAL.changed_since(self._dynamic_seen) if self._dynamic_seen >= 0 else None
        workers: Iterable[WorkerCapacity]
        if changed is None:
            self._full.clear()
            self._unserving.clear()
            workers = fleet.workers
        else:
            workers = changed
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
        changed = JOURNAL.changed_since(entry.seen) if entry.fleet == fleet.generation else None
        if changed is None:
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
        seen = entry.seen
        entry.seen = JOURNAL.seq
        if not changed:
            return
        slots = entry.slots
        get = slots.get
        wants_gpu = entry.wants_gpu is not False
        relevant: list[_Slot] = []
        for w in changed:
            slot = get(w.name)
            if slot is None or slot.worker is not w:
                continue  # not in the fleet
            if w.marks.concern(seen, slot.root, wants_gpu):
                relevant.append(slot)
            else:
                slot.version = w.version
                self.cache_hits += 1
        ranking = entry.ranking
        listing = entry.listing
        index = fleet.index
        for old in relevant:
            name = old.worker.name
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
            tas=chosen.tas_usage,
        )
        workers[chosen.cluster].reserve(reservation)
        return reservation
