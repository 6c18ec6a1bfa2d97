"""The network path from outside a real cluster to its API server, which a ``partition`` fault cuts.

Clients outside the cluster (the dispatcher, kubectl, the tests' administrator) reach the API server through this
TCP proxy (``<cluster>.kubeconfig``, ``<cluster>.dispatcher.kubeconfig``); the cluster's own components and its
fencing agent reach it directly (``<cluster>.inside.kubeconfig``, ``<cluster>.agent.kubeconfig``). A partition,
as a real one does, leaves the cluster running and reachable from inside: connections from outside are accepted and
never answered, and what is sent meanwhile never arrives. Healing resets the connections held during the cut (as a
NAT that lost their state does); clients connect again.

TLS is end to end (the proxy only moves bytes), so the API server's certificate for 127.0.0.1 serves both paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

__all__ = ["PartitionProxy"]

log = logging.getLogger("dispatcher.rig")
CHUNK = 256 * 1024


class PartitionProxy:
    """127.0.0.1:``port`` -> 127.0.0.1:``target``, cut and healed on demand."""

    def __init__(self, name: str, port: int, target: int) -> None:
        self.name = name
        self.port = port
        self.target = target
        self.cut = False
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, backlog=1024)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        self._reset()

    def partition(self) -> None:
        """Hold every connection where it is: nothing more goes through, nothing is closed."""
        self.cut = True
        self._open.clear()

    def heal(self) -> None:
        """Connections held during the cut are reset; new ones go through."""
        if self.cut:
            self._reset()
        self.cut = False
        self._open.set()

    def _reset(self) -> None:
        for task in list(self._links):
            task.cancel()
        for writer in list(self._writers):
            with contextlib.suppress(Exception):
                writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._links.add(task)
        self._writers.add(writer)
        upstream: asyncio.StreamWriter | None = None
        try:
            await self._open.wait()  # accepted, never answered while cut
            up_reader, upstream = await asyncio.open_connection("127.0.0.1", self.target)
            self._writers.add(upstream)
            await asyncio.gather(self._pipe(reader, upstream), self._pipe(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._links.discard(task)
            for w in (writer, upstream):
                if w is not None:
                    self._writers.discard(w)
                    with contextlib.suppress(Exception):
                        w.close()

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        while True:
            data = await src.read(CHUNK)
            if not data:
                with contextlib.suppress(OSError):
                    dst.write_eof()
                return
            # Sent during a cut: never arrives (dropped), and the link waits for the heal, which resets it.
            await self._open.wait()
            if self.cut:
                return
            dst.write(data)
            await dst.drain()
