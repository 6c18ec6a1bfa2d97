"""The HTTP connection pools of one cluster's client: requests, watches and the control path, kept apart.

aiohttp speaks HTTP/1.1, one request per connection at a time, where client-go keeps one HTTP/2 connection per
server. So each cluster gets three pools whose sizes and idle times are chosen here, and
:func:`own_sessions` gives a kubernetes_asyncio client those pools in place of its own session.
"""

from __future__ import annotations

import contextlib

import aiohttp
from kubernetes_asyncio.client import ApiClient, Configuration
from yarl import URL

__all__ = [
    "CONTROL_CONNECTIONS",
    "IDLE_CONNECTION_SECONDS",
    "MANAGER_REQUEST_CONNECTIONS",
    "REQUEST_CONNECTIONS",
    "is_control_path",
    "own_sessions",
]

#: Connections for requests (not watches) per cluster. A request beyond them waits for one to be free. aiohttp
#: speaks HTTP/1.1, one request per connection at a time; a pool that grows with every burst pays a TLS handshake
#: on both sides per new connection, and drops them again after the keep-alive time. client-go instead keeps one
#: HTTP/2 connection per server. Measured on a 1,000-Job burst to 100 simulated workers (bench/RESULTS.md): with
#: one pool of 64 connections a cluster, about 600 were opened during the dispatch, with 8 for requests about 80.
#: The bound this sets: 8 calls in flight per worker, e.g. 80 calls/s (40 Jobs/s: a create and a delete each) to
#: one worker 100 ms away, 1,600/s to one 5 ms away. Only the manager, which every Job's calls reach, needs more.
#: Calls beyond it wait in :class:`~.gate.Gate` (in order, before their deadline starts), not in aiohttp's pool.
REQUEST_CONNECTIONS = 8
#: Connections for health probes and Leases per cluster (:func:`is_control_path`), apart from the requests'.
CONTROL_CONNECTIONS = 2
#: The manager takes about four calls per Job (status and annotation patches, Events) from every worker's Jobs
#: together, and is one cluster: it keeps the wider pool, so a distant manager does not bound the dispatch rate.
MANAGER_REQUEST_CONNECTIONS = 64
#: How long an idle connection of the request and control pools stays open. aiohttp's default is 15 s, so a burst
#: after a quiet quarter-minute opened every pool again: about 750 TLS handshakes at the start of a 3,000-Job burst
#: to 100 simulated workers (bench/RESULTS.md). client-go keeps idle connections 90 s and kube-apiserver closes
#: them after 90 s (``IdleTimeout`` in k8s.io/apiserver's secure_serving.go); below that, the client closes first
#: and never sends a request on a connection the server is closing.
IDLE_CONNECTION_SECONDS = 60.0


def is_control_path(path: str) -> bool:
    """Whether a call keeps this process's standing with the cluster: a health probe (``/readyz``, ``/livez``) or
    a Lease (fencing renewals, leader election, agents' heartbeats).

    These go on connections of their own and never queue behind a burst of copies on :data:`REQUEST_CONNECTIONS`:
    a probe that waits there long enough marks a busy worker unhealthy (in the end Lost, and its workloads moved),
    and a fencing renewal that waits past its deadline lets the worker's agent stop our copies there."""
    return path.startswith(("/readyz", "/livez", "/apis/coordination.k8s.io/"))


def own_sessions(
    api: ApiClient, cfg: Configuration, requests: int
) -> tuple[aiohttp.ClientSession, aiohttp.ClientSession]:
    """Give the client three HTTP sessions that do not consult the environment on every request, sharing
    kubernetes_asyncio's TLS context: its own session is replaced by one for requests with at most ``requests``
    connections; returned are the watches' session (on kubernetes_asyncio's connector and pool limit) and the
    control session for probes and Leases (:data:`CONTROL_CONNECTIONS`).

    kubernetes_asyncio opens its session with ``trust_env=True``: aiohttp then looks up the proxy variables and
    parses ``~/.netrc`` in a worker thread for *every* request. Profiled on a 10,000-Job burst that was 15% of
    the dispatcher's CPU, and a thread hop per API call. The proxy the environment names for this server
    (``HTTPS_PROXY``/``NO_PROXY``, as before) is resolved once here; a kubeconfig's ``proxy-url`` still wins.
    netrc credentials never applied to a Kubernetes API server (tokens and client certificates do).

    Watches get their own connections so that a long-lived stream never takes one a request waits for, and
    requests theirs so that a burst reuses a few warm connections (:data:`REQUEST_CONNECTIONS`)."""
    rest = api.rest_client
    old: aiohttp.ClientSession = rest.pool_manager
    connector = old.connector
    assert isinstance(connector, aiohttp.TCPConnector)
    if not rest.proxy:
        with contextlib.suppress(LookupError):
            proxy = aiohttp.helpers.get_env_proxy_for_url(URL(str(cfg.host)))
            rest.proxy = str(proxy[0])
            if proxy[1] is not None:
                rest.proxy_headers = {"Proxy-Authorization": proxy[1].encode()}
    # The TLS context kubernetes_asyncio built from the kubeconfig (CA, client certificate, verification).
    tls = connector._ssl
    requests_connector = aiohttp.TCPConnector(
        limit=max(1, requests), ssl=tls, keepalive_timeout=IDLE_CONNECTION_SECONDS
    )
    rest.pool_manager = aiohttp.ClientSession(connector=requests_connector, trust_env=False, read_bufsize=2**21)
    # The watch session owns the old session's connector (its TLS context and pool limit); the old session is
    # dropped without closing, which would close the connector.
    old._connector = None
    watches = aiohttp.ClientSession(connector=connector, trust_env=False, read_bufsize=2**21)
    control = aiohttp.TCPConnector(limit=CONTROL_CONNECTIONS, ssl=tls, keepalive_timeout=IDLE_CONNECTION_SECONDS)
    return watches, aiohttp.ClientSession(connector=control, trust_env=False)
