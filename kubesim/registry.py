"""What a simulated cluster serves: built-in resources and the custom resources from the shipped CRDs.

Discovery data (names, short names, verbs, subresources, scope) is the real server's, so kubectl's
resource mapping (``kubectl get cq``, ``kubectl get workloads``) behaves as on a real cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from .schema import Schemas
from .selectors import FieldGetter

__all__ = ["Registry", "ResourceType"]

STANDARD_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


def _path(*keys: str, default: str | None = None) -> FieldGetter:
    """A field-selector getter; ``default`` is what the server's field set holds when the field is unset
    (Go formats the zero value: ``strconv.FormatBool(false)``, ``strconv.Itoa(0)``)."""

    def get(obj: Mapping[str, Any]) -> str | None:
        cur: Any = obj
        for k in keys:
            if not isinstance(cur, Mapping):
                return default
            cur = cur.get(k)
        if cur is None:
            return default
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


_META_FIELDS: dict[str, FieldGetter] = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}


@dataclass(frozen=True)
class ResourceType:
    """One REST resource (``jobs`` in ``batch``), served in one or more versions."""

    group: str
    versions: tuple[str, ...]  # served versions, preferred first
    storage_version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    builtin: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    verbs: tuple[str, ...] = STANDARD_VERBS
    extra_fields: Mapping[str, FieldGetter] = field(default_factory=dict)
    printer_columns: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The group-resource string (``jobs.batch``), the store's bucket name."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    @property
    def field_getters(self) -> Mapping[str, FieldGetter]:
        return {**_META_FIELDS, **self.extra_fields}


def _builtin(
    group: str,
    kind: str,
    plural: str,
    *,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    sub: tuple[str, ...] = (),
    verbs: tuple[str, ...] = STANDARD_VERBS,
    fields: Mapping[str, FieldGetter] | None = None,
    version: str = "v1",
) -> ResourceType:
    return ResourceType(
        group=group,
        versions=(version,),
        storage_version=version,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        builtin=True,
        short_names=short,
        categories=categories,
        subresources=frozenset(sub),
        verbs=verbs,
        extra_fields=fields or {},
    )


BUILTINS: tuple[ResourceType, ...] = (
    _builtin(
        "",
        "Namespace",
        "namespaces",
        namespaced=False,
        short=("ns",),
        sub=("status", "finalize"),
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        fields={"status.phase": _path("status", "phase")},
    ),
    _builtin(
        "",
        "Node",
        "nodes",
        namespaced=False,
        short=("no",),
        sub=("status",),
        fields={"spec.unschedulable": _path("spec", "unschedulable", default="false")},
    ),
    _builtin(
        "",
        "Pod",
        "pods",
        short=("po",),
        categories=("all",),
        sub=("status", "binding", "log"),
        fields={
            "spec.nodeName": _path("spec", "nodeName"),
            "spec.schedulerName": _path("spec", "schedulerName"),
            "spec.restartPolicy": _path("spec", "restartPolicy"),
            "spec.serviceAccountName": _path("spec", "serviceAccountName"),
            "spec.hostNetwork": _path("spec", "hostNetwork", default="false"),
            "status.phase": _path("status", "phase"),
            "status.podIP": _path("status", "podIP"),
            "status.nominatedNodeName": _path("status", "nominatedNodeName"),
        },
    ),
    _builtin("", "Secret", "secrets", fields={"type": _path("type")}),
    _builtin("", "ConfigMap", "configmaps", short=("cm",)),
    _builtin("", "ServiceAccount", "serviceaccounts", short=("sa",)),
    _builtin(
        "",
        "Event",
        "events",
        short=("ev",),
        fields={
            "involvedObject.kind": _path("involvedObject", "kind"),
            "involvedObject.namespace": _path("involvedObject", "namespace"),
            "involvedObject.name": _path("involvedObject", "name"),
            "involvedObject.uid": _path("involvedObject", "uid"),
            "involvedObject.apiVersion": _path("involvedObject", "apiVersion"),
            "involvedObject.resourceVersion": _path("involvedObject", "resourceVersion"),
            "involvedObject.fieldPath": _path("involvedObject", "fieldPath"),
            "reason": _path("reason"),
            "reportingComponent": _path("reportingComponent"),
            "source": _path("source", "component"),
            "type": _path("type"),
        },
    ),
    _builtin(
        "batch",
        "Job",
        "jobs",
        categories=("all",),
        sub=("status",),
        fields={"status.successful": _path("status", "succeeded", default="0")},
    ),
    _builtin("coordination.k8s.io", "Lease", "leases"),
    _builtin("apps", "Deployment", "deployments", short=("deploy",), categories=("all",), sub=("status", "scale")),
)


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version ordering: GA > beta > alpha, then by numbers (v1beta2 before v1beta1)."""
    import re

    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (-1, 0, 0)
    major = int(m.group(1))
    stage = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, major, minor)


class Registry:
    """Lookup of resource types by (group, version, plural), by kind, and for discovery."""

    def __init__(self, types: tuple[ResourceType, ...]) -> None:
        self.types = types
        self._by_plural: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        self._by_key: dict[str, ResourceType] = {}
        for rt in types:
            for v in rt.versions:
                self._by_plural[(rt.group, v, rt.plural)] = rt
            self._by_kind[(rt.group, rt.kind)] = rt
            self._by_key[rt.key] = rt

    @classmethod
    @cache
    def default(cls) -> Registry:
        """Built-ins plus every CRD kind in the shipped schemas, each served in all its versions."""
        schemas = Schemas.load()
        crds: dict[tuple[str, str], list[Any]] = {}
        for info in schemas.kinds():
            if info.builtin:
                continue
            crds.setdefault((info.group, info.kind), []).append(info)
        types = list(BUILTINS)
        for (group, kind), infos in sorted(crds.items()):
            infos.sort(key=lambda i: _version_priority(i.version), reverse=True)
            storage = next((i.version for i in infos if i.storage), infos[0].version)
            first = infos[0]
            types.append(
                ResourceType(
                    group=group,
                    versions=tuple(i.version for i in infos),
                    storage_version=storage,
                    kind=kind,
                    plural=first.plural or kind.lower() + "s",
                    singular=first.singular or kind.lower(),
                    namespaced=bool(first.namespaced),
                    builtin=False,
                    short_names=tuple(first.short_names),
                    categories=tuple(first.categories),
                    subresources=frozenset(first.subresources),
                    printer_columns={i.version: tuple(i.printer_columns) for i in infos},
                )
            )
        return cls(tuple(types))

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_plural.get((group, version, plural))

    def by_kind(self, group: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((group, kind))

    def by_key(self, key: str) -> ResourceType:
        return self._by_key[key]

    def groups(self) -> dict[str, list[str]]:
        """Group name -> served versions, preferred first (core group under "")."""
        out: dict[str, list[str]] = {}
        for rt in self.types:
            versions = out.setdefault(rt.group, [])
            for v in rt.versions:
                if v not in versions:
                    versions.append(v)
        for versions in out.values():
            versions.sort(key=_version_priority, reverse=True)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self.types if rt.group == group and version in rt.versions]
