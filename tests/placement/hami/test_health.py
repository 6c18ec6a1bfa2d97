"""Tests for :mod:`dispatcher.placement.hami.health`: section 6, node health.

Expected values come from ``/work/shared/hami-rules.md`` (section numbers in test names) or from HAMi's table
tests at commit 4707fb02; a comment names the Go file each ported case comes from.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from dispatcher.placement.hami.health import HandshakeCheck, NvidiaHealthTracker, check_handshake
from dispatcher.placement.hami.names import HANDSHAKE_ANNOTATION, REGISTER_ANNOTATION


def test_s6_handshake() -> None:
    now = datetime(2024, 5, 1, 12, 0, 0)
    first = check_handshake(None, now, 0)
    assert first == HandshakeCheck(True, True, "Requesting_2024-05-01 12:00:00")
    assert check_handshake("Reported 2024-05-01", now, 0).write is not None  # old format: re-request
    assert check_handshake("Requesting", now, 0) == HandshakeCheck(True, False)
    assert check_handshake("Requesting_garbage", now, 0) == HandshakeCheck(True, False)
    recent = "Requesting_" + (now - timedelta(seconds=30)).strftime("%Y-%m-%d %H:%M:%S")
    assert check_handshake(recent, now, 0) == HandshakeCheck(True, False)
    old = "Requesting_" + (now - timedelta(seconds=61)).strftime("%Y-%m-%d %H:%M:%S")
    assert check_handshake(old, now, 4) == HandshakeCheck(True, False)
    assert check_handshake(old, now, 0) == HandshakeCheck(False, False)


def test_s6_nvidia_health_tracker() -> None:
    now = datetime(2024, 5, 1, 12, 0, 0)
    old = "Requesting_2024-05-01 11:00:00"
    t = NvidiaHealthTracker()
    annos = {HANDSHAKE_ANNOTATION: old, REGISTER_ANNOTATION: "[...]"}
    assert t.check("n", annos, 0, now) == HandshakeCheck(False, False)  # never reported, expired, nothing allocatable
    assert t.check("n", annos, 4, now) == HandshakeCheck(True, True)  # count changed
    assert t.check("n", annos, 4, now) == HandshakeCheck(True, False)
    assert t.check("n", {**annos, REGISTER_ANNOTATION: "[..]"}, 4, now) == HandshakeCheck(True, True)
    assert t.check("n", annos, 0, now).healthy is False  # dropped to 0 after being reported
    t.node_deleted("n")
    assert t.reported_gpus == {}
