"""What the nominator reads of a Workload's job on the manager: the dispatcher's own annotations.

Kueue does not copy a job's annotations onto its Workload, so ``kueue-dispatcher.io/cluster-selector`` (which
workers a job may run on, as in standalone mode) is read from the job the Workload's controller owner reference
names, once, when the nominator first takes the Workload. The read is a LIST by ``metadata.name`` field selector,
the verb deploy/rbac.yaml already grants on every job kind; the job's uid must be the owner reference's (a job
deleted and created again under the same name is another job).

A job that cannot be read now (the manager refuses, or does not answer) is not taken: its selector may exclude
workers, so nominating without it could run the job where its owner said it must not. It is tried again every
tick; a refusal is logged at ERROR and said once on the Workload as a Warning Event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from .. import labels as L
from ..intake import parse_cluster_selector
from ..kube.client import ClusterClient, KubeError, Resource
from .rules import ManagerWorkload

__all__ = ["OwnerAnnotations", "OwnerReader"]

log = logging.getLogger("dispatcher.native")
Obj = dict[str, Any]
#: Concurrent reads of owners (a burst of new Workloads).
READERS = 16


class _Events(Protocol):
    def emit(self, obj: Obj, type_: str, reason: str, message: str) -> None: ...


@dataclass(frozen=True, slots=True)
class OwnerAnnotations:
    """The job's cluster selector (None: any worker), or why the annotation cannot be used."""

    selector: dict[str, str] | None = None
    problem: str | None = None


class OwnerReader:
    """Reads the owners of new Workloads (``None`` per Workload whose owner cannot be read now)."""

    def __init__(self, manager: ClusterClient, events: _Events, resources: Iterable[Resource]) -> None:
        self.manager = manager
        self.events = events
        self._kinds = {(r.api_version, r.kind): r for r in resources}
        self._warned: set[str] = set()
        self._refused: str | None = None
        self._gate = asyncio.Semaphore(READERS)

    async def read_all(self, workloads: Iterable[ManagerWorkload]) -> list[OwnerAnnotations | None]:
        return list(await asyncio.gather(*(self.read(mw) for mw in workloads)))

    async def read(self, mw: ManagerWorkload) -> OwnerAnnotations | None:
        owner = mw.owner
        res = self._kinds.get((str(owner.get("apiVersion")), str(owner.get("kind")))) if owner else None
        if owner is None or res is None:
            return OwnerAnnotations()  # no job, or a kind the dispatcher does not know: nothing to read
        name = str(owner.get("name", ""))
        try:
            async with self._gate:
                found = await self.manager.list(res, mw.namespace, field_selector=f"metadata.name={name}")
        except KubeError as exc:
            self._cannot_read(mw, res, name, exc)
            return None
        self._refused = None
        self._warned.discard(mw.uid)
        job = next(
            (o for o in found.get("items") or [] if (o.get("metadata") or {}).get("uid") == owner.get("uid")), None
        )
        if job is None:
            return OwnerAnnotations()  # gone already: its Workload goes next
        raw = ((job.get("metadata") or {}).get("annotations") or {}).get(L.CLUSTER_SELECTOR)
        try:
            return OwnerAnnotations(selector=parse_cluster_selector(raw))
        except ValueError as exc:
            return OwnerAnnotations(problem=f"metadata.annotations[{L.CLUSTER_SELECTOR}]: {exc}")

    def _cannot_read(self, mw: ManagerWorkload, res: Resource, name: str, exc: KubeError) -> None:
        what = f"{res.kind} {mw.namespace}/{name}"
        if exc.rejected:
            why = f"{exc.code} {exc.rejection()}"
            if self._refused != why:
                self._refused = why
                log.error(
                    "the manager refuses to list %s (%s): a Workload's job cannot be read for its cluster selector, "
                    "so it is not nominated; grant list on %s (deploy/rbac.yaml)",
                    res.plural,
                    why,
                    res.plural,
                )
        else:
            why = exc.message
            log.warning("%s: cannot read it for its cluster selector (%s); trying again", what, why)
        if mw.uid not in self._warned:
            self._warned.add(mw.uid)
            self.events.emit(
                dict(mw.obj),
                "Warning",
                "OwnerUnreadable",
                f"kueue-dispatcher cannot read {what} for its cluster selector ({why}); not nominated until it can",
            )
