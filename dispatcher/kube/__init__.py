"""The only user of kubernetes_asyncio: per-cluster clients and informers."""

from .client import ClusterClient, KubeError, Resource, connect
from .informer import Informer

__all__ = ["ClusterClient", "Informer", "KubeError", "Resource", "connect"]
