"""The worker-side fencing agent: a worker stops the dispatcher's copies itself when it loses the dispatcher.

Why: a partitioned worker keeps running the copies it has while the dispatcher, which cannot reach it, starts
them again elsewhere: two copies of one training job, two writers to one checkpoint. Kubernetes fences nodes with
node leases and Armada its executors with leases; this is the same for a worker cluster.

How, per dispatcher (an *origin*, see ``clusters.yaml``'s ``origin``):

1. The dispatcher renews a ``coordination.k8s.io/v1`` Lease in the worker (``kueue-dispatcher-fencing-<origin>``,
   labelled ``kueue-dispatcher.io/fencing: <origin>``) every quarter of its ``leaseDurationSeconds``
   (:mod:`dispatcher.worker_lease`).
2. The agent, running inside the worker, watches those Leases and notes *by its own clock* when it last saw each
   one renewed (a change of ``spec.renewTime``), as client-go's leader election does: the dispatcher's clock is
   never compared with the agent's, so only the rate of drift between the two matters, not their offset.
3. When a Lease has not been seen renewed for its duration, the agent fences every copy of that origin on the
   worker: it deactivates the copy's Kueue Workload (``spec.active: false``; Kueue evicts it and stops its pods,
   and would otherwise start a suspended Job again), then suspends the copy and annotates it
   (``kueue-dispatcher.io/fenced``: when and why), and records a Warning Event on it. While the Lease stays
   expired it fences every copy that appears; a Workload of a fenced copy that is active again is deactivated.
   Once a copy is suspended the agent deletes its running pods (each with its own grace period): the kind's
   controller would too, but on a busy worker only many seconds later.
4. When the dispatcher renews again, the agent stops fencing. It never resumes a copy: the dispatcher sees the
   annotation and places the workload again itself (or, if it already failed over, deletes the stale copy).

The dispatcher's side of the bargain: it never starts a Lost worker's workloads elsewhere before ``lease duration
+ fencing grace`` has passed since the last renewal it *sent* to that worker, so that the agent has noticed and the
pods have stopped before the new copy starts. The assumption is the one Kubernetes leases make: the two clocks
drift apart by less than the grace over one lease duration, and a renewal reaches the worker within the grace of
being sent or never.

The agent renews a Lease of its own (``kueue-dispatcher-agent``) as a heartbeat, with what it fenced in an
annotation, so that the dispatcher (and ``dispatcher cluster list``) can tell whether fencing is in force.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from kubecommon.tasks import cancel_and_wait

from . import labels as L
from .adapters import default_adapters
from .adapters.base import Adapter
from .config import KubeconfigRef
from .events import EventRecorder
from .kube.client import ClusterClient, KubeError, Resource, connect
from .kube.informer import Informer

__all__ = [
    "AGENT_LEASE",
    "DEFAULT_NAMESPACE",
    "LEASES",
    "AgentGroup",
    "AgentOptions",
    "FencingAgent",
    "agent_status",
    "fencing_lease_name",
    "serve",
]

log = logging.getLogger("dispatcher.agent")
Obj = dict[str, Any]

LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PODS = Resource("", "v1", "pods", "Pod")
#: Where the Leases live by default: Kueue's namespace, where deploy/worker/ puts the dispatcher's ServiceAccount.
DEFAULT_NAMESPACE = "kueue-system"
#: The agent's own Lease: its heartbeat, with what it fenced (``kueue-dispatcher.io/agent-status``).
AGENT_LEASE = "kueue-dispatcher-agent"
KUEUE_GROUP = "kueue.x-k8s.io"


def fencing_lease_name(origin: str) -> str:
    """The Lease a dispatcher of ``origin`` renews in each worker."""
    return f"kueue-dispatcher-fencing-{origin}"


def _micro_time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class LeaseState:
    """One dispatcher's Lease as this agent sees it; times are the agent's own clock."""

    origin: str
    duration: float
    renew_time: str
    observed_at: float
    expired: bool = False
    expired_at: float | None = None
    fenced: int = 0

    def deadline(self) -> float:
        return self.observed_at + self.duration


@dataclass(frozen=True)
class AgentOptions:
    namespace: str = DEFAULT_NAMESPACE
    #: Who this agent is (the pod name in a Deployment), written into its heartbeat Lease.
    identity: str = field(default_factory=lambda: os.environ.get("POD_NAME") or socket.gethostname())
    heartbeat_interval: float = 5.0
    #: Only these origins' copies are fenced (empty: every origin that has a fencing Lease here).
    origins: tuple[str, ...] = ()


class FencingAgent:
    """Watches the dispatchers' fencing Leases in one worker and fences their copies when a Lease expires.

    ``clock`` is the agent's own clock (monotonic seconds); tests pass a skewed one."""

    def __init__(
        self,
        client: ClusterClient,
        options: AgentOptions | None = None,
        *,
        adapters: list[Adapter] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.options = options or AgentOptions()
        self.adapters = {a.resource.plural: a for a in (adapters or default_adapters())}
        self.clock = clock
        self.leases: dict[str, LeaseState] = {}
        self.workload_resource: Resource | None = None
        #: Kueue Workloads by the uid of the copy that owns them.
        self.workloads_by_owner: dict[str, dict[str, Obj]] = {}
        self.events = EventRecorder(client, component="kueue-dispatcher-agent")
        self.informers: list[Informer] = []
        self.copy_informers: dict[str, Informer] = {}
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._busy: set[str] = set()
        self._steps: set[asyncio.Task[None]] = set()
        #: Copies this agent fenced and told of (an Event, the count): once each.
        self._told: set[str] = set()
        self.ready = asyncio.Event()
        self.registry = CollectorRegistry()
        self.fenced_total = Counter(
            "kueue_dispatcher_agent_fenced_copies",
            "Copies this agent fenced (suspended, Workload deactivated) because their dispatcher's Lease expired",
            ["origin"],
            registry=self.registry,
        )
        self.pods_stopped = Counter(
            "kueue_dispatcher_agent_stopped_pods",
            "Pods of fenced copies this agent deleted (not waiting for the kind's controller to act on the suspend)",
            registry=self.registry,
        )
        self.expired_gauge = Gauge(
            "kueue_dispatcher_agent_lease_expired",
            "1 while this dispatcher's fencing Lease is expired by the agent's clock (its copies are being fenced)",
            ["origin"],
            registry=self.registry,
        )

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        self.events.start()
        self.workload_resource = await self._discover_workloads()
        ns = self.options.namespace
        leases = Informer(self.client, LEASES, self._on_lease, namespace=ns, label_selector=L.FENCING)
        self.informers.append(leases)
        for plural, adapter in self.adapters.items():
            handler = functools.partial(self._on_copy, adapter)
            inf = Informer(self.client, adapter.resource, handler, label_selector=L.ORIGIN)
            self.copy_informers[plural] = inf
            self.informers.append(inf)
        if self.workload_resource is not None:
            self.informers.append(Informer(self.client, self.workload_resource, self._on_workload))
        for inf in self.informers:
            inf.start()
        self._tasks = [
            asyncio.create_task(self._watchdog(), name="agent-watchdog"),
            asyncio.create_task(self._heartbeat(), name="agent-heartbeat"),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks, what="fencing agent")
        self._tasks = []
        for step in list(self._steps):
            step.cancel()
        for inf in self.informers:
            await inf.stop()
        self.informers = []
        await self.events.flush(2.0)
        await self.events.stop()

    async def _discover_workloads(self) -> Resource | None:
        """Kueue's Workload resource (``v1beta2`` where served), or None on a worker without Kueue."""
        delay = 0.5
        while True:
            try:
                group = await self.client.request("GET", f"/apis/{KUEUE_GROUP}", timeout=10.0)
            except KubeError as exc:
                if exc.not_found:
                    log.warning("no Kueue API on this worker: copies are fenced by suspension only")
                    return None
                log.info("Kueue API discovery failed (%s); retrying", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            versions = [v.get("version") for v in group.get("versions") or []]
            version = "v1beta2" if "v1beta2" in versions else "v1beta1"
            return Resource(KUEUE_GROUP, version, "workloads", "Workload")

    # -- what the informers tell ---------------------------------------------------------------------------

    def _wanted(self, origin: str) -> bool:
        return not self.options.origins or origin in self.options.origins

    def _on_lease(self, kind: str, obj: Obj, _old: Obj | None) -> None:
        meta = obj.get("metadata") or {}
        origin = str((meta.get("labels") or {}).get(L.FENCING, ""))
        if not origin or not self._wanted(origin):
            return
        if kind == "DELETED":
            # Deleted on purpose (the dispatcher no longer fences here): nothing more is fenced for it.
            self.leases.pop(origin, None)
            self.expired_gauge.labels(origin).set(0)
            return
        spec = obj.get("spec") or {}
        renew = str(spec.get("renewTime") or spec.get("acquireTime") or "")
        duration = float(spec.get("leaseDurationSeconds") or 0)
        state = self.leases.get(origin)
        now = self.clock()
        if state is None:
            # First sight (or this agent just started): the dispatcher gets a whole duration from now, as a new
            # leader-election candidate gives the current holder.
            self.leases[origin] = LeaseState(origin, duration, renew, now)
            log.info("following the fencing Lease of %s (duration %gs)", origin, duration)
        elif renew != state.renew_time or duration != state.duration:
            state.renew_time, state.duration, state.observed_at = renew, duration, now
            if state.expired:
                state.expired = False
                state.expired_at = None
                self.expired_gauge.labels(origin).set(0)
                log.warning(
                    "the dispatcher %s renewed its Lease again: fencing stops; the %d copies fenced stay stopped "
                    "until the dispatcher places them again",
                    origin,
                    state.fenced,
                )
        self._changed.set()

    def _on_copy(self, adapter: Adapter, kind: str, obj: Obj, _old: Obj | None) -> None:
        if kind == "DELETED":
            return
        origin = str(((obj.get("metadata") or {}).get("labels") or {}).get(L.ORIGIN, ""))
        state = self.leases.get(origin)
        if state is not None and state.expired:
            self._fence_later(adapter, obj, state)

    def _on_workload(self, kind: str, obj: Obj, old: Obj | None) -> None:
        meta = obj.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            owner = str(ref.get("uid") or "")
            if not owner:
                continue
            if kind == "DELETED":
                self.workloads_by_owner.get(owner, {}).pop(str(meta.get("uid")), None)
                continue
            self.workloads_by_owner.setdefault(owner, {})[str(meta.get("uid"))] = obj
            if (obj.get("spec") or {}).get("active", True) is not False:
                copy = self._copy_by_uid(owner)
                if copy is not None and L.FENCED in ((copy.get("metadata") or {}).get("annotations") or {}):
                    # A fenced copy's Workload active again (re-created by Kueue, or re-activated by hand): the copy
                    # stays stopped until the dispatcher places it again.
                    self._spawn(self._deactivate(obj, "its copy is fenced"))

    def _copy_by_uid(self, uid: str) -> Obj | None:
        for inf in self.copy_informers.values():
            for obj in inf.cache.values():
                if (obj.get("metadata") or {}).get("uid") == uid:
                    return obj
        return None

    # -- expiry --------------------------------------------------------------------------------------------

    async def _watchdog(self) -> None:
        """Expire Leases by the agent's clock; woken by Lease events, else at the next deadline (at most 1 s
        apart, so that a clock that runs at another rate than the event loop's is read again soon)."""
        await asyncio.gather(*(inf.synced.wait() for inf in self.informers))
        self.ready.set()
        while True:
            self._changed.clear()
            now = self.clock()
            for state in list(self.leases.values()):
                if not state.expired and state.duration > 0 and now >= state.deadline():
                    await self._expire(state, now)
            waits = [s.deadline() - now for s in self.leases.values() if not s.expired and s.duration > 0]
            timeout = max(0.05, min([1.0, *waits]))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._changed.wait()

    async def _expire(self, state: LeaseState, now: float) -> None:
        state.expired = True
        state.expired_at = now
        self.expired_gauge.labels(state.origin).set(1)
        silent = now - state.observed_at
        log.warning(
            "the dispatcher %s has not renewed its fencing Lease for %.1fs (duration %gs) by this agent's clock: "
            "fencing its copies on this worker",
            state.origin,
            silent,
            state.duration,
        )
        for plural, inf in self.copy_informers.items():
            for obj in list(inf.cache.values()):
                if ((obj.get("metadata") or {}).get("labels") or {}).get(L.ORIGIN) == state.origin:
                    self._fence_later(self.adapters[plural], obj, state)

    def _fence_later(self, adapter: Adapter, obj: Obj, state: LeaseState) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not uid or uid in self._busy or self._fenced(adapter, obj):
            return
        self._busy.add(uid)
        self._spawn(self._fence(adapter, obj, state))

    def _fenced(self, adapter: Adapter, obj: Obj) -> bool:
        """Already fenced: annotated, suspended, and every Workload it owns deactivated."""
        meta = obj.get("metadata") or {}
        if L.FENCED not in (meta.get("annotations") or {}) or not adapter.suspended(obj):
            return False
        owned = self.workloads_by_owner.get(str(meta.get("uid")), {})
        return all((w.get("spec") or {}).get("active", True) is False for w in owned.values())

    async def _fence(self, adapter: Adapter, obj: Obj, state: LeaseState) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid"))
        try:
            if adapter.finished(obj):
                return
            silent = (state.expired_at or self.clock()) - state.observed_at
            why = (
                f"{_stamp()}: the dispatcher {state.origin!r} did not renew its fencing Lease "
                f"{self.options.namespace}/{fencing_lease_name(state.origin)} for {silent:.0f}s (duration "
                f"{state.duration:g}s) by this worker's fencing agent's clock; stopped so that it never runs twice"
            )
            # In this order: the annotation first, so that the dispatcher learns why before it sees Kueue's eviction;
            # then the Workloads deactivated, so that Kueue never starts the copy again once it is suspended.
            name, ns = str(meta.get("name")), meta.get("namespace")
            annotate: Obj = {"metadata": {"uid": uid, "annotations": {L.FENCED: why}}}
            suspend: Obj = {"metadata": {"uid": uid}}
            node = suspend
            for key in adapter.suspend_at:
                node = node.setdefault(key, {})
            node["suspend"] = True
            try:
                if L.FENCED not in (meta.get("annotations") or {}):
                    await self.client.patch(adapter.resource, ns, name, annotate)
                for wl in list(self.workloads_by_owner.get(uid, {}).values()):
                    await self._deactivate(wl, "its dispatcher's fencing Lease expired")
                await self.client.patch(adapter.resource, ns, name, suspend)
                # Suspended, its controller will not start pods again; stop the running ones now rather than when
                # the controller gets to it, which on a busy worker is many seconds later.
                await self._stop_pods(adapter, obj)
            except KubeError as exc:
                if exc.not_found or exc.code == 409:
                    return  # gone, or another object by that name now
                raise
            if L.FENCED in (meta.get("annotations") or {}) or uid in self._told:
                return  # fenced before (its Workload was active again, or an older event): counted and told then
            self._told.add(uid)
            state.fenced += 1
            self.fenced_total.labels(state.origin).inc()
            self.events.emit(
                {**obj, "apiVersion": adapter.resource.api_version, "kind": adapter.kind},
                "Warning",
                "FencedByAgent",
                why,
            )
            log.warning("fenced %s %s/%s of %s", adapter.kind, meta.get("namespace"), meta.get("name"), state.origin)
        except KubeError as exc:
            log.error("fencing %s/%s failed (%s); trying again", meta.get("namespace"), meta.get("name"), exc)
            await asyncio.sleep(1.0)
            self._busy.discard(uid)
            inf = self.copy_informers[adapter.resource.plural]
            current = inf.cache.get((meta.get("namespace", ""), meta.get("name", "")))
            if current is not None and state.expired:
                self._fence_later(adapter, current, state)
            return
        finally:
            self._busy.discard(uid)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        async def runner() -> None:
            try:
                await coro
            except KubeError as exc:
                log.error("a fencing step failed: %s", exc)

        task = asyncio.get_running_loop().create_task(runner())
        self._steps.add(task)
        task.add_done_callback(self._steps.discard)

    async def _stop_pods(self, adapter: Adapter, obj: Obj) -> None:
        """Delete the copy's pods that have not finished, each with its own grace period (its containers get the
        time they were promised to stop)."""
        selector = adapter.pod_selector(obj)
        namespace = (obj.get("metadata") or {}).get("namespace")
        if selector is None or not namespace:
            return
        pods = (await self.client.list(PODS, namespace, label_selector=selector)).get("items") or []
        for pod in pods:
            meta = pod.get("metadata") or {}
            if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue  # already stopping, or done
            if await self.client.delete(PODS, namespace, str(meta.get("name")), uid=meta.get("uid")) is not None:
                self.pods_stopped.inc()

    async def _deactivate(self, wl: Obj, why: str) -> None:
        if self.workload_resource is None or (wl.get("spec") or {}).get("active", True) is False:
            return
        meta = wl.get("metadata") or {}
        try:
            await self.client.patch(
                self.workload_resource,
                meta.get("namespace"),
                str(meta.get("name")),
                {"metadata": {"uid": meta.get("uid")}, "spec": {"active": False}},
            )
            log.info("deactivated Workload %s/%s: %s", meta.get("namespace"), meta.get("name"), why)
        except KubeError as exc:
            if not (exc.not_found or exc.code == 409):
                raise

    # -- heartbeat -----------------------------------------------------------------------------------------

    def status(self) -> Obj:
        """What this agent reports in its heartbeat: per origin, whether its Lease is expired and what it fenced."""
        now = self.clock()
        return {
            origin: {
                "expired": s.expired,
                "fenced": s.fenced,
                "silentSeconds": round(max(0.0, now - s.observed_at), 1),
                "leaseDurationSeconds": s.duration,
            }
            for origin, s in sorted(self.leases.items())
        }

    async def _heartbeat(self) -> None:
        interval = self.options.heartbeat_interval
        ns = self.options.namespace
        while True:
            now = datetime.now(UTC)
            body: Obj = {
                "metadata": {
                    "labels": {L.AGENT: "true"},
                    "annotations": {L.AGENT_STATUS: json.dumps(self.status(), sort_keys=True)},
                },
                "spec": {
                    "holderIdentity": self.options.identity,
                    "leaseDurationSeconds": max(1, round(interval * 3)),
                    "renewTime": _micro_time(now),
                },
            }
            try:
                try:
                    await self.client.patch(LEASES, ns, AGENT_LEASE, body)
                except KubeError as exc:
                    if not exc.not_found:
                        raise
                    body["metadata"]["name"] = AGENT_LEASE
                    body["spec"]["acquireTime"] = _micro_time(now)
                    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", **body}
                    await self.client.create(LEASES, ns, lease)
            except KubeError as exc:
                log.warning("heartbeat not written (%s)", exc)
            await asyncio.sleep(interval)

    # -- probes and metrics --------------------------------------------------------------------------------

    def http_app(self) -> web.Application:
        """``/healthz`` (the loops run), ``/readyz`` (informers synced) and ``/metrics``."""

        async def healthz(_request: web.Request) -> web.Response:
            alive = all(not t.done() for t in self._tasks)
            return web.Response(text="ok" if alive else "stopped", status=200 if alive else 500)

        async def readyz(_request: web.Request) -> web.Response:
            return web.Response(
                text="ok" if self.ready.is_set() else "syncing", status=200 if self.ready.is_set() else 503
            )

        async def metrics(_request: web.Request) -> web.Response:
            return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        app.router.add_get("/metrics", metrics)
        return app


def agent_status(lease: Obj | None) -> Obj | None:
    """The status an agent's heartbeat Lease reports (see :meth:`FencingAgent.status`), or None."""
    if not lease:
        return None
    raw = ((lease.get("metadata") or {}).get("annotations") or {}).get(L.AGENT_STATUS)
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


async def connect_agent(kube: KubeconfigRef, name: str = "worker") -> ClusterClient:
    """The agent's client: short deadlines, so that a stalled call never holds fencing back for long."""
    return await connect(f"{name}-agent", kube, timeout=5.0)


class AgentGroup:
    """Fencing agents of several workers in one process: what the simulated rig runs inside its workers (the real
    rig runs ``dispatcher agent`` processes instead)."""

    def __init__(self) -> None:
        self.agents: dict[str, FencingAgent] = {}

    @classmethod
    async def start(
        cls,
        kubeconfigs: dict[str, KubeconfigRef],
        options: AgentOptions | None = None,
        *,
        clocks: dict[str, Callable[[], float]] | None = None,
    ) -> AgentGroup:
        group = cls()
        for name, ref in kubeconfigs.items():
            client = await connect_agent(ref, name)
            opts = options or AgentOptions()
            opts = AgentOptions(
                namespace=opts.namespace,
                identity=f"{name}-fencing-agent",
                heartbeat_interval=opts.heartbeat_interval,
                origins=opts.origins,
            )
            agent = FencingAgent(client, opts, clock=(clocks or {}).get(name, time.monotonic))
            await agent.start()
            group.agents[name] = agent
        return group

    async def stop_one(self, name: str) -> None:
        """Stop one worker's agent (a drill's "agent down too")."""
        agent = self.agents.pop(name, None)
        if agent is not None:
            await agent.stop()
            await agent.client.close()

    async def stop(self) -> None:
        for name in list(self.agents):
            await self.stop_one(name)


async def serve(kube: KubeconfigRef, options: AgentOptions, listen: str | None, stop: asyncio.Event) -> int:
    """``dispatcher agent``: run one worker's fencing agent until ``stop`` is set."""
    try:
        client = await connect_agent(kube)
    except KubeError as exc:
        log.error("cannot start: %s", exc.message)
        return 2
    agent = FencingAgent(client, options)
    runner: web.AppRunner | None = None
    try:
        await agent.start()
        if listen:
            host, _, port = listen.rpartition(":")
            runner = web.AppRunner(agent.http_app(), access_log=None, handle_signals=False)
            await runner.setup()
            await web.TCPSite(runner, host or "0.0.0.0", int(port)).start()
        log.info(
            "fencing agent %s watching the fencing Leases in %s%s",
            options.identity,
            options.namespace,
            f" (origins {', '.join(options.origins)})" if options.origins else "",
        )
        await stop.wait()
    finally:
        if runner is not None:
            await runner.cleanup()
        await agent.stop()
        await client.close()
    return 0
