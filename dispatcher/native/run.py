"""Kueue-native mode: ``dispatcher run --mode kueue-external`` (or ``mode: kueue-external`` in clusters.yaml).

The manager runs Kueue with MultiKueue, its ``multiKueue.dispatcherName`` naming this dispatcher
(``kueueNative.dispatcherName``). This process keeps what standalone mode keeps of the workers (a
:class:`~dispatcher.capacity.WorkerView` per worker feeding its :class:`~dispatcher.placement.worker.WorkerCapacity`,
probes feeding the :class:`~dispatcher.health.HealthMonitor`) and of the manager only what MultiKueue's external
dispatcher needs: its Workloads, its MultiKueue AdmissionChecks, and Kueue's Configuration (to check that Kueue
names this dispatcher, else MultiKueue or Kueue's incremental dispatcher would own the nominations and the two
would fight). :class:`~.nominator.Nominator` decides and writes the nominations; SQL keeps every decision, so that
``dispatcher explain`` shows why a workload went where it went.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import Any

import yaml

from kubecommon.tasks import cancel_and_wait

from ..adapters import default_adapters
from ..capacity import KUEUE_CONFIG, WorkerView, probe_worker
from ..config import DispatcherConfig
from ..events import EventRecorder
from ..health import HealthMachine, HealthMonitor
from ..kube.client import ClusterClient, Resource, connect
from ..kube.informer import Informer
from ..placement.engine import PlacementEngine
from ..placement.gpufit import HamiFitter
from ..placement.worker import WorkerCapacity
from ..store.native import NativeRecords
from ..store.repo import Repo
from .nominator import WORKLOADS, Nominator
from .rules import BUILTIN_DISPATCHERS, multikueue_checks

__all__ = ["NativeDispatcher"]

log = logging.getLogger("dispatcher.native")
Obj = dict[str, Any]

ADMISSION_CHECKS = Resource("kueue.x-k8s.io", "v1beta2", "admissionchecks", "AdmissionCheck", namespaced=False)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")


class NativeDispatcher:
    """The dispatcher in Kueue-native mode: worker views, health, the manager's Workloads, the nominator."""

    def __init__(self, config: DispatcherConfig, repo: Repo, *, probe_interval: float | None = None) -> None:
        self.config = config
        self.policy = config.policy
        self.repo = repo
        self.engine = PlacementEngine(self.policy, HamiFitter())
        self.capacities: dict[str, WorkerCapacity] = {
            w.name: WorkerCapacity(w.name, weight=w.weight, labels=w.labels, max_in_flight=w.max_in_flight)
            for w in config.workers
        }
        self.views: dict[str, WorkerView] = {}
        self.clients: dict[str, ClusterClient] = {}
        self.manager: ClusterClient | None = None
        self.events: EventRecorder | None = None
        self.nominator: Nominator | None = None
        interval = probe_interval if probe_interval is not None else max(0.5, min(5.0, self.policy.suspect_after / 3))
        self.health = HealthMonitor(interval=interval, on_change=self._on_health)
        self.informers: list[Informer] = []
        self._checks: dict[str, Obj] = {}
        self._task: asyncio.Task[None] | None = None
        self.started = asyncio.Event()

    def workers(self) -> list[WorkerCapacity]:
        for name, cap in self.capacities.items():
            client = self.clients.get(name)
            if client is not None:
                cap.latency = client.latency
        return list(self.capacities.values())

    async def start(self) -> None:
        """Connect, warm every informer, load the open records, start nominating."""
        cfg = self.config
        self.manager = await connect("manager", cfg.manager)
        for w in cfg.workers:
            self.clients[w.name] = await connect(w.name, w.kube, manager=self.manager)
        await self.repo.ensure_clusters([w.name for w in cfg.workers])
        self.events = EventRecorder(self.manager)
        self.events.start()
        self.nominator = Nominator(
            cfg, self.manager, NativeRecords(self.repo), self.engine, self.workers, self.health.state, self.events
        )
        job_resources = [a.resource for a in default_adapters()]
        for name, client in self.clients.items():
            view = WorkerView(
                self.capacities[name],
                client,
                origin=cfg.origin,
                job_resources=job_resources,
                on_capacity=self.nominator.on_capacity,
                on_remote_job=lambda *_: None,
                on_remote_workload=lambda *_: None,
            )
            self.views[name] = view
            self.health.add(
                name,
                HealthMachine(suspect_after=self.policy.suspect_after, lost_timeout=self.policy.lost_timeout),
                # Standalone mode's probe: a request answered within the interval stands for the /readyz call.
                functools.partial(
                    probe_worker,
                    client,
                    view,
                    max(0.5, min(3.0, self.policy.lost_timeout / 4)),
                    answered_within=self.health.interval,
                ),
                view.last_contact,
            )
            view.start()
        nominator = self.nominator
        kueue_ns, config_name, _ = KUEUE_CONFIG
        self.informers = [
            Informer(self.manager, ADMISSION_CHECKS, self._on_check),
            Informer(
                self.manager,
                CONFIGMAPS,
                self._on_kueue_config,
                namespace=kueue_ns,
                field_selector=f"metadata.name={config_name}",
            ),
            Informer(self.manager, WORKLOADS, nominator.on_workload),
        ]
        for inf in self.informers:
            inf.start()
        await nominator.recover()
        self.health.start()
        self._task = asyncio.create_task(nominator.run(self._synced), name="nominator")
        self.started.set()
        log.info(
            "kueue-native mode: MultiKueue's external dispatcher %r over %d workers",
            cfg.native.dispatcher_name,
            len(cfg.workers),
        )

    def _synced(self) -> bool:
        """Nominate only once the manager's lists and every reachable worker's view are in."""
        return all(inf.synced.is_set() for inf in self.informers) and all(
            c.synced for c in self.capacities.values() if self.health.state(c.name) != "Lost"
        )

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task], what="native dispatcher")
            self._task = None
        await self.health.stop()
        for inf in self.informers:
            await inf.stop()
        for view in self.views.values():
            await view.stop()
        if self.events is not None:
            await self.events.flush(2.0)
            await self.events.stop()
        for c in self.clients.values():
            await c.close()
        if self.manager is not None:
            await self.manager.close()

    # -- callbacks ---------------------------------------------------------------------------------------------------

    def _on_health(self, name: str, old: str, new: str) -> None:
        cap = self.capacities.get(name)
        if cap is None:
            return
        cap.health = new
        machine = self.health.machines.get(name)
        cap.health_reason = machine.reason if machine is not None and new == "NotReady" else ""
        cap.touch()
        if self.nominator is not None:
            self.nominator.on_health(name, old, new)
        asyncio.get_running_loop().create_task(self._record_health(name, new))

    async def _record_health(self, name: str, state: str) -> None:
        with contextlib.suppress(Exception):
            await self.repo.record_health(name, state)

    def _on_check(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        name = str((obj.get("metadata") or {}).get("name", ""))
        if kind == "DELETED":
            self._checks.pop(name, None)
        else:
            self._checks[name] = obj
        if self.nominator is not None:
            self.nominator.on_checks(multikueue_checks(self._checks.values()))

    def _on_kueue_config(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        """The manager's Kueue Configuration: its ``multiKueue.dispatcherName`` must be this dispatcher's name."""
        if self.nominator is None:
            return
        raw = None if kind == "DELETED" else (obj.get("data") or {}).get(KUEUE_CONFIG[2])
        try:
            parsed = yaml.safe_load(raw) if raw else None
        except yaml.YAMLError:
            parsed = None
        name = ((parsed or {}).get("multiKueue") or {}).get("dispatcherName") if isinstance(parsed, dict) else None
        ours = self.config.native.dispatcher_name
        if name is None:
            # No Configuration to read (Kueue installed otherwise): trust the operator, say so once.
            log.warning(
                "the manager's Kueue Configuration does not say its multiKueue.dispatcherName; assuming %r", ours
            )
            self.nominator.set_refusal(None)
        elif name != ours:
            builtin = " (one of Kueue's own dispatchers)" if name in BUILTIN_DISPATCHERS else ""
            self.nominator.set_refusal(
                f"the manager's Kueue has multiKueue.dispatcherName {name!r}{builtin}, not {ours!r}: it owns the "
                "nominations; set it to this dispatcher's kueueNative.dispatcherName to hand them over"
            )
        else:
            self.nominator.set_refusal(None)
