"""The nominator: MultiKueue's external dispatcher, deciding with the standalone mode's placement engine.

It follows the manager's Workloads (an informer, :mod:`.run`) and, for each one MultiKueue handles, reacts to its
phase (:class:`~.rules.Phase`):

* **Dispatching** (quota reserved on the manager, MultiKueue's check Pending, no cluster): the engine scores every
  worker (capacity views, vGPU fit, health, exclusions), the decision and the nominees are written to SQL first,
  then ``status.nominatedClusterNames`` is applied as Kueue's own admission writes it (:func:`.rules.nomination_apply`),
  and the chosen worker's capacity is reserved until its Kueue admits MultiKueue's copy. No worker can take it:
  the decision (every worker's reason) is kept and it is decided again when a worker's capacity changes.
* **Nominated and waiting**: a nominee that has not admitted the copy within ``policy.admissionTimeout``, or that
  is Lost, gets company: the next best worker is *added* (never one taken away; see :mod:`.rules`).
* **Assigned** (MultiKueue set ``clusterName``): recorded as Admitted there; reservations settle.
* **Queued/Retrying after an assignment or nomination**: Kueue evicted it (worker lost for ``workerLostTimeout``,
  the copy evicted on the worker, a preemption on the manager): a new generation, the evicting worker excluded from
  the next decision; it is nominated again as soon as the manager reserves its quota again.
* **Finished**, or deleted: recorded; nothing else to do (MultiKueue mirrors, syncs status and cleans up).

Mirroring, status sync and garbage collection stay MultiKueue's: the nominator never creates, deletes or patches
anything on a worker, and writes only the nominations on the manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..adapters import default_adapters
from ..config import DispatcherConfig
from ..events import EventRecorder
from ..health import HealthState
from ..kube.client import ClusterClient, KubeError, Resource
from ..placement.engine import Decision, PlacementEngine
from ..placement.verdicts import Verdict
from ..placement.worker import WorkerCapacity
from ..store.models import WorkloadState
from ..store.native import NATIVE_MODE, NATIVE_STRATEGY, NativeRecords, NativeRow
from ..store.repo import NewWorkload
from .owners import OwnerReader
from .rules import ADMISSION_FIELD_MANAGER, InvalidRequest, ManagerWorkload, Phase, nomination_apply

__all__ = ["WORKLOADS", "Nominator"]

log = logging.getLogger("dispatcher.native")
Obj = dict[str, Any]

WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
#: How often nominations are checked against the admission timeout and the workers' health.
TICK = 1.0
#: Concurrent nomination writes to the manager.
WRITERS = 16


class Nominator:
    """Decides and writes nominations; keeps SQL's record of every manager Workload MultiKueue handles."""

    def __init__(
        self,
        config: DispatcherConfig,
        manager: ClusterClient,
        records: NativeRecords,
        engine: PlacementEngine,
        workers: Callable[[], list[WorkerCapacity]],
        health: Callable[[str], str],
        events: EventRecorder,
    ) -> None:
        self.config = config
        self.policy = config.policy
        self.manager = manager
        self.records = records
        self.engine = engine
        self.workers = workers
        self.health = health
        self.events = events
        #: The jobs' own annotations (the cluster selector), read once per new Workload.
        self.owners = OwnerReader(manager, events, [a.resource for a in default_adapters()])
        #: MultiKueue's AdmissionChecks on the manager (by name), kept by an informer.
        self.checks: frozenset[str] = frozenset()
        #: Manager Workloads by uid, as last seen; the rows of those this dispatcher records.
        self.objects: dict[str, Obj] = {}
        self.rows: dict[str, NativeRow] = {}
        #: When each (uid, worker) was nominated (monotonic), for the admission timeout.
        self.nominated_at: dict[tuple[str, str], float] = {}
        #: Dispatching workloads no worker can take now: decided again when capacity changes.
        self.waiting: set[str] = set()
        #: MultiKueue's message when it set its check to Retry (why the coming eviction), by uid.
        self.retry_note: dict[str, str] = {}
        #: The last "why it waits" written to SQL per uid.
        self._said: dict[str, str] = {}
        self._dirty: set[str] = set()
        self._deleted: set[str] = set()
        self._wake = asyncio.Event()
        self._writers = asyncio.Semaphore(WRITERS)
        #: Why nominations are refused (the manager's Kueue runs another dispatcher), or None.
        self.refusal: str | None = None
        self.nominations_written = 0
        self.decisions = 0

    # -- inputs (informer callbacks: quick, in memory) ----------------------------------------------------------

    def on_workload(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        if not uid:
            return
        if kind == "DELETED":
            self.objects.pop(uid, None)
            self._deleted.add(uid)
        else:
            self.objects[uid] = obj
        self.mark(uid)

    def on_checks(self, names: frozenset[str]) -> None:
        if names != self.checks:
            self.checks = names
            for uid in self.objects:
                self._dirty.add(uid)
            self._wake.set()

    def on_capacity(self, _worker: str = "") -> None:
        if self.waiting:
            self._dirty |= self.waiting
            self._wake.set()

    def on_health(self, name: str, _old: str, new: str) -> None:
        if new == HealthState.LOST:
            for uid, row in self.rows.items():
                if name in row.nominations or row.cluster == name:
                    self._dirty.add(uid)
            self._wake.set()
        elif new == HealthState.READY:
            self.on_capacity(name)

    def set_refusal(self, why: str | None) -> None:
        """Stop (or resume) nominating: the manager's Kueue does not name this dispatcher."""
        if why != self.refusal:
            if why:
                log.error("not nominating: %s", why)
            else:
                log.info(
                    "the manager's Kueue names this dispatcher (%s): nominating", self.config.native.dispatcher_name
                )
            self.refusal = why
            self._dirty |= set(self.objects)
            self._wake.set()

    def mark(self, uid: str) -> None:
        self._dirty.add(uid)
        self._wake.set()

    # -- the loop ------------------------------------------------------------------------------------------------

    async def recover(self) -> None:
        """The open rows from SQL: nominations in flight are converged to, clocks restart now."""
        now = time.monotonic()
        for row in await self.records.load_open():
            self.rows[row.uid] = row
            for cluster in row.nominations:
                self.nominated_at[(row.uid, cluster)] = now
            self._dirty.add(row.uid)
            if row.uid not in self.objects:
                self._deleted.add(row.uid)

    async def run(self, synced: Callable[[], bool]) -> None:
        """Until cancelled: reconcile what changed, and check the timeouts every :data:`TICK` seconds; nothing is
        decided before ``synced`` (the manager's lists and the workers' views are in)."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK if synced() else 0.1):
                    await self._wake.wait()
            self._wake.clear()
            if not synced():
                continue
            self._dirty |= self._due()
            batch, self._dirty = self._dirty, set()
            try:
                await self._round(batch)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("nomination round failed; retrying")
                self._dirty |= batch
                await asyncio.sleep(1.0)

    def _due(self) -> set[str]:
        """Nominated workloads whose nominees all timed out or were lost."""
        due = set()
        now = time.monotonic()
        for uid, row in self.rows.items():
            if row.state != WorkloadState.PLACED or not row.nominations:
                continue
            if all(self._spent(uid, c, now) for c in row.nominations):
                due.add(uid)
        return due

    def _spent(self, uid: str, cluster: str, now: float) -> bool:
        at = self.nominated_at.get((uid, cluster), now)
        return now - at >= self.policy.admission_timeout or self.health(cluster) == HealthState.LOST

    async def _round(self, batch: set[str]) -> None:
        new = [ManagerWorkload(self.objects[u], self.checks) for u in batch if u in self.objects and u not in self.rows]
        await self._take([m for m in new if m.phase != Phase.OTHER])
        dispatching: list[tuple[ManagerWorkload, NativeRow]] = []
        for uid in sorted(batch):
            row = self.rows.get(uid)
            if row is None:
                continue
            obj = self.objects.get(uid)
            if obj is None:
                if uid in self._deleted:
                    self._deleted.discard(uid)
                    await self.records.cancelled(row)
                    self._forget(uid)
                continue
            mw = ManagerWorkload(obj, self.checks)
            if await self._follow(mw, row):
                dispatching.append((mw, row))
        dispatching.sort(key=lambda p: (-p[0].priority, p[0].created.timestamp() if p[0].created else 0.0))
        writes = [w for mw, row in dispatching if (w := await self._dispatch(mw, row)) is not None]
        if writes:
            await asyncio.gather(*writes)

    async def _take(self, found: Sequence[ManagerWorkload]) -> None:
        if not found:
            return
        batch = []
        for mw, owner in zip(found, await self.owners.read_all(found), strict=True):
            if owner is None:
                self._dirty.add(mw.uid)  # its job cannot be read now: taken on a later tick
                continue
            try:
                pod_sets = [p.to_json() for p in mw.pod_sets()]
                problem = None
            except InvalidRequest as exc:
                pod_sets, problem = [], str(exc)
            batch.append(
                NewWorkload(
                    uid=mw.uid,
                    namespace=mw.namespace,
                    name=mw.job_name,
                    kind=mw.kind,
                    api_version=mw.api_version,
                    queue=mw.queue,
                    priority=mw.priority,
                    priority_class=mw.priority_class,
                    pod_sets=pod_sets,
                    status_mode=NATIVE_MODE,
                    no_failover=False,
                    cluster_selector=owner.selector,
                    created_at=mw.created,
                    problem=problem or owner.problem,
                )
            )
        for row in await self.records.take(batch):
            self.rows[row.uid] = row

    async def _follow(self, mw: ManagerWorkload, row: NativeRow) -> bool:
        """Record what Kueue did to the Workload; True when it waits for this dispatcher's nomination."""
        phase = mw.phase
        if phase == Phase.OTHER:
            return False
        if phase == Phase.FINISHED:
            done = mw.finished or {}
            row.cluster = row.cluster or mw.cluster_name
            await self.records.finished(
                row, succeeded=done.get("reason") == "Succeeded", message=str(done.get("message") or "finished")
            )
            self._release(row)
            self._forget(row.uid)
            return False
        if phase == Phase.ASSIGNED:
            cluster = mw.cluster_name or ""
            if (mw.check or {}).get("state") == "Retry":
                self.retry_note[row.uid] = str((mw.check or {}).get("message") or "")
            if row.state != WorkloadState.ADMITTED or row.cluster != cluster:
                if row.state == WorkloadState.ADMITTED and row.cluster and row.cluster != cluster:
                    await self._requeued(mw, row)
                if await self.records.assigned(row, cluster):
                    row.state, row.cluster = WorkloadState.ADMITTED, cluster
                    self._settle(row, cluster)
                    self.waiting.discard(row.uid)
            return False
        if phase == Phase.RETRYING:
            # MultiKueue set its check to Retry; Kueue evicts next. Its message says why (kept for the record).
            self.retry_note[row.uid] = str((mw.check or {}).get("message") or "")
            return False
        # Queued or Dispatching. Kueue cleared the cluster and the nominations if it evicted the Workload since the
        # last assignment or nomination: its quota released (Queued), or a new admission cycle (rules.cycle).
        evicted = row.state == WorkloadState.ADMITTED or (
            row.state == WorkloadState.PLACED and (phase == Phase.QUEUED or (bool(row.cycle) and mw.cycle != row.cycle))
        )
        if evicted:
            await self._requeued(mw, row)
        return phase == Phase.DISPATCHING

    async def _requeued(self, mw: ManagerWorkload, row: NativeRow) -> None:
        """Kueue cleared the cluster and the nominations (an eviction): record it, a new generation. MultiKueue's
        Retry message says whether the reserving worker was lost or evicted the copy; else the health says."""
        note = self.retry_note.pop(row.uid, "")
        where = row.cluster or next(iter(row.nominations), None)
        lost = where if where and ("remote lost" in note or self.health(where) == HealthState.LOST) else None
        evicted_by = where if where and not lost and "evicted on worker" in note.lower() else None
        why = note or str((mw.evicted or {}).get("message") or "") or "Kueue cleared the nomination"
        reason = f"worker {lost} was lost; MultiKueue evicted the workload ({why})" if lost else why
        if await self.records.requeued(row, reason=reason, lost=lost, evicted_by=evicted_by):
            self._release(row)
            row.generation += 1
            row.state, row.cluster, row.cycle = WorkloadState.PENDING, None, ""
            if evicted_by:
                row.excluded = sorted({*row.excluded, evicted_by})
            row.nominations = {}
            self._said.pop(row.uid, None)
            self.events.emit(dict(mw.obj), "Normal", "Requeued", reason)

    async def _dispatch(self, mw: ManagerWorkload, row: NativeRow) -> Any:
        """Decide, record and return the write of the nominations (None: nothing to write now)."""
        if self.refusal:
            return None
        if row.problem is not None:
            await self._refuse(mw, row, row.problem)
            return None
        nominated = set(mw.nominated)
        ours = set(row.nominations)
        if ours and not ours <= nominated:
            # Recorded but not (yet) on the Workload: a crash or a conflict between the two; converge.
            return self._write(mw, row, [*mw.nominated, *(c for c in row.nominations if c not in nominated)])
        if nominated and not ours:
            # On the Workload but not in SQL at this generation: written by an earlier process before its record
            # (or by hand). Adopted as they are; the admission timeout applies to them as to any nomination.
            await self._adopt(mw, row)
            return None
        now = time.monotonic()
        if ours and not all(self._spent(row.uid, c, now) for c in ours):
            return None  # a nominee may still admit it
        for cluster in ours:
            if self._spent(row.uid, cluster, now) and cluster not in row.excluded:
                why = (
                    f"{cluster} was lost before admitting the copy"
                    if self.health(cluster) == HealthState.LOST
                    else f"{cluster}'s Kueue did not admit the copy within {self.policy.admission_timeout:g}s"
                )
                if await self.records.timed_out(row, cluster, why):
                    row.excluded = sorted({*row.excluded, cluster})
                    self.events.emit(dict(mw.obj), "Normal", "AdmissionTimeout", why)
                self._release_on(row, cluster)
        try:
            decision = self._decide(mw, row, exclude=ours)
        except InvalidRequest as exc:
            log.warning("%s/%s: %s", mw.namespace, mw.name, exc)
            return None
        self.decisions += 1
        count = 1 if ours else max(1, self.config.native.nominate)
        chosen = self._ranked(decision)[:count]
        if not chosen:
            self.waiting.add(row.uid)
            if decision.summary and row.state == WorkloadState.PENDING:
                await self.records.repo.set_decision(
                    [(row.id, row.generation, self._explain(decision), decision.summary)]
                )
            return None
        self.waiting.discard(row.uid)
        self._said.pop(row.uid, None)
        names = [v.cluster for v in chosen]
        explanation = self._explain(decision, names)
        explanation["cycle"] = mw.cycle
        placed = await self.records.nominate(
            row, names, explanation, decision.summary, {v.cluster: v.score for v in chosen}
        )
        if placed is None:
            return None
        row.state, row.cycle = WorkloadState.PLACED, mw.cycle
        row.nominations.update(placed)
        for name in names:
            self.nominated_at[(row.uid, name)] = now
        if decision.chosen is not None and decision.chosen.cluster == names[0]:
            self.engine.reserve(decision, {w.name: w for w in self.workers()})
        return self._write(mw, row, [*mw.nominated, *names])

    async def _refuse(self, mw: ManagerWorkload, row: NativeRow, problem: str) -> None:
        """A Workload that is never nominated (its job's cluster-selector annotation or its pod sets are invalid):
        said once, in SQL and as a Warning Event; the job's owner fixes the job and submits it again."""
        if self._said.get(row.uid) == problem:
            return
        summary = f"not nominated: {problem}"
        decision: Obj = {"strategy": NATIVE_STRATEGY, "summary": summary, "workers": []}
        await self.records.repo.set_decision([(row.id, row.generation, decision, summary)])
        self._said[row.uid] = problem
        self.events.emit(dict(mw.obj), "Warning", "NotNominated", f"kueue-dispatcher: {summary}")

    async def _adopt(self, mw: ManagerWorkload, row: NativeRow) -> None:
        names = list(mw.nominated)
        summary = f"adopted the nominations already on the Workload ({', '.join(names)})"
        decision: Obj = {"strategy": NATIVE_STRATEGY, "summary": summary, "workers": [], "nominated": names}
        decision["cycle"] = mw.cycle
        placed = await self.records.nominate(row, names, decision, summary, {})
        if placed is not None:
            row.state, row.cycle = WorkloadState.PLACED, mw.cycle
            row.nominations.update(placed)
            now = time.monotonic()
            for name in names:
                self.nominated_at[(row.uid, name)] = now

    def _decide(self, mw: ManagerWorkload, row: NativeRow, exclude: set[str]) -> Decision:
        excluded = set(row.excluded) | exclude
        workers = self.workers()
        decision = self.engine.decide(mw.pending(row.id, row.generation, excluded, row.selector), workers)
        if decision.chosen is None and excluded - exclude and not exclude:
            # Every worker tried before, or none but the ones excluded: try them again (as standalone mode does).
            decision = self.engine.decide(mw.pending(row.id, row.generation, (), row.selector), workers)
        decision.strategy = NATIVE_STRATEGY
        return decision

    def _ranked(self, decision: Decision) -> list[Verdict]:
        """The feasible workers best first (the engine's choice first), for an ordered fallback."""
        if decision.chosen is None:
            return []
        rest = sorted(
            (v for v in decision.verdicts if v.feasible and v.cluster != decision.chosen.cluster),
            key=lambda v: (-v.score, v.cluster),
        )
        return [decision.chosen, *rest]

    def _explain(self, decision: Decision, nominated: Sequence[str] = ()) -> Obj:
        out = decision.explanation()
        if nominated:
            out["nominated"] = list(nominated)
        return out

    async def _write(self, mw: ManagerWorkload, row: NativeRow, names: list[str]) -> None:
        """Apply the nominations as Kueue's admission field manager; a conflict re-reads the Workload."""
        names = list(dict.fromkeys(names))[:20]  # the CRD's maxItems
        async with self._writers:
            try:
                await self.manager.patch(
                    WORKLOADS,
                    mw.namespace,
                    mw.name,
                    nomination_apply(mw.obj, names),
                    patch_type="apply",
                    subresource="status",
                    field_manager=ADMISSION_FIELD_MANAGER,
                    force=True,
                )
            except KubeError as exc:
                if exc.conflict or exc.not_found:
                    log.debug("%s/%s: %s; deciding again on the newer Workload", mw.namespace, mw.name, exc)
                else:
                    log.warning("%s/%s: writing the nomination failed: %s; retrying", mw.namespace, mw.name, exc)
                    await asyncio.sleep(1.0)
                self.mark(row.uid)
                return
        self.nominations_written += 1
        self.events.emit(
            dict(mw.obj), "Normal", "Nominated", f"kueue-dispatcher nominated {', '.join(names)} for MultiKueue"
        )

    # -- reservations ----------------------------------------------------------------------------------------------

    def _caps(self) -> Mapping[str, WorkerCapacity]:
        return {w.name: w for w in self.workers()}

    def _settle(self, row: NativeRow, cluster: str) -> None:
        for name, cap in self._caps().items():
            if name == cluster:
                cap.settle(row.uid)
            else:
                cap.release(row.uid)

    def _release(self, row: NativeRow) -> None:
        for cap in self._caps().values():
            cap.release(row.uid)

    def _release_on(self, row: NativeRow, cluster: str) -> None:
        cap = self._caps().get(cluster)
        if cap is not None:
            cap.release(row.uid)

    def _forget(self, uid: str) -> None:
        self.rows.pop(uid, None)
        self.waiting.discard(uid)
        self.retry_note.pop(uid, None)
        self._said.pop(uid, None)
        for key in [k for k in self.nominated_at if k[0] == uid]:
            del self.nominated_at[key]
