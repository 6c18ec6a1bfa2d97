"""The cyclic garbage collector's policy for a long-running process: the dispatcher and the simulated clusters.

Both hold large, long-lived heaps of plain JSON (informer caches, stored objects, decision records) that contain no
reference cycles and are freed by reference counting. CPython's default thresholds (700, 10, 10) run a young
collection every 700 net allocations and a full one whenever the objects promoted since the last full collection
pass a quarter of the old generation; each full collection walks the whole heap. Measured on the dispatch benchmark
(100 workers, 1,000 Jobs, bench/RESULTS.md): 9.4 s of collections in one run, of which 6.6 s in 16 full
collections of 0.4 s each, so a third of the dispatcher's CPU per Job, growing with the workloads held, and a
0.4 s pause each time. The simulator measured 17.6 s of 90 s of CPU the same way.

:func:`settle` moves what exists once a process has started (its caches as first listed, its schemas, its code's
objects) out of the collector's sight (``gc.freeze``: frozen objects are still freed by reference counting, only
never scanned for cycles), and collects young objects in batches of 50,000, with a full collection considered
after 100 middle-generation ones rather than 10. Cycles still die: young ones at the next young collection, older
ones at a full collection, later than before. It changes process-wide state, so only entry points call it (the
``run`` command, ``sim up``, the benchmarks), never a library or a test process.
"""

from __future__ import annotations

import gc

__all__ = ["THRESHOLDS", "settle"]

#: Young collections every 50,000 net allocations; the middle generation after 20 of them; a full collection
#: considered after 100 middle ones (and, as always in CPython, only once a quarter of the old generation is new).
THRESHOLDS = (50_000, 20, 100)


def settle() -> int:
    """Collect once, freeze what is left and set :data:`THRESHOLDS`; returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    return gc.get_freeze_count()
