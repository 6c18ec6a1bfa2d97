"""The simulated Kueue's scheduler: one cycle over the heads of the ClusterQueues, as ``Scheduler.schedule`` runs it.

Follows Kueue v0.17 ``pkg/scheduler/scheduler.go`` with classical (non fair-sharing) admission:

1. the head of every active ClusterQueue is taken (a blocked StrictFIFO head waits for a change);
2. ``nominate``: a head whose namespace the ClusterQueue does not select is inadmissible; every other head gets
   its flavors, preemption targets and possibly reduced counts (:func:`kubesim.kueue.admission.decide`);
3. the nominated entries are taken in the classical iterator's order: lower borrowing level first, then higher
   priority, then the older queue-order timestamp; with fair sharing on, one at a time by the fair-sharing
   tournament (:func:`kubesim.kueue.fairsharing.tournament`), shares recomputed after each admission;
4. per entry: ``NoFit`` is left pending; ``Preempt`` without targets reserves, unless the ClusterQueue can always
   reclaim, the quota it could get (``resourcesToReserve``) so that nothing else in the Cohort takes it in this
   cycle; overlapping targets or a Workload that no longer fits once the Workloads preempted in this cycle are
   gone is skipped; ``Preempt`` with targets issues the preemptions (victims ``Evicted`` and ``Preempted``) and
   holds the quota for the rest of the cycle; ``Fit`` is admitted (``QuotaReserved`` and ``Admitted`` in one write);
5. heads that were not admitted go back to their queues (``requeueAndUpdate``) with ``QuotaReserved=False`` and
   the reason in its message.

Usage held for the rest of a cycle (reservations and preemptors) is added to the quota tree and taken out again
when the cycle ends; an admission is counted at once through the Workload's own update (with TAS, its topology
assignment takes its domains in the TAS state at the same time, and ``fits`` checks those domains too).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import ApiError
from ..kueue.admission import decide
from ..kueue.fairsharing import Contender, tournament
from ..kueue.flavors import Assignment, Mode
from ..kueue.preemption import Target
from ..kueue.queues import queue_order_timestamp, timestamp
from ..kueue.requests import FlavorResource, PodSet, quantity_string, workload_pod_sets
from ..kueue.tasstep import tas_views
from ..patch import clone
from .base import record_event
from .kueue_cache import WL, KueueBase, Obj, WlKey, labels_of, priority_of
from .kueue_model import (
    JOB_UID_LABEL,
    UNADMITTED_WORKLOADS_OBSERVABILITY,
    condition,
    has_quota_reservation,
    is_evicted,
    now_rfc3339,
    preemption_message,
    set_evicted_condition,
    set_preempted_condition,
    set_quota_reservation,
    unadmitted_reason,
    unset_quota_reservation,
)

__all__ = ["SchedulerMixin"]

log = logging.getLogger("kubesim.kueue")

#: Longest stretch one scheduling reconcile runs before letting other tasks in (it continues right after).
SCHEDULE_SLICE = 0.05


@dataclass
class _Entry:
    """One head in a scheduling cycle (Kueue's ``entry``)."""

    cq: str
    key: WlKey
    obj: Obj
    priority: int
    ts: float
    pod_sets: list[PodSet] = field(default_factory=list)
    assignment: Assignment | None = None
    targets: list[Target] = field(default_factory=list)
    message: str = ""
    reason: str = ""
    admitted: bool = False
    #: Skipped after nomination, or a flavor search that stopped early: back in the queue at once.
    retry: bool = False


class SchedulerMixin(KueueBase):
    """The scheduler part of the Kueue controller (see the module docstring)."""

    def _schedule(self) -> None:
        start = time.monotonic()
        while self._cycle():
            if time.monotonic() - start > SCHEDULE_SLICE:
                self.enqueue(("schedule",))
                return

    def _pod_sets(self, key: WlKey, wl: Obj) -> list[PodSet]:
        """The Workload's pod sets in Kueue units (transformations applied, reclaimable pods deducted)."""
        status = wl.get("status") or {}
        ident = (
            wl["metadata"].get("uid"),
            wl["metadata"].get("generation"),
            tuple((r.get("name"), r.get("count")) for r in status.get("reclaimablePods") or ()),
            self._config_version,
        )
        cached = self._ps_cache.get(key)
        if cached is not None and cached[0] == ident:
            return cached[1]
        out = workload_pod_sets(wl, self._config.transformations, self._config.excluded_prefixes)
        self._ps_cache[key] = (ident, out)
        return out

    def _cycle(self) -> bool:
        """One scheduling cycle: heads, nomination, ordered admission, requeue."""
        heads: list[tuple[str, WlKey]] = []
        for cq_name, q in self._queues.items():
            if q.blocked or not self._cq_active(cq_name):
                continue
            head = q.pop_head()
            if head is not None:
                heads.append((cq_name, head))
        if not heads:
            return False
        now = time.time()
        entries: list[_Entry] = []
        inadmissible: list[_Entry] = []
        for cq_name, key in heads:
            obj = self.api.store.get(WL, *key)
            if obj is None or (self._pending_wl.get(key) or ("",))[0] != cq_name:
                continue
            e = _Entry(cq_name, key, obj, priority_of(obj), queue_order_timestamp(obj))
            e.pod_sets = self._pod_sets(key, obj)
            spec = self._cq_specs[cq_name]
            if cq_name in self.tree.in_cycle:
                e.message, e.reason = f"ClusterQueue {cq_name} is inactive", "Inadmissible"
                inadmissible.append(e)
                continue
            if not spec.matches_namespace(self._ns_labels.get(key[0], {})):
                # Kueue v0.17 (nominate): a capital W; the granular reasons of newer Kueue say Misconfigured.
                e.message = (
                    "workload namespace doesn't match ClusterQueue selector"
                    if UNADMITTED_WORKLOADS_OBSERVABILITY
                    else "Workload namespace doesn't match ClusterQueue selector"
                )
                e.reason = "Misconfigured"
                inadmissible.append(e)
                continue
            last = self._last.get(key)
            node = self.tree.node(cq_name)
            tried = last[0] if last is not None and last[1] >= node.generation else None
            decision = decide(
                self.tree,
                spec,
                e.pod_sets,
                self._flavors,
                priority=e.priority,
                timestamp=e.ts,
                now=now,
                last=tried,
                fair=self._config.fair_sharing,
                tas=self.tas,
            )
            e.assignment, e.targets = decision.assignment, decision.targets
            e.message = e.assignment.message()
            self._last[key] = (e.assignment.tried, e.assignment.generation, str(obj["metadata"].get("resourceVersion")))
            entries.append(e)
        entries.sort(
            key=lambda e: (
                e.assignment.borrowing if e.assignment else 0,
                -e.priority,
                e.ts,
                self._arrival.get(e.key, 0),
            )
        )
        preempted: dict[str, Target] = {}
        held: list[tuple[str, dict[FlavorResource, int]]] = []
        try:
            for e in self._iterate(entries):
                self._process(e, preempted, held)
        finally:
            for cq_name, usage in reversed(held):
                self.tree.remove_usage(cq_name, usage)
        for e in (*entries, *inadmissible):
            if not e.admitted:
                self._requeue_and_update(e)
        return True

    def _iterate(self, entries: list[_Entry]) -> Iterator[_Entry]:
        """The entries in the classical order, or, with fair sharing, ``fairSharingIterator``'s: each pick runs the
        tournament over the tree as it is after the previous entries were processed."""
        fair = self._config.fair_sharing
        if fair is None:
            yield from entries
            return
        remaining = {e.cq: e for e in entries}
        while remaining:
            contenders = [
                Contender(e.key, e.cq, e.assignment.quota_usage() if e.assignment else {}, e.priority, e.ts)
                for e in remaining.values()
            ]
            winner = tournament(self.tree, contenders, fair.non_borrowing_first)
            yield remaining.pop(winner.cq)

    def _hold(
        self, e: _Entry, usage: dict[FlavorResource, int], held: list[tuple[str, dict[FlavorResource, int]]]
    ) -> None:
        self.tree.add_usage(e.cq, usage)
        held.append((e.cq, usage))

    def _skip(self, e: _Entry, message: str) -> None:
        """``setSkipped``: retried in the next cycle, with every flavor again."""
        e.message, e.reason, e.retry = message, "WaitingForQuota", True
        self._last.pop(e.key, None)

    def _process(
        self, e: _Entry, preempted: dict[str, Target], held: list[tuple[str, dict[FlavorResource, int]]]
    ) -> None:
        """The body of the cycle's admission loop for one entry."""
        assert e.assignment is not None
        mode = e.assignment.mode
        if mode is Mode.NO_FIT:
            e.reason = e.assignment.no_fit_reason()
            return
        if mode is Mode.PREEMPT and not e.targets:
            e.reason = "WaitingForQuota"
            if self._cq_specs[e.cq].preemption.reclaim_within_cohort != "Any":
                self._hold(e, self._to_reserve(e), held)
            return
        if any(t.workload.key in preempted for t in e.targets):
            self._skip(e, "Workload has overlapping preemption targets with another workload")
            return
        if not self._fits(e, [*preempted.values(), *e.targets]):
            self._skip(e, "Workload no longer fits after processing another workload")
            return
        if mode is Mode.PREEMPT:
            for t in e.targets:
                preempted[t.workload.key] = t
            self._hold(e, dict(e.assignment.usage), held)
            self._last.pop(e.key, None)
            e.reason = "WaitingForPreemptedWorkloads"
            count = self._issue_preemptions(e)
            if count:
                e.message += f". Pending the preemption of {count} workload(s)"
            return
        self._admit(e)

    def _to_reserve(self, e: _Entry) -> dict[FlavorResource, int]:
        """``resourcesToReserve`` for a ``Preempt`` entry without targets: up to the borrowing limit when the
        assignment borrows, else up to the nominal quota (never below zero here: the simulator's tree is not a
        throw-away snapshot)."""
        assert e.assignment is not None
        spec = self._cq_specs[e.cq]
        node = self.tree.node(e.cq)
        out: dict[FlavorResource, int] = {}
        for fr, value in e.assignment.usage.items():
            quota = spec.quotas.get(fr)
            nominal = quota.nominal if quota is not None else 0
            used = node.usage.get(fr, 0)
            if e.assignment.borrowing > 0:
                limit = quota.borrowing_limit if quota is not None else None
                out[fr] = value if limit is None else min(value, nominal + limit - used)
            else:
                out[fr] = min(value, nominal - used)
            out[fr] = max(0, out[fr])
        return out

    def _fits(self, e: _Entry, gone: list[Target]) -> bool:
        """``fits``: the entry's usage fits once the Workloads preempted in this cycle and its own targets are gone."""
        assert e.assignment is not None
        removed: list[Target] = []
        seen: set[str] = set()
        for t in gone:
            if t.workload.key in seen or t.workload.cluster_queue not in self.tree.cqs:
                continue
            seen.add(t.workload.key)
            self.tree.remove_usage(t.workload.cluster_queue, t.workload.usage)
            self.tas.drop(t.workload)
            removed.append(t)
        try:
            if not self.tree.fits(e.cq, e.assignment.usage):
                return False
            if e.assignment.topology:
                return e.assignment.tas_fits(tas_views(self._cq_specs[e.cq], self._flavors, self.tas))
            return True
        finally:
            for t in removed:
                self.tree.add_usage(t.workload.cluster_queue, t.workload.usage)
                self.tas.keep(t.workload)

    def _issue_preemptions(self, e: _Entry) -> int:
        """``IssuePreemptions``: mark the victims Evicted (reason Preempted) and Preempted (with the variant)."""
        count = 0
        preemptor_uid = e.obj["metadata"].get("uid", "")
        job_uid = labels_of(e.obj).get(JOB_UID_LABEL, "")
        for target in e.targets:
            ns, _, name = target.workload.key.partition("/")
            victim = self.api.store.get(WL, ns, name)
            if victim is None:
                continue
            if is_evicted(victim):
                count += 1
                continue
            message = preemption_message(
                preemptor_uid,
                job_uid,
                target.reason,
                self.tree.path(e.cq),
                self.tree.path(target.workload.cluster_queue),
            )
            now = now_rfc3339()
            new = clone(victim)
            set_preempted_condition(new, target.reason, message, now)
            set_evicted_condition(new, "Preempted", message, now)
            try:
                self.client.update_status(new)
            except ApiError as err:
                log.info("kueue: preempting %s/%s failed: %s", ns, name, err.message)
                continue
            count += 1
            self.preemptions += 1
            self._emit(self._sync_workload(ns, name))
            self._record_preemption(e, victim, target, message)
        return count

    def _record_preemption(self, e: _Entry, victim: Obj, target: Target, message: str) -> None:
        ns, name = victim["metadata"]["namespace"], victim["metadata"]["name"]
        record_event(self.client, victim, reason="EvictedDueToPreempted", message=message, component="kueue")
        record_event(
            self.client,
            victim,
            reason="Preempted",
            message=f"{message}; preemptor effective priority: {e.priority} (base: {e.priority}, boost: 0); "
            f"preemptee effective priority: {target.workload.priority} (base: {target.workload.priority}, "
            f"boost: 0)",
            component="kueue-admission",
        )
        record_event(
            self.client,
            e.obj,
            reason="PreemptedWorkload",
            message=f"Preempted workload {ns}/{name} (UID: {victim['metadata'].get('uid', '')}) in ClusterQueue "
            f"{target.workload.cluster_queue}; preemptor effective priority: {e.priority} (base: {e.priority}, "
            f"boost: 0); preemptee effective priority: {target.workload.priority} (base: "
            f"{target.workload.priority}, boost: 0)",
            component="kueue-admission",
        )

    def _admit(self, e: _Entry) -> None:
        """``admit``: write the admission (QuotaReserved and Admitted) and count its quota at once."""
        assert e.assignment is not None
        admission = {"clusterQueue": e.cq, "podSetAssignments": e.assignment.to_admission()}
        current = self.api.store.get(WL, *e.key)
        if current is None:
            return
        new = clone(current)
        set_quota_reservation(new, admission, now_rfc3339())
        try:
            written = self.client.update_status(new)
        except ApiError as err:
            e.message = f"Failed to admit workload: {err.message}"
            return
        e.admitted = True
        self.admissions += 1
        self._emit(self._sync_workload(*e.key))
        requeued = condition(current, "Requeued")
        queued = requeued.get("lastTransitionTime") if requeued else current["metadata"].get("creationTimestamp")
        queued_at = timestamp(queued)
        wait = max(0.0, time.time() - (queued_at if queued_at is not None else time.time()))
        record_event(
            self.client,
            written,
            reason="QuotaReserved",
            message=f"Quota reserved in ClusterQueue {e.cq}, wait time since queued was {wait:.0f}s",
            component="kueue-admission",
        )
        record_event(
            self.client,
            written,
            reason="Admitted",
            message=f"Admitted by ClusterQueue {e.cq}, wait time since reservation was 0s",
            component="kueue-admission",
        )

    def _resource_requests(self, e: _Entry) -> list[Obj]:
        """``PropagateResourceRequests``: per pod set, what it asks in total. Kueue's flavor assigner adds the
        ``pods`` count to the Workload's requests when the ClusterQueue covers ``pods``, so they show here too."""
        spec = self._cq_specs.get(e.cq)
        with_pods = e.assignment is not None and spec is not None and spec.group_of("pods") is not None
        out: list[Obj] = []
        for ps in e.pod_sets:
            totals = ps.totals()
            if with_pods:
                totals["pods"] = ps.count
            out.append({"name": ps.name, "resources": {r: quantity_string(r, v) for r, v in sorted(totals.items())}})
        return out

    def _requeue_and_update(self, e: _Entry) -> None:
        """``requeueAndUpdate``: back in the queue (at once, parked or blocking) and why it is pending."""
        q = self._queues.get(e.cq)
        if q is not None and (self._pending_wl.get(e.key) or ("",))[0] == e.cq:
            pending_flavors = e.assignment is not None and e.key in self._last and e.assignment.pending_flavors()
            q.requeue(e.key, immediate=e.retry or pending_flavors)
        current = self.api.store.get(WL, *e.key)
        if current is None or has_quota_reservation(current):
            return
        reason = unadmitted_reason(e.reason or "PendingEvaluation", "Pending")
        new = clone(current)
        changed = unset_quota_reservation(new, reason, e.message, now_rfc3339())
        requests = self._resource_requests(e)
        if new.setdefault("status", {}).get("resourceRequests") != requests:
            new["status"]["resourceRequests"] = requests
            changed = True
        if not changed:
            return
        try:
            self.client.update_status(new)
        except ApiError as err:
            log.info("kueue: updating pending workload %s/%s failed: %s", *e.key, err.message)
            return
        # Kueue's queue replaces the Workload's Info on this update, and its last flavor assignment with it.
        self._last.pop(e.key, None)
        record_event(
            self.client, current, reason=reason, message=e.message, type="Warning", component="kueue-admission"
        )
