"""The change journal: each worker once, in the order of its last change, with the last change of each scope."""

from __future__ import annotations

from dispatcher.placement.journal import RESCORE, ChangeJournal
from dispatcher.placement.worker import WorkerCapacity


def test_a_worker_changed_many_times_is_read_once_most_recent_first() -> None:
    journal = ChangeJournal()
    a, b, c = WorkerCapacity("a"), WorkerCapacity("b"), WorkerCapacity("c")
    for w in (a, b, a, c, a, b):
        w.version = journal.record(w, ("cq/team-a", False))
    assert journal.changed_since(0) == [b, a, c]
    assert journal.changed_since(a.version) == [b]  # a's last change is the fifth, b's the sixth
    assert journal.changed_since(journal.seq) == []


def test_marks_say_which_verdicts_a_change_concerns() -> None:
    journal = ChangeJournal()
    w = WorkerCapacity("w")
    w.version = journal.record(w, ("cq/team-a", False))
    since = w.version
    w.version = journal.record(w, ("cq/team-b", False))
    assert not w.marks.concern(since, "cq/team-a", wants_gpu=True)  # another tree, no GPUs taken
    assert w.marks.concern(since, "cq/team-b", wants_gpu=False)
    assert not w.marks.concern(since, None, wants_gpu=False)  # a verdict that used no quota tree
    w.version = journal.record(w, ("cq/team-b", True))
    assert w.marks.concern(since, "cq/team-a", wants_gpu=True)  # GPUs taken: every GPU shape
    assert not w.marks.concern(since, "cq/team-a", wants_gpu=False)
    w.version = journal.record(w, RESCORE)
    assert w.marks.concern(since, "cq/team-a", wants_gpu=False)
    assert not w.marks.concern(since, None, wants_gpu=False)
    w.version = journal.record(w, None)
    assert w.marks.concern(since, None, wants_gpu=False)  # anything may have changed


def test_beyond_the_limit_the_least_recently_changed_worker_is_dropped_and_readers_behind_it_told() -> None:
    journal = ChangeJournal(limit=2)
    a, b, c = WorkerCapacity("a"), WorkerCapacity("b"), WorkerCapacity("c")
    for w in (a, b):
        w.version = journal.record(w, None)
    a.version = journal.record(a, None)  # a moves behind b: b is now the least recently changed
    c.version = journal.record(c, None)
    assert list(journal.order) == [a, c]
    assert journal.changed_since(b.version - 1) is None  # b's change may have been missed
    assert journal.changed_since(b.version) == [c, a]
