"""Throughput of one simulated API server over its real HTTPS socket.

    python bench/sim_throughput.py [--seconds N] [--concurrency C] [--controllers] [--profile FILE]

The server (one ``SimCluster``, TLS and bearer auth as always) runs in a child process pinned to one core with
``os.sched_setaffinity``; the load generator (aiohttp clients in this process) is pinned to another core when
the machine has one. By default the emulated controllers (Kueue, job controller, scheduler, kubelet) are off so
only the API is measured; ``--controllers`` turns them on (the Job phase then also exercises Kueue's webhook and
the job controller), ``--both`` runs the whole set twice, first without, then with.

Phases (each for ``--seconds``, closed loop with ``--concurrency`` clients on kept-alive connections):

- ``get``: GET of one ConfigMap by name;
- ``create``: POST of a ConfigMap with ``generateName``;
- ``create-job``: POST of a suspended Job with ``generateName`` (defaulting, validation, managed fields);
- ``list-1000``: GET of a namespace holding 1000 ConfigMaps (fewer clients: each answer is ~0.5 MB);
- ``watch``: ``--watchers`` watches on one namespace while ``--writes`` ConfigMaps are created there; the figure is
  events delivered per second, from the first write until every watcher has seen every event.

For each phase the table gives the rate, client-side latency percentiles and the server's own CPU time per
request (from ``/proc/PID/stat``), so "requests per second on one core" can be read even when the load generator
is the bottleneck: ``1 / (server CPU per request)`` is what one fully busy core would serve. Targets: >= 2000
GETs/s and >= 1000 creates/s on one core, checked against the measured rate.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import ssl
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TARGETS = {"get": 2000.0, "create": 1000.0}
PHASES = ("get", "create", "create-job", "list", "watch")
LIST_SIZE = 1000
CLK_TCK = os.sysconf("SC_CLK_TCK")

Obj = dict[str, Any]


# ---- server process ------------------------------------------------------------------------------------------------


async def _serve(info_path: Path, controllers: bool, profile: str | None) -> None:
    from kubesim.cluster import ClusterOptions, SimCluster

    cluster = SimCluster(
        "bench",
        ClusterOptions(kueue=controllers, jobs=controllers, scheduler=controllers, kubelet=controllers, hami=False),
    )
    for ns in ("bench", "bench-create", "bench-jobs", "bench-list", "bench-watch"):
        cluster.ensure_namespace(ns)
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "target", "namespace": "bench", "labels": {"app": "bench"}},
            "data": {"key": "value", "other": "x" * 200},
        }
    )
    for i in range(LIST_SIZE):
        cluster.client.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"item-{i:04d}", "namespace": "bench-list", "labels": {"i": str(i % 10)}},
                "data": {"key": f"value-{i}", "payload": "p" * 300},
            }
        )
    await cluster.start()
    assert cluster.tls is not None
    tmp = info_path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps({"url": cluster.url, "token": cluster.token, "ca": cluster.tls.ca_pem.decode(), "pid": os.getpid()})
    )
    tmp.rename(info_path)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    await stop.wait()
    if profiler is not None and profile:
        profiler.disable()
        profiler.dump_stats(profile)
    await cluster.stop()


def serve_main(args: argparse.Namespace) -> int:
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    asyncio.run(_serve(Path(args.info), args.controllers, args.profile))
    return 0


# ---- load generator ------------------------------------------------------------------------------------------------


@dataclass
class Server:
    url: str
    token: str
    ca: str
    pid: int

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK


@dataclass
class PhaseResult:
    name: str
    count: int
    seconds: float
    server_cpu: float
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    unit: str = "req/s"
    note: str = ""
    client_cpu: float = 0.0

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_per_op_us(self) -> float:
        return self.server_cpu / self.count * 1e6 if self.count else 0.0

    @property
    def one_core_rate(self) -> float:
        return self.count / self.server_cpu if self.server_cpu > 0 else 0.0

    def percentile(self, p: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000


def _session(server: Server, limit: int) -> aiohttp.ClientSession:
    ctx = ssl.create_default_context(cadata=server.ca)
    connector = aiohttp.TCPConnector(limit=limit, ssl=ctx, force_close=False)
    return aiohttp.ClientSession(
        base_url=server.url,
        connector=connector,
        headers={"Authorization": f"Bearer {server.token}", "Accept": "application/json"},
        timeout=aiohttp.ClientTimeout(total=60),
    )


class RawConnection:
    """A minimal HTTP/1.1 client on one kept-alive TLS connection: prebuilt request bytes out, status and body in.

    aiohttp's client spends several times the server's CPU per request; on a two-core machine it, not the server,
    would set the figure. This one costs a small fraction of it, so the server is what is measured. It reads only
    ``Content-Length`` bodies (what the simulated server sends for non-watch answers)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, server: Server) -> RawConnection:
        host, port = server.url.removeprefix("https://").rsplit(":", 1)
        ctx = ssl.create_default_context(cadata=server.ca)
        reader, writer = await asyncio.open_connection(host, int(port), ssl=ctx, limit=2**22)
        return cls(reader, writer)

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
                break
        body = await self.reader.readexactly(length) if length else b""
        return status, body

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await self.writer.wait_closed()


def raw_request(server: Server, method: str, path: str, body: bytes = b"") -> bytes:
    host = server.url.removeprefix("https://")
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {host}",
        f"Authorization: Bearer {server.token}",
        "Accept: application/json",
        "User-Agent: sim-bench",
    ]
    if body or method in ("POST", "PUT", "PATCH"):
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def closed_loop(
    name: str, server: Server, seconds: float, concurrency: int, client: str, raw: bytes, check: Callable[..., bool]
) -> PhaseResult:
    """``concurrency`` clients send ``raw`` (an HTTP request) back to back for ``seconds`` after a short warm-up;
    ``check(status, body)`` tells success. ``client``: ``raw`` (:class:`RawConnection`) or ``aiohttp``."""
    head, _, body = raw.partition(b"\r\n\r\n")
    request_line = head.split(b"\r\n", 1)[0].decode().split()
    method, path = request_line[0], request_line[1]
    session: aiohttp.ClientSession | None = None
    conns: list[RawConnection] = []
    if client == "aiohttp":
        session = _session(server, concurrency)
    else:
        conns = [await RawConnection.open(server) for _ in range(concurrency)]

    async def once(i: int) -> bool:
        if session is not None:
            headers = {"Content-Type": "application/json"} if body else None
            async with session.request(method, path, data=body or None, headers=headers) as resp:
                return check(resp.status, await resp.read())
        status, answer = await conns[i].request(raw)
        return check(status, answer)

    try:
        # Warm-up: open the connections (TLS handshakes are not what is measured) and let caches fill.
        for _ in range(2):
            await asyncio.gather(*(once(i) for i in range(concurrency)))
        latencies: list[float] = []
        count = errors = 0
        loop = asyncio.get_running_loop()
        cpu0, ccpu0 = server.cpu_seconds(), time.process_time()
        start = loop.time()
        deadline = start + seconds

        async def worker(i: int) -> None:
            nonlocal count, errors
            while loop.time() < deadline:
                t0 = time.perf_counter()
                ok = await once(i)
                latencies.append(time.perf_counter() - t0)
                if ok:
                    count += 1
                else:
                    errors += 1

        await asyncio.gather(*(worker(i) for i in range(concurrency)))
        elapsed = loop.time() - start
        cpu, ccpu = server.cpu_seconds() - cpu0, time.process_time() - ccpu0
    finally:
        if session is not None:
            await session.close()
        for c in conns:
            await c.close()
    return PhaseResult(name, count, elapsed, cpu, latencies, errors, client_cpu=ccpu)


async def phase_get(server: Server, seconds: float, concurrency: int, client: str) -> PhaseResult:
    raw = raw_request(server, "GET", "/api/v1/namespaces/bench/configmaps/target")
    return await closed_loop("get", server, seconds, concurrency, client, raw, lambda st, _: st == 200)


async def phase_create(server: Server, seconds: float, concurrency: int, client: str) -> PhaseResult:
    body = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"generateName": "cm-", "labels": {"app": "bench"}},
            "data": {"key": "value"},
        }
    ).encode()
    raw = raw_request(server, "POST", "/api/v1/namespaces/bench-create/configmaps", body)
    return await closed_loop("create", server, seconds, concurrency, client, raw, lambda st, _: st == 201)


async def phase_create_job(server: Server, seconds: float, concurrency: int, client: str) -> PhaseResult:
    body = json.dumps(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"generateName": "job-"},
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}],
                    }
                },
            },
        }
    ).encode()
    raw = raw_request(server, "POST", "/apis/batch/v1/namespaces/bench-jobs/jobs", body)
    return await closed_loop("create-job", server, seconds, concurrency, client, raw, lambda st, _: st == 201)


async def phase_list(server: Server, seconds: float, concurrency: int, client: str) -> PhaseResult:
    raw = raw_request(server, "GET", "/api/v1/namespaces/bench-list/configmaps")

    def full(status: int, body: bytes) -> bool:
        return status == 200 and body.count(b'"name":"item-') == LIST_SIZE

    result = await closed_loop(f"list-{LIST_SIZE}", server, seconds, concurrency, client, raw, full)
    result.unit = "lists/s"
    return result


async def phase_watch(server: Server, watchers: int, writes: int, timeout: float) -> PhaseResult:
    """``watchers`` watches from the current resourceVersion; ``writes`` creates; events delivered per second."""
    async with _session(server, watchers + 16) as session:
        async with session.get("/api/v1/namespaces/bench-watch/configmaps?limit=1") as resp:
            rv = (await resp.json())["metadata"]["resourceVersion"]
        seen = [0] * watchers
        done = asyncio.Event()
        finished = 0
        last_event = 0.0

        async def watch(i: int, ready: asyncio.Event) -> None:
            nonlocal finished, last_event
            url = f"/api/v1/namespaces/bench-watch/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=300"
            async with session.get(url) as resp:
                ready.set()
                while seen[i] < writes:
                    line = await resp.content.readline()
                    if not line:
                        break
                    if line.startswith(b'{"type":"ADDED"'):
                        seen[i] += 1
            last_event = time.perf_counter()
            finished += 1
            if finished == watchers:
                done.set()

        readies = [asyncio.Event() for _ in range(watchers)]
        tasks = [asyncio.create_task(watch(i, readies[i])) for i in range(watchers)]
        async with asyncio.timeout(30):
            await asyncio.gather(*(r.wait() for r in readies))
        await asyncio.sleep(0.2)  # the server has registered every watch once it answered the headers
        body = json.dumps(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "w-"}, "data": {"k": "v"}}
        ).encode()
        queue = iter(range(writes))

        async def writer() -> None:
            for _ in queue:
                async with session.post(
                    "/api/v1/namespaces/bench-watch/configmaps", data=body, headers={"Content-Type": "application/json"}
                ) as resp:
                    await resp.read()

        cpu0, ccpu0 = server.cpu_seconds(), time.process_time()
        start = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(8)))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await done.wait()
        end = last_event if done.is_set() else time.perf_counter()
        cpu, ccpu = server.cpu_seconds() - cpu0, time.process_time() - ccpu0
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await t
    delivered = sum(seen)
    missing = watchers * writes - delivered
    result = PhaseResult("watch", delivered, end - start, cpu, unit="events/s", client_cpu=ccpu)
    result.errors = missing
    result.note = f"{watchers} watchers x {writes} writes"
    return result


# ---- driver --------------------------------------------------------------------------------------------------------


async def start_server(
    controllers: bool, cpu: int | None, profile: str | None
) -> tuple[asyncio.subprocess.Process, Server]:
    tmpdir = Path(tempfile.mkdtemp(prefix="sim-bench-"))
    info = tmpdir / "server.json"
    cmd = [sys.executable, str(SCRIPT), "--serve", "--info", str(info)]
    if controllers:
        cmd.append("--controllers")
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    if profile:
        cmd += ["--profile", profile]
    proc = await asyncio.create_subprocess_exec(*cmd, stdin=asyncio.subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not info.exists():
        if proc.returncode is not None:
            raise SystemExit(f"the server process exited with {proc.returncode}")
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("the server process did not start in 60 s")
        await asyncio.sleep(0.05)
    data = json.loads(info.read_text())
    return proc, Server(data["url"], data["token"], data["ca"], data["pid"])


async def stop_server(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(30):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()


def print_table(title: str, results: list[PhaseResult]) -> bool:
    print(f"\n{title}")
    header = (
        f"{'phase':<12} {'count':>8} {'rate':>10} {'unit':<9} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'srv cpu':>8} {'cpu/op us':>10} {'1-core rate':>12} {'gen cpu':>8} {'errors':>7}  target"
    )
    print(header)
    print("-" * len(header))
    ok = True
    for r in results:
        target = TARGETS.get(r.name)
        verdict = ""
        if target is not None:
            passed = r.rate >= target
            ok = ok and passed
            verdict = f">= {target:.0f}/s {'PASS' if passed else 'FAIL'}"
        util = r.server_cpu / r.seconds * 100 if r.seconds else 0.0
        gen = r.client_cpu / r.seconds * 100 if r.seconds else 0.0
        print(
            f"{r.name:<12} {r.count:>8} {r.rate:>10.0f} {r.unit:<9} {r.percentile(50):>8.2f} {r.percentile(99):>8.2f} "
            f"{util:>7.0f}% {r.cpu_per_op_us:>10.0f} {r.one_core_rate:>12.0f} {gen:>7.0f}% {r.errors:>7}  {verdict}"
            + (f"  ({r.note})" if r.note else "")
        )
    return ok


async def run(args: argparse.Namespace) -> int:
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    server_cpu: int | None = None
    if ncpu >= 2 and cpus:
        server_cpu = cpus[0]
        os.sched_setaffinity(0, set(cpus[1:]))
    pinning = (
        f"server pinned to CPU {server_cpu}, load generator on CPU(s) {','.join(map(str, cpus[1:]))}"
        if server_cpu is not None
        else "one CPU available: server and load generator share it (no pinning)"
    )
    print(
        f"sim API throughput: {args.seconds:g} s per phase, {args.concurrency} {args.client} clients over HTTPS "
        f"(keep-alive); {pinning}"
    )
    phases = set(args.phases.split(","))
    unknown = phases - set(PHASES)
    if unknown:
        raise SystemExit(f"--phases: unknown phase {sorted(unknown)[0]!r}; expected some of {','.join(PHASES)}")
    all_ok = True
    modes = [False, True] if args.both else [args.controllers]
    for controllers in modes:
        proc, server = await start_server(controllers, server_cpu, args.profile)
        try:
            results = []
            if "get" in phases:
                results.append(await phase_get(server, args.seconds, args.concurrency, args.client))
            if "create" in phases:
                results.append(await phase_create(server, args.seconds, args.concurrency, args.client))
            if "create-job" in phases:
                results.append(await phase_create_job(server, args.seconds, args.concurrency, args.client))
            if "list" in phases:
                list_clients = max(1, min(4, args.concurrency))
                results.append(await phase_list(server, args.seconds, list_clients, args.client))
            if "watch" in phases:
                watch_timeout = max(30.0, args.seconds * 10)
                results.append(await phase_watch(server, args.watchers, args.writes, timeout=watch_timeout))
        finally:
            await stop_server(proc)
        title = "controllers ON (kueue, jobs, scheduler, kubelet)" if controllers else "API only (controllers off)"
        all_ok = print_table(title, results) and all_ok
    print(
        "\nrate: measured requests/s over the socket; srv cpu: the server process's CPU use during the phase "
        "(100% = one core busy);\ncpu/op: server CPU per request; 1-core rate: what a fully busy core would serve "
        "at that cost. Targets are checked against the measured rate."
    )
    if args.profile:
        print(f"server profile (cProfile) written to {args.profile}: python -m pstats {args.profile}")
    print("overall:", "PASS" if all_ok else "FAIL")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each phase (default 5)")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent clients (default 16)")
    parser.add_argument("--watchers", type=int, default=50, help="watch phase: concurrent watches (default 50)")
    parser.add_argument("--writes", type=int, default=500, help="watch phase: objects written (default 500)")
    parser.add_argument(
        "--client",
        choices=("raw", "aiohttp"),
        default="raw",
        help="load generator for request/response phases: a minimal HTTP/1.1 client (default) or aiohttp's",
    )
    parser.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated subset of {','.join(PHASES)}")
    parser.add_argument("--controllers", action="store_true", help="run Kueue, job controller, scheduler, kubelet")
    parser.add_argument("--both", action="store_true", help="measure without, then with the controllers")
    parser.add_argument("--profile", help="write a cProfile of the server process to this file")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--info", help=argparse.SUPPRESS)
    parser.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve_main(args)
    if args.seconds <= 0 or args.concurrency < 1 or args.watchers < 1 or args.writes < 1:
        parser.error("--seconds, --concurrency, --watchers and --writes must be positive")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
