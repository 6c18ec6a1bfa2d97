"""The dispatcher service: wires the steps of a workload's way, starts and stops them (docs/architecture.md).

intake (:mod:`.intake`) -> placement (:mod:`.placing`, over the pure :mod:`.placement`) -> mirror (:mod:`.mirror`)
-> sync (:mod:`.sync`) -> finish (:mod:`.finish`); a workload placed again goes through :mod:`.requeue`; a lost
worker's through :mod:`.failover`; orphaned copies to :mod:`.gc`. What the steps share is the
:class:`.runtime.Runtime`. Every step writes SQL first and is idempotent, so a crash at any line resumes from SQL
and the clusters (:mod:`.recovery`). With leader election, a standby keeps its informers warm; the leader acts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from .adapters.base import Adapter
from .capacity import watch_workers
from .config import DispatcherConfig
from .control import ClusterControls, WorkloadControls
from .events import EventRecorder
from .failover import Failover
from .fencing import Deposed, Fence
from .finish import Finish
from .gc import GarbageCollector
from .health import HealthMonitor
from .intake import Intake, check_manager_access
from .kube.client import ClusterClient, connect
from .kube.pools import MANAGER_REQUEST_CONNECTIONS
from .leader import LeaderElectionConfig, LeaderElector, default_identity
from .live import LiveSet
from .metrics import Metrics
from .mirror import Mirror
from .placing import Placement
from .race import Races
from .recovery import Recovery
from .requeue import Requeue
from .runtime import Runtime
from .store.repo import Repo
from .sync import StatusSync
from .worker_lease import WorkerLeases

__all__ = ["Dispatcher"]

log = logging.getLogger("dispatcher.service")
Obj = dict[str, Any]


class Dispatcher:
    """One dispatcher instance: the runtime its steps share, the steps, and their lifecycle."""

    def __init__(
        self,
        config: DispatcherConfig,
        repo: Repo,
        *,
        adapters: list[Adapter] | None = None,
        probe_interval: float | None = None,
        election: LeaderElectionConfig | None = None,
    ) -> None:
        self.config, self.policy, self.repo = config, config.policy, repo
        #: Leader election (several replicas on one PostgreSQL): None for a single replica, which always leads.
        self.election = election
        self.fence: Fence | None = None
        if election is not None:
            self.fence = repo.fence if repo.fence is not None else Fence()
            repo.set_fence(self.fence)
        self.elector: LeaderElector | None = None
        self._lease_client: ClusterClient | None = None
        self.leading = election is None
        self.metrics = Metrics()
        self.rt = rt = Runtime(config, repo, self.metrics, adapters=adapters)
        self.adapters, self.capacities, self.views, self.clients = rt.adapters, rt.capacities, rt.views, rt.clients
        self.metrics.bind(self)
        interval = probe_interval if probe_interval is not None else max(0.5, min(5.0, self.policy.suspect_after / 3))
        self.health = rt.health = HealthMonitor(interval=interval, on_change=self._on_health)
        self.leases = rt.leases = WorkerLeases(
            rt.clients,
            [w.name for w in config.workers if w.fencing == "agent"],
            self.policy.fencing,
            origin=config.origin,
            identity=(election.identity if election is not None and election.identity else default_identity()),
        )
        self._tasks: list[asyncio.Task[None]] = []
        self.started = asyncio.Event()
        self._build_steps()

    def _build_steps(self) -> None:
        """The steps, each given the runtime and the steps it hands work to (rebuilt with a new leadership term)."""
        rt = self.rt
        self.finish = Finish(rt)
        self.requeue = Requeue(rt, self.finish)
        self.gc = GarbageCollector(rt)
        #: allAtOnce / incremental: races of several copies in progress.
        self.races = Races(rt, self.requeue, self.finish, self.gc)
        self.finish.races = self.gc.races = self.races
        self.mirror = Mirror(rt, self.requeue, self.finish, self.gc)
        self.sync = StatusSync(rt, self.requeue, self.finish, self.races)
        self.placement = Placement(rt, self.mirror, self.races)
        self.recovery = Recovery(rt, self.mirror, self.requeue, self.finish, self.races)
        old: Failover | None = getattr(self, "failover", None)  # its counts and loss times outlive a term
        self.failover = Failover(rt, self.requeue, self.finish, counts_from=old)
        self.controls = WorkloadControls(rt, self.finish)
        self.cluster_controls = ClusterControls(rt, self.requeue)

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and warm every informer; then lead (one replica), or campaign for the Lease (HA): a standby
        keeps its informers and health probes running and serves the read-only API, and only the leader
        places, mirrors, syncs and fails over."""
        cfg, rt = self.config, self.rt
        rt.manager = await connect("manager", cfg.manager, requests=MANAGER_REQUEST_CONNECTIONS)
        await check_manager_access(rt.manager, list(rt.adapters.values()), cfg.manager)
        for w in cfg.workers:
            rt.clients[w.name] = await connect(w.name, w.kube, manager=rt.manager)
        if self.fence is not None:
            for client in (rt.manager, *rt.clients.values()):
                client.guard = self.fence.guard
        else:
            await self._load_clusters()
        rt.events = EventRecorder(rt.manager)
        rt.events.start()
        views = watch_workers(
            rt.clients,
            rt.capacities,
            self.health,
            origin=cfg.origin,
            job_resources=[a.resource for a in rt.adapters.values()],
            suspect_after=self.policy.suspect_after,
            lost_timeout=self.policy.lost_timeout,
            on_capacity=lambda _worker: rt.wake_placement(),
            on_remote_job=self._late("sync", "on_remote_job"),
            on_remote_workload=self._late("sync", "on_remote_workload"),
            on_race_pod=self._on_race_pod if self.races.active else None,
        )
        rt.views.update(views)
        self.leases.watch_agents()
        rt.intake = Intake(
            rt.manager,
            self.repo,
            list(rt.adapters.values()),
            rt.events,
            controller_name=cfg.controller_name,
            namespace_allowed=self.policy.namespace_allowed,
            on_new=self._late("placement", "take_new"),
            on_deleted=self._late("finish", "manager_deleted"),
            on_changed=self._late("sync", "on_manager_changed"),
            priorities=rt.priorities,
            active=False,
        )
        rt.intake.start()
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

    def manager_rejection(self) -> str | None:
        """Why the manager refuses the dispatcher now (401/403 on its informers), if it does: /readyz says it."""
        return self.rt.intake.rejection() if self.rt.intake is not None else None

    async def _load_clusters(self) -> None:
        """The workers' rows (created when new), and their cordons, kept in SQL across restarts."""
        for row in (await self.repo.ensure_clusters(self.clients)).values():
            if row.name in self.capacities:
                self.capacities[row.name].cordoned = bool(row.cordoned)

    async def _lead(self) -> None:
        """Start acting: resume every open workload from SQL, take the manager's objects, start the loops."""
        rt = self.rt
        assert rt.intake is not None
        # Renewing first: a dispatcher that was down for long has let the agents fence; from now on they stop.
        self.leases.start()
        await self.recovery.recover()
        rt.intake.activate(list(rt.live.by_uid))
        loops = {
            "placement-loop": self.placement.loop(),
            "sync-loop": self.sync.loop(),
            "timers": rt.timers.run(rt.fire),
            "intake-synced": self.recovery.after_intake_synced(),
            "garbage-collector": self.gc.run(),
            "record-retention": self.finish.retention_loop(),
            "transition-batcher": rt.batcher.run(),
        }
        self._tasks = [asyncio.create_task(coro, name=name) for name, coro in loops.items()]

    async def _on_started_leading(self) -> None:
        """The Lease is ours: take the next fencing term in SQL, then resume exactly where the last leader
        stopped. A database error on the way starts the takeover again (while the Lease is held)."""
        assert self.fence is not None
        holder, delay = self.fence.holder, 0.5
        while True:
            try:
                self.fence.term = await self.rt.retry("take the fencing term", lambda: self.repo.take_term(holder))
                self.leading = True
                log.warning("leading with term %d: resuming from SQL", self.fence.term)
                await self._load_clusters()
                await self._lead()
                self.failover.resume_health()
                return
            except Deposed:
                return
            except Exception:
                log.exception("taking over failed; starting the takeover again")
                await self._on_stopped_leading()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _on_stopped_leading(self) -> None:
        """Deposed (the fence is already revoked, so nothing more is written): stop every step, forget the
        in-memory state (SQL has it), and stand by with warm informers."""
        self.leading = False
        await self._halt()
        self.rt.reset()
        self._build_steps()
        log.warning("standing by: informers stay warm, the read-only API answers")

    async def _halt(self) -> None:
        rt = self.rt
        rt.stopping = True
        rt.stop_event.set()
        await self.leases.stop()
        await rt.stop_tasks(set(self._tasks))
        self._tasks.clear()
        if rt.intake is not None:
            rt.intake.deactivate()

    async def stop(self) -> None:
        """Stop every loop and step. Steps are idempotent, so one cut short is resumed from SQL next start."""
        rt = self.rt
        if self.elector is not None:
            await self.elector.stop()  # revokes the fence first: nothing is written from here on
        await self._halt()
        await self.leases.close()
        await self.health.stop()
        for closing in (rt.intake, *rt.views.values()):
            if closing is not None:
                await closing.stop()
        if rt.events is not None:
            await rt.events.flush(2.0)
            await rt.events.stop()
        for c in (*rt.clients.values(), *([rt.manager] if rt.manager is not None else [])):
            await c.close()
        if self.elector is not None:
            await self.elector.release()
        if self._lease_client is not None:
            await self._lease_client.close()

    def _late(self, step: str, method: str) -> Callable[..., Any]:
        """A callback for an informer made once, calling the step of the current leadership term."""

        def call(*args: Any) -> Any:
            return getattr(getattr(self, step), method)(*args)

        return call

    def _on_health(self, name: str, old: str, new: str) -> None:
        self.failover.health_changed(name, old, new, acting=self.leading)

    def _on_race_pod(self, cluster: str, kind: str, obj: Obj) -> None:
        if self.leading:
            self.races.on_race_pod(cluster, kind, obj)

    @property
    def is_leader(self) -> bool:
        """This replica acts (always, without leader election)."""
        return self.election is None or (self.leading and self.fence is not None and self.fence.leading())

    @property
    def leader_identity(self) -> str | None:
        """The Lease's holder as this replica last saw it (None without leader election)."""
        return self.elector.holder if self.elector is not None else None

    @property
    def live(self) -> LiveSet:
        return self.rt.live

    async def cordon(self, name: str, cordoned: bool = True) -> None:
        await self.cluster_controls.cordon(name, cordoned)

    async def drain(self, name: str, running: bool = False) -> int:
        return await self.cluster_controls.drain(name, running)

    async def control(self, action: str, namespace: str, name: str) -> dict[str, Any]:
        """An operator's stop / resume / cancel of one workload (see :mod:`dispatcher.control`)."""
        return await self.controls.apply(action, namespace, name)
