"""One supervised OS process of the rig: started in its own process group, logged to a file, stopped for good.

Each component (etcd, kube-apiserver, Kueue, ...) runs as a child in a session of its own, so that a stop
reaches anything it forked and a Ctrl-C on the terminal reaches only ``rig up``, which then stops them in order.
A component that exits while it should run is reported with the tail of its log, and a listener that could not
bind is named as a taken port, not as a vague failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

__all__ = ["ComponentError", "Process"]

_IN_USE = re.compile(
    r"(?:bind|listen)[^\n]*?(?:127\.0\.0\.1|\[::\]|0\.0\.0\.0|localhost)?:(\d+)[^\n]*address already in use"
)


class ComponentError(RuntimeError):
    """A component that would not start or stopped on its own; the message says which and why."""


class Process:
    """A component's process. ``start`` launches it, ``stop`` ends it (SIGTERM, then SIGKILL after ``grace``),
    ``pause``/``resume`` freeze and thaw it (SIGSTOP/SIGCONT: a hung server, as in a partition)."""

    def __init__(
        self, cluster: str, name: str, argv: Sequence[str], log: Path, *, env: dict[str, str] | None = None
    ) -> None:
        self.cluster = cluster
        self.name = name
        self.argv = list(argv)
        self.log = log
        self.env = env
        self.proc: asyncio.subprocess.Process | None = None
        self.paused = False
        self.expected_exit = False
        #: Called after each start (the rig rewrites rig.json with the new pid).
        self.on_start: Callable[[], None] | None = None

    @property
    def label(self) -> str:
        return f"{self.name} of {self.cluster}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self) -> None:
        if self.running:
            return
        binary = self.argv[0]
        if not os.access(binary, os.X_OK):
            raise ComponentError(
                f"{self.label}: {binary} is missing or not executable; build it with `bash rig/build.sh`"
            )
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, f"\n==== {time.strftime('%Y-%m-%dT%H:%M:%S')} start: {' '.join(self.argv)}\n".encode())
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                env=env,
                start_new_session=True,
            )
        finally:
            os.close(fd)
        self.paused = False
        if self.on_start is not None:
            self.on_start()
        self.expected_exit = False

    def tail(self, lines: int = 15) -> str:
        """The last lines of the component's log (for errors)."""
        try:
            with self.log.open("rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 16384))
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def failure(self) -> ComponentError:
        """The error for a component that exited: a taken port is named as such."""
        tail = self.tail(40)
        code = self.proc.returncode if self.proc is not None else None
        match = _IN_USE.search(tail)
        if match:
            return ComponentError(f"{self.label}: port {match.group(1)} is already taken by another program")
        last = "\n".join(tail.splitlines()[-12:])
        return ComponentError(f"{self.label} exited with code {code}; last lines of {self.log}:\n{last}")

    async def wait_ready(self, probe: Callable[[], Awaitable[bool]], *, timeout: float, interval: float = 0.2) -> None:
        """Wait until ``probe`` answers True; fail at once if the process exits, or after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.running:
                raise self.failure()
            with contextlib.suppress(Exception):
                if await probe():
                    return
            if time.monotonic() > deadline:
                raise ComponentError(
                    f"{self.label} was not ready after {timeout:g} s; last lines of {self.log}:\n{self.tail(12)}"
                )
            await asyncio.sleep(interval)

    def _signal(self, sig: int) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False

    async def stop(self, grace: float = 10.0) -> None:
        """End the process and its group; wait until it is gone (SIGKILL after ``grace`` seconds)."""
        if self.proc is None:
            return
        self.expected_exit = True
        if self.proc.returncode is None:
            self._signal(signal.SIGCONT)  # a paused process cannot act on SIGTERM
            self._signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(grace):
                    await self.proc.wait()
            except TimeoutError:
                self._signal(signal.SIGKILL)
                await self.proc.wait()
        # Anything the component forked into its group goes too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.paused = False

    def kill(self) -> None:
        """SIGKILL without waiting (the last resort of an interrupted ``rig up``)."""
        self.expected_exit = True
        self._signal(signal.SIGKILL)
