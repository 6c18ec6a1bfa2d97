"""Admission rate of the simulator's Kueue: a burst of suspended Jobs into one simulated worker, timed until
every one's Workload is admitted.

    python bench/sim_admission.py                          # 330 jobs already running, then a burst of 340
    python bench/sim_admission.py --preload 0 --jobs 500
    python bench/sim_admission.py --py-spy profile.txt     # py-spy (if installed) samples the simulator meanwhile

The simulated worker runs in a child process (``dispatcher sim up --workers 1``, the topology of
``failover_speed.py``), so the figures are the simulator's alone; Jobs are created here over its HTTPS API
(``--concurrency`` at a time) while a watch on Workloads, as the dispatcher keeps one, counts admissions. This is
the simulator's side of ``failover.py``: the affected jobs' copies arriving at the remaining workers.

Prints: the time to create the burst, the time from the first create until the last admission, admissions per
second over that span, and the simulator's CPU seconds for the burst.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import _common  # noqa: E402
from dispatcher.adapters.job import JobAdapter  # noqa: E402
from dispatcher.config import load_config  # noqa: E402
from dispatcher.drill import drill_job  # noqa: E402
from dispatcher.kube.client import ClusterClient, Resource, connect  # noqa: E402

TOPOLOGY = 'cpuWorker:\n  nodes: [{prefix: cpu, count: 4, cpu: "8", memory: 32Gi, pods: 2000}]\n'
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _admitted(obj: dict[str, object]) -> bool:
    status = obj.get("status") or {}
    assert isinstance(status, dict)
    return any(c.get("type") == "Admitted" and c.get("status") == "True" for c in status.get("conditions") or ())


class Counter:
    """Job names whose Workload is admitted, fed by a watch."""

    def __init__(self) -> None:
        self.admitted: set[str] = set()
        self.changed = asyncio.Event()

    async def run(self, client: ClusterClient) -> None:
        data = await client.list(WORKLOADS, "team-a")
        for obj in data.get("items") or ():
            self._see(obj)
        rv = data["metadata"]["resourceVersion"]
        while True:
            async for kind, obj in client.watch(WORKLOADS, "team-a", resource_version=rv):
                rv = obj.get("metadata", {}).get("resourceVersion", rv)
                if kind in ("ADDED", "MODIFIED"):
                    self._see(obj)

    def _see(self, obj: dict[str, object]) -> None:
        if _admitted(obj):
            refs = (obj.get("metadata") or {}).get("ownerReferences") or ()  # type: ignore[union-attr]
            for ref in refs:
                self.admitted.add(ref["name"])
            self.changed.set()

    async def wait_for(self, names: set[str], timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while not names <= self.admitted:
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{len(names - self.admitted)} of {len(names)} jobs not admitted")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self.changed.wait()
        return time.monotonic()


async def _create(client: ClusterClient, names: list[str], concurrency: int) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(name: str) -> None:
        async with sem:
            await client.create(JobAdapter.resource, "team-a", drill_job(name))

    await asyncio.gather(*(one(n) for n in names))


async def run(args: object, tmp: Path) -> dict[str, object]:
    (tmp / "topology.yaml").write_text(TOPOLOGY)
    sim = subprocess.Popen(  # noqa: ASYNC220 (started once, before any measurement)
        [sys.executable, "-m", "dispatcher", "sim", "up", "--workers", "1", "--gpu-workers", "0",
         "--dir", str(tmp / "sim"), "--run-seconds", "3600", "--topology", str(tmp / "topology.yaml")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
    )  # fmt: skip
    spy: subprocess.Popen[bytes] | None = None
    try:
        deadline = time.monotonic() + 60
        while not (tmp / "sim" / "ready").exists():
            if time.monotonic() > deadline or sim.poll() is not None:
                raise RuntimeError("the simulated cluster did not start")
            await asyncio.sleep(0.1)
        config = load_config(tmp / "sim" / "clusters.yaml")
        client = await connect("worker-1", config.workers[0].kube)
        counter = Counter()
        watcher = asyncio.create_task(counter.run(client))
        try:
            preload = [f"pre-{i:05d}" for i in range(args.preload)]  # type: ignore[attr-defined]
            await _create(client, preload, args.concurrency)  # type: ignore[attr-defined]
            await counter.wait_for(set(preload), 300)
            await asyncio.sleep(1.0)  # let the preloaded jobs' pods settle (a benchmark, not the simulator)
            burst = [f"job-{i:05d}" for i in range(args.jobs)]  # type: ignore[attr-defined]
            if args.py_spy:  # type: ignore[attr-defined]
                spy = subprocess.Popen(  # noqa: ASYNC220
                    [args.py_spy_bin, "record", "-p", str(sim.pid), "-f", "raw", "-o", args.py_spy, "-r", "200"],  # type: ignore[attr-defined]
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                await asyncio.sleep(1.0)
            cpu0 = _cpu_seconds(sim.pid)
            t0 = time.monotonic()
            await _create(client, burst, args.concurrency)  # type: ignore[attr-defined]
            created = time.monotonic()
            done = await counter.wait_for(set(burst), 300)
            cpu = _cpu_seconds(sim.pid) - cpu0
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            await client.close()
        return {
            "preload": args.preload,  # type: ignore[attr-defined]
            "jobs": args.jobs,  # type: ignore[attr-defined]
            "created_seconds": round(created - t0, 2),
            "admitted_seconds": round(done - t0, 2),
            "admissions_per_second": round(args.jobs / (done - t0), 1),  # type: ignore[attr-defined]
            "sim_cpu_seconds": round(cpu, 2),
        }
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
        sim.send_signal(signal.SIGTERM)
        sim.wait(30)


def main() -> int:
    parser = _common.parser(__doc__, runs=1)
    parser.add_argument("--preload", type=int, default=330, help="jobs admitted and running before the burst")
    parser.add_argument("--jobs", type=int, default=340, help="the burst")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--py-spy", metavar="FILE", help="record the simulator with py-spy (raw format) into FILE")
    args = parser.parse_args()
    args.py_spy_bin = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if args.quick:
        args.preload, args.jobs = min(args.preload, 100), min(args.jobs, 150)
    info = _common.machine()
    print(_common.machine_line(info))
    runs = []
    for _ in range(args.runs or 1):
        with tempfile.TemporaryDirectory(prefix="sim-admission-") as d:
            runs.append(asyncio.run(run(args, Path(d))))
        r = runs[-1]
        print(
            f"  {r['jobs']} jobs after {r['preload']} running: created in {r['created_seconds']}s, all admitted "
            f"{r['admitted_seconds']}s after the first create ({r['admissions_per_second']}/s), simulator CPU "
            f"{r['sim_cpu_seconds']}s"
        )
    keys = ("created_seconds", "admitted_seconds", "admissions_per_second", "sim_cpu_seconds")
    summary = {k: _common.median([float(r[k]) for r in runs]) for k in keys}  # type: ignore[arg-type]
    print("median: " + ", ".join(f"{k} {v:g}" for k, v in summary.items()))
    if args.json:
        print(json.dumps({"machine": info, **summary, "per_run": runs}, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
