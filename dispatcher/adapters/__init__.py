"""One module per workload kind: how it is taken, its pod sets, its remote copy and its status."""

from __future__ import annotations

from .base import Adapter

__all__ = ["default_adapters"]


def default_adapters() -> list[Adapter]:
    """Every kind the dispatcher knows: ``batch/v1`` Job, JobSet, PyTorchJob, TFJob, RayJob, RayCluster.

    A cluster that does not serve a kind's CRD is fine: its informers find the resource missing and the
    kind is skipped there (see :class:`~dispatcher.kube.informer.Informer`)."""
    from .job import JobAdapter
    from .jobset import JobSetAdapter
    from .pytorchjob import PyTorchJobAdapter
    from .raycluster import RayClusterAdapter
    from .rayjob import RayJobAdapter
    from .tfjob import TFJobAdapter

    return [
        JobAdapter(),
        JobSetAdapter(),
        PyTorchJobAdapter(),
        TFJobAdapter(),
        RayJobAdapter(),
        RayClusterAdapter(),
    ]
