"""Node health as HAMi's scheduler judges it (section 6 of ``/work/shared/hami-rules.md``).

The handshake on ``hami.io/node-handshake`` (``device.CheckHealth``, ``pkg/device/devices.go:576-615``) and the
NVIDIA backend's per-node health check with its memory of what each node reported (``device.go:234-272``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from .names import HANDSHAKE_ANNOTATION, REGISTER_ANNOTATION

__all__ = ["HandshakeCheck", "NvidiaHealthTracker", "check_handshake"]


_HANDSHAKE_TIMEOUT: Final = timedelta(seconds=60)
_GO_DATETIME: Final = "%Y-%m-%d %H:%M:%S"  # time.DateTime


@dataclass(slots=True, frozen=True)
class HandshakeCheck:
    """The outcome of ``device.CheckHealth``: healthy, changed, and the handshake value to write (if any)."""

    healthy: bool
    changed: bool
    write: str | None = None


def _local_naive(now: datetime) -> datetime:
    return now.astimezone().replace(tzinfo=None) if now.tzinfo is not None else now


_GO_DATETIME_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:[.,]\d+)?")


def check_handshake(annotation: str | None, now: datetime, allocatable_gpus: int) -> HandshakeCheck:
    """``device.CheckHealth`` (devices.go:576-615) on ``hami.io/node-handshake``.

    Without ``Requesting`` the scheduler writes ``Requesting_<local time.DateTime>`` and the node is healthy
    (changed). With it: no ``_``, an unparsable time or one less than 60 s old is healthy; older is healthy only
    while the node's allocatable ``nvidia.com/gpu`` is above 0. ``now`` is local time (naive) or aware.
    """
    value = annotation or ""
    local = _local_naive(now)
    if "Requesting" in value:
        _, sep, stamp = value.partition("_")
        if not sep:
            return HandshakeCheck(True, False)
        m = _GO_DATETIME_RE.fullmatch(stamp)
        if m is None:
            return HandshakeCheck(True, False)
        try:
            y, mo, d, h, mi, sec = (int(g) for g in m.groups()[:6])
            former = datetime(y, mo, d, h, mi, sec)
        except ValueError:
            return HandshakeCheck(True, False)
        if local < former + _HANDSHAKE_TIMEOUT:
            return HandshakeCheck(True, False)
        return HandshakeCheck(allocatable_gpus > 0, False)
    return HandshakeCheck(True, True, "Requesting_" + local.strftime(_GO_DATETIME))


class NvidiaHealthTracker:
    """The NVIDIA backend's node health check (device.go:234-272), with its per-node memory.

    An unhealthy result means HAMi runs ``NodeCleanUp`` (removes ``hami.io/node-handshake``) and drops the
    node's NVIDIA devices from its cache. Call :meth:`node_deleted` when a node goes away.
    """

    def __init__(self) -> None:
        self.reported_gpus: dict[str, int] = {}
        self.reported_register: dict[str, str] = {}

    def check(
        self,
        node_name: str,
        annotations: Mapping[str, str],
        allocatable_gpus: int,
        now: datetime,
    ) -> HandshakeCheck:
        reported = self.reported_gpus.get(node_name, 0)
        handshake = check_handshake(annotations.get(HANDSHAKE_ANNOTATION), now, allocatable_gpus)
        register = annotations.get(REGISTER_ANNOTATION, "")
        if allocatable_gpus == 0:
            if reported == 0:
                return handshake
            self.reported_gpus[node_name] = 0
            self.reported_register[node_name] = register
            return HandshakeCheck(False, handshake.changed, handshake.write)
        if reported != allocatable_gpus:
            self.reported_gpus[node_name] = allocatable_gpus
            self.reported_register[node_name] = register
            return HandshakeCheck(True, True, handshake.write)
        if self.reported_register.get(node_name, "") != register:
            self.reported_register[node_name] = register
            return HandshakeCheck(handshake.healthy, True, handshake.write)
        return handshake

    def node_deleted(self, node_name: str) -> None:
        self.reported_gpus.pop(node_name, None)
        self.reported_register.pop(node_name, None)
