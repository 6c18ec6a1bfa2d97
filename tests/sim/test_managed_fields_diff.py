"""``changed_fields`` and ``removed_fields`` against their definitions: the fields of the new object that the old
one lacks or holds with another value, path by path, and the fields of the old object the new one lacks (what
``record_update`` computed before the subtree-skipping walks).

Seeded random edits of a Pod (containers keyed by name, env keyed by name and allowed to repeat a name,
finalizers as a set, atomic args, status conditions keyed by type) and of a Kueue Workload (a CRD), with and
without the status split, must give the same set both ways.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubesim.managed_fields import _value_at, changed_fields, fields_of, removed_fields
from kubesim.patch import clone
from kubesim.schema import KindSchema, Schemas

Obj = dict[str, Any]


def _by_definition(old: Obj, new: Obj, root: Any, status: bool | None) -> set[tuple[str, ...]]:
    new_fields = fields_of(new, root, status=status)
    old_fields = fields_of(old, root, status=status)
    return {p for p in new_fields if p not in old_fields or _value_at(old, p) != _value_at(new, p)}


def _pod() -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {"a": "1"}, "finalizers": ["x/y"]},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "args": ["a", "b"],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "resources": {"requests": {"cpu": "1"}},
                },
                {"name": "side", "image": "envoy"},
            ],
            "nodeSelector": {"zone": "a"},
        },
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]},
    }


def _workload() -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "labels": {"k": "v"}},
        "spec": {
            "queueName": "q",
            "podSets": [
                {"name": "main", "count": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
            ],
        },
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]},
    }


_LEAVES: list[Any] = ["x", "y", 1, 2, True, None, {}, [], {"n": 1}]


def _edit(obj: Any, rng: random.Random, depth: int = 0) -> Any:
    """A random change somewhere in ``obj`` (returns the changed copy)."""
    if isinstance(obj, dict) and obj and (depth < 2 or rng.random() < 0.7):
        key = rng.choice(sorted(obj))
        roll = rng.random()
        if roll < 0.1:
            obj.pop(key)
        elif roll < 0.2:
            obj[f"new{rng.randint(0, 3)}"] = rng.choice(_LEAVES)
        else:
            obj[key] = _edit(obj[key], rng, depth + 1)
        return obj
    if isinstance(obj, list) and obj:
        roll = rng.random()
        i = rng.randrange(len(obj))
        if roll < 0.2:
            obj.append(clone(obj[i]))  # may repeat a key
        elif roll < 0.3:
            obj.pop(i)
        elif roll < 0.4:
            obj.reverse()
        else:
            obj[i] = _edit(obj[i], rng, depth + 1)
        return obj
    return rng.choice(_LEAVES)


@pytest.fixture(scope="module")
def schemas() -> Schemas:
    return Schemas.load()


@pytest.mark.parametrize("kind", ["pod", "workload"])
@pytest.mark.parametrize("status", [None, True, False])
def test_changed_and_removed_fields_are_the_definitions(schemas: Schemas, kind: str, status: bool | None) -> None:
    schema: KindSchema = (
        schemas.get("", "v1", "Pod") if kind == "pod" else schemas.get("kueue.x-k8s.io", "v1beta1", "Workload")
    )
    base = _pod() if kind == "pod" else _workload()
    rng = random.Random(f"{kind}-{status}")
    nonempty = removals = 0
    for _ in range(600):
        old = clone(base)
        for _ in range(rng.randint(0, 2)):
            old = _edit(old, rng)
        new = clone(old)
        for _ in range(rng.randint(1, 3)):
            new = _edit(new, rng)
        if not isinstance(new, dict) or not isinstance(old, dict):
            continue
        want = _by_definition(old, new, schema.root, status)
        assert changed_fields(old, new, schema.root, status=status) == want, (old, new)
        nonempty += bool(want)
        gone = fields_of(old, schema.root, status=status) - fields_of(new, schema.root, status=status)
        assert removed_fields(old, new, schema.root, status=status) == gone, (old, new)
        removals += bool(gone)
    assert nonempty > 100  # the edits reach fields that count (status only: about one edit in five)
    assert removals > 60


def test_unchanged_object_has_no_changed_fields(schemas: Schemas) -> None:
    schema = schemas.get("", "v1", "Pod")
    pod = _pod()
    assert changed_fields(pod, clone(pod), schema.root) == set()
    moved = clone(pod)
    moved["spec"]["containers"].reverse()  # keyed items: same fields, same values
    assert changed_fields(pod, moved, schema.root) == set()
    renamed = clone(pod)
    renamed["spec"]["containers"][1]["image"] = "envoy:2"
    assert changed_fields(pod, renamed, schema.root) == {
        ("f:spec", "f:containers", 'k:{"name":"side"}', "."),
        ("f:spec", "f:containers", 'k:{"name":"side"}', "f:image"),
    }
