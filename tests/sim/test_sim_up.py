"""``python -m dispatcher sim up`` as a user runs it: a separate process, its files, its clusters, its exit.

The command runs as a subprocess (asyncio, never blocking the loop); the tests wait for its ``ready`` file, use
what it wrote (kubeconfigs, ``clusters.yaml``) with kubectl and with the dispatcher's own client, then stop it
with SIGTERM as a service manager would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import stat
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatcher.config import load_config
from dispatcher.kube.client import connect

KUBECTL = str(Path(sys.executable).parent / "kubectl")
if not os.access(KUBECTL, os.X_OK):
    KUBECTL = shutil.which("kubectl") or "kubectl"  # a test dependency: missing, the tests fail and say so

HAMI_REGISTER = "hami.io/node-nvidia-register"
REPO = Path(__file__).resolve().parents[2]


@dataclass
class SimUp:
    proc: asyncio.subprocess.Process
    directory: Path

    async def stop(self, timeout: float = 30.0) -> tuple[int, str, str]:
        """SIGTERM, then the exit code and everything printed."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(timeout):
            out, err = await self.proc.communicate()
        assert self.proc.returncode is not None
        return self.proc.returncode, out.decode(), err.decode()


def _command(directory: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "dispatcher", "sim", "up", "--dir", str(directory), *args]


async def _start(directory: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *_command(directory, *args),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(REPO),
    )


@contextlib.asynccontextmanager
async def sim_up(directory: Path, *args: str, timeout: float = 90.0) -> AsyncIterator[SimUp]:
    """Start ``sim up``, wait for its ready file; always stop it (SIGTERM, then SIGKILL) on the way out."""
    proc = await _start(directory, *args)
    running = SimUp(proc, directory)
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not (directory / "ready").exists():
            if proc.returncode is not None:
                out, err = await proc.communicate()
                raise AssertionError(
                    f"sim up exited with {proc.returncode} before ready:\n{out.decode()}{err.decode()}"
                )
            if loop.time() > deadline:
                raise AssertionError(f"sim up not ready after {timeout}s")
            await asyncio.sleep(0.1)
        yield running
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(20):
                    await proc.communicate()
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def kubectl(kubeconfig: Path, cache: Path, *args: str, timeout: float = 60.0) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(cache),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"kubectl {' '.join(args)} did not finish in {timeout}s") from None
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def eventually(check: Any, what: str, timeout: float = 30.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.2)


async def test_sim_up_serves_two_workers_and_stops_on_sigterm(tmp_path: Path) -> None:
    directory = tmp_path / "sim"
    cache = tmp_path / "kubectl-cache"
    async with sim_up(directory, "--workers", "2", "--gpu-workers", "1", "--run-seconds", "1") as running:
        # Files: one kubeconfig per cluster, private (they hold tokens), and clusters.yaml.
        for name in ("manager", "worker-1", "worker-2"):
            path = directory / f"{name}.kubeconfig"
            assert path.is_file()
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, f"{path} must be mode 0600"
            kc = yaml.safe_load(path.read_text())
            cluster = kc["clusters"][0]["cluster"]
            assert cluster["server"].startswith("https://127.0.0.1:")
            assert cluster["certificate-authority-data"]
            assert "insecure-skip-tls-verify" not in cluster
        assert (directory / "clusters.yaml").is_file()

        config = load_config(directory / "clusters.yaml")
        assert [w.name for w in config.workers] == ["worker-1", "worker-2"]
        assert config.manager.path is not None
        assert Path(config.manager.path) == (directory / "manager.kubeconfig").resolve()
        for w in config.workers:
            assert w.kube.path is not None
            assert Path(w.kube.path) == (directory / f"{w.name}.kubeconfig").resolve()
        assert config.worker("worker-2") is not None
        assert dict(config.worker("worker-2").labels)["gpu"] == "true"  # type: ignore[union-attr]
        assert dict(config.worker("worker-1").labels)["gpu"] == "false"  # type: ignore[union-attr]

        # The dispatcher's own client reaches every cluster through clusters.yaml (TLS verified with the CA).
        for name, ref in [("manager", config.manager), *((w.name, w.kube) for w in config.workers)]:
            client = await connect(name, ref)
            try:
                assert await client.readyz(), f"{name} not ready"
            finally:
                await client.close()

        # kubectl on the GPU worker: its GPU nodes are registered by the HAMi device plugin.
        async def hami_nodes() -> list[str]:
            code, out, err = await kubectl(directory / "worker-2.kubeconfig", cache, "get", "nodes", "-o", "json")
            assert code == 0, err
            nodes = json.loads(out)["items"]
            return [n["metadata"]["name"] for n in nodes if HAMI_REGISTER in (n["metadata"].get("annotations") or {})]

        registered = await eventually(hami_nodes, f"nodes annotated {HAMI_REGISTER}")
        assert registered == ["worker-2-gpu-1", "worker-2-gpu-2"]
        code, out, err = await kubectl(directory / "worker-2.kubeconfig", cache, "get", "nodes", "-o", "json")
        gpu_node = next(n for n in json.loads(out)["items"] if n["metadata"]["name"] == "worker-2-gpu-1")
        devices = json.loads(gpu_node["metadata"]["annotations"][HAMI_REGISTER])
        assert len(devices) == 4  # four A100s in the default topology
        # The CPU-only worker has no HAMi.
        code, out, err = await kubectl(directory / "worker-1.kubeconfig", cache, "get", "nodes", "-o", "json")
        assert code == 0, err
        assert not any(HAMI_REGISTER in (n["metadata"].get("annotations") or {}) for n in json.loads(out)["items"])
        code, out, err = await kubectl(directory / "worker-1.kubeconfig", cache, "get", "clusterqueues", "-o", "name")
        assert code == 0, err
        assert out.split() == [
            "clusterqueue.kueue.x-k8s.io/default",
            "clusterqueue.kueue.x-k8s.io/team-a",
            "clusterqueue.kueue.x-k8s.io/team-b",
        ]

        code, out, err = await running.stop()
    assert code == 0, err
    assert "Traceback" not in err
    assert not (directory / "ready").exists()
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["CLUSTER", "URL"]
    table = {line.split()[0]: line.split() for line in lines[1:4]}
    assert set(table) == {"manager", "worker-1", "worker-2"}
    for row in table.values():
        assert row[1].startswith("https://127.0.0.1:")
    assert table["worker-2"][-1] == "yes" and table["worker-1"][-1] == "no"  # the HAMI column


async def test_topology_file_overrides_node_count(tmp_path: Path) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text(
        yaml.safe_dump({"cpuWorker": {"nodes": [{"prefix": "big", "count": 2, "cpu": "16", "memory": "64Gi"}]}})
    )
    directory = tmp_path / "sim"
    async with sim_up(directory, "--workers", "1", "--gpu-workers", "0", "--topology", str(topology)) as running:
        config = load_config(directory / "clusters.yaml")
        assert [w.name for w in config.workers] == ["worker-1"]
        sim = json.loads((directory / "sim.json").read_text())
        worker = next(c for c in sim["clusters"] if c["name"] == "worker-1")
        assert (worker["nodes"], worker["cpu"], worker["memoryGi"]) == (2, 32, 128)
        if KUBECTL:
            code, out, err = await kubectl(
                directory / "worker-1.kubeconfig", tmp_path / "cache", "get", "nodes", "-o", "name"
            )
            assert code == 0, err
            assert out.split() == ["node/worker-1-big-1", "node/worker-1-big-2"]
        code, out, err = await running.stop()
    assert code == 0, err
    worker_row = next(line.split() for line in out.splitlines() if line.startswith("worker-1 "))
    assert worker_row[2:5] == ["2", "32", "128Gi"]


BAD_TOPOLOGIES: list[tuple[str, Any, str]] = [
    ("unknown top-level key", {"workers": 3}, "workers: unknown key"),
    (
        "unknown node group key",
        {"cpuWorker": {"nodes": [{"prefix": "cpu", "count": 2, "gpu": 1}]}},
        "cpuWorker.nodes[0].gpu: unknown key",
    ),
    ("count not a number", {"cpuWorker": {"nodes": [{"count": "many"}]}}, "cpuWorker.nodes[0].count:"),
    ("bad quantity", {"gpuWorker": {"nodes": [{"cpu": "lots"}]}}, "gpuWorker.nodes[0].cpu:"),
    (
        "object the server refuses",
        {
            "cpuWorker": {
                "objects": [
                    {
                        "apiVersion": "kueue.x-k8s.io/v1beta2",
                        "kind": "ClusterQueue",
                        "metadata": {"name": "bad"},
                        "spec": {"queueingStrategy": "Sometimes"},
                    }
                ]
            }
        },
        "cpuWorker.objects[0] (ClusterQueue 'bad'): refused by worker-1:",
    ),
    ("not a mapping", ["nodes"], "expected a mapping at the top level"),
]


@pytest.mark.parametrize(("case", "content", "message"), BAD_TOPOLOGIES, ids=[c[0] for c in BAD_TOPOLOGIES])
async def test_bad_topology_fails_with_a_clear_message(tmp_path: Path, case: str, content: Any, message: str) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text(yaml.safe_dump(content))
    directory = tmp_path / "sim"
    proc = await _start(directory, "--workers", "1", "--gpu-workers", "0", "--topology", str(topology))
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    text = err.decode()
    assert proc.returncode == 2, f"{case}: exit {proc.returncode}\n{out.decode()}{text}"
    assert "Traceback" not in text
    assert text.startswith(f"dispatcher: --topology {topology}: "), text
    assert message in text, text
    assert not (directory / "ready").exists()


async def test_processes_spread_the_world_and_share_its_files_and_admin(tmp_path: Path) -> None:
    """``--processes 2``: the same files and fault admin as one process; the clusters run in two child processes
    (``sim.json`` names them), which exit when the coordinating process is killed."""
    directory = tmp_path / "sim"
    cache = tmp_path / "kubectl-cache"
    args = ("--workers", "3", "--gpu-workers", "1", "--processes", "2", "--no-fencing-agents")
    async with sim_up(directory, *args, timeout=180) as running:
        config = load_config(directory / "clusters.yaml")
        assert [w.name for w in config.workers] == ["worker-1", "worker-2", "worker-3"]
        assert [dict(w.labels)["zone"] for w in config.workers] == ["zone-1", "zone-2", "zone-3"]
        assert dict(config.worker("worker-3").labels)["gpu"] == "true"  # type: ignore[union-attr]
        for name in ("manager", "worker-1", "worker-2", "worker-3"):
            assert stat.S_IMODE((directory / f"{name}.kubeconfig").stat().st_mode) == 0o600
        state = json.loads((directory / "sim.json").read_text())
        coordinator, *shards = state["pids"]
        assert coordinator == running.proc.pid and len(shards) == 2
        assert sorted(c["name"] for c in state["clusters"]) == ["manager", "worker-1", "worker-2", "worker-3"]
        for name in ("worker-1", "worker-2"):  # one in each shard
            code, out, err = await kubectl(
                directory / f"{name}.kubeconfig", cache, "get", "clusterqueues", "-o", "name"
            )
            assert code == 0, err
            assert "clusterqueue.kueue.x-k8s.io/team-a" in out.split()

        # The world's admin endpoint reaches a cluster in either shard; an unknown name is a 404.
        import aiohttp

        async with aiohttp.ClientSession() as http:
            async with http.post(f"{state['admin']}/clusters/worker-1/fault", json={"mode": "partition"}) as resp:
                assert resp.status == 200, await resp.text()
            async with http.post(f"{state['admin']}/clusters/worker-9/fault", json={"mode": "stop"}) as resp:
                assert resp.status == 404
            async with http.get(f"{state['admin']}/clusters") as resp:
                faults = {c["name"]: c["fault"] for c in await resp.json()}
        assert faults == {"manager": "none", "worker-1": "partition", "worker-2": "none", "worker-3": "none"}
        code, _, err = await kubectl(directory / "worker-1.kubeconfig", cache, "get", "ns", "--request-timeout=3s")
        assert code != 0, "worker-1 answered through a partition"
        code, _, err = await kubectl(directory / "worker-2.kubeconfig", cache, "get", "ns")
        assert code == 0, err

        # Killed without a chance to clean up, the coordinator takes its shards with it.
        running.proc.kill()
        await running.proc.wait()

        async def shards_gone() -> bool:
            return not any(await asyncio.gather(*(asyncio.to_thread(Path(f"/proc/{p}").exists) for p in shards)))

        await eventually(shards_gone, "the shards to exit after the coordinator was killed", timeout=30)


async def test_a_shard_that_cannot_start_fails_the_world_loudly(tmp_path: Path) -> None:
    """With ``--processes``, an object the workers' API refuses stops each shard with the usual message, and
    ``sim up`` says which shard failed and exits non-zero, with no ready file and no process left behind."""
    _, content, message = next(c for c in BAD_TOPOLOGIES if c[0] == "object the server refuses")
    topology = tmp_path / "topology.yaml"
    topology.write_text(yaml.safe_dump(content))
    directory = tmp_path / "sim"
    args = ("--workers", "2", "--gpu-workers", "0", "--processes", "2", "--no-fencing-agents")
    proc = await _start(directory, *args, "--topology", str(topology))
    async with asyncio.timeout(120):
        out, err = await proc.communicate()
    text = err.decode()
    assert proc.returncode == 1, f"exit {proc.returncode}\n{out.decode()}{text}"
    assert "Traceback" not in text and "never retrieved" not in text, text
    assert message in text, text  # worker-1's shard says what its API refused
    assert "dispatcher sim up: shard " in text and "exited with code 2 before it was ready" in text, text
    assert not (directory / "ready").exists()
    assert await asyncio.to_thread(_sim_commands_running, directory) == []


def _sim_commands_running(directory: Path) -> list[str]:
    """Command lines of the processes still running a shard of the world in ``directory``."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(directory) in cmd and "--shard" in cmd:
            out.append(cmd)
    return out
