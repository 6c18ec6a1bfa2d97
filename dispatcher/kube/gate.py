"""Calls in flight to one cluster: a first-come, first-served gate in front of its connection pool.

Why not let aiohttp's pool queue the calls: its ``ClientTimeout(total=...)`` starts when a call is made, so a
call that waited for one of a worker's :data:`~.pools.REQUEST_CONNECTIONS` behind a burst of our own calls had
little of its deadline left when it finally went out. It then timed out *after* the request left, and HTTP/1.1
cannot reuse a connection whose answer never came: aiohttp closes it, and the next call pays a new TLS handshake
on both sides. Measured on a 10,000-Job burst to 100 simulated workers (bench/RESULTS.md): 3,300 creates timed
out that way, 17,000 connections were opened in two minutes, and their handshakes cost more CPU than any single
step of a Job.

Behind the gate a call waits for a turn, in order; its deadline starts when it has one, so it measures the
server, not our own queue. A call with an explicit deadline (a health probe, a bounded status write) still keeps
it for the wait and the call together. A step that issues several calls in a row, or must look again at its
workload once its turn has come (the mirror: a workload failed over while it waited must not be created on the
old worker), holds one turn for all of them with :meth:`Gate.turn`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["Gate"]

#: The turns the current task holds, as (gate, task), so that a call made inside :meth:`Gate.turn` does not queue
#: for a second turn behind itself. The task is part of the key because a task started inside the block copies
#: this context, and must still queue for a turn of its own.
_held: contextvars.ContextVar[frozenset[tuple[Gate, asyncio.Task[Any] | None]]] = contextvars.ContextVar(
    "dispatcher_gate_held", default=frozenset()
)


class Gate:
    """At most ``limit`` turns at once, granted first come, first served."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a gate needs at least one turn, got {limit}")
        self.limit = limit
        self._in_use = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        #: Turns granted, and how long they waited in all (seconds): the queue's cost, for metrics and tests.
        self.granted = 0
        self.waited = 0.0

    @property
    def in_use(self) -> int:
        """Turns held now."""
        return self._in_use

    @property
    def waiting(self) -> int:
        """Calls queued for a turn now (a cancelled waiter leaves the queue, a granted one is taken off it first)."""
        return len(self._waiters)

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold one turn for the block (no-op if this task holds one already). Cancellation while waiting leaves
        the queue as it was, and a turn granted at that very moment passes to the next in line."""
        held, key = _held.get(), (self, asyncio.current_task())
        if key in held:
            yield
            return
        await self._acquire()
        token = _held.set(held | {key})
        try:
            yield
        finally:
            _held.reset(token)
            self._release()

    async def _acquire(self) -> None:
        if self._in_use < self.limit and not self._waiters:
            self._in_use += 1
            self.granted += 1
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append(fut)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                # Granted and cancelled in the same step: the turn is ours, hand it on.
                self._release()
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise
        self.granted += 1
        self.waited += loop.time() - started

    def _release(self) -> None:
        # The turn passes straight to the next waiter (``_in_use`` unchanged), so a newcomer never overtakes it.
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._in_use -= 1
