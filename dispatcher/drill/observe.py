"""What a drill watches: the dispatcher (its memory, or its REST API) and the copies the clusters really run."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from kubecommon.tasks import cancel_and_wait

from .. import labels as L
from ..adapters.job import JobAdapter
from ..kube.client import ClusterClient, Resource
from ..kube.informer import Informer
from ..remote import call_api
from ..service import Dispatcher

PODS = Resource("", "v1", "pods", "Pod")
#: The label the Job controller puts on a Job's pods: the Job's uid.
JOB_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"

__all__ = ["ApiObserver", "DuplicateSampler", "KubeSampler", "LocalObserver", "Observer", "Sampler", "Seen"]

Obj = dict[str, Any]


# -- what the dispatcher says --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One workload as the dispatcher shows it."""

    uid: str
    name: str
    state: str
    cluster: str | None
    generation: int


class Observer(Protocol):
    """The dispatcher under drill, as seen from outside (its API) or inside (its memory)."""

    async def workloads(self) -> list[Seen]: ...

    async def health(self, cluster: str) -> str: ...

    def lost_at(self, cluster: str) -> float | None:
        """Monotonic time the worker was declared Lost, where the observer knows it exactly."""

    async def fenced(self) -> int | None: ...


class LocalObserver:
    """A dispatcher in this process."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    async def workloads(self) -> list[Seen]:
        return [
            Seen(lv.uid, lv.name, lv.state, lv.cluster, lv.generation) for lv in self.dispatcher.live.by_id.values()
        ]

    async def health(self, cluster: str) -> str:
        return str(self.dispatcher.capacities[cluster].health)

    def lost_at(self, cluster: str) -> float | None:
        return self.dispatcher.failover.lost_at.get(cluster)

    async def fenced(self) -> int | None:
        return self.dispatcher.failover.fenced


class ApiObserver:
    """A running dispatcher, through its REST API (``/api/v1/workloads``, ``/api/v1/clusters``, ``/metrics``)."""

    def __init__(self, base: str, token: str | None, namespace: str) -> None:
        self.base = base
        self.token = token
        self.namespace = namespace

    async def workloads(self) -> list[Seen]:
        out: list[Seen] = []
        token: str | None = None
        while True:
            path = f"/api/v1/workloads?namespace={self.namespace}&limit=1000"
            if token:
                path += f"&continue={token}"
            body = await call_api(self.base, "GET", path, token=self.token)
            for w in body.get("items") or []:
                out.append(
                    Seen(
                        str(w.get("uid")),
                        str(w.get("name")),
                        str(w.get("state")),
                        w.get("cluster"),
                        int(w.get("generation") or 0),
                    )
                )
            token = body.get("continue")
            if not token:
                return out

    async def health(self, cluster: str) -> str:
        body = await call_api(self.base, "GET", f"/api/v1/clusters/{cluster}", token=self.token)
        return str(body.get("health"))

    async def fencing(self, cluster: str) -> str:
        """The worker's fencing as the running dispatcher has it (``agent`` or ``none``)."""
        body = await call_api(self.base, "GET", f"/api/v1/clusters/{cluster}", token=self.token)
        return str((body.get("fencing") or {}).get("mode") or "none")

    async def lost_timeout(self) -> float:
        """The running dispatcher's own ``policy.lostTimeout`` (the drill waits by it, not by a guess)."""
        body = await call_api(self.base, "GET", "/api/v1/policy", token=self.token)
        return float(body["lostTimeoutSeconds"])

    def lost_at(self, cluster: str) -> float | None:
        return None

    async def fenced(self) -> int | None:
        """The sum of ``kueue_dispatcher_fenced_copies_total`` over workers, from ``/metrics``."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
                session.get(self.base.rstrip("/") + "/metrics", headers=headers) as resp,
            ):
                text = await resp.text()
        except (aiohttp.ClientError, TimeoutError):
            return None
        total = 0.0
        found = False
        for line in text.splitlines():
            if line.startswith("kueue_dispatcher_fenced_copies_total{"):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        return int(total) if found else None


# -- what the clusters run -----------------------------------------------------------------------------------


class CopySampler(Protocol):
    """Which workloads run where, as the clusters themselves show it."""

    duplicates: set[str]
    overlap: dict[str, float]
    samples: int

    def sample(self) -> dict[str, set[str]]: ...

    def hide(self, cluster: str | None) -> None:
        """Stop (or, with None, resume) reading ``cluster``: its answers cannot be trusted while it is failed."""


class Sampler:
    """The periodic part: sample every 50 ms, remember every workload seen running on two clusters."""

    #: A pause between two samples longer than this (a stalled event loop) counts only this much overlap.
    MAX_STEP = 0.5

    def __init__(self) -> None:
        self.duplicates: set[str] = set()
        #: Per workload uid, the seconds two or more of its copies were seen running at once: what a duplicate
        #: costs (GPU time spent twice, two writers to one checkpoint), not only that it happened.
        self.overlap: dict[str, float] = {}
        self.samples = 0
        self.hidden: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._last = 0.0

    def running(self) -> dict[str, set[str]]:
        raise NotImplementedError

    def sample(self) -> dict[str, set[str]]:
        running = self.running()
        now = time.monotonic()
        step = min(now - self._last, self.MAX_STEP) if self._last else 0.0
        self._last = now
        for uid, where in running.items():
            if len(where) > 1:
                self.duplicates.add(uid)
                # Seen overlapping now: count the time since the previous sample (it began at most that long ago).
                self.overlap[uid] = self.overlap.get(uid, 0.0) + step
        self.samples += 1
        return running

    def hide(self, cluster: str | None) -> None:
        self.hidden = cluster

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(0.05)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task], what="drill sampler")
            self._task = None


def _running_copies(objs: Any, origin: str, cluster: str, into: dict[str, set[str]]) -> None:
    for obj in objs:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if labels.get(L.ORIGIN) != origin:
            continue
        if int((obj.get("status") or {}).get("active") or 0) > 0:
            into.setdefault(labels.get(L.WORKLOAD_UID, ""), set()).add(cluster)


def _runs(pod: Any) -> bool:
    """A pod whose containers may be running: bound to a node, not finished (terminating still counts)."""
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in ("Succeeded", "Failed")


class DuplicateSampler(Sampler):
    """Straight from the simulated clusters' stores: a partitioned worker is still looked into."""

    def __init__(self, world: Any, origin: str) -> None:
        super().__init__()
        self.world = world
        self.origin = origin

    def running(self) -> dict[str, set[str]]:
        running: dict[str, set[str]] = {}
        for cluster in self.world.workers:
            if cluster.down:
                continue  # a cluster that is down runs nothing
            _running_copies(cluster.store.list("jobs.batch"), self.origin, cluster.name, running)
        return running


class KubeSampler(Sampler):
    """Through the workers' API servers: per worker an informer on the Jobs with the dispatcher's origin and one on
    the Jobs' pods.

    A copy runs where one of its pods is bound to a node and has not finished (a terminating pod still runs its
    containers until it is gone). Not the Job's ``status.active``: on a real cluster that lags, by seconds when the
    Job controller's status write conflicts with a suspend and it backs off (seen on the real rig: a fenced copy's
    pod gone 2 s after the suspend, its Job still counting it active 8 s later).

    A failed worker is hidden: its informer's cache holds what it ran before the fault, and a real cluster
    that is down or partitioned cannot be looked into.
    """

    def __init__(self, clients: dict[str, ClusterClient], origin: str) -> None:
        super().__init__()
        self.origin = origin
        self.informers = {
            name: Informer(
                client,
                JobAdapter.resource,
                lambda kind, obj, old: None,
                label_selector=f"{L.ORIGIN}={origin}",
                idle_timeout=10.0,
            )
            for name, client in clients.items()
        }
        self.pod_informers = {
            name: Informer(
                client, PODS, lambda kind, obj, old: None, label_selector=JOB_CONTROLLER_UID, idle_timeout=10.0
            )
            for name, client in clients.items()
        }
        for inf in (*self.informers.values(), *self.pod_informers.values()):
            inf.start()

    def running(self) -> dict[str, set[str]]:
        running: dict[str, set[str]] = {}
        for name, inf in self.informers.items():
            if name == self.hidden:
                continue
            copies: dict[str, str] = {}  # the copy's uid on this worker -> the workload's uid
            for obj in inf.cache.values():
                meta = obj.get("metadata") or {}
                labels = meta.get("labels") or {}
                if labels.get(L.ORIGIN) == self.origin:
                    copies[str(meta.get("uid"))] = labels.get(L.WORKLOAD_UID, "")
            for pod in self.pod_informers[name].cache.values():
                owner = ((pod.get("metadata") or {}).get("labels") or {}).get(JOB_CONTROLLER_UID)
                if owner in copies and _runs(pod):
                    running.setdefault(copies[owner], set()).add(name)
        return running

    async def close(self) -> None:
        await self.stop()
        for inf in (*self.informers.values(), *self.pod_informers.values()):
            await inf.stop()
