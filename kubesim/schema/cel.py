"""CEL rules (``x-kubernetes-validations``) of the CRDs, compiled once and evaluated as the apiserver does.

The evaluator is the ``common-expression-language`` package (Python bindings of a Rust CEL implementation):
it parses every rule of the shipped CRDs and is one to two orders of magnitude faster than the pure-Python
``cel-python``, which matters because rules run on every write of a Workload or JobSet. Kubernetes adds
libraries on top of standard CEL; the string and list functions are registered here (``_EXTENSIONS``). A rule
that does not compile, or calls a function neither CEL nor ``_EXTENSIONS`` provides (``quantity()``,
``url()``, ``ip()`` …), is *not enforced*: it is skipped at request time and listed by :func:`unenforced_rules`
so that a test makes the gap visible.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from .celpaths import Paths, project, read_paths

if TYPE_CHECKING:
    from .model import Node, Schemas

__all__ = [
    "SUPPORTED_FUNCTIONS",
    "CompiledRule",
    "Outcome",
    "compile_rules",
    "evaluate",
    "unenforced_rules",
]

# The bindings log every failing Python extension call at WARNING; a failing rule is an answer, not a fault.
logging.getLogger("cel").setLevel(logging.ERROR)

_cel: Any
try:  # pragma: no cover - the dependency is declared; the guard keeps the simulator usable without it
    import cel as _cel
except ImportError:  # pragma: no cover
    _cel = None


class _NoOverload(TypeError):
    """Raised by an extension function called with argument types it has no overload for."""

    def __init__(self) -> None:
        super().__init__("no such overload")


def _str(*values: Any) -> None:
    if not all(isinstance(v, str) for v in values):
        raise _NoOverload()


def _int(*values: Any) -> None:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise _NoOverload()


def _lower_ascii(s: Any) -> str:
    _str(s)
    return "".join(c.lower() if c.isascii() else c for c in s)


def _upper_ascii(s: Any) -> str:
    _str(s)
    return "".join(c.upper() if c.isascii() else c for c in s)


def _trim(s: Any) -> str:
    _str(s)
    return str(s).strip()


def _split(s: Any, sep: Any, n: Any = -1) -> list[str]:
    _str(s, sep)
    _int(n)
    if n == 0:
        return []
    if sep == "":
        chars = list(s)
        if n < 0 or len(chars) <= n:
            return chars
        return [*chars[: n - 1], "".join(chars[n - 1 :])]
    return list(s.split(sep) if n < 0 else s.split(sep, n - 1))


def _replace(s: Any, old: Any, new: Any, n: Any = -1) -> str:
    _str(s, old, new)
    _int(n)
    return str(s).replace(old, new, n)


def _index_of(target: Any, sub: Any, offset: Any = 0) -> int:
    _int(offset)
    if isinstance(target, list):
        for i, item in enumerate(target):
            if item == sub:
                return i
        return -1
    _str(target, sub)
    if offset < 0 or offset > len(target):
        raise IndexError(f"index out of range: {offset}")
    return int(target.find(sub, offset))


def _last_index_of(target: Any, sub: Any, offset: Any = None) -> int:
    if isinstance(target, list):
        for i in range(len(target) - 1, -1, -1):
            if target[i] == sub:
                return i
        return -1
    _str(target, sub)
    if offset is None:
        return int(target.rfind(sub))
    _int(offset)
    return int(target.rfind(sub, 0, offset + len(sub)))


def _substring(s: Any, start: Any, end: Any = None) -> str:
    _str(s)
    _int(start)
    stop = len(s) if end is None else end
    _int(stop)
    if start < 0 or stop > len(s) or start > stop:
        raise IndexError(f"index out of range: {start}")
    return str(s[start:stop])


def _char_at(s: Any, i: Any) -> str:
    _str(s)
    _int(i)
    if i < 0 or i > len(s):
        raise IndexError(f"index out of range: {i}")
    return str(s[i]) if i < len(s) else ""


def _join(items: Any, sep: Any = "") -> str:
    if not isinstance(items, list):
        raise _NoOverload()
    _str(sep, *items)
    return str(sep).join(items)


def _is_sorted(items: Any) -> bool:
    if not isinstance(items, list):
        raise _NoOverload()
    return all(a <= b for a, b in pairwise(items))


def _sum(items: Any) -> Any:
    if not isinstance(items, list):
        raise _NoOverload()
    return sum(items) if items else 0


def _min(*args: Any) -> Any:
    values = args[0] if len(args) == 1 and isinstance(args[0], list) else list(args)
    if not values:
        raise ValueError("min called on empty list")
    return min(values)


def _max(*args: Any) -> Any:
    values = args[0] if len(args) == 1 and isinstance(args[0], list) else list(args)
    if not values:
        raise ValueError("max called on empty list")
    return max(values)


#: Kubernetes CEL library functions implemented here (strings and lists libraries).
_EXTENSIONS: dict[str, Callable[..., Any]] = {
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "trim": _trim,
    "split": _split,
    "replace": _replace,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "substring": _substring,
    "charAt": _char_at,
    "join": _join,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _min,
    "max": _max,
}

#: Functions the evaluator provides itself (operators and macros are always available).
_BUILTIN_FUNCTIONS = frozenset(
    {
        "size",
        "contains",
        "startsWith",
        "endsWith",
        "matches",
        "int",
        "uint",
        "double",
        "string",
        "bytes",
        "timestamp",
        "duration",
        "type",
        "dyn",
        "getFullYear",
        "getMonth",
        "getDayOfMonth",
        "getDate",
        "getDayOfWeek",
        "getDayOfYear",
        "getHours",
        "getMinutes",
        "getSeconds",
        "getMilliseconds",
        "has",
        "hasValue",
        "value",
        "orValue",
        "or",
        "of",
        "none",
        "all",
        "exists",
        "exists_one",
        "map",
        "filter",
    }
)
SUPPORTED_FUNCTIONS = _BUILTIN_FUNCTIONS | frozenset(_EXTENSIONS)

_OPERATOR = re.compile(r"^(?:[_@!].*)$")


@dataclass(frozen=True)
class CompiledRule:
    """One ``x-kubernetes-validations`` entry, compiled. ``error`` says why it is not enforced (None if it is)."""

    rule: str
    message: str | None
    message_expression: str | None
    field_path: str | None
    reason: str | None
    optional_old_self: bool
    uses_old_self: bool
    program: Any
    message_program: Any
    error: str | None

    @property
    def enforced(self) -> bool:
        return self.error is None and self.program is not None


@dataclass(frozen=True)
class Outcome:
    """The result of one rule: ``passed``; else ``error`` (evaluation error text) or ``message`` (failure)."""

    rule: CompiledRule
    passed: bool
    message: str | None = None
    error: str | None = None


@cache
def _compile(expr: str) -> tuple[Any, str | None, bool]:
    """(program, why-not-enforced, uses oldSelf) for one expression, compiled once per process."""
    if _cel is None:
        return None, "no CEL evaluator installed (common-expression-language)", False
    try:
        program = _cel.compile(expr)
    except Exception as exc:  # the bindings raise ValueError for syntax errors, others for the rest
        return None, f"compile error: {' '.join(str(exc).split())}", False
    try:
        functions = set(program.functions())
        variables = set(program.variables())
    except Exception:  # pragma: no cover - static analysis is best effort
        functions, variables = set(), set()
    unsupported = sorted(f for f in functions if not _OPERATOR.match(f) and f not in SUPPORTED_FUNCTIONS)
    if unsupported:
        return None, "unsupported function(s): " + ", ".join(unsupported), "oldSelf" in variables
    return program, None, "oldSelf" in variables


def compile_rules(raw_rules: Sequence[Mapping[str, Any]]) -> tuple[CompiledRule, ...]:
    """Compile a node's rules (compact keys: rule, msg, mexp, fp, rs, oos)."""
    out = []
    for raw in raw_rules:
        rule = str(raw.get("rule", ""))
        program, error, uses_old = _compile(rule) if rule.strip() else (None, None, False)
        mexp = raw.get("mexp")
        message_program = None
        if mexp:
            message_program, _merr, _ = _compile(mexp)
        out.append(
            CompiledRule(
                rule=rule,
                message=raw.get("msg"),
                message_expression=mexp,
                field_path=raw.get("fp"),
                reason=raw.get("rs"),
                optional_old_self=bool(raw.get("oos")),
                uses_old_self=uses_old,
                program=program,
                message_program=message_program,
                error=error,
            )
        )
    return tuple(out)


def _error_text(exc: Exception) -> str:
    """The evaluation error as cel-go words it (``no such key: x``, ``no such overload`` …)."""
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0] if exc.args else ''}"
    text = " ".join(str(exc).split())
    if "no such overload" in text.lower():
        return "no such overload"
    if isinstance(exc, IndexError) and text.startswith("index out of bounds"):
        return "index out of bounds: " + text.rsplit(":", 1)[-1].strip()
    if isinstance(exc, ZeroDivisionError):
        return "division by zero"
    return text


def evaluate(rules: Sequence[CompiledRule], value: Any, old: Any, has_old: bool) -> Iterator[Outcome]:
    """Evaluate the enforced rules of one node on ``value`` (``old``: the correlated stored value on update).

    Transition rules (those using ``oldSelf``) run only when there is an old value, as in the apiserver.
    One evaluation context is built per node and shared by its rules: converting the value is the main cost.
    The rules see only what they read of the value (:mod:`.celpaths`), and the outcomes are remembered by what
    they saw: CEL is deterministic, and the controllers' writes repeat the same inputs (one Workload after
    another goes through the same conditions), so most evaluations are answered from :data:`_MEMO`.
    """
    if _cel is None:
        return
    paths = _read_paths(rules)
    seen_self = value if paths is None else project(value, paths)
    seen_old = old if paths is None or not has_old else project(old, paths)
    # repr() tells apart what Python's == does not (1 and 1.0, True and 1, key order, NaN), so two inputs with one
    # key always evaluate alike.
    key = (id(rules), has_old, repr(seen_self), repr(seen_old) if has_old else "")
    known = None if CHECK_PROJECTION else _MEMO.get(key)  # the check must see every whole value
    if known is not None and known[0] is rules:
        yield from known[1]
        return
    outcomes = tuple(_evaluate(rules, seen_self, seen_old, has_old))
    if CHECK_PROJECTION and paths is not None:
        whole = tuple(_evaluate(rules, value, old, has_old))
        if outcomes != whole:
            differ = [
                f"{w.rule.rule!r}: {_said(w)} on the whole value, {_said(p)} on the projected one"
                for p, w in zip(outcomes, whole, strict=False)
                if p != w
            ] or [f"{len(whole)} outcomes against {len(outcomes)}"]
            raise AssertionError(
                f"kubesim.schema.celpaths read these rules wrong (paths kept: {paths!r}): " + "; ".join(differ)
            )
    if len(key[2]) + len(key[3]) <= _MEMO_KEY_CHARS:  # a large value is rarely seen twice: not kept
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.clear()
        _MEMO[key] = (rules, outcomes)
    yield from outcomes


#: (id(rules), has_old, repr of what they saw of self, of oldSelf) -> (the rules, their outcomes). The rules are
#: kept to check identity: an id can be reused once its rules are gone.
_MEMO: dict[tuple[int, bool, str, str], tuple[Sequence[CompiledRule], tuple[Outcome, ...]]] = {}
_MEMO_SIZE = 4096
_MEMO_KEY_CHARS = 8192


def _said(outcome: Outcome) -> str:
    return "passed" if outcome.passed else f"failed ({outcome.error or outcome.message})"


#: Tests set this (or KUBESIM_CEL_CHECK=1): every evaluation also runs on the whole value and must answer the same.
CHECK_PROJECTION = os.environ.get("KUBESIM_CEL_CHECK") == "1"


def _evaluate(rules: Sequence[CompiledRule], value: Any, old: Any, has_old: bool) -> Iterator[Outcome]:
    contexts: dict[bool, Any] = {}
    for rule in rules:
        if not rule.enforced:
            continue
        if rule.uses_old_self and not has_old and not rule.optional_old_self:
            continue
        optional = rule.uses_old_self and rule.optional_old_self
        context = contexts.get(optional)
        if context is None:
            variables: dict[str, Any] = {"self": value}
            if optional:
                variables["oldSelf"] = _cel.OptionalValue.of(old) if has_old else _cel.OptionalValue.none()
            elif has_old and any(r.uses_old_self for r in rules):
                variables["oldSelf"] = old
            context = contexts[optional] = _cel.Context(variables, _EXTENSIONS)
        try:
            result = rule.program.execute(context)
        except Exception as exc:
            yield Outcome(rule, False, error=_error_text(exc))
            continue
        if result is True:
            yield Outcome(rule, True)
            continue
        message = None
        if rule.message_program is not None:
            try:
                text = rule.message_program.execute(context)
            except Exception:
                text = None
            if isinstance(text, str) and text.strip() and "\n" not in text and len(text) <= 5000:
                message = text.strip()
        if message is None:
            message = rule.message.strip() if rule.message and rule.message.strip() else None
            message = message or f"failed rule: {_rule_text(rule)}"
        yield Outcome(rule, False, message=message)


#: id(rules) -> (the rules, what they read of self and oldSelf; None: all of it). Rules live as long as the schema.
_PATHS: dict[int, tuple[Sequence[CompiledRule], Paths | None]] = {}


def _read_paths(rules: Sequence[CompiledRule]) -> Paths | None:
    known = _PATHS.get(id(rules))
    if known is not None and known[0] is rules:
        return known[1]
    texts = [t for r in rules if r.enforced for t in (r.rule, r.message_expression) if t]
    paths = read_paths(texts)
    _PATHS[id(rules)] = (rules, paths)
    return paths


def _rule_text(rule: CompiledRule) -> str:
    return rule.rule.strip()


def rule_error_string(rule: CompiledRule) -> str:
    """``ruleErrorString``: the message if there is one, else the rule."""
    if rule.message and rule.message.strip():
        return rule.message.strip()
    return rule.rule.strip()


def _walk(node: Node, path: str, seen: set[tuple[int, str]]) -> Iterator[tuple[str, Node]]:
    key = (id(node), path)
    if key in seen or path.count("[]") + path.count(".*") > 12:
        return
    seen.add(key)
    yield path, node
    for name, child in node.properties.items():
        if name == "metadata" and child.def_name:
            continue  # ObjectMeta: a built-in definition, no CEL rules
        yield from _walk(child, f"{path}.{name}" if path else name, seen)
    if node.items is not None:
        yield from _walk(node.items, f"{path}[]", seen)
    addl = node.additional_properties
    if addl is not None and not isinstance(addl, bool):
        yield from _walk(addl, f"{path}.*", seen)


def unenforced_rules(schemas: Schemas) -> list[tuple[str, str, str, str, str]]:
    """Every CRD rule the simulator does not enforce: (apiVersion, kind, field path, rule, reason), sorted."""
    out: set[tuple[str, str, str, str, str]] = set()
    for info in schemas.kinds():
        if info.builtin:
            continue
        root = schemas.get(info.group, info.version, info.kind).root
        for path, node in _walk(root, "", set()):
            for rule in node.compiled_rules():
                if not rule.enforced and rule.rule.strip():
                    out.add((info.api_version, info.kind, path, rule.rule, rule.error or ""))
    return sorted(out)
