"""Small helpers for building objects to send to clusters."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["strip_server_fields"]

_SERVER_META = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "ownerReferences",
    "finalizers",
    "generateName",
)


def strip_server_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``obj`` without the metadata a server assigns (uid, versions, owners, …)."""
    out = copy.deepcopy(obj)
    meta = out.get("metadata") or {}
    for key in _SERVER_META:
        meta.pop(key, None)
    return out
