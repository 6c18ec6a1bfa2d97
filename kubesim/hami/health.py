"""Node health as the simulated HAMi scheduler checks it: the handshake annotation and the NVIDIA backend's memory.

Follows HAMi (rules section 6): ``device.CheckHealth`` (``pkg/device/devices.go``) on ``hami.io/node-handshake``
(without ``Requesting`` the scheduler writes ``Requesting_<local time.DateTime>`` and the node is healthy and
changed; with it, no ``_``, an unreadable time or one under 60 s old is healthy; older is healthy only while the
node's allocatable ``nvidia.com/gpu`` is above 0) and the NVIDIA ``CheckHealth`` (``pkg/device/nvidia/device.go``),
which remembers per node the GPU count and registration it last saw: a count that drops to 0 is unhealthy, a
changed count or registration is an update.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from .config import HANDSHAKE_ANNOTATION, REGISTER_ANNOTATION

__all__ = ["HandshakeCheck", "NodeHealth", "check_handshake"]

_TIMEOUT = timedelta(seconds=60)
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:[.,]\d+)?")


@dataclass(frozen=True)
class HandshakeCheck:
    """Healthy, changed (the node's devices should be read again), and a handshake value to write."""

    healthy: bool
    changed: bool
    write: str | None = None


def check_handshake(annotation: str | None, now: datetime, allocatable_gpus: int) -> HandshakeCheck:
    """``device.CheckHealth``; ``now`` in local time."""
    value = annotation or ""
    local = now.astimezone().replace(tzinfo=None) if now.tzinfo is not None else now
    if "Requesting" not in value:
        return HandshakeCheck(True, True, "Requesting_" + local.strftime("%Y-%m-%d %H:%M:%S"))
    _, sep, stamp = value.partition("_")
    match = _DATETIME.fullmatch(stamp) if sep else None
    if match is None:
        return HandshakeCheck(True, False)
    try:
        y, mo, d, h, mi, sec = (int(g) for g in match.groups())
        former = datetime(y, mo, d, h, mi, sec)
    except ValueError:
        return HandshakeCheck(True, False)
    if local < former + _TIMEOUT:
        return HandshakeCheck(True, False)
    return HandshakeCheck(allocatable_gpus > 0, False)


class NodeHealth:
    """The NVIDIA backend's health check with its per-node memory (``ReportedGPUNum``, ``ReportedRegisterAnnos``)."""

    def __init__(self) -> None:
        self._gpus: dict[str, int] = {}
        self._register: dict[str, str] = {}

    def check(self, node: str, annotations: Mapping[str, str], allocatable_gpus: int, now: datetime) -> HandshakeCheck:
        reported = self._gpus.get(node, 0)
        handshake = check_handshake(annotations.get(HANDSHAKE_ANNOTATION), now, allocatable_gpus)
        register = annotations.get(REGISTER_ANNOTATION, "")
        if allocatable_gpus == 0:
            if reported == 0:
                return handshake
            self._gpus[node] = 0
            self._register[node] = register
            return HandshakeCheck(False, handshake.changed, handshake.write)
        if reported != allocatable_gpus:
            self._gpus[node] = allocatable_gpus
            self._register[node] = register
            return HandshakeCheck(True, True, handshake.write)
        if self._register.get(node, "") != register:
            self._register[node] = register
            return HandshakeCheck(handshake.healthy, True, handshake.write)
        return handshake

    def forget(self, node: str) -> None:
        """``NodeDeleted`` / ``NodeCleanUp``."""
        self._gpus.pop(node, None)
        self._register.pop(node, None)
