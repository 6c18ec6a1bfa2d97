"""The mirror: the remote copy of a manager workload on the chosen worker, created and deleted safely.

A copy has the manager object's namespace and name, keeps its queue-name label, drops
``spec.managedBy`` and is created suspended so the worker's Kueue admits it. Labels tie it to its
origin: the manager (``origin``), the workload uid and the placement generation; the placement id is
an annotation. Those labels are what makes every step idempotent:

- creating again after a crash is harmless: an AlreadyExists whose object carries our workload uid
  and generation is success (the object's uid is adopted);
- an AlreadyExists for anything else (a user's own Job of that name, an older generation being
  deleted) is a rejection of this worker for this workload, never an overwrite;
- deletes carry a uid precondition, so a newer copy of the same name is never deleted by mistake.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import labels as L
from .adapters.base import Adapter
from .kube.client import ClusterClient, KubeError, Resource

if TYPE_CHECKING:
    from .live import Live
    from .runtime import Runtime

__all__ = [
    "MirrorResult",
    "copy_labels",
    "create_copy",
    "delete_copy",
    "delete_remote",
    "gate_pod_templates",
    "is_our_copy",
]

log = logging.getLogger("dispatcher.mirror")
Obj = dict[str, Any]

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)


@dataclass(frozen=True)
class MirrorResult:
    ok: bool
    remote_uid: str | None = None
    error: str = ""
    #: The worker will not take this copy however often we try (validation, a foreign object of that name).
    permanent: bool = False


def copy_labels(origin: str, workload_uid: str, generation: int) -> dict[str, str]:
    return {L.ORIGIN: origin, L.WORKLOAD_UID: workload_uid, L.GENERATION: str(generation)}


def gate_pod_templates(body: Obj, origin: str, workload_uid: str, generation: int) -> int:
    """Put :data:`~.labels.RACE_GATE` on every pod template in ``body`` (any kind: a template is a mapping whose
    ``spec`` has ``containers``), with labels naming the workload and generation. Returns how many."""
    found = 0

    def walk(node: Any) -> None:
        nonlocal found
        if isinstance(node, list):
            for item in node:
                walk(item)
            return
        if not isinstance(node, dict):
            return
        spec = node.get("spec")
        if "template" not in node and isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            meta = node.setdefault("metadata", {})
            labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
            meta["labels"] = {
                **labels,
                L.RACE_GATE: origin,
                L.WORKLOAD_UID: workload_uid,
                L.GENERATION: str(generation),
            }
            gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != L.RACE_GATE]
            spec["schedulingGates"] = [*gates, {"name": L.RACE_GATE}]
            found += 1
            return
        for value in node.values():
            walk(value)

    walk(body.get("spec"))
    return found


def is_our_copy(obj: Obj, origin: str, workload_uid: str, generation: int | None = None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(L.ORIGIN) != origin or labels.get(L.WORKLOAD_UID) != workload_uid:
        return False
    return generation is None or labels.get(L.GENERATION) == str(generation)


async def _ensure_namespace(client: ClusterClient, namespace: str) -> None:
    try:
        await client.create(
            NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
    except KubeError as exc:
        if not exc.already_exists:
            raise


async def create_copy(
    client: ClusterClient,
    adapter: Adapter,
    manager_obj: Obj,
    *,
    origin: str,
    workload_uid: str,
    generation: int,
    placement_id: int,
    create_namespace: bool,
    gate: bool = False,
) -> MirrorResult:
    """Create the copy (idempotent). Transient failures raise :class:`KubeError` for the caller to retry.
    ``gate``: a race copy, whose pods wait behind :data:`~.labels.RACE_GATE` until it has won."""
    namespace = (manager_obj.get("metadata") or {}).get("namespace") or "default"
    name = (manager_obj.get("metadata") or {}).get("name") or ""
    body = adapter.remote_copy(
        manager_obj,
        copy_labels(origin, workload_uid, generation),
        {L.PLACEMENT_ID: str(placement_id)},
    )
    if gate:
        gate_pod_templates(body, origin, workload_uid, generation)
    res = adapter.resource
    try:
        created = await client.create(res, namespace, body)
        return MirrorResult(True, (created.get("metadata") or {}).get("uid"))
    except KubeError as exc:
        if exc.transient:
            raise
        if exc.not_found and create_namespace:
            await _ensure_namespace(client, namespace)
            try:
                created = await client.create(res, namespace, body)
            except KubeError as again:
                if not again.not_found:
                    raise
                return MirrorResult(
                    False, error=f"{client.name} does not serve {res.kind} ({res.api_version})", permanent=True
                )
            return MirrorResult(True, (created.get("metadata") or {}).get("uid"))
        if exc.not_found:
            return MirrorResult(
                False, error=f"namespace {namespace} does not exist on {client.name} (createNamespaces is off)"
            )
        if exc.already_exists:
            existing = await client.get(res, namespace, name)
            if existing is None:  # deleted in between: try once more later
                raise KubeError(0, "Gone", f"{res.kind} {namespace}/{name} vanished during create") from None
            if is_our_copy(existing, origin, workload_uid, generation):
                return MirrorResult(True, (existing.get("metadata") or {}).get("uid"))
            if is_our_copy(existing, origin, workload_uid):
                # An older generation of ours still being deleted: transient.
                raise KubeError(
                    0, "OlderCopy", f"an older copy of {namespace}/{name} is still on {client.name}"
                ) from None
            return MirrorResult(
                False,
                error=f"{res.kind} {namespace}/{name} already exists on {client.name} and is not ours",
                permanent=True,
            )
        return MirrorResult(
            False,
            error=f"{client.name} refused the copy: {exc.code} {exc.reason}: {exc.message}",
            permanent=exc.code in (400, 403, 422),
        )


async def delete_copy(client: ClusterClient, res: Resource, namespace: str, name: str, uid: str | None) -> bool:
    """Delete a copy and its pods (Background). True when gone (or never there); KubeError when unreachable."""
    try:
        await client.delete(res, namespace, name, propagation="Background", uid=uid)
    except KubeError as exc:
        if exc.code == 409 and uid:  # precondition failed: a different object of that name; ours is gone
            return True
        raise
    return True


async def delete_remote(rt: Runtime, live: Live, cluster: str, adapter: Adapter) -> None:
    """Delete ``live``'s copy on ``cluster``, retrying while the worker is unreachable. The uid guard spares other
    objects of that name (a user's own Job, a newer generation)."""
    client = rt.clients.get(cluster)
    if client is None:
        return
    view = rt.views.get(cluster)
    remote = view.remote_jobs(adapter.resource.plural).get((live.namespace, live.name)) if view else None
    uid = live.remote_uid
    if remote is not None and is_our_copy(remote, rt.config.origin, live.uid):
        uid = (remote.get("metadata") or {}).get("uid") or uid
    elif remote is not None:
        return  # not ours
    delay = 0.2
    while True:
        if rt.stopping:
            raise asyncio.CancelledError  # never go on as if the copy were gone
        try:
            await delete_copy(client, adapter.resource, live.namespace, live.name, uid)
            rt.copies_deleted += 1
            return
        except KubeError as exc:
            log.info("deleting the copy of %s on %s failed (%s); retrying", live.key, cluster, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 15.0)
