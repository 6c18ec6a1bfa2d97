"""OpenAPI v3 documents (``/openapi/v3`` and ``/openapi/v3/apis/<group>/<version>``) rebuilt from the compact form.

kubectl reads them for three things, all of which need the real server's shape:

* ``kubectl explain``: ``components.schemas`` with ``x-kubernetes-group-version-kind`` on the kind roots,
  descriptions, and ``$ref``s to ``#/components/schemas/...`` (CRD schemas named as the apiserver names them:
  reversed group, version, kind: ``io.x-k8s.kueue.v1beta2.ClusterQueue``);
* client-side ``kubectl apply``: strategic-merge metadata (``x-kubernetes-patch-strategy``/``-merge-key``,
  list types) on the built-in definitions;
* field-validation detection: kubectl sends ``fieldValidation=Strict`` only if the PATCH operation of the kind's
  path lists a ``fieldValidation`` query parameter, so every resource gets the real set of paths and parameters.

Documents are built once per (group, version, routes) and cached; the server calls this on every request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from .model import FORMAT, KEYS, PER_GROUP_GVK, RULE_KEYS, KindSchema, Schemas

__all__ = ["ResourceRoute", "crd_schema_name", "openapi_v3_document", "openapi_v3_paths"]

STANDARD_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

_REF = "#/components/schemas/"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_STATUS = _META + "Status"
_DELETE_OPTIONS = _META + "DeleteOptions"
_PATCH = _META + "Patch"
_WATCH_EVENT = _META + "WatchEvent"
_LIST_META = _META + "ListMeta"
_RESOURCE_LIST = _META + "APIResourceList"
_SCALE = "io.k8s.api.autoscaling.v1.Scale"
_BINDING = "io.k8s.api.core.v1.Binding"
_ALWAYS = (_STATUS, _DELETE_OPTIONS, _PATCH, _WATCH_EVENT, _RESOURCE_LIST)

#: Bumped when the generated document's shape changes (it is part of the served hash).
_DOC_VERSION = "1"

_LIST_PARAMS = (
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "shardSelector",
    "timeoutSeconds",
    "watch",
)
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_PATCH_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "force")
_DELETE_PARAMS = (
    "dryRun",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents",
    "propagationPolicy",
)
_DELETE_COLLECTION_PARAMS = (
    "continue",
    "dryRun",
    "fieldSelector",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "labelSelector",
    "limit",
    "orphanDependents",
    "propagationPolicy",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "shardSelector",
    "timeoutSeconds",
)
_PATCH_TYPES_BUILTIN = (
    "application/apply-patch+cbor",
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
_PATCH_TYPES_CRD = ("application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json")


@dataclass(frozen=True)
class ResourceRoute:
    """One REST resource of a group/version as the server routes it."""

    kind: str
    plural: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = STANDARD_VERBS


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


def _camel(text: str) -> str:
    parts = [p for p in text.replace("-", ".").split(".") if p]
    return "".join(p[:1].upper() + p[1:] for p in parts)


def _group_id(group: str, builtin: bool) -> str:
    if not group:
        return "Core"
    if builtin and group.endswith(".k8s.io"):
        group = group[: -len(".k8s.io")]
    return _camel(group)


def _tag(group: str, version: str, builtin: bool) -> str:
    gid = _group_id(group, builtin)
    return f"{gid[:1].lower()}{gid[1:]}_{version}"


def _param(schemas: Schemas, name: str) -> dict[str, Any]:
    spec = schemas.doc["params"][name]
    return {
        "description": spec["d"],
        "in": spec["in"],
        "name": name,
        "schema": {"type": spec["t"], "uniqueItems": True},
    }


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "in": "path",
        "name": name,
        "required": True,
        "schema": {"type": "string", "uniqueItems": True},
    }


class _Paths:
    """The paths of one group/version, shaped like the real server's."""

    def __init__(self, schemas: Schemas, group: str, version: str, builtin: bool) -> None:
        self.schemas = schemas
        self.group = group
        self.version = version
        self.builtin = builtin
        self.prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
        self.paths: dict[str, dict[str, Any]] = {}
        gid = _group_id(group, builtin)
        self.op_prefix = gid + _camel(version)
        self.tags = [_tag(group, version, builtin)]

    def media(self, *, stream: bool = False) -> tuple[str, ...]:
        base: tuple[str, ...]
        if self.builtin:
            base = ("application/cbor", "application/json", "application/vnd.kubernetes.protobuf", "application/yaml")
            if stream:
                base += (
                    "application/cbor-seq",
                    "application/json;stream=watch",
                    "application/vnd.kubernetes.protobuf;stream=watch",
                )
            return tuple(sorted(base))
        base = ("application/json", "application/yaml")
        if stream:
            base += ("application/json;stream=watch",)
        return tuple(sorted(base))

    def responses(self, ref: str, codes: Sequence[str], *, stream: bool = False) -> dict[str, Any]:
        names = {"200": "OK", "201": "Created", "202": "Accepted"}
        out: dict[str, Any] = {}
        for code in codes:
            out[code] = {
                "content": {m: {"schema": {"$ref": _REF + ref}} for m in self.media(stream=stream)},
                "description": names[code],
            }
        out["401"] = {"description": "Unauthorized"}
        return out

    def op(
        self,
        op_id: str,
        action: str,
        description: str,
        gvk: dict[str, str],
        responses: dict[str, Any],
        params: Sequence[str] = (),
        body: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "description": description,
            "operationId": op_id,
            "responses": responses,
            "tags": self.tags,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
        }
        if params:
            out["parameters"] = [_param(self.schemas, p) for p in params]
        if body is not None:
            out["requestBody"] = body
        return out

    def body(self, ref: str) -> dict[str, Any]:
        return {"content": {"*/*": {"schema": {"$ref": _REF + ref}}}, "required": True}

    def delete_body(self) -> dict[str, Any]:
        return {"content": {"*/*": {"schema": {"$ref": _REF + _DELETE_OPTIONS}}}}

    def patch_body(self) -> dict[str, Any]:
        types = _PATCH_TYPES_BUILTIN if self.builtin else _PATCH_TYPES_CRD
        return {"content": {t: {"schema": {"$ref": _REF + _PATCH}} for t in types}, "required": True}

    def resource_list(self) -> None:
        self.paths[self.prefix + "/"] = {
            "get": {
                "description": "get available resources",
                "operationId": f"get{self.op_prefix}APIResources",
                "responses": self.responses(_RESOURCE_LIST, ["200"]),
                "tags": self.tags,
            }
        }

    def resource(self, route: ResourceRoute, ref: str, list_ref: str) -> None:
        kind, plural, verbs = route.kind, route.plural, set(route.verbs)
        gvk = {"group": self.group, "kind": kind, "version": self.version}
        ns = "Namespaced" if route.namespaced else ""
        pid = self.op_prefix
        pretty = _param(self.schemas, "pretty")
        name_param = _path_param("name", f"name of the {kind}")
        ns_param = _path_param("namespace", "object name and auth scope, such as for teams and projects")
        list_level = [_param(self.schemas, p) for p in _LIST_PARAMS]
        base = f"{self.prefix}/namespaces/{{namespace}}/{plural}" if route.namespaced else f"{self.prefix}/{plural}"
        scope_params = [ns_param] if route.namespaced else []

        # Collection.
        collection: dict[str, Any] = {"parameters": [*scope_params, pretty]}
        if "deletecollection" in verbs:
            collection["delete"] = self.op(
                f"delete{pid}Collection{ns}{kind}",
                "deletecollection",
                f"delete collection of {kind}",
                gvk,
                self.responses(_STATUS, ["200"]),
                _DELETE_COLLECTION_PARAMS,
                self.delete_body(),
            )
        if "list" in verbs:
            collection["get"] = self.op(
                f"list{pid}{ns}{kind}",
                "list",
                f"list or watch objects of kind {kind}",
                gvk,
                self.responses(list_ref, ["200"], stream=True),
                _LIST_PARAMS,
            )
        if "create" in verbs:
            collection["post"] = self.op(
                f"create{pid}{ns}{kind}",
                "post",
                f"create a {kind}",
                gvk,
                self.responses(ref, ["200", "201", "202"]),
                _WRITE_PARAMS,
                self.body(ref),
            )
        self.paths[base] = collection
        if route.namespaced and "list" in verbs:
            self.paths[f"{self.prefix}/{plural}"] = {
                "get": self.op(
                    f"list{pid}{kind}ForAllNamespaces",
                    "list",
                    f"list or watch objects of kind {kind}",
                    gvk,
                    self.responses(list_ref, ["200"], stream=True),
                ),
                "parameters": [*list_level[:-1], pretty, *list_level[-1:]],
            }

        # Item.
        item: dict[str, Any] = {"parameters": [name_param, *scope_params, pretty]}
        if "delete" in verbs:
            item["delete"] = self.op(
                f"delete{pid}{ns}{kind}",
                "delete",
                f"delete a {kind}",
                gvk,
                self.responses(_STATUS, ["200", "202"]),
                _DELETE_PARAMS,
                self.delete_body(),
            )
        if "get" in verbs:
            item["get"] = self.op(
                f"read{pid}{ns}{kind}", "get", f"read the specified {kind}", gvk, self.responses(ref, ["200"])
            )
        if "patch" in verbs:
            item["patch"] = self.op(
                f"patch{pid}{ns}{kind}",
                "patch",
                f"partially update the specified {kind}",
                gvk,
                self.responses(ref, ["200", "201"]),
                _PATCH_PARAMS,
                self.patch_body(),
            )
        if "update" in verbs:
            item["put"] = self.op(
                f"replace{pid}{ns}{kind}",
                "put",
                f"replace the specified {kind}",
                gvk,
                self.responses(ref, ["200", "201"]),
                _WRITE_PARAMS,
                self.body(ref),
            )
        self.paths[f"{base}/{{name}}"] = item

        # Subresources.
        for sub in route.subresources:
            self.subresource(route, sub, ref, gvk, [name_param, *scope_params, pretty], f"{base}/{{name}}/{sub}")

        # Watch paths (deprecated, still served and listed).
        if "watch" in verbs:
            watch_list: dict[str, Any] = {
                "get": self.op(
                    f"watch{pid}{ns}{kind}List",
                    "watchlist",
                    f"watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with a "
                    "list operation instead.",
                    gvk,
                    self.responses(_WATCH_EVENT, ["200"], stream=True),
                ),
            }
            watch_one: dict[str, Any] = {
                "get": self.op(
                    f"watch{pid}{ns}{kind}",
                    "watch",
                    f"watch changes to an object of kind {kind}. deprecated: use the 'watch' parameter with a list "
                    "operation instead, filtered to a single item with the 'fieldSelector' parameter.",
                    gvk,
                    self.responses(_WATCH_EVENT, ["200"], stream=True),
                ),
            }
            if route.namespaced:
                watch_list["parameters"] = [*list_level[:5], ns_param, pretty, *list_level[5:]]
                watch_one["parameters"] = [*list_level[:5], name_param, ns_param, pretty, *list_level[5:]]
                self.paths[f"{self.prefix}/watch/namespaces/{{namespace}}/{plural}"] = watch_list
                self.paths[f"{self.prefix}/watch/namespaces/{{namespace}}/{plural}/{{name}}"] = watch_one
                self.paths[f"{self.prefix}/watch/{plural}"] = {
                    "get": self.op(
                        f"watch{pid}{kind}ListForAllNamespaces",
                        "watchlist",
                        f"watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with "
                        "a list operation instead.",
                        gvk,
                        self.responses(_WATCH_EVENT, ["200"], stream=True),
                    ),
                    "parameters": [*list_level[:-1], pretty, *list_level[-1:]],
                }
            else:
                watch_list["parameters"] = [*list_level[:-1], pretty, *list_level[-1:]]
                watch_one["parameters"] = [*list_level[:5], name_param, pretty, *list_level[5:]]
                self.paths[f"{self.prefix}/watch/{plural}"] = watch_list
                self.paths[f"{self.prefix}/watch/{plural}/{{name}}"] = watch_one

    def subresource(
        self, route: ResourceRoute, sub: str, ref: str, gvk: dict[str, str], params: list[Any], path: str
    ) -> None:
        kind, verbs = route.kind, set(route.verbs)
        ns = "Namespaced" if route.namespaced else ""
        pid = self.op_prefix
        entry: dict[str, Any] = {"parameters": params}
        if sub in ("status", "scale"):
            target = ref if sub == "status" else _SCALE
            target_gvk = gvk if sub == "status" else {"group": "autoscaling", "kind": "Scale", "version": "v1"}
            suffix = sub.capitalize()
            entry["get"] = self.op(
                f"read{pid}{ns}{kind}{suffix}",
                "get",
                f"read {sub} of the specified {kind}",
                target_gvk,
                self.responses(target, ["200"]),
            )
            if "patch" in verbs:
                entry["patch"] = self.op(
                    f"patch{pid}{ns}{kind}{suffix}",
                    "patch",
                    f"partially update {sub} of the specified {kind}",
                    target_gvk,
                    self.responses(target, ["200", "201"]),
                    _PATCH_PARAMS,
                    self.patch_body(),
                )
            if "update" in verbs:
                entry["put"] = self.op(
                    f"replace{pid}{ns}{kind}{suffix}",
                    "put",
                    f"replace {sub} of the specified {kind}",
                    target_gvk,
                    self.responses(target, ["200", "201"]),
                    _WRITE_PARAMS,
                    self.body(target),
                )
        elif sub == "binding":
            entry["post"] = self.op(
                f"create{pid}{ns}{kind}Binding",
                "post",
                f"create binding of a {kind}",
                {"group": "", "kind": "Binding", "version": "v1"},
                self.responses(_BINDING, ["200", "201", "202"]),
                _WRITE_PARAMS,
                self.body(_BINDING),
            )
        elif sub == "finalize":
            entry["put"] = self.op(
                f"replace{pid}{ns}{kind}Finalize",
                "put",
                f"replace finalize of the specified {kind}",
                gvk,
                self.responses(ref, ["200", "201"]),
                _WRITE_PARAMS,
                self.body(ref),
            )
        elif sub == "log":
            entry["get"] = {
                "description": f"read log of the specified {kind}",
                "operationId": f"read{pid}{ns}{kind}Log",
                "responses": {
                    "200": {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "OK"},
                    "401": {"description": "Unauthorized"},
                },
                "tags": self.tags,
                "x-kubernetes-action": "get",
                "x-kubernetes-group-version-kind": gvk,
            }
        else:
            return
        self.paths[path] = entry


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
