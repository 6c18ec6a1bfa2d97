"""What a test that timed out was waiting on: every asyncio task's await chain, printed before pytest-timeout's
own thread stacks.

pytest-timeout shows each thread's stack; for an async test that is only the event loop sitting in ``select``,
which says nothing about the await that never returned (CI saw exactly that on a real-rig drill). The SIGALRM
handler runs on the main thread inside the loop's ``select``, so the running loop and its tasks are at hand.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import types
from typing import Any

import pytest


def await_chain(task: asyncio.Task[Any]) -> list[str]:
    """``file:line in function`` for each suspended frame of the task, outermost first, down to the awaited
    future (a coroutine's own stack stops at its top frame; the chain through ``cr_await`` is the useful part)."""
    lines: list[str] = []
    obj: Any = task.get_coro()
    for _ in range(64):
        frame: types.FrameType | None = getattr(obj, "cr_frame", None) or getattr(obj, "gi_frame", None)
        if frame is None and isinstance(obj, types.AsyncGeneratorType):
            frame = obj.ag_frame
        if frame is not None:
            code = frame.f_code
            lines.append(f"{code.co_filename}:{frame.f_lineno} in {code.co_name}")
        nxt = getattr(obj, "cr_await", None) or getattr(obj, "gi_yieldfrom", None) or getattr(obj, "ag_await", None)
        if nxt is None:
            if isinstance(obj, asyncio.Future) and not isinstance(obj, asyncio.Task):
                lines.append(f"awaiting {obj!r}"[:300])
            break
        obj = nxt
    return lines


def dump_tasks(write: Any) -> None:
    """Write each pending task of the running loop (if any) and its await chain."""
    loop = asyncio._get_running_loop()
    if loop is None:
        return
    tasks = sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name())
    write(f"\n{len(tasks)} asyncio tasks pending at the timeout\n")
    for task in tasks:
        write(f"--- task {task.get_name()}\n")
        for line in await_chain(task):
            write(f"    {line}\n")


def install(item: pytest.Item, settings: Any) -> bool:
    """pytest-timeout's signal timer, with the tasks dumped first. False where the signal method does not apply
    (then pytest-timeout's own hook sets its timer)."""
    import pytest_timeout

    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return False

    def handler(signum: int, frame: Any) -> None:
        __tracebackhide__ = True
        terminal = item.config.get_terminal_writer()
        try:
            dump_tasks(terminal.write)
        except Exception as exc:  # a diagnostic must never hide the timeout itself
            terminal.write(f"(could not list the asyncio tasks: {exc!r})\n")
        pytest_timeout.timeout_sigalrm(item, settings)

    def cancel() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel  # type: ignore[attr-defined]
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    return True
