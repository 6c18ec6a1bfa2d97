"""Tests for :mod:`dispatcher.config` and the documented ``clusters.example.yaml``."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatcher.config import DEFAULT_MAX_IN_FLIGHT, ConfigError, load_config, parse_config, parse_duration

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "clusters.example.yaml"

Obj = dict[str, Any]


def minimal() -> Obj:
    return {
        "manager": {"kubeconfig": "/k/manager", "context": "manager"},
        "workers": [
            {"name": "worker-1", "kubeconfig": "/k/w1"},
            {"name": "worker-2", "kubeconfig": "/k/w2", "weight": 2, "labels": {"zone": "a"}},
        ],
    }


# -- the example ----------------------------------------------------------------------------------------


def test_example_loads() -> None:
    cfg = load_config(EXAMPLE)
    assert [w.name for w in cfg.workers] == ["worker-a", "worker-b", "gpu-lab"]
    a, b, lab = cfg.workers
    # Relative kubeconfig paths resolve against the file's directory, "~" is expanded.
    assert a.kube.path == str(REPO / "kubeconfigs" / "worker-a.kubeconfig")
    assert a.kube.context == "worker-a"
    assert cfg.manager.path == str(Path("~/.kube/config").expanduser())
    assert b.weight == 2.0
    assert b.max_in_flight == 50
    assert b.labels == {"region": "eu-west", "zone": "eu-west-1b", "cost": "spot", "gpu": "true"}
    assert lab.kube.secret_name == "gpu-lab-kubeconfig"
    assert lab.kube.secret_namespace == "dispatcher-system"
    assert lab.kube.path is None
    assert lab.weight == 1.0
    assert lab.max_in_flight == DEFAULT_MAX_IN_FLIGHT == 500
    p = cfg.policy
    assert p.mode == "binpack"
    assert p.strategy == "scored"
    assert p.admission_timeout == 300.0
    assert p.lost_timeout == 60.0
    assert p.suspect_after == 10.0
    assert p.finished_retention == 600.0
    assert p.gc_interval == 60.0
    assert p.allowed_namespaces == ("default", "team-a", "team-b")
    assert p.namespace_allowed("team-a") and not p.namespace_allowed("kube-system")
    assert (p.weights.quota_headroom, p.weights.vgpu_fit, p.weights.backlog) == (1.0, 1.0, 0.5)
    assert (p.weights.cluster_weight, p.weights.latency) == (0.3, 0.2)
    assert p.incremental_round == 3 and p.incremental_interval == 300.0
    assert p.record_retention == 7 * 24 * 3600.0
    assert cfg.controller_name == "kueue.x-k8s.io/multikueue"
    assert cfg.origin == "manager"
    assert cfg.database_url == "sqlite+aiosqlite:///dispatcher.sqlite"
    assert (a.fencing, b.fencing, lab.fencing) == ("agent", "agent", "none")
    assert (p.fencing.lease_duration, p.fencing.grace, p.fencing.namespace) == (40.0, 30.0, "kueue-system")
    assert p.fencing.renew_interval == 10.0


def test_example_documents_every_key() -> None:
    text = EXAMPLE.read_text()
    for key in (
        "kubeconfig",
        "context",
        "secretRef",
        "inCluster",
        "weight",
        "labels",
        "maxInFlight",
        "mode",
        "strategy",
        "quotaHeadroom",
        "vgpuFit",
        "backlog",
        "clusterWeight",
        "latency",
        "admissionTimeout",
        "lostTimeout",
        "suspectAfter",
        "allowedNamespaces",
        "finishedRetention",
        "recordRetention",
        "gcInterval",
        "createNamespaces",
        "workersPerRound",
        "roundInterval",
        "controllerName",
        "origin",
        "postgresql+asyncpg://",
        "sqlite+aiosqlite://",
    ):
        assert key in text, key


def test_minimal_config_defaults(tmp_path: Path) -> None:
    raw = minimal()
    raw["manager"] = {"inCluster": True}
    raw["workers"][0] = {"name": "worker-1", "kubeconfig": "rel/w1.kubeconfig"}
    cfg = parse_config(raw, base=tmp_path)
    assert cfg.manager.in_cluster
    assert cfg.workers[0].kube.path == str(tmp_path / "rel" / "w1.kubeconfig")
    assert cfg.policy.mode == "binpack"
    assert cfg.policy.suspect_after == 10.0
    assert cfg.database_url is None
    assert cfg.worker("worker-2") is cfg.workers[1]
    assert cfg.worker("nope") is None


def test_unquoted_boolean_label_is_lowercase() -> None:
    raw = minimal()
    raw["workers"][0]["labels"] = {"gpu": True, "tier": 2}
    assert parse_config(raw).workers[0].labels == {"gpu": "true", "tier": "2"}


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(90, 90.0), (1.5, 1.5), ("90s", 90.0), ("1.5m", 90.0), ("2h", 7200.0), ("500ms", 0.5), ("30", 30.0)],
)
def test_durations(value: Any, seconds: float) -> None:
    assert parse_duration(value, "x") == seconds


# -- malformed configs ----------------------------------------------------------------------------------


def _with(path: str, value: Any, *, delete: bool = False) -> Obj:
    """``minimal()`` with the value at a dotted path (``workers[1].weight``) replaced or deleted."""
    raw = copy.deepcopy(minimal())
    parts = path.replace("[", ".").replace("]", "").split(".")
    node: Any = raw
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    last = parts[-1]
    if delete:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return raw


BAD: list[tuple[str, Obj, str, str]] = [
    ("unknown top-level key", _with("managers", {}), "managers", "unknown key"),
    ("unknown worker key", _with("workers[1].wieght", 2), "workers[1].wieght", "unknown key"),
    ("unknown policy key", _with("policy.modee", "spread"), "policy.modee", "unknown key"),
    ("weight wrong type", _with("workers[1].weight", "heavy"), "workers[1].weight", "'heavy'"),
    ("weight zero", _with("workers[0].weight", 0), "workers[0].weight", "got 0"),
    ("maxInFlight wrong type", _with("workers[1].maxInFlight", "ten"), "workers[1].maxInFlight", "'ten'"),
    ("maxInFlight zero", _with("workers[0].maxInFlight", 0), "workers[0].maxInFlight", "got 0"),
    ("labels not a mapping", _with("workers[1].labels", ["zone=a"]), "workers[1].labels", "['zone=a']"),
    ("label value a mapping", _with("workers[1].labels.zone", {"a": 1}), "workers[1].labels.zone", "{'a': 1}"),
    ("negative timeout", _with("policy.admissionTimeout", -5), "policy.admissionTimeout", "-5"),
    ("negative timeout string", _with("policy.lostTimeout", "-5s"), "policy.lostTimeout", "not be negative, got '-5s'"),
    ("zero timeout", _with("policy.admissionTimeout", "0s"), "policy.admissionTimeout", "'0s'"),
    ("zero gc interval", _with("policy.gcInterval", 0), "policy.gcInterval", "got 0"),
    ("bad duration string", _with("policy.lostTimeout", "5 minutes"), "policy.lostTimeout", "'5 minutes'"),
    ("duration a boolean", _with("policy.finishedRetention", True), "policy.finishedRetention", "True"),
    ("suspect after lost", _with("policy.suspectAfter", "2m"), "policy.suspectAfter", "'2m'"),
    ("zero record retention", _with("policy.recordRetention", "0d"), "policy.recordRetention", "'0d'"),
    ("bad record retention", _with("policy.recordRetention", "a week"), "policy.recordRetention", "'a week'"),
    (
        "duplicate worker name",
        _with("workers[1].name", "worker-1"),
        "workers[1].name",
        "duplicate worker name 'worker-1'",
    ),
    ("worker name not a DNS label", _with("workers[0].name", "Worker_1"), "workers[0].name", "'Worker_1'"),
    ("worker without a name", _with("workers[0].name", None, delete=True), "workers[0].name", "None"),
    ("bad mode", _with("policy.mode", "pack"), "policy.mode", "'pack'"),
    ("bad strategy", _with("policy.strategy", "random"), "policy.strategy", "'random'"),
    ("negative weight term", _with("policy.weights.backlog", -1), "policy.weights.backlog", "-1"),
    ("unknown weight term", _with("policy.weights.price", 1), "policy.weights.price", "unknown key"),
    ("missing manager", _with("manager", None, delete=True), "manager", "required"),
    ("manager without kubeconfig", _with("manager", {"context": "x"}), "manager.kubeconfig", "required"),
    ("manager not a mapping", _with("manager", "kubeconfig"), "manager", "'kubeconfig'"),
    ("no workers", _with("workers", []), "workers", "[]"),
    (
        "two ways to connect",
        _with("workers[0].secretRef", {"name": "s"}),
        "workers[0].secretRef",
        "only one of kubeconfig, secretRef or inCluster",
    ),
    ("inCluster not a boolean", _with("manager", {"inCluster": "yes"}), "manager.inCluster", "'yes'"),
    ("secretRef without name", _with("manager", {"secretRef": {"namespace": "x"}}), "manager.secretRef.name", "None"),
    ("bad namespaces", _with("policy.allowedNamespaces", "default"), "policy.allowedNamespaces", "'default'"),
    ("bad workersPerRound", _with("policy.incremental.workersPerRound", 0), "policy.incremental.workersPerRound", "0"),
    ("bad controllerName", _with("controllerName", "multikueue"), "controllerName", "'multikueue'"),
    ("bad origin", _with("origin", "Manager One"), "origin", "'Manager One'"),
    ("database url wrong type", _with("database.url", 5), "database.url", "5"),
    ("unknown database key", _with("database.uri", "sqlite://"), "database.uri", "unknown key"),
    ("bad fencing", _with("workers[0].fencing", "lease"), "workers[0].fencing", "'lease'"),
    ("zero fencing lease", _with("policy.fencing.leaseDuration", 0), "policy.fencing.leaseDuration", "got 0"),
    ("bad fencing grace", _with("policy.fencing.grace", "soon"), "policy.fencing.grace", "'soon'"),
    ("bad fencing namespace", _with("policy.fencing.namespace", "Kueue"), "policy.fencing.namespace", "'Kueue'"),
    ("unknown fencing key", _with("policy.fencing.lease", "5s"), "policy.fencing.lease", "unknown key"),
]


@pytest.mark.parametrize(("case", "raw", "path", "shown"), BAD, ids=[b[0] for b in BAD])
def test_malformed_configs_name_the_key_path_and_value(case: str, raw: Obj, path: str, shown: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    message = str(info.value)
    assert message.startswith((f"{path}:", f"{path} ")), message
    assert shown in message, message


def test_top_level_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match=r"\(top level\): expected a mapping"):
        parse_config(["manager"])


def test_unreadable_and_invalid_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("manager: {kubeconfig: x\nworkers: [\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_config(bad)


# -- the CLI ---------------------------------------------------------------------------------------------


def _run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DISPATCHER_DB_URL"}
    return subprocess.run(
        [sys.executable, "-m", "dispatcher", *args],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_bad_config_exits_nonzero_without_traceback(tmp_path: Path) -> None:
    raw = minimal()
    raw["workers"][1]["weight"] = "heavy"
    bad = tmp_path / "clusters.yaml"
    bad.write_text(yaml.safe_dump(raw))
    result = _run_cli(tmp_path, "db", "upgrade", "--config", str(bad))
    assert result.returncode == 2, result.stderr
    assert "workers[1].weight" in result.stderr
    assert "'heavy'" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1  # one line
    assert not (tmp_path / "dispatcher.sqlite").exists()  # stopped before touching the database


def test_cli_bad_yaml_exits_nonzero_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "clusters.yaml"
    bad.write_text("policy:\n  mode: [binpack\n")
    result = _run_cli(tmp_path, "db", "upgrade", "--config", str(bad))
    assert result.returncode == 2
    assert "not valid YAML" in result.stderr
    assert "Traceback" not in result.stderr


def test_record_retention_takes_days(tmp_path: Path) -> None:
    raw = minimal()
    raw["policy"] = {"recordRetention": "30d", "finishedRetention": "1h"}
    cfg = parse_config(raw, base=tmp_path)
    assert cfg.policy.record_retention == 30 * 24 * 3600.0 and cfg.policy.finished_retention == 3600.0
