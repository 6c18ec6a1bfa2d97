"""Kubeflow TFJob (``kubeflow.org/v1``): pod sets ``chief``, ``master``, ``ps``, ``worker``, ``evaluator``
(those present, in that order; see ``kubeflow.py``)."""

from __future__ import annotations

from ..kube.client import Resource
from .kubeflow import KubeflowAdapter

__all__ = ["TFJobAdapter"]


class TFJobAdapter(KubeflowAdapter):
    kind = "TFJob"
    resource = Resource("kubeflow.org", "v1", "tfjobs", "TFJob")
    replica_specs_field = "tfReplicaSpecs"
    replica_types = ("Chief", "Master", "PS", "Worker", "Evaluator")
