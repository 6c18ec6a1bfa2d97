"""What of ``self`` and ``oldSelf`` a node's CEL rules can read, so that only that is handed to the evaluator.

Handing a value to the CEL evaluator converts all of it, and at a Workload's root that is the whole object with
its pod templates, twice (``self`` and ``oldSelf``), for rules that read a few conditions and the number of pod
sets. :func:`read_paths` reads the rules' text (and their message expressions) and finds every member chain that
starts at ``self`` or ``oldSelf``, following macro variables (``self.status.conditions.exists(c, c.type == …)``
reads ``type`` of each condition); :func:`project` then keeps only those paths of a value.

The analysis is conservative: a chain used as a value (compared, passed to a function, indexed, a method other
than ``size()`` called on it) keeps its whole subtree; ``size()`` of a chain keeps the list's length (or every key
of a map); ``has()`` of a chain keeps the key; an expression the reader does not follow (``self`` on its own,
``self.?field``, a two-variable comprehension) keeps everything. Keys and list lengths on a kept path are never
changed, so presence tests (``has``), missing keys and index errors come out as on the whole value. Tests check
every evaluation against the whole value (``cel.CHECK_PROJECTION``, or ``KUBESIM_CEL_CHECK=1``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ALL", "Paths", "project", "read_paths"]

#: A path kept whole.
ALL = "*all*"
#: Marks a node whose length (list) or key set (map) is read by ``size()``.
_SIZE = "*size*"
#: The child standing for every element of a list (or value of a map) that a macro iterates over.
_EACH = "*each*"

Paths = dict[str, Any]
"""A trie of what is read: field name -> sub-trie; ``{ALL: True}`` keeps the subtree whole."""

_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_TOKEN = re.compile(
    r"""\s+|//[^\n]*|(?P<str>[rRbB]{0,2}('''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"))"""
    r"""|(?P<num>\d[\w.]*)|(?P<id>[A-Za-z_]\w*)|(?P<op>\.\?|&&|\|\||[=!<>]=|[-+*/%!<>?:.,()\[\]{}])""",
    re.S,
)


class _Unfollowed(Exception):
    """An expression the reader does not follow: keep everything."""


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _Unfollowed(text[pos:])
        pos = m.end()
        kind = m.lastgroup
        if kind is None:
            continue  # whitespace or a comment
        out.append(("str" if kind == "str" else kind, m.group(kind)))
    return out


def _node(trie: Paths, path: Iterable[str]) -> Paths:
    for step in path:
        if trie.get(ALL):
            return trie
        trie = trie.setdefault(step, {})
    return trie


def _keep(trie: Paths, path: tuple[str, ...], how: str = ALL) -> None:
    node = _node(trie, path)
    if not node.get(ALL):
        node[how] = True


def _close(tokens: list[tuple[str, str]], start: int) -> int:
    """The index of the ``)`` matching the ``(`` at ``start``."""
    depth = 0
    for i in range(start, len(tokens)):
        tok = tokens[i][1]
        if tokens[i][0] == "op" and tok in "([{":
            depth += 1
        elif tokens[i][0] == "op" and tok in ")]}":
            depth -= 1
            if depth == 0:
                return i
    raise _Unfollowed("unbalanced")


def _commas(tokens: list[tuple[str, str]], lo: int, hi: int) -> int:
    """Commas of ``tokens[lo:hi]`` outside any bracket (the arguments of a call, less one)."""
    depth = count = 0
    for kind, tok in tokens[lo:hi]:
        if kind != "op":
            continue
        if tok in "([{":
            depth += 1
        elif tok in ")]}":
            depth -= 1
        elif tok == "," and depth == 0:
            count += 1
    return count


def _read(tokens: list[tuple[str, str]], lo: int, hi: int, scope: Mapping[str, tuple[str, ...]], trie: Paths) -> None:
    """Record the chains of ``tokens[lo:hi]``; ``scope`` maps a variable to the path it stands for."""
    i = lo
    while i < hi:
        kind, tok = tokens[i]
        if kind != "id" or tok not in scope or (i > lo and tokens[i - 1] == ("op", ".")):
            i += 1
            continue
        path = scope[tok]
        j = i + 1
        used = True  # whether the chain's value is used as it is (not consumed by a call)
        while j + 1 < hi and tokens[j] == ("op", ".") and tokens[j + 1][0] == "id":
            name = tokens[j + 1][1]
            if not (j + 2 < hi and tokens[j + 2] == ("op", "(")):
                path = (*path, name)
                j += 2
                continue
            end = _close(tokens, j + 2)
            if name in _MACROS:
                if not (tokens[j + 3][0] == "id" and tokens[j + 4] == ("op", ",")) or _commas(tokens, j + 3, end) != 1:
                    raise _Unfollowed("macro")  # e.g. a two-variable comprehension
                chained = end + 1 < hi and tokens[end + 1][1] in (".", "[")
                counted = tokens[end + 1 : end + 4] == [("op", "."), ("id", "size"), ("op", "(")]
                if name == "filter" and chained and not counted:
                    _keep(trie, path)  # the kept elements themselves are read further
                else:
                    _keep(trie, path, _SIZE)  # the iteration sees every element
                _read(tokens, j + 5, end, {**scope, tokens[j + 3][1]: (*path, _EACH)}, trie)
            elif name == "size" and end == j + 3:
                _keep(trie, path, _SIZE)
            else:
                _keep(trie, path)  # the receiver is used as a value
                _read(tokens, j + 3, end, scope, trie)
            used = False
            j = end + 1
            break
        if tokens[j : j + 1] == [("op", ".?")]:
            raise _Unfollowed("optional field")
        if used:
            wrapper = tokens[i - 2 : i] if i >= lo + 2 else []
            alone = tokens[j : j + 1] == [("op", ")")]
            if alone and wrapper == [("id", "has"), ("op", "(")]:
                _node(trie, path)  # only whether the last field is there: the key is kept, its value as read
            elif alone and wrapper == [("id", "size"), ("op", "(")]:
                _keep(trie, path, _SIZE)
            else:
                _keep(trie, path)  # compared, passed on, indexed: all of it
        i = j


def read_paths(expressions: Iterable[str]) -> Paths | None:
    """What the expressions read of ``self`` and ``oldSelf`` (one trie for both); ``None``: everything."""
    trie: Paths = {}
    roots = {"self": (), "oldSelf": ()}
    try:
        for text in expressions:
            tokens = _tokens(text)
            _read(tokens, 0, len(tokens), roots, trie)
    except (_Unfollowed, IndexError):
        return None
    return None if trie.get(ALL) else trie


def project(value: Any, trie: Paths) -> Any:
    """``value`` with only what ``trie`` reads (keys and list lengths on the way kept as they are)."""
    if trie.get(ALL):
        return value
    if isinstance(value, dict):
        if trie.get(_SIZE) or _EACH in trie:
            if any(k in trie for k in value):
                return value  # read as a whole (its size, each of its values) and by name: kept whole
            each = trie.get(_EACH)
            if each is None:
                return dict.fromkeys(value)
            return {k: project(v, each) for k, v in value.items()}
        return {k: project(value[k], sub) for k, sub in trie.items() if k in value}
    if isinstance(value, list):
        each = trie.get(_EACH)
        if each is not None:
            return [project(v, each) for v in value]
        if trie.get(_SIZE) and len(trie) == 1:
            return [None] * len(value)
        return value
    return value
