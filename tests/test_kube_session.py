"""The API client's HTTP session: the environment's proxy is resolved once, not looked up on every request.

kubernetes_asyncio's session trusts the environment, so aiohttp read the proxy variables and parsed ~/.netrc in
a worker thread for every request (15% of the dispatcher's CPU on a 10,000-Job burst, issue 20)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatcher.config import KubeconfigRef
from dispatcher.kube.client import connect
from dispatcher.kube.pools import IDLE_CONNECTION_SECONDS

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "https://api.example.test:6443", insecure-skip-tls-verify: true{proxy}}}
users:
- name: u
  user: {{token: not-a-real-token}}
contexts:
- name: x
  context: {{cluster: c, user: u}}
current-context: x
"""


async def _client_for(tmp_path: Path, proxy: str = "") -> tuple[str | None, bool]:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG.format(proxy=f", proxy-url: {proxy!r}" if proxy else ""))
    client = await connect("c", KubeconfigRef(path=str(path)))
    try:
        rest = client._api.rest_client
        return rest.proxy, rest.pool_manager.trust_env
    finally:
        await client.close()


@pytest.mark.parametrize("var", ["HTTPS_PROXY", "https_proxy"])
async def test_the_environments_proxy_is_used_and_the_session_does_not_trust_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(var, "http://proxy.example.test:3128")
    assert await _client_for(tmp_path) == ("http://proxy.example.test:3128", False)


async def test_no_proxy_and_the_kubeconfigs_proxy_url_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example.test:3128")
    monkeypatch.setenv("NO_PROXY", ".example.test")
    assert await _client_for(tmp_path) == (None, False)
    monkeypatch.delenv("NO_PROXY")
    proxy, _ = await _client_for(tmp_path, proxy="http://other.example.test:8080")
    assert proxy == "http://other.example.test:8080"


async def test_request_and_control_connections_outlive_a_quiet_minute_but_not_the_servers_idle_timeout(
    tmp_path: Path,
) -> None:
    """aiohttp closes idle connections after 15 s: a burst after a quiet quarter-minute paid a TLS handshake for
    every pooled connection again (about 750 at 100 workers). They now stay 60 s, below kube-apiserver's 90 s
    ``IdleTimeout``, so the client closes an idle connection before the server does."""
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG.format(proxy=""))
    client = await connect("c", KubeconfigRef(path=str(path)))
    try:
        requests = client._api.rest_client.pool_manager.connector
        assert client._control_session is not None
        control = client._control_session.connector
        assert requests is not None and control is not None
        for connector in (requests, control):
            assert connector._keepalive_timeout == IDLE_CONNECTION_SECONDS
        assert 15 < IDLE_CONNECTION_SECONDS < 90
    finally:
        await client.close()
