"""How ``dispatcher sim up --processes N`` deals the workers out to its shards (``kubesim.shards.shard_numbers``)."""

from __future__ import annotations

import pytest

from kubesim.shards import shard_numbers


@pytest.mark.parametrize(("workers", "shards"), [(1, 1), (3, 2), (10, 2), (100, 2), (100, 3), (1000, 4)])
def test_every_worker_runs_in_exactly_one_shard(workers: int, shards: int) -> None:
    dealt = [n for i in range(shards) for n in shard_numbers(workers, i, shards)]
    assert sorted(dealt) == list(range(1, workers + 1))


def test_the_shard_with_the_manager_runs_fewer_workers() -> None:
    """The manager does the work of several workers: shard 0, which runs it, gives some of its own away, so that it
    is not the busiest process (measured: kubesim/shards.py)."""
    assert [len(shard_numbers(100, i, 2)) for i in range(2)] == [42, 58]
    three = [len(shard_numbers(100, i, 3)) for i in range(3)]
    assert three[0] < min(three[1:]) and abs(three[1] - three[2]) <= 1
    # Interleaved as before otherwise: shard 1 still runs the odd workers.
    assert set(range(1, 100, 2)) <= set(shard_numbers(100, 1, 2))


def test_a_small_world_is_dealt_out_as_before() -> None:
    assert shard_numbers(4, 0, 2) == (2, 4)
    assert shard_numbers(4, 1, 2) == (1, 3)
    assert shard_numbers(10, 0, 2) == (2, 4, 6, 8)
    assert shard_numbers(10, 1, 2) == (1, 3, 5, 7, 9, 10)
