"""``dispatcher rig up --real`` and ``rig down``: start the real clusters and keep them until SIGINT/SIGTERM; stop
a running rig from another shell."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from kubecommon.tasks import cancel_and_wait
from kubesim.topology import Topology

from .binaries import find_binaries
from .process import ComponentError
from .world import RealWorld, RealWorldOptions

__all__ = ["RigError", "rig_down", "run_rig_up"]


class RigError(RuntimeError):
    """A rig that cannot start or stop; the message says why."""


def _table(world: RealWorld) -> str:
    rows = [("CLUSTER", "URL", "ROLE", "KUEUE", "JOBSET", "GPU")]
    for c in world.clusters:
        d = c.describe()
        rows.append(
            (
                d["name"],
                d["url"],
                d["role"],
                "yes" if d["kueue"] else "no",
                "yes" if d["jobset"] else "no",
                "yes" if d["gpu"] else "no",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows)


async def _watch(world: RealWorld, stop: asyncio.Event) -> None:
    """Report a component that exits on its own (once each), and keep rig.json current."""
    seen: set[str] = set()
    while not stop.is_set():
        for c in world.clusters:
            for err in c.unexpected_exits():
                if str(err) not in seen:
                    seen.add(str(err))
                    print(f"rig: ERROR {err}", file=sys.stderr, flush=True)
        with contextlib.suppress(asyncio.TimeoutError):
            async with asyncio.timeout(2.0):
                await stop.wait()


async def run_rig_up(
    options: RealWorldOptions, directory: Path, *, bin_dir: str | None = None, topology: Topology | None = None
) -> int:
    """Start the rig, write its files into ``directory`` (absolute), serve until SIGINT/SIGTERM, stop everything."""
    try:
        binaries = find_binaries(bin_dir)
    except FileNotFoundError as exc:
        raise RigError(str(exc)) from None
    state = directory / "rig.json"
    if state.exists():
        with contextlib.suppress(ValueError, OSError):
            pid = int(json.loads(state.read_text()).get("pid", 0))
            if pid and _alive(pid):
                raise RigError(
                    f"a rig already runs in {directory} (pid {pid}); `dispatcher rig down --dir {directory}`"
                )
    world = RealWorld(options, directory, binaries, topology)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    started = time.monotonic()
    try:
        start = asyncio.ensure_future(world.start())
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait({start, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if not start.done():
            await cancel_and_wait([start], what="rig start", patience=30.0)
            await world.stop()
            return 130
        stopper.cancel()
        try:
            start.result()
        except ComponentError as exc:
            raise RigError(str(exc)) from None
        print(_table(world))
        print(
            f"\nready in {time.monotonic() - started:.1f} s; kubeconfigs and clusters.yaml in {directory}; "
            f"fault admin endpoint {world.admin_url}; logs in {directory}/<cluster>/logs"
        )
        print(f"try: kubectl --kubeconfig {directory / 'worker-1.kubeconfig'} get clusterqueues")
        sys.stdout.flush()
        await asyncio.to_thread((directory / "ready").write_text, "ready\n")
        await _watch(world, stop)
    finally:
        with contextlib.suppress(FileNotFoundError):
            (directory / "ready").unlink()
        await world.stop()
    return 0


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs. One that exited but that its parent has not reaped yet (a zombie) does
    not: ``kill(pid, 0)`` succeeds on a zombie, so ``rig down`` waited its whole timeout (60 s) for a ``rig up``
    that had stopped long before, whenever what started ``rig up`` (a script, a test) waited on it only later."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS), or gone this instant: the next look says
    fields = stat.rpartition(")")[2].split()
    return not fields or fields[0] not in ("Z", "X")


def rig_down(directory: Path, *, timeout: float = 60.0) -> str:
    """Stop the rig whose ``rig.json`` is in ``directory``: SIGTERM to ``rig up``, which stops its components in
    order; any component still alive after ``timeout`` is killed. Returns what was done."""
    state = directory / "rig.json"
    try:
        data = json.loads(state.read_text())
    except FileNotFoundError:
        raise RigError(f"no rig runs in {directory} (no rig.json)") from None
    except ValueError:
        raise RigError(f"{state} is not readable JSON") from None
    pid = int(data.get("pid", 0))
    components = [
        int(p["pid"]) for c in data.get("clusters", []) for p in (c.get("components") or {}).values() if p.get("pid")
    ]
    if pid and _alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    left = [p for p in components if _alive(p)]
    for p in left:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError):
        state.unlink()
    if left:
        return f"stopped the rig in {directory}; killed {len(left)} component(s) that outlived it"
    return f"stopped the rig in {directory}"
