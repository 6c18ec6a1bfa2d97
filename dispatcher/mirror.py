"""The mirror step: the chosen worker gets the suspended copy of the manager object (Placing -> Placed), and copies
are deleted safely when a workload moves, finishes or is cancelled.

The intent is in SQL before anything is created (the placement step wrote it), and every call here is idempotent
(:mod:`.copies`: an AlreadyExists of our own copy is success; deletes carry a uid precondition), so a crash at any
line is resumed by running the step again. A copy the worker refuses for good moves the workload elsewhere; a
manager object deleted meanwhile cancels it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from .copies import create_copy
from .kube.client import KubeError
from .live import Live
from .placement.engine import Decision
from .runtime import Runtime
from .store.models import PlacementState, WorkloadState, utcnow
from .store.repo import Transition

if TYPE_CHECKING:
    from .finish import Finish
    from .gc import GarbageCollector
    from .requeue import Requeue

__all__ = ["Mirror"]

log = logging.getLogger("dispatcher.mirror")


class Mirror:
    """Creates copies (Placing -> Placed), retrying transient errors while the placement stands."""

    def __init__(self, rt: Runtime, requeue: Requeue, finish: Finish, gc: GarbageCollector) -> None:
        self.rt = rt
        self.requeue = requeue
        self.finish = finish
        self.gc = gc

    async def create(self, live: Live, decision: Decision | None) -> None:
        """Create ``live``'s copy on its chosen worker; then Placed, or moved elsewhere, or cancelled."""
        rt = self.rt
        assert rt.intake is not None and rt.manager is not None
        cluster, generation, placement_id = live.cluster or "", live.generation, live.placement_id or 0
        client = rt.clients[cluster]
        adapter = rt.adapter(live)
        delay = 0.2
        while True:
            if rt.stopping:
                return
            if live.deleted or live.generation != generation:
                break
            manager_obj = rt.intake.objects.get(live.uid)
            if manager_obj is None:
                await rt.intake.wait_synced()
                manager_obj = rt.intake.objects.get(live.uid)
                if manager_obj is None:
                    live.deleted = True
                    break
            # HA: a deposed leader re-reads the term before creating anything (and the client's guard checks the
            # lease deadline right before the request leaves, after any wait for a turn); without leader election
            # this is a no-op. Not inside the turn: it would hold one of the worker's connections during a SQL read.
            await rt.repo.check_term()
            try:
                # The copy's calls hold one turn on the worker's connections (kube/gate.py). A burst queues there,
                # so the workload is looked at again once its turn comes: failed over or deleted meanwhile, it is
                # not created on this worker.
                async with client.turn():
                    if rt.stopping or live.deleted or live.generation != generation:
                        continue
                    manager_obj = rt.intake.objects.get(live.uid) or manager_obj
                    result = await create_copy(
                        client,
                        adapter,
                        manager_obj,
                        origin=rt.config.origin,
                        workload_uid=live.uid,
                        generation=generation,
                        placement_id=placement_id,
                        create_namespace=rt.policy.create_namespaces,
                    )
            except KubeError as exc:
                log.info("creating the copy of %s on %s failed (%s); retrying", live.key, cluster, exc)
                if exc.reason == "OlderCopy":
                    self.gc.request(cluster)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 15.0)
                continue
            if result.ok:
                rt.copies_created += 1
                await self._placed(live, result.remote_uid or "")
            else:
                rt.emit(live, "Warning", "CopyRejected", result.error)
                live.busy = False
                await self.requeue.move_elsewhere(live, result.error, exclude=True, rejected=True)
                return
            break
        live.busy = False
        if live.deleted:
            live.busy = True
            await self.finish.cancel(live)
        else:
            rt.mark_dirty(live.id)

    async def _placed(self, live: Live, remote_uid: str) -> None:
        rt = self.rt
        now = utcnow()
        t = Transition(
            live.id,
            live.generation,
            {"state": WorkloadState.PLACED, "placed_at": now, "reason": None},
            from_states=(WorkloadState.PLACING,),
            placement_id=live.placement_id,
            placement_values={"state": PlacementState.CREATED, "remote_uid": remote_uid, "mirrored_at": now},
            event=("Placed", live.decision_summary or f"copy created on {live.cluster}", None),
            cluster=live.cluster,
        )
        if not await rt.batched(t):
            return
        live.state = WorkloadState.PLACED
        live.placed_at = time.monotonic()
        live.remote_seen = False
        rt.metrics.placed(live.cluster or "")
        rt.metrics.observe_submit_to_placed(time.time() - live.created)
        rt.live.set_remote(live, live.cluster, remote_uid)
        rt.arm_admission_timer(live)
        summary = live.decision_summary or f"placed on {live.cluster}"
        rt.emit(live, "Normal", "Placed", summary)
        await rt.report(live, WorkloadState.PLACED, summary, None)
