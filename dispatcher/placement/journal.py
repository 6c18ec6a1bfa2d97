"""The change journal: which workers changed, in order, and what each change can have touched.

Every change of a :class:`~.worker.WorkerCapacity` takes a number from one process-wide sequence (its ``version``)
and is recorded here with its :data:`Scope`. The placement engine keeps each workload shape's verdicts up to the
number it last read, and looks again only at the workers changed after it whose changes concern the shape.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .worker import WorkerCapacity

__all__ = ["JOURNAL", "RESCORE", "ChangeJournal", "ChangeMarks", "Scope"]

#: What a change that only added one of our reservations can have affected: the root of the quota tree it
#: used (``cq/<name>`` or ``cohort/<name>``) and whether it took HAMi GPUs. ``None``: anything.
Scope = tuple[str, bool] | None

#: The scope of a change that moves only the worker's scores (its API latency): every verdict of the worker is scored
#: again, none is assigned again.
RESCORE: Scope = ("*", False)


@dataclass(slots=True)
class ChangeMarks:
    """Per worker, the sequence number of its last change of each scope, so that a reader asks whether any change
    since its own mark concerns it without reading the changes one by one."""

    #: The last change with scope ``None`` (anything may have changed).
    base: int = 0
    #: The last :data:`RESCORE`.
    rescore: int = 0
    #: The last reservation that took HAMi GPUs.
    gpu: int = 0
    #: Quota tree root -> the last reservation in that tree.
    roots: dict[str, int] = field(default_factory=dict)

    def concern(self, since: int, root: str | None, wants_gpu: bool) -> bool:
        """Whether a change after ``since`` can have changed a verdict in quota tree ``root`` (``None``: a verdict
        that used none), for a shape that wants GPUs or not."""
        if self.base > since:
            return True
        if root is None:
            return False
        return self.rescore > since or self.roots.get(root, 0) > since or (wants_gpu and self.gpu > since)


class ChangeJournal:
    """Which workers changed, in order, under one process-wide sequence.

    The engine remembers the sequence number up to which it brought each workload shape's verdicts up to date
    and asks only for the workers changed after it (:meth:`changed_since`). The journal keeps each worker once,
    in the order of its last change, with the last change of each scope (:class:`ChangeMarks`): a shape decided
    again after 90 other decisions reads the 20-30 workers they changed, not 90 entries. Beyond ``limit``
    workers the least recently changed one is dropped; a reader that had not seen its last change gets ``None``
    and looks at every worker instead.
    """

    __slots__ = ("limit", "order", "seq", "start")

    def __init__(self, limit: int = 1 << 16) -> None:
        self.limit = limit
        #: Sequence number of the last change.
        self.seq = 0
        #: The last change of any worker dropped from :attr:`order`: a reader behind it may have missed one.
        self.start = 0
        #: Every worker once, least recently changed first (values unused).
        self.order: OrderedDict[WorkerCapacity, None] = OrderedDict()

    def record(self, worker: WorkerCapacity, scope: Scope) -> int:
        seq = self.seq = self.seq + 1
        marks = worker.marks
        if scope is None:
            marks.base = seq
        elif scope is RESCORE:
            marks.rescore = seq
        else:
            marks.roots[scope[0]] = seq
            if scope[1]:
                marks.gpu = seq
        order = self.order
        if worker in order:
            order.move_to_end(worker)
        else:
            order[worker] = None
            while len(order) > self.limit:
                dropped, _ = order.popitem(last=False)
                self.start = max(self.start, dropped.version)
        return seq

    def changed_since(self, seq: int) -> list[WorkerCapacity] | None:
        """The workers whose last change is after ``seq``, the most recent first, or ``None`` when a change
        after ``seq`` may have been dropped."""
        if seq < self.start:
            return None
        changed: list[WorkerCapacity] = []
        for worker in reversed(self.order):
            if worker.version <= seq:
                break
            changed.append(worker)
        return changed


#: The journal every :class:`WorkerCapacity` writes to.
JOURNAL = ChangeJournal()
