"""Fencing: the acting replica's right to write, checked before every write to SQL and to clusters.

With leader election (``dispatcher run --leader-elect``) a replica may act only while it holds the Lease
and its **term** is the current one in SQL. The :class:`Fence` holds both:

- ``term``: the fencing number the replica got when it took over (``leadership.term``, bumped on each
  takeover). Every state-changing transaction reads the row ``FOR SHARE`` and compares (see
  :mod:`.store.repo`): a deposed leader's transaction fails; a new leader's bump waits for the old one's
  open transactions, so nothing of the old term commits after the new term exists.
- ``valid_until``: a monotonic deadline, the start of the last successful Lease renewal plus the renew
  deadline (shorter than the lease duration). A frozen process that wakes past it stops before any write
  goes out, even before its elector had a chance to notice: the check is synchronous and sits right before
  the request is sent (:class:`~.kube.client.ClusterClient` ``guard``).

Without leader election there is no fence (``None`` everywhere): one replica, nothing checked.
"""

from __future__ import annotations

import time

__all__ = ["Deposed", "Fence"]


class Deposed(Exception):
    """This replica is not (or no longer) the leader: it must not write."""


class Fence:
    def __init__(self) -> None:
        self.term: int | None = None
        self.valid_until = 0.0
        self.holder = ""

    def leading(self) -> bool:
        return self.term is not None and time.monotonic() < self.valid_until

    def check(self) -> int:
        """The current term, or :class:`Deposed` when this replica may not act (no term, lease too old)."""
        term = self.term
        if term is None:
            raise Deposed("not the leader")
        if time.monotonic() >= self.valid_until:
            raise Deposed(f"term {term}: the lease was not renewed within the renew deadline")
        return term

    def guard(self) -> None:
        """For :class:`~.kube.client.ClusterClient`: raise before a write request goes out."""
        self.check()

    def revoke(self) -> None:
        self.term = None
        self.valid_until = 0.0
