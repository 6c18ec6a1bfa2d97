"""Operator controls: on one workload, stop, resume, cancel (``dispatcher stop|resume|cancel NS/NAME``); on one
worker, cordon, uncordon, drain (``dispatcher cluster cordon|uncordon|drain NAME``).

They mean what ``kueuectl`` users know:

* **stop** is ``kueuectl stop workload`` (Kueue's ``spec.active: false``): the workload keeps its place in the
  dispatcher's books but is never placed until resumed; a copy on a worker is deleted and the manager object
  goes back to waiting (suspended).
* **resume** is ``kueuectl resume workload``: it may be placed again, by the same rules as any other.
* **cancel** ends the workload for good without deleting the manager object (deleting it does the same): the
  copy is deleted and the workload is Cancelled; its manager object keeps the ``Cancelled`` state label, so it
  is never taken in again.

Every control writes its intent to SQL first, and raises the workload's generation when a copy exists: a kill -9
between that write and the copy's deletion leaves a copy of an older generation, which the garbage collector
deletes (it never runs next to a newer copy). A workload busy with a step (its copy being created) is waited
for, briefly; the step itself never sees a half-applied control.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from .copies import delete_remote
from .live import Live
from .store.models import PlacementState, WorkloadState, utcnow
from .store.repo import Transition

if TYPE_CHECKING:
    from .finish import Finish
    from .requeue import Requeue
    from .runtime import Runtime

__all__ = ["ACTIONS", "ClusterControls", "ControlError", "WorkloadControls"]

log = logging.getLogger("dispatcher.control")

ACTIONS = ("stop", "resume", "cancel")
#: How long a control waits for a step in flight on the workload (a copy being created) before giving up.
BUSY_WAIT = 15.0


class ControlError(Exception):
    """The control cannot apply; ``status`` is the HTTP status the API answers with (404, 409)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class WorkloadControls:
    """stop / resume / cancel, against one dispatcher's live workloads and its SQL store."""

    def __init__(self, rt: Runtime, finish: Finish) -> None:
        self.rt = rt
        self.finish = finish

    async def apply(self, action: str, namespace: str, name: str) -> dict[str, Any]:
        """Apply ``action`` to the workload ``namespace/name``; returns ``{"workload", "state", "stopped",
        "changed", "message"}``. Raises :class:`ControlError` (unknown workload, finished, busy too long)."""
        if action not in ACTIONS:
            raise ControlError(400, f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
        live = await self._find(namespace, name)
        await self._wait_idle(live)
        live.busy = True
        try:
            if action == "stop":
                changed = await self._stop(live)
            elif action == "resume":
                changed = await self._resume(live)
            else:
                changed = await self._cancel(live)
        finally:
            live.busy = False
        verb = {"stop": "stopped", "resume": "resumed", "cancel": "cancelled"}[action]
        message = f"{live.key} {verb}" if changed else f"{live.key} was already {verb}; nothing to do"
        log.info("workload %s: %s", live.key, message)
        return {"workload": live.key, "state": live.state, "stopped": live.stopped, "changed": changed,
                "message": message}  # fmt: skip

    # -- the controls ---------------------------------------------------------------------------------------

    async def _stop(self, live: Live) -> bool:
        svc = self.rt
        if live.terminal:
            raise ControlError(409, f"{live.key} has finished ({live.state}); there is nothing to stop")
        if live.stopped:
            return False
        reason = "stopped by an operator"
        cluster = live.cluster
        values: dict[str, Any] = {"stopped": True, "reason": reason}
        if cluster is not None:
            values.update(state=WorkloadState.PENDING, generation=live.generation + 1, cluster=None, placement_id=None)
        t = Transition(
            live.id,
            live.generation,
            values,
            placement_id=live.placement_id if cluster is not None else None,
            placement_values={"state": PlacementState.CANCELLED, "outcome": reason, "ended_at": utcnow()}
            if cluster is not None
            else {},
            event=("Stopped", f"{cluster}: {reason}" if cluster else reason, None),
            cluster=cluster,
        )
        (ok,) = await svc.retry_sql("stop", lambda: svc.repo.apply([t]))
        if not ok:
            raise ControlError(409, f"{live.key} changed while stopping it; look at it again and retry")
        live.stopped = True
        svc.queue.remove(live.id)
        if cluster is not None:
            old = _detached_copy(live)
            live.generation += 1
            live.state = WorkloadState.PENDING
            svc.live.set_remote(live, None, None)
            live.placement_id = None
            live.reported.clear()
            live.cluster_queue = ""
            if cluster in svc.capacities:
                svc.capacities[cluster].release(live.uid)
            await delete_remote(svc, old, cluster, svc.adapter(old))
        svc.emit(live, "Normal", "Stopped", f"{reason}" + (f"; its copy on {cluster} was deleted" if cluster else ""))
        await svc.report(live, WorkloadState.PENDING, reason, None)
        svc.wake_placement()
        return True

    async def _resume(self, live: Live) -> bool:
        svc = self.rt
        if live.terminal:
            raise ControlError(409, f"{live.key} has finished ({live.state}); resubmit it to run it again")
        if not live.stopped:
            return False
        t = Transition(
            live.id, live.generation, {"stopped": False, "reason": "resumed by an operator"},
            event=("Resumed", "resumed by an operator", None),
        )  # fmt: skip
        (ok,) = await svc.retry_sql("resume", lambda: svc.repo.apply([t]))
        if not ok:
            raise ControlError(409, f"{live.key} changed while resuming it; look at it again and retry")
        live.stopped = False
        svc.emit(live, "Normal", "Resumed", "resumed by an operator; it may be placed again")
        if live.state == WorkloadState.PENDING and not live.problem:
            svc.queue.push(live.pending())
        svc.wake_placement()
        return True

    async def _cancel(self, live: Live) -> bool:
        svc = self.rt
        if live.state == WorkloadState.CANCELLED:
            return False
        if live.terminal:
            raise ControlError(409, f"{live.key} has finished ({live.state}); there is nothing to cancel")
        reason = "cancelled by an operator"
        cluster = live.cluster
        t = Transition(
            live.id,
            live.generation,
            {"state": WorkloadState.CANCELLED, "finished_at": utcnow(), "reason": reason,
             "generation": live.generation + 1},
            placement_id=live.placement_id,
            placement_values={"state": PlacementState.CANCELLED, "outcome": reason, "ended_at": utcnow()}
            if live.placement_id is not None
            else {},
            event=("Cancelled", reason, None),
            cluster=cluster,
        )  # fmt: skip
        (ok,) = await svc.retry_sql("cancel", lambda: svc.repo.apply([t]))
        if not ok:
            raise ControlError(409, f"{live.key} changed while cancelling it; look at it again and retry")
        svc.queue.remove(live.id)
        old = _detached_copy(live)
        live.generation += 1
        live.state = WorkloadState.CANCELLED
        if cluster is not None:
            if cluster in svc.capacities:
                svc.capacities[cluster].release(live.uid)
            await delete_remote(svc, old, cluster, svc.adapter(old))
        svc.emit(live, "Warning", "Cancelled", reason + (f"; its copy on {cluster} was deleted" if cluster else ""))
        await svc.report(live, WorkloadState.CANCELLED, reason, None)
        self.finish.after_terminal(live)
        return True

    # -- helpers --------------------------------------------------------------------------------------------

    async def _find(self, namespace: str, name: str) -> Live:
        candidates = [w for w in self.rt.live.by_id.values() if w.namespace == namespace and w.name == name]
        if candidates:
            return max(candidates, key=lambda w: (not w.terminal, w.id))
        row = await self.rt.repo.get_workload(namespace, name)
        if row is None:
            raise ControlError(404, f"no workload {namespace}/{name}; list them with dispatcher workloads")
        raise ControlError(409, f"{namespace}/{name} has finished ({row.state}) and is no longer held")

    async def _wait_idle(self, live: Live) -> None:
        """A step in flight (a copy being created or deleted) finishes first: a control never interleaves."""
        deadline = time.monotonic() + BUSY_WAIT
        delay = 0.05
        while live.busy:
            if time.monotonic() > deadline:
                raise ControlError(
                    409, f"{live.key} is busy (its copy is being created or deleted); try again in a moment"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


def _detached_copy(live: Live) -> Live:
    """A snapshot of ``live`` as its copy knows it (generation, remote uid), for deleting that copy after the
    workload has moved on in memory."""
    from dataclasses import replace

    return replace(live, reported={})


class ClusterControls:
    """cordon / uncordon / drain of one worker."""

    def __init__(self, rt: Runtime, requeue: Requeue) -> None:
        self.rt = rt
        self.requeue = requeue

    async def cordon(self, name: str, cordoned: bool = True) -> None:
        """Cordon: no new placements on ``name`` (kept in SQL, so it survives restarts). Uncordon undoes it."""
        rt = self.rt
        cap = rt.capacities.get(name)
        if cap is None:
            raise KeyError(name)
        await rt.retry("cordon", lambda: rt.repo.update_cluster(name, cordoned=cordoned))
        cap.cordoned = cordoned
        cap.touch()
        if not cordoned:
            rt.wake_placement()

    async def drain(self, name: str, running: bool = False) -> int:
        """Cordon ``name`` and move its workloads elsewhere: those not yet admitted, and with ``running`` also
        admitted and running ones (their copies are deleted first). Returns how many were moved."""
        await self.cordon(name, True)
        states = {WorkloadState.PLACED}
        if running:
            states |= {WorkloadState.ADMITTED, WorkloadState.RUNNING}
        moving = [
            live
            for live in self.rt.live.by_id.values()
            if live.cluster == name and live.state in states and not live.busy and not live.deleted
        ]
        for live in moving:
            live.busy = True
        await asyncio.gather(
            *(self.requeue.move_elsewhere(live, f"{name} was drained", exclude=False, drained=True) for live in moving)
        )
        return len(moving)
