"""Logging: the standard library's loggers rendered by structlog, with secrets redacted.

Modules log through ``logging.getLogger("dispatcher.…")``; :func:`setup_logging` routes every record
through structlog's processors (timestamp, level, logger name) to one line per event: key=value for a
terminal, JSON when stderr is not a terminal (or ``DISPATCHER_LOG_FORMAT=json``) for log collectors. Every
line logged by a step of one workload carries its ``workload``, ``cluster``, ``generation`` and ``placement``
(bound as context variables by the service for the task doing that work). A redaction step replaces values
of keys that can carry credentials and bearer tokens inside messages, so a token or kubeconfig never
reaches a log line even when an exception message quotes one.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

__all__ = ["redact_text", "setup_logging"]

_SECRET_KEYS = re.compile(r"(token|password|secret|authorization|kubeconfig|client-key|certificate)", re.I)
_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9\-._~+/]+=*", re.I)
_KV = re.compile(r"((?:token|password|client-key-data|client-certificate-data)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+", re.I)


def redact_text(text: str) -> str:
    """``Bearer abc`` → ``Bearer [redacted]``; ``token: abc`` → ``token: [redacted]``."""
    return _KV.sub(r"\1[redacted]", _BEARER.sub(r"\1[redacted]", text))


def _redact(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        value = event[key]
        if key != "event" and _SECRET_KEYS.search(key):
            event[key] = "[redacted]"
        elif isinstance(value, str):
            event[key] = redact_text(value)
    return event


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record is emitted (as logging's last-resort handler does), so
    a CLI command run in-process (tests, embedding) never leaves a handler on a stream that was closed since."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def setup_logging(level: str = "info") -> None:
    fmt = os.environ.get("DISPATCHER_LOG_FORMAT", "").lower()
    # JSON for collectors (not a terminal), key=value for people; DISPATCHER_LOG_FORMAT=json|console overrides.
    json_format = fmt == "json" or (fmt != "console" and not sys.stderr.isatty())
    renderer: Any = structlog.processors.JSONRenderer() if json_format else structlog.dev.ConsoleRenderer(colors=False)
    pre_chain: list[Any] = [
        structlog.contextvars.merge_contextvars,  # workload, cluster, placement bound by the step doing the work
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=pre_chain,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            _redact,
            renderer,
        ],
    )
    handler = _StderrHandler()
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("aiohttp.access", "kubernetes_asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
