"""Kueue's quota arithmetic, flavor assignment and classical preemption, in pure Python.

One model serves two callers that must agree with a real Kueue to the unit:

* the simulator's Kueue controller, which admits workloads on simulated worker clusters as Kueue would, and
* the dispatcher's placement engine, which scores worker clusters by what the ClusterQueue behind a queue name
  would still admit (per flavor, with cohort borrowing).

Everything here follows the Kueue source at the commit whose CRDs the project ships
(``pkg/cache/scheduler/resource_node.go``, ``clusterqueue_snapshot.go``, ``pkg/scheduler/flavorassigner`` and
``pkg/scheduler/preemption`` with its ``classical`` and ``common`` packages). It is a re-implementation of the
behaviour, not a transliteration: names follow Python conventions and hot paths are flattened.

Units are Kueue's ``int64`` values: milli-units for ``cpu``, whole units (rounded up) for everything else.
Quotas that overflow ``int64`` become :data:`~.amounts.UNLIMITED`, and quota arithmetic saturates exactly as
Kueue's ``resources.Amount`` does, so "1E" CPU quotas neither wrap nor collapse to zero.

The modules, by concern (each imports only from those listed before it; the ``kueue`` contract in .importlinter
checks it):

* :mod:`.amounts`: amounts, their saturating arithmetic and their quantity form;
* :mod:`.specs`: ClusterQueue / Cohort / ResourceFlavor specs, taints, tolerations and selectors;
* :mod:`.workloads`: pod requests, pod sets, admitted workloads and the pending-queue order;
* :mod:`.cells` and :mod:`.tree`: the quota tree (the scheduler's snapshot) with borrowing and lending;
* :mod:`.preemption`: classical preemption;
* :mod:`.assignment`: the outcome of flavor assignment;
* :mod:`.flavors`: the flavor assigner and the re-validation of a ``Fit``.

Modelled:

* ClusterQueue / Cohort / ResourceFlavor specs from v1beta2 objects (and the v1beta1 spellings);
* the quota tree: nominal quota, borrowing and lending limits, hierarchical cohorts with their own quota,
  implicit cohorts (a ClusterQueue naming a Cohort that has no object), incremental usage bookkeeping,
  ``available`` / ``potentialAvailable`` and the per-ClusterQueue usage report;
* flavor assignment with flavor fungibility (``whenCanBorrow``, ``whenCanPreempt``, ``preference``),
  taints/tolerations, node selector and required node affinity against flavor labels, PodSet groups,
  the ``pods`` resource, the resume-from-last-tried-flavor bookkeeping, Kueue's reason strings and the
  ``NoFit`` reason (``NoMatchingFlavor`` / ``ExceedsMaxQuota`` / ``WaitingForQuota``);
* classical preemption: candidate collection (within the ClusterQueue, reclaim within the cohort,
  hierarchical reclaim, ``borrowWithinCohort`` with its priority threshold), Kueue's candidate ordering and the
  minimal-set heuristic (remove candidates until the workload fits, then add them back in reverse order);
* the pending-queue ordering and the ``StrictFIFO`` / ``BestEffortFIFO`` semantics.

Deliberately left out: Topology Aware Scheduling, fair sharing (DRS-based ordering and fair preemption),
admission fair sharing, admission checks, partial admission's count search (``assign_flavors`` accepts
explicit counts; the search is :mod:`dispatcher.placement.partial`), elastic workload slices, concurrent
admission variants, the priority-boost annotation (pass the effective priority) and resource transformations /
excluded resource prefixes.
"""
