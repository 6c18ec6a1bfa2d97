"""Small helpers for building objects to send to clusters."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["merge_patch_to", "strip_server_fields"]

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


def merge_patch_to(current: Any, desired: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns ``current`` into ``desired``: keys ``current`` has and
    ``desired`` lacks are set to null, nested objects are diffed, anything else is replaced whole.

    A status copied from a worker must *replace* the manager's: a plain merge patch of the new status keeps
    fields the worker has dropped since (``active`` when the last pod ended, ``uncountedTerminatedPods``), and a
    real API server refuses a finished Job that still carries them.
    """
    if not isinstance(current, dict) or not isinstance(desired, dict):
        return copy.deepcopy(desired)
    patch: dict[str, Any] = {}
    for key in current:
        if key not in desired:
            patch[key] = None
    for key, value in desired.items():
        if key not in current:
            patch[key] = copy.deepcopy(value)
        elif current[key] != value:
            patch[key] = merge_patch_to(current[key], value)
    return patch
