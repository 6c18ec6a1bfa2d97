"""Stopping asyncio tasks for sure, on Python 3.11.

Python 3.11's ``asyncio.wait_for`` can swallow a cancellation that arrives as the awaited thing completes
(CPython gh-86296, fixed in 3.12 by re-implementing it on ``asyncio.timeout``). A loop that waits that way and is
cancelled once may simply go round again; a ``stop()`` that cancels it once and then awaits it waits for ever.
That is how a CI run hung for ten minutes after a real-rig drill had passed. So the project bans
``asyncio.wait_for`` (ruff TID251: use ``asyncio.timeout``), and every stop goes through :func:`cancel_and_wait`,
which cancels again until the task is done and never waits unboundedly.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("kubecommon.tasks")

#: How long a cancelled task may take to clean up before it is cancelled again (a ``finally`` that awaits), and
#: how often after that.
FIRST_WAIT = 1.0
RECANCEL_EVERY = 0.2


async def cancel_and_wait(
    tasks: Iterable[asyncio.Future[Any] | None], *, what: str = "", patience: float = 10.0
) -> int:
    """Cancel ``tasks`` and wait until each is done, cancelling again after 1 s and then every 0.2 s (a
    swallowed cancellation costs a second, not a hang). After ``patience`` seconds the ones still running are
    logged and left; the number left is returned. A task's own exception is logged, not raised: a stop must
    finish. Cancelling the caller still cancels it (``asyncio.wait`` does not suppress the caller's own
    cancellation)."""
    given = [t for t in tasks if t is not None]
    pending = {t for t in given if not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    finished = {t for t in given if t.done()}
    wait = FIRST_WAIT
    while pending:
        for task in pending:
            task.cancel()
        left = deadline - loop.time()
        if left <= 0:
            break
        done, pending = await asyncio.wait(pending, timeout=min(wait, left))
        finished |= done
        wait = RECANCEL_EVERY
    for task in finished:
        if not task.cancelled() and task.exception() is not None:
            log.warning("%s: a task ended with %r while stopping", what or "stop", task.exception())
    if pending:
        names = ", ".join(sorted(_name(t) for t in pending))
        log.warning("%s: %d task(s) did not stop within %gs: %s", what or "stop", len(pending), patience, names)
    return len(pending)


def _name(task: asyncio.Future[Any]) -> str:
    return task.get_name() if isinstance(task, asyncio.Task) else repr(task)
