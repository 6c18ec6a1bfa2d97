"""The API server's semantics, independent of HTTP: what get, list, create, update, patch, delete and
watch do to the store. The HTTP layer (:mod:`kubesim.http`) and the in-process controllers both go through it,
so a simulated controller is held to the same rules as a real client.

:class:`Api` is put together from its parts: ``base`` (the store, schemas, admission hooks and the checks every
verb uses), ``reads`` (get, list, watch), ``writes`` (create, update, patch, apply) and ``deletes``;
``types`` holds what goes in and out (request options, admission, results, patch types, the clock).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..registry import ResourceType
from .deletes import ApiDeletes
from .reads import WatchStream
from .types import Admission, ListResult, Obj, RequestOptions, WriteResult, now_rfc3339
from .writes import ApiWrites

__all__ = ["Admission", "Api", "ListResult", "RequestOptions", "WatchStream", "WriteResult", "now_rfc3339"]


class Api(ApiWrites, ApiDeletes):
    """The semantics of one simulated API server."""

    # -- in-process conveniences for the simulated controllers ----------------------------------------

    def rt(self, group: str, kind: str) -> ResourceType:
        rt = self.registry.by_kind(group, kind)
        if rt is None:
            raise KeyError(f"{kind}.{group}")
        return rt

    def iter_objects(self, rt: ResourceType) -> Iterable[Obj]:
        """Stored objects (storage version, shared, read-only)."""
        return self.store.iter_all(rt.key)
