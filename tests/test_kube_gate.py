"""Calls queue for a turn on a cluster's connections (dispatcher/kube/gate.py), and their deadline counts the
server's time, not the queue's.

Before the gate, aiohttp's pool queued the calls and its total deadline counted the wait: on a 10,000-Job burst
3,300 creates timed out after they had left, each closing its connection (a new TLS handshake on both sides for
the next call), 17,000 connections in two minutes (issue 20, bench/RESULTS.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from dispatcher.config import KubeconfigRef
from dispatcher.kube.client import ClusterClient, KubeError, connect
from dispatcher.kube.gate import Gate

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "http://127.0.0.1:{port}"}}
users:
- name: u
  user: {{token: not-a-real-token}}
contexts:
- name: x
  context: {{cluster: c, user: u}}
current-context: x
"""


class SlowServer:
    """Answers every call after ``delay`` seconds; remembers the client connections (their ports) it saw."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.connections: set[int] = set()
        self.in_flight = 0
        self.most_in_flight = 0

    async def handle(self, request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if peer:
            self.connections.add(peer[1])
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": request.path.rsplit("/", 1)[-1]}})


@pytest.fixture
async def slow(tmp_path: Path) -> AsyncIterator[tuple[SlowServer, Path]]:
    server = SlowServer(0.2)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG.format(port=port))
    try:
        yield server, path
    finally:
        await runner.cleanup()


async def _client(path: Path, *, requests: int, timeout: float) -> ClusterClient:
    return await connect("w", KubeconfigRef(path=str(path)), requests=requests, timeout=timeout)


async def test_a_burst_waits_for_turns_and_every_call_gets_the_servers_whole_deadline(
    slow: tuple[SlowServer, Path],
) -> None:
    """20 calls, 2 connections, 0.2 s per answer: the last call waits 1.8 s for a turn, far past its 0.5 s
    deadline, and still succeeds on a reused connection (before the gate: 16 of 20 timed out, and the ones
    timed out after leaving closed their connections)."""
    server, path = slow
    client = await _client(path, requests=2, timeout=0.5)
    try:
        answers = await asyncio.gather(*(client.request("GET", f"/api/v1/configmaps/c{i}") for i in range(20)))
    finally:
        await client.close()
    assert [a["metadata"]["name"] for a in answers] == [f"c{i}" for i in range(20)]
    assert server.most_in_flight == 2
    assert len(server.connections) == 2
    assert client.gate is not None and client.gate.granted == 20 and client.gate.waited > 5.0
    assert client.errors == 0


async def test_an_explicit_deadline_bounds_the_wait_and_the_call_together(slow: tuple[SlowServer, Path]) -> None:
    """A caller's own deadline (a bounded status write) is kept: calls still queued when it passes fail then,
    without touching a connection, and are not counted against the server."""
    _, path = slow
    client = await _client(path, requests=1, timeout=10.0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        results = await asyncio.gather(
            *(client.request("GET", f"/api/v1/configmaps/c{i}", timeout=0.5) for i in range(6)),
            return_exceptions=True,
        )
    finally:
        await client.close()
    elapsed = loop.time() - started
    ok = [r for r in results if isinstance(r, dict)]
    failed = [r for r in results if isinstance(r, KubeError)]
    assert len(ok) == 2 and len(failed) == 4, results
    assert all(e.code == 0 and e.transient for e in failed)
    # The third call's turn comes with 0.1 s left: it leaves and times out (closing its connection). The last
    # three never leave the queue, and are not the server's fault.
    queued = [e for e in failed if "no free connection of 1 within 0.5s" in e.message]
    assert len(queued) == 3, failed
    assert client.errors == 1
    assert elapsed < 1.0


async def test_calls_inside_a_held_turn_skip_the_queue_and_share_it(slow: tuple[SlowServer, Path]) -> None:
    """The mirror holds a turn for a copy's calls: the calls inside it do not queue for a second turn behind
    themselves (with one connection that would wait forever), and others wait for the whole block."""
    _, path = slow
    client = await _client(path, requests=1, timeout=2.0)
    order: list[str] = []

    async def holder() -> None:
        async with client.turn():
            order.append("held")
            await client.request("GET", "/api/v1/configmaps/a")
            await client.request("GET", "/api/v1/configmaps/b", timeout=1.0)  # its own deadline: no second turn
            order.append("holder done")

    async def other() -> None:
        await asyncio.sleep(0.05)
        await client.request("GET", "/api/v1/configmaps/c")
        order.append("other done")

    try:
        async with asyncio.timeout(5):
            await asyncio.gather(holder(), other())
    finally:
        await client.close()
    assert order == ["held", "holder done", "other done"]


async def test_turns_are_granted_in_order_and_a_cancelled_waiter_gives_up_its_place() -> None:
    gate = Gate(1)
    order: list[int] = []
    release = asyncio.Event()

    async def first() -> None:
        async with gate.turn():
            await release.wait()

    async def take(i: int) -> None:
        async with gate.turn():
            order.append(i)

    holder = asyncio.create_task(first())
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(take(i)) for i in range(4)]
    await asyncio.sleep(0)
    assert gate.waiting == 4
    tasks[1].cancel()
    release.set()
    await asyncio.gather(holder, *tasks, return_exceptions=True)
    assert order == [0, 2, 3]
    assert gate.in_use == 0 and gate.waiting == 0


async def test_a_turn_granted_as_its_waiter_is_cancelled_passes_to_the_next() -> None:
    """The release and the cancellation land in one step of the loop: the turn is not lost (a lost turn would
    shrink the worker's connections for good)."""
    gate = Gate(1)
    release = asyncio.Event()

    async def hold() -> None:
        async with gate.turn():
            await release.wait()

    async def take() -> str:
        async with gate.turn():
            return "taken"

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    waiter, nxt = asyncio.create_task(take()), asyncio.create_task(take())
    await asyncio.sleep(0)
    assert gate.waiting == 2
    release.set()
    await asyncio.sleep(0)  # the holder leaves: the turn is handed to ``waiter``'s future...
    assert gate.waiting == 1 and not waiter.done()
    waiter.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    async with asyncio.timeout(1):
        assert await nxt == "taken"
    await holder
    assert gate.in_use == 0 and gate.waiting == 0
