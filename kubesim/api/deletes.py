"""The API server's deletes: delete with preconditions, propagation policies, finalizers and graceful pod
deletion; deletecollection; and the pod binding and the kubelet's last step of a pod's deletion."""

from __future__ import annotations

import builtins

from .. import errors
from ..errors import ApiError, Cause
from ..patch import clone
from ..registry import ResourceType
from .reads import ApiReads
from .types import Admission, Obj, WriteResult, now_rfc3339

__all__ = ["ApiDeletes"]


class ApiDeletes(ApiReads):
    """The verbs that delete (deletecollection lists first), and the pod binding."""

    # -- delete --------------------------------------------------------------------------------------

    def delete(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        options: Obj | None = None,
        *,
        dry_run: bool = False,
    ) -> WriteResult:
        options = options or {}
        ns = self._ns(rt, namespace)
        current = self.store.get(rt.key, ns, name)
        if current is None:
            raise self._not_found(rt, name)
        meta = current["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise errors.conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta.get('uid')}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise errors.conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
            )
        propagation = options.get("propagationPolicy")
        if propagation is None and options.get("orphanDependents") is not None:
            propagation = "Orphan" if options["orphanDependents"] else "Background"
        warnings: builtins.list[str] = []
        if propagation is None:
            # batch/v1 Job keeps the legacy default of orphaning its pods, and says so.
            propagation = "Orphan" if rt.key == "jobs.batch" else "Background"
            if rt.key == "jobs.batch":
                warnings.append(
                    "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to "
                    "remove them or set propagationPolicy=Orphan to suppress this warning"
                )
        if propagation not in ("Orphan", "Background", "Foreground"):
            raise errors.invalid(
                "DeleteOptions",
                "meta.k8s.io",
                "",
                [
                    Cause(
                        "propagationPolicy",
                        f'Unsupported value: "{propagation}": supported values: "Foreground", "Background", "Orphan"',
                        "FieldValueNotSupported",
                    )
                ],
            )
        self._admit(Admission("DELETE", rt, None, current, current, dry_run))
        finalizers = list(meta.get("finalizers") or [])
        if propagation == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        elif propagation == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        grace = options.get("gracePeriodSeconds")
        graceful = (
            rt.key == "pods"
            and (current.get("spec") or {}).get("nodeName")
            and (current.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and (grace is None or grace > 0)
        )
        if rt.key == "namespaces":
            finalizers = finalizers or []
        if dry_run:
            return WriteResult(self.to_version(rt, current, version), warnings)
        if meta.get("deletionTimestamp"):
            if not graceful and grace == 0 and rt.key == "pods":
                rv = self.store.next_rv()
                gone = self.store.remove(rt.key, ns, name, rv)
                return WriteResult(self.to_version(rt, gone or current, version), warnings, removed=True)
            return WriteResult(self.to_version(rt, current, version), warnings)
        needs_marking = bool(finalizers) or graceful or rt.key == "namespaces"
        if needs_marking:
            new = clone(current)
            nmeta = new["metadata"]
            nmeta["deletionTimestamp"] = now_rfc3339()
            if graceful:
                nmeta["deletionGracePeriodSeconds"] = int(
                    grace if grace is not None else (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
                )
            else:
                nmeta["deletionGracePeriodSeconds"] = 0
            if finalizers:
                nmeta["finalizers"] = finalizers
            if rt.key == "namespaces":
                new.setdefault("status", {})["phase"] = "Terminating"
            if self.strategy(rt).generation:
                # Marking for deletion bumps the generation (BeforeDelete in the real registry).
                nmeta["generation"] = int(nmeta.get("generation") or 1) + 1
            rv = self.store.next_rv()
            nmeta["resourceVersion"] = str(rv)
            self.store.put(rt.key, new, rv, created=False)
            return WriteResult(self.to_version(rt, new, version), warnings)
        rv = self.store.next_rv()
        gone = self.store.remove(rt.key, ns, name, rv)
        return WriteResult(self.to_version(rt, gone or current, version), warnings, removed=True)

    def bind_pod(self, namespace: str, name: str, node: str, annotations: dict[str, str] | None = None) -> Obj:
        """``pods/binding``: set ``spec.nodeName`` (and the scheduler's annotations) on an unbound pod."""
        current = self.store.get("pods", namespace, name)
        if current is None:
            raise errors.not_found("pods", "", name)
        if (current.get("spec") or {}).get("nodeName"):
            raise errors.conflict(
                "pods", "", name, f'pod {name} is already assigned to node "{current["spec"]["nodeName"]}"'
            )
        new: Obj = clone(current)
        new["spec"]["nodeName"] = node
        if annotations:
            new["metadata"].setdefault("annotations", {}).update(annotations)
        conditions = [c for c in new.setdefault("status", {}).get("conditions", []) if c.get("type") != "PodScheduled"]
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
        )
        new["status"]["conditions"] = conditions
        rv = self.store.next_rv()
        new["metadata"]["resourceVersion"] = str(rv)
        self.store.put("pods", new, rv, created=False)
        return new

    def finalize_pod(self, namespace: str, name: str) -> None:
        """The kubelet's last step of a graceful pod deletion: remove it for good."""
        current = self.store.get("pods", namespace, name)
        if current is None or not current["metadata"].get("deletionTimestamp"):
            return
        if current["metadata"].get("finalizers"):
            new = clone(current)
            new["metadata"].pop("deletionGracePeriodSeconds", None)
            rv = self.store.next_rv()
            new["metadata"]["resourceVersion"] = str(rv)
            self.store.put("pods", new, rv, created=False)
            return
        self.store.remove("pods", namespace, name, self.store.next_rv())

    def delete_collection(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        options: Obj | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        dry_run: bool = False,
    ) -> builtins.list[Obj]:
        listed = self.list(rt, version, namespace, label_selector=label_selector, field_selector=field_selector)
        out = []
        for obj in listed.items:
            meta = obj["metadata"]
            try:
                res = self.delete(rt, version, meta.get("namespace"), meta["name"], options, dry_run=dry_run)
            except ApiError as e:
                if e.code == 404:
                    continue
                raise
            out.append(res.obj)
        return out
