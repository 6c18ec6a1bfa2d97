"""Failover and fencing: what happens when a worker is lost, and when it comes back.

**Lost** (no answer for ``policy.lostTimeout``; see :mod:`.health`): every workload placed there and not
known to have finished goes back to Pending with its generation raised, in one SQL transaction, and is
placed elsewhere. The manager object gets a Warning Event and the placement history keeps the lost
attempt (state ``Lost``). A workload annotated ``kueue-dispatcher.io/no-failover: "true"`` is failed
with reason ``WorkerLost`` instead: it must never run twice, and a lost worker may still be running it.
A workload whose finish was seen before the loss is left finished.

**Fencing**: a Lost worker that answers again is ``Recovering``: it gets no new placements and its
status is not used until every copy there from an older generation (or of a workload it no longer
owns) has been deleted — listed fresh from the worker, not from a cache that may predate the loss.
Only then is it Ready. Status from a stale generation never reaches the manager anyway: the status
sync only reads copies whose generation label matches the workload's current generation.

**Exactly once across a partition** needs a fencing agent in the worker (``fencing: agent``; see
:mod:`dispatcher.agent` and :mod:`dispatcher.worker_lease`): a Lost worker's workloads are placed elsewhere only
once ``leaseDuration + grace`` has passed since the last fencing-Lease renewal sent there, by which time the agent
has stopped them. If the worker answers again before that, nothing fails over.

What is guaranteed: no workload is lost; a workload is never placed on two workers by the dispatcher
at the same generation; stale copies are deleted before their worker is trusted again; with a running fencing
agent, a copy on a partitioned worker has stopped before its workload starts elsewhere. What is not, with
``fencing: none`` (or an agent that is down): a *partitioned* worker (alive, unreachable) keeps running the
copies it has, so a workload failed over from it may run twice until the partition heals — the same as
MultiKueue after its worker-lost timeout. Use ``no-failover`` for workloads that must run at most once there.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import labels as L
from .copies import delete_copy
from .health import HealthState
from .kube.client import KubeError
from .store.models import AuditEvent, PlacementState, WorkloadState, utcnow

if TYPE_CHECKING:
    from .finish import Finish
    from .live import Live
    from .requeue import Requeue
    from .runtime import Runtime

__all__ = ["Failover"]

log = logging.getLogger("dispatcher.failover")

#: States in which a workload's copy may exist on its worker.
PLACED_STATES = (WorkloadState.PLACING, WorkloadState.PLACED, WorkloadState.ADMITTED, WorkloadState.RUNNING)


class Failover:
    def __init__(self, rt: Runtime, requeue: Requeue, finish: Finish, *, counts_from: Failover | None = None) -> None:
        self.rt = rt
        self.requeue = requeue
        self.finish = finish
        self._locks: dict[str, asyncio.Lock] = {}
        self.failovers: int = counts_from.failovers if counts_from else 0
        self.fenced: int = counts_from.fenced if counts_from else 0
        #: worker -> monotonic time it was declared Lost (for drills and metrics).
        self.lost_at: dict[str, float] = dict(counts_from.lost_at) if counts_from else {}

    # -- what a worker's health means -----------------------------------------------------------------------

    def health_changed(self, name: str, old: str, new: str, *, acting: bool) -> None:
        """A worker's health changed (:mod:`.health`): its capacity view and fencing Lease follow at once; the
        acting replica records it and acts — Lost: fail over; Recovering: fence, then trust it again."""
        rt = self.rt
        cap = rt.capacities.get(name)
        if cap is None:
            return
        cap.health = new
        machine = rt.health.machines.get(name) if rt.health is not None else None
        cap.health_reason = machine.reason if machine is not None and new == HealthState.NOT_READY else ""
        cap.touch()
        # The fencing Lease: no longer renewed once the worker is Lost (its agent fences, and failover counts from
        # the last renewal sent); renewed again as soon as it answers.
        if rt.leases is not None:
            if new == HealthState.LOST:
                rt.leases.hold(name)
            elif old == HealthState.LOST or new in (HealthState.RECOVERING, HealthState.READY):
                rt.leases.release(name)
        if not acting:
            return  # a standby only keeps the state; the leader records it and acts (see resume_health)
        self.record_health(name, new)
        if new == HealthState.LOST:
            rt.spawn(self.worker_lost_step(name))
        elif new == HealthState.RECOVERING:
            rt.spawn(self.recover_worker(name))
        elif new == HealthState.READY:
            rt.wake_placement()

    def resume_health(self) -> None:
        """Worker health seen while standing by: record it, and fail over or fence what needs it now."""
        if self.rt.health is None:
            return
        for name, machine in self.rt.health.machines.items():
            self.record_health(name, machine.state)
            if machine.state == HealthState.LOST:
                self.rt.spawn(self.worker_lost_step(name))
            elif machine.state == HealthState.RECOVERING:
                self.rt.spawn(self.recover_worker(name))

    def record_health(self, name: str, state: str) -> None:
        rt = self.rt
        machine = rt.health.machines.get(name) if rt.health is not None else None
        reason = machine.reason if machine is not None and machine.state == state else ""
        rt.spawn(rt.retry("record health", lambda: rt.repo.record_health(name, state, reason or "")))

    async def worker_lost_step(self, name: str) -> None:
        await self.worker_lost(name)

    async def recover_worker(self, name: str) -> None:
        """A Lost worker answers again: fence it (delete stale copies), then trust it."""
        rt = self.rt
        if not await fence_until_done(self, name, rt.stop_event):
            return
        machine = rt.health.machines.get(name) if rt.health is not None else None
        if machine is None or machine.state != HealthState.RECOVERING:
            return  # lost again meanwhile
        machine.recovered(time.monotonic())
        cap = rt.capacities[name]
        cap.health = HealthState.READY
        cap.touch()
        self.record_health(name, HealthState.READY)
        for live in list(rt.live.by_id.values()):
            if live.cluster == name:
                rt.mark_dirty(live.id)
        rt.wake_placement()

    # -- failover ---------------------------------------------------------------------------------------------

    def _lock(self, worker: str) -> asyncio.Lock:
        return self._locks.setdefault(worker, asyncio.Lock())

    def affected(self, worker: str) -> list[Live]:
        return [
            live
            for live in self.rt.live.by_id.values()
            if live.cluster == worker and live.state in PLACED_STATES and not live.deleted
        ]

    async def worker_lost(self, worker: str) -> int:
        """Move every open workload off ``worker`` (one transaction), once its fencing agent (if it has one) has
        stopped the copies there. Returns how many moved or failed."""
        svc = self.rt
        self.lost_at[worker] = time.monotonic()
        fencing = await self._await_fencing(worker)
        if fencing is None:
            return 0
        async with self._lock(worker):
            affected = self.affected(worker)
            if not affected:
                return 0
            move_reason = f"worker {worker} was lost; placing it again ({fencing})"
            # The generation moves for no-failover workloads too: the copy left on the lost worker is stale, so
            # it is fenced (deleted) when the worker returns and its status never reaches the manager.
            fail_reason = (
                f"WorkerLost: worker {worker} was lost; not placed again because of "
                f"{L.NO_FAILOVER}=true (it may still be running there)"
            )
            moves = [(lv.id, lv.generation, lv.placement_id) for lv in affected if not lv.no_failover]
            failures = [(lv.id, lv.generation, lv.placement_id) for lv in affected if lv.no_failover]
            moved_ids, failed_ids = await svc.retry_sql(
                "fail over",
                functools.partial(
                    svc.repo.fail_over,
                    worker,
                    moves,
                    failures,
                    from_states=PLACED_STATES,
                    move_reason=move_reason,
                    fail_reason=fail_reason,
                ),
            )
            cap = svc.capacities.get(worker)
            moved = 0
            for live in affected:
                if live.id not in moved_ids and live.id not in failed_ids:
                    continue  # changed meanwhile (finished, deleted): its own step owns it
                moved += 1
                svc.metrics.placement_ended(worker, PlacementState.LOST)
                if cap is not None:
                    cap.release(live.uid)
                if live.id in failed_ids:
                    live.generation += 1
                    live.state = WorkloadState.FAILED
                    live.finished_at = time.monotonic()
                    svc.emit(live, "Warning", "WorkerLost", fail_reason)
                    self.finish.after_terminal(live)
                    svc.spawn(svc.report(live, WorkloadState.FAILED, fail_reason, None), live)
                    continue
                self.failovers += 1
                svc.metrics.failover(worker)
                svc.emit(live, "Warning", "FailedOver", f"{move_reason} (generation {live.generation + 1})")
                self.requeue.requeue(live, live.generation + 1)
            log.warning("worker %s lost: %d workloads moved or failed", worker, moved)
            svc.wake_placement()
            return moved

    async def _await_fencing(self, worker: str) -> str | None:
        """With a fencing agent: wait until it has stopped the copies on ``worker`` (the last fencing-Lease renewal
        sent there plus the lease duration and the grace). Returns what the move's reason says of the copies left
        there, or None when the worker answered again meanwhile (nothing to fail over)."""
        svc = self.rt
        leases = svc.leases
        if leases is None or not leases.fenced(worker):
            return "fencing: none, so its copies may still run there: at-least-once"
        up = leases.agent_up(worker)
        told = False
        # Again after each wait: the worker may have answered (renewals resumed) and been lost again meanwhile.
        while (wait := leases.safe_at(worker) - leases.clock()) > 0:
            if told:
                await asyncio.sleep(wait)
                continue
            told = True
            affected = self.affected(worker)
            log.warning(
                "worker %s lost: waiting %.1fs for its fencing agent to stop the %d copies there before placing them "
                "elsewhere",
                worker,
                wait,
                len(affected),
            )
            for live in affected:
                svc.emit(
                    live,
                    "Normal",
                    "WaitingForFencing",
                    f"worker {worker} was lost; placing it elsewhere in {wait:.0f}s, once the fencing agent there has "
                    "stopped its copy (the fencing Lease expires)",
                )
            await asyncio.sleep(wait)
        if svc.health is None or svc.health.state(worker) != HealthState.LOST:
            log.warning("worker %s answered again before its copies were fenced: nothing failed over", worker)
            return None
        if up is False:
            return (
                "its fencing agent was not running when it was lost, so its copies may still run there: at-least-once"
            )
        if up is None:
            return "no heartbeat of its fencing agent was ever seen, so its copies may still run there: at-least-once"
        return "its fencing agent has stopped the copies there"

    async def fence(self, worker: str) -> int:
        """Delete every copy on ``worker`` that no current placement owns; then trust the worker again."""
        svc = self.rt
        client = svc.clients.get(worker)
        if client is None:
            return 0
        async with self._lock(worker):
            deleted = 0
            for adapter in svc.adapters.values():
                items, _ = await client.list_all(
                    adapter.resource, None, label_selector=f"{L.ORIGIN}={svc.config.origin}"
                )
                for obj in stale_copies(svc, worker, items):
                    meta = obj.get("metadata") or {}
                    await delete_copy(
                        client, adapter.resource, meta.get("namespace", ""), meta.get("name", ""), meta.get("uid")
                    )
                    deleted += 1
                    labels = meta.get("labels") or {}
                    live = svc.live.by_uid.get(labels.get(L.WORKLOAD_UID, ""))
                    event = AuditEvent(
                        at=utcnow(),
                        workload_id=live.id if live else None,
                        cluster=worker,
                        type="Fenced",
                        message=(
                            f"deleted stale copy {meta.get('namespace')}/{meta.get('name')} "
                            f"(generation {labels.get(L.GENERATION)}) when {worker} came back"
                        ),
                    )
                    await svc.retry_sql("record fencing", functools.partial(svc.repo.record, [event]))
            self.fenced += deleted
            svc.metrics.fenced(worker, deleted)
            log.warning("worker %s is back: %d stale copies deleted before trusting it", worker, deleted)
            return deleted


def stale_copies(svc: Runtime, worker: str, items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies with our origin on ``worker`` that the current placement of their workload does not own."""
    out = []
    for obj in items:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        live = svc.live.by_uid.get(str(labels.get(L.WORKLOAD_UID, "")))
        if (
            live is not None
            and not live.cleaned
            and live.cluster == worker
            and str(labels.get(L.GENERATION)) == str(live.generation)
        ):
            continue
        out.append(obj)
    return out


async def fence_until_done(failover: Failover, worker: str, stopping: asyncio.Event) -> bool:
    """Retry fencing while the worker keeps failing calls (it may flap); False if we are stopping."""
    delay = 0.5
    while not stopping.is_set():
        try:
            await failover.fence(worker)
            return True
        except KubeError as exc:
            log.info("fencing %s failed (%s); retrying", worker, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)
    return False


__all__ += ["HealthState", "fence_until_done", "stale_copies"]
