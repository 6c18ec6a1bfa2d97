"""The Dockerfile: hadolint clean, and the rules the image must keep, checked on the file itself.

There is no Docker engine here, so the image is not built; instead:
- hadolint (the test extra installs it) finds no issue at any level;
- the final stage runs as a numeric non-root user, exposes 8080, has a HEALTHCHECK that asks /healthz on
  127.0.0.1:8080 with Python's urllib (slim images have no curl) and whose code compiles, and the required
  ENTRYPOINT / CMD (which the dispatcher's own argument parser accepts);
- base images are pinned tags (no ``latest``, no untagged image), nothing is ADDed from a URL, every pip call
  has ``--no-cache-dir``, and only the builder stage builds (the final stage installs wheels offline);
- everything the builder COPYs exists and gets through .dockerignore, and nothing else does (no .venv, .git,
  kind/out kubeconfigs, databases).
"""

from __future__ import annotations

import ast
import fnmatch
import json
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from deploytools import REPO, tool

DOCKERFILE = REPO / "Dockerfile"


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, op: str) -> list[str]:
        return [arg for o, arg in self.instructions if o == op]


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, with line continuations joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        op, _, rest = line.partition(" ")
        op = op.upper()
        rest = rest.strip()
        if op == "FROM":
            words = rest.split()
            image = words[0]
            for key, value in args.items():
                image = image.replace("${" + key + "}", value).replace("$" + key, value)
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(image, name))
        elif not stages and op == "ARG":
            key, _, value = rest.partition("=")
            args[key] = value
        elif stages:
            stages[-1].instructions.append((op, rest))
    return args, stages


def _stages() -> list[Stage]:
    return parse(DOCKERFILE.read_text())[1]


def test_hadolint_finds_nothing() -> None:
    done = subprocess.run(
        [tool("hadolint"), "--failure-threshold", "style", "--no-color", str(DOCKERFILE)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_multi_stage_with_pinned_bases_and_builder_only_building() -> None:
    stages = _stages()
    assert len(stages) >= 2, "a builder stage and a final stage"
    builder, final = stages[0], stages[-1]
    assert builder.name, "the builder stage is named (the final stage copies from it)"
    for stage in stages:
        image, _, tag = stage.base.rpartition(":")
        assert image and tag and tag != "latest" and "$" not in stage.base, f"unpinned base image {stage.base}"
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?", stage.base), stage.base
    build_runs = " ".join(builder.all("RUN"))
    assert "pip wheel" in build_runs or "--prefix" in build_runs
    final_runs = " ".join(final.all("RUN"))
    assert "--no-index" in final_runs, "the final stage installs the builder's wheels, offline"
    assert f"from={builder.name}" in final_runs or any(builder.name in c for c in final.all("COPY"))
    for stage in stages:
        for copy in stage.all("COPY"):
            assert "--from" not in copy or builder.name in copy


def test_no_add_of_urls_no_latest_and_pip_without_cache() -> None:
    text = DOCKERFILE.read_text()
    assert not re.search(r"^\s*ADD\s", text, re.MULTILINE), "COPY, never ADD"
    assert ":latest" not in text
    for stage in _stages():
        for run in stage.all("RUN"):
            for command in re.split(r"&&|;", run):
                if re.search(r"\bpip3?\s+(install|wheel)\b", command):
                    assert "--no-cache-dir" in command, command.strip()


def test_final_stage_is_non_root_with_healthcheck_port_and_entrypoint() -> None:
    final = _stages()[-1]
    users = final.all("USER")
    assert users, "the final stage sets USER"
    user = users[-1].split(":")[0]
    assert user.isdigit() and int(user) != 0, f"numeric non-root USER (runAsNonRoot can check it), got {user}"
    assert final.all("EXPOSE") == ["8080"]
    assert json.loads(final.all("ENTRYPOINT")[-1]) == ["dispatcher"]
    cmd = json.loads(final.all("CMD")[-1])
    assert cmd == ["run", "--config", "/etc/dispatcher/clusters.yaml"]
    from dispatcher.cli import build_parser

    build_parser().parse_args(cmd)

    [health] = final.all("HEALTHCHECK")
    exec_form = json.loads(health[health.index("CMD") + 3 :].strip())
    assert exec_form[:2] == ["python", "-c"], "no curl in slim images: Python does the request"
    code = exec_form[2]
    ast.parse(code)  # it compiles
    assert "urllib.request" in code and "http://127.0.0.1:8080/healthz" in code and "timeout=" in code
    options = dict(re.findall(r"--(\w[\w-]*)=(\S+)", health[: health.index("CMD")]))
    assert {"interval", "timeout", "retries"} <= set(options)


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last pattern matching the path or one of its parents decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.rstrip("/")
        regex = fnmatch.translate(pat).replace(".*", "[^/]*")
        if pat.startswith("**/"):
            regex = "(.*/)?" + fnmatch.translate(pat[3:]).replace(".*", "[^/]*")
        if any(re.fullmatch(regex, c) for c in candidates):
            ignored = not negate
    return ignored


def _dockerignore() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def test_dockerignore_lets_in_what_the_builder_copies_and_nothing_else() -> None:
    patterns = _dockerignore()
    for stage in _stages():
        for copy in stage.all("COPY"):
            if "--from" in copy:
                continue
            sources = shlex.split(copy)[:-1]
            for src in sources:
                path = src.rstrip("/")
                assert (REPO / path).exists(), f"COPY {src}: no such file"
                assert not _ignored(path, patterns), f"COPY {src}: excluded by .dockerignore"
    for private in (".venv/bin/python", ".git/config", "kind/out/worker-1.kubeconfig", "dispatcher.sqlite",
                    "tests/conftest.py", "dispatcher/__pycache__/cli.cpython-311.pyc", "build/lib/x.py"):  # fmt: skip
        assert _ignored(private, patterns), f"{private} would be sent to the Docker daemon"
    for needed in (
        "pyproject.toml",
        "README.md",
        "dispatcher/cli.py",
        "kubesim/up.py",
        "kubecommon/quantity.py",
        "migrations/env.py",
    ):
        assert not _ignored(needed, patterns), needed
    assert Path(REPO / "migrations" / "env.py").exists()
