"""Helpers for tests that talk to a simulated API server over HTTP with kubernetes_asyncio.

The client is always built from ``SimCluster.kubeconfig()``, so whatever the kubeconfig carries (server URL,
bearer token, and the CA of a TLS-serving simulator) is what the tests use.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.config import load_kube_config_from_dict

from kubesim.cluster import SimCluster

Obj = dict[str, Any]

__all__ = ["Obj", "RawResponse", "kube_configuration", "raw_request", "wait_for"]


async def kube_configuration(cluster: SimCluster, tmp_path: Path, *, with_token: bool = True) -> k8s.Configuration:
    """A kubernetes_asyncio ``Configuration`` loaded from the cluster's kubeconfig (optionally without the token)."""
    kubeconfig = json.loads(json.dumps(cluster.kubeconfig()))
    if not with_token:
        for user in kubeconfig.get("users") or []:
            user.get("user", {}).pop("token", None)
    conf = k8s.Configuration()
    await load_kube_config_from_dict(kubeconfig, client_configuration=conf, temp_file_path=str(tmp_path))
    return conf


class RawResponse:
    """Status, headers and the decoded JSON body of one HTTP answer."""

    def __init__(self, status: int, headers: dict[str, str], warnings: list[str], body: Any) -> None:
        self.status = status
        self.headers = headers
        self.warnings = warnings
        self.body = body

    def __repr__(self) -> str:
        return f"RawResponse({self.status}, {self.body!r})"


async def raw_request(
    api: k8s.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
    query: dict[str, str] | None = None,
    timeout: float | None = None,
) -> RawResponse:
    """One request through the client's transport and auth (so TLS and the token apply), any answer returned."""
    resp = await api.call_api(
        path,
        method,
        query_params=list((query or {}).items()),
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=timeout,
    )
    try:
        data = await resp.read()
        headers = dict(resp.headers.items())
        warnings = resp.headers.getall("Warning", [])
        status = resp.status
    finally:
        resp.release()
    try:
        decoded: Any = json.loads(data) if data else None
    except ValueError:
        decoded = data.decode()
    return RawResponse(status, headers, list(warnings), decoded)


async def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """Poll ``predicate`` (sync) until it returns something truthy, or fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)
