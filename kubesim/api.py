"""The API server's semantics, independent of HTTP: what get, list, create, update, patch, delete and
watch do to the store. The HTTP layer (``http.py``) and the in-process controllers both go through it,
so a simulated controller is held to the same rules as a real client.
"""

from __future__ import annotations

import base64
import bisect
import builtins
import itertools
import json
import random
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from . import errors
from .conversion import convert
from .errors import ApiError, Cause, field_invalid
from .managed_fields import apply_config, record_update
from .patch import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch, clone
from .registry import Registry, ResourceType
from .schema import Schemas
from .selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector
from .store import Store, StoreEvent, Subscription
from .strategies import Strategy, strategy_for, validate_labels, validate_name

__all__ = ["Admission", "Api", "ListResult", "RequestOptions", "WatchStream", "now_rfc3339"]

Obj = dict[str, Any]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
APPLY_PATCH_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


_now_cache: tuple[int, str] = (-1, "")


def now_rfc3339() -> str:
    """The current UTC time at second precision (formatted once per second: every write stamps it)."""
    global _now_cache
    second = int(time.time())
    if _now_cache[0] != second:
        _now_cache = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _now_cache[1]


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class RequestOptions:
    """Per-request options: the query parameters of a write."""

    field_manager: str | None = None
    dry_run: bool = False
    field_validation: str = "Warn"
    force: bool = False
    user_agent: str = ""

    def manager(self, default: str) -> str:
        if self.field_manager:
            return self.field_manager
        agent = self.user_agent.split("/", 1)[0].strip()
        return agent or default


@dataclass
class Admission:
    """What an admission hook sees (in the storage version); mutating hooks change ``obj`` in place."""

    operation: str  # CREATE | UPDATE | DELETE
    resource: ResourceType
    subresource: str | None
    obj: Obj
    old: Obj | None
    dry_run: bool


Hook = Callable[[Admission], None]


@dataclass
class ListResult:
    items: list[Obj]
    resource_version: str
    continue_token: str | None = None
    remaining: int | None = None


@dataclass
class WriteResult:
    obj: Obj
    warnings: list[str] = field(default_factory=list)
    created: bool = False
    #: For deletes: the object was removed at once (the answer is a Status), not just marked.
    removed: bool = False


class WatchStream:
    """Events for one watch, filtered and converted to the requested version.

    ``initial`` holds the events to send first (synthetic ADDED for a watch without a version, or the
    replay from the log); then events come from the subscription.
    """

    def __init__(
        self,
        api: Api,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        initial: list[tuple[str, Obj]],
        subscription: Subscription,
    ) -> None:
        self.api = api
        self.rt = rt
        self.version = version
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.initial = initial
        self.subscription = subscription

    def _matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        if not self.labels.empty and not self.labels.matches(meta.get("labels")):
            return False
        return not self.fields.terms or self.fields.matches(obj, self.rt.field_getters)

    def translate(self, event: StoreEvent) -> tuple[str, Obj] | None:
        """The event as this watcher sees it (ADDED/MODIFIED/DELETED after selector filtering), or None."""
        now = self._matches(event.obj) if event.type != "DELETED" else False
        before = self._matches(event.prev)
        if event.type == "ADDED":
            kind = "ADDED" if now else None
        elif event.type == "MODIFIED":
            kind = "MODIFIED" if now and before else "ADDED" if now else "DELETED" if before else None
        else:
            kind = "DELETED" if before else None
        if kind is None:
            return None
        return kind, self.api.to_version(self.rt, event.obj, self.version)

    async def next(self) -> tuple[str, Obj] | None:
        """The next event, or None when the subscription ended (overflow or server shutdown)."""
        while self.initial:
            return self.initial.pop(0)
        while True:
            event = await self.subscription.get()
            if event is None:
                return None
            out = self.translate(event)
            if out is not None:
                return out

    def close(self) -> None:
        self.subscription.close()


class Api:
    """The semantics of one simulated API server."""

    def __init__(self, store: Store, registry: Registry | None = None, schemas: Schemas | None = None) -> None:
        self.store = store
        self.registry = registry or Registry.default()
        self.schemas = schemas or Schemas.load()
        self.mutating: dict[str, list[Hook]] = {}
        self.validating: dict[str, list[Hook]] = {}
        self._rng = random.Random()

    # -- hooks ---------------------------------------------------------------------------------------

    def add_mutating_hook(self, resource_key: str, hook: Hook) -> None:
        self.mutating.setdefault(resource_key, []).append(hook)

    def add_validating_hook(self, resource_key: str, hook: Hook) -> None:
        self.validating.setdefault(resource_key, []).append(hook)

    def _admit(self, adm: Admission) -> None:
        for hook in self.mutating.get(adm.resource.key, ()):
            hook(adm)
        for hook in self.validating.get(adm.resource.key, ()):
            hook(adm)

    # -- helpers -------------------------------------------------------------------------------------

    def to_version(self, rt: ResourceType, obj: Obj, version: str) -> Obj:
        if rt.builtin or len(rt.versions) == 1:
            return obj
        return convert(obj, rt.group, rt.kind, version)

    def _kind_schema(self, rt: ResourceType, version: str) -> Any:
        return self.schemas.get(rt.group, version, rt.kind)

    def strategy(self, rt: ResourceType) -> Strategy:
        return strategy_for(rt.key, rt.builtin)

    def status_split(self, rt: ResourceType) -> bool:
        return "status" in rt.subresources

    def _check_type_meta(self, rt: ResourceType, version: str, body: Any) -> None:
        if not isinstance(body, dict):
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type {rt.kind}): couldn't get version/kind; "
                "json parse error: json: cannot unmarshal array into Go value of type struct"
            )
        expected = rt.api_version(version)
        api_version = body.get("apiVersion")
        kind = body.get("kind")
        if api_version and api_version != expected:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version ({expected})"
            )
        if kind and kind != rt.kind:
            raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")

    def _decode(
        self, rt: ResourceType, version: str, body: Obj, opts: RequestOptions, old: Obj | None
    ) -> tuple[Obj, list[str]]:
        body = dict(body)
        body["apiVersion"] = rt.api_version(version)
        body["kind"] = rt.kind
        schema = self._kind_schema(rt, version)
        if rt.builtin:
            obj, warnings = schema.decode_builtin(body, field_validation=opts.field_validation)
        else:
            old_v = self.to_version(rt, old, version) if old is not None else None
            obj, warnings = schema.apply_crd(body, field_validation=opts.field_validation, old=old_v)
        if not isinstance(obj.get("metadata"), dict):
            obj["metadata"] = {}
        return obj, list(warnings)

    def _not_found(self, rt: ResourceType, name: str) -> ApiError:
        return errors.not_found(rt.plural, rt.group, name)

    def _ns(self, rt: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if rt.namespaced else ""

    def _check_namespace(self, namespace: str, *, creating: bool) -> None:
        ns = self.store.get("namespaces", "", namespace)
        if ns is None:
            raise errors.not_found("namespaces", "", namespace)
        if creating and (ns.get("status") or {}).get("phase") == "Terminating":
            raise ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {namespace} because it is being terminated",
                {"name": namespace, "kind": "namespaces"},
            )

    def _validate_meta(self, rt: ResourceType, obj: Obj, strategy: Strategy) -> list[Cause]:
        meta = obj["metadata"]
        causes: list[Cause] = []
        name = meta.get("name", "")
        problem = validate_name(name, label=strategy.label_names)
        if problem:
            causes.append(errors.field_invalid("metadata.name", name, problem))
        causes += validate_labels(meta.get("labels"), "metadata.labels")
        annotations = meta.get("annotations") or {}
        if sum(len(k) + len(str(v)) for k, v in annotations.items()) > 256 * 1024:
            causes.append(
                Cause("metadata.annotations", "Too long: must have at most 262144 bytes", "FieldValueTooLong")
            )
        return causes

    def _raise_invalid(self, rt: ResourceType, obj: Obj, causes: list[Cause]) -> None:
        if causes:
            raise errors.invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), causes)

    # -- reads ---------------------------------------------------------------------------------------

    def get(self, rt: ResourceType, version: str, namespace: str | None, name: str) -> Obj:
        obj = self.store.get(rt.key, self._ns(rt, namespace), name)
        if obj is None:
            raise self._not_found(rt, name)
        return self.to_version(rt, obj, version)

    def list(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ListResult:
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.field_getters, rt.kind)
        ns = self._ns(rt, namespace) if namespace else None
        start_after: tuple[str, str] | None = None
        list_rv = self.store.rv
        if continue_token:
            try:
                token = json.loads(base64.b64decode(continue_token))
                list_rv, start_after = int(token["rv"]), (token["start"][0], token["start"][1])
            except (ValueError, KeyError, TypeError, IndexError):
                raise errors.bad_request("continue key is not valid: incorrect encoded start resourceVersion") from None
            if self.store.too_old(list_rv):
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start "
                    "a new list without the continue parameter, or use the continue token in this response to "
                    "retrieve the remainder of the results. Continuing with the provided token results in an "
                    "inconsistent list - objects that were created, modified, or deleted between the time the first "
                    "chunk was returned and now may show up in the list."
                )
        pinned = fields.value_of("metadata.name")
        candidates: Iterable[Obj]
        total = 0
        if pinned is not None and ns is not None:
            one = self.store.get(rt.key, ns, pinned)
            candidates = [one] if one is not None else []
        else:
            # A continued page starts after the last key it was given (bisected, not scanned from the start).
            keys = self.store.sorted_keys(rt.key, ns)
            first = bisect.bisect_right(keys, start_after) if start_after is not None else 0
            total = len(keys) - first
            objects = self.store.objects_of(rt.key)
            candidates = (objects[k] for k in itertools.islice(keys, first, None))
        unfiltered = labels.empty and not fields.terms and pinned is None
        items: list[Obj] = []
        remaining = 0
        last_key: tuple[str, str] | None = None
        for seen, obj in enumerate(candidates):
            meta = obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if start_after is not None and key <= start_after:
                continue
            if not labels.empty and not labels.matches(meta.get("labels")):
                continue
            if fields.terms and not fields.matches(obj, rt.field_getters):
                continue
            if limit and len(items) >= limit:
                if unfiltered:  # every key left is an item left: no need to walk them
                    remaining = total - seen
                    break
                remaining += 1
                continue
            items.append(self.to_version(rt, obj, version))
            last_key = key
        token_out = None
        if remaining and last_key is not None:
            token_out = base64.b64encode(json.dumps({"rv": list_rv, "start": list(last_key)}).encode()).decode()
        # A continued list answers with the version of its first page, as a paginated etcd read does: a
        # watch started from it replays whatever changed while the pages were read.
        # The server counts what is left only for an unfiltered list (etcd3's GetList: pred.Empty()).
        counted = labels.empty and not fields.terms
        return ListResult(items, str(list_rv), token_out, remaining if token_out and counted else None)

    def watch(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        *,
        resource_version: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        send_initial_events: bool = False,
    ) -> WatchStream:
        """Start a watch. Raises 410 Expired when ``resource_version`` is older than the log's horizon."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.field_getters, rt.kind)
        ns = self._ns(rt, namespace) if namespace else None
        resources = frozenset({rt.key})
        initial: list[tuple[str, Obj]] = []
        # Replay and subscription happen in one synchronous step: no event can fall between them.
        if not resource_version or resource_version == "0" or send_initial_events:
            stream = WatchStream(self, rt, version, ns, labels, fields, initial, self.store.subscribe(resources))
            for obj in self.store.list(rt.key, ns):
                if stream._matches(obj):
                    initial.append(("ADDED", self.to_version(rt, obj, version)))
            if send_initial_events:
                initial.append(("BOOKMARK", self._bookmark(rt, version, initial_end=True)))
            return stream
        try:
            rv = int(resource_version)
        except ValueError:
            raise errors.bad_request(f'invalid resource version "{resource_version}"') from None
        if self.store.too_old(rv):
            raise errors.expired(f"too old resource version: {rv} ({self.store.compacted_rv + 1})")
        stream = WatchStream(self, rt, version, ns, labels, fields, initial, self.store.subscribe(resources))
        for event in self.store.events_since(rv, resources):
            out = stream.translate(event)
            if out is not None:
                initial.append(out)
        return stream

    def _bookmark(self, rt: ResourceType, version: str, *, initial_end: bool = False) -> Obj:
        meta: Obj = {"resourceVersion": str(self.store.rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"kind": rt.kind, "apiVersion": rt.api_version(version), "metadata": meta}

    def bookmark(self, rt: ResourceType, version: str) -> Obj:
        return self._bookmark(rt, version)

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
        now = now_rfc3339()
        if current is None:
            merged = apply_config(
                None,
                applied,
                root,
                manager=opts.field_manager,
                api_version=rt.api_version(version),
                now=now,
                force=opts.force,
                subresource=subresource,
                status_split=self.status_split(rt),
            )
            return self.create(rt, version, namespace, merged, opts, managed=merged)
        cur_v = self.to_version(rt, current, version)
        merged = apply_config(
            cur_v,
            applied,
            root,
            manager=opts.field_manager,
            api_version=rt.api_version(version),
            now=now,
            force=opts.force,
            subresource=subresource,
            status_split=self.status_split(rt),
        )
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
            result = clone(current)
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

    # -- in-process conveniences for the simulated controllers ----------------------------------------

    def rt(self, group: str, kind: str) -> ResourceType:
        rt = self.registry.by_kind(group, kind)
        if rt is None:
            raise KeyError(f"{kind}.{group}")
        return rt

    def iter_objects(self, rt: ResourceType) -> Iterable[Obj]:
        """Stored objects (storage version, shared, read-only)."""
        return self.store.iter_all(rt.key)


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
