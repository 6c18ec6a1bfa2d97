"""OpenAPI v3 documents (``/openapi/v3`` and ``/openapi/v3/apis/<group>/<version>``) rebuilt from the compact form.

kubectl reads them for three things, all of which need the real server's shape:

* ``kubectl explain``: ``components.schemas`` with ``x-kubernetes-group-version-kind`` on the kind roots,
  descriptions, and ``$ref``s to ``#/components/schemas/...`` (CRD schemas named as the apiserver names them:
  reversed group, version, kind: ``io.x-k8s.kueue.v1beta2.ClusterQueue``);
* client-side ``kubectl apply``: strategic-merge metadata (``x-kubernetes-patch-strategy``/``-merge-key``,
  list types) on the built-in definitions;
* field-validation detection: kubectl sends ``fieldValidation=Strict`` only if the PATCH operation of the kind's
  path lists a ``fieldValidation`` query parameter, so every resource gets the real set of paths and parameters.

This module builds the ``components`` (the kinds' schemas and every definition they reference) and puts the
document together; :mod:`.openapi_paths` makes its ``paths``. Documents are built once per (group, version,
routes) and cached; the server calls this on every request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from functools import cache, lru_cache
from typing import Any

from .model import FORMAT, KEYS, PER_GROUP_GVK, RULE_KEYS, KindSchema, Schemas
from .openapi_paths import _ALWAYS, _BINDING, _LIST_META, _REF, _SCALE, ResourceRoute, _Paths

__all__ = ["ResourceRoute", "crd_schema_name", "openapi_v3_document", "openapi_v3_paths"]

#: Bumped when the generated document's shape changes (it is part of the served hash).
_DOC_VERSION = "1"

_SHORT_TO_OPENAPI = {v: k for k, v in KEYS.items()}
_RULE_TO_OPENAPI = {v: k for k, v in RULE_KEYS.items()}


def crd_schema_name(group: str, version: str, kind: str) -> str:
    """The component name the apiserver gives a custom resource: ``io.x-k8s.kueue.v1beta2.ClusterQueue``."""
    return ".".join([*reversed(group.split(".")), version, kind])


class _Emitter:
    """Turns compact nodes back into OpenAPI v3 schemas, collecting the definitions they reference."""

    def __init__(self, schemas: Schemas) -> None:
        self.schemas = schemas
        self.refs: set[str] = set()

    def node(self, raw: dict[str, Any]) -> dict[str, Any]:
        if "$s" in raw:
            return self.node(self.schemas.shared_raw(raw["$s"]))
        if "$" in raw:
            name = raw["$"]
            self.refs.add(name)
            ref = {"$ref": _REF + name}
            rest = {k: v for k, v in raw.items() if k != "$"}
            if not rest:
                return ref
            out: dict[str, Any] = {"allOf": [ref]}
            out.update(self.plain(rest))
            return out
        return self.plain(raw)

    def plain(self, raw: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in raw.items():
            if key == "p":
                out["properties"] = {name: self.node(child) for name, child in value.items()}
            elif key == "i":
                out["items"] = self.node(value)
            elif key == "a":
                out["additionalProperties"] = value if isinstance(value, bool) else self.node(value)
            elif key == "not":
                out["not"] = self.node(value)
            elif key in ("any", "one", "all"):
                out[{"any": "anyOf", "one": "oneOf", "all": "allOf"}[key]] = [self.node(c) for c in value]
            elif key == "v":
                out["x-kubernetes-validations"] = [{_RULE_TO_OPENAPI[k]: v for k, v in r.items()} for r in value]
            elif key in _SHORT_TO_OPENAPI:
                out[_SHORT_TO_OPENAPI[key]] = value
        return out


def _meta_gvk(name: str, group: str, version: str) -> list[dict[str, str]]:
    kind = name.rsplit(".", 1)[-1]
    out = [{"group": "", "kind": kind, "version": "v1"}]
    if group:
        out.append({"group": group, "kind": kind, "version": version})
    return out


def _crd_list_schema(name: str, info_kind: str, list_kind: str, plural: str, gvk: dict[str, str]) -> dict[str, Any]:
    return {
        "description": f"{list_kind} is a list of {info_kind}",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object.",
                "type": "string",
            },
            "items": {
                "description": f"List of {plural}.",
                "items": {"$ref": _REF + name},
                "type": "array",
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents.",
                "type": "string",
            },
            "metadata": {"allOf": [{"$ref": _REF + _LIST_META}], "description": "Standard list metadata."},
        },
        "required": ["items"],
        "type": "object",
        "x-kubernetes-group-version-kind": [gvk],
    }


def _build_document(schemas: Schemas, group: str, version: str, routes: tuple[ResourceRoute, ...]) -> dict[str, Any]:
    emitter = _Emitter(schemas)
    components: dict[str, Any] = {}
    wanted: list[str] = list(_ALWAYS)
    kinds: list[tuple[ResourceRoute, KindSchema]] = []
    for route in routes:
        ks = schemas.find(group, version, route.kind)
        if ks is not None:
            kinds.append((route, ks))
    builtin = any(ks.builtin for _, ks in kinds) or not kinds
    paths = _Paths(schemas, group, version, builtin)
    paths.resource_list()
    for route, ks in kinds:
        if "scale" in route.subresources:
            wanted.append(_SCALE)
        if "binding" in route.subresources:
            wanted.append(_BINDING)
        if ks.builtin:
            assert ks.def_name is not None and ks.list_def_name is not None
            wanted += [ks.def_name, ks.list_def_name]
            ref, list_ref = ks.def_name, ks.list_def_name
        else:
            ref = crd_schema_name(group, version, ks.kind)
            list_ref = crd_schema_name(group, version, ks.info.list_kind)
            components[ref] = emitter.node(ks.root.raw)
            list_gvk = {"group": group, "kind": ks.info.list_kind, "version": version}
            components[list_ref] = _crd_list_schema(ref, ks.kind, ks.info.list_kind, route.plural, list_gvk)
            wanted.append(_LIST_META)
        paths.resource(route, ref, list_ref)
    # Named definitions and everything they reference.
    pending = list(dict.fromkeys(wanted)) + sorted(emitter.refs)
    while pending:
        name = pending.pop()
        if name in components or not schemas.has_definition(name):
            continue
        emitter.refs.clear()
        schema = emitter.node(schemas.definition(name).raw)
        if name in PER_GROUP_GVK:
            schema["x-kubernetes-group-version-kind"] = _meta_gvk(name, group, version)
        components[name] = schema
        pending.extend(sorted(emitter.refs - components.keys()))
    info = (
        {"title": "Kubernetes", "version": "unversioned"}
        if builtin
        else {
            "title": "Kubernetes CRD Swagger",
            "version": "v0.1.0",
        }
    )
    return {
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {
                "BearerToken": {
                    "description": "Bearer Token authentication",
                    "in": "header",
                    "name": "authorization",
                    "type": "apiKey",
                }
            },
        },
        "info": info,
        "openapi": "3.0.0",
        "paths": dict(sorted(paths.paths.items())),
    }


@lru_cache(maxsize=256)
def _document(schemas: Schemas, group: str, version: str, routes: tuple[ResourceRoute, ...]) -> dict[str, Any]:
    return _build_document(schemas, group, version, routes)


def openapi_v3_document(group: str, version: str, resources: Sequence[ResourceRoute]) -> dict[str, Any]:
    """The OpenAPI v3 document of one group/version (``/openapi/v3/api/v1``, ``/openapi/v3/apis/batch/v1``).

    Built once per distinct argument set and cached: treat the result as read-only.
    """
    return _document(Schemas.load(), group, version, tuple(resources))


@cache
def _data_digest(schemas: Schemas) -> str:
    return hashlib.sha512(json.dumps(schemas.doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _hash(schemas: Schemas, group: str, version: str) -> str:
    """A stable content hash of a group/version's document: the data it is built from, the group/version,
    and the generator's version. Same data, same hash, across restarts."""
    text = f"{_data_digest(schemas)}|{FORMAT}|{_DOC_VERSION}|{group}|{version}"
    return hashlib.sha512(text.encode()).hexdigest().upper()


def openapi_v3_paths(gvs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The ``/openapi/v3`` discovery body: each group/version's document URL with its content hash."""
    schemas = Schemas.load()
    paths: dict[str, Any] = {}
    for group, version in gvs:
        key = f"apis/{group}/{version}" if group else f"api/{version}"
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={_hash(schemas, group, version)}"}
    return {"paths": dict(sorted(paths.items()))}
