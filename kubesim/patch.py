"""The three classic patch types: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and Kubernetes'
strategic merge patch, which merges lists by the merge keys the schema declares
(``x-kubernetes-patch-strategy`` / ``x-kubernetes-patch-merge-key``) and understands the directives
kubectl emits (``$patch``, ``$retainKeys``, ``$setElementOrder/…``, ``$deleteFromPrimitiveList/…``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from kubecommon import fastjson

from .errors import ApiError

__all__ = ["SchemaNode", "apply_json_patch", "apply_merge_patch", "apply_strategic_merge_patch", "clone"]


class SchemaNode(Protocol):
    """What the patch code needs of a schema node (implemented by ``sim.schema``)."""

    @property
    def properties(self) -> Mapping[str, Any]: ...
    @property
    def items(self) -> Any: ...
    @property
    def additional_properties(self) -> Any: ...
    @property
    def patch_strategy(self) -> str | None: ...
    @property
    def patch_merge_key(self) -> str | None: ...


def clone(value: Any) -> Any:
    """Deep copy of JSON data (through orjson: :mod:`kubecommon.fastjson`)."""
    return fastjson.clone(value)


def _patch_error(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


# -- RFC 7386 --------------------------------------------------------------------------------------


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """JSON merge patch: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = clone(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


# -- RFC 6902 --------------------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _patch_error(f'the server rejected our request due to an error in our request: invalid path "{path}"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    cur = doc
    for part in parts[:-1]:
        if isinstance(cur, dict):
            if part not in cur:
                raise _patch_error(f"doc is missing path: {path}: missing value")
            cur = cur[part]
        elif isinstance(cur, list):
            try:
                cur = cur[int(part)]
            except (ValueError, IndexError):
                raise _patch_error(f"doc is missing path: {path}: missing value") from None
        else:
            raise _patch_error(f"doc is missing path: {path}: missing value")
    return cur, parts[-1]


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent, last = _resolve(doc, parts, path)
    try:
        return parent[last] if isinstance(parent, dict) else parent[int(last)]
    except (KeyError, ValueError, IndexError, TypeError):
        raise _patch_error(f"doc is missing path: {path}: missing value") from None


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent, last = _resolve(doc, parts, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                idx = int(last)
            except ValueError:
                raise _patch_error(f"add operation does not apply: doc is missing path: {path}") from None
            if idx < 0 or idx > len(parent):
                raise _patch_error(f"add operation does not apply: doc is missing path: {path}")
            parent.insert(idx, value)
    else:
        raise _patch_error(f"add operation does not apply: doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent, last = _resolve(doc, parts, path)
    try:
        if isinstance(parent, dict):
            del parent[last]
        elif isinstance(parent, list):
            del parent[int(last)]
        else:
            raise KeyError(last)
    except (KeyError, ValueError, IndexError):
        raise _patch_error(f"remove operation does not apply: doc is missing path: {path}") from None
    return doc


def apply_json_patch(target: Any, operations: Any) -> Any:
    """Apply an RFC 6902 operation list to a copy of ``target``."""
    if not isinstance(operations, list):
        raise ApiError(400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = clone(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op:
            raise _patch_error("the server rejected our request due to an error in our request")
        kind, path = op["op"], op.get("path", "")
        if kind == "add":
            doc = _add(doc, path, clone(op.get("value")))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            parts = _pointer(path)
            if not parts:
                doc = clone(op.get("value"))
            else:
                parent, last = _resolve(doc, parts, path)
                if isinstance(parent, list):
                    parent[int(last)] = clone(op.get("value"))
                else:
                    parent[last] = clone(op.get("value"))
        elif kind == "move":
            value = _get(doc, op["from"])
            doc = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, clone(_get(doc, op["from"])))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                # kube-apiserver hides the reason (its message is the generic one for a 422 without causes).
                raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request", {})
        else:
            raise _patch_error(f"Unexpected kind: {kind}")
    return doc


# -- strategic merge patch -------------------------------------------------------------------------

_DIRECTIVE = "$patch"
_RETAIN = "$retainKeys"
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def _child(node: SchemaNode | None, key: str) -> SchemaNode | None:
    if node is None:
        return None
    props = node.properties
    if props and key in props:
        child: SchemaNode | None = props[key]
        return child
    addl = node.additional_properties
    if addl is not None and not isinstance(addl, bool):
        result: SchemaNode = addl
        return result
    return None


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if k not in (_DIRECTIVE, _RETAIN) and not k.startswith((_ORDER, _DELETE_PRIMITIVE))
        }
    if isinstance(value, list):
        return [_strip_directives(v) for v in value if not (isinstance(v, dict) and v.get(_DIRECTIVE) == "delete")]
    return value


def apply_strategic_merge_patch(original: Any, patch: Any, node: SchemaNode | None) -> Any:
    """Merge ``patch`` into a copy of ``original`` by the schema's patch strategies."""
    if not isinstance(patch, dict):
        raise ApiError(400, "BadRequest", "json: cannot unmarshal array into Go value of type map[string]interface {}")
    return _merge_map(clone(original) if isinstance(original, dict) else {}, patch, node)


def _merge_map(original: dict[str, Any], patch: dict[str, Any], node: SchemaNode | None) -> dict[str, Any]:
    directive = patch.get(_DIRECTIVE)
    if directive == "replace":
        return _strip_directives(patch)  # type: ignore[no-any-return]
    if directive == "delete":
        return {}
    if _RETAIN in patch:
        keep = set(patch[_RETAIN] or ())
        for key in list(original):
            if key not in keep and key not in patch:
                del original[key]
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in (_DIRECTIVE, _RETAIN):
            continue
        if key.startswith(_ORDER):
            orders[key[len(_ORDER) :]] = value or []
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE) :]
            drop = {json.dumps(v, sort_keys=True) for v in (value or [])}
            if isinstance(original.get(field), list):
                original[field] = [v for v in original[field] if json.dumps(v, sort_keys=True) not in drop]
            continue
        if value is None:
            original.pop(key, None)
            continue
        child = _child(node, key)
        current = original.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            original[key] = _merge_map(current, value, child)
        elif isinstance(value, list) and isinstance(current, list):
            original[key] = _merge_list(current, value, child)
        elif isinstance(value, dict):
            merged = _merge_map({}, value, child)
            if value.get(_DIRECTIVE) == "delete":
                original.pop(key, None)
            else:
                original[key] = merged
        elif isinstance(value, list):
            original[key] = _merge_list([], value, child)
        else:
            original[key] = value
    for field, order in orders.items():
        if isinstance(original.get(field), list):
            original[field] = _reorder(original[field], order, _child(node, field))
    return original


def _merge_list(original: list[Any], patch: list[Any], node: SchemaNode | None) -> list[Any]:
    strategy = (node.patch_strategy or "") if node is not None else ""
    merge_key = node.patch_merge_key if node is not None else None
    if "merge" not in strategy.split(","):
        if any(isinstance(p, dict) and p.get(_DIRECTIVE) == "replace" for p in patch):
            return [_strip_directives(p) for p in patch if not (isinstance(p, dict) and _DIRECTIVE in p)]
        return _strip_directives(patch)  # type: ignore[no-any-return]
    items_node = node.items if node is not None else None
    if any(isinstance(p, dict) and p.get(_DIRECTIVE) == "replace" for p in patch):
        return [_strip_directives(p) for p in patch if not (isinstance(p, dict) and _DIRECTIVE in p)]
    if merge_key is None:
        # A merging list of primitives: union, keeping the original order.
        out = list(original)
        for p in patch:
            if p not in out:
                out.append(p)
        return out
    out = list(original)
    for p in patch:
        if not isinstance(p, dict):
            continue
        key_value = p.get(merge_key)
        idx = next(
            (i for i, o in enumerate(out) if isinstance(o, dict) and o.get(merge_key) == key_value),
            None,
        )
        if p.get(_DIRECTIVE) == "delete":
            if idx is not None:
                del out[idx]
            continue
        if idx is None:
            out.append(_merge_map({}, p, items_node))
        else:
            out[idx] = _merge_map(clone(out[idx]), p, items_node)
    return out


def _reorder(items: list[Any], order: list[Any], node: SchemaNode | None) -> list[Any]:
    merge_key = node.patch_merge_key if node is not None else None

    def ident(v: Any) -> str:
        if merge_key and isinstance(v, dict):
            return json.dumps(v.get(merge_key), sort_keys=True)
        if isinstance(v, dict) and merge_key:
            return json.dumps(v.get(merge_key), sort_keys=True)
        return json.dumps(v, sort_keys=True)

    position: dict[str, int] = {}
    for i, o in enumerate(order):
        key = json.dumps(o.get(merge_key), sort_keys=True) if merge_key and isinstance(o, dict) else ident(o)
        position.setdefault(key, i)
    ordered = [v for v in items if ident(v) in position]
    ordered.sort(key=lambda v: position[ident(v)])
    rest = [v for v in items if ident(v) not in position]
    return ordered + rest
