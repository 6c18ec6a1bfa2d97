"""``dispatcher status``, ``workloads`` and ``cluster cordon|uncordon|drain`` against a running dispatcher's API."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from harness import Rig, job

from dispatcher.api import bound_address, start_api
from dispatcher.store.models import WorkloadState


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dispatcher", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def test_status_workloads_and_cluster_commands(rig: Rig, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("admin s3cret-admin-token\nread s3cret-read-token\n")
    runner = await start_api(rig.dispatcher, listen="127.0.0.1:0", token_file=tokens, environ={})
    try:
        host, port = bound_address(runner)
        api = f"http://{host}:{port}"
        await rig.submit(job("listed", seconds=1))
        await rig.wait_state("team-a", "listed", WorkloadState.SUCCEEDED)

        code, out, err = await _cli("status", "--api", api, "--token", "s3cret-read-token")
        assert code == 0, err
        assert all(w in out for w in ("worker-1", "worker-2", "worker-3")) and "Ready" in out

        code, out, err = await _cli("workloads", "--api", api, "--token", "s3cret-read-token", "--json")
        assert code == 0, err
        items = json.loads(out)["items"]
        assert [(i["name"], i["state"]) for i in items] == [("listed", "Succeeded")]

        code, out, err = await _cli("cluster", "cordon", "worker-1", "--api", api, "--token", "s3cret-read-token")
        assert code == 2 and "403" in err and "s3cret" not in err  # a read token may not change anything
        code, out, err = await _cli("cluster", "cordon", "worker-1", "--api", api, "--token", "s3cret-admin-token")
        assert code == 0, err
        assert rig.dispatcher.capacities["worker-1"].cordoned
        assert out.strip() == "worker-1: cordon done; now Ready, cordoned", out
        code, out, err = await _cli("cluster", "drain", "worker-1", "--running", "--api", api, "--token",
                                    "s3cret-admin-token")  # fmt: skip
        assert code == 0, err
        assert out.strip() == "worker-1: drain done; now Ready, cordoned; 0 workload(s) moved (running ones too)"
        code, out, err = await _cli("cluster", "uncordon", "worker-1", "--api", api, "--token", "s3cret-admin-token")
        assert code == 0, err
        assert not rig.dispatcher.capacities["worker-1"].cordoned
        assert out.strip() == "worker-1: uncordon done; now Ready, not cordoned", out

        code, out, err = await _cli("status", "--api", "http://127.0.0.1:9", "--token", "x")
        assert code == 2 and "cannot reach" in err and "Traceback" not in err
    finally:
        await runner.cleanup()


@pytest.mark.real_rig
async def test_explain_through_the_api_needs_no_database_file(rig: Rig, tmp_path: Path) -> None:
    """Issue 16, item 8: ``explain --api URL --token T`` asks the running dispatcher (on either rig)."""
    tokens = tmp_path / "tokens"
    tokens.write_text("read explain-read-token\n")
    runner = await start_api(rig.dispatcher, listen="127.0.0.1:0", token_file=tokens, environ={})
    try:
        await rig.submit(job("explained", seconds=1))
        await rig.wait_state("team-a", "explained", WorkloadState.SUCCEEDED, timeout=60)
        host, port = bound_address(runner)
        code, out, err = await _cli(
            "explain", "team-a/explained", "--api", f"http://{host}:{port}", "--token", "explain-read-token"
        )
        assert code == 0, err
        assert "team-a/explained" in out and "Succeeded" in out and "worker-" in out
        code, _out, err = await _cli("explain", "team-a/explained", "--api", f"http://{host}:{port}")
        assert code == 2 and "401" in err and "Traceback" not in err
    finally:
        await runner.cleanup()


async def test_workloads_watch_refreshes_until_interrupted(rig: Rig, tmp_path: Path) -> None:
    """Issue 16, item 13: ``--watch`` (kubectl's ``-w``) prints the list again and again; Ctrl-C ends it cleanly."""
    import signal

    runner = await start_api(rig.dispatcher, listen="127.0.0.1:0", environ={})
    try:
        host, port = bound_address(runner)
        await rig.submit(job("watched", seconds=1))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "dispatcher", "workloads", "--api", f"http://{host}:{port}", "-w", "--interval",
            "0.2", "--queue", "user-queue", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            # As from a terminal: a test run started in the background (a shell's `&`) ignores SIGINT, and a
            # process inherits that, so Python would not turn it into KeyboardInterrupt.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        assert proc.stdout is not None
        headers = 0
        seen = ""
        while headers < 3:
            # Generous: the first line waits for a Python process to start, which a loaded machine slows down.
            async with asyncio.timeout(60):
                line = (await proc.stdout.readline()).decode()
            assert line, "the watch ended by itself"
            seen += line
            headers += line.startswith("WORKLOAD")
        proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(20):
            _, err = await proc.communicate()
        assert proc.returncode == 0 and "Traceback" not in err.decode()
        assert "team-a/watched" in seen
    finally:
        await runner.cleanup()
