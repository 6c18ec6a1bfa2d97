"""What CEL rules read of ``self`` (:mod:`kubesim.schema.celpaths`): only that is handed to the evaluator."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from kubesim.schema import Schemas, cel
from kubesim.schema.cel import compile_rules, evaluate
from kubesim.schema.celpaths import ALL, project, read_paths

ALL_OF = {ALL: True}


@pytest.mark.parametrize(
    "rule",
    [
        "self == oldSelf",  # self on its own
        "self.?spec.orValue(1) == 1",  # optional field
        "self.a.all(k, v, v > 0)",  # a two-variable comprehension
        "self.a.map(x, x.b).all(y, self[y] > 0)",  # self indexed
    ],
)
def test_what_the_reader_does_not_follow_keeps_everything(rule: str) -> None:
    assert read_paths([rule]) is None


def test_chains_macros_size_and_has() -> None:
    paths = read_paths(
        [
            "has(self.status) && self.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
            "size(self.spec.podSets) == size(oldSelf.status.admission.podSetAssignments)",
            "self.spec.name.startsWith('x') && 'self.spec.secret' != ''",
        ]
    )
    assert paths == {
        "status": {
            "conditions": {"*size*": True, "*each*": {"type": ALL_OF, "status": ALL_OF}},
            "admission": {"podSetAssignments": {"*size*": True}},
        },
        "spec": {"podSets": {"*size*": True}, "name": ALL_OF},
    }


def test_a_map_iterated_and_read_by_name_is_kept_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel, "CHECK_PROJECTION", True)
    rules = compile_rules([{"rule": "self.m.all(k, size(k) < 9)"}, {"rule": "self.m.foo.bar == 1"}])
    paths = read_paths([r.rule for r in rules])
    value = {"m": {"foo": {"bar": 1, "baz": 2}, "other": {"bar": 3}}}
    assert paths is not None and project(value, paths) == value
    assert [o.passed for o in evaluate(rules, value, None, False)] == [True, True]


def test_comments_are_not_read() -> None:
    rule = "self.a.all(x, x.b > 0) // don't read (self.c\n && self.d == 1"
    assert read_paths([rule]) == {"a": {"*size*": True, "*each*": {"b": ALL_OF}}, "d": ALL_OF}


def test_a_filtered_list_read_further_keeps_its_elements() -> None:
    assert read_paths(["self.a.filter(x, x.t == 'A').size() == 1"]) == {"a": {"*size*": True, "*each*": {"t": ALL_OF}}}
    assert read_paths(["self.a.filter(x, x.t == 'A')[0].n == 'b'"]) == {"a": ALL_OF}
    assert read_paths(["self.m.all(k, self.m[k].v > 0)"]) == {"m": {"*size*": True, ALL: True}}


def test_project_keeps_keys_lengths_and_read_values() -> None:
    paths = read_paths(["has(self.status) && size(self.spec.podSets) == 1 && self.spec.queue == 'q'"])
    assert paths is not None
    value = {
        "spec": {"queue": "q", "podSets": [{"name": "a", "template": {"big": 1}}, {"name": "b"}], "other": 1},
        "status": {"conditions": [{"type": "x"}]},
    }
    assert project(value, paths) == {"spec": {"queue": "q", "podSets": [None, None]}, "status": {}}
    assert project({"spec": {}}, paths) == {"spec": {}}  # missing stays missing


def _rule_sets(node: Any, seen: set[int]) -> list[Any]:
    """Every node under ``node`` (itself included) that has CEL rules."""
    if id(node) in seen:
        return []
    seen.add(id(node))
    out = [node] if node.compiled_rules() else []
    children = [*node.properties.values(), node.items]
    if not isinstance(node.additional_properties, bool):
        children.append(node.additional_properties)
    for child in children:
        if child is not None:
            out += _rule_sets(child, seen)
    return out


def test_every_shipped_rule_set_is_read() -> None:
    """The reader follows most rule sets of the shipped CRDs (the rest are kept whole), crashes on none, and reads
    the Workload root, the costly one, down to the few fields its rules use."""
    schemas = Schemas.load()
    seen: set[int] = set()
    nodes = []
    for info in schemas.kinds():
        kind = schemas.get(info.group, info.version, info.kind)
        if not kind.builtin:
            nodes += _rule_sets(kind.root, seen)
    read = [read_paths([r.rule for r in node.compiled_rules() if r.enforced]) for node in nodes]
    assert len(read) > 40 and sum(p is not None for p in read) > len(read) // 2
    root = schemas.get("kueue.x-k8s.io", "v1beta2", "Workload").root
    paths = read_paths([r.rule for r in root.compiled_rules()])
    assert paths is not None and set(paths["spec"]) == {
        "podSets",
        "priorityClassRef",
        "queueName",
        "maximumExecutionTimeSeconds",
    }
    assert paths["spec"]["podSets"] == {"*size*": True}  # not the pod templates


def _workload(rng: random.Random) -> dict[str, Any]:
    conditions = [
        {"type": t, "status": rng.choice(["True", "False"]), "reason": "R", "message": "m"}
        for t in rng.sample(["QuotaReserved", "Admitted", "Finished", "Evicted"], rng.randrange(0, 4))
    ]
    count = rng.randrange(1, 3)
    wl: dict[str, Any] = {
        "spec": {
            "queueName": rng.choice(["a", "b"]),
            "podSets": [{"name": f"p{i}", "count": 1, "template": {"spec": {"containers": []}}} for i in range(count)],
        }
    }
    if rng.random() < 0.5:
        wl["spec"]["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "p"}
    if rng.random() < 0.5:
        wl["spec"]["maximumExecutionTimeSeconds"] = rng.choice([10, 20])
    if rng.random() < 0.8:
        wl["status"] = {"conditions": conditions}
        if rng.random() < 0.6:
            n = rng.choice([count, count + 1])
            wl["status"]["admission"] = {"clusterQueue": "cq", "podSetAssignments": [{"name": "x"}] * n}
    return wl


@pytest.mark.parametrize("seed", range(3))
def test_workload_rules_answer_the_same_on_the_projected_values(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel, "CHECK_PROJECTION", True)
    rules = Schemas.load().get("kueue.x-k8s.io", "v1beta2", "Workload").root.compiled_rules()
    rng = random.Random(seed)
    failed = 0
    for _ in range(150):
        new, old = _workload(rng), _workload(rng)
        if rng.random() < 0.5:
            new = copy.deepcopy(old)
            new.setdefault("status", {})["conditions"] = [{"type": "QuotaReserved", "status": "True"}]
        failed += sum(not o.passed for o in evaluate(rules, new, old, True))
    assert failed > 10  # both answers came up, and each time the projection agreed (CHECK_PROJECTION)


def test_the_check_catches_a_projection_that_answers_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the tests lean on: with CHECK_PROJECTION a wrong projection fails loudly, naming the rule."""
    monkeypatch.setattr(cel, "CHECK_PROJECTION", True)
    monkeypatch.setattr(cel, "project", lambda value, paths: {})
    rules = compile_rules([{"rule": "self.a.b == 1"}])
    with pytest.raises(AssertionError, match=r"'self.a.b == 1': passed on the whole value, failed \(no such key: a\)"):
        list(evaluate(rules, {"a": {"b": 1}}, None, False))


def test_remembered_outcomes_are_the_outcomes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside the check, outcomes are remembered by what the rules saw: every answer, first or remembered, is
    what the rules give when evaluated afresh on the whole values, and the repeats are answered from memory."""
    monkeypatch.setattr(cel, "CHECK_PROJECTION", False)
    monkeypatch.setattr(cel, "_MEMO", {})
    rules = Schemas.load().get("kueue.x-k8s.io", "v1beta2", "Workload").root.compiled_rules()
    rng = random.Random(7)
    pairs = [(_workload(rng), _workload(rng), i < 20 or rng.random() < 0.7) for i in range(40)]
    # The same new values against other old values: reserved in another queue (transition rules answer
    # otherwise), or none at all.
    for i in range(20):
        new = pairs[i][0]
        old = copy.deepcopy(new)
        old["status"] = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "R", "message": "m"}]}
        old["spec"]["queueName"] = "b" if new["spec"]["queueName"] == "a" else "a"
        if i % 2:
            old["spec"].pop("priorityClassRef", None)
        pairs.append((new, old, True))
    pairs += [(pairs[i][0], None, False) for i in range(10)]
    fresh = [tuple(cel._evaluate(rules, new, old, has_old)) for new, old, has_old in pairs]
    calls = 0
    real = cel._evaluate

    def counted(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args)

    monkeypatch.setattr(cel, "_evaluate", counted)
    for _ in range(3):
        for (new, old, has_old), want in zip(pairs, fresh, strict=True):
            assert tuple(evaluate(rules, copy.deepcopy(new), copy.deepcopy(old), has_old)) == want
    assert sum(not o.passed for w in fresh for o in w) > 5
    assert sum(fresh[i] != fresh[40 + i] for i in range(20)) > 3
    assert sum(fresh[i] != fresh[60 + i] for i in range(10)) > 3
    assert 0 < calls <= len(pairs)  # 180 answers, at most one evaluation per distinct input


def test_inputs_equal_as_json_but_not_alike_are_remembered_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel, "CHECK_PROJECTION", False)
    rules = compile_rules([{"rule": "type(self.x) == int"}, {"rule": "self.y == true"}])
    outcomes = [
        [o.passed for o in evaluate(rules, value, None, False)]
        for value in ({"x": 1, "y": True}, {"x": 1.0, "y": True}, {"x": 1, "y": 1}, {"x": 1, "y": True})
    ]
    assert outcomes[0] == [True, True] and outcomes[3] == [True, True]
    assert outcomes[1][0] is False and outcomes[2][1] is False


def test_large_values_are_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel, "CHECK_PROJECTION", False)
    monkeypatch.setattr(cel, "_MEMO", {})
    rules = compile_rules([{"rule": "size(self.s) > 0"}])
    assert [o.passed for o in evaluate(rules, {"s": "x" * 10_000}, None, False)] == [True]
    assert cel._MEMO == {}
    assert [o.passed for o in evaluate(rules, {"s": "x"}, None, False)] == [True]
    assert len(cel._MEMO) == 1
