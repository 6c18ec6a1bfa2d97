"""A workload waiting for a worker, as the engine and the pending queue keep it in memory.

:class:`PendingWorkload` with its pod sets (:class:`PodSetSpec`), and its shape: everything a worker's verdict
depends on, the key under which :class:`~.engine.PlacementEngine` keeps verdicts and :class:`~.queue.PendingQueue`
groups workloads. One tuple per distinct shape is kept, shared by every workload of that shape.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..quantity import parse_quantity
from .kueue.specs import NodeSelectorRequirement, Toleration
from .kueue.topology import TopologyRequest, topology_request
from .kueue.workloads import pod_constraints

__all__ = ["PendingWorkload", "PodSetSpec"]


@dataclass(slots=True, frozen=True)
class PodSetSpec:
    """A pod set as the engine keeps it in memory."""

    name: str
    count: int
    #: Per-pod requests, before any worker's Kueue transformations.
    requests: Mapping[str, Fraction]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    node_affinity: tuple[tuple[NodeSelectorRequirement, ...], ...] | None = None
    #: The pod template (for HAMi: annotations and containers); shared, read-only.
    template: Mapping[str, Any] = field(default_factory=dict)
    #: Kueue's ``minCount``: the worker's Kueue may admit as few pods when all do not fit (partial admission).
    min_count: int | None = None
    #: Kueue's TAS request, from the template's ``kueue.x-k8s.io/podset-*-topology`` annotations (``None``: none).
    topology: TopologyRequest | None = None

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> PodSetSpec:
        """From the pod set as SQL keeps it (``dispatcher.resources.PodSet.to_json`` plus its template)."""
        template = raw.get("template") or {}
        pod_spec = template.get("spec") if isinstance(template, Mapping) else None
        node_selector, tolerations, affinity = pod_constraints(pod_spec if isinstance(pod_spec, Mapping) else {})
        min_count = raw.get("minCount")
        annotations = (template.get("metadata") or {}).get("annotations") if isinstance(template, Mapping) else None
        return cls(
            name=str(raw.get("name", "main")),
            count=int(raw.get("count", 1)),
            requests={k: _quantity(v) for k, v in (raw.get("requests") or {}).items()},
            node_selector=node_selector,
            tolerations=tolerations,
            node_affinity=affinity,
            template=template,
            min_count=int(min_count) if min_count is not None else None,
            topology=topology_request(annotations) if isinstance(annotations, Mapping) else None,
        )

    def shape(self) -> tuple[Any, ...]:
        return (
            self.name,
            self.count,
            tuple(sorted(self.requests.items())),
            tuple(sorted(self.node_selector.items())),
            self.tolerations,
            self.node_affinity,
            _gpu_shape(self.template),
            self.min_count,
            self.topology,
        )


@functools.lru_cache(maxsize=4096, typed=True)
def _quantity(value: str | int | float) -> Fraction:
    """``parse_quantity`` for the few distinct request strings that 100,000 workloads repeat (a Fraction is
    immutable, so one is shared by every pod set that asks for the same amount)."""
    return parse_quantity(value)


def _gpu_shape(template: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a template matters to HAMi beyond the pod's summed requests: its selection annotations, and each
    container's own resources and privilege (HAMi fits per container, and its webhook skips privileged ones:
    two pods with the same sums can need different GPUs)."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    selected = tuple(sorted((k, v) for k, v in annotations.items() if k.startswith(("nvidia.com/", "hami.io/"))))
    spec = template.get("spec") or {}
    containers: list[tuple[Any, ...]] = []
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or ():
            if not isinstance(c, Mapping):
                continue
            resources = c.get("resources") or {}
            limits = resources.get("limits") or {}
            requests = resources.get("requests") or {}
            privileged = bool((c.get("securityContext") or {}).get("privileged"))
            containers.append(
                (group, tuple(sorted(map(str, limits.items()))), tuple(sorted(map(str, requests.items()))), privileged)
            )
    return (selected, tuple(containers))


_SHAPES: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_SHAPES_LIMIT = 65_536


@dataclass(slots=True)
class PendingWorkload:
    """A workload waiting for a worker, as the engine and the pending queue see it."""

    id: int
    uid: str
    namespace: str
    name: str
    queue: str
    priority: int
    created: float
    generation: int
    pod_sets: tuple[PodSetSpec, ...]
    selector: Mapping[str, str] | None = None
    excluded: frozenset[str] = frozenset()
    kind: str = ""
    #: The WorkloadPriorityClass its Kueue label names: a worker without it would refuse the copy.
    priority_class: str | None = None
    _shape: tuple[Any, ...] | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def shape(self) -> tuple[Any, ...]:
        """Everything a worker's verdict depends on (cache key)."""
        if self._shape is None:
            shape = (
                self.namespace,
                self.queue,
                self.priority,
                self.priority_class,
                tuple(ps.shape() for ps in self.pod_sets),
            )
            # One tuple per distinct shape, shared by every workload of that shape (100,000 workloads of a few
            # hundred shapes would otherwise hold 100,000 copies).
            if len(_SHAPES) >= _SHAPES_LIMIT:
                _SHAPES.clear()
            self._shape = _SHAPES.setdefault(shape, shape)
        return self._shape

    @property
    def group(self) -> tuple[Any, ...]:
        """Workloads of one group get the same verdicts: if the best of them cannot be placed, none can."""
        return (self.kind, self.shape, tuple(sorted((self.selector or {}).items())), tuple(sorted(self.excluded)))
