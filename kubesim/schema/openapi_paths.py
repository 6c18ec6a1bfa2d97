"""The paths of one group/version in an OpenAPI v3 document, shaped like the real server's.

Every resource gets the real set of operations (``operationId``, ``x-kubernetes-action``, group-version-kind),
query parameters, request bodies (the patch content types a built-in kind or a custom resource accepts) and
responses with their media types; subresources (``status``, ``scale``, ``binding``, ``log``...) theirs. kubectl
reads them: it sends ``fieldValidation=Strict`` only if a kind's PATCH operation lists that parameter. Also the
names both the paths and the document (:mod:`.openapi`) use: the routes a server has (:class:`ResourceRoute`) and
the ``meta.k8s.io`` definitions every document carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .model import Schemas

__all__ = ["STANDARD_VERBS", "ResourceRoute"]

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
