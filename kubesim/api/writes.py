"""The API server's writes: create, update, patch (JSON, merge, strategic merge) and server-side apply, with
generated names, generations, managed fields, admission, validation and no-op detection."""

from __future__ import annotations

import builtins
import uuid
from typing import Any

from .. import errors
from ..errors import ApiError, Cause, field_invalid
from ..managed_fields import apply_config, record_update
from ..patch import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch, clone
from ..registry import ResourceType
from .base import ApiBase
from .types import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    PATCH_TYPES,
    STRATEGIC_PATCH,
    Admission,
    Obj,
    RequestOptions,
    WriteResult,
    now_rfc3339,
)

__all__ = ["ApiWrites"]

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


class ApiWrites(ApiBase):
    """The verbs that write an object: create, update, patch, apply."""

    # -- create --------------------------------------------------------------------------------------

    def create(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        body: Any,
        opts: RequestOptions | None = None,
        *,
        managed: Obj | None = None,
    ) -> WriteResult:
        opts = opts or RequestOptions()
        self._check_type_meta(rt, version, body)
        obj, warnings = self._decode(rt, version, body, opts, None)
        meta = obj["metadata"]
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if namespace and body_ns and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            ns = namespace or body_ns
            if not ns:
                raise errors.bad_request("an empty namespace may not be set during creation")
            meta["namespace"] = ns
            self._check_namespace(ns, creating=True)
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if meta.get("generateName"):
                # 5 random characters collide after a few thousand names; like the real server (RetryGenerateName,
                # GA in 1.32) take another suffix when the generated name is taken, up to 8 tries.
                for _ in range(8):
                    meta["name"] = meta["generateName"] + "".join(self._rng.choice(_NAME_CHARS) for _ in range(5))
                    if self.store.get(rt.key, meta.get("namespace", ""), meta["name"]) is None:
                        break
            else:
                raise errors.invalid(
                    rt.kind,
                    rt.group,
                    "",
                    [Cause("metadata.name", "Required value: name or generateName is required", "FieldValueRequired")],
                )
        strategy = self.strategy(rt)
        given_rv = str(meta.get("resourceVersion") or "")
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if strategy.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        strategy.prepare_create(obj, status_split=self.status_split(rt))
        obj = self.to_version(rt, obj, rt.storage_version)
        meta = obj["metadata"]
        self._admit(Admission("CREATE", rt, None, obj, None, opts.dry_run))
        causes = self._validate_meta(rt, obj, strategy) + strategy.validate(obj, None)
        self._raise_invalid(rt, obj, causes)
        if given_rv.isdigit() and int(given_rv) != 0:
            # The storage layer refuses it (a body copied from a read object), before the name check.
            raise ApiError(500, "", "resourceVersion should not be set on objects to be created")
        ns_key = meta.get("namespace", "")
        if self.store.get(rt.key, ns_key, meta["name"]) is not None:
            raise errors.already_exists(rt.plural, rt.group, meta["name"])
        if managed is not None:
            meta["managedFields"] = managed.get("metadata", {}).get("managedFields", [])
        else:
            record_update(
                None,
                obj,
                self._kind_schema(rt, version).root,
                manager=opts.manager("unknown"),
                api_version=rt.api_version(version),
                now=now_rfc3339(),
                subresource=None,
                status_split=self.status_split(rt),
            )
        if opts.dry_run:
            return WriteResult(self.to_version(rt, obj, version), warnings, created=True)
        rv = self.store.next_rv()
        meta["resourceVersion"] = str(rv)
        self.store.put(rt.key, obj, rv, created=True)
        return WriteResult(self.to_version(rt, obj, version), warnings, created=True)

    # -- update / patch ------------------------------------------------------------------------------

    def update(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        body: Any,
        opts: RequestOptions | None = None,
        *,
        subresource: str | None = None,
    ) -> WriteResult:
        opts = opts or RequestOptions()
        self._check_type_meta(rt, version, body)
        current = self.store.get(rt.key, self._ns(rt, namespace), name)
        if current is None:
            raise self._not_found(rt, name)
        body_name = (body.get("metadata") or {}).get("name")
        if body_name and body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        body_uid = (body.get("metadata") or {}).get("uid")
        if body_uid and body_uid != current["metadata"].get("uid"):
            # A uid in the body is a precondition (an object copied from elsewhere, or from before a re-create).
            raise errors.conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: UID in precondition: {body_uid}, "
                f"UID in object meta: {current['metadata'].get('uid')}",
            )
        body_rv = (body.get("metadata") or {}).get("resourceVersion")
        if not body_rv and not self.strategy(rt).unconditional_update:
            raise errors.invalid(
                rt.kind,
                rt.group,
                name,
                [Cause("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")],
            )
        if body_rv and body_rv != current["metadata"]["resourceVersion"]:
            raise self._conflict(rt, name)
        obj, warnings = self._decode(rt, version, body, opts, current)
        return self._write_update(rt, version, current, obj, opts, subresource, warnings)

    def _conflict(self, rt: ResourceType, name: str) -> ApiError:
        return errors.conflict(
            rt.plural,
            rt.group,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )

    def patch(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        patch_type: str,
        body: Any,
        opts: RequestOptions | None = None,
        *,
        subresource: str | None = None,
    ) -> WriteResult:
        opts = opts or RequestOptions()
        if patch_type == APPLY_PATCH:
            return self._apply(rt, version, namespace, name, body, opts, subresource)
        current = self.store.get(rt.key, self._ns(rt, namespace), name)
        if current is None:
            raise self._not_found(rt, name)
        cur_v = self.to_version(rt, current, version)
        if patch_type == JSON_PATCH:
            patched = apply_json_patch(cur_v, body)
        elif patch_type == MERGE_PATCH:
            if not isinstance(body, dict):
                raise errors.bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
            patched = apply_merge_patch(cur_v, body)
        elif patch_type == STRATEGIC_PATCH:
            if not rt.builtin:
                raise errors.unsupported_media_type(patch_type, [JSON_PATCH, MERGE_PATCH, APPLY_PATCH])
            patched = apply_strategic_merge_patch(cur_v, body, self._kind_schema(rt, version).root)
        else:
            raise errors.unsupported_media_type(patch_type, list(PATCH_TYPES))
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        patched_rv = (patched.get("metadata") or {}).get("resourceVersion")
        if patched_rv and patched_rv != current["metadata"]["resourceVersion"]:
            raise self._conflict(rt, name)
        obj, warnings = self._decode(rt, version, patched, opts, current)
        return self._write_update(rt, version, current, obj, opts, subresource, warnings)

    def _apply(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        body: Any,
        opts: RequestOptions,
        subresource: str | None,
    ) -> WriteResult:
        if not opts.field_manager:
            raise ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
            )
        self._check_type_meta(rt, version, body)
        if not body.get("apiVersion") or not body.get("kind"):
            raise errors.bad_request("invalid object type: /, Kind=")
        # Type errors in the applied configuration fail the same way as in a create.
        applied, warnings = self._decode(rt, version, body, opts, None)
        if not (body.get("metadata") or {}).get("name"):
            applied["metadata"]["name"] = name
        root = self._kind_schema(rt, version).root
        current = self.store.get(rt.key, self._ns(rt, namespace), name)
        merged = apply_config(
            None if current is None else self.to_version(rt, current, version),
            applied,
            root,
            manager=opts.field_manager,
            api_version=rt.api_version(version),
            now=now_rfc3339(),
            force=opts.force,
            subresource=subresource,
            status_split=self.status_split(rt),
        )
        if current is None:
            return self.create(rt, version, namespace, merged, opts, managed=merged)
        obj, more = self._decode(rt, version, merged, opts, current)
        obj["metadata"]["managedFields"] = merged["metadata"].get("managedFields", [])
        return self._write_update(rt, version, current, obj, opts, subresource, warnings + more, managed_set=True)

    def _write_update(
        self,
        rt: ResourceType,
        version: str,
        current: Obj,
        new: Obj,
        opts: RequestOptions,
        subresource: str | None,
        warnings: builtins.list[str],
        *,
        managed_set: bool = False,
    ) -> WriteResult:
        strategy = self.strategy(rt)
        new = self.to_version(rt, new, rt.storage_version)
        if new is current:
            new = clone(new)
        cur_meta = current["metadata"]
        meta = new.setdefault("metadata", {})
        if meta.get("uid") and meta["uid"] != cur_meta.get("uid"):
            raise errors.invalid(
                rt.kind, rt.group, cur_meta["name"], [field_invalid("metadata.uid", meta["uid"], "field is immutable")]
            )
        for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "namespace", "name"):
            if key in cur_meta:
                meta[key] = cur_meta[key]
            else:
                meta.pop(key, None)
        meta["resourceVersion"] = cur_meta["resourceVersion"]
        if not managed_set:
            meta["managedFields"] = cur_meta.get("managedFields", [])
        status_split = self.status_split(rt)
        if subresource == "status":
            # A stored object is never modified in place (the store's rule), so the new version shares all but
            # the metadata it rewrites and the status it replaces; a deep copy of the whole object was a sixth
            # of the simulator's CPU under a burst of Jobs (Kueue and the job controller write status mostly).
            result = {**current, "metadata": dict(current["metadata"])}
            result["status"] = new.get("status", {})
            if managed_set:
                result["metadata"]["managedFields"] = meta.get("managedFields", [])
            new = result
            meta = new["metadata"]
            strategy.prepare_status(new, current)
            causes = strategy.validate_status(new, current)
        else:
            if status_split:
                if "status" in current:
                    new["status"] = current["status"]
                else:
                    new.pop("status", None)
            if cur_meta.get("deletionTimestamp"):
                added = set(meta.get("finalizers") or []) - set(cur_meta.get("finalizers") or [])
                if added:
                    raise errors.invalid(
                        rt.kind,
                        rt.group,
                        meta["name"],
                        [
                            Cause(
                                "metadata.finalizers",
                                "Forbidden: no new finalizers can be added if the object is being deleted",
                                "FieldValueForbidden",
                            )
                        ],
                    )
            if strategy.generation:
                gen = int(cur_meta.get("generation") or 1)
                if _spec_of(new) != _spec_of(current):
                    gen += 1
                meta["generation"] = gen
            causes = self._validate_meta(rt, new, strategy) + strategy.validate(new, current)
        self._admit(Admission("UPDATE", rt, subresource, new, current, opts.dry_run))
        self._raise_invalid(rt, new, causes)
        if not managed_set:
            record_update(
                current,
                new,
                self._kind_schema(rt, version).root,
                manager=opts.manager("unknown"),
                api_version=rt.api_version(version),
                now=now_rfc3339(),
                subresource=subresource,
                status_split=status_split,
            )
        if _same(new, current):
            return WriteResult(self.to_version(rt, current, version), warnings)
        if opts.dry_run:
            return WriteResult(self.to_version(rt, new, version), warnings)
        rv = self.store.next_rv()
        meta["resourceVersion"] = str(rv)
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds"):
            gone = self.store.remove(rt.key, meta.get("namespace", ""), meta["name"], rv)
            return WriteResult(self.to_version(rt, gone or new, version), warnings, removed=True)
        self.store.put(rt.key, new, rv, created=False)
        return WriteResult(self.to_version(rt, new, version), warnings)


def _spec_of(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _same(a: Obj, b: Obj) -> bool:
    """Equal apart from managedFields timestamps: a no-op write keeps the resourceVersion."""
    if a.keys() != b.keys():
        return False
    for key in a:
        if key == "metadata":
            ma = {k: v for k, v in a["metadata"].items() if k != "managedFields"}
            mb = {k: v for k, v in b["metadata"].items() if k != "managedFields"}
            if ma != mb:
                return False
        elif a[key] != b[key]:
            return False
    return True
