"""Field ownership (``metadata.managedFields``) and server-side apply.

A field set is a set of paths; a path is a tuple of FieldsV1 keys (``f:spec``, ``k:{"name":"c"}``,
``v:"x"``, ``.``), the same keys the real server writes into ``fieldsV1``. Ownership is recorded for
every write, so an apply that changes a field another manager owns is a 409 Conflict naming the field,
unless forced; an apply also removes the fields its manager applied before and no longer applies.
Lists follow their schema: ``x-kubernetes-list-type: map`` (or a patch merge key) merges by key,
``set`` merges by value, anything else is atomic; the same holds for the merge itself.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .errors import ApiError
from .patch import clone

__all__ = [
    "FieldSet",
    "apply_config",
    "decode_fields",
    "encode_fields",
    "fields_of",
    "record_update",
    "removed_fields",
]

Path = tuple[str, ...]
FieldSet = set[Path]

#: Top-level and metadata fields the server never attributes to a manager.
_UNTRACKED_META = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
}


def _child(node: Any, key: str) -> Any:
    if node is None:
        return None
    props = getattr(node, "properties", None)
    if props and key in props:
        return props[key]
    addl = getattr(node, "additional_properties", None)
    if addl is not None and not isinstance(addl, bool):
        return addl
    return None


def _list_kind(node: Any) -> tuple[str, tuple[str, ...]]:
    """("map", keys) | ("set", ()) | ("atomic", ())."""
    if node is None:
        return ("atomic", ())
    list_type = getattr(node, "list_type", None)
    if list_type == "map":
        return ("map", tuple(getattr(node, "list_map_keys", None) or ()))
    if list_type == "set":
        return ("set", ())
    if list_type == "atomic":
        return ("atomic", ())
    merge_key = getattr(node, "patch_merge_key", None)
    strategy = getattr(node, "patch_strategy", None) or ""
    if merge_key and "merge" in strategy:
        return ("map", (merge_key,))
    if "merge" in strategy:
        return ("set", ())
    return ("atomic", ())


def _atomic_map(node: Any) -> bool:
    return node is not None and getattr(node, "map_type", None) == "atomic"


def _item_key(item: Any, keys: tuple[str, ...]) -> str:
    if not isinstance(item, dict):
        return "v:" + json.dumps(item, separators=(",", ":"))
    return "k:" + json.dumps({k: item.get(k) for k in keys}, separators=(",", ":"), sort_keys=True)


def fields_of(obj: Mapping[str, Any], root: Any, *, status: bool | None = None) -> FieldSet:
    """The field set of an object: every leaf path, plus ``.`` for each keyed list item.

    ``status``: True keeps only ``status``; False drops it (main-resource writes when the kind has a
    status subresource); None keeps everything.
    """
    out: FieldSet = set()
    for value, _, node, prefix in _tracked(obj, {}, root, status):
        _walk(value, node, prefix, out)
    return out


def _tracked(
    obj: Mapping[str, Any], other: Mapping[str, Any], root: Any, status: bool | None
) -> Iterator[tuple[Any, Any, Any, Path]]:
    """(value, ``other``'s value at the same place or missing, schema node, path) for every field of ``obj`` the
    server attributes to a manager: the top-level fields (``status`` as :func:`fields_of` says) and the fields of
    ``metadata`` but those in :data:`_UNTRACKED_META`."""
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if (status is True and key != "status") or (status is False and key == "status"):
            continue
        there = other.get(key, _MISSING)
        if key == "metadata" and isinstance(value, dict):
            meta_node = _child(root, "metadata")
            other_meta = there if isinstance(there, dict) else {}
            for mk, mv in value.items():
                if mk not in _UNTRACKED_META:
                    yield mv, other_meta.get(mk, _MISSING), _child(meta_node, mk), ("f:metadata", "f:" + mk)
            continue
        yield value, there, _child(root, key), ("f:" + key,)


def _walk(value: Any, node: Any, prefix: Path, out: FieldSet) -> None:
    if isinstance(value, dict) and value and not _atomic_map(node):
        for k, v in value.items():
            _walk(v, _child(node, k), (*prefix, "f:" + k), out)
        return
    if isinstance(value, list) and value:
        kind, keys = _list_kind(node)
        if kind == "map" and keys:
            items_node = getattr(node, "items", None)
            for item in value:
                ip = (*prefix, _item_key(item, keys))
                out.add((*ip, "."))
                if isinstance(item, dict):
                    for k, v in item.items():
                        _walk(v, _child(items_node, k), (*ip, "f:" + k), out)
            return
        if kind == "set":
            for item in value:
                out.add((*prefix, _item_key(item, ())))
            return
    out.add(prefix)


_MISSING: Any = object()


def changed_fields(
    old: Mapping[str, Any], new: Mapping[str, Any], root: Any, *, status: bool | None = None
) -> FieldSet:
    """The fields of ``new`` (as :func:`fields_of` lists them) that ``old`` lacks or holds with another value.

    The same set as ``{p for p in fields_of(new) if p not in fields_of(old) or value at p differs}``, found by
    walking both objects together and skipping every subtree that is equal in both: a status write to a large
    object touches a few fields, and resolving each of its hundred paths from the root cost more than the rest
    of the write."""
    out: FieldSet = set()
    for value, before, node, prefix in _tracked(new, old, root, status):
        _changed(value, before, node, prefix, out)
    return out


def _first_match(items: list[Any], item: Any, keys: tuple[str, ...]) -> Any:
    """The first of ``items`` with ``item``'s key, as :func:`_value_at` resolves a ``k:`` or ``v:`` part."""
    if isinstance(item, dict):
        want = {k: item.get(k) for k in keys}
        for other in items:
            if isinstance(other, dict) and all(other.get(k) == v for k, v in want.items()):
                return other
        return _MISSING
    for other in items:
        if other == item:
            return other
    return _MISSING


def _changed(new: Any, old: Any, node: Any, prefix: Path, out: FieldSet) -> None:
    if old is not _MISSING and (old is new or old == new):
        return
    if isinstance(new, dict) and new and not _atomic_map(node):
        old_map = old if isinstance(old, dict) else {}
        for k, v in new.items():
            _changed(v, old_map.get(k, _MISSING), _child(node, k), (*prefix, "f:" + k), out)
        return
    if isinstance(new, list) and new:
        kind, keys = _list_kind(node)
        old_list = old if isinstance(old, list) else None
        if kind == "map" and keys:
            item_keys = [_item_key(item, keys) for item in new]
            old_keys = [_item_key(item, keys) for item in old_list] if old_list is not None else []
            if len(set(item_keys)) < len(item_keys) or len(set(old_keys)) < len(old_keys):
                _changed_slowly(new, old, node, prefix, out)  # duplicate keys: paths resolve to the first one
                return
            items_node = getattr(node, "items", None)
            for item, key in zip(new, item_keys, strict=True):
                ip = (*prefix, key)
                before = _first_match(old_list, item, keys) if old_list is not None else _MISSING
                if before is _MISSING or before != item:
                    out.add((*ip, "."))
                if isinstance(item, dict):
                    old_item = before if isinstance(before, dict) else {}
                    for k, v in item.items():
                        _changed(v, old_item.get(k, _MISSING), _child(items_node, k), (*ip, "f:" + k), out)
            return
        if kind == "set":
            had = {_item_key(item, ()) for item in old_list} if old_list is not None else set()
            for item in new:
                key = _item_key(item, ())
                if key not in had:
                    out.add((*prefix, key))
            return
    out.add(prefix)


def removed_fields(
    old: Mapping[str, Any], new: Mapping[str, Any], root: Any, *, status: bool | None = None
) -> FieldSet:
    """``fields_of(old) - fields_of(new)``: the fields a write removed, found by walking both objects together
    and skipping every subtree equal in both (an equal subtree has the same fields), so that a write to a large
    object does not list every field of the object twice."""
    out: FieldSet = set()
    for value, after, node, prefix in _tracked(old, new, root, status):
        _removed(value, after, node, prefix, out)
    return out


def _removed(old: Any, new: Any, node: Any, prefix: Path, out: FieldSet) -> None:
    """The fields :func:`_walk` lists for ``old`` and not for ``new`` at ``prefix`` (``new`` may be missing)."""
    if new is _MISSING:
        _walk(old, node, prefix, out)
        return
    if old is new or old == new:
        return
    if isinstance(old, dict) and old and isinstance(new, dict) and new and not _atomic_map(node):
        for k, v in old.items():
            _removed(v, new.get(k, _MISSING), _child(node, k), (*prefix, "f:" + k), out)
        return
    if isinstance(old, list) and old and isinstance(new, list) and new:
        kind, keys = _list_kind(node)
        if kind == "map" and keys:
            old_keys = [_item_key(item, keys) for item in old]
            new_keys = [_item_key(item, keys) for item in new]
            if len(set(old_keys)) == len(old_keys) and len(set(new_keys)) == len(new_keys):
                by_key = dict(zip(new_keys, new, strict=True))
                items_node = getattr(node, "items", None)
                for item, key in zip(old, old_keys, strict=True):
                    ip = (*prefix, key)
                    after = by_key.get(key, _MISSING)
                    if after is _MISSING:
                        out.add((*ip, "."))
                    if isinstance(item, dict):
                        after_item = after if isinstance(after, dict) else {}
                        for k, v in item.items():
                            _removed(v, after_item.get(k, _MISSING), _child(items_node, k), (*ip, "f:" + k), out)
                return
        elif kind == "set":
            have = {_item_key(item, ()) for item in new}
            for item in old:
                key = _item_key(item, ())
                if key not in have:
                    out.add((*prefix, key))
            return
    # Shapes that differ (a map become a scalar, ...) or keyed items that repeat a key: by the definition.
    old_fields: FieldSet = set()
    _walk(old, node, prefix, old_fields)
    new_fields: FieldSet = set()
    _walk(new, node, prefix, new_fields)
    out.update(old_fields - new_fields)


def _changed_slowly(new: Any, old: Any, node: Any, prefix: Path, out: FieldSet) -> None:
    """:func:`_changed` for a subtree whose keyed list repeats a key, path by path as the definition says."""
    new_fields: FieldSet = set()
    _walk(new, node, prefix, new_fields)
    old_fields: FieldSet = set()
    if old is not _MISSING:
        _walk(old, node, prefix, old_fields)
    n = len(prefix)
    for path in new_fields:
        if path not in old_fields or _value_at(old, path[n:]) != _value_at(new, path[n:]):
            out.add(path)


def encode_fields(fields: Iterable[Path]) -> dict[str, Any]:
    """A field set as the nested ``fieldsV1`` document."""
    root: dict[str, Any] = {}
    for path in sorted(fields):
        cur = root
        for part in path:
            cur = cur.setdefault(part, {})
    return root


def decode_fields(doc: Mapping[str, Any]) -> FieldSet:
    out: FieldSet = set()

    def walk(d: Mapping[str, Any], prefix: Path) -> None:
        for k, v in d.items():
            p = (*prefix, k)
            if isinstance(v, Mapping) and v:
                walk(v, p)
            else:
                out.add(p)

    walk(doc, ())
    return out


@functools.lru_cache(maxsize=4096)
def _parsed_key(text: str) -> Any:
    """The value of a ``k:`` or ``v:`` path part (cached: the same keys come back on every write; shared, never
    to be modified)."""
    return json.loads(text)


def _value_at(obj: Any, path: Path) -> tuple[bool, Any]:
    cur = obj
    for part in path:
        if part == ".":
            return True, cur
        if part.startswith("f:"):
            if not isinstance(cur, dict) or part[2:] not in cur:
                return False, None
            cur = cur[part[2:]]
        elif part.startswith(("k:", "v:")):
            if not isinstance(cur, list):
                return False, None
            want = _parsed_key(part[2:])
            found = None
            for item in cur:
                if part.startswith("k:"):
                    if isinstance(item, dict) and all(item.get(k) == v for k, v in want.items()):
                        found = item
                        break
                elif item == want:
                    found = item
                    break
            if found is None:
                return False, None
            cur = found
        else:
            return False, None
    return True, cur


def _display(path: Path) -> str:
    """``.spec.containers[name="c"].image`` as the server prints conflicting fields."""
    out = ""
    for part in path:
        if part == ".":
            continue
        if part.startswith("f:"):
            out += "." + part[2:]
        elif part.startswith("k:"):
            keys = json.loads(part[2:])
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]"
        elif part.startswith("v:"):
            out += f"[{part[2:]}]"
    return out


def _print_manager(entry: dict[str, Any]) -> str:
    """How apimachinery's ``printManager`` names a conflicting manager: an Apply manager by name (and
    subresource); an Update manager with its API version and time."""
    out = f'"{entry.get("manager", "")}"'
    if entry.get("subresource"):
        out += f' with subresource "{entry["subresource"]}"'
    if entry.get("operation") == "Update":
        out += f" using {entry.get('apiVersion', '')}"
        if entry.get("time"):
            out += f" at {entry['time']}"
    return out


def _entries(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(obj.get("metadata", {}).get("managedFields") or [])


def _entry_fields(entry: Mapping[str, Any]) -> FieldSet:
    return decode_fields(entry.get("fieldsV1") or {})


def _doc_has(doc: Mapping[str, Any], path: Path) -> bool:
    """Whether ``path`` is in ``decode_fields(doc)``, without decoding the whole document."""
    cur: Any = doc
    for part in path:
        if not isinstance(cur, Mapping) or part not in cur:
            return False
        cur = cur[part]
    return not (isinstance(cur, Mapping) and cur)


def _set_entries(obj: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    kept = [e for e in entries if e.get("fieldsV1")]
    meta = obj.setdefault("metadata", {})
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields", None)


def record_update(
    old: Mapping[str, Any] | None,
    new: dict[str, Any],
    root: Any,
    *,
    manager: str,
    api_version: str,
    now: str,
    subresource: str | None,
    status_split: bool,
) -> None:
    """Attribute what an Update (create, PUT, non-apply patch) changed to ``manager``, in ``new``.

    Fields the write changed move to ``manager``; fields it removed leave every owner.
    """
    only_status = True if subresource == "status" else (False if status_split else None)
    if old is None:
        changed = fields_of(new, root, status=only_status)
        removed: FieldSet = set()
        entries: list[dict[str, Any]] = []
    else:
        changed = changed_fields(old, new, root, status=only_status)
        removed = removed_fields(old, new, root, status=only_status)
        entries = _entries(old)
    if not changed and not removed:
        _set_entries(new, entries)
        return
    out: list[dict[str, Any]] = []
    mine: dict[str, Any] | None = None
    touched = changed | removed
    for entry in entries:
        is_mine = (
            entry.get("manager") == manager
            and entry.get("operation") == "Update"
            and entry.get("subresource") == subresource
        )
        doc = entry.get("fieldsV1") or {}
        if not is_mine and not any(_doc_has(doc, p) for p in touched):
            # Stored field sets are always encode_fields output (sorted, {} leaves), which decoding and
            # re-encoding reproduces exactly: an entry this write does not touch keeps its document (shared
            # with the stored object, which nothing modifies in place).
            out.append({**entry, "fieldsV1": doc})
            continue
        fs = decode_fields(doc) - touched
        if is_mine:
            mine = entry
            fs |= changed
        out.append({**entry, "fieldsV1": encode_fields(fs)})
    if mine is None:
        entry = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": api_version,
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode_fields(changed),
        }
        if subresource:
            entry["subresource"] = subresource
        out.append(entry)
    else:
        for e in out:
            if e.get("manager") == manager and e.get("operation") == "Update" and e.get("subresource") == subresource:
                e["time"] = now
                e["apiVersion"] = api_version
    _set_entries(new, out)


def _merge(live: Any, applied: Any, node: Any) -> Any:
    if isinstance(applied, dict) and isinstance(live, dict) and not _atomic_map(node):
        out = dict(live)
        for k, v in applied.items():
            out[k] = _merge(live.get(k), v, _child(node, k)) if k in live else clone(v)
        return out
    if isinstance(applied, list) and isinstance(live, list):
        kind, keys = _list_kind(node)
        if kind == "map" and keys:
            items_node = getattr(node, "items", None)
            live_by_key = {_item_key(i, keys): i for i in live}
            applied_keys = [_item_key(i, keys) for i in applied]
            merged = [
                _merge(live_by_key[k], item, items_node) if k in live_by_key else clone(item)
                for k, item in zip(applied_keys, applied, strict=True)
            ]
            rest = [i for i in live if _item_key(i, keys) not in set(applied_keys)]
            return merged + rest
        if kind == "set":
            out_list = [clone(i) for i in applied]
            out_list += [i for i in live if i not in applied]
            return out_list
    return clone(applied)


def _remove_path(obj: Any, path: Path) -> None:
    if path and path[-1] == ".":
        path = path[:-1]
    if not path:
        return
    found, parent = _value_at(obj, path[:-1])
    if not found:
        return
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith(("k:", "v:")) and isinstance(parent, list):
        ok, item = _value_at(obj, path)
        if ok:
            for i, candidate in enumerate(parent):
                if candidate is item:
                    del parent[i]
                    break


def apply_config(
    live: Mapping[str, Any] | None,
    applied: Mapping[str, Any],
    root: Any,
    *,
    manager: str,
    api_version: str,
    now: str,
    force: bool,
    subresource: str | None,
    status_split: bool,
) -> dict[str, Any]:
    """Server-side apply of ``applied`` by ``manager`` onto ``live`` (None: create). Raises 409 on conflicts."""
    only_status = True if subresource == "status" else (False if status_split else None)
    applied_fields = fields_of(applied, root, status=only_status)
    entries = _entries(live) if live is not None else []
    base: dict[str, Any] = clone(dict(live)) if live is not None else {}
    conflicts: list[tuple[str, str, Path]] = []
    others: list[tuple[dict[str, Any], FieldSet]] = []
    previous: FieldSet = set()
    for entry in entries:
        fs = _entry_fields(entry)
        if (
            entry.get("manager") == manager
            and entry.get("operation") == "Apply"
            and entry.get("subresource") == subresource
        ):
            previous = fs
            continue
        others.append((entry, fs))
        if live is None:
            continue
        for path in fs & applied_fields:
            if path[-1] == ".":
                continue
            if _value_at(live, path) != _value_at(applied, path):
                conflicts.append((_print_manager(entry), "", path))
    if conflicts and not force:
        causes = [
            {
                "reason": "FieldManagerConflict",
                "message": f"conflict with {m}",
                "field": _display(p),
            }
            for m, v, p in sorted(conflicts, key=lambda c: c[2])
        ]
        n = len(causes)
        listing = "\n".join(f"- {c['message']}: {c['field']}" for c in causes)
        message = f"Apply failed with {n} conflict{'s' if n != 1 else ''}: " + (
            f"{causes[0]['message']}: {causes[0]['field']}" if n == 1 else "\n" + listing
        )
        raise ApiError(409, "Conflict", message, {"causes": causes})
    merged: dict[str, Any] = _merge(base, {k: v for k, v in applied.items() if k not in ("apiVersion", "kind")}, root)
    # Fields this manager applied before, applies no more, and nobody else owns, are removed.
    owned_by_others: FieldSet = set()
    for _, fs in others:
        owned_by_others |= fs
    for path in sorted(previous - applied_fields - owned_by_others, key=len, reverse=True):
        _remove_path(merged, path)
    new_entries: list[dict[str, Any]] = []
    for entry, owned in others:
        kept = owned - applied_fields if force else owned
        new_entries.append({**entry, "fieldsV1": encode_fields(kept)})
    entry = {
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": encode_fields(applied_fields),
    }
    if subresource:
        entry["subresource"] = subresource
    new_entries.append(entry)
    _set_entries(merged, new_entries)
    if "apiVersion" in applied:
        merged["apiVersion"] = applied["apiVersion"]
    if "kind" in applied:
        merged["kind"] = applied["kind"]
    return merged
