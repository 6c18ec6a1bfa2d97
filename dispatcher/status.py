"""Status sync: what a worker's copy is doing, brought back to SQL and to the manager object.

Level-triggered: an event on a remote Job or Workload only marks its workload dirty; the reconcile
reads the newest cached objects and moves the workload to the state they show (Placed → Admitted →
Running → Succeeded/Failed, or back to Placed when the worker's Kueue evicts it). SQL is written
first (guarded by generation), then the manager object:

- ``status`` mode (the manager object's managedBy names the dispatcher): at admission the manager
  object is unsuspended where the kind says so, and the remote status is written to its ``/status`` in
  the form the kind's adapter gives (for a Job, an order the API server's Job status rules accept:
  ``SuccessCriteriaMet`` before ``Complete``, times included);
- ``annotations`` mode (a suspended object): annotations name the cluster, the state, a message, and the
  remote status as JSON; the manager object stays suspended.

Events on the manager object say where the workload went and why.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from . import labels as L
from .adapters.base import Adapter, RemotePhase
from .kube.client import ClusterClient, KubeError
from .live import Live
from .patch_util import replace_patch
from .store.models import PlacementState, WorkloadState

__all__ = ["Observation", "RemoteSnapshot", "manager_report", "observe"]

log = logging.getLogger("dispatcher.sync")
Obj = dict[str, Any]


def condition(obj: Obj | None, ctype: str) -> Obj | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def is_true(obj: Obj | None, ctype: str) -> bool:
    c = condition(obj, ctype)
    return bool(c and c.get("status") == "True")


@dataclass(frozen=True)
class RemoteSnapshot:
    """The newest cached remote Job copy of a workload and its worker Workload."""

    job: Obj
    workload: Obj | None


@dataclass(frozen=True)
class Observation:
    """The state the remote objects show, and why."""

    state: str
    phase: RemotePhase
    reason: str
    cluster_queue: str | None = None


def observe(adapter: Adapter, snap: RemoteSnapshot) -> Observation:
    phase = adapter.phase(snap.job)
    wl = snap.workload
    cq = ((wl or {}).get("status") or {}).get("admission", {}).get("clusterQueue")
    if phase.finished:
        state = WorkloadState.SUCCEEDED if phase.succeeded else WorkloadState.FAILED
        why = phase.reason + (f": {phase.message}" if phase.message else "")
        return Observation(state, phase, why, cq)
    if phase.running:
        return Observation(WorkloadState.RUNNING, phase, "pods running", cq)
    if is_true(wl, "Admitted"):
        return Observation(WorkloadState.ADMITTED, phase, f"admitted by ClusterQueue {cq}", cq)
    evicted = condition(wl, "Evicted")
    if evicted and evicted.get("status") == "True":
        return Observation(WorkloadState.PLACED, phase, f"evicted on the worker: {evicted.get('message', '')}", cq)
    pending = condition(wl, "QuotaReserved")
    why = str(pending.get("message", "")) if pending else "waiting for the worker's Kueue"
    return Observation(WorkloadState.PLACED, phase, why or "waiting for the worker's Kueue", cq)


#: Workload state -> placement state.
PLACEMENT_STATE = {
    WorkloadState.PLACED: PlacementState.CREATED,
    WorkloadState.ADMITTED: PlacementState.ADMITTED,
    WorkloadState.RUNNING: PlacementState.RUNNING,
    WorkloadState.SUCCEEDED: PlacementState.SUCCEEDED,
    WorkloadState.FAILED: PlacementState.FAILED,
}

#: Forward order of the states a copy goes through (eviction may step back to Placed).
ORDER = {
    WorkloadState.PLACED: 1,
    WorkloadState.ADMITTED: 2,
    WorkloadState.RUNNING: 3,
    WorkloadState.SUCCEEDED: 4,
    WorkloadState.FAILED: 4,
}


def manager_labels(live: Live, state: str) -> dict[str, str | None]:
    """The labels written on every manager object: where it runs and in what state, so that
    ``kubectl get jobs -L kueue-dispatcher.io/cluster,kueue-dispatcher.io/state`` shows them and ``-l`` selects by
    them (the values are DNS labels and state names; None removes a label)."""
    return {L.CLUSTER: live.cluster or None, L.STATE: state}


def manager_report(live: Live, state: str, message: str, remote_status: Obj | None) -> dict[str, str]:
    """The annotations written on every manager object (the longer story: message, the copy's whole status)."""
    out = {L.CLUSTER: live.cluster or "", L.STATE: state, L.MESSAGE: message[:1000]}
    if remote_status is not None:
        out[L.REMOTE_STATUS] = json.dumps(remote_status, sort_keys=True, separators=(",", ":"))[:30_000]
    return out


async def write_manager(
    manager: ClusterClient,
    adapter: Adapter,
    live: Live,
    local: Obj | None,
    *,
    state: str,
    message: str,
    remote: Obj | None,
) -> None:
    """Bring the manager object in line (skipping writes identical to the last one). Raises KubeError."""
    res = adapter.resource
    status = adapter.remote_status(remote) if remote is not None else None
    annotations = manager_report(live, state, message, status)
    labels = manager_labels(live, state)
    if live.reported.get("annotations") != annotations or live.reported.get("labels") != labels:
        try:
            await manager.patch(
                res, live.namespace, live.name, {"metadata": {"annotations": annotations, "labels": labels}}
            )
        except KubeError as exc:
            if not exc.not_found:
                raise
            return
        live.reported["annotations"] = annotations
        live.reported["labels"] = labels
    if live.status_mode != "status" or local is None:
        return
    if remote is None:
        failed = (
            adapter.failed_status(local, message) if state in (WorkloadState.FAILED, WorkloadState.CANCELLED) else None
        )
        if failed is not None and not live.reported.get("failed"):
            await manager.patch(res, live.namespace, live.name, {"status": failed}, subresource="status")
            live.reported["failed"] = True
        return
    if state in (WorkloadState.ADMITTED, WorkloadState.RUNNING, WorkloadState.SUCCEEDED, WorkloadState.FAILED):
        activate = adapter.activate_patch(local)
        if activate is not None and not live.reported.get("activated"):
            await manager.patch(res, live.namespace, live.name, activate)
            live.reported["activated"] = True
    new_status = adapter.manager_status(local, remote)
    if new_status is None or live.reported.get("status") == new_status:
        return
    # Replace, not merge: what the worker no longer reports must go (a finished Job with a leftover ``active``
    # or ``uncountedTerminatedPods`` is refused by the API server), whichever version the server holds: the
    # manager's status as the informer last saw it, what we wrote last, or a write since whose answer was lost.
    tried: list[Obj] = live.reported.setdefault("status_tried", [])
    patch = replace_patch([local.get("status"), live.reported.get("status"), *tried], new_status)
    tried.append(new_status)
    del tried[:-16]  # a workload whose writes keep failing: the latest few are what the server may hold
    await manager.patch(res, live.namespace, live.name, {"status": patch}, subresource="status")
    live.reported["status"] = new_status
    live.reported["status_tried"] = []
