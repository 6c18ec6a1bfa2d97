"""An incremental HAMi re-fit: after a change of a few GPU nodes, try only the nodes whose answer can differ.

Why: every reservation that takes GPUs changes its worker's GPU view, and each workload shape that wants GPUs is
fitted there again (once per fit key and view, :class:`~.gpu.WorkerGpus` caches the answer). A fit of one pod
walks the nodes in HAMi's preference order (binpack: the fullest first) and takes the first that fits; on a worker
that packs, the nodes ahead of the answer are the full ones, so most of a fit was spent proving again that nodes
nobody touched still cannot take the pod.

What makes skipping them exact, for one pod without a node selector: whether a node fits the pod, and how, depends
on that node's prepared state alone, and the order of two unchanged nodes stays as it was. So after the last fit
under the same key, with answer ``m`` at place ``k`` in the order, every unchanged node before ``k`` still does not
fit, and:

* ``m`` unchanged: the answer is the first of the changed nodes now ahead of ``m`` that fits, else ``m`` with the
  very same verdict (its state is the same object);
* ``m`` changed: the answer is the first that fits among the changed nodes and the unchanged nodes after ``k``,
  merged in the new order.

The answer keeps the same property, so fits chain. Anything else (no last fit, a failed one, a last fit on an
inventory too old to know what changed since) fits from scratch. ``tests/placement/test_refit.py`` compares both on
random changes.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .verdicts import GpuVerdict

if TYPE_CHECKING:
    from .gpu import WorkerGpus

__all__ = ["LastFit", "refit_plan", "remember_fit"]


@dataclass(slots=True, frozen=True)
class LastFit:
    """A successful fit of one pod, and where it stood: every node before :attr:`place` did not fit."""

    verdict: GpuVerdict
    #: The inventory build it was made on (``GpuInventory.generation``).
    generation: int
    node: str
    #: The node's ``(±score, name)`` in that build's order (binpack: ``-score``; spread: ``score``).
    place: tuple[float, str]


def refit_plan(gpus: WorkerGpus, last: LastFit | None, spread: bool) -> GpuVerdict | Iterator[str] | None:
    """What to do for a fit of one pod: the last verdict again, the only nodes to try (in order), or ``None``
    (fit from scratch)."""
    if last is None:
        return None
    changed = gpus.changed_since(last.generation)
    if changed is None:
        return None
    inv = gpus.inventory()
    states = inv.states
    sign = 1.0 if spread else -1.0
    now = sorted((sign * states[n].score, n) for n in changed if n in states)
    if last.node not in changed:
        if last.node not in states:
            return None
        ahead = [k[1] for k in now if k < last.place]
        if not ahead:
            return last.verdict
        return itertools.chain(ahead, (last.node,))
    keys = inv.keys(spread)
    tail = (k for k in itertools.islice(keys, bisect.bisect_right(keys, last.place), None) if k[1] not in changed)
    return (name for _, name in heapq.merge(now, tail))


def remember_fit(gpus: WorkerGpus, key: Hashable, verdict: GpuVerdict, spread: bool) -> None:
    """Keep a fit of one pod for the next :func:`refit_plan` under ``key`` (a failed one is forgotten)."""
    inv = gpus.inventory()
    if not verdict.ok or len(verdict.allocations) != 1:
        gpus.last_fits.pop(key, None)
        return
    node = next(iter(verdict.allocations))
    state = inv.states.get(node)
    if state is None:
        gpus.last_fits.pop(key, None)
        return
    fits = gpus.last_fits
    if len(fits) >= _LAST_FITS_KEPT and key not in fits:
        fits.clear()
    sign = 1.0 if spread else -1.0
    fits[key] = LastFit(verdict, inv.generation, node, (sign * state.score, node))


#: Fit keys remembered per worker (a key stands for one GPU request shape; a fleet has few).
_LAST_FITS_KEPT = 1024
