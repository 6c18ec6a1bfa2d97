"""Version conversion for multi-version custom resources, as Kueue's conversion webhook does it.

Kueue serves ``v1beta1`` and ``v1beta2`` and stores ``v1beta2``. A real installation converts between
them with a webhook (``apis/kueue/v1beta1/*_conversion.go``); the simulator converts the fields whose
names or values differ and passes everything else through, so a client may use either version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .patch import clone

__all__ = ["convert"]

Obj = dict[str, Any]
KUEUE = "kueue.x-k8s.io"


def _rename(d: Obj | None, old: str, new: str) -> None:
    if isinstance(d, dict) and old in d:
        d[new] = d.pop(old)


def _cq_up(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    _rename(spec, "cohort", "cohortName")
    checks = spec.pop("admissionChecks", None)
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in checks]}
    ff = spec.get("flavorFungibility")
    if isinstance(ff, dict):
        if ff.get("whenCanBorrow") == "Borrow":
            ff["whenCanBorrow"] = "MayStopSearch"
        if ff.get("whenCanPreempt") == "Preempt":
            ff["whenCanPreempt"] = "MayStopSearch"
    status = obj.get("status")
    if isinstance(status, dict):
        status.pop("pendingWorkloadsStatus", None)


def _cq_down(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    _rename(spec, "cohortName", "cohort")
    strategy = spec.get("admissionChecksStrategy")
    if (
        isinstance(strategy, dict)
        and strategy.get("admissionChecks")
        and all(set(r) <= {"name"} for r in strategy["admissionChecks"])
    ):
        spec["admissionChecks"] = [r["name"] for r in strategy["admissionChecks"]]
        del spec["admissionChecksStrategy"]
    spec.pop("concurrentAdmissionPolicy", None)
    ff = spec.get("flavorFungibility")
    if isinstance(ff, dict):
        if ff.get("whenCanBorrow") == "MayStopSearch":
            ff["whenCanBorrow"] = "Borrow"
        if ff.get("whenCanPreempt") == "MayStopSearch":
            ff["whenCanPreempt"] = "Preempt"


def _lq_up(obj: Obj) -> None:
    status = obj.get("status")
    if isinstance(status, dict):
        _rename(status, "flavorUsage", "flavorsUsage")
        status.pop("flavors", None)


def _lq_down(obj: Obj) -> None:
    _rename(obj.get("status"), "flavorsUsage", "flavorUsage")


def _wl_up(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        source = spec.pop("priorityClassSource", None)
        name = spec.pop("priorityClassName", None)
        if name:
            if source == "kueue.x-k8s.io/workloadpriorityclass":
                spec["priorityClassRef"] = {"group": KUEUE, "kind": "WorkloadPriorityClass", "name": name}
            else:
                spec["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}
    _rename(obj.get("status"), "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds")


def _wl_down(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        ref = spec.pop("priorityClassRef", None)
        if isinstance(ref, dict) and ref.get("name"):
            spec["priorityClassName"] = ref["name"]
            spec["priorityClassSource"] = (
                "kueue.x-k8s.io/workloadpriorityclass"
                if ref.get("kind") == "WorkloadPriorityClass"
                else "scheduling.k8s.io/priorityclass"
            )
        spec.pop("preemptionGates", None)
    status = obj.get("status")
    if isinstance(status, dict):
        _rename(status, "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds")
        status.pop("preemptionGates", None)


def _mkc_up(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict) and ("kubeConfig" in spec or "clusterProfileRef" in spec):
        source = {}
        for key in ("kubeConfig", "clusterProfileRef"):
            if key in spec:
                source[key] = spec.pop(key)
        spec["clusterSource"] = source


def _mkc_down(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("clusterSource"), dict):
        spec.update(spec.pop("clusterSource"))


_UP: dict[str, Callable[[Obj], None]] = {
    "ClusterQueue": _cq_up,
    "LocalQueue": _lq_up,
    "Workload": _wl_up,
    "MultiKueueCluster": _mkc_up,
}
_DOWN: dict[str, Callable[[Obj], None]] = {
    "ClusterQueue": _cq_down,
    "LocalQueue": _lq_down,
    "Workload": _wl_down,
    "MultiKueueCluster": _mkc_down,
}


def convert(obj: Obj, group: str, kind: str, to_version: str) -> Obj:
    """``obj`` in ``group/to_version``. Returns ``obj`` itself when nothing changes (no copy)."""
    api_version = f"{group}/{to_version}" if group else to_version
    if obj.get("apiVersion") == api_version:
        return obj
    out: Obj = clone(obj)
    from_version = str(obj.get("apiVersion", "")).rpartition("/")[2]
    if group == KUEUE:
        if from_version == "v1beta1" and to_version == "v1beta2" and kind in _UP:
            _UP[kind](out)
        elif from_version == "v1beta2" and to_version == "v1beta1" and kind in _DOWN:
            _DOWN[kind](out)
    out["apiVersion"] = api_version
    return out
