"""``dispatcher sim up --processes N``: one simulated world spread over N processes.

One Python process serves every cluster of a world in one event loop, so a hundred workers under a burst of
Jobs saturate one core while the machine's other cores idle (and the dispatcher benchmarked against them is
paced by the simulator, not by its own work). Clusters share nothing but their files, so the world splits
cleanly: shard ``i`` of ``N`` is a child ``dispatcher sim up --shard i/N`` that runs the workers whose number
``n`` has ``n % N == i`` (shard 0 also runs the manager, and gives a few of its workers to the others so that it does
no more work than they do: :func:`shard_numbers`), with their fencing agents, and writes its files into
``<dir>/.shards/<i>``.

This coordinating process starts the shards, and once all are ready puts the world together in ``<dir>``: every
kubeconfig, one ``clusters.yaml`` (workers in order), a ``sim.json`` that names every process (``pids``, for
benchmarks that count the simulator's CPU) and its own fault admin endpoint, which forwards each request to
the shard serving that cluster. A shard that exits stops the whole world, loudly; each shard exits when this
process does, even if it is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from .up import STOP_TIMEOUT, on_stop_signals, table, watch_parent
from .world import WorldOptions, write_clusters_yaml

__all__ = ["run_sharded", "shard_numbers"]

Obj = dict[str, Any]

#: How long the shards may take to come up (a hundred workers take about a minute on a small machine).
START_TIMEOUT = 600.0


#: The manager's work in a world, in workers per worker: per Job, the manager's share of the simulator's work
#: against a worker's, so the same at any number of workers. Measured on the dispatch benchmark (2,000 Jobs over 100
#: workers in 2 shards, `bench/dispatch.py`'s "each", the first figure the shard with the manager):
#: - 2026-11-28, 50 and 50 workers: 72/64 % in the dispatcher's phase, 88/78 % in the floor's (6 to 8 workers).
#: - 2026-11-29, 47 and 53 workers (0.06), after the workers' writes and watches got cheaper: 79/64, 81/55, 76/61
#:   and 75/61 % in the dispatcher's phase (the manager did the work of 18 to 19 workers, 31 in one run), 88/80,
#:   87/79, 88/78 and 82/78 % in the floor's (9 to 13).
#: - Then with 40 and 60 workers (0.2), after status writes stopped walking what they sent back unchanged: 66/75
#:   and 67/72 % (dispatcher's phase), 79/85 and 79/83 % (floor's): the manager did the work of 13 to 16 workers.
#: - With 43 and 57 (0.14): 72/63 % (the manager did the work of 22 workers). The runs scatter; the dispatcher's
#:   phase sets this value, near their middle: 42 and 58 workers.
MANAGER_SHARE = 0.17


def shard_numbers(workers: int, shard: int, shards: int) -> tuple[int, ...]:
    """The worker numbers shard ``shard`` of ``shards`` runs: every ``shards``-th one (``n % shards == shard``), except
    that shard 0, which also runs the manager, gives its last few to the other shards (each to the one running the
    fewest), so that the shard with the manager is not the busiest one (the first to pace a benchmark)."""
    owner = {n: n % shards for n in range(1, workers + 1)}
    if shards > 1:
        move = round(MANAGER_SHARE * workers * (shards - 1) / shards)
        last = [n for n in range(workers, 0, -1) if owner[n] == 0][:move]
        count = [sum(1 for o in owner.values() if o == i) for i in range(shards)]
        for n in last:
            to = min(range(1, shards), key=lambda i: (count[i], i))  # the other shard with the fewest
            owner[n] = to
            count[0] -= 1
            count[to] += 1
    return tuple(n for n in range(1, workers + 1) if owner[n] == shard)


@dataclass
class _Shard:
    index: int
    directory: Path
    process: asyncio.subprocess.Process
    admin: str = ""
    clusters: tuple[Obj, ...] = ()


async def _start_shard(index: int, shards: int, directory: Path, argv: list[str]) -> _Shard:
    shard_dir = directory / ".shards" / str(index)
    await asyncio.to_thread(_fresh_directory, shard_dir)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dispatcher", "sim", "up", *argv,
        "--dir", str(shard_dir), "--shard", f"{index}/{shards}", "--parent-pid", str(os.getpid()),
        stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    return _Shard(index, shard_dir, process)


def _fresh_directory(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


async def _until_ready(shard: _Shard, deadline: float) -> None:
    loop = asyncio.get_running_loop()
    while not await asyncio.to_thread((shard.directory / "ready").exists):
        if shard.process.returncode is not None:
            raise RuntimeError(f"shard {shard.index} exited with code {shard.process.returncode} before it was ready")
        if loop.time() > deadline:
            raise RuntimeError(f"shard {shard.index} was not ready within {START_TIMEOUT:g}s")
        await asyncio.sleep(0.2)
    described = json.loads(await asyncio.to_thread((shard.directory / "sim.json").read_text))
    shard.admin = described["admin"]
    shard.clusters = tuple(described["clusters"])


def _gather_files(shards: list[_Shard], directory: Path) -> None:
    """Copy every shard's kubeconfigs into ``directory`` (mode 0600 kept: they hold tokens)."""
    for shard in shards:
        for path in shard.directory.glob("*.kubeconfig"):
            shutil.copy2(path, directory / path.name)


class _Admin:
    """The world's fault admin endpoint: the same API as one process's, each request forwarded to the shard
    that serves the cluster it names."""

    def __init__(self, shards: list[_Shard]) -> None:
        self.owner = {c["name"]: s.admin for s in shards for c in s.clusters}
        self.shards = shards
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self, port: int) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        app = web.Application()
        app.router.add_get("/clusters", self._list)
        app.router.add_post("/clusters/{name}/{action}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        server = site._server
        assert server is not None
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _list(self, request: web.Request) -> web.Response:
        assert self._session is not None
        out: list[Obj] = []
        for shard in self.shards:
            async with self._session.get(f"{shard.admin}/clusters") as resp:
                out += await resp.json()
        return web.json_response(out)

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        name = request.match_info["name"]
        owner = self.owner.get(name)
        if owner is None:
            return web.json_response({"error": f"no cluster named {name!r}"}, status=404)
        body = await request.read()
        async with self._session.post(
            f"{owner}/clusters/{name}/{request.match_info['action']}",
            data=body,
            headers={"Content-Type": request.content_type},
        ) as resp:
            return web.Response(body=await resp.read(), status=resp.status, content_type="application/json")


async def run_sharded(
    options: WorldOptions,
    directory: Path,
    processes: int,
    argv: list[str],
    *,
    fencing: bool,
    parent_pid: int | None = None,
) -> int:
    """Run the world of ``options`` as ``processes`` shards (``argv``: the ``sim up`` arguments each shard gets
    besides its directory and its place); serve until SIGINT/SIGTERM, until a shard exits or until process
    ``parent_pid`` exits."""
    await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    stop = asyncio.Event()
    on_stop_signals(stop)
    parent = asyncio.create_task(watch_parent(parent_pid, stop)) if parent_pid else None
    shards: list[_Shard] = []
    admin: _Admin | None = None
    code = 0
    try:
        for i in range(processes):
            shards.append(await _start_shard(i, processes, directory, argv))
        deadline = asyncio.get_running_loop().time() + START_TIMEOUT
        failed = [
            e for e in await asyncio.gather(*(_until_ready(s, deadline) for s in shards), return_exceptions=True) if e
        ]
        if failed:
            raise failed[0] if isinstance(failed[0], RuntimeError) else RuntimeError(str(failed[0]))
        await asyncio.to_thread(_gather_files, shards, directory)
        described = sorted(
            (c for s in shards for c in s.clusters),
            key=lambda c: -1 if c["name"] == "manager" else int(c["name"].rsplit("-", 1)[1]),
        )
        workers = [(c["name"], bool(c["hami"])) for c in described if c["name"] != "manager"]
        await asyncio.to_thread(write_clusters_yaml, directory, workers, fencing=fencing)
        admin = _Admin(shards)
        await admin.start(options.admin_port)
        pids = [os.getpid(), *(s.process.pid for s in shards)]
        state = {"admin": admin.url, "clusters": described, "pids": pids}
        await asyncio.to_thread((directory / "sim.json").write_text, json.dumps(state, indent=2))
        print(table(described))
        print(f"\n{processes} processes (pids {', '.join(map(str, pids))})")
        print(f"kubeconfigs and clusters.yaml in {directory}; fault admin endpoint {admin.url}")
        sys.stdout.flush()
        await asyncio.to_thread((directory / "ready").write_text, "ready\n")
        exited = [asyncio.create_task(s.process.wait()) for s in shards]
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([*exited, stopping], return_when=asyncio.FIRST_COMPLETED)
        for shard in shards:
            if shard.process.returncode is not None and not stop.is_set():
                print(f"shard {shard.index} exited with code {shard.process.returncode}; stopping the world",
                      file=sys.stderr, flush=True)  # fmt: skip
                code = 1
        stopping.cancel()
    except RuntimeError as exc:
        print(f"dispatcher sim up: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        if parent is not None:
            parent.cancel()
        with contextlib.suppress(FileNotFoundError):
            (directory / "ready").unlink()
        if admin is not None:
            await admin.stop()
        await _stop_shards(shards)
    return code


async def _stop_shards(shards: list[_Shard]) -> None:
    """SIGTERM every shard; one still running past the stop timeout (each gives itself as long) is killed."""
    for shard in shards:
        if shard.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                shard.process.terminate()
    for shard in shards:
        try:
            async with asyncio.timeout(STOP_TIMEOUT + 5):
                await shard.process.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                shard.process.kill()
            await shard.process.wait()
