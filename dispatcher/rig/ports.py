"""Loopback ports for the rig's components, chosen so that nothing else takes them before the component binds.

A port the kernel hands out for ``bind(0)`` comes from the ephemeral range, the same range every outgoing
connection on the machine draws its local port from. Between choosing a port and the component binding it (for
Kueue, many seconds later: etcd, the API server and the controllers start first and open hundreds of client
connections), one of those connections can take it, and the component exits with "address already in use". Seen
in CI. So ports come from below the ephemeral range, which outgoing connections never use, chosen at random (two
rigs may start at once) and checked free with a bind.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port"]

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10000
_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default when it cannot be read)."""
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on now and no outgoing connection will take meanwhile; never the
    same port twice in one process."""
    high = _ephemeral_low()
    if high - _LOWEST >= 1000:
        for _ in range(200):
            port = random.randrange(_LOWEST, high)
            if port not in _handed_out and _bindable(port):
                _handed_out.add(port)
                return port
    # A machine whose ephemeral range starts low: take the kernel's choice (the race stays, rarely).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    _handed_out.add(port)
    return port
