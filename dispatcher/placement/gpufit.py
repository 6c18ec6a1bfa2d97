"""The placement engine's HAMi fit (``GpuFitter``): a workload's pod sets onto one worker's GPU nodes.

:class:`HamiFitter` runs :func:`~.hami.inventory.fit_pod_set` for each pod set on the worker's
:class:`~.hami.inventory.GpuInventory` (kept by :class:`~.gpu.WorkerGpus`), chaining the placements. Node choice
inside the worker is HAMi's own (the pod's ``hami.io/node-scheduler-policy`` annotation, else the configured
default, binpack), because that is what the worker's HAMi will do with the pods. The dispatcher's ``policy.mode``
only decides the direction of the score: ``binpack`` rewards a high utilisation of the chosen nodes after
placement, ``spread`` a low one. Fits are cached per GPU view and fit key (:meth:`HamiFitter.key`), and a fit of
one pod after a change is made incrementally (:mod:`.refit`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from .gpu import Allocation, WorkerGpus
from .hami.devices import DEFAULT_CONFIG, DeviceUsage, HamiConfig
from .hami.inventory import GpuInventory, fit_pod_set, utilisation
from .hami.names import POLICY_SPREAD
from .hami.selection import PreparedPod, prepare_pod
from .refit import refit_plan, remember_fit
from .verdicts import GpuVerdict
from .workload import PodSetSpec

if TYPE_CHECKING:
    from .worker import WorkerCapacity

__all__ = ["HamiFitter"]

Obj = dict[str, Any]

_PREPARED_CACHE_LIMIT = 4096


def _format_quantity(value: Fraction) -> str | None:
    return str(value.numerator) if value.denominator == 1 and value >= 0 else None


class _FitKey:
    """See :meth:`HamiFitter.key`. Holds the pod sets as prepared for the first workload it was made for: every
    workload given the same key has pod sets equal in all the fit reads (names, counts, node selectors, the pods
    as HAMi sees them), so a fit under the key need not prepare the current workload's pods again."""

    __slots__ = ("prepared", "single")

    def __init__(self, prepared: list[tuple[PodSetSpec, PreparedPod]]) -> None:
        self.prepared = prepared
        requested = [(ps, pod) for ps, pod in prepared if ps.count > 0 and pod.has_request]
        #: The one pod HAMi places, when that is all the fit does (one pod, no node selector): then it can be
        #: fitted again incrementally (:mod:`.refit`).
        self.single = (
            requested[0]
            if len(requested) == 1 and requested[0][0].count == 1 and not requested[0][0].node_selector
            else None
        )


class HamiFitter:
    """The placement engine's HAMi fit (``GpuFitter``) with one HAMi configuration for every worker."""

    def __init__(self, cfg: HamiConfig = DEFAULT_CONFIG) -> None:
        self.cfg = cfg
        self._hami_resources = frozenset(
            {cfg.resource_count, cfg.resource_memory, cfg.resource_memory_percentage, cfg.resource_cores}
        )
        #: id(template) -> (template, prepared pod); the template is held so its id stays unique.
        self._prepared: dict[int, tuple[Mapping[str, Any], PreparedPod]] = {}
        #: What a fit depends on -> its number (see :meth:`key`).
        self._keys: dict[Hashable, _FitKey] = {}

    def prepare(self, ps: PodSetSpec) -> PreparedPod:
        """The pod set's pod as HAMi sees it (webhook defaults applied), cached per template object."""
        entry = self._prepared.get(id(ps.template))
        if entry is not None and entry[0] is ps.template:
            return entry[1]
        template = ps.template
        spec: Mapping[str, Any] = template.get("spec") or {}
        if not spec.get("containers") and not spec.get("initContainers"):
            spec = self._spec_from_requests(ps)
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        prepared = prepare_pod(spec, annotations, self.cfg)
        if len(self._prepared) >= _PREPARED_CACHE_LIMIT:
            self._prepared.clear()
        self._prepared[id(template)] = (template, prepared)
        return prepared

    def _spec_from_requests(self, ps: PodSetSpec) -> Obj:
        """A one-container pod spec from the pod set's per-pod HAMi requests (a template without containers)."""
        limits = {}
        for res, amount in ps.requests.items():
            if res in self._hami_resources:
                text = _format_quantity(amount)
                if text is not None:
                    limits[res] = text
        return {"containers": [{"name": "main", "resources": {"limits": limits}}]} if limits else {}

    def wants(self, pod_sets: Sequence[PodSetSpec]) -> bool:
        """Whether any pod set asks HAMi for vGPUs (its template after the webhook, or its requests)."""
        for ps in pod_sets:
            if ps.count <= 0:
                continue
            if any(amount > 0 and res in self._hami_resources for res, amount in ps.requests.items()):
                return True
            if self.prepare(ps).has_request:
                return True
        return False

    def key(self, pod_sets: Sequence[PodSetSpec], mode: str) -> Hashable:
        """A token standing for what the fit depends on besides the worker (the pods as HAMi sees them, their node
        selectors, the mode): fits are cached per worker under it, and computing it once per workload shape saves
        preparing and hashing the pods on every fit. Tokens hash by identity, so no two fitters' tokens collide
        in a worker's cache."""
        pods = [self.prepare(ps) for ps in pod_sets]
        prepared = tuple(
            (ps.name, ps.count, pod, tuple(sorted(ps.node_selector.items())))
            for ps, pod in zip(pod_sets, pods, strict=True)
        )
        full = (self.cfg, mode, prepared)
        key = self._keys.get(full)
        if key is None:
            if len(self._keys) >= _PREPARED_CACHE_LIMIT:
                self._keys.clear()
            key = self._keys[full] = _FitKey(list(zip(pod_sets, pods, strict=True)))
        return key

    def fit(
        self, worker: WorkerCapacity, pod_sets: Sequence[PodSetSpec], mode: str, key: Hashable | None = None
    ) -> GpuVerdict:
        """Place every pod of every pod set on the worker's GPUs as its HAMi would; score by ``mode``. ``key``:
        :meth:`key` of these pod sets and mode, when the caller kept it."""
        gpus = worker.gpu
        if not isinstance(gpus, WorkerGpus):
            return GpuVerdict(False, "the cluster has no HAMi GPU nodes")
        if not gpus.has_gpus:
            unusable = gpus.unusable()
            detail = "; ".join(f"{n}: {p}" for n, p in sorted(unusable.items())[:3])
            return GpuVerdict(
                False, "the cluster has no usable HAMi GPU nodes" + (f" ({detail})" if detail else ""), score=0.0
            )
        if key is None:
            key = self.key(pod_sets, mode)
        cached = gpus.cached_fit(key)
        if cached is not None:
            return cached
        if isinstance(key, _FitKey):
            prepared, single = key.prepared, key.single
        else:
            prepared, single = [(ps, self.prepare(ps)) for ps in pod_sets], None
        verdict = None
        if single is not None:
            spread = single[1].selectors.node_policy == POLICY_SPREAD
            plan = refit_plan(gpus, gpus.last_fits.get(key), spread)
            if isinstance(plan, GpuVerdict):
                verdict = plan
            elif plan is not None:
                verdict = self._fit(gpus, prepared, mode, candidates=plan)
        if verdict is None:
            verdict = self._fit(gpus, prepared, mode)
        if single is not None:
            remember_fit(gpus, key, verdict, spread)
        if not verdict.ok and not self._fit(gpus, prepared, mode, gpus.empty_inventory()).ok:
            # Not even on these GPUs with nothing running (more GPUs per pod than a node has, more memory than
            # a GPU has): waiting never helps. Said so, and not counted as waiting for capacity.
            verdict = GpuVerdict(False, f"{verdict.reason} (never: not even with every GPU free)", 0.0, permanent=True)
        gpus.store_fit(key, verdict)
        return verdict

    def _fit(
        self,
        gpus: WorkerGpus,
        prepared: Sequence[tuple[PodSetSpec, PreparedPod]],
        mode: str,
        base: GpuInventory | None = None,
        candidates: Iterable[str] | None = None,
    ) -> GpuVerdict:
        """``candidates``: for a fit of one pod (``_FitKey.single``), the only nodes that can have a new answer."""
        base = base if base is not None else gpus.inventory()
        inv = base
        touched: dict[str, None] = {}
        #: node -> devices after every pod set so far (what ``inv`` holds for the touched nodes).
        after: dict[str, tuple[DeviceUsage, ...]] = {}
        requested = [(ps, pod) for ps, pod in prepared if ps.count > 0 and pod.has_request]
        for i, (ps, pod) in enumerate(requested):
            view = inv
            if ps.node_selector:
                selector = ps.node_selector.items()
                states = {n: s for n, s in inv.states.items() if all(gpus.labels(n).get(k) == v for k, v in selector)}
                if not states:
                    wanted = ",".join(f"{k}={v}" for k, v in sorted(selector))
                    return GpuVerdict(False, f"pod set {ps.name}: no HAMi GPU node matches its nodeSelector {wanted}")
                view = GpuInventory(_states=states)
            result = fit_pod_set(view, pod, ps.count, cfg=self.cfg, candidates=candidates)
            if not result.ok:
                return GpuVerdict(False, f"pod set {ps.name}: {result.reason}", score=0.0)
            if i < len(requested) - 1:  # the next pod set sees this one's pods
                inv = inv.apply(result)
            after.update(result.usage_after)
            touched.update(dict.fromkeys(result.nodes))
        allocations: dict[str, list[Allocation]] = {}
        for name in touched:
            taken: list[Allocation] = []
            for old, new in zip(base.devices(name), after[name], strict=True):
                mem = new.usedmem - old.usedmem
                cores = new.usedcores - old.usedcores
                slots = new.used - old.used
                if mem or cores or slots:
                    taken.append((new.info.id, mem, cores, slots))
            if taken:
                allocations[name] = taken
        if not touched:
            return GpuVerdict(True, "", 0.5, {})
        util = sum(utilisation(after[n]) for n in touched) / len(touched)
        score = util if mode != "spread" else 1.0 - util
        return GpuVerdict(True, "", max(0.0, min(1.0, score)), allocations)
