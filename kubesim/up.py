"""``dispatcher sim up``: start simulated clusters and keep them running until Ctrl-C or SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kubecommon import gcpolicy

from .topology import Topology
from .world import SimWorld, WorldOptions

__all__ = ["on_stop_signals", "run_sim_up", "stopped_within", "table", "watch_parent"]

Obj = dict[str, Any]


def table(described: list[Obj]) -> str:
    """The ``sim up`` table of clusters, from their :meth:`SimCluster.describe` summaries."""
    rows = [("CLUSTER", "URL", "NODES", "CPU", "MEMORY", "GPUS", "KUEUE", "HAMI")]
    for d in described:
        rows.append(
            (
                d["name"],
                d["url"],
                str(d["nodes"]),
                str(d["cpu"]),
                f"{d['memoryGi']}Gi",
                str(d["gpus"]),
                "yes" if d["kueue"] else "no",
                "yes" if d["hami"] else "no",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows)


#: How long stopping may take before the process exits regardless (open connections, busy controllers).
STOP_TIMEOUT = 20.0


def on_stop_signals(stop: asyncio.Event) -> None:
    """SIGINT/SIGTERM set ``stop``; a second one exits at once (a saturated world can be slow to stop)."""
    loop = asyncio.get_running_loop()

    def handler(sig: int) -> None:
        if stop.is_set():
            os._exit(128 + sig)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, handler, sig)


async def watch_parent(pid: int, stop: asyncio.Event) -> None:
    """Set ``stop`` when process ``pid`` exits: a world started by a benchmark or a sharded ``sim up`` must not
    outlive what started it (a killed benchmark left a saturated simulator taking a core from the next run).
    Waits on a pidfd where Linux has them, else looks once a second."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        stop.set()
        return
    except (AttributeError, OSError):
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                stop.set()
                return
            await asyncio.sleep(1.0)
    gone = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(fd, gone.set)
    try:
        await gone.wait()
        stop.set()
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def stopped_within(stopping: Awaitable[None], what: str) -> None:
    """Await ``stopping``; past :data:`STOP_TIMEOUT`, say so and exit the process."""
    try:
        async with asyncio.timeout(STOP_TIMEOUT):
            await stopping
    except TimeoutError:
        print(f"{what} did not stop within {STOP_TIMEOUT:g}s; exiting", file=sys.stderr, flush=True)
        os._exit(1)


#: Started with the world, inside it (e.g. each worker's fencing agent); returns what stops it.
Inside = Callable[[SimWorld, Path], Awaitable[Callable[[], Awaitable[None]]]]


async def run_sim_up(
    options: WorldOptions,
    directory: Path,
    topology: Topology | None = None,
    *,
    inside: Inside | None = None,
    parent_pid: int | None = None,
) -> int:
    """Start the simulated clusters, write their kubeconfigs and ``clusters.yaml`` into ``directory``, serve until
    SIGINT/SIGTERM (or until process ``parent_pid`` exits). ``directory`` must be absolute (the CLI resolves it)
    so the files printed can be used anywhere. ``inside``: what runs inside the clusters with them (the CLI
    passes the workers' fencing agents; clusters.yaml then declares ``fencing: agent``)."""
    world = SimWorld(options, topology)
    await world.start()
    # Everything built so far lives as long as the clusters (kubecommon/gcpolicy.py).
    gcpolicy.settle()
    stop_inside: Callable[[], Awaitable[None]] | None = None
    stop = asyncio.Event()
    on_stop_signals(stop)
    parent = asyncio.create_task(watch_parent(parent_pid, stop)) if parent_pid else None
    try:
        world.write_files(directory, fencing=inside is not None)
        if inside is not None:
            stop_inside = await inside(world, directory)
        if options.with_manager and options.worker_numbers is None:
            print(table([c.describe() for c in world.clusters]))
            print(f"\nkubeconfigs and clusters.yaml in {directory}; fault admin endpoint {world.admin_url}")
            print(f"try: kubectl --kubeconfig {directory / 'worker-1.kubeconfig'} get clusterqueues")
            sys.stdout.flush()
        await asyncio.to_thread((directory / "ready").write_text, "ready\n")
        await stop.wait()
    finally:
        if parent is not None:
            parent.cancel()
        with contextlib.suppress(FileNotFoundError):
            (directory / "ready").unlink()
        if stop_inside is not None:
            await stopped_within(stop_inside(), "the fencing agents")
        await stopped_within(world.stop(), "the simulated clusters")
    return 0
