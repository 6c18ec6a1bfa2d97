"""Log lines: JSON off a terminal, the workload's ids bound on every line of its step, secrets redacted."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
import structlog

from dispatcher.logs import setup_logging


async def test_step_context_is_on_every_line_and_secrets_are_redacted(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCHER_LOG_FORMAT", "json")
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging("info")

        async def step() -> None:
            structlog.contextvars.bind_contextvars(workload="team-a/train", cluster="worker-2", placement=7)
            logging.getLogger("dispatcher.copies").warning("create failed: Authorization: Bearer abc.def-123")
            logging.getLogger("dispatcher.copies").info("retrying with token: s3cr3t")

        await asyncio.create_task(step())
        logging.getLogger("dispatcher.other").info("outside the step")
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    assert len(lines) == 3
    first, second, outside = lines
    for line in (first, second):
        assert line["workload"] == "team-a/train" and line["cluster"] == "worker-2" and line["placement"] == 7
    assert "workload" not in outside, "context stays with the task that bound it"
    text = json.dumps(lines)
    assert "abc.def-123" not in text and "s3cr3t" not in text and "[redacted]" in text
