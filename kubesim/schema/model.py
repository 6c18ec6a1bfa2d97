"""Loading of the compact schema file and lookup of kinds and schema nodes.

The file (built by ``build.py``) is read once per process. Nodes wrap the compact dictionaries and resolve
references lazily: a ``Node`` for a named definition (``io.k8s.api.core.v1.PodSpec``) or an interned CRD subtree
is created once and shared by every place that references it, so walking a schema on each request costs
dictionary look-ups only.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cel import CompiledRule

__all__ = ["FORMAT", "KEYS", "PER_GROUP_GVK", "RULE_KEYS", "KindInfo", "KindSchema", "Node", "Schemas"]

#: Version of the compact node layout (bumped whenever it changes, so stale files are recognised).
FORMAT = 1

#: OpenAPI keyword -> short key of the compact form.
KEYS: dict[str, str] = {
    "type": "t",
    "format": "f",
    "description": "d",
    "required": "r",
    "enum": "e",
    "default": "df",
    "nullable": "n",
    "minimum": "mn",
    "maximum": "mx",
    "exclusiveMinimum": "xmn",
    "exclusiveMaximum": "xmx",
    "multipleOf": "mo",
    "minLength": "mnl",
    "maxLength": "mxl",
    "minItems": "mni",
    "maxItems": "mxi",
    "uniqueItems": "ui",
    "minProperties": "mnp",
    "maxProperties": "mxp",
    "pattern": "pt",
    "x-kubernetes-int-or-string": "ios",
    "x-kubernetes-preserve-unknown-fields": "pu",
    "x-kubernetes-embedded-resource": "er",
    "x-kubernetes-list-type": "lt",
    "x-kubernetes-list-map-keys": "lk",
    "x-kubernetes-map-type": "mt",
    "x-kubernetes-patch-strategy": "ps",
    "x-kubernetes-patch-merge-key": "pk",
    "x-kubernetes-group-version-kind": "gvk",
}
#: Keys of ``x-kubernetes-validations`` entries.
RULE_KEYS = {
    "rule": "rule",
    "message": "msg",
    "messageExpression": "mexp",
    "fieldPath": "fp",
    "reason": "rs",
    "optionalOldSelf": "oos",
}
#: Meta definitions whose ``x-kubernetes-group-version-kind`` differs per document (each lists its own group);
#: stored without it and given the right list when a document is rebuilt.
PER_GROUP_GVK = (
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
)


_MISSING: Any = object()
_EMPTY: Mapping[str, Node] = {}


@dataclass(frozen=True)
class KindInfo:
    """One served (group, version, kind) and what discovery says about it."""

    group: str
    version: str
    kind: str
    builtin: bool
    plural: str | None
    singular: str | None
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    namespaced: bool | None  # CRDs: from scope; built-ins: None (the API server's registry decides)
    storage: bool  # CRDs: the storage version flag; built-ins True
    subresources: tuple[str, ...]  # CRDs: ("status",) / ("status", "scale"); built-ins: ()
    printer_columns: tuple[dict[str, Any], ...]  # CRD additionalPrinterColumns as in the CRD
    list_kind: str = ""
    deprecated: bool = False
    deprecation_warning: str | None = None
    selectable_fields: tuple[str, ...] = ()
    #: CRD scale subresource paths (specReplicasPath, statusReplicasPath, labelSelectorPath), if any.
    scale: Mapping[str, str] | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class Node:
    """A schema node. Attributes mirror the OpenAPI keywords (``x-kubernetes-*`` without the prefix)."""

    __slots__ = ("_addl", "_items", "_props", "_schemas", "def_name", "raw")

    def __init__(self, schemas: Schemas, raw: dict[str, Any], def_name: str | None = None) -> None:
        self._schemas = schemas
        #: The compact dictionary (short keys, see ``build._KEYS``); references already merged in.
        self.raw = raw
        #: The definition this node is (``io.k8s.api.batch.v1.JobSpec``), for built-in kinds.
        self.def_name = def_name
        self._props: Mapping[str, Node] | None = None
        self._items: Any = _MISSING
        self._addl: Any = _MISSING

    def __repr__(self) -> str:
        return f"<Node {self.def_name or self.type or 'any'}>"

    # -- structure ------------------------------------------------------------------------------------

    @property
    def properties(self) -> Mapping[str, Node]:
        props = self._props
        if props is None:
            raw_props = self.raw.get("p")
            props = {k: self._schemas.node(v) for k, v in raw_props.items()} if raw_props else _EMPTY
            self._props = props
        return props

    @property
    def items(self) -> Node | None:
        if self._items is _MISSING:
            raw = self.raw.get("i")
            self._items = self._schemas.node(raw) if raw is not None else None
        result: Node | None = self._items
        return result

    @property
    def additional_properties(self) -> Node | bool | None:
        if self._addl is _MISSING:
            raw = self.raw.get("a")
            self._addl = self._schemas.node(raw) if isinstance(raw, dict) else raw
        result: Node | bool | None = self._addl
        return result

    def _nodes(self, key: str) -> tuple[Node, ...]:
        return tuple(self._schemas.node(r) for r in self.raw.get(key) or ())

    @property
    def any_of(self) -> tuple[Node, ...]:
        return self._nodes("any")

    @property
    def one_of(self) -> tuple[Node, ...]:
        return self._nodes("one")

    @property
    def all_of(self) -> tuple[Node, ...]:
        return self._nodes("all")

    @property
    def not_(self) -> Node | None:
        raw = self.raw.get("not")
        return self._schemas.node(raw) if raw is not None else None

    # -- plain keywords -------------------------------------------------------------------------------

    @property
    def type(self) -> str | None:
        return self.raw.get("t")

    @property
    def format(self) -> str | None:
        return self.raw.get("f")

    @property
    def description(self) -> str | None:
        return self.raw.get("d")

    @property
    def required(self) -> Sequence[str]:
        return self.raw.get("r") or ()

    @property
    def enum(self) -> Sequence[Any] | None:
        return self.raw.get("e")

    @property
    def has_default(self) -> bool:
        return "df" in self.raw

    @property
    def default(self) -> Any:
        return self.raw.get("df")

    @property
    def nullable(self) -> bool:
        return bool(self.raw.get("n"))

    @property
    def int_or_string(self) -> bool:
        return bool(self.raw.get("ios")) or self.raw.get("f") == "int-or-string"

    @property
    def preserve_unknown(self) -> bool:
        return bool(self.raw.get("pu"))

    @property
    def embedded_resource(self) -> bool:
        return bool(self.raw.get("er"))

    @property
    def list_type(self) -> str | None:
        return self.raw.get("lt")

    @property
    def list_map_keys(self) -> Sequence[str] | None:
        return self.raw.get("lk")

    @property
    def map_type(self) -> str | None:
        return self.raw.get("mt")

    @property
    def patch_strategy(self) -> str | None:
        return self.raw.get("ps")

    @property
    def patch_merge_key(self) -> str | None:
        return self.raw.get("pk")

    @property
    def validations(self) -> Sequence[Mapping[str, Any]]:
        """``x-kubernetes-validations`` with short keys (rule, msg, mexp, fp, rs, oos)."""
        return self.raw.get("v") or ()

    @property
    def ref_name(self) -> str | None:
        """The Go struct name of a built-in definition (``JobSpec``), None for anonymous nodes."""
        return self.def_name.rsplit(".", 1)[-1] if self.def_name else None

    @property
    def gvk(self) -> Sequence[Mapping[str, str]]:
        return self.raw.get("gvk") or ()

    def compiled_rules(self) -> Sequence[CompiledRule]:
        """This node's CEL rules, compiled once (see ``cel.py``)."""
        return self._schemas.compiled_rules(self)


class Schemas:
    """The simulator's schemas: every served kind, its schema, and the named definitions."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.doc = doc
        self._defs: dict[str, Any] = doc["defs"]
        self._shared: dict[str, Any] = doc["shared"]
        self._nodes: dict[int, Node] = {}
        self._rules: dict[int, Sequence[CompiledRule]] = {}
        self._kinds: dict[tuple[str, str, str], KindSchema] = {}
        for entry in doc["builtins"]:
            info = KindInfo(
                group=entry["group"],
                version=entry["version"],
                kind=entry["kind"],
                builtin=True,
                plural=None,
                singular=None,
                short_names=(),
                categories=(),
                namespaced=None,
                storage=True,
                subresources=(),
                printer_columns=(),
                list_kind=entry["kind"] + "List",
            )
            self._kinds[(info.group, info.version, info.kind)] = KindSchema(
                self, info, self.definition(entry["def"]), entry["def"], entry["listDef"]
            )
        for entry in doc["crds"]:
            subs = entry["subresources"]
            info = KindInfo(
                group=entry["group"],
                version=entry["version"],
                kind=entry["kind"],
                builtin=False,
                plural=entry["plural"],
                singular=entry["singular"],
                short_names=tuple(entry["shortNames"]),
                categories=tuple(entry["categories"]),
                namespaced=entry["scope"] == "Namespaced",
                storage=entry["storage"],
                subresources=tuple(s for s in ("status", "scale") if s in subs),
                printer_columns=tuple(entry["printerColumns"]),
                list_kind=entry["listKind"],
                deprecated=entry["deprecated"],
                deprecation_warning=entry.get("deprecationWarning"),
                selectable_fields=tuple(entry["selectableFields"]),
                scale=subs.get("scale"),
            )
            self._kinds[(info.group, info.version, info.kind)] = KindSchema(
                self, info, self.node(entry["schema"]), None, None
            )

    @classmethod
    def load(cls) -> Schemas:
        """The schemas shipped with the package (read once, then shared)."""
        return _load_packaged()

    @classmethod
    def from_file(cls, path: str) -> Schemas:
        with gzip.open(path, "rb") as fh:
            return cls(json.loads(fh.read()))

    def kinds(self) -> list[KindInfo]:
        """Every (group, version, kind) served: built-ins first, then CRD versions."""
        return [k.info for k in self._kinds.values()]

    def get(self, group: str, version: str, kind: str) -> KindSchema:
        """The schema of one kind in one version. ``KeyError`` if it is not served."""
        return self._kinds[(group, version, kind)]

    def find(self, group: str, version: str, kind: str) -> KindSchema | None:
        return self._kinds.get((group, version, kind))

    def definition(self, name: str) -> Node:
        """A named built-in definition (``io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta``)."""
        raw = self._defs[name]
        node = self._nodes.get(id(raw))
        if node is None:
            node = self._nodes[id(raw)] = Node(self, raw, name)
        return node

    def has_definition(self, name: str) -> bool:
        return name in self._defs

    def definition_names(self) -> Iterator[str]:
        return iter(self._defs)

    def shared_raw(self, key: str) -> dict[str, Any]:
        result: dict[str, Any] = self._shared[key]
        return result

    def node(self, raw: dict[str, Any]) -> Node:
        """The node for a compact dictionary, references resolved (cached by identity)."""
        node = self._nodes.get(id(raw))
        if node is not None:
            return node
        if "$s" in raw:
            node = self.node(self._shared[raw["$s"]])
        elif "$" in raw:
            name = raw["$"]
            if len(raw) == 1:
                node = self.definition(name)
            else:
                # A reference with its own description/default/extensions: the definition with those on top.
                merged = {**self._defs[name], **{k: v for k, v in raw.items() if k != "$"}}
                node = Node(self, merged, name)
        else:
            node = Node(self, raw)
        self._nodes[id(raw)] = node
        return node

    def compiled_rules(self, node: Node) -> Sequence[CompiledRule]:
        rules = self._rules.get(id(node.raw))
        if rules is None:
            from .cel import compile_rules

            rules = self._rules[id(node.raw)] = compile_rules(node.validations)
        return rules


@cache
def _load_packaged() -> Schemas:
    data = resources.files("kubesim").joinpath("data/schemas.json.gz").read_bytes()
    return Schemas(json.loads(gzip.decompress(data)))


class KindSchema:
    """The schema of one served kind in one version, and the request-time operations on it."""

    def __init__(
        self, schemas: Schemas, info: KindInfo, root: Node, def_name: str | None, list_def_name: str | None
    ) -> None:
        self.schemas = schemas
        self.info = info
        #: The schema node of the whole object.
        self.root = root
        #: Built-ins: the definition names of the kind and its list (``io.k8s.api.batch.v1.Job``/``JobList``).
        self.def_name = def_name
        self.list_def_name = list_def_name
        self._has_rules: bool | None = None

    def __repr__(self) -> str:
        return f"<KindSchema {self.info.api_version} {self.info.kind}>"

    @property
    def group(self) -> str:
        return self.info.group

    @property
    def version(self) -> str:
        return self.info.version

    @property
    def kind(self) -> str:
        return self.info.kind

    @property
    def builtin(self) -> bool:
        return self.info.builtin

    def node_at(self, path: Sequence[str]) -> Node | None:
        """The node at a field path; list items are addressed by the list field's name, map values by any key.

        ``("spec", "template", "spec", "containers")`` is the containers array (``.items`` is a container).
        """
        node: Node | None = self.root
        for part in path:
            if node is None:
                return None
            child = node.properties.get(part)
            if child is None and node.items is not None:
                # Through a list to its elements: the element's field is named right after the list's.
                node = node.items
                child = node.properties.get(part)
            if child is None:
                addl = node.additional_properties
                child = addl if isinstance(addl, Node) else None
            node = child
        return node

    @property
    def has_rules(self) -> bool:
        """Whether any node of the schema carries x-kubernetes-validations (the apiserver runs CEL only then)."""
        if self._has_rules is None:
            seen: set[int] = set()
            stack = [self.root]
            found = False
            while stack and not found:
                node = stack.pop()
                if id(node) in seen:
                    continue
                seen.add(id(node))
                if node.validations:
                    found = True
                stack.extend(node.properties.values())
                for child in (node.items, node.additional_properties):
                    if isinstance(child, Node):
                        stack.append(child)
            self._has_rules = found
        return self._has_rules

    def decode_builtin(
        self, obj: dict[str, Any], *, field_validation: str = "Warn", stored: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], list[str]]:
        """Decode a built-in kind as the apiserver's JSON decoder does: see ``decode.decode_builtin``."""
        from .decode import decode_builtin

        return decode_builtin(self, obj, field_validation=field_validation, stored=stored)

    def apply_crd(
        self,
        obj: dict[str, Any],
        *,
        field_validation: str = "Warn",
        old: dict[str, Any] | None = None,
        subresource: str | None = None,
        old_as_stored: bool = False,
    ) -> tuple[dict[str, Any], list[str]]:
        """Prune, default and validate a custom resource: see ``crd.apply_crd``."""
        from .crd import apply_crd

        return apply_crd(
            self,
            obj,
            field_validation=field_validation,
            old=old,
            subresource=subresource,
            old_as_stored=old_as_stored,
        )
