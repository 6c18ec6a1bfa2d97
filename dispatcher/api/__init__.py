"""The dispatcher's HTTP API: health, readiness, Prometheus metrics, workers, workloads and decisions.

:func:`make_app` builds the aiohttp application for a :class:`~dispatcher.service.Dispatcher`; :func:`serve`
listens (refusing a non-loopback address when no token is configured); :func:`start_api` does both from a
``HOST:PORT`` and the token sources. Routes, auth and errors: :mod:`.app`, :mod:`.auth`, :mod:`.openapi`.
"""

from __future__ import annotations

from .app import ApiConfigError, bound_address, is_loopback, make_app, parse_listen, serve, start_api
from .auth import ADMIN, ENV_VAR, READ, TokenError, TokenStore
from .openapi import openapi_document

__all__ = [
    "ADMIN",
    "ENV_VAR",
    "READ",
    "ApiConfigError",
    "TokenError",
    "TokenStore",
    "bound_address",
    "is_loopback",
    "make_app",
    "openapi_document",
    "parse_listen",
    "serve",
    "start_api",
]
