"""Faults a simulated cluster can be put in, for failover drills and tests.

- ``stop``: the listener is closed and open connections dropped: clients get connection refused.
- ``partition``: connections are accepted but nothing is answered (requests and watch streams hang).
- ``slow``: every request is delayed by ``latency`` seconds.
- ``flaky``: a share (``error_rate``) of requests fail with 500 or with 429 and ``Retry-After``.
- ``down``: the whole cluster is down (a power loss): the listener is closed as for ``stop`` and every
  emulated controller, kubelet included, is paused, so nothing runs or progresses there until healed.
- ``restart``: connections drop and the listener is down for ``downtime`` seconds, state is kept;
  clients must re-establish their watches.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

__all__ = ["FAULT_MODES", "FaultState"]

FAULT_MODES = ("none", "stop", "down", "partition", "slow", "flaky", "restart")


@dataclass
class FaultState:
    mode: str = "none"
    latency: float = 0.0
    error_rate: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    _healed: asyncio.Event | None = None

    def healed_event(self) -> asyncio.Event:
        if self._healed is None:
            self._healed = asyncio.Event()
            self._healed.set()
        return self._healed

    def set(self, mode: str, *, latency: float = 0.0, error_rate: float = 0.0) -> None:
        if mode not in FAULT_MODES:
            raise ValueError(f"unknown fault mode {mode!r}; expected one of {', '.join(FAULT_MODES)}")
        self.mode = mode
        self.latency = latency
        self.error_rate = error_rate
        healed = self.healed_event()
        if mode == "partition":
            healed.clear()
        else:
            healed.set()

    async def wait_healed(self) -> None:
        """Block while partitioned."""
        await self.healed_event().wait()

    def roll_error(self) -> int | None:
        """For ``flaky``: 500 or 429 for a share of requests, else None."""
        if self.mode != "flaky" or self.rng.random() >= self.error_rate:
            return None
        return 500 if self.rng.random() < 0.5 else 429
