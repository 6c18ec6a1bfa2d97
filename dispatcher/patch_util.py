"""Small helpers for building objects to send to clusters."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["replace_patch", "strip_server_fields"]

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


def replace_patch(known: list[Any], desired: Any) -> Any:
    """The JSON merge patch that turns *whichever* of ``known`` the server holds into ``desired``: ``desired``
    whole, with every key that any of ``known`` has and ``desired`` lacks set to null, at every level of nesting.

    A status copied from a worker must *replace* the manager's: a plain merge patch of the new status keeps
    fields the worker has dropped since (``active`` when the last pod ended, ``uncountedTerminatedPods``), and a
    real API server refuses a finished Job that still carries them. A diff against one picture of the server's
    object is not enough either: a manager object's status, written by the dispatcher alone, is one of its own
    writes (the last that succeeded, or a later one whose answer was lost), and the informer's copy may lag
    behind both, so a diff against that copy can miss a field the server still holds.
    """
    if not isinstance(desired, dict):
        return copy.deepcopy(desired)
    dicts = [k for k in known if isinstance(k, dict)]
    patch: dict[str, Any] = {}
    for d in dicts:
        for key in d:
            if key not in desired:
                patch[key] = None
    for key, value in desired.items():
        patch[key] = replace_patch([d[key] for d in dicts if key in d], value)
    return patch
