"""The ground the API server's verbs stand on: the store, the registry and schemas, the admission hooks, and
the checks and conversions every verb uses (type meta, decoding through the schema layer, namespaces, metadata
validation, version conversion)."""

from __future__ import annotations

import random
from typing import Any

from .. import errors
from ..conversion import convert
from ..errors import ApiError, Cause
from ..registry import Registry, ResourceType
from ..schema import Schemas
from ..store import Store
from ..strategies import Strategy, strategy_for, validate_labels, validate_name
from .types import Admission, Hook, Obj, RequestOptions

__all__ = ["ApiBase"]


class ApiBase:
    """What every verb of :class:`~kubesim.api.Api` uses; the verbs are in its other bases."""

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
            stored = old if version == rt.storage_version else None  # as this schema decoded it
            obj, warnings = schema.decode_builtin(body, field_validation=opts.field_validation, stored=stored)
        else:
            old_v = self.to_version(rt, old, version) if old is not None else None
            obj, warnings = schema.apply_crd(
                body,
                field_validation=opts.field_validation,
                old=old_v,
                old_as_stored=old_v is not None and old_v is old,  # not converted: as this schema stored it
            )
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
