"""What every handler module of the API shares: the application keys, query parsing and SQL calls.

Split from :mod:`.app` so that handler modules (:mod:`.app`, :mod:`.overview`) can use them without importing
each other: a bad parameter is a 400 naming it, a database that does not answer a 503, the same everywhere.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from ..metrics import Metrics
from .auth import TokenStore
from .errors import ApiError

if TYPE_CHECKING:
    from ..service import Dispatcher

__all__ = [
    "DISPATCHER",
    "LIMIT",
    "METRICS",
    "PENDING_ACTIONS",
    "ROLE",
    "SQL_TIMEOUT",
    "TOKENS",
    "name_param",
    "query_params",
    "run_sql",
    "show_value",
]

log = logging.getLogger("dispatcher.api")

DISPATCHER: web.AppKey[Dispatcher] = web.AppKey("dispatcher")
#: Cordons and drains still running after they answered 202 (cancelled when the app stops).
PENDING_ACTIONS: web.AppKey[set[asyncio.Future[Any]]] = web.AppKey("actions")
#: The role of the token of the request being served (for the log line of an action).
ROLE: contextvars.ContextVar[str] = contextvars.ContextVar("dispatcher_api_role", default="?")
TOKENS: web.AppKey[TokenStore] = web.AppKey("tokens", TokenStore)
METRICS: web.AppKey[Metrics] = web.AppKey("metrics", Metrics)

#: Any API query gives up after these many seconds (503).
SQL_TIMEOUT = 10.0

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-\[\]]{0,39}")
#: A ``limit`` value before its range is checked (at most 7 digits: no huge integers to convert).
LIMIT = re.compile(r"[0-9]{1,7}")

T = TypeVar("T")


def show_value(value: str, limit: int = 64) -> str:
    """A user-supplied value, quoted and cut short, for an error message."""
    return repr(value if len(value) <= limit else value[:limit] + "…")


def query_params(request: web.Request, allowed: tuple[str, ...]) -> dict[str, str]:
    """The query parameters, each at most once; unknown ones are a 400 naming them (never their values)."""
    out: dict[str, str] = {}
    for key in request.query:
        if key not in allowed:
            named = f"{key!r}" if _PARAM_NAME.fullmatch(key) else "(a parameter with an unusual name)"
            takes = f"this endpoint takes {', '.join(allowed)}" if allowed else "this endpoint takes none"
            raise ApiError(400, f"unknown query parameter {named}; {takes}")
        values = request.query.getall(key)
        if len(values) > 1:
            raise ApiError(400, f"{key}: given {len(values)} times; give it once")
        out[key] = values[0]
    return out


def name_param(what: str, value: str, *, subdomain: bool) -> str:
    """``value`` if it is a Kubernetes name (a DNS label, or a DNS subdomain); else a 400 saying what one is."""
    pattern, most = (DNS_SUBDOMAIN, 253) if subdomain else (DNS_LABEL, 63)
    if len(value) > most or not pattern.fullmatch(value):
        kind = "DNS subdomain" if subdomain else "DNS label"
        raise ApiError(
            400,
            f"{what}: {show_value(value)} is not a Kubernetes name (a {kind}: lower-case letters, digits, '-'"
            f"{', ' + repr('.') if subdomain else ''}; at most {most} characters)",
        )
    return value


async def run_sql(request: web.Request, call: Callable[[], Awaitable[T]]) -> T:
    """Run a query; a database that fails or does not answer in time is a 503, counted as an SQL error."""
    try:
        async with asyncio.timeout(SQL_TIMEOUT):
            return await call()
    except (SQLAlchemyError, OSError) as exc:  # TimeoutError is an OSError
        request.app[METRICS].sql_error()
        log.warning("API query failed: the database did not answer (%s)", type(exc).__name__)
        raise ApiError(
            503, "the database does not answer; retry in a moment (GET /readyz tells when it is back)"
        ) from None
