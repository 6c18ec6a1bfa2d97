"""The dispatcher's side of worker fencing: a Lease renewed in every worker with ``fencing: agent``.

The worker's fencing agent (:mod:`dispatcher.agent`) stops this dispatcher's copies there when it has not seen the
Lease renewed for ``policy.fencing.leaseDuration``. In return the dispatcher never starts a Lost worker's workloads
elsewhere before ``leaseDuration + grace`` has passed since the last renewal it *sent* there (:meth:`WorkerLeases.
safe_at`): a renewal whose answer was lost may still have reached the worker (an asymmetric partition), so the
last one sent counts, not the last one acknowledged. Once a worker is Lost the dispatcher stops sending (``hold``),
which fixes that moment; it sends again as soon as the worker answers (``release``).

A dispatcher that starts, or becomes the leader, counts a renewal as sent at that moment for every worker: the
previous process or leader may have renewed just before it went, and nothing in this process knows when.

The agent's own heartbeat Lease (``kueue-dispatcher-agent``) is watched too, so that operators see whether fencing is
in force on each worker (``dispatcher cluster list``, the dashboard, ``kueue_dispatcher_fencing_agent_up``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubecommon.tasks import cancel_and_wait

from . import labels as L
from .agent import AGENT_LEASE, LEASES, agent_status, fencing_lease_name
from .config import FencingPolicy
from .fencing import Deposed
from .kube.client import ClusterClient, KubeError
from .kube.informer import Informer

__all__ = ["DESCRIBE_KEYS", "AgentSeen", "WorkerLeases", "no_fencing"]

log = logging.getLogger("dispatcher.fencing")
Obj = dict[str, Any]
#: The keys of :meth:`WorkerLeases.describe` (the API's ``fencing`` object).
DESCRIBE_KEYS = (
    "mode",
    "summary",
    "leaseDurationSeconds",
    "graceSeconds",
    "renewing",
    "lastRenewedSecondsAgo",
    "renewRefused",
    "agentUp",
    "agentLastSeenSecondsAgo",
    "agentExpired",
    "agentFenced",
)


def _micro_time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def no_fencing() -> Obj:
    """:meth:`WorkerLeases.describe` of a worker with ``fencing: none``."""
    out: Obj = dict.fromkeys(DESCRIBE_KEYS)
    out.update(mode="none", summary="none (failover from a partitioned worker is at-least-once)")
    return out


@dataclass
class AgentSeen:
    """The fencing agent's heartbeat as this dispatcher last saw it (its clock: monotonic seconds)."""

    renew_time: str = ""
    observed_at: float = 0.0
    duration: float = 0.0
    identity: str = ""
    status: Obj | None = None

    def up(self, now: float) -> bool | None:
        """True while heartbeats arrive, False once they stopped, None before any was seen."""
        if not self.observed_at:
            return None
        return now - self.observed_at <= max(self.duration, 1.0)


class WorkerLeases:
    """Renews this dispatcher's fencing Lease in each worker with ``fencing: agent``; knows when failover is safe."""

    def __init__(
        self,
        clients: dict[str, ClusterClient],
        workers: list[str],
        policy: FencingPolicy,
        *,
        origin: str,
        identity: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clients = clients
        self.workers = list(workers)
        self.policy = policy
        self.origin = origin
        self.identity = identity
        self.clock = clock
        #: worker -> when the latest renewal that may have reached it was sent (this process's clock).
        self.sent: dict[str, float] = {}
        #: worker -> when the latest acknowledged renewal was sent.
        self.renewed: dict[str, float] = {}
        self.failures: dict[str, int] = {}
        #: worker -> why it refuses our renewals (401/403), until one is accepted again.
        self.refused: dict[str, str] = {}
        self.agents: dict[str, AgentSeen] = {w: AgentSeen() for w in self.workers}
        self._held: set[str] = set()
        self._released: dict[str, asyncio.Event] = {w: asyncio.Event() for w in self.workers}
        self._tasks: list[asyncio.Task[None]] = []
        self._informers: list[Informer] = []

    def fenced(self, worker: str) -> bool:
        """Whether ``worker`` has a fencing agent (``fencing: agent``)."""
        return worker in self._released

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start renewing (when this process starts acting: at start, or on becoming the leader). A worker without
        fencing loses a fencing Lease of ours left from an earlier configuration: no longer renewed, it would make
        the agent there stop this dispatcher's copies."""
        for worker, client in self.clients.items():
            if worker not in self._released:
                self._tasks.append(asyncio.create_task(self._forget(client), name=f"fencing-lease-{worker}-forget"))
        now = self.clock()
        for worker in self.workers:
            # A previous process or leader may have renewed a moment ago: count a renewal as sent now.
            self.sent[worker] = now
            if worker not in self._held:
                self._released[worker].set()
            self._tasks.append(asyncio.create_task(self._renew_loop(worker), name=f"fencing-lease-{worker}"))

    def watch_agents(self) -> None:
        """Follow each worker's agent heartbeat (standby replicas too: it is only read)."""
        for worker in self.workers:
            client = self.clients.get(worker)
            if client is None:
                continue
            inf = Informer(
                client,
                LEASES,
                functools.partial(self._on_agent, worker),
                namespace=self.policy.namespace,
                field_selector=f"metadata.name={AGENT_LEASE}",
            )
            self._informers.append(inf)
            inf.start()

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks, what="worker leases")
        self._tasks = []

    async def close(self) -> None:
        await self.stop()
        for inf in self._informers:
            await inf.stop()
        self._informers = []

    # -- failover's questions --------------------------------------------------------------------------

    def hold(self, worker: str) -> None:
        """Stop renewing ``worker``'s Lease (it is Lost): its agent fences, and the last renewal sent stays put."""
        if worker in self._released:
            self._held.add(worker)
            self._released[worker].clear()

    def release(self, worker: str) -> None:
        """Renew ``worker``'s Lease again (it answers again): its agent stops fencing."""
        if worker in self._released:
            self._held.discard(worker)
            self._released[worker].set()

    def safe_at(self, worker: str) -> float:
        """When (this process's clock) the copies on ``worker`` are stopped by its agent, if it runs: the last
        renewal sent there plus the lease duration and the grace. 0 for a worker without fencing."""
        if worker not in self._released:
            return 0.0
        return self.sent.get(worker, self.clock()) + self.policy.lease_duration + self.policy.grace

    def agent_up(self, worker: str) -> bool | None:
        seen = self.agents.get(worker)
        return seen.up(self.clock()) if seen is not None else None

    def describe(self, worker: str) -> Obj:
        """What the API and ``dispatcher cluster list`` show of ``worker``'s fencing (always the same keys)."""
        if worker not in self._released:
            return no_fencing()
        out: Obj = dict.fromkeys(DESCRIBE_KEYS)
        now = self.clock()
        seen = self.agents.get(worker) or AgentSeen()
        up = seen.up(now)
        out.update(
            mode="agent",
            leaseDurationSeconds=self.policy.lease_duration,
            graceSeconds=self.policy.grace,
            renewing=worker not in self._held,
            lastRenewedSecondsAgo=round(now - self.renewed[worker], 1) if worker in self.renewed else None,
            renewRefused=self.refused.get(worker),
            agentUp=up,
            agentLastSeenSecondsAgo=round(now - seen.observed_at, 1) if seen.observed_at else None,
        )
        mine = (seen.status or {}).get(self.origin)
        if isinstance(mine, dict):
            out["agentExpired"] = bool(mine.get("expired"))
            out["agentFenced"] = int(mine.get("fenced") or 0)
        if worker in self.refused:
            out["summary"] = f"agent (the worker refuses the fencing Lease: {self.refused[worker]})"
        elif up is None:
            out["summary"] = "agent (no agent heartbeat seen yet: failover is at-least-once until one is)"
        elif up:
            out["summary"] = "agent (running)"
        else:
            ago = now - seen.observed_at
            out["summary"] = f"agent (NOT running: no heartbeat for {ago:.0f}s; failover is at-least-once)"
        return out

    # -- the loops -------------------------------------------------------------------------------------

    def _on_agent(self, worker: str, kind: str, obj: Obj, _old: Obj | None) -> None:
        seen = self.agents.setdefault(worker, AgentSeen())
        if kind == "DELETED":
            self.agents[worker] = AgentSeen(observed_at=seen.observed_at, duration=0.0)
            return
        spec = obj.get("spec") or {}
        renew = str(spec.get("renewTime") or "")
        if renew != seen.renew_time:
            seen.renew_time = renew
            seen.observed_at = self.clock()
        seen.duration = float(spec.get("leaseDurationSeconds") or 0)
        seen.identity = str(spec.get("holderIdentity") or "")
        seen.status = agent_status(obj)

    async def _renew_loop(self, worker: str) -> None:
        interval = self.policy.renew_interval
        while True:
            await self._released[worker].wait()
            started = self.clock()
            await self.renew(worker)
            await asyncio.sleep(max(0.0, interval - (self.clock() - started)))

    async def _forget(self, client: ClusterClient) -> None:
        try:
            if await client.delete(LEASES, self.policy.namespace, fencing_lease_name(self.origin)) is not None:
                log.warning("%s has fencing: none now: deleted the fencing Lease left there", client.name)
        except (KubeError, Deposed) as exc:
            log.info("could not check %s for a fencing Lease left there (%s)", client.name, exc)

    async def renew(self, worker: str) -> bool:
        """One renewal of ``worker``'s Lease; True when the worker acknowledged it."""
        client = self.clients.get(worker)
        if client is None or worker in self._held:
            return False
        ns = self.policy.namespace
        name = fencing_lease_name(self.origin)
        now = datetime.now(UTC)
        body: Obj = {
            "metadata": {"labels": {L.FENCING: self.origin}},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(self.policy.lease_duration)),
                "renewTime": _micro_time(now),
            },
        }
        # Short deadline: a renewal that may land late only pushes safe_at further (it counts from sending).
        timeout = max(0.5, min(5.0, self.policy.renew_interval))
        self.sent[worker] = sent = self.clock()
        try:
            try:
                await client.patch(LEASES, ns, name, body, timeout=timeout)
            except KubeError as exc:
                if not exc.not_found:
                    raise
                body["metadata"]["name"] = name
                body["spec"]["acquireTime"] = _micro_time(now)
                lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", **body}
                await client.create(LEASES, ns, lease, timeout=timeout)
        except Deposed:
            return False  # no longer the leader: the new one renews
        except KubeError as exc:
            self.failures[worker] = self.failures.get(worker, 0) + 1
            if exc.rejected:
                # Fail loud: the agent there will stop our copies once the Lease runs out.
                if worker not in self.refused:
                    log.error(
                        "worker %s refuses the fencing Lease (%s): its fencing agent will stop this dispatcher's "
                        "copies there; grant the dispatcher deploy/worker/'s Lease rights",
                        worker,
                        exc.rejection(),
                    )
                self.refused[worker] = exc.rejection()
            elif self.failures[worker] == 1:
                log.info("fencing Lease on %s not renewed: %s", worker, exc)
            return False
        self.refused.pop(worker, None)
        if self.failures.pop(worker, 0):
            log.info("fencing Lease on %s renewed again", worker)
        self.renewed[worker] = sent
        return True
