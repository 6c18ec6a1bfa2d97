"""What goes into and comes out of the API server's semantics: request options, what an admission hook sees, the
results of lists and writes, the patch content types, and the server's clock (``now_rfc3339``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..registry import ResourceType

__all__ = [
    "APPLY_PATCH",
    "APPLY_PATCH_CBOR",
    "JSON_PATCH",
    "MERGE_PATCH",
    "PATCH_TYPES",
    "STRATEGIC_PATCH",
    "Admission",
    "Hook",
    "ListResult",
    "Obj",
    "RequestOptions",
    "WriteResult",
    "now_micro",
    "now_rfc3339",
]

Obj = dict[str, Any]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
APPLY_PATCH_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


_now_cache: tuple[int, str] = (-1, "")


def now_rfc3339() -> str:
    """The current UTC time at second precision (formatted once per second: every write stamps it)."""
    global _now_cache
    second = int(time.time())
    if _now_cache[0] != second:
        _now_cache = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _now_cache[1]


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class RequestOptions:
    """Per-request options: the query parameters of a write."""

    field_manager: str | None = None
    dry_run: bool = False
    field_validation: str = "Warn"
    force: bool = False
    user_agent: str = ""

    def manager(self, default: str) -> str:
        if self.field_manager:
            return self.field_manager
        agent = self.user_agent.split("/", 1)[0].strip()
        return agent or default


@dataclass
class Admission:
    """What an admission hook sees (in the storage version); mutating hooks change ``obj`` in place."""

    operation: str  # CREATE | UPDATE | DELETE
    resource: ResourceType
    subresource: str | None
    obj: Obj
    old: Obj | None
    dry_run: bool


Hook = Callable[[Admission], None]


@dataclass
class ListResult:
    items: list[Obj]
    resource_version: str
    continue_token: str | None = None
    remaining: int | None = None


@dataclass
class WriteResult:
    obj: Obj
    warnings: list[str] = field(default_factory=list)
    created: bool = False
    #: For deletes: the object was removed at once (the answer is a Status), not just marked.
    removed: bool = False
