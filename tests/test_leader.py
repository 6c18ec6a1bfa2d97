"""The Lease elector against an in-memory Lease API, on a clock the test moves (no sleeps, no server)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest

from dispatcher import leader
from dispatcher.fencing import Fence
from dispatcher.kube.client import KubeError
from dispatcher.leader import LeaderElectionConfig, LeaderElector

Obj = dict[str, Any]
CONFIG = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class LeaseApi:
    """One Lease with resourceVersion checks; ``before`` runs (once) before the next request is answered."""

    def __init__(self) -> None:
        self.lease: Obj | None = None
        self.version = 0
        self.before: Callable[[str], Awaitable[None]] | None = None

    def write(self, spec: Obj) -> Obj:
        self.version += 1
        self.lease = {"metadata": {"name": "l", "namespace": "ns", "resourceVersion": str(self.version)}, "spec": spec}
        return self.lease

    async def request(self, method: str, path: str, body: Obj | None = None, timeout: float = 0.0) -> Obj:
        hook, self.before = self.before, None
        if hook is not None:
            await hook(method)
        if method == "GET":
            if self.lease is None:
                raise KubeError(404, "NotFound", "no lease")
            return self.lease
        assert body is not None
        if method == "POST":
            if self.lease is not None:
                raise KubeError(409, "AlreadyExists", "exists")
            return self.write(body["spec"])
        if self.lease is None or body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise KubeError(409, "Conflict", "the object has been modified")
        return self.write(body["spec"])


def elector(api: LeaseApi, identity: str) -> LeaderElector:
    async def nothing() -> None:
        return None

    config = LeaderElectionConfig(namespace="ns", name="l", identity=identity, **CONFIG)
    return LeaderElector(
        api,  # type: ignore[arg-type]
        config,
        Fence(),
        on_started_leading=nothing,
        on_stopped_leading=nothing,
    )


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(leader, "time", SimpleNamespace(monotonic=c))
    return c


async def test_a_leader_frozen_during_its_renewal_does_not_take_the_lease_its_successor_just_took(
    clock: Clock,
) -> None:
    api = LeaseApi()
    old, new = elector(api, "old"), elector(api, "new")
    assert await old.try_acquire_or_renew(1.0)
    assert not await new.try_acquire_or_renew(1.0)

    async def frozen_while_renewing(method: str) -> None:
        # ``old`` froze (SIGSTOP) with its renewal in flight: ``new`` saw the Lease unchanged for the lease
        # duration and took it; ``old`` wakes one second after the takeover, and its request times out.
        assert method == "PUT"
        clock.now += CONFIG["lease_duration"] + 0.1
        assert await new.try_acquire_or_renew(1.0)
        clock.now += 1.0
        raise KubeError(0, "TimeoutError", "manager-lease: TimeoutError")

    api.before = frozen_while_renewing
    assert not await old.try_acquire_or_renew(1.0)  # read again: held by new, it steps down
    assert old.holder == "new"
    # Campaigning again right away: new's Lease was seen (by old) only now, it is valid for the lease duration.
    assert not await old.try_acquire_or_renew(1.0)
    assert api.lease is not None and api.lease["spec"]["holderIdentity"] == "new"
    clock.now += CONFIG["lease_duration"] - 0.1
    assert not await old.try_acquire_or_renew(1.0)
    # new never renewed (frozen too): once its Lease has stayed unchanged for the lease duration, old takes it.
    clock.now += 0.2
    assert await old.try_acquire_or_renew(1.0)
    assert api.lease["spec"]["holderIdentity"] == "old" and api.lease["spec"]["leaseTransitions"] == 2


async def test_a_candidate_takes_the_lease_only_after_it_stayed_unchanged_for_the_lease_duration(
    clock: Clock,
) -> None:
    api = LeaseApi()
    a, b = elector(api, "a"), elector(api, "b")
    assert await a.try_acquire_or_renew(1.0)
    assert not await b.try_acquire_or_renew(1.0)
    clock.now += 2.0
    assert await a.try_acquire_or_renew(1.0)  # renewed: b's wait starts again when b sees the change
    assert not await b.try_acquire_or_renew(1.0)
    clock.now += 2.9
    assert not await b.try_acquire_or_renew(1.0)
    clock.now += 0.2
    assert await b.try_acquire_or_renew(1.0)
    assert b.holder == "b" and api.lease is not None and api.lease["spec"]["leaseTransitions"] == 1
