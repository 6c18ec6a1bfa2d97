"""The simulated Kueue's topology ungater: the pods of a TAS workload leave the ``kueue.x-k8s.io/topology``
scheduling gate with a node selector naming their domain.

Follows Kueue v0.17.0 ``pkg/controller/tas/topology_ungater.go`` (the greedy assignment: per pod set, the gated pods
of the Workload, in name order, fill each domain of the admission's ``topologyAssignment`` up to its count, pods
already ungated there counted first; each gets the domain's level values as ``nodeSelector`` and loses the gate).
The rank-based order Kueue uses for indexed Jobs is not simulated: the pods of one Job are interchangeable here.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable

from ..errors import ApiError
from ..kueue.tasnodes import assignment_from_api
from ..patch import clone
from .kueue_cache import WL, KueueBase
from .kueue_model import PODSET_LABEL, TOPOLOGY_GATE, WORKLOAD_ANNOTATION, has_quota_reservation

__all__ = ["TopologyUngaterMixin"]

log = logging.getLogger("kubesim.kueue")


class TopologyUngaterMixin(KueueBase):
    """``topologyUngater``: reconcile key ``("ungate", namespace, workload)``."""

    def _ungate_keys(self, ns: str, name: str) -> list[Hashable]:
        pod = self.api.store.get("pods", ns, name)
        if pod is None:
            return []
        gates = (pod.get("spec") or {}).get("schedulingGates") or ()
        if not any(g.get("name") == TOPOLOGY_GATE for g in gates):
            return []
        workload = ((pod.get("metadata") or {}).get("annotations") or {}).get(WORKLOAD_ANNOTATION)
        return [("ungate", ns, workload)] if workload else []

    def _reconcile_ungate(self, ns: str, workload: str) -> None:
        wl = self.api.store.get(WL, ns, workload)
        if wl is None or not has_quota_reservation(wl):
            return
        admission = (wl.get("status") or {}).get("admission") or {}
        pods = [
            p
            for p in self.api.store.iter_all("pods")
            if p["metadata"].get("namespace") == ns
            and ((p["metadata"].get("annotations") or {}).get(WORKLOAD_ANNOTATION)) == workload
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        for psa in admission.get("podSetAssignments") or ():
            placed = assignment_from_api(psa.get("topologyAssignment"))
            if placed is None:
                continue
            levels, domains = placed
            mine = sorted(
                (p for p in pods if (p["metadata"].get("labels") or {}).get(PODSET_LABEL) == psa.get("name")),
                key=lambda p: p["metadata"]["name"],
            )
            gated: list[dict[str, object]] = []
            placed_count: dict[tuple[str, ...], int] = {}
            for p in mine:
                spec = p.get("spec") or {}
                if any(g.get("name") == TOPOLOGY_GATE for g in spec.get("schedulingGates") or ()):
                    gated.append(p)
                else:
                    key = tuple((spec.get("nodeSelector") or {}).get(level, "") for level in levels)
                    placed_count[key] = placed_count.get(key, 0) + 1
            for values, count in domains:
                room = max(count - placed_count.get(values, 0), 0)
                while room > 0 and gated:
                    self._ungate(gated.pop(0), dict(zip(levels, values, strict=True)))
                    room -= 1

    def _ungate(self, pod: dict[str, object], selector: dict[str, str]) -> None:
        new = clone(pod)
        spec = new.setdefault("spec", {})
        assert isinstance(spec, dict)
        spec["schedulingGates"] = [g for g in spec.get("schedulingGates") or () if g.get("name") != TOPOLOGY_GATE]
        if not spec["schedulingGates"]:
            spec.pop("schedulingGates")
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **selector}
        try:
            self.client.update(new)
        except ApiError as err:
            log.info("kueue: ungating a pod failed: %s", err.message)
