"""The wheel ships every package and data file: pyproject's explicit package list matches the tree (the dispatcher,
the simulator ``kubesim`` and the shared ``kubecommon``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_package_is_listed_in_pyproject() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(p.parent.relative_to(REPO).parts)
        for top in ("dispatcher", "kubesim", "kubecommon")
        for p in (REPO / top).rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    found |= {"dispatcher._migrations", "dispatcher._migrations.versions"}
    assert found == listed, f"missing from pyproject: {sorted(found - listed)}; stale: {sorted(listed - found)}"
    assert config["package-dir"]["dispatcher._migrations"] == "migrations"
    assert (REPO / "migrations" / "env.py").is_file() and (REPO / "migrations" / "__init__.py").is_file()


def test_runtime_data_files_match_the_package_data_globs() -> None:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert any((REPO / "kubesim" / "data").glob("*.json.gz")), "the sim's schema data must exist"
    assert "data/*.json.gz" in data["kubesim"]
    assert (REPO / "migrations" / "script.py.mako").is_file() and "script.py.mako" in data["dispatcher._migrations"]
