"""Placing a workload again: its current placement is closed, its copy deleted, and it goes back to Pending at a new
generation (so nothing of the old copy can ever reach the manager again), to be placed by the placement step.

Why a workload moves: its worker refused the copy, its Kueue did not admit it within ``policy.admissionTimeout``,
evicted it, or its fencing agent stopped it; the copy vanished; an operator drained the worker; the worker was lost
(:mod:`.failover` moves all of a lost worker's workloads at once and hands each back here with :meth:`requeue`).
"""

from __future__ import annotations

import time

from .copies import delete_remote
from .finish import Finish
from .live import Live
from .runtime import Runtime
from .store.models import PlacementState, WorkloadState, utcnow
from .store.repo import Transition

__all__ = ["ROUND_BACKOFF", "Requeue"]

#: Pause before trying every worker again after all of them refused or timed out a workload.
ROUND_BACKOFF = 30.0


class Requeue:
    def __init__(self, rt: Runtime, finish: Finish) -> None:
        self.rt = rt
        self.finish = finish
        rt.on_timer["admission"] = self.admission_timeout
        rt.on_timer["requeue"] = self._requeue_now

    def _requeue_now(self, live: Live) -> None:
        """The pause after a round of every worker refusing it is over: queue it again."""
        if live.state == WorkloadState.PENDING and not live.deleted:
            self.rt.queue.push(live.pending())
            self.rt.wake_placement()

    def admission_timeout(self, live: Live) -> None:
        """The admission timer fired: unless the worker's Kueue admitted it meanwhile, place it elsewhere."""
        rt = self.rt
        if live.state != WorkloadState.PLACED or live.busy:
            return
        view = rt.views.get(live.cluster or "")
        wl = view.workloads_by_owner.get(live.remote_uid or "") if view else None
        if wl is not None and any(
            c.get("type") == "QuotaReserved" and c.get("status") == "True"
            for c in (wl.get("status") or {}).get("conditions") or []
        ):
            return  # admitted in the meantime
        live.busy = True
        reason = (
            f"not admitted by {live.cluster}'s Kueue within the admission timeout ({rt.policy.admission_timeout:g}s)"
        )
        rt.spawn(self.move_elsewhere(live, reason, exclude=True, timed_out=True), live)

    def requeue(self, live: Live, generation: int) -> None:
        """SQL moved ``live`` back to Pending at ``generation`` (failover): mirror that in memory and queue it."""
        rt = self.rt
        live.generation = generation
        live.state = WorkloadState.PENDING
        rt.live.set_remote(live, None, None)
        live.placement_id = None
        live.decision_summary = ""
        live.reported.clear()
        if live.deleted:
            if not live.busy:
                live.busy = True
                rt.spawn(self.finish.cancel(live), live)
            return
        rt.queue.push(live.pending())

    async def move_elsewhere(
        self,
        live: Live,
        reason: str,
        *,
        exclude: bool,
        timed_out: bool = False,
        rejected: bool = False,
        drained: bool = False,
        fenced: bool = False,
    ) -> None:
        """Close the current placement, delete its copy, and put the workload back to Pending (new generation).
        ``exclude``: not on that worker again this round (every worker tried: a new round after a pause)."""
        rt = self.rt
        cluster = live.cluster or ""
        adapter = rt.adapter(live)
        outcome = PlacementState.TIMED_OUT if timed_out else PlacementState.REJECTED
        if drained:
            outcome = PlacementState.DRAINED
        elif fenced:
            outcome = PlacementState.FENCED
        rt.metrics.placement_ended(cluster, outcome)
        if live.placement_id is not None:
            pid = live.placement_id
            await rt.retry(
                "close placement",
                lambda: rt.repo.update_placement(pid, state=outcome, outcome=reason, ended_at=utcnow()),
            )
        if not rejected and cluster:
            await delete_remote(rt, live, cluster, adapter)
        excluded = list(live.excluded)
        if exclude and cluster and cluster not in excluded:
            excluded.append(cluster)
        new_round = set(excluded) >= set(rt.capacities)
        if new_round:
            excluded = [cluster] if len(rt.capacities) > 1 else []  # every worker tried: start a new round
        t = Transition(
            live.id,
            live.generation,
            {
                "state": WorkloadState.PENDING,
                "generation": live.generation + 1,
                "cluster": None,
                "placement_id": None,
                "excluded": excluded,
                "reason": reason,
            },
            event=(
                "TimedOut" if timed_out else "Drained" if drained else "Fenced" if fenced else "Rejected",
                f"{cluster}: {reason}",
                None,
            ),
            cluster=cluster,
        )
        (ok,) = await rt.retry("move elsewhere", lambda: rt.repo.apply([t]))
        if cluster in rt.capacities:
            rt.capacities[cluster].release(live.uid)
        live.busy = False
        if not ok:
            return
        if timed_out:
            rt.emit(live, "Warning", "AdmissionTimeout", f"{reason}; placing it elsewhere")
        live.generation += 1
        live.state = WorkloadState.PENDING
        rt.live.set_remote(live, None, None)
        live.placement_id = None
        live.excluded = excluded
        live.decision_summary = ""
        live.reported.clear()
        live.cluster_queue = ""
        if live.deleted:
            live.busy = True
            await self.finish.cancel(live)
            return
        if new_round:
            # Every worker refused or timed out: wait before the next round instead of spinning through them.
            rt.timers.add(time.monotonic() + ROUND_BACKOFF, "requeue", live.id, live.generation)
            return
        rt.queue.push(live.pending())
        rt.wake_placement()
