"""Worker health: Ready -> Suspect -> Lost, from watch liveness and a periodic ``/readyz``.

Contact is anything the worker answered: a probe, an API call, a watch event or bookmark. A worker
becomes Suspect after ``suspect_after`` seconds without contact and Lost after ``lost_timeout``;
from Suspect it returns to Ready only after ``recover_probes`` successful probes in a row, so one
slow answer does not flap it. A Lost worker that answers again is ``Recovering``: the service
fences it (deletes stale copies) before it becomes Ready. Probes have short deadlines, so a worker
that accepts connections and never answers (a partition) goes the same way as a dead one.

A worker that answers but refuses the dispatcher's credentials (401) or rights (403) is ``NotReady``
with that reason: it is alive, so it is never failed over from (its copies may be running, and they
could not be fenced), but nothing is placed there until it accepts the dispatcher again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kubecommon.tasks import cancel_and_wait

__all__ = ["Answered", "HealthMachine", "HealthMonitor", "HealthState"]

log = logging.getLogger("dispatcher.health")


class HealthState:
    UNKNOWN = "Unknown"
    READY = "Ready"
    SUSPECT = "Suspect"
    LOST = "Lost"
    RECOVERING = "Recovering"
    #: Answers, but refuses the dispatcher (401/403): ``HealthMachine.reason`` says how.
    NOT_READY = "NotReady"


@dataclass(frozen=True)
class Answered:
    """A probe's result when no call was made because the worker answered a request at ``at`` (monotonic) within
    the probe interval: a success, with contact dated ``at`` and not now, so that skipping a call never makes a
    worker look more recently alive than it was."""

    at: float


@dataclass
class HealthMachine:
    """The state of one worker (pure; time is passed in)."""

    suspect_after: float
    lost_timeout: float
    recover_probes: int = 2
    state: str = HealthState.UNKNOWN
    since: float = 0.0
    last_contact: float = 0.0
    streak: int = 0
    #: When the worker was last seen alive before being declared Lost (for drills: detection time).
    lost_at: float = 0.0
    #: Why the worker is NotReady (its refusal), empty otherwise.
    reason: str = ""

    def contact(self, now: float) -> None:
        self.last_contact = max(self.last_contact, now)

    def probe(self, result: bool | str, now: float, *, answered_at: float | None = None) -> str | None:
        """Feed a probe result (True, False, or the worker's refusal); returns the new state when it changed.
        ``answered_at``: a success seen in a request's answer at that time rather than a call now."""
        if isinstance(result, str):
            # It answered: alive. But it refuses us: nothing may be placed there, and it is not failed over from.
            self.contact(now)
            self.streak = 0
            old = self.state
            self.reason = result
            if self.state not in (HealthState.LOST, HealthState.RECOVERING, HealthState.NOT_READY):
                self.state = HealthState.NOT_READY
                self.since = now
                return self.state
            return None if self.state == old else self.state
        if result:
            self.contact(now if answered_at is None else answered_at)
            self.streak += 1
            if self.state != HealthState.LOST:
                self.reason = ""
        else:
            self.streak = 0
        return self.tick(now)

    def tick(self, now: float) -> str | None:
        silent = now - self.last_contact if self.last_contact else float("inf")
        old = self.state
        if self.state == HealthState.UNKNOWN:
            if self.streak >= 1:
                self.state = HealthState.READY
            elif self.since and now - self.since > self.lost_timeout:
                self.state = HealthState.LOST
        elif self.state == HealthState.READY:
            if silent > self.suspect_after:
                self.state = HealthState.SUSPECT
        elif self.state == HealthState.NOT_READY:
            if self.streak >= 1 and not self.reason:
                self.state = HealthState.READY
            elif silent > self.suspect_after:
                self.state = HealthState.SUSPECT
        elif self.state == HealthState.SUSPECT:
            if silent > self.lost_timeout:
                self.state = HealthState.LOST
                self.lost_at = now
            elif self.streak >= self.recover_probes:
                self.state = HealthState.READY
        elif self.state == HealthState.LOST and self.streak >= self.recover_probes:
            self.state = HealthState.RECOVERING
        if self.state != old:
            self.since = now
            return self.state
        if not self.since:
            self.since = now
        return None

    def recovered(self, now: float) -> None:
        """Fencing done: a Recovering worker is trusted again."""
        if self.state == HealthState.RECOVERING:
            self.state = HealthState.READY
            self.since = now


Probe = Callable[[], Awaitable[bool | str | Answered]]
Contact = Callable[[], float]
OnChange = Callable[[str, str, str], None]


class HealthMonitor:
    """Probes every worker and feeds the machines; reports transitions to ``on_change``."""

    def __init__(self, *, interval: float, on_change: OnChange) -> None:
        self.interval = interval
        self.on_change = on_change
        self.machines: dict[str, HealthMachine] = {}
        self._probes: dict[str, tuple[Probe, Contact]] = {}
        self._task: asyncio.Task[None] | None = None

    def add(self, name: str, machine: HealthMachine, probe: Probe, contact: Contact) -> None:
        machine.since = time.monotonic()
        self.machines[name] = machine
        self._probes[name] = (probe, contact)

    def state(self, name: str) -> str:
        m = self.machines.get(name)
        return m.state if m else HealthState.UNKNOWN

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="health-monitor")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task], what="health")
            self._task = None

    async def probe_all(self) -> None:
        names = list(self._probes)
        results = await asyncio.gather(*(self._probes[n][0]() for n in names), return_exceptions=True)
        now = time.monotonic()
        for name, result in zip(names, results, strict=True):
            machine = self.machines[name]
            machine.contact(self._probes[name][1]())
            answered_at = result.at if isinstance(result, Answered) else None
            verdict: bool | str = result if isinstance(result, str) else (result is True or answered_at is not None)
            old, old_reason = machine.state, machine.reason
            new = machine.probe(verdict, now, answered_at=answered_at)
            if new is not None:
                if new == HealthState.NOT_READY:
                    log.error("worker %s: %s -> NotReady: %s", name, old, machine.reason)
                else:
                    log.info("worker %s: %s -> %s", name, old, new)
                self.on_change(name, old, new)
            elif machine.reason != old_reason and machine.state == HealthState.NOT_READY:
                log.error("worker %s: NotReady: %s", name, machine.reason)
                self.on_change(name, old, machine.state)

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.probe_all()
            except Exception:
                log.exception("health probe round failed")
            await asyncio.sleep(max(0.05, self.interval - (time.monotonic() - started)))
