"""Kueue, emulated: job webhook, job reconciler, workload controller, scheduler and queue status.

One :class:`KueueController` plays the parts a real ``kueue-controller-manager`` runs, each in its own module:

* :mod:`.kueue_cache`: the **cache and queue manager**, fed by watch events, and the **job webhook** (a mutating
  admission hook on every integrated kind's CREATE: queued jobs start suspended);
* :mod:`.kueue_scheduler`: the **scheduler**, Kueue's cycle over the heads of the ClusterQueues, with the admission
  rules of :mod:`kubesim.kueue` (flavor assignment, borrowing and lending, hierarchical Cohorts, classical
  preemption, partial admission, resource transformations read from the ``kueue-system/kueue-manager-config``
  ConfigMap);
* :mod:`.kueue_workloads`: the **workload controller**;
* :mod:`.kueue_reconciler`: the **job reconciler** (``jobframework``);
* :mod:`.kueue_status`: the **ClusterQueue / LocalQueue status** reconcilers, coalesced per queue;
* :mod:`.kueue_tas`: the **topology ungater** (TAS pods get their domain's node selector and lose their gate).

It acts only through the API, so every write meets the real validation, conflicts and status-subresource rules.
Scheduling is event driven: a cycle runs when something that could change an admission decision happens, and
workloads that did not fit wait (parked, as Kueue parks inadmissible workloads) until quota is released or the
queue configuration changes, instead of being polled.
"""

from __future__ import annotations

from collections.abc import Hashable

from ..kueue.queues import ClusterQueueQueue
from .kueue_reconciler import JobReconcilerMixin
from .kueue_scheduler import SchedulerMixin
from .kueue_status import QueueStatusMixin
from .kueue_tas import TopologyUngaterMixin
from .kueue_workloads import WorkloadControllerMixin

__all__ = ["ClusterQueueQueue", "KueueController"]


class KueueController(
    TopologyUngaterMixin, SchedulerMixin, WorkloadControllerMixin, JobReconcilerMixin, QueueStatusMixin
):
    """The Kueue controller manager of one simulated cluster (see the module docstring)."""

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        kind = key[0]
        if kind == "schedule":
            self._schedule()
        elif kind == "job":
            self._reconcile_job(key[1], key[2], key[3])
        elif kind == "wl":
            self._reconcile_workload(key[1], key[2])
        elif kind == "cqstatus":
            self._reconcile_cq_status(key[1])
        elif kind == "lqstatus":
            self._reconcile_lq_status(key[1], key[2])
        elif kind == "ungate":
            self._reconcile_ungate(key[1], key[2])
