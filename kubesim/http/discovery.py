"""Discovery as a simulated API server answers it: the API group list, each group, each group/version's resource
list (verbs, short names, categories, subresources), and the OpenAPI v3 index and documents (built by
:mod:`kubesim.schema.openapi`), encoded once and cached."""

from __future__ import annotations

import hashlib

from aiohttp import web

from ..errors import ApiError
from ..schema import openapi_v3_document, openapi_v3_paths
from ..schema.openapi import ResourceRoute
from .common import Obj, ServerBase, _dumps, _error, _json

__all__ = ["Discovery"]


class Discovery(ServerBase):
    """The discovery endpoints: ``/apis``, ``/apis/<group>``, ``/api/<version>``, ``/apis/<group>/<version>``,
    ``/openapi/v3``."""

    # -- discovery -----------------------------------------------------------------------------------

    def _group_entry(self, group: str, versions: list[str]) -> Obj:
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}

    def _group_list(self) -> Obj:
        groups = [self._group_entry(g, vs) for g, vs in self.api.registry.groups().items() if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _group(self, name: str) -> Obj | None:
        versions = self.api.registry.groups().get(name)
        if not versions:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group_entry(name, versions)}

    def _resource_list(self, parts: list[str]) -> web.Response:
        group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
        key = f"{group}/{version}"
        cached = self._discovery_cache.get(key)
        if cached is None:
            types = self.api.registry.in_group_version(group, version)
            if not types:
                return _error(ApiError(404, "NotFound", "the server could not find the requested resource"))
            resources: list[Obj] = []
            for rt in types:
                entry: Obj = {
                    "name": rt.plural,
                    "singularName": rt.singular,
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": list(rt.verbs),
                    "storageVersionHash": hashlib.sha256(f"{rt.key}/{rt.storage_version}".encode()).hexdigest()[:12],
                }
                if rt.short_names:
                    entry["shortNames"] = list(rt.short_names)
                if rt.categories:
                    entry["categories"] = list(rt.categories)
                resources.append(entry)
                for sub in sorted(rt.subresources):
                    verbs = ["get", "patch", "update"]
                    kind = rt.kind
                    if sub == "binding":
                        verbs, kind = ["create"], "Binding"
                    elif sub == "log":
                        verbs, kind = ["get"], "Pod"
                    elif sub == "finalize":
                        verbs = ["update"]
                    elif sub == "scale":
                        kind = "Scale"
                    resources.append(
                        {
                            "name": f"{rt.plural}/{sub}",
                            "singularName": "",
                            "namespaced": rt.namespaced,
                            "kind": kind,
                            "verbs": verbs,
                        }
                    )
            body = {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version,
                "resources": resources,
            }
            cached = _dumps(body)
            self._discovery_cache[key] = cached
        return web.Response(body=cached, content_type="application/json")

    def _openapi(self, path: str) -> web.Response:
        if path in ("/openapi/v3", "/openapi/v3/"):
            gvs = []
            for group, versions in self.api.registry.groups().items():
                for v in versions:
                    gvs.append((group, v))
            return _json(openapi_v3_paths(gvs))
        if path.startswith("/openapi/v3/"):
            rest = path[len("/openapi/v3/") :].strip("/").split("/")
            if rest[0] == "api" and len(rest) == 2:
                group, version = "", rest[1]
            elif rest[0] == "apis" and len(rest) == 3:
                group, version = rest[1], rest[2]
            else:
                return _error(ApiError(404, "NotFound", "the server could not find the requested resource"))
            cached = self._openapi_cache.get((group, version))
            if cached is None:
                types = self.api.registry.in_group_version(group, version)
                if not types:
                    return _error(ApiError(404, "NotFound", "the server could not find the requested resource"))
                routes = [
                    ResourceRoute(
                        kind=rt.kind,
                        plural=rt.plural,
                        namespaced=rt.namespaced,
                        subresources=tuple(sorted(rt.subresources)),
                        verbs=tuple(rt.verbs),
                    )
                    for rt in types
                ]
                cached = _dumps(openapi_v3_document(group, version, routes))
                self._openapi_cache[(group, version)] = cached
            return web.Response(body=cached, content_type="application/json")
        return _error(ApiError(404, "NotFound", "the server could not find the requested resource"))
