"""Errors of the HTTP API: one JSON shape, messages a person can act on.

Every error answer is ``{"error": {"code": 404, "reason": "NotFound", "message": "..."}}``; the message says
what was wrong and what to do instead. Messages never carry a token, a header value or an exception's text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web

__all__ = ["REASONS", "ApiError", "error_response", "json_response"]

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    413: "RequestEntityTooLarge",
    500: "InternalError",
    501: "NotImplemented",
    503: "ServiceUnavailable",
    504: "Timeout",
}

#: On every JSON answer: not cached by proxies or browsers, never sniffed as something else.
COMMON_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


class ApiError(Exception):
    """Raised by handlers and middlewares; rendered by the error middleware."""

    def __init__(self, code: int, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = REASONS.get(code, "Error")
        self.message = message
        self.headers = dict(headers or {})


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def json_response(data: Any, *, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response(data, status=status, headers={**COMMON_HEADERS, **(headers or {})}, dumps=_dumps)


def error_response(code: int, message: str, *, headers: Mapping[str, str] | None = None) -> web.Response:
    body = {"error": {"code": code, "reason": REASONS.get(code, "Error"), "message": message}}
    return json_response(body, status=code, headers=headers)
