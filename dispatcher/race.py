"""MultiKueue-style dispatching (``strategy: allAtOnce | incremental``): several copies, the first admission wins.

The strategy modules (:mod:`.placement.allatonce`, :mod:`.placement.incremental`) decide which workers get a
copy; this module does the I/O of a race:

1. every copy of the round is recorded as a placement intent in SQL (state Creating) before any is created;
   the workload is Placing with no cluster;
2. the copies are created suspended (same name, same generation label, each with its own placement id);
3. the first copy whose worker's Kueue reserves quota (QuotaReserved on its Workload) wins. In ONE SQL
   transaction the winner's placement becomes the workload's and every other one is Superseded; then the
   losers are deleted (uid-guarded). A loser created or admitted after that is deleted on sight;
4. incremental: every ``roundInterval`` the next ``workersPerRound`` workers get copies (intents first).

Crash safety: on restart the open placements of a workload with no cluster rebuild its race; copies in
Creating are created again (idempotent: an AlreadyExists of ours is adopted), and the race is checked against
the workers' Kueue Workloads. The status sync only ever follows the workload's own cluster, so a losing copy is
never taken for the workload; the garbage collector spares the copies of a race in progress.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import labels as L
from .capacity import PODS
from .copies import create_copy, delete_copy
from .kube.client import KubeError
from .live import Live
from .placement import allatonce, incremental
from .placement.engine import Decision
from .placement.worker import WorkerCapacity
from .store.models import Placement, PlacementState, Workload, WorkloadState, utcnow
from .store.repo import RaceIntent, Transition

if TYPE_CHECKING:
    from .finish import Finish
    from .gc import GarbageCollector
    from .requeue import Requeue
    from .runtime import Runtime

__all__ = ["Copy", "Race", "Races", "quota_reserved"]

log = logging.getLogger("dispatcher.race")
Obj = dict[str, Any]

RACE_STRATEGIES = ("allAtOnce", "incremental")


def quota_reserved(wl: Obj | None) -> bool:
    """A Kueue Workload whose QuotaReserved condition is True (Kueue's first admission step)."""
    for c in ((wl or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "QuotaReserved" and c.get("status") == "True":
            return True
    return False


@dataclass
class Copy:
    cluster: str
    placement_id: int
    remote_uid: str | None = None
    #: creating | created | rejected | deleted
    state: str = "creating"


@dataclass
class Race:
    live: Live
    generation: int
    strategy: str
    decision: Obj
    copies: dict[str, Copy] = field(default_factory=dict)
    winner: str | None = None
    #: Settled, abandoned or cancelled: no copy but the winner's may live on.
    ended: bool = False

    @property
    def summary(self) -> str:
        names = ", ".join(self.copies)
        if self.winner:
            return f"{self.strategy}: copies on {names}; {self.winner}'s Kueue admitted first, the others were deleted"
        return f"{self.strategy}: copies on {names}; the first worker to admit wins"


class Races:
    """The races in progress of one dispatcher (leader)."""

    def __init__(self, rt: Runtime, requeue: Requeue, finish: Finish, gc: GarbageCollector) -> None:
        self.svc = rt
        self.requeue = requeue
        self.finish = finish
        self.gc = gc
        rt.on_timer["round"] = lambda live: rt.spawn(self.next_round(live.id, live.generation), live)
        self.by_workload: dict[int, Race] = {}
        self.by_remote: dict[tuple[str, str], Race] = {}
        #: Losing copies seen holding quota on their worker after the race was settled (they are deleted, never
        #: followed; the quota they held meanwhile is what MultiKueue's strategies waste).
        self.loser_admissions = 0
        #: Pods of winning copies whose race gate was lifted (uids), so a stale event does not patch twice.
        self._lifted: set[str] = set()
        #: (cluster, workload uid) of losing copies being deleted (the garbage collector leaves them to us).
        self.deleting: set[tuple[str, str]] = set()
        self._to_resume: list[Race] = []

    @property
    def strategy(self) -> str:
        return self.svc.policy.strategy

    @property
    def active(self) -> bool:
        return self.strategy in RACE_STRATEGIES

    # -- deciding ------------------------------------------------------------------------------------------

    def nominate(self, decision: Decision, workers: Sequence[WorkerCapacity]) -> list[str]:
        if self.strategy == "incremental":
            return incremental.nominate(decision, workers, (), self.svc.policy.incremental_round)
        return allatonce.nominate(decision, workers)

    def intent(self, live: Live, decision: Decision, clusters: list[str]) -> RaceIntent:
        explanation = decision.explanation()
        explanation.update(strategy=self.strategy, chosen=None, score=None, copies=list(clusters))
        race = Race(live, live.generation, self.strategy, {}, {c: Copy(c, 0) for c in clusters})
        explanation["summary"] = race.summary
        return RaceIntent(live.id, live.generation, self.strategy, list(clusters), explanation)

    def start(self, live: Live, intent: RaceIntent) -> None:
        """The intents are in SQL: create every copy."""
        race = Race(live, intent.generation, intent.strategy, intent.decision)
        for c in intent.clusters:
            race.copies[c] = Copy(c, intent.placement_ids[c])
        live.state = WorkloadState.PLACING
        self.svc.live.set_remote(live, None, None)
        live.placement_id = None
        live.decision_summary = race.summary
        live.busy = True
        self.by_workload[live.id] = race
        for copy in race.copies.values():
            self.svc.spawn(self._create(race, copy), live)
        self._arm_round(race)

    def _arm_round(self, race: Race) -> None:
        if race.strategy == "incremental":
            at = time.monotonic() + self.svc.policy.incremental_interval
            self.svc.timers.add(at, "round", race.live.id, race.generation)

    async def next_round(self, workload_id: int, generation: int) -> None:
        """Incremental: the round time passed without an admission; nominate the next workers."""
        race = self.by_workload.get(workload_id)
        if race is None or race.ended or race.generation != generation or race.live.deleted:
            return
        workers = self.svc.workers()
        decision = self.svc.engine.decide(race.live.pending(), workers)
        clusters = incremental.nominate(decision, workers, race.copies, self.svc.policy.incremental_round)
        if not clusters:
            self._arm_round(race)  # nothing more now; a worker may become eligible (Ready, uncordoned) later
            return
        intent = RaceIntent(race.live.id, race.generation, race.strategy, clusters, race.decision)
        if not await self.svc.retry_sql("next incremental round", lambda: self.svc.repo.extend_race(intent)):
            return
        if race.ended:  # settled while the round was recorded: these copies are never made
            pids = list(intent.placement_ids.values())
            await self.svc.retry_sql(
                "close an unneeded round",
                lambda: self.svc.repo.close_placements(
                    pids, state=PlacementState.SUPERSEDED, outcome="the race was settled before this round"
                ),
            )
            return
        for c in clusters:
            race.copies[c] = Copy(c, intent.placement_ids[c])
        race.decision = dict(race.decision, copies=list(race.copies), summary=race.summary)
        race.live.decision_summary = race.summary
        for c in clusters:
            self.svc.spawn(self._create(race, race.copies[c]), race.live)
        self._arm_round(race)

    # -- copies --------------------------------------------------------------------------------------------

    async def _create(self, race: Race, copy: Copy) -> None:
        svc = self.svc
        live = race.live
        assert svc.intake is not None
        client = svc.clients[copy.cluster]
        adapter = svc.adapters[live.kind]
        delay = 0.2
        while True:
            if svc.stopping:
                return
            if race.ended or live.deleted:
                await self._close(copy, PlacementState.SUPERSEDED, "the race ended before this copy was created")
                return
            manager_obj = svc.intake.objects.get(live.uid)
            if manager_obj is None:
                await svc.intake.wait_synced()
                manager_obj = svc.intake.objects.get(live.uid)
                if manager_obj is None:
                    self.finish.manager_deleted(live.uid)
                    return
            await svc.repo.check_term()
            try:
                # One turn on the worker's connections (kube/gate.py); a race that ended while this copy queued
                # there creates nothing (the loop's top closes the copy).
                async with client.turn():
                    if svc.stopping or race.ended or live.deleted:
                        continue
                    result = await create_copy(
                        client,
                        adapter,
                        svc.intake.objects.get(live.uid) or manager_obj,
                        origin=svc.config.origin,
                        workload_uid=live.uid,
                        generation=race.generation,
                        placement_id=copy.placement_id,
                        create_namespace=svc.policy.create_namespaces,
                        gate=True,
                    )
            except KubeError as exc:
                log.info("creating the copy of %s on %s failed (%s); retrying", live.key, copy.cluster, exc)
                if exc.reason == "OlderCopy":
                    self.gc.request(copy.cluster)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 15.0)
                continue
            break
        if not result.ok:
            copy.state = "rejected"
            svc.emit(live, "Warning", "CopyRejected", result.error)
            await self._close(copy, PlacementState.REJECTED, result.error)
            if not race.ended and all(c.state in ("rejected", "deleted") for c in race.copies.values()):
                await self._abandon(race, result.error)
            return
        copy.remote_uid = result.remote_uid or ""
        copy.state = "created"
        svc.copies_created += 1
        self.by_remote[(copy.cluster, copy.remote_uid)] = race
        # No SQL write per copy: the intent (Creating) is what recovery needs (creating again adopts the copy);
        # the settling transaction records every copy's uid and outcome at once.
        if race.ended and race.winner != copy.cluster:
            await self._delete(race, copy)  # lost while it was being created
            return
        # The worker's Kueue may have admitted it already (its event came before we knew the copy's uid).
        self.check(race, copy.cluster)
        if live.state == WorkloadState.PLACING and race.winner is None:
            t = Transition(
                live.id,
                race.generation,
                {"state": WorkloadState.PLACED, "placed_at": utcnow(), "reason": None},
                from_states=(WorkloadState.PLACING,),
                event=("Placed", race.summary, None),
            )
            if await svc.batched(t) and race.winner is None:
                live.state = WorkloadState.PLACED
                live.placed_at = time.monotonic()
                await svc.report(live, WorkloadState.PLACED, race.summary, None)

    async def _close(self, copy: Copy, state: str, outcome: str) -> None:
        pid = copy.placement_id
        await self.svc.retry_sql(
            "close a race placement",
            lambda: self.svc.repo.close_placements([pid], state=state, outcome=outcome),
        )

    async def _delete(self, race: Race, copy: Copy) -> None:
        """Delete a losing copy (uid precondition). Retries while the worker answers errors; a Lost worker's
        copies are fenced when it comes back (generation and placement are closed in SQL)."""
        svc = self.svc
        client = svc.clients.get(copy.cluster)
        if client is None or copy.state == "deleted":
            return
        copy.state = "deleted"
        res = svc.adapters[race.live.kind].resource
        key = (copy.cluster, race.live.uid)
        self.deleting.add(key)
        delay = 0.1
        try:
            while not svc.stopping:
                try:
                    await delete_copy(client, res, race.live.namespace, race.live.name, copy.remote_uid)
                    svc.copies_deleted += 1
                    return
                except KubeError as exc:
                    if svc.capacities[copy.cluster].health == "Lost":
                        return
                    log.info(
                        "deleting the losing copy of %s on %s failed (%s); retrying", race.live.key, copy.cluster, exc
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
        finally:
            self.deleting.discard(key)

    # -- the race --------------------------------------------------------------------------------------------

    def on_remote_workload(self, cluster: str, owner_uid: str) -> bool:
        """A worker's Kueue Workload changed; True when it belongs to a race copy (won, lost or in progress)."""
        race = self.by_remote.get((cluster, owner_uid))
        if race is None:
            return False
        if race.ended:
            copy = race.copies.get(cluster)
            if race.winner != cluster and copy is not None and copy.remote_uid == owner_uid:
                view = self.svc.views.get(cluster)
                if view is not None and quota_reserved(view.workloads_by_owner.get(owner_uid)):
                    self.loser_admissions += 1
                    self.by_remote.pop((cluster, owner_uid), None)
                    log.info(
                        "%s: the losing copy on %s was admitted after the race; it is being deleted",
                        race.live.key,
                        cluster,
                    )
            return True
        self.check(race, cluster)
        return True

    def check(self, race: Race, first: str | None = None) -> None:
        """Settle the race if a copy's Kueue reserved quota (``first``'s copy is looked at first)."""
        if race.ended:
            return
        order = [first] if first in race.copies else []
        order += [c for c in race.copies if c != first]
        for cluster in order:
            copy = race.copies[cluster]
            if copy.state != "created" or not copy.remote_uid:
                continue
            view = self.svc.views.get(cluster)
            if view is not None and quota_reserved(view.workloads_by_owner.get(copy.remote_uid)):
                race.winner = cluster
                race.ended = True  # from here on, any other copy is deleted (also one still being created)
                self.svc.spawn(self._settle(race, copy), race.live)
                return

    async def _settle(self, race: Race, won: Copy) -> None:
        svc, live = self.svc, race.live
        losers = [c for c in race.copies.values() if c.cluster != won.cluster]
        race.decision = dict(race.decision, chosen=won.cluster, winner=won.cluster, summary=race.summary)
        ok = await svc.retry_sql(
            "settle a race",
            lambda: svc.repo.settle_race(
                live.id,
                race.generation,
                winner=won.cluster,
                winner_placement=won.placement_id,
                winner_uid=won.remote_uid or "",
                losers=[(c.placement_id, c.remote_uid) for c in losers],
                decision=race.decision,
                message=race.summary,
            ),
        )
        self.by_workload.pop(live.id, None)
        for c in losers:
            if c.remote_uid:
                # keep the loser indexed until it is gone, to notice (and count) a late admission
                self.by_remote[(c.cluster, c.remote_uid)] = race
        self.by_remote.pop((won.cluster, won.remote_uid or ""), None)
        if ok:
            self._lift_gates(won.cluster, live)
            live.state = WorkloadState.PLACED
            live.placement_id = won.placement_id
            svc.live.set_remote(live, won.cluster, won.remote_uid)
            live.placed_at = time.monotonic()
            live.decision_summary = race.summary
            svc.placements_made += 1
            svc.metrics.placed(won.cluster)
            svc.metrics.observe_submit_to_placed(time.time() - live.created)
            svc.emit(live, "Normal", "Placed", race.summary)
        await asyncio.gather(*(self._delete(race, c) for c in losers if c.state == "created"))
        for c in losers:
            if c.remote_uid:
                self.by_remote.pop((c.cluster, c.remote_uid), None)
        live.busy = False
        if live.deleted and ok:
            live.busy = True
            await self.finish.cancel(live)
        elif ok:
            svc.mark_dirty(live.id)

    async def _abandon(self, race: Race, reason: str) -> None:
        """Every copy was refused: back to Pending at the next generation, the refusing workers excluded."""
        svc, live = self.svc, race.live
        race.ended = True
        self.by_workload.pop(live.id, None)
        excluded = sorted(set(live.excluded) | {c.cluster for c in race.copies.values() if c.state == "rejected"})
        if set(excluded) >= set(svc.capacities):
            excluded = []
        t = Transition(
            live.id,
            race.generation,
            {
                "state": WorkloadState.PENDING,
                "generation": race.generation + 1,
                "cluster": None,
                "placement_id": None,
                "excluded": excluded,
                "reason": reason,
            },
            event=("Rejected", f"{race.strategy}: every copy was refused: {reason}", None),
        )
        (ok,) = await svc.retry_sql("abandon a race", lambda: svc.repo.apply([t]))
        live.busy = False
        if ok:
            live.excluded = excluded
            self.requeue.requeue(live, race.generation + 1)
            svc.timers.add(time.monotonic() + 5.0, "requeue", live.id, live.generation)

    # -- the race gate on the pods ---------------------------------------------------------------------------

    def on_race_pod(self, cluster: str, kind: str, pod: Obj) -> None:
        """A pod behind the race gate on ``cluster``: lift the gate if its copy won; a loser's stays gated."""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        live = self.svc.live.by_uid.get(labels.get(L.WORKLOAD_UID, ""))
        if (
            live is None
            or live.cluster != cluster
            or labels.get(L.GENERATION) != str(live.generation)
            or live.id in self.by_workload
        ):
            return
        self._lift(cluster, pod)

    def _lift_gates(self, cluster: str, live: Live) -> None:
        view = self.svc.views.get(cluster)
        for pod in list(view.gated_pods.values()) if view is not None else []:
            labels = (pod.get("metadata") or {}).get("labels") or {}
            if labels.get(L.WORKLOAD_UID) == live.uid and labels.get(L.GENERATION) == str(live.generation):
                self._lift(cluster, pod)

    def _lift(self, cluster: str, pod: Obj) -> None:
        uid = str((pod.get("metadata") or {}).get("uid"))
        if uid in self._lifted:
            return
        if len(self._lifted) > 100_000:
            self._lifted.clear()
        self._lifted.add(uid)
        self.svc.spawn(self._lift_gate(cluster, pod))

    async def _lift_gate(self, cluster: str, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        gates = [g for g in (pod.get("spec") or {}).get("schedulingGates") or [] if g.get("name") != L.RACE_GATE]
        client = self.svc.clients[cluster]
        delay = 0.1
        for _ in range(8):
            try:
                await client.patch(
                    PODS, meta.get("namespace"), str(meta.get("name")), {"spec": {"schedulingGates": gates or None}}
                )
                return
            except KubeError as exc:
                if exc.not_found:
                    return
                log.info("lifting the race gate of pod %s on %s failed (%s); retrying", meta.get("name"), cluster, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self._lifted.discard(str(meta.get("uid")))  # the next event of the pod tries again

    def cancel(self, live: Live) -> bool:
        """The manager object of a racing workload was deleted: end the race, delete every copy, cancel."""
        race = self.by_workload.get(live.id)
        if race is None or race.ended:
            return False
        race.ended = True
        self.by_workload.pop(live.id, None)
        self.svc.spawn(self._cancel(race), live)
        return True

    async def _cancel(self, race: Race) -> None:
        svc = self.svc
        pids = [c.placement_id for c in race.copies.values() if c.state in ("creating", "created")]
        await svc.retry_sql(
            "close race placements",
            lambda: svc.repo.close_placements(pids, state=PlacementState.CANCELLED, outcome="manager object deleted"),
        )
        await asyncio.gather(*(self._delete(race, c) for c in race.copies.values() if c.state == "created"))
        race.live.busy = True
        await self.finish.cancel(race.live)

    def owns(self, workload_uid: str, cluster: str) -> bool:
        """The garbage collector asks: is a copy of this workload on ``cluster`` part of a race in progress?"""
        if (cluster, workload_uid) in self.deleting:
            return True
        live = self.svc.live.by_uid.get(workload_uid)
        race = self.by_workload.get(live.id) if live is not None else None
        return race is not None and not race.ended and cluster in race.copies

    # -- crash recovery --------------------------------------------------------------------------------------

    def recover(self, live: Live, row: Workload, placements: list[Placement], decision: Obj) -> None:
        """A workload Placing/Placed with no cluster and open placements: a race was in progress. ``decision``
        is the workload's last decision (the recovered rows leave that large column unloaded)."""
        mine = sorted((p for p in placements if p.generation == row.generation), key=lambda p: p.id)
        race = Race(live, row.generation, mine[0].strategy if mine else self.strategy, dict(decision))
        for p in mine:
            race.copies[p.cluster] = Copy(p.cluster, p.id, p.remote_uid, "created" if p.remote_uid else "creating")
            if p.remote_uid:
                self.by_remote[(p.cluster, p.remote_uid)] = race
        live.busy = True
        live.decision_summary = race.summary
        self.by_workload[live.id] = race
        self._to_resume.append(race)

    def resume(self) -> None:
        """After the manager's objects are known: create what was not created, check who won meanwhile, and
        lift the race gate of winners' pods seen before the workloads were loaded."""
        for name, view in self.svc.views.items():
            for pod in list(view.gated_pods.values()):
                self.on_race_pod(name, "ADDED", pod)
        for race in self._to_resume:
            if race.live.deleted:
                race.ended = True
                self.by_workload.pop(race.live.id, None)
                self.svc.spawn(self._cancel(race), race.live)
                continue
            if not race.copies:  # every copy was closed (refused) and the move back to Pending was cut short
                self.by_workload.pop(race.live.id, None)
                self.svc.spawn(self._abandon(race, "every copy was refused (resumed after a restart)"), race.live)
                continue
            for copy in race.copies.values():
                if copy.state == "creating":
                    self.svc.spawn(self._create(race, copy), race.live)
            self.check(race)
            self._arm_round(race)
        self._to_resume = []
