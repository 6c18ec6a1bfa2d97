"""Generator of the simulator's compact schema file (``kubesim/data/schemas.json.gz``).

The simulated API servers must validate, default and describe objects exactly as a real cluster does, but the
package cannot carry the upstream documents themselves (they are large, and they are reference material, not
ours). This module reduces them to the project's own compact form:

* built-in kinds from the Kubernetes OpenAPI v3 documents, kept as *named* definitions (``io.k8s.api.core.v1.PodSpec``)
  referenced by name, limited to what the served kinds reach;
* every served version of every CRD under ``schemas/{kueue,jobset,kubeflow,ray}``, with its names, scope,
  subresources and printer columns, and its ``openAPIV3Schema``;
* descriptions cut to their first sentence (enough for ``kubectl explain`` to say what a field is);
* large identical subtrees (the PodSpec embedded a dozen times in the JobSet/Ray/Kubeflow CRDs) interned once, by
  content hash, in a shared table.

Node keys are short (see ``KEYS``); ``model.py`` reads them and ``openapi.py`` turns them back into OpenAPI.
The output is deterministic so that ``tests/sim/test_schema_drift.py`` can rebuild it and compare.

Run: ``python -m kubesim.schema.build --shared /work/shared [--out PATH]``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from .model import FORMAT, KEYS, PER_GROUP_GVK, RULE_KEYS

__all__ = [
    "BUILTIN_KINDS",
    "CRD_DIRS",
    "EXTRA_DEFINITIONS",
    "FORMAT",
    "build_document",
    "dumps",
    "first_sentence",
    "main",
]

#: Built-in kinds the simulator serves: (OpenAPI document, group, version, kind). Add a row to serve another.
BUILTIN_KINDS: tuple[tuple[str, str, str, str], ...] = (
    ("api__v1_openapi.json", "", "v1", "Namespace"),
    ("api__v1_openapi.json", "", "v1", "Node"),
    ("api__v1_openapi.json", "", "v1", "Pod"),
    ("api__v1_openapi.json", "", "v1", "Secret"),
    ("api__v1_openapi.json", "", "v1", "ConfigMap"),
    ("api__v1_openapi.json", "", "v1", "Event"),
    ("api__v1_openapi.json", "", "v1", "ServiceAccount"),
    ("apis__batch__v1_openapi.json", "batch", "v1", "Job"),
    ("apis__coordination.k8s.io__v1_openapi.json", "coordination.k8s.io", "v1", "Lease"),
    ("apis__apps__v1_openapi.json", "apps", "v1", "Deployment"),
)

#: Definitions the served OpenAPI documents and request bodies need besides the kinds themselves.
EXTRA_DEFINITIONS: tuple[str, ...] = (
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
    "io.k8s.api.autoscaling.v1.Scale",
    "io.k8s.api.core.v1.Binding",
)

#: Where the CRDs live under ``<shared>/schemas``.
CRD_DIRS: tuple[str, ...] = ("kueue", "jobset", "kubeflow", "ray")

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

#: Keywords whose values are schema nodes (or lists of them).
_NODE_KEYS = {"properties": "p", "items": "i", "additionalProperties": "a", "not": "not"}
_NODE_LIST_KEYS = {"anyOf": "any", "oneOf": "one", "allOf": "all"}
#: Keywords dropped on purpose (documentation only, or not used by the apiserver for these kinds).
_IGNORED = {"x-kubernetes-unions", "example", "externalDocs", "title"}

#: Interned subtrees must be at least this large (serialised characters) and occur at least twice.
_INTERN_MIN_SIZE = 400

_ABBREVIATIONS = ("e.g.", "i.e.", "E.g.", "I.e.", "etc.)", "vs.")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def first_sentence(text: str) -> str:
    """The first sentence of a description, whitespace collapsed: enough to say what a field is, and small."""
    flat = " ".join(text.split())
    start = 0
    while True:
        m = _SENTENCE_END.search(flat, start)
        if m is None:
            return flat
        end = m.end()
        if any(flat[:end].endswith(a) for a in _ABBREVIATIONS):
            start = end
            continue
        return flat[:end]


class _Converter:
    """Turns upstream schema nodes into compact nodes; remembers which definitions were referenced."""

    def __init__(self) -> None:
        self.refs: set[str] = set()

    def node(self, raw: dict[str, Any]) -> dict[str, Any]:
        all_of = raw.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and set(all_of[0]) == {"$ref"}:
            # A reference wrapped in allOf so that it can carry its own description/default: a reference node.
            out = self._ref(all_of[0]["$ref"])
            rest = {k: v for k, v in raw.items() if k != "allOf"}
            out.update(self._plain(rest))
            return out
        if "$ref" in raw:
            out = self._ref(raw["$ref"])
            out.update(self._plain({k: v for k, v in raw.items() if k != "$ref"}))
            return out
        return self._plain(raw)

    def _ref(self, ref: str) -> dict[str, Any]:
        name = ref.rsplit("/", 1)[-1]
        self.refs.add(name)
        return {"$": name}

    def _plain(self, raw: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in raw.items():
            if key in KEYS:
                out[KEYS[key]] = first_sentence(value) if key == "description" else value
            elif key == "properties":
                out["p"] = {name: self.node(child) for name, child in value.items()}
            elif key in ("items", "not"):
                out[_NODE_KEYS[key]] = self.node(value)
            elif key == "additionalProperties":
                out["a"] = value if isinstance(value, bool) else self.node(value)
            elif key in _NODE_LIST_KEYS:
                out[_NODE_LIST_KEYS[key]] = [self.node(child) for child in value]
            elif key == "x-kubernetes-validations":
                out["v"] = [{RULE_KEYS[k]: v for k, v in rule.items() if k in RULE_KEYS} for rule in value]
            elif key in _IGNORED:
                continue
            else:
                raise ValueError(f"schema keyword {key!r} is not handled by the compact form")
        if out.get("d") == "":
            del out["d"]
        return out


def _children(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for child in (node.get("p") or {}).values():
        yield child
    for key in ("i", "a", "not"):
        child = node.get(key)
        if isinstance(child, dict):
            yield child
    for key in ("any", "one", "all"):
        yield from node.get(key) or ()


def dumps(value: Any) -> str:
    """Canonical JSON: sorted keys, no spaces, so that equal content gives equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class _Interner:
    """Content-hash interning of large subtrees that occur more than once (Merkle hashes, one pass each)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.shared: dict[str, dict[str, Any]] = {}

    def _digest(self, node: dict[str, Any], memo: dict[int, tuple[str, int]]) -> tuple[str, int]:
        found = memo.get(id(node))
        if found is not None:
            return found
        shallow: dict[str, Any] = {}
        size = 0
        for key, value in node.items():
            if key == "p":
                props = {}
                for name, child in value.items():
                    h, s = self._digest(child, memo)
                    props[name] = h
                    size += s + len(name)
                shallow[key] = props
            elif key in ("i", "not") or (key == "a" and isinstance(value, dict)):
                h, s = self._digest(value, memo)
                shallow[key] = h
                size += s
            elif key in ("any", "one", "all"):
                hs = []
                for child in value:
                    h, s = self._digest(child, memo)
                    hs.append(h)
                    size += s
                shallow[key] = hs
            else:
                text = dumps(value)
                shallow[key] = value
                size += len(text) + len(key)
        digest = hashlib.sha256(dumps(shallow).encode()).hexdigest()[:16]
        memo[id(node)] = (digest, size)
        return digest, size

    def count(self, root: dict[str, Any], memo: dict[int, tuple[str, int]]) -> None:
        stack = [root]
        while stack:
            node = stack.pop()
            digest, size = self._digest(node, memo)
            if size >= _INTERN_MIN_SIZE:
                self.counts[digest] += 1
            stack.extend(_children(node))

    def intern(self, node: dict[str, Any], memo: dict[int, tuple[str, int]]) -> dict[str, Any]:
        digest, size = self._digest(node, memo)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "p":
                out[key] = {name: self.intern(child, memo) for name, child in value.items()}
            elif key in ("i", "not") or (key == "a" and isinstance(value, dict)):
                out[key] = self.intern(value, memo)
            elif key in ("any", "one", "all"):
                out[key] = [self.intern(child, memo) for child in value]
            else:
                out[key] = value
        if size >= _INTERN_MIN_SIZE and self.counts[digest] >= 2:
            self.shared.setdefault(digest, out)
            return {"$s": digest}
        return out


def _load_kubernetes(kube_dir: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """All component schemas of the Kubernetes documents (first document wins), and the batch document's
    query parameters (name -> parameter), which every resource path of a real server shares."""
    defs: dict[str, dict[str, Any]] = {}
    params: dict[str, dict[str, Any]] = {}
    for path in sorted(kube_dir.glob("*.json")):
        doc = json.loads(path.read_text())
        for name, schema in doc["components"]["schemas"].items():
            defs.setdefault(name, schema)
        if path.name == "apis__batch__v1_openapi.json":
            for item in doc["paths"].values():
                for op in [item, *[v for v in item.values() if isinstance(v, dict)]]:
                    for p in op.get("parameters") or []:
                        if p.get("in") == "query":
                            params.setdefault(p["name"], p)
    return defs, params


def _def_for(defs: dict[str, dict[str, Any]], group: str, version: str, kind: str) -> str:
    for name, schema in sorted(defs.items()):
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            if (gvk.get("group", ""), gvk.get("version"), gvk.get("kind")) == (group, version, kind):
                return name
    raise KeyError(f"no definition for {group}/{version} {kind}")


def _builtins(kube_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    raw_defs, raw_params = _load_kubernetes(kube_dir)
    kinds: list[dict[str, Any]] = []
    roots: list[str] = list(EXTRA_DEFINITIONS)
    for _doc, group, version, kind in BUILTIN_KINDS:
        name = _def_for(raw_defs, group, version, kind)
        list_name = _def_for(raw_defs, group, version, kind + "List")
        kinds.append({"group": group, "version": version, "kind": kind, "def": name, "listDef": list_name})
        roots += [name, list_name]
    conv = _Converter()
    defs: dict[str, Any] = {}
    pending = list(dict.fromkeys(roots))
    while pending:
        name = pending.pop()
        if name in defs:
            continue
        conv.refs.clear()
        node = conv.node(raw_defs[name])
        if name in PER_GROUP_GVK:
            node.pop("gvk", None)
        defs[name] = node
        pending.extend(sorted(conv.refs - defs.keys()))
    params = {
        name: {"in": p["in"], "t": p.get("schema", {}).get("type", "string"), "d": first_sentence(p["description"])}
        for name, p in sorted(raw_params.items())
    }
    return defs, kinds, params


def _crds(schemas_dir: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for sub in CRD_DIRS:
        for path in sorted((schemas_dir / sub).glob("*.yaml")):
            # The C loader when PyYAML has it: the CRDs are several megabytes.
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            for doc in yaml.load_all(path.read_text(), Loader=loader):  # a safe loader
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec = doc["spec"]
                names = spec["names"]
                for ver in spec["versions"]:
                    if not ver.get("served", False):
                        continue
                    schema = _Converter().node(ver["schema"]["openAPIV3Schema"])
                    props = schema.setdefault("p", {})
                    # The apiserver serves and treats a CR's metadata as ObjectMeta (with the standard description),
                    # whatever the CRD says.
                    props["metadata"] = {"$": OBJECT_META, "d": "Standard object's metadata."}
                    schema["gvk"] = [{"group": spec["group"], "kind": names["kind"], "version": ver["name"]}]
                    sub_res = ver.get("subresources") or {}
                    entry: dict[str, Any] = {
                        "group": spec["group"],
                        "version": ver["name"],
                        "kind": names["kind"],
                        "listKind": names.get("listKind", names["kind"] + "List"),
                        "plural": names["plural"],
                        "singular": names.get("singular", names["kind"].lower()),
                        "shortNames": names.get("shortNames", []),
                        "categories": names.get("categories", []),
                        "scope": spec["scope"],
                        "storage": bool(ver.get("storage", False)),
                        "deprecated": bool(ver.get("deprecated", False)),
                        "subresources": {k: (v or {}) for k, v in sorted(sub_res.items())},
                        "printerColumns": ver.get("additionalPrinterColumns", []),
                        "selectableFields": [f["jsonPath"] for f in ver.get("selectableFields", [])],
                        "schema": schema,
                    }
                    if ver.get("deprecationWarning"):
                        entry["deprecationWarning"] = ver["deprecationWarning"]
                    out.append(entry)
    out.sort(key=lambda e: (e["group"], e["kind"], e["version"]))
    return out


def build_document(shared_dir: Path) -> dict[str, Any]:
    """The compact document built from ``<shared_dir>/schemas`` (what ``schemas.json.gz`` holds)."""
    schemas_dir = shared_dir / "schemas"
    defs, builtins, params = _builtins(schemas_dir / "kubernetes")
    crds = _crds(schemas_dir)
    interner = _Interner()
    memo: dict[int, tuple[str, int]] = {}
    for crd in crds:
        interner.count(crd["schema"], memo)
    for crd in crds:
        crd["schema"] = interner.intern(crd["schema"], memo)
    sources = {}
    for sub in CRD_DIRS:
        commit = schemas_dir / sub / "SOURCE_COMMIT"
        if commit.is_file():
            sources[sub] = commit.read_text().strip()
    # Round-trip through JSON so the result equals what a reader of the file gets (tuples, key order).
    doc: dict[str, Any] = json.loads(
        dumps(
            {
                "format": FORMAT,
                "defs": defs,
                "shared": interner.shared,
                "builtins": builtins,
                "crds": crds,
                "params": params,
                "sources": sources,
            }
        )
    )
    return doc


def default_output() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "schemas.json.gz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--shared", type=Path, required=True, help="the shared reference directory (has schemas/)")
    parser.add_argument("--out", type=Path, default=default_output(), help="output file (.json.gz)")
    args = parser.parse_args(argv)
    doc = build_document(args.shared)
    data = dumps(doc).encode()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0 and no file name: the gzip bytes depend on the content only.
    with open(args.out, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    print(f"{args.out}: {len(data)} bytes JSON, {args.out.stat().st_size} bytes gzipped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
