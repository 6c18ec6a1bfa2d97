"""A worker's verdict for a workload, and the records the engine keeps of verdicts per workload shape.

:class:`Verdict` (feasible or the reason why not, with what the worker's Kueue would assign), its HAMi part
:class:`GpuVerdict` from a :class:`GpuFitter` (see :mod:`.gpu`), and the per-shape cache's records: one slot
per worker (:class:`_Slot`), what is kept per shape (:class:`_ShapeCache`) and the fleet decisions are made over
(:class:`_Fleet`). :class:`~.engine.PlacementEngine` brings them up to date; :mod:`.evaluation` fills them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .kueue.amounts import FlavorResource
from .kueue.revalidate import FitCheck
from .kueue.topology import TASUsage
from .kueue.workloads import PodSetRequest
from .worker import WorkerCapacity
from .workload import PodSetSpec

__all__ = ["GpuFitter", "GpuVerdict", "Verdict"]


Obj = dict[str, Any]


@dataclass(slots=True)
class GpuVerdict:
    ok: bool
    reason: str = ""
    #: 0..1: packing quality of the chosen GPUs (binpack: tighter is higher; spread: emptier is higher).
    score: float = 0.5
    #: node -> [(device id, mem MiB, cores, slots)] assumed taken if placed.
    allocations: dict[str, list[tuple[str, int, int, int]]] = field(default_factory=dict)
    #: Not even on the worker's GPUs with nothing running: no amount of waiting helps (until its nodes change).
    permanent: bool = False


class GpuFitter(Protocol):
    """HAMi fitting of pod sets onto a worker's GPU nodes (see :mod:`.gpu`)."""

    def wants(self, pod_sets: Sequence[PodSetSpec]) -> bool: ...

    def key(self, pod_sets: Sequence[PodSetSpec], mode: str) -> Hashable: ...

    def fit(
        self, worker: WorkerCapacity, pod_sets: Sequence[PodSetSpec], mode: str, key: Hashable | None = None
    ) -> GpuVerdict: ...


@dataclass(slots=True)
class Verdict:
    """One worker's answer for one workload."""

    cluster: str
    feasible: bool
    reason: str = ""
    #: Not feasible now for a reason that passes by itself (not ready, in-flight limit, quota in use).
    transient: bool = True
    cluster_queue: str | None = None
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)
    terms: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    preempts: int = 0
    gpu: GpuVerdict | None = None
    #: (policy weights, weighted sum, sum of weights) of every term but clusterWeight, kept by the scoring so
    #: that a cached verdict is not summed again for every decision.
    partial: tuple[Any, float, float] | None = field(default=None, repr=False, compare=False)
    #: Partial admission: the fraction of the requested pods the worker's Kueue would admit (1.0: all of them),
    #: and what it admits, e.g. ``fits 6 of 8 pods (minCount 4)``.
    admitted_share: float = 1.0
    reduced: str = ""
    #: TAS: where the pod sets go (``pod set main: 8 pods in one rack``), and the domains they take, for the
    #: reservation.
    topology: str = ""
    tas_usage: tuple[TASUsage, ...] = ()
    #: Fair sharing: the ClusterQueue's dominant resource share after admission (``depth.fair_share_json``).
    fair_share: dict[str, Any] | None = None
    #: The Preempted reasons of the workloads Kueue would evict, counted (``InCohortFairSharing: 2``).
    preemption_reasons: str = ""
    #: :meth:`to_json`'s last answer and the (score, clusterWeight) it was made at.
    _json: tuple[tuple[float, float | None], Obj] | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> Obj:
        """The verdict as decision records keep it (read-only: the same dict is handed out again).

        A cached verdict serves every decision of its shape until its worker changes, and every decision records
        every worker's verdict (100 workers: 100 of these per decision), so the answer is kept. Only the score
        and the clusterWeight term change after a verdict is made (:func:`~.scoring.score_verdict`, per decision);
        they are the key."""
        key = (self.score, self.terms.get("clusterWeight"))
        memo = self._json
        if memo is not None and memo[0] == key:
            return memo[1]
        out: Obj = {"cluster": self.cluster, "feasible": self.feasible}
        if self.feasible:
            out["score"] = round(self.score, 4)
            out["terms"] = {k: round(v, 4) for k, v in self.terms.items()}
            out["clusterQueue"] = self.cluster_queue
            out["flavors"] = self.flavors
            if self.preempts:
                out["preempts"] = self.preempts
                if self.preemption_reasons:
                    out["preemptionReasons"] = self.preemption_reasons
            if self.reduced:
                out["partial"] = self.reduced
            if self.topology:
                out["topology"] = self.topology
            if self.fair_share is not None:
                out["fairShare"] = self.fair_share
        if self.reason:
            out["reason"] = self.reason
        self._json = (key, out)
        return out


@dataclass(slots=True)
class _Slot:
    """One worker's verdict for one workload shape (the worker-side checks and the evaluation, scored)."""

    worker: WorkerCapacity
    #: The worker's version the verdict is current at.
    version: int
    #: The worker's base version and GPU-view version when it was evaluated (see :meth:`PlacementEngine._refresh`).
    base: int
    gpu: int
    verdict: Verdict
    #: For a ``Fit`` verdict: the quota checks that re-validate it after added usage (``kueue.flavors.fit_checks``).
    checks: tuple[FitCheck, ...] | None
    #: The root of the verdict's quota tree on the worker: reservations in other trees cannot change it.
    root: str | None
    #: Unique per verdict: a ranking entry with another stamp is stale.
    stamp: int


@dataclass(slots=True)
class _ShapeCache:
    """What the engine keeps per workload shape: every worker's verdict, current as of :attr:`seen`."""

    #: worker name -> its slot, in the order of the fleet the verdicts were last brought up to date for
    slots: dict[str, _Slot] = field(default_factory=dict)
    #: the slots' verdicts in fleet order (copied into each decision)
    listing: list[Verdict] = field(default_factory=list)
    #: feasible verdicts, best first: (-score, worker name, stamp); entries whose stamp is not the slot's are stale
    ranking: list[tuple[float, str, int]] = field(default_factory=list)
    #: the fleet generation and journal sequence number the slots are current for
    fleet: int = -1
    seen: int = -1
    #: Kueue configuration (``WorkerCapacity.kueue_config_key``) -> the pod sets as its flavor assigner sees them
    kueue_pod_sets: dict[str, list[PodSetRequest]] = field(default_factory=dict)
    #: per pod set, each requested resource's per-pod amount in Kueue units (None: not computed yet)
    pod_values: list[list[tuple[str, int]]] | None = None
    #: whether the shape asks HAMi for vGPUs (None: not known yet)
    wants_gpu: bool | None = None
    #: the GPU fitter's key for the shape's pod sets (None: not known yet)
    gpu_key: Hashable | None = None


@dataclass(slots=True)
class _Fleet:
    """The workers decisions are made over (the sequence last passed to :meth:`PlacementEngine.decide`)."""

    generation: int
    #: The sequence last passed: when it is that very tuple again, the fleet is the same (a tuple cannot change).
    source: Sequence[WorkerCapacity]
    workers: list[WorkerCapacity]
    members: dict[str, WorkerCapacity]
    index: dict[str, int]
    top_weight: float


def _gpu_version(w: WorkerCapacity) -> int:
    gpus = w.gpu
    return int(getattr(gpus, "version", -1)) if gpus is not None else -1
