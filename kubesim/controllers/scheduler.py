"""A kube-scheduler for the simulated nodes: NodeResourcesFit, nodeSelector, required node affinity,
taints and tolerations, scheduling gates, and a scheduler-extender seam used by the HAMi emulation.

Pods that fit nowhere get ``PodScheduled=False`` with the real ``Unschedulable`` message
(``0/3 nodes are available: 3 Insufficient cpu.``) and are retried when pods finish or nodes change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable
from fractions import Fraction
from typing import Any, Protocol

from kubecommon.quantity import QuantityError, parse_quantity

from ..api import Api, now_rfc3339
from ..store import StoreEvent
from .base import Controller

__all__ = ["Extender", "Scheduler", "pod_requests"]

Obj = dict[str, Any]


class Extender(Protocol):
    """A scheduler extender (HAMi's scheduler plugs in here)."""

    #: Resources the extender manages; the default NodeResourcesFit ignores them (``ignoredByScheduler``).
    managed_resources: frozenset[str]

    def interested(self, pod: Obj) -> bool: ...

    def choose(
        self, pod: Obj, nodes: list[Obj], pods_on_node: dict[str, list[Obj]]
    ) -> tuple[str, dict[str, str]] | dict[str, str] | str:
        """(node name, annotations to add on bind); or, when no node fits, the extender's ``FailedNodes``
        (node name -> reason, merged into the ``0/N nodes are available`` message as kube-scheduler does) or a
        whole reason string."""
        ...


def _q(value: Any) -> Fraction:
    try:
        return parse_quantity(value)
    except QuantityError:
        return Fraction(0)


def pod_requests(spec: Obj) -> dict[str, Fraction]:
    """Effective requests: max(sum of app containers, each init container) plus overhead."""
    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] = total.get(name, Fraction(0)) + _q(q)
    for c in spec.get("initContainers") or []:
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total.get(name, Fraction(0)), _q(q))
    for name, q in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Fraction(0)) + _q(q)
    return total


def _tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator", "Equal")
        if not t.get("key"):
            if op == "Exists":
                return True
            continue
        if t.get("key") != taint.get("key"):
            continue
        if op == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _match_expression(labels: dict[str, str], expr: Obj) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    have = labels.get(str(key))
    if op == "In":
        return have in values
    if op == "NotIn":
        return have not in values
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt") and have is not None and values:
        try:
            return int(have) > int(values[0]) if op == "Gt" else int(have) < int(values[0])
        except ValueError:
            return False
    return False


def _affinity_ok(spec: Obj, labels: dict[str, str]) -> bool:
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(all(_match_expression(labels, e) for e in (term.get("matchExpressions") or [])) for term in terms)


class Scheduler(Controller):
    name = "default-scheduler"
    resources = ("pods", "nodes")

    def __init__(self, api: Api, extender: Extender | None = None) -> None:
        super().__init__(api)
        self.extender = extender
        self._parked: set[tuple[str, str, str]] = set()
        self._retry_scheduled = False
        # Bound, non-terminal pods per node and their summed requests, kept incrementally from pod events
        # (and from our own bindings at once), so a scheduling attempt costs O(nodes), not O(pods).
        self._bound: dict[tuple[str, str], tuple[str, dict[str, Fraction]]] = {}
        self._by_node: dict[str, dict[tuple[str, str], Obj]] = {}
        self._used: dict[str, dict[str, Fraction]] = {}

    def start(self) -> None:
        for pod in self.api.store.iter_all("pods"):
            self._track(pod)
        super().start()

    def _track(self, pod: Obj, deleted: bool = False) -> None:
        meta = pod["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        old = self._bound.pop(key, None)
        if old is not None:
            node, requests = old
            self._by_node.get(node, {}).pop(key, None)
            used = self._used.setdefault(node, {})
            for k, v in requests.items():
                used[k] = used.get(k, Fraction(0)) - v
        spec = pod.get("spec") or {}
        node_name = spec.get("nodeName")
        if deleted or not node_name or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        requests = pod_requests(spec)
        self._bound[key] = (str(node_name), requests)
        self._by_node.setdefault(str(node_name), {})[key] = pod
        used = self._used.setdefault(str(node_name), {})
        for k, v in requests.items():
            used[k] = used.get(k, Fraction(0)) + v

    def keys_for(self, event: StoreEvent) -> Iterable[Hashable]:
        obj = event.obj
        if event.resource == "nodes":
            return self._wake()
        self._track(obj, deleted=event.type == "DELETED")
        spec = obj.get("spec") or {}
        meta = obj["metadata"]
        phase = (obj.get("status") or {}).get("phase")
        # Capacity frees when a bound pod ends or goes away.
        if spec.get("nodeName") and (event.type == "DELETED" or phase in ("Succeeded", "Failed")):
            return self._wake()
        if event.type == "DELETED" or spec.get("nodeName") or meta.get("deletionTimestamp"):
            self._parked.discard(("pods", meta.get("namespace", ""), meta["name"]))
            return []
        return [("pods", meta.get("namespace", ""), meta["name"])]

    def _wake(self) -> list[Hashable]:
        if not self._parked or self._retry_scheduled:
            return []
        self._retry_scheduled = True
        return [("retry",)]

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        if key == ("retry",):
            self._retry_scheduled = False
            parked, self._parked = self._parked, set()
            for k in sorted(parked):
                self.reconcile(k)
            return
        _, namespace, name = key
        pod = self.api.store.get("pods", namespace, name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        spec = pod.get("spec") or {}
        if spec.get("nodeName") or spec.get("schedulingGates"):
            return
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        result = self._schedule(pod)
        if isinstance(result, str):
            self._parked.add(key)
            self._mark_unschedulable(pod, result)
            return
        node, annotations = result
        self._track(self.api.bind_pod(namespace, name, node, annotations))

    def _pods_on(self, nodes: Iterable[Obj]) -> dict[str, list[Obj]]:
        """Bound, non-terminal pods of these nodes (from the incremental index)."""
        out: dict[str, list[Obj]] = {}
        for node in nodes:
            name = node["metadata"]["name"]
            out[name] = list(self._by_node.get(name, {}).values())
        return out

    def _schedule(self, pod: Obj) -> tuple[str, dict[str, str]] | str:
        spec = pod.get("spec") or {}
        nodes = self.api.store.list("nodes")
        if not nodes:
            return "0/0 nodes are available: no nodes available to schedule pods."
        ignored = self.extender.managed_resources if self.extender and self.extender.interested(pod) else frozenset()
        want = {k: v for k, v in pod_requests(spec).items() if k not in ignored}
        reasons: Counter[str] = Counter()
        feasible: list[Obj] = []
        tolerations = spec.get("tolerations") or []
        selector = spec.get("nodeSelector") or {}
        for node in nodes:
            labels = node["metadata"].get("labels") or {}
            nspec, nstatus = node.get("spec") or {}, node.get("status") or {}
            if nspec.get("unschedulable"):
                reasons["node(s) were unschedulable"] += 1
                continue
            taint = next(
                (
                    t
                    for t in nspec.get("taints") or []
                    if t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, t)
                ),
                None,
            )
            if taint is not None:
                reasons[f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"] += 1
                continue
            if any(labels.get(k) != v for k, v in selector.items()) or not _affinity_ok(spec, labels):
                reasons["node(s) didn't match Pod's node affinity/selector"] += 1
                continue
            alloc = nstatus.get("allocatable") or nstatus.get("capacity") or {}
            node_name = node["metadata"]["name"]
            if len(self._by_node.get(node_name, {})) + 1 > int(_q(alloc.get("pods", "110"))):
                reasons["Too many pods"] += 1
                continue
            used = self._used.get(node_name, {})
            short = [r for r, q in want.items() if q > 0 and used.get(r, Fraction(0)) + q > _q(alloc.get(r, "0"))]
            if short:
                for r in sorted(short):
                    reasons[f"Insufficient {r}"] += 1
                continue
            feasible.append(node)
        if feasible and self.extender is not None and self.extender.interested(pod):
            chosen = self.extender.choose(pod, feasible, self._pods_on(feasible))
            if not isinstance(chosen, dict):
                return chosen
            # The extender's FailedNodes become those nodes' Unschedulable reasons.
            reasons.update(chosen.values())
            feasible = []
        if not feasible:
            detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
            return f"0/{len(nodes)} nodes are available: {detail}."

        # LeastAllocated-like: the node with most free cpu fraction wins; ties by name.
        def free_share(node: Obj) -> tuple[Fraction, str]:
            alloc = (node.get("status") or {}).get("allocatable") or {}
            cap = _q(alloc.get("cpu", "0")) or Fraction(1)
            used = self._used.get(node["metadata"]["name"], {}).get("cpu", Fraction(0))
            return (-(cap - used) / cap, node["metadata"]["name"])

        best = min(feasible, key=free_share)
        return best["metadata"]["name"], {}

    def _mark_unschedulable(self, pod: Obj, message: str) -> None:
        status = pod.get("status") or {}
        for c in status.get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message") == message:
                return
        new = dict(pod)
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": now_rfc3339(),
                "reason": "Unschedulable",
                "message": message,
            }
        )
        new["status"] = {**status, "conditions": conditions}
        self.client.update_status(new)
