"""``dispatcher stop|resume|cancel NS/NAME`` (issue 16, item 13), through the API as an operator runs them, on the
simulator and on the real rig: stop deletes the copy and keeps the workload unplaced until resumed; resume places
it again; cancel ends it for good with the manager object marked Cancelled; each is idempotent and a finished
workload is refused with a one-line reason."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import JOBS, Rig, eventually, job

from dispatcher import labels as L
from dispatcher.api import bound_address, start_api
from dispatcher.store.models import WorkloadState

ADMIN = "controls-admin-token-0123"


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dispatcher", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.real_rig
async def test_stop_resume_and_cancel_a_workload(rig: Rig, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"admin {ADMIN}\nread controls-read-token-0123\n")
    runner = await start_api(rig.dispatcher, listen="127.0.0.1:0", token_file=tokens, environ={})
    host, port = bound_address(runner)
    api = ("--api", f"http://{host}:{port}", "--token", ADMIN)
    try:
        await rig.submit(job("held", seconds=60))
        first = await rig.wait_state("team-a", "held", WorkloadState.ADMITTED, WorkloadState.RUNNING, timeout=60)
        assert first.cluster is not None

        code, out, err = await _cli("stop", "team-a/held", "--api", api[1], "--token", "controls-read-token-0123")
        assert code == 2 and "403" in err, "a read token may not stop anything"
        code, out, err = await _cli("stop", "team-a/held", *api)
        assert code == 0, err
        assert out.strip() == "team-a/held stopped (now Pending)", out
        row = await rig.row("team-a", "held")
        assert row is not None and row.stopped and row.state == WorkloadState.PENDING and row.cluster is None
        assert row.generation == first.generation + 1, "the stopped copy's generation is fenced"
        assert await rig.copies("team-a", "held") == {}, "stop deletes the copy on the worker"
        code, out, err = await _cli("stop", "team-a/held", *api)
        assert code == 0 and "already stopped" in out, (out, err)

        # Placement goes on for others, and never for the stopped one.
        await rig.submit(job("other", seconds=1))
        await rig.wait_state("team-a", "other", WorkloadState.SUCCEEDED, timeout=60)
        row = await rig.row("team-a", "held")
        assert row is not None and row.state == WorkloadState.PENDING and row.cluster is None

        async def labelled(state: str) -> Any:
            obj = await rig.manager.get(JOBS, "team-a", "held")
            return obj if ((obj or {}).get("metadata") or {}).get("labels", {}).get(L.STATE) == state else None

        await eventually(lambda: labelled(WorkloadState.PENDING), what="the manager Job labelled Pending again")

        code, out, err = await _cli("resume", "held", "-n", "team-a", *api)
        assert code == 0 and out.strip() == "team-a/held resumed (now Pending)", (out, err)
        again = await rig.wait_state("team-a", "held", WorkloadState.ADMITTED, WorkloadState.RUNNING, timeout=60)
        assert not again.stopped and again.cluster is not None and again.generation == row.generation
        assert list(await rig.copies("team-a", "held")) == [again.cluster]

        code, out, err = await _cli("cancel", "team-a/held", *api)
        assert code == 0 and out.strip() == "team-a/held cancelled (now Cancelled)", (out, err)
        final = await rig.row("team-a", "held")
        assert (
            final is not None and final.state == WorkloadState.CANCELLED and final.reason == "cancelled by an operator"
        )

        async def copy_gone() -> bool:
            return await rig.copies("team-a", "held") == {}

        await eventually(copy_gone, what="the cancelled workload's copy deleted")
        await eventually(lambda: labelled(WorkloadState.CANCELLED), what="the manager Job labelled Cancelled")
        code, out, err = await _cli("cancel", "team-a/held", *api)
        assert code == 0 and "already cancelled" in out, (out, err)
        code, out, err = await _cli("resume", "team-a/held", *api)
        assert code == 2 and "409" in err and "has finished (Cancelled)" in err and "Traceback" not in err
        code, out, err = await _cli("stop", "team-a/nothing", *api)
        assert code == 2 and "404" in err and "no workload team-a/nothing" in err
    finally:
        await runner.cleanup()
