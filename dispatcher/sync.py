"""The status sync step: what a worker's copy is doing, brought back to SQL and to the manager object.

Level-triggered: an event on a remote Job or Workload only marks its workload dirty (:meth:`.runtime.Runtime.
mark_dirty`); a batch reads the newest cached objects and moves each workload to the state they show (Placed ->
Admitted -> Running -> Succeeded/Failed), records the batch in SQL in one transaction (guarded by generation),
then queues the manager writes (:class:`.report.ManagerReports`: never awaited here, so one slow manager write
holds back no other workload). What the objects mean is :mod:`.status`'s; what this step acts on besides:

- a copy its worker's Kueue evicted (preempted, a stopped queue, pods not ready) is placed again at once, as
  MultiKueue redoes admission, not on that worker this round;
- a copy the worker's fencing agent stopped (its ``kueue-dispatcher.io/fenced`` annotation) is placed again;
- a copy missing past its grace is looked up on the worker before it is taken for gone, then placed again;
- a priority-class change on the manager object is followed by the copy.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from . import labels as L
from .adapters.base import Adapter
from .copies import is_our_copy
from .finish import Finish
from .kube.client import KubeError
from .live import Live
from .race import Races
from .requeue import Requeue
from .runtime import Runtime
from .status import ORDER, PLACEMENT_STATE, RemoteSnapshot, condition, is_true, observe
from .store.models import WorkloadState, utcnow
from .store.repo import Transition

__all__ = ["DEACTIVATED_WAITS", "MISSING_GRACE", "UNSEEN_GRACE", "StatusSync"]

log = logging.getLogger("dispatcher.sync")
Obj = dict[str, Any]

#: How long a copy may be missing from the worker's cache after we created it before we ask the worker, once the
#: worker's informer has shown it; a copy it never showed gets ``UNSEEN_GRACE`` (under load the watch can lag).
#: Either way the worker is asked (a GET by name) before the copy is taken for gone: a lagging cache never makes
#: the dispatcher delete a live copy and start it again elsewhere.
MISSING_GRACE = 5.0
UNSEEN_GRACE = 15.0
#: How many 1 s looks an eviction by deactivation on a worker with a fencing agent waits for the agent's annotation.
DEACTIVATED_WAITS = 5


class StatusSync:
    def __init__(self, rt: Runtime, requeue: Requeue, finish: Finish, races: Races) -> None:
        self.rt = rt
        self.requeue = requeue
        self.finish = finish
        self.races = races
        rt.on_timer["resync"] = lambda live: rt.mark_dirty(live.id)

    # -- what wakes a workload up: its copy, its worker's Workload, its manager object ----------------------------

    def on_remote_job(self, cluster: str, kind: str, obj: Obj) -> None:
        """An event on one of our copies (the worker's informer)."""
        live = self.rt.live.by_uid.get(((obj.get("metadata") or {}).get("labels") or {}).get(L.WORKLOAD_UID, ""))
        if live is not None and live.cluster == cluster:
            self.rt.mark_dirty(live.id)

    def on_remote_workload(self, cluster: str, kind: str, obj: Obj) -> None:
        """An event on the worker's Kueue Workload of one of our copies (a race's copies are the race's)."""
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            if self.races.by_remote and self.races.on_remote_workload(cluster, str(ref.get("uid"))):
                continue
            live = self.rt.live.by_remote.get((cluster, str(ref.get("uid"))))
            if live is not None:
                self.rt.mark_dirty(live.id)

    def on_manager_changed(self, uid: str, _obj: Obj) -> None:
        """The manager object changed (its priority class, a user's edit)."""
        live = self.rt.live.by_uid.get(uid)
        if live is not None and not live.terminal:
            self.rt.mark_dirty(live.id)

    async def loop(self) -> None:
        """A batch as soon as a workload is marked, then at most one per ``policy.status_sync_period``: at a steady
        few Jobs a second each change came alone, so each paid a transaction, a batch and a manager write of its
        own (a copy admitted, then running 50 ms later: two of each). Gathered over the period they share them.
        A burst is unchanged: its batches take longer than the period anyway."""
        period = self.rt.policy.status_sync_period
        last = -period
        while True:
            await self.rt.dirty_event.wait()
            wait = last + period - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            last = time.monotonic()
            self.rt.dirty_event.clear()
            batch, self.rt.dirty = self.rt.dirty, set()
            try:
                reporting = await self._sync_batch(batch)
                # Those with a manager write queued count as synced once it is written (see ManagerReports).
                self.rt.metrics.sync_finished(batch - reporting)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("status sync failed; retrying")
                self.rt.dirty |= batch
                await asyncio.sleep(1.0)
                self.rt.dirty_event.set()

    async def _sync_batch(self, ids: set[int]) -> set[int]:
        """Observe, record in SQL (one transaction), and queue the manager writes (never awaited here: a slow
        manager write holds back no other workload). Returns the ids whose manager write was queued."""
        transitions: list[tuple[Live, Transition, str, str, Obj | None]] = []
        reporting: set[int] = set()
        for wid in ids:
            live = self.rt.live.by_id.get(wid)
            if live is None or live.busy or live.deleted or not live.cluster:
                continue
            if live.terminal:
                if not live.cleaned and self._final_status(live):
                    reporting.add(live.id)
                continue
            if live.state not in ORDER:
                continue
            item = self.observe_live(live)
            if item is not None:
                transitions.append(item)
        if not transitions:
            return reporting
        results = await self.rt.retry("status sync", lambda: self.rt.repo.apply([t for _, t, _, _, _ in transitions]))
        for (live, _t, state, message, remote), ok in zip(transitions, results, strict=True):
            if not ok:
                continue
            live.reported["remote"] = (remote or {}).get("status")
            self._applied(live, state, message)
            self.rt.reports.submit(live, state, message, remote)
            reporting.add(live.id)
        return reporting

    def _final_status(self, live: Live) -> bool:
        """A finished copy's status can still change (an operator counting its pods down after Succeeded): the
        manager keeps following it until the copy is cleaned up. State and SQL stay as they are."""
        view = self.rt.views.get(live.cluster or "")
        if view is None:
            return False
        remote = view.remote_jobs(self.rt.adapter(live).resource.plural).get((live.namespace, live.name))
        if remote is None or not is_our_copy(remote, self.rt.config.origin, live.uid, live.generation):
            return False
        if live.reported.get("remote") == remote.get("status"):
            return False
        live.reported["remote"] = remote.get("status")
        message = str((live.reported.get("annotations") or {}).get(L.MESSAGE, ""))
        self.rt.reports.submit(live, live.state, message, remote)
        return True

    def observe_live(self, live: Live) -> tuple[Live, Transition, str, str, Obj | None] | None:
        view = self.rt.views[live.cluster or ""]
        adapter = self.rt.adapter(live)
        remote = view.remote_jobs(adapter.resource.plural).get((live.namespace, live.name))
        if remote is not None and not is_our_copy(remote, self.rt.config.origin, live.uid, live.generation):
            remote = None
        if remote is None:
            if view.jobs_synced():
                grace = MISSING_GRACE if live.remote_seen else UNSEEN_GRACE
                if time.monotonic() - live.placed_at > grace:
                    live.busy = True
                    self.rt.spawn(self._confirm_missing(live), live)
                else:
                    # Nothing else may wake this workload up again (its copy is gone): look once the grace is over.
                    self.rt.timers.add(live.placed_at + grace + 0.1, "resync", live.id, live.generation)
            return None
        live.remote_seen = True
        fenced = ((remote.get("metadata") or {}).get("annotations") or {}).get(L.FENCED)
        if fenced and not adapter.finished(remote):
            # The worker's fencing agent stopped this copy (our fencing Lease expired there: a partition, or this
            # dispatcher was down). Only the dispatcher resumes it: placed again, on that worker too if it fits.
            live.busy = True
            why = f"stopped on {live.cluster} by its fencing agent: {fenced}"
            self.rt.emit(live, "Warning", "FencedByAgent", f"{why}; placing it again")
            self.rt.spawn(self.requeue.move_elsewhere(live, why, exclude=False, fenced=True), live)
            return None
        remote_uid = (remote.get("metadata") or {}).get("uid")
        if remote_uid and remote_uid != live.remote_uid:
            self.rt.live.set_remote(live, live.cluster, remote_uid)
        self._follow_priority(live, adapter, remote)
        snap = RemoteSnapshot(remote, view.workloads_by_owner.get(remote_uid or ""))
        obs = observe(adapter, snap)
        if obs.cluster_queue:
            live.cluster_queue = obs.cluster_queue
        evicted = condition(snap.workload, "Evicted")
        self._count_eviction(live, snap.workload, evicted)
        if (
            evicted is not None
            and evicted.get("status") == "True"
            and not is_true(snap.workload, "QuotaReserved")
            and ORDER[obs.state] < 4
        ):
            if (
                str(evicted.get("reason", "")).startswith("Deactivated")
                and self.rt.leases is not None
                and self.rt.leases.fenced(live.cluster or "")
                and live.reported.get("deactivated", 0) < DEACTIVATED_WAITS
            ):
                # Deactivated on a worker with a fencing agent: the agent annotates the copy before it deactivates
                # the Workload, but the two reach us by different watches; give the copy's a moment, so that the
                # workload is placed again as fenced (on that worker too), not as evicted.
                live.reported["deactivated"] = live.reported.get("deactivated", 0) + 1
                self.rt.timers.add(time.monotonic() + 1.0, "resync", live.id, live.generation)
                return None
            # The worker's Kueue evicted the copy (preempted, its queue stopped, pods not ready...): as MultiKueue
            # redoes admission on an eviction in a worker, the workload is placed again now, not at a timeout.
            # Not on that worker this time: the eviction event can arrive before its cause (the preemptor's
            # admission) reaches the worker's view, which would put the copy straight back where it cannot run.
            live.busy = True
            cause = f"{evicted.get('reason', 'Evicted')}: {evicted.get('message', '')}"
            why = f"evicted on {live.cluster} by its Kueue ({cause})"
            self.rt.emit(live, "Warning", "Evicted", f"{why}; placing it again")
            self.rt.spawn(self.requeue.move_elsewhere(live, why, exclude=True), live)
            return None
        cap = self.rt.capacities[live.cluster or ""]
        freed = False
        if obs.state in (WorkloadState.ADMITTED, WorkloadState.RUNNING) or ORDER[obs.state] >= 4:
            freed = cap.settle(live.uid)
        if obs.state == WorkloadState.RUNNING or ORDER[obs.state] >= 4:
            freed = cap.release(live.uid) is not None or freed
        if freed:
            # The worker's Kueue took over the quota and this placement is no longer in flight: workloads
            # parked on maxInFlight or on the reservation may fit now. The informer event that brought the
            # admission woke placement before this settled, so without this wake-up they would wait for the
            # next unrelated event (seen: 366 jobs parked for good after a burst).
            self.rt.wake_placement()
        status_changed = live.reported.get("remote") != remote.get("status")
        if obs.state == live.state and not status_changed:
            return None
        now = utcnow()
        values: dict[str, Any] = {"state": obs.state, "reason": obs.reason[:2000]}
        pvalues: dict[str, Any] = {"state": PLACEMENT_STATE[obs.state]}
        event: tuple[str, str, dict[str, Any] | None] | None = None
        if obs.state != live.state:
            event = (obs.state, f"{live.cluster}: {obs.reason}", None)
            before, after = ORDER[live.state], ORDER[obs.state]
            if before < 2 <= after:  # admitted now (perhaps seen only once already running or done)
                values["admitted_at"] = now
                pvalues["admitted_at"] = now
            if before < 3 <= after:
                values["started_at"] = now
            if after >= 4:
                values["finished_at"] = now
                values["remote_status"] = remote.get("status")
                pvalues["finished_at"] = now
                pvalues["ended_at"] = now
                pvalues["outcome"] = obs.reason[:2000]
        elif obs.state == live.state:
            values = {}
        t = Transition(
            live.id,
            live.generation,
            values,
            from_states=(live.state,),
            placement_id=live.placement_id,
            placement_values=pvalues if values else {},
            event=event,
            cluster=live.cluster,
        )
        return live, t, obs.state, obs.reason, remote

    def _count_eviction(self, live: Live, workload: Obj | None, evicted: Obj | None) -> None:
        """Count an eviction by the worker's Kueue once (one Evicted condition, however often it is seen)."""
        if evicted is None or evicted.get("status") != "True":
            return
        mark = (live.generation, evicted.get("lastTransitionTime"), evicted.get("reason"))
        if live.reported.get("evicted") == mark:
            return
        live.reported["evicted"] = mark
        preempted = condition(workload, "Preempted")
        self.rt.metrics.evicted_on_worker(
            live.cluster or "",
            live.cluster_queue,
            str(evicted.get("reason") or "Evicted"),
            live.priority_class or "",
            str(preempted.get("reason") or "Preempted") if preempted and preempted.get("status") == "True" else None,
        )

    def _follow_priority(self, live: Live, adapter: Adapter, remote: Obj) -> None:
        """The copy follows a change of the manager object's ``kueue.x-k8s.io/priority-class`` (Kueue lets it
        change on a running workload and re-prioritises the worker's Workload with it)."""
        local = self.rt.intake.objects.get(live.uid) if self.rt.intake is not None else None
        if local is None:
            return
        want = adapter.priority_class(local)
        if want == adapter.priority_class(remote) or live.reported.get("priority_class", "?") == want:
            return
        live.reported["priority_class"] = want
        self.rt.spawn(self._set_copy_priority(live, adapter, want, live.cluster or "", live.generation))

    async def _set_copy_priority(
        self, live: Live, adapter: Adapter, want: str | None, cluster: str, generation: int
    ) -> None:
        patch = {"metadata": {"labels": {L.PRIORITY_CLASS: want}}}
        try:
            await self.rt.clients[cluster].patch(adapter.resource, live.namespace, live.name, patch)
        except KubeError as exc:
            if exc.not_found or live.generation != generation:
                return
            live.reported.pop("priority_class", None)
            if exc.transient:
                self.rt.timers.add(time.monotonic() + 2.0, "resync", live.id, live.generation)
                return
            self.rt.emit(
                live,
                "Warning",
                "PriorityNotFollowed",
                f"the copy on {cluster} refused priority class {want or '(none)'}: {exc.message}",
            )
            return
        priority = self.rt.priorities.priority(want, None) if want else live.priority
        live.priority = priority
        t = Transition(live.id, generation, {"priority": priority, "priority_class": want})
        await self.rt.retry("record the priority class", lambda: self.rt.repo.apply([t]))
        self.rt.emit(
            live, "Normal", "PriorityChanged", f"priority class {want or '(none)'} set on the copy on {cluster}"
        )

    async def _confirm_missing(self, live: Live) -> None:
        """A copy missing from the worker's cache past its grace: ask the worker. Gone (or another object by
        that name): placed again, with a Warning saying why. There after all (the cache lags): wait and look again."""
        cluster = live.cluster or ""
        adapter = self.rt.adapter(live)
        try:
            obj = await self.rt.clients[cluster].get(adapter.resource, live.namespace, live.name)
        except KubeError as exc:
            log.info("checking the missing copy of %s on %s failed (%s); looking again later", live.key, cluster, exc)
            obj = {} if not exc.not_found else None
        if obj is not None and (obj == {} or is_our_copy(obj, self.rt.config.origin, live.uid, live.generation)):
            live.busy = False
            self.rt.timers.add(time.monotonic() + MISSING_GRACE, "resync", live.id, live.generation)
            return
        reason = f"the copy on {cluster} disappeared"
        self.rt.emit(live, "Warning", "CopyDisappeared", f"{reason} (deleted on the worker?); placing the Job again")
        await self.requeue.move_elsewhere(live, reason, exclude=False)

    def _applied(self, live: Live, state: str, message: str) -> None:
        if state == live.state:
            return
        old = live.state
        live.state = state
        if ORDER.get(old, 0) < ORDER[WorkloadState.ADMITTED] <= ORDER.get(state, 0):
            self.rt.metrics.admitted(
                live.cluster or "",
                live.cluster_queue,
                live.namespace,
                live.queue,
                live.priority_class or "",
                time.time() - live.created,
            )
        if state == WorkloadState.ADMITTED:
            self.rt.metrics.observe_placed_to_admitted(time.monotonic() - live.placed_at)
            self.rt.emit(live, "Normal", "Admitted", f"admitted on {live.cluster}: {message}")
        elif state == WorkloadState.PLACED and old != WorkloadState.PLACED:
            self.rt.emit(live, "Warning", "Evicted", f"on {live.cluster}: {message}")
            self.rt.arm_admission_timer(live)
        elif state == WorkloadState.SUCCEEDED:
            self.rt.emit(live, "Normal", "Finished", f"succeeded on {live.cluster}")
        elif state == WorkloadState.FAILED:
            self.rt.emit(live, "Warning", "Failed", f"failed on {live.cluster}: {message}")
        if live.terminal:
            live.finished_at = time.monotonic()
            self.finish.schedule_retention(live)
            self.rt.wake_placement()
