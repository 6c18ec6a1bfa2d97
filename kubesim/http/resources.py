"""The resource endpoints of a simulated API server: a request's path parsed into its target (group, version,
namespace, resource, name, subresource), its query options and body, and every verb served through
:class:`~kubesim.api.Api`: list (as a Table too), create, deletecollection, get, update, patch, delete, the pod
log and binding; a watch goes to :mod:`.watch`."""

from __future__ import annotations

from typing import Any

import yaml
from aiohttp import web

from kubecommon import fastjson

from .. import errors
from ..api import RequestOptions
from ..api.types import APPLY_PATCH, PATCH_TYPES
from ..table import to_table
from .common import Obj, _flag, _json, _Target
from .watch import Watches

__all__ = ["Resources"]


class Resources(Watches):
    """The resource requests of a simulated API server."""

    # -- resources -----------------------------------------------------------------------------------

    def _parse(self, parts: list[str]) -> _Target | None:
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace: str | None = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and not (group == "" and len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        plural = rest[0]
        rt = self.api.registry.lookup(group, version, plural)
        if rt is None:
            return None
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) >= 3 else None
        if len(rest) > 3:
            return None
        if sub is not None and sub not in rt.subresources:
            return None
        if namespace is not None and not rt.namespaced:
            return None
        return _Target(rt, version, namespace, name, sub)

    def _options(self, request: web.Request) -> RequestOptions:
        q = request.query
        fv = q.get("fieldValidation") or "Warn"
        if fv not in ("Strict", "Warn", "Ignore"):
            raise errors.bad_request(f"fieldValidation must be one of Ignore, Warn, or Strict, got {fv!r}")
        return RequestOptions(
            field_manager=q.get("fieldManager"),
            dry_run=q.get("dryRun") == "All",
            field_validation=fv,
            force=_flag(q.get("force")),
            user_agent=request.headers.get("User-Agent", ""),
        )

    async def _require_type(self, request: web.Request, t: _Target, body: Any) -> None:
        """A custom resource's body must name its kind and apiVersion (the unstructured decoder has no default from
        the URL, unlike built-in kinds): 400 as kube-apiserver words it (``transformDecodeError``, 30 bytes shown)."""
        if not isinstance(body, dict) or (body.get("kind") and body.get("apiVersion")):
            return
        raw = (await request.read()).decode(errors="replace")
        missing = "Kind" if not body.get("kind") else "apiVersion"
        summary = raw if len(raw) <= 30 else raw[:30] + " ..."
        raise errors.bad_request(
            f"the object provided is unrecognized (must be of type {t.rt.kind}): "
            f"Object '{missing}' is missing in '{raw}' ({summary})"
        )

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return None
        ctype = request.content_type
        if ctype == APPLY_PATCH:
            return yaml.safe_load(raw.decode())
        return fastjson.loads(raw)

    async def _serve(self, request: web.Request, t: _Target) -> web.StreamResponse:
        method = request.method
        api = self.api
        q = request.query
        wants_table = "as=Table" in request.headers.get("Accept", "")
        if t.name is None:
            if method == "GET":
                if _flag(q.get("watch")):
                    return await self._watch(request, t, wants_table)
                listed = api.list(
                    t.rt,
                    t.version,
                    t.namespace,
                    label_selector=q.get("labelSelector"),
                    field_selector=q.get("fieldSelector"),
                    limit=int(q["limit"]) if q.get("limit") else None,
                    continue_token=q.get("continue"),
                )
                if wants_table:
                    return _json(
                        to_table(
                            t.rt,
                            t.version,
                            listed.items,
                            resource_version=listed.resource_version,
                            include=q.get("includeObject", "Metadata"),
                            continue_token=listed.continue_token,
                            remaining=listed.remaining,
                        )
                    )
                meta: Obj = {"resourceVersion": listed.resource_version}
                if listed.continue_token:
                    meta["continue"] = listed.continue_token
                    if listed.remaining is not None:
                        meta["remainingItemCount"] = listed.remaining
                return _json(
                    {
                        "kind": t.rt.list_kind,
                        "apiVersion": t.rt.api_version(t.version),
                        "metadata": meta,
                        "items": listed.items,
                    }
                )
            if method == "POST":
                if t.rt.namespaced and t.namespace is None:
                    raise errors.method_not_supported(t.rt.plural, t.rt.group, "create")
                body = await self._body(request)
                if not t.rt.builtin:
                    await self._require_type(request, t, body)
                res = api.create(t.rt, t.version, t.namespace, body, self._options(request))
                return _json(res.obj, 201, res.warnings)
            if method == "DELETE":
                if "deletecollection" not in t.rt.verbs:
                    raise errors.method_not_supported(t.rt.plural, t.rt.group, "deletecollection")
                body = await self._body(request)
                opts = self._delete_options(request, body)
                deleted = api.delete_collection(
                    t.rt,
                    t.version,
                    t.namespace,
                    opts,
                    label_selector=q.get("labelSelector"),
                    field_selector=q.get("fieldSelector"),
                    dry_run=q.get("dryRun") == "All",
                )
                return _json(
                    {
                        "kind": t.rt.list_kind,
                        "apiVersion": t.rt.api_version(t.version),
                        "metadata": {"resourceVersion": str(api.store.rv)},
                        "items": deleted,
                    }
                )
            raise errors.method_not_supported(t.rt.plural, t.rt.group, method.lower())
        name = t.name
        if t.subresource == "log":
            obj = api.get(t.rt, t.version, t.namespace, name)
            node = (obj.get("spec") or {}).get("nodeName", "<none>")
            return web.Response(text=f"simulated container output of pod {name} on node {node}\n")
        if t.subresource == "binding":
            if method != "POST":
                raise errors.method_not_supported(t.rt.plural, t.rt.group, method.lower())
            return self._bind(t, name, await self._body(request))
        if method == "GET":
            obj = api.get(t.rt, t.version, t.namespace, name)
            if wants_table:
                return _json(
                    to_table(t.rt, t.version, [obj], resource_version=obj["metadata"].get("resourceVersion", ""))
                )
            return _json(obj)
        if method == "PUT":
            sub = t.subresource if t.subresource in ("status",) else None
            body = await self._body(request)
            if not t.rt.builtin:
                await self._require_type(request, t, body)
            res = api.update(t.rt, t.version, t.namespace, name, body, self._options(request), subresource=sub)
            return _json(res.obj, 200, res.warnings)
        if method == "PATCH":
            ctype = request.content_type
            if ctype not in PATCH_TYPES:
                raise errors.unsupported_media_type(ctype, list(PATCH_TYPES))
            sub = t.subresource if t.subresource in ("status",) else None
            res = api.patch(
                t.rt,
                t.version,
                t.namespace,
                name,
                ctype,
                await self._body(request),
                self._options(request),
                subresource=sub,
            )
            return _json(res.obj, 201 if res.created else 200, res.warnings)
        if method == "DELETE":
            body = await self._body(request)
            res = api.delete(
                t.rt,
                t.version,
                t.namespace,
                name,
                self._delete_options(request, body),
                dry_run=q.get("dryRun") == "All",
            )
            if res.removed and t.rt.key != "pods":
                return _json(
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Success",
                        "details": {
                            "name": name,
                            **({"group": t.rt.group} if t.rt.group else {}),
                            "kind": t.rt.plural,
                            "uid": res.obj["metadata"].get("uid"),
                        },
                    },
                    200,
                    res.warnings,
                )
            return _json(res.obj, 200, res.warnings)
        raise errors.method_not_supported(t.rt.plural, t.rt.group, method.lower())

    def _delete_options(self, request: web.Request, body: Any) -> Obj:
        opts: Obj = dict(body) if isinstance(body, dict) else {}
        q = request.query
        if "propagationPolicy" in q:
            opts["propagationPolicy"] = q["propagationPolicy"]
        if "gracePeriodSeconds" in q:
            opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
        if "orphanDependents" in q:
            opts["orphanDependents"] = _flag(q["orphanDependents"])
        return opts

    def _bind(self, t: _Target, name: str, body: Any) -> web.Response:
        target = (body or {}).get("target") or {}
        node = target.get("name")
        if not node:
            raise errors.invalid(
                "Binding", "", name, [errors.Cause("target.name", "Required value", "FieldValueRequired")]
            )
        self.api.bind_pod(t.namespace or "", name, node, (body.get("metadata") or {}).get("annotations"))
        return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201)
