"""Custom resources as apiextensions-apiserver handles a write: :func:`apply_crd`.

Structural pruning (unknown fields dropped, same warnings and strict errors), ObjectMeta coercion of
``metadata``, structural defaulting, then OpenAPI validation with kube-openapi's messages and list-type checks
(:mod:`.validate`), and CEL rules (:mod:`.cel`; skipped, with the apiserver's note, when an earlier error is
blocking). All errors are collected and raised as one **422** Invalid. On updates, validation ratchets: a subtree
equal to the stored one is not re-validated (CRDValidationRatcheting, on by default since 1.30).
"""

from __future__ import annotations

from typing import Any

from kubecommon import fastjson

from ..errors import Cause, bad_request, invalid
from . import cel
from .decode import _Decoder, _unknown_outcome, sent_as_stored
from .gosemantics import _json_kind
from .model import KindSchema, Node
from .validate import _BLOCKING, _correlate_items, _join, _list_types, _map_key, _same, _Validator

__all__ = ["apply_crd"]

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


# -- custom resources: pruning -----------------------------------------------------------------------


class _Pruner:
    def __init__(self, schema: KindSchema) -> None:
        self.schema = schema
        #: Pruned paths (reported sorted, as PruneWithOptions sorts them).
        self.unknown: list[str] = []
        #: Unknown metadata fields, from ObjectMeta coercion (reported after the pruned ones, in walk order).
        self.meta_unknown: list[str] = []
        self.meta_node = schema.schemas.definition(OBJECT_META)

    def metadata(self, value: dict[str, Any], path: str) -> dict[str, Any]:
        """ObjectMeta coercion: only ObjectMeta's fields survive (unknown ones reported), types as in Go."""
        dec = _Decoder(self.schema.kind, self.schema.version)
        out = dec.struct(value, self.meta_node, ["metadata"], path)
        if dec.first_error is not None:
            # Go's field path starts at ObjectMeta for a custom resource's metadata.
            dec.fail(dec.first_error)
        self.meta_unknown.extend(dec.unknown)
        return out

    def prune(self, value: Any, node: Node | None, path: str, resource_root: bool = False) -> None:
        if node is not None and node.preserve_unknown:
            self.skip(value, node, path)
            return
        if isinstance(value, dict):
            if node is None:
                for key in list(value):
                    self.unknown.append(_join(path, key))
                    del value[key]
                return
            props = node.properties
            addl = node.additional_properties
            is_resource = resource_root or node.embedded_resource
            for key in list(value):
                item = value[key]
                if is_resource:
                    if key in ("apiVersion", "kind") and isinstance(item, str):
                        continue
                    if key == "metadata" and isinstance(item, dict):
                        value[key] = self.metadata(item, _join(path, key))
                        continue
                if type(item) is float and item.is_integer() and abs(item) < 1e21:
                    # Go decodes JSON numbers into int64 when it can and writes float64s without ".0":
                    # a stored 2.0 reads back as 2.
                    value[key] = item = int(item)
                child = props.get(key)
                if child is not None:
                    self.prune(item, child, _join(path, key))
                elif isinstance(addl, Node):
                    self.prune(item, addl, _join(path, key))
                elif addl is True:
                    continue
                else:
                    self.unknown.append(_join(path, key))
                    del value[key]
        elif isinstance(value, list):
            items = node.items if node is not None else None
            for i, item in enumerate(value):
                if type(item) is float and item.is_integer() and abs(item) < 1e21:
                    value[i] = int(item)
                    continue
                self.prune(item, items, f"{path}[{i}]")

    def skip(self, value: Any, node: Node, path: str) -> None:
        """x-kubernetes-preserve-unknown-fields: keep unknown fields, prune inside the specified ones."""
        if isinstance(value, dict):
            props = node.properties
            addl = node.additional_properties
            for key in list(value):
                item = value[key]
                if node.embedded_resource and key in ("apiVersion", "kind"):
                    continue
                if node.embedded_resource and key == "metadata" and isinstance(item, dict):
                    value[key] = self.metadata(item, _join(path, key))
                    continue
                child = props.get(key)
                if child is not None:
                    self.prune(item, child, _join(path, key))
                elif isinstance(addl, Node):
                    self.prune(item, addl, _join(path, key))
        elif isinstance(value, list) and node.items is not None:
            for i, item in enumerate(value):
                self.prune(item, node.items, f"{path}[{i}]")


# -- custom resources: defaulting --------------------------------------------------------------------


_clone = fastjson.clone


def _default(value: Any, node: Node, resource_root: bool = False) -> None:
    """Structural defaulting: non-nullable nulls dropped (or defaulted), absent fields defaulted, recursively."""
    if isinstance(value, dict):
        props = node.properties
        for key, child in props.items():
            if (
                child.has_default
                and child.default is not None
                and (key not in value or (value[key] is None and not child.nullable))
            ):
                if resource_root and key == "metadata":
                    continue
                value[key] = _clone(child.default)
        addl = node.additional_properties
        for key in list(value):
            item = value[key]
            if (resource_root or node.embedded_resource) and key == "metadata":
                continue
            found = props.get(key)
            if found is None:
                if not isinstance(addl, Node):
                    continue
                child = addl
                if item is None and not child.nullable:
                    if child.has_default and child.default is not None:
                        value[key] = item = _clone(child.default)
                    else:
                        del value[key]
                        continue
            else:
                child = found
                if item is None and not child.nullable:
                    del value[key]
                    continue
            if isinstance(item, (dict, list)):
                _default(item, child, child.embedded_resource)
    elif isinstance(value, list):
        items = node.items
        if items is None:
            return
        for i, item in enumerate(value):
            current = item
            if current is None and not items.nullable and items.has_default and items.default is not None:
                value[i] = current = _clone(items.default)
            if isinstance(current, (dict, list)):
                _default(current, items, items.embedded_resource)


# -- CEL ---------------------------------------------------------------------------------------------


def _root_view(obj: Any) -> Any:
    """What CEL sees as ``self`` at a resource root: metadata limited to name and generateName."""
    if not isinstance(obj, dict):
        return obj
    view = dict(obj)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        view["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    return view


def _cel_field(path: str, field_path: str | None) -> str:
    if field_path:
        fp = field_path.strip()
        if fp.startswith("."):
            fp = fp[1:]
        if path:
            return path + fp if fp.startswith("[") else f"{path}.{fp}"
        return fp
    return path or "<nil>"


def _cel_walk(value: Any, node: Node, path: str, old: Any, has_old: bool, out: list[Cause], root: bool) -> None:
    if has_old and _same(value, old):
        return  # ratcheting (transition rules on an unchanged value pass by construction for these CRDs)
    rules = node.compiled_rules()
    if rules:
        self_value = _root_view(value) if root else value
        old_value = _root_view(old) if root and has_old else old
        type_name = node.type or ""
        for outcome in cel.evaluate(rules, self_value, old_value, has_old):
            if outcome.passed:
                continue
            rule = outcome.rule
            if outcome.error is not None:
                msg = f"{outcome.error} evaluating rule: {cel.rule_error_string(rule)}"
                if outcome.error == "no such overload":
                    msg = (
                        f"'no such overload': call arguments did not match a supported operator, function or macro "
                        f"signature for rule: {cel.rule_error_string(rule)}"
                    )
                out.append(Cause(path or "<nil>", f'Invalid value: "{type_name}": {msg}', "FieldValueInvalid"))
                continue
            field = _cel_field(path, rule.field_path)
            reason = rule.reason or "FieldValueInvalid"
            if reason == "FieldValueForbidden":
                out.append(Cause(field, f"Forbidden: {outcome.message}", reason))
            elif reason == "FieldValueRequired":
                out.append(Cause(field, f"Required value: {outcome.message}", reason))
            elif reason == "FieldValueDuplicate":
                out.append(Cause(field, f'Duplicate value: "{type_name}"', reason))
            else:
                out.append(Cause(field, f'Invalid value: "{type_name}": {outcome.message}', "FieldValueInvalid"))
    if isinstance(value, dict):
        props = node.properties
        addl = node.additional_properties
        old_map = old if has_old and isinstance(old, dict) else None
        for key, item in value.items():
            if (root or node.embedded_resource) and key == "metadata":
                continue
            child = props.get(key)
            if child is not None:
                sub_path = _join(path, key)
            elif isinstance(addl, Node):
                child = addl
                sub_path = f"{path}[{key}]"
            else:
                continue
            has = old_map is not None and key in old_map
            _cel_walk(item, child, sub_path, old_map.get(key) if old_map else None, has, out, child.embedded_resource)
    elif isinstance(value, list) and node.items is not None:
        items = node.items
        by_key = _correlate_items(node, old) if has_old else None
        keys = node.list_map_keys or ()
        for i, item in enumerate(value):
            old_item, has = None, False
            if by_key is not None:
                k = _map_key(item, keys)
                if k is not None and k in by_key:
                    old_item, has = by_key[k], True
            _cel_walk(item, items, f"{path}[{i}]", old_item, has, out, items.embedded_resource)


# -- custom resources: the whole pipeline --------------------------------------------------------------


def apply_crd(
    schema: KindSchema,
    obj: dict[str, Any],
    *,
    field_validation: str = "Warn",
    old: dict[str, Any] | None = None,
    subresource: str | None = None,
    old_as_stored: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    """Prune, default and validate a custom resource as apiextensions-apiserver does.

    Returns (the object as it would be stored, warnings). Raises 400 for strict unknown fields or malformed
    metadata, 422 Invalid with every cause for schema and CEL violations. ``old`` is the stored object on
    updates (for transition rules and ratcheting). ``subresource`` is accepted for symmetry with the
    apiserver's status strategy, which validates the whole object the same way.

    ``old_as_stored``: ``old`` is what this function returned for this schema (the stored object, not a
    conversion of it). A top-level field sent exactly as stored (the same JSON, types included) is then not
    pruned and defaulted again: it came out of both already, and both give it back unchanged. A controller's
    status write sends the spec and metadata it read; walking them again was most of such a write.
    """
    del subresource  # the status strategy validates the whole object exactly like the main one
    if not isinstance(obj, dict):
        raise bad_request(
            f'{schema.kind} in version "{schema.version}" cannot be handled as a {schema.kind}: '
            f"json: cannot unmarshal {_json_kind(obj)} into Go value of type map[string]interface {{}}"
        )
    kept = sent_as_stored(obj, old) if old_as_stored and isinstance(old, dict) else {}
    data: dict[str, Any] = {k: kept[k] if k in kept else _clone(v) for k, v in obj.items()} if kept else _clone(obj)
    work = {k: v for k, v in data.items() if k not in kept} if kept else data
    pruner = _Pruner(schema)
    pruner.prune(work, schema.root, "", resource_root=True)
    unknown = sorted(pruner.unknown) + pruner.meta_unknown
    warnings = _unknown_outcome(schema.kind, schema.version, unknown, field_validation)
    _default(work, schema.root, resource_root=True)
    if kept:
        # The body's order, then what defaulting added (as the walk over the whole object leaves them).
        data = {k: kept[k] if k in kept else work[k] for k in data if k in kept or k in work}
        data.update((k, v) for k, v in work.items() if k not in data)

    has_old = isinstance(old, dict)
    validator = _Validator()
    validator.schema(data, schema.root, "", old, has_old, resource_root=True)
    causes = validator.causes
    _list_types(data, schema.root, "", old, has_old, causes, True)
    if schema.has_rules:
        if any(c.reason in _BLOCKING for c in causes):
            causes.append(
                Cause(
                    "<nil>",
                    "Invalid value: null: some validation rules were not checked because the object was invalid; "
                    "correct the existing errors to complete validation",
                    "FieldValueInvalid",
                )
            )
        else:
            _cel_walk(data, schema.root, "", old, has_old, causes, True)
    if causes:
        unique: list[Cause] = []
        seen: set[str] = set()
        for c in causes:
            text = c.render()
            if text not in seen:
                seen.add(text)
                unique.append(c)
        meta = data.get("metadata")
        name = meta.get("name", "") if isinstance(meta, dict) else ""
        err = invalid(schema.kind, schema.group, str(name or ""), unique)
        err.warnings = list(warnings)  # kube-apiserver sends the pruning warnings with the 422 too
        raise err
    return data, warnings
