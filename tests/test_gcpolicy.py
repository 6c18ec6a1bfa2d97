"""kubecommon/gcpolicy.py: what a long-running entry point does to the cyclic GC, checked in a child process (the
policy is process-wide; the test process keeps CPython's defaults)."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import gc, json, weakref
from kubecommon import gcpolicy

class Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic GC frees it

heap = [{"metadata": {"name": str(i)}} for i in range(20_000)]  # long-lived state, as an informer cache
gc.disable()  # nothing collects before settle() does
garbage = [Node() for _ in range(10)]
early = [weakref.ref(n) for n in garbage]
del garbage  # unreachable cycles, before the start is settled
before = gc.get_threshold()
frozen = gcpolicy.settle()
after_settle = sum(1 for r in early if r() is not None)
late_nodes = [Node() for _ in range(10)]
late = [weakref.ref(n) for n in late_nodes]
del late_nodes  # cycles made later still die, at the next collection
gc.collect()
after_late = sum(1 for r in late if r() is not None)
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": frozen, "tracked": len(gc.get_objects()),
                  "cycles_left_at_settle": after_settle, "cycles_left_later": after_late, "heap": len(heap)}))
"""


def test_settle_freezes_the_started_heap_and_batches_young_collections() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, timeout=60)
    got = json.loads(out.stdout)
    assert got["before"] == [700, 10, 10], "the child starts from CPython's defaults"
    assert got["after"] == [50_000, 20, 100]
    # The 20,000 cached objects (and the interpreter's own) are frozen: the collector no longer walks them.
    assert got["frozen"] >= 20_000
    assert got["tracked"] < 1_000
    # Garbage cycles are collected before the freeze, and those made afterwards are still collected.
    assert got["cycles_left_at_settle"] == 0
    assert got["cycles_left_later"] == 0
    assert got["heap"] == 20_000
