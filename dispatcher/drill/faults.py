"""How a drill fails a worker: the simulator's fault (in this process or through its admin endpoint), the
operator's commands, or the operator's hands."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol, TextIO

import aiohttp

from ..kube.client import ClusterClient
from ..logs import redact_text
from .common import DrillError

__all__ = ["AdminFault", "CommandFault", "Fault", "ManualFault", "SimFault"]

Obj = dict[str, Any]


# -- the fault -----------------------------------------------------------------------------------------------


class Fault(Protocol):
    async def inject(self) -> float:
        """Fail the worker; the monotonic time the fault began."""

    async def heal(self) -> None: ...


class SimFault:
    """A fault of a simulated cluster in this process."""

    def __init__(self, cluster: Any, mode: str) -> None:
        self.cluster = cluster
        self.mode = mode

    async def inject(self) -> float:
        started = time.monotonic()
        await self.cluster.set_fault(self.mode, error_rate=0.5)
        return started

    async def heal(self) -> None:
        await self.cluster.set_fault("none")


class AdminFault:
    """A fault of a simulated cluster of ``dispatcher sim up``, through its admin endpoint."""

    def __init__(self, admin: str, cluster: str, mode: str) -> None:
        self.admin = admin
        self.cluster = cluster
        self.mode = mode

    async def _set(self, body: Obj) -> None:
        url = f"{self.admin.rstrip('/')}/clusters/{self.cluster}/fault"
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
                session.post(url, json=body) as resp,
            ):
                if resp.status >= 400:
                    raise DrillError(f"the simulator's admin endpoint refused the fault: {await resp.text()}")
        except aiohttp.ClientError as exc:
            raise DrillError(f"cannot reach the simulator's admin endpoint {self.admin}: {exc}") from None

    async def inject(self) -> float:
        started = time.monotonic()
        await self._set({"mode": self.mode, "errorRate": 0.5})
        return started

    async def heal(self) -> None:
        await self._set({"mode": "none"})


async def _shell(command: str, what: str) -> None:
    proc = await asyncio.create_subprocess_shell(
        command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    if proc.returncode:
        # The command and its output are the operator's, and may quote a token: redacted like a log line.
        said = out.decode(errors="replace")[-500:]
        raise DrillError(redact_text(f"{what} {command!r} exited with {proc.returncode}: {said}"))


class CommandFault:
    """A fault made by the operator's commands (``--fault-command``, ``--heal-command``)."""

    def __init__(self, inject_command: str, heal_command: str | None) -> None:
        self.inject_command = inject_command
        self.heal_command = heal_command

    async def inject(self) -> float:
        started = time.monotonic()
        await _shell(self.inject_command, "--fault-command")
        return started

    async def heal(self) -> None:
        if self.heal_command:
            await _shell(self.heal_command, "--heal-command")


class ManualFault:
    """The operator fails the worker by hand; the fault begins when the worker first stops answering."""

    def __init__(self, client: ClusterClient, name: str, progress: TextIO, timeout: float) -> None:
        self.client = client
        self.name = name
        self.progress = progress
        self.timeout = timeout

    async def inject(self) -> float:
        self.progress.write(
            f"\nnow make worker {self.name} fail (for kind: kind/drill.sh {self.name}); "
            f"waiting up to {self.timeout:g}s for it to stop answering\n"
        )
        self.progress.flush()
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            probed = time.monotonic()
            if not await self.client.readyz(timeout=1.0):
                return probed
            await asyncio.sleep(0.2)
        raise DrillError(f"worker {self.name} kept answering for {self.timeout:g}s; no fault to measure")

    async def heal(self) -> None:
        self.progress.write(f"bring worker {self.name} back now; waiting for the dispatcher to trust it again\n")
        self.progress.flush()
