"""What the nominator reads of a Workload's job on the manager: the dispatcher's own annotations.

Kueue does not copy a job's annotations onto its Workload, so ``kueue-dispatcher.io/cluster-selector`` (which
workers a job may run on, as in standalone mode) is read from the job the Workload's controller owner reference
names, once, when the nominator first takes the Workload. The read is a LIST by ``metadata.name`` field selector,
the verb deploy/rbac.yaml already grants on every job kind; the job's uid must be the owner reference's (a job
deleted and created again under the same name is another job).

A job that cannot be read now (the manager refuses, or does not answer) is not taken: its selector may exclude
workers, so nominating without it could run the job where its owner said it must not. After a failed read the
kind is not read again for a while (1 s, doubling to 60 s; a refusal or an unreachable manager holds every job of
the kind, so a thousand waiting Workloads cost one read per back-off, not a thousand per tick). A refusal is
logged at ERROR, another failure at WARNING, once per episode; each Workload held gets one Warning Event.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
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
#: The longest wait before a kind whose reads failed is read again.
MAX_BACKOFF = 60.0


class _Events(Protocol):
    def emit(self, obj: Obj, type_: str, reason: str, message: str) -> None: ...


@dataclass(frozen=True, slots=True)
class OwnerAnnotations:
    """The job's cluster selector (None: any worker), or why the annotation cannot be used."""

    selector: dict[str, str] | None = None
    problem: str | None = None


class OwnerReader:
    """Reads the owners of new Workloads (``None`` per Workload whose owner cannot be read now)."""

    def __init__(
        self,
        manager: ClusterClient,
        events: _Events,
        resources: Iterable[Resource],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.manager = manager
        self.events = events
        self.clock = clock
        self._kinds = {(r.api_version, r.kind): r for r in resources}
        self._warned: set[str] = set()
        #: plural -> (not read again before, the back-off, why the last read failed)
        self._failing: dict[str, tuple[float, float, str]] = {}
        self._gate = asyncio.Semaphore(READERS)

    async def read_all(self, workloads: Iterable[ManagerWorkload]) -> list[OwnerAnnotations | None]:
        return list(await asyncio.gather(*(self.read(mw) for mw in workloads)))

    async def read(self, mw: ManagerWorkload) -> OwnerAnnotations | None:
        owner = mw.owner
        res = self._kinds.get((str(owner.get("apiVersion")), str(owner.get("kind")))) if owner else None
        if owner is None or res is None:
            return OwnerAnnotations()  # no job, or a kind the dispatcher does not know: nothing to read
        name = str(owner.get("name", ""))
        failing = self._failing.get(res.plural)
        if failing is not None and self.clock() < failing[0]:
            self._hold(mw, res, name, failing[2])
            return None
        try:
            async with self._gate:
                found = await self.manager.list(res, mw.namespace, field_selector=f"metadata.name={name}")
        except KubeError as exc:
            why = f"{exc.code} {exc.rejection()}" if exc.rejected else exc.message
            if res.plural not in self._failing:  # the first failure of an episode is logged
                if exc.rejected:
                    log.error(
                        "the manager refuses to list %s (%s): Workloads of such jobs cannot be read for their "
                        "cluster selector and are not nominated; grant list on %s (deploy/rbac.yaml)",
                        res.plural,
                        why,
                        res.plural,
                    )
                else:
                    log.warning("cannot list %s on the manager (%s); Workloads of such jobs wait", res.plural, why)
            backoff = min(MAX_BACKOFF, self._failing[res.plural][1] * 2) if res.plural in self._failing else 1.0
            self._failing[res.plural] = (self.clock() + backoff, backoff, why)
            self._hold(mw, res, name, why)
            return None
        if self._failing.pop(res.plural, None) is not None:
            log.warning("the manager lists %s again: their Workloads are taken", res.plural)
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

    def _hold(self, mw: ManagerWorkload, res: Resource, name: str, why: str) -> None:
        """Say once on the Workload that it waits for its job to be readable."""
        if mw.uid not in self._warned:
            self._warned.add(mw.uid)
            self.events.emit(
                dict(mw.obj),
                "Warning",
                "OwnerUnreadable",
                f"kueue-dispatcher cannot read {res.kind} {mw.namespace}/{name} for its cluster selector ({why}); "
                "not nominated until it can",
            )
