"""What the steps of a workload's way share: the clusters, the store, the in-memory index of open workloads, and
the two signals that move work along — *placement, wake up* and *this workload changed, sync it*.

The steps (:mod:`.placing`, :mod:`.mirror`, :mod:`.sync`, :mod:`.requeue`, :mod:`.finish`, :mod:`.failover`,
:mod:`.gc`, :mod:`.race`) each own their loop and their state transitions; they read and write what is here, and
call one another only through the small, explicit methods :mod:`.service` wires together. Nothing here decides
anything about a workload: it is infrastructure (retrying a SQL step, spawning a step with its log context,
writing an Event, reporting a state on the manager object).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import inspect
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential, wait_random

from kubecommon.tasks import cancel_and_wait

from .adapters import default_adapters
from .adapters.base import Adapter
from .capacity import WorkerView
from .config import DispatcherConfig
from .events import EventRecorder
from .fencing import Deposed
from .health import HealthMonitor
from .intake import Intake, PriorityResolver
from .kube.client import ClusterClient, KubeError
from .live import Live, LiveSet
from .metrics import Metrics
from .placement.engine import PlacementEngine
from .placement.gpufit import HamiFitter
from .placement.queue import PendingQueue
from .placement.worker import WorkerCapacity
from .report import ManagerReports
from .status import write_manager
from .store.repo import Repo, Transition
from .worker_lease import WorkerLeases

__all__ = ["Runtime", "Timers", "TransitionBatcher"]

log = logging.getLogger("dispatcher.service")
Obj = dict[str, Any]


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
                async with asyncio.timeout(timeout):
                    await self._changed.wait()


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


class Runtime:
    """The shared state of one dispatcher and the infrastructure its steps use.

    Cluster-facing parts (clients, views, the manager's intake and events) are filled in by
    :meth:`.service.Dispatcher.start`; the acting parts (queue, engine, index of open workloads, timers) are
    rebuilt by :meth:`reset` when a replica loses leadership, since SQL holds everything they held."""

    def __init__(
        self, config: DispatcherConfig, repo: Repo, metrics: Metrics, *, adapters: list[Adapter] | None = None
    ) -> None:
        self.config = config
        self.policy = config.policy
        self.repo = repo
        self.adapters: dict[str, Adapter] = {a.kind: a for a in (adapters or default_adapters())}
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
        self.health: HealthMonitor | None = None
        self.metrics = metrics
        #: The fencing Leases of the workers with ``fencing: agent`` (see dispatcher/agent.py).
        self.leases: WorkerLeases | None = None
        #: Remote objects (copies) created and deleted by this process, every strategy (for benchmarks).
        self.copies_created = 0
        self.copies_deleted = 0
        self.placements_made = 0
        self.steps: set[asyncio.Task[None]] = set()
        self.reset()

    def reset(self) -> None:
        """Forget what the acting replica held in memory (its next term rebuilds it from SQL)."""
        for cap in self.capacities.values():
            for uid in list(cap.reservations):
                cap.release(uid)
            cap.touch()
        self.engine = PlacementEngine(self.policy, HamiFitter())
        self.queue = PendingQueue()
        self.live = LiveSet()
        self.timers = Timers()
        self.batcher = TransitionBatcher(self.repo, self.retry)
        self.reports = ManagerReports(
            self.report, tasks=self.steps, on_written=lambda wid: self.metrics.sync_finished([wid])
        )
        self.dirty: set[int] = set()
        self.dirty_event = asyncio.Event()
        self.wake = asyncio.Event()
        self.unpark = False
        self.stop_event = asyncio.Event()
        self.stopping = False
        #: Workloads told that no worker can ever hold them (the reason told), so that it is told once.
        self.warned: dict[int, str] = {}
        #: What each kind of timer does (the steps register theirs): called with the workload, if its generation
        #: is still the one the timer was set for.
        self.on_timer: dict[str, Callable[[Live], None]] = {}

    def fire(self, kind: str, workload_id: int, generation: int) -> None:
        """A timer (:class:`Timers`) is due: hand it to the step that set it, unless its workload moved on."""
        live = self.live.by_id.get(workload_id)
        handler = self.on_timer.get(kind)
        if live is not None and live.generation == generation and handler is not None:
            handler(live)

    async def stop_tasks(self, tasks: set[asyncio.Task[None]]) -> None:
        """Cancel ``tasks`` (and every step in flight) and wait until they are done."""
        # A task may need cancelling more than once (kubecommon/tasks.py); every retry loop also checks
        # ``stopping``.
        await cancel_and_wait({*tasks, *self.steps}, what="dispatcher")

    # -- the two signals -------------------------------------------------------------------------------

    def mark_dirty(self, workload_id: int) -> None:
        """Something about this workload changed: the status sync looks at it again."""
        self.metrics.sync_requested(workload_id)
        self.dirty.add(workload_id)
        self.dirty_event.set()

    def wake_placement(self, unpark: bool = True) -> None:
        """Capacity may have freed up (``unpark``: workloads parked as not fitting get another look)."""
        if unpark:
            self.unpark = True
        self.wake.set()

    # -- infrastructure ----------------------------------------------------------------------------------

    def spawn(self, coro: Awaitable[None], live: Live | None = None) -> None:
        """Run a step in the background; its log lines name its workload; a failure is logged and the workload
        looked at again (never lost in a dropped task)."""

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
                    self.mark_dirty(live.id)

        def done(task: asyncio.Task[None]) -> None:
            self.steps.discard(task)
            # A step cancelled before it began (the service stopping) never awaited ``coro``: close it quietly.
            if inspect.iscoroutine(coro):
                coro.close()

        task = asyncio.create_task(runner())
        self.steps.add(task)
        task.add_done_callback(done)

    def adapter(self, live: Live) -> Adapter:
        return self.adapters[live.kind]

    def emit(self, live: Live, type_: str, reason: str, message: str) -> None:
        """An Event on the workload's manager object."""
        if self.events is None or self.intake is None:
            return
        obj = self.intake.objects.get(live.uid) or {
            "apiVersion": self.adapter(live).resource.api_version,
            "kind": live.kind,
            "metadata": {"name": live.name, "namespace": live.namespace, "uid": live.uid},
        }
        self.events.emit(obj, type_, reason, message)

    async def retry(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
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
                if self.stopping:
                    raise asyncio.CancelledError
                return await call()
        raise AssertionError("unreachable: tenacity retries forever or re-raises")

    #: The name the auxiliary steps know the retry by.
    retry_sql = retry

    async def batched(self, transition: Transition) -> bool:
        """Apply one guarded transition in a transaction shared with the steps finishing at the same time."""
        return await self.batcher.apply(transition)

    def workers(self) -> tuple[WorkerCapacity, ...]:
        """Every worker's capacity view, with its client's latest latency. A tuple: the placement engine knows the
        fleet is unchanged while it is passed the same one (a placement round passes one to all its decisions)."""
        for name, cap in self.capacities.items():
            client = self.clients.get(name)
            if client is not None:
                cap.latency = client.latency
        return tuple(self.capacities.values())

    def arm_admission_timer(self, live: Live) -> None:
        self.timers.add(time.monotonic() + self.policy.admission_timeout, "admission", live.id, live.generation)

    async def report(self, live: Live, state: str, message: str, remote: Obj | None) -> None:
        """Write ``state`` on the workload's manager object (labels, annotations, a managed object's status)."""
        assert self.manager is not None and self.intake is not None
        try:
            await write_manager(
                self.manager,
                self.adapter(live),
                live,
                self.intake.objects.get(live.uid),
                state=state,
                message=message,
                remote=remote,
            )
        except KubeError as exc:
            live.reported.pop("remote", None)
            if exc.not_found:
                return  # the manager object is gone: the intake cancels the workload
            if exc.transient or exc.conflict:
                log.info("updating manager object %s failed (%s); will retry", live.key, exc)
                self.timers.add(time.monotonic() + 1.0, "resync", live.id, live.generation)
                return
            # Refused (invalid, forbidden...): said loudly, once per distinct answer, and tried again from fresh
            # state after a backoff (the next write is recomputed; what was refused may not be again).
            refusals = int(live.reported.get("refusals", 0)) + 1
            live.reported["refusals"] = refusals
            delay = min(60.0, 2.0**refusals)
            if live.reported.get("refused") != exc.message:
                live.reported["refused"] = exc.message
                answer = exc.rejection() if exc.rejected else f"{exc.code} {exc.reason}: {exc.message}"
                remedy = (
                    "; grant the dispatcher's manager credentials the rights in deploy/rbac.yaml (patch of this kind "
                    "and its status)"
                    if exc.rejected
                    else ""
                )
                why = "the manager refused the report on %s (%s); trying again in %.0fs%s"
                log.warning(why, live.key, answer, delay, remedy)
                self.emit(
                    live,
                    "Warning",
                    "ReportRefused",
                    f"the dispatcher's update of this object was refused ({answer}); its state and status here may lag "
                    f"the worker's until it is accepted (tried again with backoff){remedy}",
                )
            self.timers.add(time.monotonic() + delay, "resync", live.id, live.generation)
            return
        live.reported.pop("refusals", None)
        live.reported.pop("refused", None)
