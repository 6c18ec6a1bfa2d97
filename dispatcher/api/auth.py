"""API tokens: who may read the dispatcher's state and who may change it.

Tokens come from a file (``--api-tokens FILE``) and/or the ``DISPATCHER_API_TOKENS`` variable, in one format:
one ``ROLE TOKEN`` pair per line (the variable may also separate pairs with ``;``), where ROLE is ``read``
(every GET) or ``admin`` (also the POST actions: cordon, uncordon, drain); ``#`` starts a comment line::

    # who          token
    read   3f8a0c2e9b7d41d6a5e0c1b2f3a4d5e6
    admin  9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f

Only SHA-256 digests of the tokens are kept. A presented token is compared with :func:`hmac.compare_digest`
against every stored digest, without stopping at a match, so the time taken does not tell which token (or
how much of one) matched. Errors name the source and the line number, never the token; nothing here logs.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["ADMIN", "ENV_VAR", "MIN_TOKEN_LENGTH", "READ", "ROLES", "TokenError", "TokenStore"]

READ = "read"
ADMIN = "admin"
ROLES = (READ, ADMIN)
ENV_VAR = "DISPATCHER_API_TOKENS"
#: Shorter tokens are refused: they can be guessed. ``openssl rand -hex 32`` makes a good one.
MIN_TOKEN_LENGTH = 16


class TokenError(ValueError):
    """An unusable token file or variable. The message names the source and the line, never a token."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def _header_safe(token: str) -> bool:
    return all(33 <= ord(c) < 127 for c in token)


class TokenStore:
    """The known tokens (as digests) and their roles. Empty when no token is configured."""

    def __init__(self, entries: Iterable[tuple[str, str]] = ()) -> None:
        self._entries: list[tuple[bytes, str]] = []
        for n, (role, token) in enumerate(entries, 1):
            self._add(role, token, f"entry {n}")

    def _add(self, role: str, token: str, where: str) -> None:
        if role not in ROLES:
            raise TokenError(f"{where}: the role must be read or admin")
        if len(token) < MIN_TOKEN_LENGTH:
            raise TokenError(
                f"{where}: the token is too short ({len(token)} characters; use at least {MIN_TOKEN_LENGTH}, "
                "e.g. the output of `openssl rand -hex 32`)"
            )
        if not _header_safe(token):
            raise TokenError(f"{where}: the token has characters an HTTP header cannot carry (use visible ASCII)")
        digest = _digest(token)
        for stored, _ in self._entries:
            if hmac.compare_digest(stored, digest):
                raise TokenError(f"{where}: this token is already listed (each token once, with one role)")
        self._entries.append((digest, role))

    # -- loading ------------------------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str, *, source: str, separators: str = "\n") -> TokenStore:
        """Read ``ROLE TOKEN`` entries from ``text`` split at any of ``separators`` (errors say ``source: line N``)."""
        store = cls()
        entries = [text]
        for sep in separators:
            entries = [part for entry in entries for part in entry.split(sep)]
        unit = "line" if separators == "\n" else "entry"
        for n, raw in enumerate(entries, 1):
            entry = raw.strip()
            if not entry or entry.startswith("#"):
                continue
            fields = entry.split()
            if len(fields) > 2 and fields[2].startswith("#"):
                fields = fields[:2]  # a trailing comment
            where = f"{source}: {unit} {n}"
            if len(fields) != 2:
                raise TokenError(
                    f"{where}: expected 'ROLE TOKEN' (role read or admin, a space, the token), found {len(fields)} "
                    f"field{'s' if len(fields) != 1 else ''}"
                )
            role, token = fields
            if role not in ROLES:
                hint = " (the role comes first: 'ROLE TOKEN')" if token in ROLES else ""
                raise TokenError(f"{where}: the first field must be the role, read or admin{hint}")
            store._add(role, token, where)
        return store

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> TokenStore:
        """The tokens of a file (read once, at start-up)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise TokenError(f"API token file {os.fspath(path)}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise TokenError(f"API token file {os.fspath(path)}: not UTF-8 text") from None
        return cls.parse(text, source=f"API token file {os.fspath(path)}")

    @classmethod
    def from_env(cls, name: str = ENV_VAR, environ: Mapping[str, str] | None = None) -> TokenStore:
        """The tokens of an environment variable (pairs separated by ``;`` or newlines); empty when unset."""
        value = (os.environ if environ is None else environ).get(name, "")
        return cls.parse(value, source=f"${name}", separators="\n;")

    @classmethod
    def load(
        cls, path: str | os.PathLike[str] | None = None, *, env: str = ENV_VAR, environ: Mapping[str, str] | None = None
    ) -> TokenStore:
        """The tokens of the file (when given) and of the variable together."""
        store = cls.from_env(env, environ)
        if path is not None:
            store.merge(cls.from_file(path), source=f"API token file {os.fspath(path)}")
        return store

    def merge(self, other: TokenStore, *, source: str = "tokens") -> None:
        for digest, role in other._entries:
            if any(hmac.compare_digest(stored, digest) for stored, _ in self._entries):
                raise TokenError(f"{source}: a token is listed twice (in ${ENV_VAR} too)")
            self._entries.append((digest, role))

    # -- checking -------------------------------------------------------------------------------------------

    def role_for(self, token: str) -> str | None:
        """The role of ``token``, or None. Compares against every stored token, in constant time each."""
        presented = _digest(token)
        role: str | None = None
        for stored, stored_role in self._entries:
            # No early exit: every digest is compared whether or not one matched already.
            if hmac.compare_digest(presented, stored):
                role = stored_role
        return role

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def counts(self) -> dict[str, int]:
        return {r: sum(1 for _, role in self._entries if role == r) for r in ROLES}

    def __repr__(self) -> str:
        counts = self.counts()
        return f"TokenStore({counts[READ]} read, {counts[ADMIN]} admin)"
