"""Server-side printing: ``meta.k8s.io/v1`` Tables, as kubectl asks for them on ``kubectl get``.

Built-in kinds get the columns the real server prints; custom resources get their CRD's
``additionalPrinterColumns`` evaluated with a small JSONPath, plus Name and Age.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .registry import ResourceType

__all__ = ["human_duration", "jsonpath", "to_table"]

Obj = dict[str, Any]
Column = tuple[str, str, str, int]  # name, type, format, priority


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration`` of apimachinery: 45s, 5m10s, 3h4m, 2d3h, 400d…"""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 60 * 2:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m{rem}s" if rem else f"{minutes}m"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rem = minutes % 60
        return f"{hours}h{rem}m" if rem else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rem = hours % 24
        return f"{days}d{rem}h" if rem else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def _age(obj: Obj) -> str:
    created = _parse_time(obj.get("metadata", {}).get("creationTimestamp"))
    if created is None:
        return "<unknown>"
    return human_duration((datetime.now(UTC) - created).total_seconds())


_TOKEN = re.compile(r"\.([A-Za-z0-9_\-/]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*(['\"])(.*?)\4\)\]")


def jsonpath(obj: Any, path: str) -> list[Any]:
    """The values ``path`` selects (``.a.b``, ``[0]``, ``[*]``, ``[?(@.type=="Ready")]``)."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    current = [obj]
    pos = 0
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if not m:
            return []
        pos = m.end()
        nxt: list[Any] = []
        if m.group(1) is not None:
            for c in current:
                if isinstance(c, dict) and m.group(1) in c:
                    nxt.append(c[m.group(1)])
        elif m.group(2) is not None:
            for c in current:
                if isinstance(c, list):
                    if m.group(2) == "*":
                        nxt.extend(c)
                    elif int(m.group(2)) < len(c):
                        nxt.append(c[int(m.group(2))])
        else:
            keys, want = m.group(3).split("."), m.group(5)
            for c in current:
                if not isinstance(c, list):
                    continue
                for item in c:
                    v: Any = item
                    for k in keys:
                        v = v.get(k) if isinstance(v, dict) else None
                    if v is not None and str(v) == want:
                        nxt.append(item)
        current = nxt
    return current


def _cell(value: list[Any], ctype: str, fmt: str) -> Any:
    if not value:
        return None
    v = value[0] if len(value) == 1 else value
    if ctype == "date":
        t = _parse_time(v)
        return human_duration((datetime.now(UTC) - t).total_seconds()) if t else None
    if ctype == "integer" and isinstance(v, (int, float)):
        return int(v)
    if ctype == "number" and isinstance(v, (int, float)):
        return v
    if ctype == "boolean" and isinstance(v, bool):
        return v
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v) if not isinstance(v, str) else v


def _cond_true(obj: Obj, ctype: str) -> bool:
    return any(
        c.get("type") == ctype and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or []
    )


def format_label_selector(selector: Any) -> str:
    """``metav1.FormatLabelSelector``: requirements sorted by key, ``<none>`` when empty."""
    if not isinstance(selector, dict):
        return "<none>"
    reqs: list[tuple[str, str]] = [(str(k), f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = str(expr.get("key", "")), expr.get("operator"), sorted(expr.get("values") or [])
        if op == "In":
            reqs.append((key, f"{key} in ({','.join(values)})"))
        elif op == "NotIn":
            reqs.append((key, f"{key} notin ({','.join(values)})"))
        elif op == "Exists":
            reqs.append((key, key))
        elif op == "DoesNotExist":
            reqs.append((key, f"!{key}"))
    return ",".join(text for _, text in sorted(reqs)) or "<none>"


def _containers(spec: Obj) -> tuple[str, str]:
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    return ",".join(str(c.get("name", "")) for c in containers), ",".join(str(c.get("image", "")) for c in containers)


def _job_row(obj: Obj) -> list[Any]:
    """``printJob`` of the real server, wide columns included (kubectl hides priority-1 columns)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if _cond_true(obj, "Complete"):
        state = "Complete"
    elif _cond_true(obj, "Failed"):
        state = "Failed"
    elif obj["metadata"].get("deletionTimestamp"):
        state = "Terminating"
    elif _cond_true(obj, "Suspended"):
        state = "Suspended"
    elif _cond_true(obj, "FailureTarget"):
        state = "FailureTarget"
    elif _cond_true(obj, "SuccessCriteriaMet"):
        state = "SuccessCriteriaMet"
    else:
        state = "Running"
    completions, succeeded = spec.get("completions"), status.get("succeeded", 0)
    parallelism = spec.get("parallelism") or 0
    if completions is not None:
        done = f"{succeeded}/{completions}"
    elif parallelism > 1:
        done = f"{succeeded}/1 of {parallelism}"
    else:
        done = f"{succeeded}/1"
    start, end = _parse_time(status.get("startTime")), _parse_time(status.get("completionTime"))
    duration = ""
    if start:
        duration = human_duration(((end or datetime.now(UTC)) - start).total_seconds())
    names, images = _containers(((spec.get("template") or {}).get("spec")) or {})
    selector = format_label_selector(spec.get("selector"))
    return [obj["metadata"]["name"], state, done, duration, _age(obj), names, images, selector]


def _pod_row(obj: Obj) -> list[Any]:
    status = obj.get("status") or {}
    containers = (obj.get("spec") or {}).get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    phase = status.get("phase", "Pending")
    reason = status.get("reason") or phase
    if phase == "Succeeded":
        reason = "Completed"
    elif phase == "Failed":
        reason = status.get("reason") or "Error"
    if obj["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return [
        obj["metadata"]["name"],
        f"{ready}/{len(containers)}",
        reason,
        restarts,
        _age(obj),
        status.get("podIP") or "<none>",
        (obj.get("spec") or {}).get("nodeName") or "<none>",
    ]


def _node_row(obj: Obj) -> list[Any]:
    ready = "Ready" if _cond_true(obj, "Ready") else "NotReady"
    if (obj.get("spec") or {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    labels = obj["metadata"].get("labels") or {}
    roles = ",".join(sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))) or "<none>"
    version = ((obj.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
    return [obj["metadata"]["name"], ready, roles, _age(obj), version]


def _event_row(obj: Obj) -> list[Any]:
    last = obj.get("lastTimestamp") or obj.get("eventTime") or obj["metadata"].get("creationTimestamp")
    t = _parse_time(last)
    seen = human_duration((datetime.now(UTC) - t).total_seconds()) if t else "<unknown>"
    inv = obj.get("involvedObject") or {}
    return [
        seen,
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}",
        obj.get("message", ""),
    ]


_BUILTIN: dict[str, tuple[list[Column], Callable[[Obj], list[Any]]]] = {
    "jobs.batch": (
        [
            ("Name", "string", "name", 0),
            ("Status", "string", "", 0),
            ("Completions", "string", "", 0),
            ("Duration", "string", "", 0),
            ("Age", "string", "", 0),
            ("Containers", "string", "", 1),
            ("Images", "string", "", 1),
            ("Selector", "string", "", 1),
        ],
        _job_row,
    ),
    "pods": (
        [
            ("Name", "string", "name", 0),
            ("Ready", "string", "", 0),
            ("Status", "string", "", 0),
            ("Restarts", "string", "", 0),
            ("Age", "string", "", 0),
            ("IP", "string", "", 1),
            ("Node", "string", "", 1),
        ],
        _pod_row,
    ),
    "nodes": (
        [
            ("Name", "string", "name", 0),
            ("Status", "string", "", 0),
            ("Roles", "string", "", 0),
            ("Age", "string", "", 0),
            ("Version", "string", "", 0),
        ],
        _node_row,
    ),
    "namespaces": (
        [("Name", "string", "name", 0), ("Status", "string", "", 0), ("Age", "string", "", 0)],
        lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""), _age(o)],
    ),
    "events": (
        [
            ("Last Seen", "string", "", 0),
            ("Type", "string", "", 0),
            ("Reason", "string", "", 0),
            ("Object", "string", "", 0),
            ("Message", "string", "", 0),
        ],
        _event_row,
    ),
    "secrets": (
        [("Name", "string", "name", 0), ("Type", "string", "", 0), ("Data", "string", "", 0), ("Age", "string", "", 0)],
        lambda o: [o["metadata"]["name"], o.get("type", ""), len(o.get("data") or {}), _age(o)],
    ),
    "configmaps": (
        [("Name", "string", "name", 0), ("Data", "string", "", 0), ("Age", "string", "", 0)],
        lambda o: [o["metadata"]["name"], len(o.get("data") or {}) + len(o.get("binaryData") or {}), _age(o)],
    ),
    "leases.coordination.k8s.io": (
        [("Name", "string", "name", 0), ("Holder", "string", "", 0), ("Age", "string", "", 0)],
        lambda o: [o["metadata"]["name"], (o.get("spec") or {}).get("holderIdentity", ""), _age(o)],
    ),
}


def _columns(rt: ResourceType, version: str) -> tuple[list[Column], Callable[[Obj], list[Any]]]:
    if rt.key in _BUILTIN:
        return _BUILTIN[rt.key]
    printer = list(rt.printer_columns.get(version, ()))
    cols: list[Column] = [("Name", "string", "name", 0)]
    has_age = any(str(c.get("name", "")).lower() == "age" for c in printer)
    for c in printer:
        cols.append(
            (str(c.get("name")), str(c.get("type", "string")), str(c.get("format", "")), int(c.get("priority", 0)))
        )
    if not has_age and not rt.builtin:
        cols.append(("Age", "date", "", 0))

    def row(obj: Obj) -> list[Any]:
        cells: list[Any] = [obj["metadata"]["name"]]
        for c in printer:
            cells.append(
                _cell(jsonpath(obj, str(c.get("jsonPath", ""))), str(c.get("type", "string")), str(c.get("format", "")))
            )
        if not has_age and not rt.builtin:
            cells.append(_age(obj))
        return cells

    if not printer and rt.builtin:
        return ([("Name", "string", "name", 0), ("Age", "string", "", 0)], lambda o: [o["metadata"]["name"], _age(o)])
    return cols, row


def _partial(obj: Obj) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


def to_table(
    rt: ResourceType,
    version: str,
    objects: list[Obj],
    *,
    resource_version: str,
    include: str = "Metadata",
    continue_token: str | None = None,
    remaining: int | None = None,
    header: bool = True,
) -> Obj:
    cols, row = _columns(rt, version)
    rows = []
    for obj in objects:
        entry: Obj = {"cells": row(obj)}
        if include == "Object":
            entry["object"] = obj
        elif include != "None":
            entry["object"] = _partial(obj)
        rows.append(entry)
    meta: Obj = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    if remaining:
        meta["remainingItemCount"] = remaining
    table: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "rows": rows}
    if header:
        table["columnDefinitions"] = [
            {"name": n, "type": t if t != "date" else "string", "format": f, "description": "", "priority": p}
            for n, t, f, p in cols
        ]
    else:
        table["columnDefinitions"] = []
    return table
