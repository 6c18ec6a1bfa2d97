"""Kubeflow PyTorchJob (``kubeflow.org/v1``): pod sets ``master`` and ``worker`` (see ``kubeflow.py``)."""

from __future__ import annotations

from ..kube.client import Resource
from .kubeflow import KubeflowAdapter

__all__ = ["PyTorchJobAdapter"]


class PyTorchJobAdapter(KubeflowAdapter):
    kind = "PyTorchJob"
    resource = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
    replica_specs_field = "pytorchReplicaSpecs"
    replica_types = ("Master", "Worker")
