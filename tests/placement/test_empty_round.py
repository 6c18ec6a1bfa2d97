"""A placement round with no workload waiting returns at once: every watch event that may free capacity wakes
placement, most often with nothing to place, and a round reads every worker."""

from __future__ import annotations

from typing import cast

from dispatcher.mirror import Mirror
from dispatcher.placement.queue import PendingQueue
from dispatcher.placing import Placement
from dispatcher.race import Races
from dispatcher.runtime import Runtime


class Rt:
    def __init__(self) -> None:
        self.queue = PendingQueue()
        self.workers_read = 0

    def workers(self) -> tuple[()]:
        self.workers_read += 1
        return ()


async def test_a_round_with_nothing_waiting_reads_no_worker() -> None:
    rt = Rt()
    placement = Placement(cast(Runtime, rt), cast(Mirror, None), cast(Races, None))
    assert await placement.place_round() is False
    assert rt.workers_read == 0
