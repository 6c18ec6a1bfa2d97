"""Prometheus metrics of one dispatcher, Kueue-style, under the ``kueue_dispatcher_`` prefix.

Where a family means what one of Kueue's does, it has Kueue's name and labels (``kueue_admission_wait_time_seconds``
becomes ``kueue_dispatcher_admission_wait_time_seconds``, quantities in base units: cpu in cores, memory in bytes),
with a ``cluster`` label naming the worker; dashboards written for Kueue's families carry over. Two kinds:

* **Events** the service reports as they happen, through :class:`Metrics` methods: placement outcomes
  (``placements_total{cluster,outcome}``), the time from submission to placement and from placement to the
  worker's admission, the status-sync lag, failovers and SQL errors.
* **State** read from the dispatcher at scrape time by :class:`DispatcherCollector`, so it is never stale and
  costs nothing between scrapes: worker health, cordons, in-flight placements and API latency per worker,
  pending workloads per queue, open workloads per state, and the API-call errors of every cluster client.

Each :class:`Metrics` has its own :class:`~prometheus_client.CollectorRegistry` (never the global one), so any
number of dispatchers can live in one process (tests build many). ``GET /metrics`` of the HTTP API renders it.

=================================================  =========  ============================================
family                                             type       labels
=================================================  =========  ============================================
``kueue_dispatcher_placements_total``              counter    cluster, outcome (placed, rejected,
                                                              timed_out, lost, drained)
``kueue_dispatcher_submit_to_placed_seconds``      histogram
``kueue_dispatcher_placed_to_admitted_seconds``    histogram
``kueue_dispatcher_status_sync_lag_seconds``       histogram
``kueue_dispatcher_failovers_total``               counter    from_cluster
``kueue_dispatcher_sql_errors_total``              counter
``kueue_dispatcher_records_deleted_total``         counter    (finished workloads purged after recordRetention)
``kueue_dispatcher_worker_health``                 gauge      cluster, state (1 for the current state; the
                                                              worker's state: Ready, Suspect, Lost, ...)
``kueue_dispatcher_worker_cordoned``               gauge      cluster
``kueue_dispatcher_worker_in_flight``              gauge      cluster
``kueue_dispatcher_worker_api_latency_seconds``    gauge      cluster
``kueue_dispatcher_fencing_agent_up``              gauge      cluster (workers with fencing: agent: 1 while
                                                              its agent's heartbeat arrives, 0 once it stopped;
                                                              absent before one was seen)
``kueue_dispatcher_fencing_lease_renewing``        gauge      cluster (1 while the fencing Lease is renewed and
                                                              accepted; 0 once Lost or refused)
``kueue_dispatcher_local_queue_pending_workloads`` gauge      name, namespace, status (active, inadmissible:
                                                              a problem or a shape no worker can ever hold)
``kueue_dispatcher_admission_wait_time_seconds``   histogram  cluster, cluster_queue, priority_class (manager
                                                              object created -> admitted by a worker's Kueue)
``kueue_dispatcher_local_queue_admission_wait_time_seconds``  name, namespace, priority_class (histogram)
``kueue_dispatcher_evicted_workloads_total``       counter    cluster, cluster_queue, reason, priority_class
                                                              (copies a worker's Kueue evicted)
``kueue_dispatcher_preempted_workloads_total``     counter    cluster, cluster_queue, reason (InClusterQueue,
                                                              InCohortReclamation, ...; cluster_queue is the
                                                              preempted copy's, not the preemptor's)
``kueue_dispatcher_cluster_queue_nominal_quota``   gauge      cluster, cohort, cluster_queue, flavor, resource
``kueue_dispatcher_cluster_queue_borrowing_limit`` gauge      (same; absent when unlimited)
``kueue_dispatcher_cluster_queue_lending_limit``   gauge      (same; absent when unlimited)
``kueue_dispatcher_cluster_queue_resource_usage``  gauge      (same) admitted by the worker's Kueue
``kueue_dispatcher_cluster_queue_resource_reservation``       (same, gauge) held by this dispatcher's
                                                              placements not admitted yet
``kueue_dispatcher_workloads``                     gauge      state (open workloads held in memory)
``kueue_dispatcher_api_calls_total``               counter    cluster
``kueue_dispatcher_api_call_errors_total``         counter    cluster
``kueue_dispatcher_api_calls_queued``              gauge      cluster (calls waiting for one of the cluster's
                                                              request connections now; kube/gate.py)
``kueue_dispatcher_api_call_queue_seconds_total``  counter    cluster (seconds calls waited for one, in all)
``kueue_dispatcher_events_written_total``          counter    (Kubernetes Events written on the manager)
``kueue_dispatcher_events_dropped_total``          counter    reason (queue_full: more came than the manager
                                                              took; write_failed: the API server refused)
``kueue_dispatcher_events_queued``                 gauge      (Events waiting to be written)
``kueue_dispatcher_build_info``                    gauge      version
``kueue_dispatcher_leader``                        gauge      (1 when this replica leads: always without
                                                              leader election; 0 for a standby)
=================================================  =========  ============================================
"""

from __future__ import annotations

import logging
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from . import __version__

Family = GaugeMetricFamily | CounterMetricFamily

__all__ = ["PREFIX", "DispatcherCollector", "Metrics", "Outcome"]

log = logging.getLogger("dispatcher.metrics")

PREFIX = "kueue_dispatcher"

HEALTH_STATES = ("Unknown", "Ready", "Suspect", "Lost", "Recovering", "NotReady")
WORKLOAD_STATES = ("Pending", "Placing", "Placed", "Admitted", "Running", "Succeeded", "Failed", "Cancelled")

#: Submission to placement, and placement to admission: from well under a second to an hour.
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
#: From a change on a worker to its write in SQL and on the manager object.
SYNC_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: Kueue's buckets for wait times (``generateExponentialBuckets(16)``: 1, then 2.5 doubling to about 11 hours).
KUEUE_WAIT_BUCKETS = (1.0, *(2.5 * 2**i for i in range(15)))

#: Per-worker ClusterQueue quota families, named and labelled as Kueue's own (plus ``cluster``).
QUOTA_LABELS = ["cluster", "cohort", "cluster_queue", "flavor", "resource"]
QUOTA_FAMILIES = {
    "cluster_queue_nominal_quota": "A worker ClusterQueue's nominal quota per flavor and resource (base units).",
    "cluster_queue_borrowing_limit": "A worker ClusterQueue's borrowing limit (absent when it may borrow without "
    "limit).",
    "cluster_queue_lending_limit": "A worker ClusterQueue's lending limit (absent when it lends all it does not use).",
    "cluster_queue_resource_usage": "Quota of a worker ClusterQueue its Kueue has admitted workloads for.",
    "cluster_queue_resource_reservation": "Quota of a worker ClusterQueue this dispatcher holds for copies the "
    "worker's Kueue has not admitted yet.",
}


def base_units(resource: str, value: int | float) -> float:
    """A Kueue amount (milli-cores for cpu, whole units otherwise) in the unit Kueue's metrics use."""
    return value / 1000 if resource == "cpu" else float(value)


#: Above this many workloads waiting for a status sync, the lag bookkeeping starts again (a safety bound).
_MAX_TRACKED = 200_000


class Outcome:
    """Values of the ``outcome`` label of ``placements_total``."""

    PLACED = "placed"  # the copy was created on the worker
    REJECTED = "rejected"  # the worker refused the copy
    TIMED_OUT = "timed_out"  # the worker's Kueue did not admit it within the admission timeout
    LOST = "lost"  # the worker was lost while the workload was on it
    DRAINED = "drained"  # moved off by a drain

    ALL = (PLACED, REJECTED, TIMED_OUT, LOST, DRAINED)

    #: From the placement's SQL state (``PlacementState``) to the label value.
    BY_PLACEMENT_STATE = {
        "Created": PLACED,
        "Rejected": REJECTED,
        "TimedOut": TIMED_OUT,
        "Lost": LOST,
        "Drained": DRAINED,
    }


class DispatcherCollector:
    """Gauges and counters read from a dispatcher at scrape time (no I/O, a pass over open workloads)."""

    def __init__(self, dispatcher: Any = None) -> None:
        self.dispatcher = dispatcher

    def describe(self) -> Iterable[Metric]:
        """The families, without samples (lets the registry check names without reading the dispatcher)."""
        return list(self._families())

    def _families(self) -> Iterator[Family]:
        yield GaugeMetricFamily(
            f"{PREFIX}_worker_health",
            "Health of each worker: 1 for its current state, 0 for the others.",
            labels=["cluster", "state"],
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_worker_cordoned", "1 when the worker is cordoned (takes no new workloads).", labels=["cluster"]
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_worker_in_flight",
            "Placements on the worker that its Kueue has not admitted yet.",
            labels=["cluster"],
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_worker_api_latency_seconds",
            "Recent latency of the worker's API server (exponentially weighted mean of successful calls).",
            labels=["cluster"],
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_fencing_agent_up",
            "1 while the fencing agent of a worker with fencing: agent sends its heartbeat, 0 once it stopped.",
            labels=["cluster"],
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_fencing_lease_renewing",
            "1 while this dispatcher renews its fencing Lease on the worker and the worker accepts it; 0 when the "
            "worker is Lost (its agent then fences) or refuses the Lease.",
            labels=["cluster"],
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_local_queue_pending_workloads",
            "Workloads waiting for a worker, per LocalQueue (name, namespace) and status: active (placement will "
            "place them when a worker can take them) or inadmissible (a problem with the object, or a shape no "
            "worker can ever hold).",
            labels=["name", "namespace", "status"],
        )
        for family, text in QUOTA_FAMILIES.items():
            yield GaugeMetricFamily(f"{PREFIX}_{family}", text, labels=QUOTA_LABELS)
        yield GaugeMetricFamily(
            f"{PREFIX}_workloads",
            "Open workloads the dispatcher holds, per state (finished ones until their retention ends).",
            labels=["state"],
        )
        yield CounterMetricFamily(
            f"{PREFIX}_api_calls", "Kubernetes API calls made to each worker cluster.", labels=["cluster"]
        )
        yield CounterMetricFamily(
            f"{PREFIX}_api_call_errors",
            "Kubernetes API calls to each worker cluster that failed (transport errors and error statuses).",
            labels=["cluster"],
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_api_calls_queued",
            "Calls to each worker cluster waiting now for one of its request connections (a burst queues here, "
            "in order, before its calls' deadlines start).",
            labels=["cluster"],
        )
        yield CounterMetricFamily(
            f"{PREFIX}_api_call_queue_seconds",
            "Seconds the calls to each worker cluster waited for one of its request connections, in all (its rate "
            "over the rate of api_calls_total is the mean wait).",
            labels=["cluster"],
        )
        yield CounterMetricFamily(f"{PREFIX}_events_written", "Kubernetes Events written on the manager cluster.")
        yield CounterMetricFamily(
            f"{PREFIX}_events_dropped",
            "Kubernetes Events not written: queue_full (they came faster than the manager's API server took them) "
            "or write_failed (the API server refused them).",
            labels=["reason"],
        )
        yield GaugeMetricFamily(f"{PREFIX}_events_queued", "Kubernetes Events waiting to be written.")
        yield GaugeMetricFamily(f"{PREFIX}_build_info", "The dispatcher's version.", labels=["version"])
        yield GaugeMetricFamily(
            f"{PREFIX}_leader",
            "1 when this replica is the leader and acts (always, without leader election); 0 for a standby.",
        )

    def collect(self) -> Iterable[Metric]:
        families = {m.name: m for m in self._families()}
        families[f"{PREFIX}_build_info"].add_metric([__version__], 1)
        d = self.dispatcher
        if d is not None:
            families[f"{PREFIX}_leader"].add_metric([], 1.0 if getattr(d, "is_leader", True) else 0.0)
            for section in (self._workers, self._quotas, self._workloads, self._clients, self._events):
                try:
                    section(d, families)
                except Exception:  # a scrape must never fail because one section did
                    log.exception("collecting metrics (%s) failed", section.__name__)
        return list(families.values())

    @staticmethod
    def _workers(d: Any, families: dict[str, Family]) -> None:
        health = families[f"{PREFIX}_worker_health"]
        cordoned = families[f"{PREFIX}_worker_cordoned"]
        in_flight = families[f"{PREFIX}_worker_in_flight"]
        latency = families[f"{PREFIX}_worker_api_latency_seconds"]
        clients = getattr(d, "clients", {}) or {}
        for name, cap in sorted((getattr(d, "capacities", {}) or {}).items()):
            current = str(cap.health)
            states = HEALTH_STATES if current in HEALTH_STATES else (*HEALTH_STATES, current)
            for state in states:
                health.add_metric([name, state], 1.0 if state == current else 0.0)
            cordoned.add_metric([name], 1.0 if cap.cordoned else 0.0)
            in_flight.add_metric([name], float(cap.in_flight))
            client = clients.get(name)
            latency.add_metric([name], float(client.latency if client is not None else cap.latency))
        leases: Any = getattr(d, "leases", None)
        for name in sorted(leases.workers if leases is not None else ()):
            fencing = leases.describe(name)
            if fencing["agentUp"] is not None:
                families[f"{PREFIX}_fencing_agent_up"].add_metric([name], 1.0 if fencing["agentUp"] else 0.0)
            renewing = bool(fencing["renewing"]) and not fencing["renewRefused"]
            families[f"{PREFIX}_fencing_lease_renewing"].add_metric([name], 1.0 if renewing else 0.0)

    @staticmethod
    def _quotas(d: Any, families: dict[str, Family]) -> None:
        """Each worker's ClusterQueue quota as the dispatcher sees it, as Kueue reports its own (only for workers
        whose view is current: a Lost worker's last numbers would be stale)."""
        for name, cap in sorted((getattr(d, "capacities", {}) or {}).items()):
            if str(cap.health) not in ("Ready", "Suspect") or not getattr(cap, "synced", True):
                continue
            for row in cap.quota_report():
                spec = cap.cluster_queues.get(row["clusterQueue"])
                labels = [name, (spec.cohort if spec is not None else None) or "", row["clusterQueue"]]
                labels += [row["flavor"], row["resource"]]
                res = row["resource"]
                values = {
                    "cluster_queue_nominal_quota": row["nominal"],
                    "cluster_queue_borrowing_limit": row.get("borrowingLimit"),
                    "cluster_queue_lending_limit": row.get("lendingLimit"),
                    "cluster_queue_resource_usage": row["used"],
                    "cluster_queue_resource_reservation": row["reserved"],
                }
                for family, value in values.items():
                    if value is not None:
                        families[f"{PREFIX}_{family}"].add_metric(labels, base_units(res, value))

    @staticmethod
    def _workloads(d: Any, families: dict[str, Family]) -> None:
        live = getattr(d, "live", None)
        by_state: Tally[str] = Tally()
        pending: Tally[tuple[str, str, str]] = Tally()
        for w in live.by_id.values() if live is not None else ():
            by_state[w.state] += 1
            if w.state == "Pending" and not w.stopped:  # a stopped one waits for an operator, as Kueue's inactive
                status = "inadmissible" if w.problem or w.never_fits else "active"
                pending[(w.queue, w.namespace, status)] += 1
        for state in WORKLOAD_STATES:
            families[f"{PREFIX}_workloads"].add_metric([state], float(by_state.get(state, 0)))
        for key, n in sorted(pending.items()):
            families[f"{PREFIX}_local_queue_pending_workloads"].add_metric(list(key), float(n))

    @staticmethod
    def _clients(d: Any, families: dict[str, Family]) -> None:
        for name, client in sorted((getattr(d, "clients", {}) or {}).items()):
            families[f"{PREFIX}_api_calls"].add_metric([name], float(client.calls))
            families[f"{PREFIX}_api_call_errors"].add_metric([name], float(client.errors))
            gate = getattr(client, "gate", None)
            if gate is not None:
                families[f"{PREFIX}_api_calls_queued"].add_metric([name], float(gate.waiting))
                families[f"{PREFIX}_api_call_queue_seconds"].add_metric([name], float(gate.waited))

    @staticmethod
    def _events(d: Any, families: dict[str, Family]) -> None:
        recorder = getattr(getattr(d, "rt", None), "events", None)
        if recorder is None:
            return
        families[f"{PREFIX}_events_written"].add_metric([], float(recorder.written))
        for reason, n in sorted(recorder.dropped.items()):
            families[f"{PREFIX}_events_dropped"].add_metric([reason], float(n))
        families[f"{PREFIX}_events_queued"].add_metric([], float(recorder.queued))


class _WithoutCreated:
    """The registry without the ``*_created`` samples of counters and histograms (Kueue exports none; in the
    plain text format each would be one more gauge family per series)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterable[Metric]:
        for metric in self.registry.collect():
            if any(s.name.endswith("_created") for s in metric.samples):
                metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric


class Metrics:
    """One dispatcher's metrics: event counters and histograms the service feeds, plus the scrape-time collector.

    Every method is cheap and never raises, so the service may call them anywhere on its hot paths.
    """

    def __init__(self, dispatcher: Any = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.placements = Counter(
            "placements",
            "Placement attempts per worker by how they ended: placed (copy created), rejected (the worker "
            "refused the copy), timed_out (not admitted within the admission timeout), lost (the worker was lost), "
            "drained (moved off by a drain).",
            ["cluster", "outcome"],
            namespace=PREFIX,
            registry=self.registry,
        )
        self.submit_to_placed = Histogram(
            "submit_to_placed_seconds",
            "Time from the manager object's creation to its copy being created on a worker.",
            namespace=PREFIX,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.placed_to_admitted = Histogram(
            "placed_to_admitted_seconds",
            "Time from the copy being created on a worker to that worker's Kueue admitting it.",
            namespace=PREFIX,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.status_sync_lag = Histogram(
            "status_sync_lag_seconds",
            "Time from a change being noticed (a worker's watch event) to the status sync having processed it.",
            namespace=PREFIX,
            buckets=SYNC_BUCKETS,
            registry=self.registry,
        )
        self.failovers = Counter(
            "failovers",
            "Workloads moved off a worker that was lost, per worker they left.",
            ["from_cluster"],
            namespace=PREFIX,
            registry=self.registry,
        )
        self.fenced_copies = Counter(
            "fenced_copies",
            "Stale copies (an older generation) deleted from a worker when it came back after being lost.",
            ["cluster"],
            namespace=PREFIX,
            registry=self.registry,
        )
        self.records_deleted = Counter(
            "records_deleted",
            "Finished workloads whose records (decisions, placements, events) were deleted from SQL after "
            "policy.recordRetention.",
            namespace=PREFIX,
            registry=self.registry,
        )
        self.admission_wait = Histogram(
            "admission_wait_time_seconds",
            "Time from the manager object's creation to a worker's Kueue admitting its copy (Kueue's "
            "admission_wait_time_seconds, across the dispatcher), per worker and its ClusterQueue.",
            ["cluster", "cluster_queue", "priority_class"],
            namespace=PREFIX,
            buckets=KUEUE_WAIT_BUCKETS,
            registry=self.registry,
        )
        self.local_queue_admission_wait = Histogram(
            "local_queue_admission_wait_time_seconds",
            "Time from the manager object's creation to a worker's Kueue admitting its copy, per LocalQueue.",
            ["name", "namespace", "priority_class"],
            namespace=PREFIX,
            buckets=KUEUE_WAIT_BUCKETS,
            registry=self.registry,
        )
        self.evicted = Counter(
            "evicted_workloads",
            "Copies a worker's Kueue evicted, per worker, ClusterQueue and the Evicted condition's reason "
            "(Preempted, PodsReadyTimeout, ClusterQueueStopped, Deactivated, ...).",
            ["cluster", "cluster_queue", "reason", "priority_class"],
            namespace=PREFIX,
            registry=self.registry,
        )
        self.preempted = Counter(
            "preempted_workloads",
            "Copies a worker's Kueue preempted, per worker, the preempted copy's ClusterQueue and the Preempted "
            "condition's reason (InClusterQueue, InCohortReclamation, InCohortFairSharing, "
            "InCohortReclaimWhileBorrowing).",
            ["cluster", "cluster_queue", "reason"],
            namespace=PREFIX,
            registry=self.registry,
        )
        self.sql_errors = Counter(
            "sql_errors",
            "SQL statements or transactions that failed (each retry counts).",
            namespace=PREFIX,
            registry=self.registry,
        )
        self.collector = DispatcherCollector()
        self.registry.register(self.collector)
        self._exposed = _WithoutCreated(self.registry)
        self._dirty_since: dict[int, float] = {}
        self._clock: Callable[[], float] = time.monotonic
        if dispatcher is not None:
            self.bind(dispatcher)

    def bind(self, dispatcher: Any) -> None:
        """Read scrape-time state from ``dispatcher``; start every worker's counters at zero."""
        self.collector.dispatcher = dispatcher
        for name in getattr(dispatcher, "capacities", {}) or {}:
            for outcome in Outcome.ALL:
                self.placements.labels(cluster=name, outcome=outcome)
            self.failovers.labels(from_cluster=name)
            self.fenced_copies.labels(cluster=name)

    # -- events (called by the service) ---------------------------------------------------------------------

    def placed(self, cluster: str, outcome: str = Outcome.PLACED) -> None:
        """A placement on ``cluster`` ended its attempt with ``outcome`` (see :class:`Outcome`)."""
        self.placements.labels(cluster=cluster, outcome=outcome).inc()

    def placement_ended(self, cluster: str, placement_state: str) -> None:
        """A placement on ``cluster`` ended in ``placement_state`` (a ``PlacementState``: TimedOut, Rejected, ...)."""
        outcome = Outcome.BY_PLACEMENT_STATE.get(placement_state)
        if outcome is None:
            outcome = "".join(f"_{c.lower()}" if c.isupper() else c for c in placement_state).lstrip("_")
        self.placements.labels(cluster=cluster, outcome=outcome).inc()

    def observe_submit_to_placed(self, seconds: float) -> None:
        self.submit_to_placed.observe(max(0.0, seconds))

    def admitted(
        self, cluster: str, cluster_queue: str, namespace: str, local_queue: str, priority_class: str, seconds: float
    ) -> None:
        """A worker's Kueue admitted a copy ``seconds`` after the manager object was created."""
        self.admission_wait.labels(cluster, cluster_queue, priority_class).observe(max(0.0, seconds))
        self.local_queue_admission_wait.labels(local_queue, namespace, priority_class).observe(max(0.0, seconds))

    def evicted_on_worker(
        self, cluster: str, cluster_queue: str, reason: str, priority_class: str, preempted_reason: str | None
    ) -> None:
        """A worker's Kueue evicted a copy (``preempted_reason``: the Preempted condition's, when it preempted)."""
        self.evicted.labels(cluster, cluster_queue, reason, priority_class).inc()
        if preempted_reason:
            self.preempted.labels(cluster, cluster_queue, preempted_reason).inc()

    def observe_placed_to_admitted(self, seconds: float) -> None:
        self.placed_to_admitted.observe(max(0.0, seconds))

    def observe_status_sync_lag(self, seconds: float) -> None:
        self.status_sync_lag.observe(max(0.0, seconds))

    def sync_requested(self, workload_id: int) -> None:
        """A workload needs a status sync (keeps the earliest request until :meth:`sync_finished`)."""
        if len(self._dirty_since) >= _MAX_TRACKED:
            self._dirty_since.clear()
        self._dirty_since.setdefault(workload_id, self._clock())

    def sync_finished(self, workload_ids: Iterable[int]) -> None:
        """The status sync processed these workloads: observe the lag of each since its first request."""
        now = self._clock()
        for wid in workload_ids:
            since = self._dirty_since.pop(wid, None)
            if since is not None:
                self.status_sync_lag.observe(max(0.0, now - since))

    def failover(self, from_cluster: str) -> None:
        self.failovers.labels(from_cluster=from_cluster).inc()

    def fenced(self, cluster: str, copies: int) -> None:
        """``copies`` stale copies were deleted from ``cluster`` on its return."""
        if copies:
            self.fenced_copies.labels(cluster=cluster).inc(copies)

    def sql_error(self) -> None:
        self.sql_errors.inc()

    # -- exposition -------------------------------------------------------------------------------------------

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition (Prometheus text, or OpenMetrics when ``accept`` asks for it) and its content type."""
        try:
            encoder, content_type = choose_encoder(accept)
        except Exception:  # an Accept header the client library cannot parse: the plain text format
            encoder, content_type = generate_latest, "text/plain; version=0.0.4; charset=utf-8"
        return encoder(self._exposed), content_type
