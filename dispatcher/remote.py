"""The CLI's client for a running dispatcher's REST API (``dispatcher status``, ``workloads``, ``cluster``)."""

from __future__ import annotations

import json
import os
import textwrap
from typing import Any

import aiohttp

__all__ = ["ApiError", "call_api", "clusters_table", "workloads_table"]

TOKEN_ENV = "DISPATCHER_API_TOKEN"


class ApiError(Exception):
    """The API answered with an error (its message is meant for people) or could not be reached."""


async def call_api(base: str, method: str, path: str, *, token: str | None = None, timeout: float = 60.0) -> Any:
    token = token or os.environ.get(TOKEN_ENV)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = base.rstrip("/") + path
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
            session.request(method, url, headers=headers) as resp,
        ):
            text = await resp.text()
            try:
                body = json.loads(text) if text else {}
            except json.JSONDecodeError:
                body = {"raw": text[:500]}
            if resp.status >= 400:
                message = (body.get("error") or {}).get("message") if isinstance(body, dict) else None
                raise ApiError(f"{method} {path}: {resp.status}: {message or text[:300]}")
            return body
    except aiohttp.ClientError as exc:
        raise ApiError(f"cannot reach the dispatcher API at {base}: {exc}") from None
    except TimeoutError:
        raise ApiError(f"the dispatcher API at {base} did not answer within {timeout:g}s") from None


def _table(rows: list[list[str]], wrap_last: int | None = None) -> str:
    """Aligned columns; ``wrap_last``: the last column is wrapped at that width, its further lines indented under
    it (a long reason is read in full, not cut)."""
    if wrap_last is None:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    indent = sum(widths) + 2 * len(widths)
    out = []
    for r in rows:
        head = "  ".join(c.ljust(widths[i]) for i, c in enumerate(r[:-1]))
        parts = textwrap.wrap(r[-1], wrap_last) or [""]
        out.append(f"{head}  {parts[0]}".rstrip())
        out.extend(" " * indent + p for p in parts[1:])
    return "\n".join(out)


def clusters_table(body: Any) -> str:
    rows = [["CLUSTER", "HEALTH", "CORDONED", "SYNCED", "IN-FLIGHT", "WEIGHT", "LATENCY", "FENCING", "REASON"]]
    for c in body.get("items") or []:
        fencing = c.get("fencing") or {}
        rows.append(
            [
                str(c.get("name")),
                str(c.get("health")),
                "yes" if c.get("cordoned") else "no",
                "yes" if c.get("synced") else "no",
                str(c.get("inFlight", c.get("in_flight", ""))),
                str(c.get("weight")),
                f"{float(c.get('latencySeconds', c.get('latency', 0)) or 0) * 1000:.0f}ms",
                _fencing_cell(fencing),
                str(c.get("reason") or ""),
            ]
        )
    return _table(rows)


def _fencing_cell(fencing: Any) -> str:
    """``agent``, ``agent (DOWN)``, ``agent (refused)``, ``agent (unseen)``, or ``none (at-least-once)``."""
    if not isinstance(fencing, dict) or fencing.get("mode") != "agent":
        return "none (at-least-once)"
    if fencing.get("renewRefused"):
        return "agent (refused)"
    up = fencing.get("agentUp")
    return "agent" if up else ("agent (unseen)" if up is None else "agent (DOWN)")


def workloads_table(body: Any) -> str:
    rows = [["WORKLOAD", "STATE", "CLUSTER", "QUEUE", "PRIORITY", "GENERATION", "REASON"]]
    for w in body.get("items") or []:
        rows.append(
            [
                f"{w.get('namespace')}/{w.get('name')}",
                str(w.get("state")),
                str(w.get("cluster") or "-"),
                str(w.get("queue")),
                str(w.get("priority")),
                str(w.get("generation")),
                str(w.get("reason") or ""),
            ]
        )
    return _table(rows, wrap_last=60)
