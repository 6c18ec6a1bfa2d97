"""The shipped compact schema file must be exactly what the generator builds from ``shared/schemas``.

A change upstream (a new Kueue CRD version, another built-in kind) or in the generator without regenerating
(``python -m kubesim.schema.build --shared ../shared``) fails here.
"""

from __future__ import annotations

import gzip
import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from kubesim.schema.build import BUILTIN_KINDS, build_document, first_sentence

REPO = Path(__file__).resolve().parents[2]


def _shared_dir() -> Path:
    """The reference schemas; never skipped: without them the drift cannot be checked, which is a failure."""
    for candidate in (os.environ.get("DISPATCHER_SHARED_DIR"), str(REPO.parent / "shared")):
        if candidate and (Path(candidate) / "schemas").is_dir():
            return Path(candidate)
    pytest.fail(
        "no shared/schemas to compare the shipped schema data with: check the reference material out beside the "
        "repository (../shared) or set DISPATCHER_SHARED_DIR (CI does)",
        pytrace=False,
    )


def _shipped_bytes() -> bytes:
    return resources.files("kubesim").joinpath("data/schemas.json.gz").read_bytes()


def _shipped() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress(_shipped_bytes()))
    return doc


def test_shipped_file_matches_generator() -> None:
    shared = _shared_dir()
    built = build_document(shared)
    shipped = _shipped()
    if built != shipped:
        differing = sorted(k for k in set(built) | set(shipped) if built.get(k) != shipped.get(k))
        pytest.fail(
            f"kubesim/data/schemas.json.gz is stale (sections {differing} differ); regenerate with "
            "`python -m kubesim.schema.build --shared ../shared`"
        )


def test_generator_is_deterministic() -> None:
    shared = _shared_dir()
    assert build_document(shared) == build_document(shared)


def test_file_is_compact() -> None:
    assert len(_shipped_bytes()) < 2 * 1024 * 1024
    doc = _shipped()
    # Interning worked: the CRDs that embed PodSpecs share subtrees.
    assert len(doc["shared"]) > 50
    assert {(b["group"], b["version"], b["kind"]) for b in doc["builtins"]} == {
        (g, v, k) for _f, g, v, k in BUILTIN_KINDS
    }


def test_descriptions_keep_first_sentence_only() -> None:
    assert first_sentence("Foo is a bar.\nMore info: https://x.io/y. Second.") == "Foo is a bar."
    assert first_sentence("Use e.g. this one. Then that.") == "Use e.g. this one."
    assert first_sentence("No full stop at all") == "No full stop at all"
    assert first_sentence("Version 1.5 is fine. Really.") == "Version 1.5 is fine."
    job = _shipped()["defs"]["io.k8s.api.batch.v1.JobSpec"]
    assert job["p"]["parallelism"]["d"].count(". ") == 0
