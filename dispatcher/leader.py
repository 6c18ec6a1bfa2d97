"""Leader election between dispatcher replicas, the Kubernetes way: a ``coordination.k8s.io/v1`` Lease.

The algorithm is client-go's ``leaderelection`` package (what controller-runtime's ``--leader-elect`` uses):

- the Lease's ``spec`` carries ``holderIdentity``, ``leaseDurationSeconds``, ``acquireTime``, ``renewTime`` and
  ``leaseTransitions``; every write is a PUT with the ``resourceVersion`` last read, so of two replicas writing
  at once one gets **409 Conflict** and has lost that round;
- a candidate never trusts the holder's clock: it notes *when it saw the record change* (monotonic time) and
  takes the Lease only once the record has stayed unchanged for ``leaseDurationSeconds`` (or is released:
  empty ``holderIdentity``); taking it over increments ``leaseTransitions`` and sets ``acquireTime``;
- the leader renews every ``retry_period`` and gives up leading when no renewal succeeded within
  ``renew_deadline`` of the start of the last good one. The renew deadline is shorter than the lease
  duration, so the leader stops acting before any candidate may consider the Lease expired;
- on a clean shutdown the leader releases the Lease (empty holder, duration 1 s) after it stopped acting.

Defaults are controller-runtime's: lease duration 15 s, renew deadline 10 s, retry period 2 s. A candidate
polls every retry period (plus up to 10 % jitter), and wakes up right when the Lease it watches expires.

The elector only decides who leads; :mod:`.fencing` makes a deposed leader's late writes fail (the term in
SQL, the lease deadline checked before each write).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubecommon.tasks import cancel_and_wait

from .fencing import Fence
from .kube.client import ClusterClient, KubeError, Resource

__all__ = ["LEASES", "LeaderElectionConfig", "LeaderElector", "default_identity"]

log = logging.getLogger("dispatcher.leader")
Obj = dict[str, Any]

LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
DEFAULT_LEASE_NAMESPACE = "dispatcher-system"
DEFAULT_LEASE_NAME = "kueue-dispatcher-leader"


def default_identity() -> str:
    """``<hostname>_<uuid>`` as controller-runtime does (the pod name in a Deployment, unique per process)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def _micro_time(at: datetime) -> str:
    """A ``metav1.MicroTime``: RFC 3339 with microseconds, UTC."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Where the Lease is and the timings (seconds). ``identity`` empty: :func:`default_identity`."""

    namespace: str = DEFAULT_LEASE_NAMESPACE
    name: str = DEFAULT_LEASE_NAME
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def problems(self) -> list[str]:
        """What is wrong with these settings, each naming the flag (empty when fine)."""
        out = []
        if not self.namespace:
            out.append("--leader-elect-resource-namespace must not be empty")
        if not self.name:
            out.append("--leader-elect-resource-name must not be empty")
        if self.retry_period <= 0:
            out.append(f"--leader-elect-retry-period must be > 0, got {self.retry_period:g}")
        if self.renew_deadline <= self.retry_period:
            out.append(
                f"--leader-elect-renew-deadline ({self.renew_deadline:g}) must be longer than "
                f"--leader-elect-retry-period ({self.retry_period:g})"
            )
        if self.lease_duration <= self.renew_deadline:
            out.append(
                f"--leader-elect-lease-duration ({self.lease_duration:g}) must be longer than "
                f"--leader-elect-renew-deadline ({self.renew_deadline:g}): a leader must stop acting before "
                "its lease can expire"
            )
        return out


@dataclass
class _Observed:
    """The record as last seen, and when (monotonic) it was seen to change."""

    spec: Obj = field(default_factory=dict)
    raw: str = ""
    at: float = 0.0
    obj: Obj | None = None


class LeaderElector:
    """Acquire and renew the Lease; run ``on_started_leading`` while leading, ``on_stopped_leading`` after."""

    def __init__(
        self,
        client: ClusterClient,
        config: LeaderElectionConfig,
        fence: Fence,
        *,
        on_started_leading: Callable[[], Coroutine[Any, Any, None]],
        on_stopped_leading: Callable[[], Coroutine[Any, Any, None]],
    ) -> None:
        self.client = client
        self.config = config
        self.identity = config.identity or default_identity()
        self.fence = fence
        self.fence.holder = self.identity
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self._observed = _Observed()
        self._task: asyncio.Task[None] | None = None
        self._leading_task: asyncio.Task[None] | None = None
        self.leading = asyncio.Event()
        self.transitions = 0  # times this replica started leading
        self._warned: str = ""

    # -- the record ------------------------------------------------------------------------------------

    @property
    def holder(self) -> str:
        """The holder as last observed ("" when unknown or released)."""
        return str(self._observed.spec.get("holderIdentity") or "")

    def _is_leader(self) -> bool:
        return self.holder == self.identity

    def _lease_valid(self, now: float) -> bool:
        duration = float(self._observed.spec.get("leaseDurationSeconds") or 0)
        return self._observed.at + duration > now

    def _observe(self, obj: Obj) -> None:
        """Note the record just received. A changed record is stamped with the time it arrived (client-go's
        ``observedTime``), never with the time its request started: a process frozen (SIGSTOP, a long GC
        pause) while its request was in flight would stamp a record written during the freeze with a time
        before it, and take a fresh Lease of another replica for expired."""
        spec = obj.get("spec") or {}
        raw = repr(sorted(spec.items()))
        if raw != self._observed.raw:
            self._observed = _Observed(spec=dict(spec), raw=raw, at=time.monotonic(), obj=obj)
        else:
            self._observed.obj = obj

    def _spec(self, now: datetime, previous: Obj | None) -> Obj:
        spec: Obj = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.config.lease_duration)),
            "acquireTime": _micro_time(now),
            "renewTime": _micro_time(now),
            "leaseTransitions": 0,
        }
        if previous is not None:
            if previous.get("holderIdentity") == self.identity:
                spec["acquireTime"] = previous.get("acquireTime") or spec["acquireTime"]
                spec["leaseTransitions"] = int(previous.get("leaseTransitions") or 0)
            else:
                spec["leaseTransitions"] = int(previous.get("leaseTransitions") or 0) + 1
        return spec

    async def _update(self, current: Obj, spec: Obj, timeout: float) -> Obj:
        body = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {
                "name": self.config.name,
                "namespace": self.config.namespace,
                "resourceVersion": (current.get("metadata") or {}).get("resourceVersion"),
            },
            "spec": spec,
        }
        return await self.client.request(
            "PUT", LEASES.path(self.config.namespace, self.config.name), body=body, timeout=timeout
        )

    async def try_acquire_or_renew(self, timeout: float) -> bool:
        """One round of client-go's tryAcquireOrRenew. True when this replica holds the Lease now."""
        now = time.monotonic()
        wall = datetime.now(UTC)
        cfg = self.config
        # Fast path: the leader renews what it wrote last, without reading it first.
        if self._is_leader() and self._lease_valid(now) and self._observed.obj is not None:
            try:
                updated = await self._update(self._observed.obj, self._spec(wall, self._observed.spec), timeout)
                self._observe(updated)
                return True
            except KubeError as exc:
                log.info("renewing Lease %s/%s failed (%s); reading it again", cfg.namespace, cfg.name, exc)
        try:
            current = await self.client.request("GET", LEASES.path(cfg.namespace, cfg.name), timeout=timeout)
        except KubeError as exc:
            if not exc.not_found:
                self._warn(f"reading Lease {cfg.namespace}/{cfg.name} failed: {exc}")
                return False
            body = {
                "apiVersion": LEASES.api_version,
                "kind": LEASES.kind,
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": self._spec(wall, None),
            }
            try:
                created = await self.client.request("POST", LEASES.path(cfg.namespace), body=body, timeout=timeout)
            except KubeError as exc2:
                if not exc2.already_exists:
                    self._warn(f"creating Lease {cfg.namespace}/{cfg.name} failed: {exc2}")
                return False
            self._observe(created)
            return True
        self._observe(current)
        holder = self.holder
        if holder and holder != self.identity and self._lease_valid(now):
            return False  # held by another replica, not expired (by our own clock)
        try:
            updated = await self._update(current, self._spec(wall, current.get("spec") or {}), timeout)
        except KubeError as exc:
            if not exc.conflict:  # a conflict: another replica wrote first, it won this round
                self._warn(f"updating Lease {cfg.namespace}/{cfg.name} failed: {exc}")
            return False
        self._observe(updated)
        return True

    def _warn(self, message: str) -> None:
        if message != self._warned:
            log.warning("%s", message)
            self._warned = message

    # -- the loops -------------------------------------------------------------------------------------

    async def _acquire(self) -> None:
        cfg = self.config
        while True:
            started = time.monotonic()
            if await self.try_acquire_or_renew(cfg.retry_period):
                self.fence.valid_until = started + cfg.renew_deadline
                return
            delay = cfg.retry_period * (1.0 + 0.1 * random.random())
            if self.holder and self.holder != self.identity:
                # Wake up right when the Lease we watch expires, not up to a retry period later.
                duration = float(self._observed.spec.get("leaseDurationSeconds") or 0)
                until_expiry = self._observed.at + duration - time.monotonic()
                delay = min(delay, max(0.02, until_expiry + 0.02))
            await asyncio.sleep(delay)

    async def _renew(self) -> str:
        """Renew until it fails for longer than the renew deadline, or another replica holds the Lease."""
        cfg = self.config
        while True:
            wait = min(cfg.retry_period, max(0.0, self.fence.valid_until - time.monotonic()))
            await asyncio.sleep(wait)
            started = time.monotonic()
            remaining = self.fence.valid_until - started
            if remaining <= 0:
                return f"the Lease was not renewed within the renew deadline ({cfg.renew_deadline:g}s)"
            if await self.try_acquire_or_renew(max(0.2, min(remaining, cfg.retry_period * 2))):
                self.fence.valid_until = started + cfg.renew_deadline
                continue
            if self.holder and self.holder != self.identity:
                return f"the Lease is held by {self.holder}"
            if time.monotonic() >= self.fence.valid_until:
                return f"the Lease was not renewed within the renew deadline ({cfg.renew_deadline:g}s)"

    async def run(self) -> None:
        """Forever: wait for the Lease, lead while holding it, step down when it is lost, and try again."""
        cfg = self.config
        while True:
            log.info("waiting to lead: Lease %s/%s as %s", cfg.namespace, cfg.name, self.identity)
            await self._acquire()
            self.transitions += 1
            log.warning(
                "leading: Lease %s/%s acquired as %s (transitions %s)",
                cfg.namespace,
                cfg.name,
                self.identity,
                self._observed.spec.get("leaseTransitions"),
            )
            self.leading.set()
            self._leading_task = asyncio.create_task(self.on_started_leading(), name="leading")
            try:
                reason = await self._renew()
            finally:
                self.fence.revoke()
                self.leading.clear()
                await self._cancel_leading()
            log.warning("stopped leading: %s", reason)
            await self.on_stopped_leading()

    async def _cancel_leading(self) -> None:
        task, self._leading_task = self._leading_task, None
        await cancel_and_wait([task], what="leading")

    def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name="leader-election")

    async def stop(self) -> None:
        """Stop campaigning (the caller stops acting first; see :meth:`release`)."""
        self.fence.revoke()
        if self._task is not None:
            await cancel_and_wait([self._task], what="leader")
            self._task = None
        await self._cancel_leading()

    async def release(self) -> None:
        """Hand the Lease back (empty holder, 1 s) so a standby takes over at once; only if we still hold it."""
        if not self._is_leader() or self._observed.obj is None:
            return
        now = datetime.now(UTC)
        spec = {
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": _micro_time(now),
            "renewTime": _micro_time(now),
            "leaseTransitions": int(self._observed.spec.get("leaseTransitions") or 0),
        }
        try:
            await self._update(self._observed.obj, spec, self.config.retry_period)
            log.info("released Lease %s/%s", self.config.namespace, self.config.name)
        except KubeError as exc:
            log.info("releasing the Lease failed (%s); it expires by itself", exc)


def lease_namespace_default() -> str:
    """``$POD_NAMESPACE``, else the namespace of the pod's service account, else ``dispatcher-system``."""
    env = os.environ.get("POD_NAMESPACE")
    if env:
        return env
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
            found = f.read().strip()
            if found:
                return found
    except OSError:
        pass
    return DEFAULT_LEASE_NAMESPACE


__all__ += ["DEFAULT_LEASE_NAME", "DEFAULT_LEASE_NAMESPACE", "lease_namespace_default"]
