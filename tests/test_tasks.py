"""kubecommon/tasks.py: a stop that cannot hang, and why the project bans asyncio.wait_for on Python 3.11."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from kubecommon.tasks import cancel_and_wait


async def _cancel_as_it_completes(use_timeout: bool) -> object:
    """Cancel a task in the same loop turn as the future it awaits completes; what the task then returns."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()

    async def waiter() -> int:
        if use_timeout:
            async with asyncio.timeout(10):
                return await fut
        return await asyncio.wait_for(fut, 10)  # noqa: TID251 - the banned call, shown failing

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    fut.set_result(1)
    task.cancel()
    try:
        return await task
    except asyncio.CancelledError:
        return "cancelled"


async def _stubborn(release: asyncio.Event) -> None:
    """Ignores every cancellation until ``release`` is set."""
    while not release.is_set():
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            continue


async def test_asyncio_timeout_keeps_a_cancellation_that_wait_for_swallows() -> None:
    assert await _cancel_as_it_completes(use_timeout=True) == "cancelled"
    if sys.version_info < (3, 12):
        # CPython gh-86296: the cancellation is lost and the task goes on as if nothing happened.
        assert await _cancel_as_it_completes(use_timeout=False) == 1


async def test_a_task_that_swallows_cancellations_is_cancelled_again_until_it_stops() -> None:
    swallowed = 0

    async def loop_forever() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                swallowed += 1
                if swallowed > 3:
                    raise

    task = asyncio.create_task(loop_forever())
    await asyncio.sleep(0)
    assert await cancel_and_wait([task], what="test", patience=5.0) == 0
    assert task.cancelled() and swallowed == 4


async def test_a_task_that_never_stops_is_left_after_the_patience_and_named(caplog: pytest.LogCaptureFixture) -> None:
    release = asyncio.Event()

    task = asyncio.create_task(_stubborn(release), name="stubborn-one")
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="kubecommon.tasks"):
        assert await cancel_and_wait([task, None], what="unit", patience=0.5) == 1
    assert "unit: 1 task(s) did not stop within 0.5s: stubborn-one" in caplog.text
    release.set()
    task.cancel()
    await asyncio.wait({task}, timeout=5)
    assert task.done()


async def test_a_failed_task_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def broken() -> None:
        raise RuntimeError("boom")

    task = asyncio.create_task(broken())
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="kubecommon.tasks"):
        assert await cancel_and_wait([task], what="unit") == 0
    assert "RuntimeError('boom')" in caplog.text


async def test_cancelling_the_caller_still_cancels_it() -> None:
    release = asyncio.Event()

    inner = asyncio.create_task(_stubborn(release))
    await asyncio.sleep(0)
    outer = asyncio.create_task(cancel_and_wait([inner], patience=60.0))
    await asyncio.sleep(0.05)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    release.set()
    inner.cancel()
    await asyncio.wait({inner}, timeout=5)
    assert inner.done()
