"""The dispatcher service: the way of one workload from the manager to a worker and back.

1. **Intake** (:mod:`.intake`) turns a labelled, suspended (or ``managedBy``) manager Job into a
   Pending workload row.
2. The **placement loop** here takes pending workloads in priority-then-FIFO order
   (:class:`~.placement.queue.PendingQueue`), asks the engine (:mod:`.placement.engine`, no I/O) for a
   decision over every worker's capacity view (:mod:`.capacity`), reserves the chosen worker's
   capacity and records the intent in SQL (Pending → Placing) before touching any cluster.
3. The **mirror** (:mod:`.mirror`) creates the suspended copy on the worker (Placing → Placed).
4. The **status sync** (:mod:`.sync`) follows the copy (Placed → Admitted → Running → Succeeded/Failed)
   into SQL and onto the manager object; copies the worker's Kueue does not admit within the admission
   timeout are deleted and the workload placed elsewhere.
5. **Clean-up** (:mod:`.gc`): finished copies are deleted after the retention time; a deleted manager
   object cancels its workload and deletes its copy; orphaned copies are garbage-collected.

Every step writes SQL first and is idempotent, so a crash at any point resumes from SQL and the
clusters (:meth:`Dispatcher.start` reconciles both).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import heapq
import inspect
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import structlog
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential, wait_random

from . import labels as L
from .adapters import default_adapters
from .adapters.base import Adapter
from .capacity import WorkerView
from .config import DispatcherConfig
from .control import WorkloadControls
from .events import EventRecorder
from .failover import Failover, fence_until_done
from .fencing import Deposed, Fence
from .gc import GarbageCollector
from .health import HealthMachine, HealthMonitor, HealthState
from .intake import Intake, PriorityResolver
from .kube.client import ClusterClient, KubeError, Resource, connect
from .kube.informer import Informer
from .leader import LeaderElectionConfig, LeaderElector, default_identity
from .live import Live, LiveSet
from .metrics import Metrics
from .mirror import create_copy, delete_copy, is_our_copy
from .placement.engine import Decision, PendingWorkload, PlacementEngine
from .placement.gpu import HamiFitter
from .placement.queue import PendingQueue
from .placement.worker import WorkerCapacity
from .race import Races
from .report import ManagerReports
from .store.models import PlacementState, Workload, WorkloadState, utcnow
from .store.repo import PlacementIntent, RaceIntent, Repo, Transition
from .sync import ORDER, PLACEMENT_STATE, RemoteSnapshot, condition, is_true, observe, write_manager
from .worker_lease import WorkerLeases

__all__ = ["Dispatcher"]

log = logging.getLogger("dispatcher.service")
Obj = dict[str, Any]

PRIORITY_CLASSES = Resource("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass", False)
#: How long a copy may be missing from the worker's cache after we created it before we ask the worker, once the
#: worker's informer has shown it; a copy it never showed gets ``UNSEEN_GRACE`` (under load the watch can lag).
#: Either way the worker is asked (a GET by name) before the copy is taken for gone: a lagging cache never makes
#: the dispatcher delete a live copy and start it again elsewhere.
MISSING_GRACE = 5.0
UNSEEN_GRACE = 15.0
#: How many 1 s looks an eviction by deactivation on a worker with a fencing agent waits for the agent's annotation.
DEACTIVATED_WAITS = 5
#: Pause before trying every worker again after all of them refused or timed out a workload.
ROUND_BACKOFF = 30.0
#: Recovering at least this many workloads freezes the loaded objects out of the cyclic GC (see ``_recover``).
FREEZE_AFTER_RECOVERING = 10_000


class Timers:
    """Deadlines (admission timeout, retention) in one heap, served by one task: no polling."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str, int, int]] = []
        self._seq = itertools.count()
        self._changed = asyncio.Event()

    def add(self, at: float, kind: str, workload_id: int, generation: int) -> None:
        heapq.heappush(self._heap, (at, next(self._seq), kind, workload_id, generation))
        self._changed.set()

    async def run(self, fire: Callable[[str, int, int], None]) -> None:
        while True:
            self._changed.clear()
            now = time.monotonic()
            while self._heap and self._heap[0][0] <= now:
                _, _, kind, wid, gen = heapq.heappop(self._heap)
                fire(kind, wid, gen)
            timeout = self._heap[0][0] - now if self._heap else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)


class TransitionBatcher:
    """Many concurrent steps (e.g. hundreds of mirrors finishing at once) share one transaction per flush."""

    def __init__(self, repo: Repo, retry: Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[Any]]) -> None:
        self.repo = repo
        self.retry = retry
        self._items: list[tuple[Transition, asyncio.Future[bool]]] = []
        self._event = asyncio.Event()

    async def apply(self, transition: Transition) -> bool:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._items.append((transition, future))
        self._event.set()
        return await future

    async def run(self) -> None:
        while True:
            await self._event.wait()
            self._event.clear()
            items, self._items = self._items, []
            if not items:
                continue
            batch = [t for t, _ in items]
            try:
                results = await self.retry("batched transitions", functools.partial(self.repo.apply, batch))
            except BaseException as exc:
                for _, future in items:
                    if not future.done():
                        future.set_exception(
                            asyncio.CancelledError() if isinstance(exc, asyncio.CancelledError) else exc
                        )
                raise
            for (_, future), ok in zip(items, results, strict=True):
                if not future.done():
                    future.set_result(bool(ok))


async def _probe(client: ClusterClient, view: WorkerView, timeout: float) -> bool | str:
    """A worker's health probe: its ``/readyz``, and whether it refuses any of the dispatcher's reads (a
    ServiceAccount without the RBAC to list pods answers ``/readyz`` but cannot be placed on)."""
    result = await client.probe(timeout)
    if result is True:
        refused = view.rejection()
        if refused:
            return refused
    return result


class Dispatcher:
    """One dispatcher instance: manager intake, worker views, placement, mirror, sync, clean-up."""

    def __init__(
        self,
        config: DispatcherConfig,
        repo: Repo,
        *,
        adapters: list[Adapter] | None = None,
        probe_interval: float | None = None,
        election: LeaderElectionConfig | None = None,
    ) -> None:
        self.config = config
        #: Leader election (several replicas on one PostgreSQL): None for a single replica, which always leads.
        self.election = election
        self.fence: Fence | None = None
        if election is not None:
            self.fence = repo.fence if repo.fence is not None else Fence()
            repo.set_fence(self.fence)
        self.elector: LeaderElector | None = None
        self._lease_client: ClusterClient | None = None
        self.leading = election is None
        self.policy = config.policy
        self.repo = repo
        self.adapters: dict[str, Adapter] = {a.kind: a for a in (adapters or default_adapters())}
        self.engine = PlacementEngine(self.policy, HamiFitter())
        self.queue = PendingQueue()
        self.queue.on_join = self._joined_blocked
        self._blocked_joins: list[tuple[int, Decision]] = []
        self.live = LiveSet()
        self.controls = WorkloadControls(self)
        self.timers = Timers()
        self.capacities: dict[str, WorkerCapacity] = {
            w.name: WorkerCapacity(w.name, weight=w.weight, labels=w.labels, max_in_flight=w.max_in_flight)
            for w in config.workers
        }
        self.views: dict[str, WorkerView] = {}
        self.clients: dict[str, ClusterClient] = {}
        self.manager: ClusterClient | None = None
        self.events: EventRecorder | None = None
        self.intake: Intake | None = None
        self.priorities = PriorityResolver({})
        interval = probe_interval if probe_interval is not None else max(0.5, min(5.0, self.policy.suspect_after / 3))
        self.health = HealthMonitor(interval=interval, on_change=self._on_health)
        self.gc = GarbageCollector(self)
        self.failover = Failover(self)
        #: The fencing Leases of the workers with ``fencing: agent`` (see dispatcher/agent.py).
        self.leases = WorkerLeases(
            self.clients,
            [w.name for w in config.workers if w.fencing == "agent"],
            self.policy.fencing,
            origin=config.origin,
            identity=(election.identity if election is not None and election.identity else default_identity()),
        )
        self.batcher = TransitionBatcher(repo, self._retry)
        #: allAtOnce / incremental: races of several copies in progress.
        self.races = Races(self)
        #: Remote objects (copies) created and deleted by this process, every strategy (for benchmarks).
        self.copies_created = 0
        self.copies_deleted = 0
        self._stop_event = asyncio.Event()
        self._wake = asyncio.Event()
        self._unpark = False
        self._dirty: set[int] = set()
        self._dirty_event = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._steps: set[asyncio.Task[None]] = set()
        self.reports = self._new_reports()
        self._priority_informer: Informer | None = None
        self._warned: dict[int, str] = {}
        self._resume_placing: list[Live] = []
        self._stopping = False
        self.started = asyncio.Event()
        self.placements_made = 0
        self.metrics = Metrics(self)

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and warm every informer; then lead (one replica), or campaign for the Lease (HA): a standby
        keeps its informers and health probes running and serves the read-only API, and only the leader
        places, mirrors, syncs and fails over."""
        cfg = self.config
        self.manager = await connect("manager", cfg.manager)
        await self._check_manager_access()
        for w in cfg.workers:
            self.clients[w.name] = await connect(w.name, w.kube, manager=self.manager)
        if self.fence is not None:
            for client in (self.manager, *self.clients.values()):
                client.guard = self.fence.guard
        else:
            await self._load_clusters()
        self.events = EventRecorder(self.manager)
        self.events.start()
        job_resources = [a.resource for a in self.adapters.values()]
        for name, client in self.clients.items():
            view = WorkerView(
                self.capacities[name],
                client,
                origin=cfg.origin,
                job_resources=job_resources,
                on_capacity=self._on_capacity,
                on_remote_job=self._on_remote_job,
                on_remote_workload=self._on_remote_workload,
                on_race_pod=self._on_race_pod if self.races.active else None,
            )
            self.views[name] = view
            self.health.add(
                name,
                HealthMachine(suspect_after=self.policy.suspect_after, lost_timeout=self.policy.lost_timeout),
                functools.partial(_probe, client, view, max(0.5, min(3.0, self.policy.lost_timeout / 4))),
                view.last_contact,
            )
            view.start()
        self.leases.watch_agents()
        self._priority_informer = Informer(self.manager, PRIORITY_CLASSES, self._on_priority_class)
        self._priority_informer.start()
        self.intake = Intake(
            self.manager,
            self.repo,
            list(self.adapters.values()),
            self.events,
            controller_name=cfg.controller_name,
            namespace_allowed=self.policy.namespace_allowed,
            on_new=self._on_new,
            on_deleted=self._on_manager_deleted,
            on_changed=self._on_manager_changed,
            priorities=self.priorities,
            active=False,
        )
        self.intake.start()
        if self.election is None:
            await self._lead()
            self.health.start()
        else:
            assert self.fence is not None
            self.health.start()
            self._lease_client = await connect("manager-lease", cfg.manager, timeout=self.election.retry_period * 2)
            self.elector = LeaderElector(
                self._lease_client,
                self.election,
                self.fence,
                on_started_leading=self._on_started_leading,
                on_stopped_leading=self._on_stopped_leading,
            )
            self.elector.start()
        self.started.set()

    async def _check_manager_access(self) -> None:
        """Fail the start when the manager refuses the dispatcher's credentials or rights: a dispatcher that can
        never list Jobs would otherwise start, report ready and take nothing. (An unreachable manager is not an
        error here: it may come up later, and the informers keep trying.)"""
        assert self.manager is not None
        jobs = self.adapters["Job"].resource if "Job" in self.adapters else next(iter(self.adapters.values())).resource
        try:
            await self.manager.list(jobs, limit=1)
        except KubeError as exc:
            if not exc.rejected:
                log.warning("the manager does not answer yet (%s); the dispatcher keeps trying", exc)
                return
            hint = (
                "check the credentials of that kubeconfig"
                if exc.code == 401
                else "grant the dispatcher its RBAC on the manager (deploy/rbac.yaml)"
            )
            raise KubeError(
                exc.code,
                exc.reason,
                f"the manager ({self.config.manager.describe()}) refuses the dispatcher: {exc.rejection()}; {hint}",
            ) from None

    def manager_rejection(self) -> str | None:
        """Why the manager refuses the dispatcher now (401/403 on its informers), if it does: /readyz says it."""
        informers: list[Informer] = list(self.intake.informers) if self.intake is not None else []
        if self._priority_informer is not None:
            informers.append(self._priority_informer)
        for inf in informers:
            if inf.rejected is not None:
                return inf.rejected.rejection()
        return None

    async def _load_clusters(self) -> None:
        for row in (await self.repo.ensure_clusters(self.clients)).values():
            if row.name in self.capacities:
                self.capacities[row.name].cordoned = bool(row.cordoned)

    async def _lead(self) -> None:
        """Start acting: resume every open workload from SQL, take the manager's objects, start the loops."""
        assert self.intake is not None
        # Renewing first: a dispatcher that was down for long has let the agents fence; from now on they stop.
        self.leases.start()
        await self._recover()
        self.intake.activate(list(self.live.by_uid))
        self._tasks = [
            asyncio.create_task(self._placement_loop(), name="placement-loop"),
            asyncio.create_task(self._sync_loop(), name="sync-loop"),
            asyncio.create_task(self.timers.run(self._on_timer), name="timers"),
            asyncio.create_task(self._after_intake_synced(), name="intake-synced"),
            asyncio.create_task(self.gc.run(), name="garbage-collector"),
            asyncio.create_task(self._retention_loop(), name="record-retention"),
            asyncio.create_task(self.batcher.run(), name="transition-batcher"),
        ]

    async def _retention_loop(self) -> None:
        """Delete the records of workloads finished and cleaned more than ``policy.recordRetention`` ago, a batch
        at a time (a short transaction each: the API and the loops are never held up by a big delete)."""
        interval = max(1.0, min(3600.0, self.policy.record_retention / 10))
        while True:
            try:
                cutoff = utcnow() - timedelta(seconds=self.policy.record_retention)
                while True:
                    deleted = await self.repo.purge_finished(cutoff)
                    if deleted:
                        self.metrics.records_deleted.inc(deleted)
                        log.info("deleted the records of %d workloads finished before %s", deleted, cutoff)
                    if deleted < 500:
                        break
                    await asyncio.sleep(0)  # let the rest of the loop run between batches
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a database hiccup: the next round tries again
                self.metrics.sql_error()
                log.warning("deleting old workload records failed (%s); trying again later", type(exc).__name__)
            await asyncio.sleep(interval)

    # -- leadership (HA) ---------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """This replica acts (always, without leader election)."""
        return self.election is None or (self.leading and self.fence is not None and self.fence.leading())

    @property
    def leader_identity(self) -> str | None:
        """The Lease's holder as this replica last saw it (None without leader election)."""
        return self.elector.holder if self.elector is not None else None

    async def _on_started_leading(self) -> None:
        """The Lease is ours: take the next fencing term in SQL, then resume exactly where the last leader
        stopped. A database error on the way starts the takeover again (while the Lease is held)."""
        assert self.fence is not None
        holder = self.fence.holder
        delay = 0.5
        while True:
            try:
                term = await self._retry("take the fencing term", lambda: self.repo.take_term(holder))
                self.fence.term = term
                self.leading = True
                log.warning("leading with term %d: resuming from SQL", term)
                await self._load_clusters()
                await self._lead()
                self._resume_health()
                return
            except Deposed:
                return
            except Exception:
                log.exception("taking over failed; starting the takeover again")
                self.leading = False
                await self._halt()
                self._reset()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _resume_health(self) -> None:
        """Worker health seen while standing by: record it, and fail over or fence what needs it now."""
        for name, machine in self.health.machines.items():
            self._record_health(name, machine.state)
            if machine.state == HealthState.LOST:
                self._spawn(self._worker_lost(name))
            elif machine.state == HealthState.RECOVERING:
                self._spawn(self._recover_worker(name))

    async def _on_stopped_leading(self) -> None:
        """Deposed (the fence is already revoked, so nothing more is written): stop every step, forget the
        in-memory state (SQL has it), and stand by with warm informers."""
        self.leading = False
        await self._halt()
        self._reset()
        log.warning("standing by: informers stay warm, the read-only API answers")

    async def _halt(self) -> None:
        self._stopping = True
        self._stop_event.set()
        await self.leases.stop()
        pending = {*self._tasks, *self._steps}
        # asyncio.wait_for on Python 3.11 can swallow a cancellation that races with a completed read, so a
        # task may need to be cancelled more than once; every retry loop also checks ``_stopping``.
        for _ in range(50):
            if not pending:
                break
            for t in pending:
                t.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.2)
        if pending:
            log.warning("%d tasks did not stop", len(pending))
        self._tasks.clear()
        if self.intake is not None:
            self.intake.deactivate()

    def _new_reports(self) -> ManagerReports:
        return ManagerReports(self._report, tasks=self._steps, on_written=lambda wid: self.metrics.sync_finished([wid]))

    def _reset(self) -> None:
        """Forget what the leader held in memory; the next term rebuilds it from SQL."""
        for cap in self.capacities.values():
            for uid in list(cap.reservations):
                cap.release(uid)
            cap.touch()
        self.engine = PlacementEngine(self.policy, HamiFitter())
        self.queue = PendingQueue()
        self.live = LiveSet()
        self.timers = Timers()
        self.batcher = TransitionBatcher(self.repo, self._retry)
        self.reports = self._new_reports()
        self.gc = GarbageCollector(self)
        self.races = Races(self)
        self._dirty = set()
        self._dirty_event = asyncio.Event()
        self._wake = asyncio.Event()
        self._unpark = False
        self._warned = {}
        self._resume_placing = []
        self._stop_event = asyncio.Event()
        self._stopping = False

    async def stop(self) -> None:
        """Stop every loop and step. Steps are idempotent, so one cut short is resumed from SQL next start."""
        if self.elector is not None:
            await self.elector.stop()  # revokes the fence first: nothing is written from here on
        await self._halt()
        await self.leases.close()
        await self.health.stop()
        if self.intake is not None:
            await self.intake.stop()
        if self._priority_informer is not None:
            await self._priority_informer.stop()
        for view in self.views.values():
            await view.stop()
        if self.events is not None:
            await self.events.flush(2.0)
            await self.events.stop()
        for c in self.clients.values():
            await c.close()
        if self.manager is not None:
            await self.manager.close()
        if self.elector is not None:
            await self.elector.release()
        if self._lease_client is not None:
            await self._lease_client.close()

    async def _recover(self) -> None:
        """Load open workloads from SQL and resume each at the step it had reached."""
        # Recovery creates millions of objects that all stay alive (the open workloads' JSON, Live records,
        # pending entries): the cyclic GC would walk every one of them again at each collection the allocations
        # trigger (about three times the work of the load itself at 100,000 workloads), so it is paused for the
        # load. A large recovered state is then moved out of the GC's reach for good (gc.freeze: they are still
        # freed by reference counting), or the first collections after the load would walk it all again, for
        # seconds, before the first placement (the rows themselves hold no reference cycles).
        paused = gc.isenabled()
        gc.disable()
        try:
            await self._recover_rows()
            if len(self.live) >= FREEZE_AFTER_RECOVERING:
                gc.freeze()
        finally:
            if paused:
                gc.enable()
        log.info("recovered %d open workloads (%d pending)", len(self.live), len(self.queue))
        self._wake.set()

    async def _recover_rows(self) -> None:
        rows = await self.repo.load_open()
        placements = {p.id: p for p in await self.repo.open_placements()}
        # Races (allAtOnce / incremental) without a winner: their decision is reloaded (load_open leaves it out).
        racing = [
            r.id
            for r in rows
            if r.state in (WorkloadState.PLACING, WorkloadState.PLACED) and r.cluster is None and r.placement_id is None
        ]
        race_decisions = await self.repo.last_decisions(racing)
        mono, wall = time.monotonic(), time.time()
        for row in rows:
            live = Live.from_row(row, mono, wall)
            self.live.add(live)
            placement = placements.get(row.placement_id) if row.placement_id else None
            if placement is not None and placement.remote_uid:
                self.live.set_remote(live, placement.cluster, placement.remote_uid)
            if live.terminal:
                if not live.cleaned:
                    self._schedule_retention(live, row)
                continue
            if (
                live.state in (WorkloadState.PLACING, WorkloadState.PLACED)
                and row.cluster is None
                and row.placement_id is None
            ):
                # A race (allAtOnce / incremental) without a winner yet: rebuilt from its open placements.
                self.races.recover(
                    live,
                    row,
                    [p for p in placements.values() if p.workload_id == row.id],
                    race_decisions.get(row.id) or {},
                )
            elif live.deleted:
                self._spawn(self._cancel(live), live)
            elif live.state == WorkloadState.PENDING:
                if not live.problem:
                    self.queue.push(live.pending())
            elif live.state == WorkloadState.PLACING:
                self._resume_placing.append(live)
            elif live.state == WorkloadState.PLACED:
                if row.placement_id is not None and row.placement_id not in placements:
                    # The placement was closed (timed out / rejected) but the move did not finish.
                    self._spawn(self._move_elsewhere(live, "resuming an interrupted move", exclude=True), live)
                else:
                    self._arm_admission_timer(live)
            self._dirty.add(live.id)

    async def _after_intake_synced(self) -> None:
        """Once the manager's objects are known: resume interrupted creates, cancel what was deleted."""
        assert self.intake is not None
        await self.intake.wait_synced()
        for live in list(self.live.by_id.values()):
            if live.uid not in self.intake.objects and not live.terminal and not live.deleted:
                self._on_manager_deleted(live.uid)
        for live in self._resume_placing:
            if live.deleted or live.cluster is None or live.placement_id is None:
                continue
            live.busy = True
            self._spawn(self._mirror(live, None), live)
        self._resume_placing = []
        self.races.resume()

    # -- helpers ---------------------------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None], live: Live | None = None) -> None:
        async def runner() -> None:
            if live is not None:  # every log line of this step names its workload (task-local context)
                structlog.contextvars.bind_contextvars(
                    workload=live.key, cluster=live.cluster, generation=live.generation, placement=live.placement_id
                )
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Deposed as exc:
                log.info("step for %s stopped: %s", live.key if live else "?", exc)
            except Exception:
                log.exception("step for %s failed", live.key if live else "?")
                if live is not None:
                    live.busy = False
                    self._mark_dirty(live.id)

        def done(task: asyncio.Task[None]) -> None:
            self._steps.discard(task)
            # A step cancelled before it began (the service stopping) never awaited ``coro``: close it quietly.
            if inspect.iscoroutine(coro):
                coro.close()

        task = asyncio.create_task(runner())
        self._steps.add(task)
        task.add_done_callback(done)

    def _adapter(self, live: Live) -> Adapter:
        return self.adapters[live.kind]

    def _emit(self, live: Live, type_: str, reason: str, message: str) -> None:
        if self.events is None or self.intake is None:
            return
        obj = self.intake.objects.get(live.uid) or {
            "apiVersion": self._adapter(live).resource.api_version,
            "kind": live.kind,
            "metadata": {"name": live.name, "namespace": live.namespace, "uid": live.uid},
        }
        self.events.emit(obj, type_, reason, message)

    def _mark_dirty(self, workload_id: int) -> None:
        self.metrics.sync_requested(workload_id)
        self._dirty.add(workload_id)
        self._dirty_event.set()

    def _wake_placement(self, unpark: bool = True) -> None:
        if unpark:
            self._unpark = True
        self._wake.set()

    async def _batched(self, transition: Transition) -> bool:
        return await self.batcher.apply(transition)

    async def _retry(self, what: str, call: Callable[[], Awaitable[Any]], live: Live | None = None) -> Any:
        """Retry a SQL step until it succeeds, with exponential backoff and jitter (tenacity): the database
        being down must not lose a step. Kubernetes errors and cancellation are not retried here."""

        def before_sleep(state: RetryCallState) -> None:
            self.metrics.sql_error()
            exc = state.outcome.exception() if state.outcome else None
            delay = state.next_action.sleep if state.next_action else 0.0
            log.warning("%s failed (%s); retrying in %.1fs", what, exc, delay)

        retrying = AsyncRetrying(
            wait=wait_exponential(multiplier=0.2, max=10.0) + wait_random(0, 0.2),
            retry=retry_if_exception(lambda e: isinstance(e, Exception) and not isinstance(e, (KubeError, Deposed))),
            before_sleep=before_sleep,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                if self._stopping:
                    raise asyncio.CancelledError
                return await call()
        raise AssertionError("unreachable: tenacity retries forever or re-raises")

    def workers(self) -> list[WorkerCapacity]:
        for name, cap in self.capacities.items():
            client = self.clients.get(name)
            if client is not None:
                cap.latency = client.latency
        return list(self.capacities.values())

    # -- callbacks from informers and health -------------------------------------------------------------

    def _on_priority_class(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            return
        if kind == "DELETED":
            self.priorities.values.pop(name, None)
        else:
            self.priorities.values[name] = int(obj.get("value") or 0)

    def _on_capacity(self, _worker: str) -> None:
        self._wake_placement()

    def _on_health(self, name: str, old: str, new: str) -> None:
        cap = self.capacities.get(name)
        if cap is None:
            return
        cap.health = new
        machine = self.health.machines.get(name)
        cap.health_reason = machine.reason if machine is not None and new == HealthState.NOT_READY else ""
        cap.touch()
        # The fencing Lease: no longer renewed once the worker is Lost (its agent fences, and failover counts from
        # the last renewal sent); renewed again as soon as it answers.
        if new == HealthState.LOST:
            self.leases.hold(name)
        elif old == HealthState.LOST or new in (HealthState.RECOVERING, HealthState.READY):
            self.leases.release(name)
        if not self.leading:
            return  # a standby only keeps the state; the leader records it and acts (see _resume_health)
        self._record_health(name, new)
        if new == HealthState.LOST:
            self._spawn(self._worker_lost(name))
        elif new == HealthState.RECOVERING:
            self._spawn(self._recover_worker(name))
        elif new == HealthState.READY:
            self._wake_placement()

    async def _worker_lost(self, name: str) -> None:
        await self.failover.worker_lost(name)

    def _record_health(self, name: str, state: str) -> None:
        machine = self.health.machines.get(name)
        reason = machine.reason if machine is not None and machine.state == state else ""
        self._spawn(self._retry("record health", lambda: self.repo.record_health(name, state, reason or "")))

    async def _recover_worker(self, name: str) -> None:
        """A Lost worker answers again: fence it (delete stale copies), then trust it."""
        if not await fence_until_done(self.failover, name, self._stop_event):
            return
        machine = self.health.machines.get(name)
        if machine is None or machine.state != HealthState.RECOVERING:
            return  # lost again meanwhile
        machine.recovered(time.monotonic())
        cap = self.capacities[name]
        cap.health = HealthState.READY
        cap.touch()
        self._record_health(name, HealthState.READY)
        for live in list(self.live.by_id.values()):
            if live.cluster == name:
                self._mark_dirty(live.id)
        self._wake_placement()

    # -- operator controls -------------------------------------------------------------------------------

    async def cordon(self, name: str, cordoned: bool = True) -> None:
        """Cordon: no new placements on ``name`` (kept in SQL, so it survives restarts). Uncordon undoes it."""
        cap = self.capacities.get(name)
        if cap is None:
            raise KeyError(name)
        await self._retry("cordon", lambda: self.repo.update_cluster(name, cordoned=cordoned))
        cap.cordoned = cordoned
        cap.touch()
        if not cordoned:
            self._wake_placement()

    async def drain(self, name: str, running: bool = False) -> int:
        """Cordon ``name`` and move its workloads elsewhere: those not yet admitted, and with ``running`` also
        admitted and running ones (their copies are deleted first). Returns how many were moved."""
        await self.cordon(name, True)
        states = {WorkloadState.PLACED}
        if running:
            states |= {WorkloadState.ADMITTED, WorkloadState.RUNNING}
        moving = [
            live
            for live in self.live.by_id.values()
            if live.cluster == name and live.state in states and not live.busy and not live.deleted
        ]
        for live in moving:
            live.busy = True
        await asyncio.gather(
            *(self._move_elsewhere(live, f"{name} was drained", exclude=False, drained=True) for live in moving)
        )
        return len(moving)

    # -- small public surface used by failover, gc and the API -------------------------------------------

    async def retry_sql(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
        return await self._retry(what, call)

    def emit(self, live: Live, type_: str, reason: str, message: str) -> None:
        self._emit(live, type_, reason, message)

    def spawn(self, coro: Awaitable[None], live: Live | None = None) -> None:
        self._spawn(coro, live)

    async def report(self, live: Live, state: str, message: str, remote: Obj | None) -> None:
        await self._report(live, state, message, remote)

    def wake_placement(self) -> None:
        self._wake_placement()

    async def delete_copy(self, live: Live, cluster: str) -> None:
        """Delete ``live``'s copy on ``cluster`` (retrying while the worker is unreachable)."""
        await self._delete_remote(live, cluster, self._adapter(live))

    async def control(self, action: str, namespace: str, name: str) -> dict[str, Any]:
        """An operator's stop / resume / cancel of one workload (see :mod:`dispatcher.control`)."""
        return await self.controls.apply(action, namespace, name)

    def after_terminal(self, live: Live) -> None:
        """A workload ended without its copy reporting it (e.g. WorkerLost): start its retention clock."""
        self._schedule_retention(live)
        self._wake_placement()

    def requeue(self, live: Live, generation: int) -> None:
        """SQL moved ``live`` back to Pending at ``generation``: mirror that in memory and queue it."""
        live.generation = generation
        live.state = WorkloadState.PENDING
        self.live.set_remote(live, None, None)
        live.placement_id = None
        live.decision_summary = ""
        live.reported.clear()
        if live.deleted:
            if not live.busy:
                live.busy = True
                self._spawn(self._cancel(live), live)
            return
        self.queue.push(live.pending())

    def _on_new(self, rows: list[Workload]) -> None:
        mono, wall = time.monotonic(), time.time()
        for row in rows:
            live = Live.from_row(row, mono, wall)
            self.live.add(live)
            if live.problem:
                continue
            self.queue.push(live.pending())
        self._wake_placement(unpark=False)

    def _on_manager_changed(self, uid: str, obj: Obj) -> None:
        live = self.live.by_uid.get(uid)
        if live is not None and not live.terminal:
            self._mark_dirty(live.id)

    def _on_manager_deleted(self, uid: str) -> None:
        live = self.live.by_uid.get(uid)
        if live is None or live.deleted:
            return
        live.deleted = True
        if self.races.cancel(live):
            return
        if live.busy:
            return  # the step in flight sees ``deleted`` when it ends
        self._spawn(self._cancel(live), live)

    def _on_remote_job(self, cluster: str, kind: str, obj: Obj) -> None:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        live = self.live.by_uid.get(labels.get(L.WORKLOAD_UID, ""))
        if live is not None and live.cluster == cluster:
            self._mark_dirty(live.id)

    def _on_race_pod(self, cluster: str, kind: str, obj: Obj) -> None:
        if self.leading:
            self.races.on_race_pod(cluster, kind, obj)

    def _on_remote_workload(self, cluster: str, kind: str, obj: Obj) -> None:
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            if self.races.by_remote and self.races.on_remote_workload(cluster, str(ref.get("uid"))):
                continue
            live = self.live.by_remote.get((cluster, str(ref.get("uid"))))
            if live is not None:
                self._mark_dirty(live.id)

    def _on_timer(self, kind: str, workload_id: int, generation: int) -> None:
        live = self.live.by_id.get(workload_id)
        if live is None or live.generation != generation:
            return
        if kind == "admission" and live.state == WorkloadState.PLACED and not live.busy:
            view = self.views.get(live.cluster or "")
            wl = view.workloads_by_owner.get(live.remote_uid or "") if view else None
            if wl is not None and any(
                c.get("type") == "QuotaReserved" and c.get("status") == "True"
                for c in (wl.get("status") or {}).get("conditions") or []
            ):
                return  # admitted in the meantime
            live.busy = True
            reason = (
                f"not admitted by {live.cluster}'s Kueue within the admission timeout "
                f"({self.policy.admission_timeout:g}s)"
            )
            self._spawn(self._move_elsewhere(live, reason, exclude=True, timed_out=True), live)
        elif kind == "resync":
            self._mark_dirty(live.id)
        elif kind == "round":
            self._spawn(self.races.next_round(live.id, generation), live)
        elif kind == "requeue" and live.state == WorkloadState.PENDING and not live.deleted:
            self.queue.push(live.pending())
            self._wake_placement()
        elif kind == "retention" and live.terminal and not live.cleaned and not live.busy:
            live.busy = True
            self._spawn(self._clean(live), live)

    def _arm_admission_timer(self, live: Live) -> None:
        self.timers.add(time.monotonic() + self.policy.admission_timeout, "admission", live.id, live.generation)

    def _schedule_retention(self, live: Live, row: Workload | None = None) -> None:
        delay = self.policy.finished_retention
        if row is not None and row.finished_at is not None:
            delay = max(0.0, delay - (utcnow() - row.finished_at).total_seconds())
        self.timers.add(time.monotonic() + delay, "retention", live.id, live.generation)

    # -- placement ---------------------------------------------------------------------------------------

    async def _placement_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._unpark:
                self._unpark = False
                self.queue.unpark_all()
            try:
                more = await self._place_round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("placement round failed")
                await asyncio.sleep(1.0)
                self._wake_placement()
                continue
            if more:
                self._wake.set()
            await asyncio.sleep(0)

    async def _place_round(self, limit: int = 200) -> bool:
        """Decide up to ``limit`` workloads, record the intents in one transaction, start the mirrors."""
        workers = self.workers()
        by_name = {w.name: w for w in workers}
        chosen: list[tuple[Live, Decision]] = []
        races: list[tuple[Live, RaceIntent]] = []
        waiting: list[tuple[int, int, dict[str, Any], str | None]] = []
        while len(chosen) + len(races) < limit:
            wl = self.queue.next()
            if wl is None:
                break
            live = self.live.by_id.get(wl.id)
            if live is None or live.state != WorkloadState.PENDING or live.generation != wl.generation or live.stopped:
                self.queue.remove(wl.id)
                continue
            decision = self.engine.decide(wl, workers)
            if self.races.active:
                # MultiKueue's strategies: copies on the nominated workers, no capacity reserved.
                nominated = self.races.nominate(decision, workers)
                if nominated:
                    self.queue.remove(wl.id)
                    races.append((live, self.races.intent(live, decision, nominated)))
                    continue
                decision.chosen = None
            if decision.chosen is None:
                blocked = decision.permanent_block
                # A verdict that no worker can ever hold it is the verdict on every workload of its shape: each
                # gets the decision and the Warning, not only the one the engine was shown.
                members = self.queue.members(wl) if blocked else [wl]
                # Workloads joining the parked group later get the same verdict (see _joined_blocked).
                self.queue.park(wl, decision if blocked else None)
                for member in members:
                    self._record_waiting(member.id, decision, waiting)
                continue
            self.engine.reserve(decision, by_name)
            self.queue.remove(wl.id)
            chosen.append((live, decision))
        joined, self._blocked_joins = self._blocked_joins, []
        for wid, decision in joined:
            self._record_waiting(wid, decision, waiting)
        if waiting:
            await self._retry("record decisions", lambda: self.repo.set_decision(waiting))
        if races:
            await self._begin_races(races)
        if not chosen:
            return bool(races)
        intents = [
            PlacementIntent(
                workload_id=live.id,
                generation=live.generation,
                cluster=d.chosen.cluster if d.chosen else "",
                strategy=d.strategy,
                score=d.chosen.score if d.chosen else None,
                decision=self._explanation(d),
            )
            for live, d in chosen
        ]
        try:
            accepted = await self.repo.begin_placements(intents)
        except Exception as exc:
            self.metrics.sql_error()
            log.warning("recording %d placement intents failed (%s); will retry", len(intents), exc)
            for live, d in chosen:
                if d.chosen is not None:
                    by_name[d.chosen.cluster].release(live.uid)
                self.queue.push(live.pending())
            await asyncio.sleep(1.0)
            return True
        ok = {i.workload_id: i for i in accepted}
        for live, d in chosen:
            intent = ok.get(live.id)
            if intent is None or d.chosen is None:
                if d.chosen is not None:
                    by_name[d.chosen.cluster].release(live.uid)
                continue
            live.state = WorkloadState.PLACING
            live.cluster = d.chosen.cluster
            live.placement_id = intent.placement_id
            live.decision_summary = d.summary
            live.busy = True
            self.placements_made += 1
            self._spawn(self._mirror(live, d), live)
        return True

    def _explanation(self, d: Decision) -> Obj:
        """The decision as SQL keeps it, with the chosen worker's fencing (``dispatcher explain`` says plainly when
        a failover from there would be at-least-once)."""
        out = d.explanation()
        if d.chosen is not None:
            out["fencing"] = "agent" if self.leases.fenced(d.chosen.cluster) else "none"
        return out

    def _record_waiting(
        self, workload_id: int, decision: Decision, waiting: list[tuple[int, int, dict[str, Any], str | None]]
    ) -> None:
        """Keep (for SQL) a waiting workload's decision; warn once when no worker can ever hold it."""
        live = self.live.by_id.get(workload_id)
        if live is None or live.state != WorkloadState.PENDING:
            return
        if decision.summary != live.decision_summary:
            live.decision_summary = decision.summary
            waiting.append((live.id, live.generation, decision.explanation(), decision.summary))
        blocked = decision.permanent_block
        live.never_fits = bool(blocked)
        if blocked and self._warned.get(live.id) != blocked:
            self._warned[live.id] = blocked
            self._emit(live, "Warning", "NoWorkerCanRunIt", f"no worker can ever hold this as it is: {blocked}")

    def _joined_blocked(self, wl: PendingWorkload, note: Any) -> None:
        """A workload joined a group parked because no worker can ever hold that shape: the same verdict, now."""
        self._blocked_joins.append((wl.id, note))
        self._wake_placement(unpark=False)

    async def _begin_races(self, races: list[tuple[Live, RaceIntent]]) -> None:
        """Record every copy of these races in SQL (one transaction), then create them."""
        try:
            accepted = await self.repo.begin_races([i for _, i in races])
        except Exception as exc:
            self.metrics.sql_error()
            log.warning("recording %d race intents failed (%s); will retry", len(races), exc)
            for live, _ in races:
                self.queue.push(live.pending())
            await asyncio.sleep(1.0)
            self._wake_placement(unpark=False)
            return
        ok = {i.workload_id: i for i in accepted}
        for live, _ in races:
            intent = ok.get(live.id)
            if intent is not None:
                self.races.start(live, intent)

    # -- mirror ------------------------------------------------------------------------------------------

    async def _mirror(self, live: Live, decision: Decision | None) -> None:
        """Create the copy (Placing → Placed), retrying transient errors while the placement stands."""
        assert self.intake is not None and self.manager is not None
        cluster, generation, placement_id = live.cluster or "", live.generation, live.placement_id or 0
        client = self.clients[cluster]
        adapter = self._adapter(live)
        delay = 0.2
        while True:
            if self._stopping:
                return
            if live.deleted or live.generation != generation:
                break
            manager_obj = self.intake.objects.get(live.uid)
            if manager_obj is None:
                await self.intake.wait_synced()
                manager_obj = self.intake.objects.get(live.uid)
                if manager_obj is None:
                    live.deleted = True
                    break
            # HA: a deposed leader re-reads the term before creating anything (and the client's guard checks the
            # lease deadline right before the request leaves); without leader election this is a no-op.
            await self.repo.check_term()
            try:
                result = await create_copy(
                    client,
                    adapter,
                    manager_obj,
                    origin=self.config.origin,
                    workload_uid=live.uid,
                    generation=generation,
                    placement_id=placement_id,
                    create_namespace=self.policy.create_namespaces,
                )
            except KubeError as exc:
                log.info("creating the copy of %s on %s failed (%s); retrying", live.key, cluster, exc)
                if exc.reason == "OlderCopy":
                    self.gc.request(cluster)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 15.0)
                continue
            if result.ok:
                self.copies_created += 1
                await self._placed(live, result.remote_uid or "", decision)
            else:
                self._emit(live, "Warning", "CopyRejected", result.error)
                live.busy = False
                await self._move_elsewhere(live, result.error, exclude=True, rejected=True)
                return
            break
        live.busy = False
        if live.deleted:
            live.busy = True
            await self._cancel(live)
        else:
            self._mark_dirty(live.id)

    async def _placed(self, live: Live, remote_uid: str, decision: Decision | None) -> None:
        now = utcnow()
        t = Transition(
            live.id,
            live.generation,
            {"state": WorkloadState.PLACED, "placed_at": now, "reason": None},
            from_states=(WorkloadState.PLACING,),
            placement_id=live.placement_id,
            placement_values={"state": PlacementState.CREATED, "remote_uid": remote_uid, "mirrored_at": now},
            event=("Placed", live.decision_summary or f"copy created on {live.cluster}", None),
            cluster=live.cluster,
        )
        ok = await self._batched(t)
        if not ok:
            return
        live.state = WorkloadState.PLACED
        live.placed_at = time.monotonic()
        live.remote_seen = False
        self.metrics.placed(live.cluster or "")
        self.metrics.observe_submit_to_placed(time.time() - live.created)
        self.live.set_remote(live, live.cluster, remote_uid)
        self._arm_admission_timer(live)
        summary = live.decision_summary or f"placed on {live.cluster}"
        self._emit(live, "Normal", "Placed", summary)
        await self._report(live, WorkloadState.PLACED, summary, None)

    async def _move_elsewhere(
        self,
        live: Live,
        reason: str,
        *,
        exclude: bool,
        timed_out: bool = False,
        rejected: bool = False,
        drained: bool = False,
        fenced: bool = False,
    ) -> None:
        """Close the current placement, delete its copy, and put the workload back to Pending (new generation)."""
        cluster = live.cluster or ""
        adapter = self._adapter(live)
        outcome = PlacementState.TIMED_OUT if timed_out else PlacementState.REJECTED
        if drained:
            outcome = PlacementState.DRAINED
        elif fenced:
            outcome = PlacementState.FENCED
        self.metrics.placement_ended(cluster, outcome)
        if live.placement_id is not None:
            pid = live.placement_id
            await self._retry(
                "close placement",
                lambda: self.repo.update_placement(pid, state=outcome, outcome=reason, ended_at=utcnow()),
            )
        if not rejected and cluster:
            await self._delete_remote(live, cluster, adapter)
        excluded = list(live.excluded)
        if exclude and cluster and cluster not in excluded:
            excluded.append(cluster)
        new_round = set(excluded) >= set(self.capacities)
        if new_round:
            excluded = [cluster] if len(self.capacities) > 1 else []  # every worker tried: start a new round
        t = Transition(
            live.id,
            live.generation,
            {
                "state": WorkloadState.PENDING,
                "generation": live.generation + 1,
                "cluster": None,
                "placement_id": None,
                "excluded": excluded,
                "reason": reason,
            },
            event=(
                "TimedOut" if timed_out else "Drained" if drained else "Fenced" if fenced else "Rejected",
                f"{cluster}: {reason}",
                None,
            ),
            cluster=cluster,
        )
        (ok,) = await self._retry("move elsewhere", lambda: self.repo.apply([t]))
        if cluster in self.capacities:
            self.capacities[cluster].release(live.uid)
        live.busy = False
        if not ok:
            return
        if timed_out:
            self._emit(live, "Warning", "AdmissionTimeout", f"{reason}; placing it elsewhere")
        live.generation += 1
        live.state = WorkloadState.PENDING
        self.live.set_remote(live, None, None)
        live.placement_id = None
        live.excluded = excluded
        live.decision_summary = ""
        live.reported.clear()
        live.cluster_queue = ""
        if live.deleted:
            live.busy = True
            await self._cancel(live)
            return
        if new_round:
            # Every worker refused or timed out: wait before the next round instead of spinning through them.
            self.timers.add(time.monotonic() + ROUND_BACKOFF, "requeue", live.id, live.generation)
            return
        self.queue.push(live.pending())
        self._wake_placement()

    async def _delete_remote(self, live: Live, cluster: str, adapter: Adapter) -> None:
        """Delete our copy on ``cluster`` (retrying while unreachable). The uid guard spares other objects."""
        client = self.clients.get(cluster)
        if client is None:
            return
        view = self.views.get(cluster)
        remote = view.remote_jobs(adapter.resource.plural).get((live.namespace, live.name)) if view else None
        uid = live.remote_uid
        if remote is not None and is_our_copy(remote, self.config.origin, live.uid):
            uid = (remote.get("metadata") or {}).get("uid") or uid
        elif remote is not None:
            return  # not ours
        delay = 0.2
        while True:
            if self._stopping:
                raise asyncio.CancelledError  # never go on as if the copy were gone
            try:
                await delete_copy(client, adapter.resource, live.namespace, live.name, uid)
                self.copies_deleted += 1
                return
            except KubeError as exc:
                log.info("deleting the copy of %s on %s failed (%s); retrying", live.key, cluster, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 15.0)

    # -- status sync ---------------------------------------------------------------------------------------

    async def _sync_loop(self) -> None:
        while True:
            await self._dirty_event.wait()
            self._dirty_event.clear()
            batch, self._dirty = self._dirty, set()
            try:
                reporting = await self._sync_batch(batch)
                # Those with a manager write queued count as synced once it is written (see ManagerReports).
                self.metrics.sync_finished(batch - reporting)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("status sync failed; retrying")
                self._dirty |= batch
                await asyncio.sleep(1.0)
                self._dirty_event.set()

    async def _sync_batch(self, ids: set[int]) -> set[int]:
        """Observe, record in SQL (one transaction), and queue the manager writes (never awaited here: a slow
        manager write holds back no other workload). Returns the ids whose manager write was queued."""
        transitions: list[tuple[Live, Transition, str, str, Obj | None]] = []
        reporting: set[int] = set()
        for wid in ids:
            live = self.live.by_id.get(wid)
            if live is None or live.busy or live.deleted or not live.cluster:
                continue
            if live.terminal:
                if not live.cleaned and self._final_status(live):
                    reporting.add(live.id)
                continue
            if live.state not in ORDER:
                continue
            item = self._observe(live)
            if item is not None:
                transitions.append(item)
        if not transitions:
            return reporting
        results = await self._retry("status sync", lambda: self.repo.apply([t for _, t, _, _, _ in transitions]))
        for (live, _t, state, message, remote), ok in zip(transitions, results, strict=True):
            if not ok:
                continue
            live.reported["remote"] = (remote or {}).get("status")
            self._applied(live, state, message)
            self.reports.submit(live, state, message, remote)
            reporting.add(live.id)
        return reporting

    def _final_status(self, live: Live) -> bool:
        """A finished copy's status can still change (an operator counting its pods down after Succeeded): the
        manager keeps following it until the copy is cleaned up. State and SQL stay as they are."""
        view = self.views.get(live.cluster or "")
        if view is None:
            return False
        remote = view.remote_jobs(self._adapter(live).resource.plural).get((live.namespace, live.name))
        if remote is None or not is_our_copy(remote, self.config.origin, live.uid, live.generation):
            return False
        if live.reported.get("remote") == remote.get("status"):
            return False
        live.reported["remote"] = remote.get("status")
        message = str((live.reported.get("annotations") or {}).get(L.MESSAGE, ""))
        self.reports.submit(live, live.state, message, remote)
        return True

    def _observe(self, live: Live) -> tuple[Live, Transition, str, str, Obj | None] | None:
        view = self.views[live.cluster or ""]
        adapter = self._adapter(live)
        remote = view.remote_jobs(adapter.resource.plural).get((live.namespace, live.name))
        if remote is not None and not is_our_copy(remote, self.config.origin, live.uid, live.generation):
            remote = None
        if remote is None:
            if view.jobs_synced():
                grace = MISSING_GRACE if live.remote_seen else UNSEEN_GRACE
                if time.monotonic() - live.placed_at > grace:
                    live.busy = True
                    self._spawn(self._confirm_missing(live), live)
                else:
                    # Nothing else may wake this workload up again (its copy is gone): look once the grace is over.
                    self.timers.add(live.placed_at + grace + 0.1, "resync", live.id, live.generation)
            return None
        live.remote_seen = True
        fenced = ((remote.get("metadata") or {}).get("annotations") or {}).get(L.FENCED)
        if fenced and not adapter.finished(remote):
            # The worker's fencing agent stopped this copy (our fencing Lease expired there: a partition, or this
            # dispatcher was down). Only the dispatcher resumes it: placed again, on that worker too if it fits.
            live.busy = True
            why = f"stopped on {live.cluster} by its fencing agent: {fenced}"
            self._emit(live, "Warning", "FencedByAgent", f"{why}; placing it again")
            self._spawn(self._move_elsewhere(live, why, exclude=False, fenced=True), live)
            return None
        remote_uid = (remote.get("metadata") or {}).get("uid")
        if remote_uid and remote_uid != live.remote_uid:
            self.live.set_remote(live, live.cluster, remote_uid)
        self._follow_priority(live, adapter, remote)
        snap = RemoteSnapshot(remote, view.workloads_by_owner.get(remote_uid or ""))
        obs = observe(adapter, snap)
        if obs.cluster_queue:
            live.cluster_queue = obs.cluster_queue
        evicted = condition(snap.workload, "Evicted")
        self._count_eviction(live, snap.workload, evicted)
        if (
            evicted is not None
            and evicted.get("status") == "True"
            and not is_true(snap.workload, "QuotaReserved")
            and ORDER[obs.state] < 4
        ):
            if (
                str(evicted.get("reason", "")).startswith("Deactivated")
                and self.leases.fenced(live.cluster or "")
                and live.reported.get("deactivated", 0) < DEACTIVATED_WAITS
            ):
                # Deactivated on a worker with a fencing agent: the agent annotates the copy before it deactivates
                # the Workload, but the two reach us by different watches; give the copy's a moment, so that the
                # workload is placed again as fenced (on that worker too), not as evicted.
                live.reported["deactivated"] = live.reported.get("deactivated", 0) + 1
                self.timers.add(time.monotonic() + 1.0, "resync", live.id, live.generation)
                return None
            # The worker's Kueue evicted the copy (preempted, its queue stopped, pods not ready...): as MultiKueue
            # redoes admission on an eviction in a worker, the workload is placed again now, not at a timeout.
            # Not on that worker this time: the eviction event can arrive before its cause (the preemptor's
            # admission) reaches the worker's view, which would put the copy straight back where it cannot run.
            live.busy = True
            cause = f"{evicted.get('reason', 'Evicted')}: {evicted.get('message', '')}"
            why = f"evicted on {live.cluster} by its Kueue ({cause})"
            self._emit(live, "Warning", "Evicted", f"{why}; placing it again")
            self._spawn(self._move_elsewhere(live, why, exclude=True), live)
            return None
        cap = self.capacities[live.cluster or ""]
        freed = False
        if obs.state in (WorkloadState.ADMITTED, WorkloadState.RUNNING) or ORDER[obs.state] >= 4:
            freed = cap.settle(live.uid)
        if obs.state == WorkloadState.RUNNING or ORDER[obs.state] >= 4:
            freed = cap.release(live.uid) is not None or freed
        if freed:
            # The worker's Kueue took over the quota and this placement is no longer in flight: workloads
            # parked on maxInFlight or on the reservation may fit now. The informer event that brought the
            # admission woke placement before this settled, so without this wake-up they would wait for the
            # next unrelated event (seen: 366 jobs parked for good after a burst).
            self._wake_placement()
        status_changed = live.reported.get("remote") != remote.get("status")
        if obs.state == live.state and not status_changed:
            return None
        now = utcnow()
        values: dict[str, Any] = {"state": obs.state, "reason": obs.reason[:2000]}
        pvalues: dict[str, Any] = {"state": PLACEMENT_STATE[obs.state]}
        event: tuple[str, str, dict[str, Any] | None] | None = None
        if obs.state != live.state:
            event = (obs.state, f"{live.cluster}: {obs.reason}", None)
            before, after = ORDER[live.state], ORDER[obs.state]
            if before < 2 <= after:  # admitted now (perhaps seen only once already running or done)
                values["admitted_at"] = now
                pvalues["admitted_at"] = now
            if before < 3 <= after:
                values["started_at"] = now
            if after >= 4:
                values["finished_at"] = now
                values["remote_status"] = remote.get("status")
                pvalues["finished_at"] = now
                pvalues["ended_at"] = now
                pvalues["outcome"] = obs.reason[:2000]
        elif obs.state == live.state:
            values = {}
        t = Transition(
            live.id,
            live.generation,
            values,
            from_states=(live.state,),
            placement_id=live.placement_id,
            placement_values=pvalues if values else {},
            event=event,
            cluster=live.cluster,
        )
        return live, t, obs.state, obs.reason, remote

    def _count_eviction(self, live: Live, workload: Obj | None, evicted: Obj | None) -> None:
        """Count an eviction by the worker's Kueue once (one Evicted condition, however often it is seen)."""
        if evicted is None or evicted.get("status") != "True":
            return
        mark = (live.generation, evicted.get("lastTransitionTime"), evicted.get("reason"))
        if live.reported.get("evicted") == mark:
            return
        live.reported["evicted"] = mark
        preempted = condition(workload, "Preempted")
        self.metrics.evicted_on_worker(
            live.cluster or "",
            live.cluster_queue,
            str(evicted.get("reason") or "Evicted"),
            live.priority_class or "",
            str(preempted.get("reason") or "Preempted") if preempted and preempted.get("status") == "True" else None,
        )

    def _follow_priority(self, live: Live, adapter: Adapter, remote: Obj) -> None:
        """The copy follows a change of the manager object's ``kueue.x-k8s.io/priority-class`` (Kueue lets it
        change on a running workload and re-prioritises the worker's Workload with it)."""
        local = self.intake.objects.get(live.uid) if self.intake is not None else None
        if local is None:
            return
        want = adapter.priority_class(local)
        if want == adapter.priority_class(remote) or live.reported.get("priority_class", "?") == want:
            return
        live.reported["priority_class"] = want
        self._spawn(self._set_copy_priority(live, adapter, want, live.cluster or "", live.generation))

    async def _set_copy_priority(
        self, live: Live, adapter: Adapter, want: str | None, cluster: str, generation: int
    ) -> None:
        patch = {"metadata": {"labels": {L.PRIORITY_CLASS: want}}}
        try:
            await self.clients[cluster].patch(adapter.resource, live.namespace, live.name, patch)
        except KubeError as exc:
            if exc.not_found or live.generation != generation:
                return
            live.reported.pop("priority_class", None)
            if exc.transient:
                self.timers.add(time.monotonic() + 2.0, "resync", live.id, live.generation)
                return
            self._emit(
                live,
                "Warning",
                "PriorityNotFollowed",
                f"the copy on {cluster} refused priority class {want or '(none)'}: {exc.message}",
            )
            return
        priority = self.priorities.priority(want, None) if want else live.priority
        live.priority = priority
        t = Transition(live.id, generation, {"priority": priority, "priority_class": want})
        await self._retry("record the priority class", lambda: self.repo.apply([t]))
        self._emit(live, "Normal", "PriorityChanged", f"priority class {want or '(none)'} set on the copy on {cluster}")

    async def _confirm_missing(self, live: Live) -> None:
        """A copy missing from the worker's cache past its grace: ask the worker. Gone (or another object by
        that name): placed again, with a Warning saying why. There after all (the cache lags): wait and look again."""
        cluster = live.cluster or ""
        adapter = self._adapter(live)
        try:
            obj = await self.clients[cluster].get(adapter.resource, live.namespace, live.name)
        except KubeError as exc:
            log.info("checking the missing copy of %s on %s failed (%s); looking again later", live.key, cluster, exc)
            obj = {} if not exc.not_found else None
        if obj is not None and (obj == {} or is_our_copy(obj, self.config.origin, live.uid, live.generation)):
            live.busy = False
            self.timers.add(time.monotonic() + MISSING_GRACE, "resync", live.id, live.generation)
            return
        reason = f"the copy on {cluster} disappeared"
        self._emit(live, "Warning", "CopyDisappeared", f"{reason} (deleted on the worker?); placing the Job again")
        await self._move_elsewhere(live, reason, exclude=False)

    def _applied(self, live: Live, state: str, message: str) -> None:
        if state == live.state:
            return
        old = live.state
        live.state = state
        if ORDER.get(old, 0) < ORDER[WorkloadState.ADMITTED] <= ORDER.get(state, 0):
            self.metrics.admitted(
                live.cluster or "",
                live.cluster_queue,
                live.namespace,
                live.queue,
                live.priority_class or "",
                time.time() - live.created,
            )
        if state == WorkloadState.ADMITTED:
            self.metrics.observe_placed_to_admitted(time.monotonic() - live.placed_at)
            self._emit(live, "Normal", "Admitted", f"admitted on {live.cluster}: {message}")
        elif state == WorkloadState.PLACED and old != WorkloadState.PLACED:
            self._emit(live, "Warning", "Evicted", f"on {live.cluster}: {message}")
            self._arm_admission_timer(live)
        elif state == WorkloadState.SUCCEEDED:
            self._emit(live, "Normal", "Finished", f"succeeded on {live.cluster}")
        elif state == WorkloadState.FAILED:
            self._emit(live, "Warning", "Failed", f"failed on {live.cluster}: {message}")
        if live.terminal:
            live.finished_at = time.monotonic()
            self._schedule_retention(live)
            self._wake_placement()

    async def _report(self, live: Live, state: str, message: str, remote: Obj | None) -> None:
        assert self.manager is not None and self.intake is not None
        try:
            await write_manager(
                self.manager,
                self._adapter(live),
                live,
                self.intake.objects.get(live.uid),
                state=state,
                message=message,
                remote=remote,
            )
        except KubeError as exc:
            log.info("updating manager object %s failed (%s); will retry", live.key, exc)
            live.reported.pop("remote", None)
            if exc.transient or exc.conflict:
                self.timers.add(time.monotonic() + 1.0, "resync", live.id, live.generation)

    # -- clean-up -------------------------------------------------------------------------------------------

    async def _clean(self, live: Live) -> None:
        """Retention passed: delete the finished copy, mark the row cleaned, forget the workload."""
        if live.cluster:
            await self._delete_remote(live, live.cluster, self._adapter(live))
        await self._retry(
            "mark cleaned",
            lambda: self.repo.apply(
                [
                    Transition(
                        live.id, live.generation, {"cleaned_at": utcnow()}, from_states=tuple(WorkloadState.TERMINAL)
                    )
                ]
            ),
        )
        live.cleaned = True
        live.busy = False
        self.live.drop(live)

    async def _cancel(self, live: Live) -> None:
        """The manager object is gone: cancel the workload and delete its copy."""
        self.queue.remove(live.id)
        if live.cluster in self.capacities:
            self.capacities[live.cluster].release(live.uid)
        values: dict[str, Any] = {"deleted": True}
        if not live.terminal:
            values.update(state=WorkloadState.CANCELLED, finished_at=utcnow(), reason="manager object deleted")
        t = Transition(
            live.id,
            live.generation,
            values,
            placement_id=live.placement_id,
            placement_values={"state": PlacementState.CANCELLED, "ended_at": utcnow()} if not live.terminal else {},
            event=("Cancelled", "the manager object was deleted", None),
            cluster=live.cluster,
        )
        await self._retry("cancel", lambda: self.repo.apply([t]))
        if not live.terminal:
            live.state = WorkloadState.CANCELLED
        if live.cluster:
            await self._delete_remote(live, live.cluster, self._adapter(live))
        await self._retry(
            "mark cleaned",
            lambda: self.repo.apply([Transition(live.id, live.generation, {"cleaned_at": utcnow()})]),
        )
        live.cleaned = True
        live.busy = False
        self.live.drop(live)
        self._wake_placement()
