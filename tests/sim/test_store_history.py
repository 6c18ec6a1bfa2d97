"""The simulated store's watch history: bounded by count and by age, as etcd's compaction bounds it."""

from __future__ import annotations

from kubesim.store import Store


def _cm(name: str, rv: int) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}


def _write(store: Store, name: str) -> int:
    rv = store.next_rv()
    store.put("configmaps", _cm(name, rv), rv, created=False)
    return rv


def test_history_older_than_its_horizon_is_compacted() -> None:
    clock = [1000.0]
    store = Store(log_seconds=300.0, clock=lambda: clock[0])
    first = _write(store, "a")
    second = _write(store, "b")
    assert not store.too_old(first - 1)
    assert [e.rv for e in store.events_since(first - 1, None)] == [first, second]

    clock[0] += 301.0  # five minutes later, one more write: what came before is gone
    third = _write(store, "c")
    assert store.too_old(first) and store.too_old(second - 1)
    assert not store.too_old(second)
    assert [e.rv for e in store.events_since(second, None)] == [third]
    assert store.get("configmaps", "ns", "a") is not None  # objects stay; only their history goes


def test_history_is_bounded_by_count_too() -> None:
    store = Store(log_size=3)
    rvs = [_write(store, f"cm-{i}") for i in range(5)]
    assert store.compacted_rv == rvs[1]
    assert [e.rv for e in store.events_since(rvs[1], None)] == rvs[2:]
