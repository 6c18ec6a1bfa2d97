"""``dispatcher sim up``: start simulated clusters and keep them running until Ctrl-C or SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from .topology import Topology
from .world import SimWorld, WorldOptions

__all__ = ["run_sim_up"]


def _table(world: SimWorld) -> str:
    rows = [("CLUSTER", "URL", "NODES", "CPU", "MEMORY", "GPUS", "KUEUE", "HAMI")]
    for c in world.clusters:
        d = c.describe()
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


def _tune_gc() -> None:
    """Keep Python's cyclic garbage collector from taking a fifth of the simulator's CPU.

    A hundred simulated clusters hold millions of objects (schemas, stored objects, the watch history); the
    collector's default thresholds then run a full collection, over all of them, every few seconds of a busy
    burst (measured: 17.6 s of 90 s of CPU with 100 workers under 2,000 Jobs). What exists once the clusters
    are up lives as long as they do, so it is moved out of the collector's sight (``gc.freeze``), and young
    objects are collected in larger batches. Stored objects are plain dicts and lists freed by reference
    counting; the collector only has cycles to find."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


#: Started with the world, inside it (e.g. each worker's fencing agent); returns what stops it.
Inside = Callable[[SimWorld, Path], Awaitable[Callable[[], Awaitable[None]]]]


async def run_sim_up(
    options: WorldOptions, directory: Path, topology: Topology | None = None, *, inside: Inside | None = None
) -> int:
    """Start the simulated clusters, write their kubeconfigs and ``clusters.yaml`` into ``directory``, serve until
    SIGINT/SIGTERM. ``directory`` must be absolute (the CLI resolves it) so the files printed can be used anywhere.
    ``inside``: what runs inside the clusters with them (the CLI passes the workers' fencing agents; clusters.yaml
    then declares ``fencing: agent``)."""
    world = SimWorld(options, topology)
    await world.start()
    _tune_gc()
    stop_inside: Callable[[], Awaitable[None]] | None = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        world.write_files(directory, fencing=inside is not None)
        if inside is not None:
            stop_inside = await inside(world, directory)
        print(_table(world))
        print(f"\nkubeconfigs and clusters.yaml in {directory}; fault admin endpoint {world.admin_url}")
        print(f"try: kubectl --kubeconfig {directory / 'worker-1.kubeconfig'} get clusterqueues")
        sys.stdout.flush()
        await asyncio.to_thread((directory / "ready").write_text, "ready\n")
        await stop.wait()
    finally:
        with contextlib.suppress(FileNotFoundError):
            (directory / "ready").unlink()
        if stop_inside is not None:
            await stop_inside()
        await world.stop()
    return 0
