"""``clusters.yaml``: the manager, the workers and the placement policy, typed and validated.

Every error names the key path and the bad value (``workers[1].weight: must be a number > 0, got
'heavy'``) and is raised as :class:`ConfigError`; the CLI prints it and exits 2, never a traceback.
See ``clusters.example.yaml`` for a documented example.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import DEFAULT_CONTROLLER_NAME

__all__ = [
    "DEFAULT_MAX_IN_FLIGHT",
    "ConfigError",
    "DispatcherConfig",
    "KubeconfigRef",
    "Policy",
    "ScoringWeights",
    "WorkerConfig",
    "load_config",
    "parse_config",
    "parse_duration",
]

#: Copies per worker not yet admitted by its Kueue. A throttle, not the quota guard (reservations are): it must
#: not hold back a failover, which moves hundreds of workloads off a lost worker at once.
DEFAULT_MAX_IN_FLIGHT = 500


class ConfigError(ValueError):
    """An invalid configuration; ``str()`` is the message for the user."""


_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def parse_duration(value: Any, path: str) -> float:
    """Seconds from ``90``, ``"90s"``, ``"1.5m"``, ``"2h"``, ``"500ms"``."""
    if isinstance(value, bool):
        raise ConfigError(f"{path}: expected a duration such as 90s, 5m or 1h, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ConfigError(f"{path}: must not be negative, got {value!r}")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            number = float(m.group(1))
            if number < 0:
                raise ConfigError(f"{path}: must not be negative, got {value!r}")
            unit = m.group(2) or "s"
            return number * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    raise ConfigError(f"{path}: expected a duration such as 90s, 5m or 1h, got {value!r}")


@dataclass(frozen=True)
class KubeconfigRef:
    """How to reach a cluster: a kubeconfig file (and context), a Secret holding one, or in-cluster."""

    path: str | None = None
    context: str | None = None
    secret_namespace: str | None = None
    secret_name: str | None = None
    secret_key: str = "kubeconfig"
    in_cluster: bool = False

    def describe(self) -> str:
        """Where the credentials come from, without their content."""
        if self.in_cluster:
            return "in-cluster service account"
        if self.secret_name:
            return f"Secret {self.secret_namespace}/{self.secret_name} key {self.secret_key}"
        ctx = f" (context {self.context})" if self.context else ""
        return f"kubeconfig {self.path}{ctx}"


@dataclass(frozen=True)
class WorkerConfig:
    name: str
    kube: KubeconfigRef
    weight: float = 1.0
    labels: Mapping[str, str] = field(default_factory=dict)
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT


@dataclass(frozen=True)
class ScoringWeights:
    """Weights of the score terms (see ``dispatcher/placement/scoring.py`` for the formula)."""

    quota_headroom: float = 1.0
    vgpu_fit: float = 1.0
    backlog: float = 0.5
    cluster_weight: float = 0.3
    latency: float = 0.2


@dataclass(frozen=True)
class Policy:
    mode: str = "binpack"  # binpack | spread
    strategy: str = "scored"  # scored | allAtOnce | incremental
    weights: ScoringWeights = field(default_factory=ScoringWeights)
    admission_timeout: float = 300.0
    lost_timeout: float = 60.0
    suspect_after: float = 10.0
    allowed_namespaces: tuple[str, ...] = ()
    finished_retention: float = 600.0
    gc_interval: float = 60.0
    create_namespaces: bool = True
    incremental_round: int = 3
    incremental_interval: float = 300.0

    def namespace_allowed(self, namespace: str) -> bool:
        return not self.allowed_namespaces or namespace in self.allowed_namespaces


@dataclass(frozen=True)
class DispatcherConfig:
    manager: KubeconfigRef
    workers: tuple[WorkerConfig, ...]
    policy: Policy = field(default_factory=Policy)
    controller_name: str = DEFAULT_CONTROLLER_NAME
    #: An optional name for this dispatcher's manager, written into origin labels of remote copies.
    origin: str = "manager"
    database_url: str | None = None

    def worker(self, name: str) -> WorkerConfig | None:
        return next((w for w in self.workers if w.name == name), None)


def _expect(value: Any, kind: type | tuple[type, ...], path: str, what: str) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ConfigError(f"{path}: expected {what}, got {value!r}")
    return value


def _unknown(raw: Mapping[str, Any], allowed: set[str], path: str) -> None:
    extra = sorted(set(raw) - allowed)
    if extra:
        prefix = f"{path}." if path else ""
        raise ConfigError(f"{prefix}{extra[0]}: unknown key (allowed: {', '.join(sorted(allowed))})")


def _kube(raw: Any, path: str, base: Path) -> KubeconfigRef:
    raw = _expect(raw, dict, path, "a mapping with kubeconfig/context, secretRef or inCluster")
    _unknown(raw, {"kubeconfig", "context", "secretRef", "inCluster"}, path)
    ways = [k for k in ("kubeconfig", "secretRef", "inCluster") if k in raw]
    if len(ways) > 1:
        raise ConfigError(f"{path}.{ways[1]}: give only one of kubeconfig, secretRef or inCluster, got {ways}")
    if "inCluster" in raw:
        _expect(raw["inCluster"], bool, f"{path}.inCluster", "true or false")
    if raw.get("inCluster"):
        return KubeconfigRef(in_cluster=True)
    if "secretRef" in raw:
        ref = _expect(raw["secretRef"], dict, f"{path}.secretRef", "a mapping with namespace, name and key")
        _unknown(ref, {"namespace", "name", "key"}, f"{path}.secretRef")
        name = _expect(ref.get("name"), str, f"{path}.secretRef.name", "a Secret name")
        namespace = _expect(ref.get("namespace", "kueue-system"), str, f"{path}.secretRef.namespace", "a namespace")
        key = _expect(ref.get("key", "kubeconfig"), str, f"{path}.secretRef.key", "a key of the Secret")
        return KubeconfigRef(secret_namespace=namespace, secret_name=name, secret_key=key)
    if "kubeconfig" not in raw:
        raise ConfigError(f"{path}.kubeconfig: required (or give secretRef, or inCluster: true)")
    kubeconfig = _expect(raw["kubeconfig"], str, f"{path}.kubeconfig", "a file path")
    p = Path(kubeconfig).expanduser()
    if not p.is_absolute():
        p = base / p
    context = raw.get("context")
    if context is not None:
        _expect(context, str, f"{path}.context", "a context name")
    return KubeconfigRef(path=str(p), context=context)


def _number(raw: Any, path: str, *, minimum: float, strict: bool = False) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ConfigError(f"{path}: must be a number {'>' if strict else '>='} {minimum:g}, got {raw!r}")
    if raw < minimum or (strict and raw == minimum):
        raise ConfigError(f"{path}: must be a number {'>' if strict else '>='} {minimum:g}, got {raw!r}")
    return float(raw)


def _policy(raw: Any) -> Policy:
    if raw is None:
        return Policy()
    raw = _expect(raw, dict, "policy", "a mapping")
    allowed = {
        "mode",
        "strategy",
        "weights",
        "admissionTimeout",
        "lostTimeout",
        "suspectAfter",
        "allowedNamespaces",
        "finishedRetention",
        "gcInterval",
        "createNamespaces",
        "incremental",
    }
    _unknown(raw, allowed, "policy")
    mode = raw.get("mode", "binpack")
    if mode not in ("binpack", "spread"):
        raise ConfigError(f"policy.mode: must be binpack or spread, got {mode!r}")
    strategy = raw.get("strategy", "scored")
    if strategy not in ("scored", "allAtOnce", "incremental"):
        raise ConfigError(f"policy.strategy: must be scored, allAtOnce or incremental, got {strategy!r}")
    weights = ScoringWeights()
    if "weights" in raw:
        w = _expect(raw["weights"], dict, "policy.weights", "a mapping")
        names = {
            "quotaHeadroom": "quota_headroom",
            "vgpuFit": "vgpu_fit",
            "backlog": "backlog",
            "clusterWeight": "cluster_weight",
            "latency": "latency",
        }
        _unknown(w, set(names), "policy.weights")
        weights = ScoringWeights(**{names[k]: _number(v, f"policy.weights.{k}", minimum=0) for k, v in w.items()})
    namespaces = raw.get("allowedNamespaces", [])
    if not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces):
        raise ConfigError(f"policy.allowedNamespaces: expected a list of namespace names, got {namespaces!r}")
    incremental = raw.get("incremental", {}) or {}
    _expect(incremental, dict, "policy.incremental", "a mapping with workersPerRound and roundInterval")
    _unknown(incremental, {"workersPerRound", "roundInterval"}, "policy.incremental")
    per_round = incremental.get("workersPerRound", 3)
    if isinstance(per_round, bool) or not isinstance(per_round, int) or per_round < 1:
        raise ConfigError(f"policy.incremental.workersPerRound: must be an integer >= 1, got {per_round!r}")
    create_ns = raw.get("createNamespaces", True)
    _expect(create_ns, bool, "policy.createNamespaces", "true or false")
    admission_timeout = parse_duration(raw.get("admissionTimeout", 300), "policy.admissionTimeout")
    lost_timeout = parse_duration(raw.get("lostTimeout", 60), "policy.lostTimeout")
    suspect_after = parse_duration(raw.get("suspectAfter", min(10.0, lost_timeout / 2)), "policy.suspectAfter")
    if admission_timeout <= 0:
        raise ConfigError(f"policy.admissionTimeout: must be > 0, got {raw.get('admissionTimeout')!r}")
    if lost_timeout <= 0:
        raise ConfigError(f"policy.lostTimeout: must be > 0, got {raw.get('lostTimeout')!r}")
    if suspect_after > lost_timeout:
        raise ConfigError(
            f"policy.suspectAfter: must not exceed policy.lostTimeout ({lost_timeout:g}s), "
            f"got {raw.get('suspectAfter')!r}"
        )
    gc_interval = parse_duration(raw.get("gcInterval", 60), "policy.gcInterval")
    if gc_interval <= 0:
        raise ConfigError(f"policy.gcInterval: must be > 0, got {raw.get('gcInterval')!r}")
    return Policy(
        mode=mode,
        strategy=strategy,
        weights=weights,
        admission_timeout=admission_timeout,
        lost_timeout=lost_timeout,
        suspect_after=suspect_after,
        allowed_namespaces=tuple(namespaces),
        finished_retention=parse_duration(raw.get("finishedRetention", 600), "policy.finishedRetention"),
        gc_interval=gc_interval,
        create_namespaces=create_ns,
        incremental_round=per_round,
        incremental_interval=parse_duration(incremental.get("roundInterval", 300), "policy.incremental.roundInterval"),
    )


def parse_config(raw: Any, *, base: Path | None = None) -> DispatcherConfig:
    """Validate a parsed ``clusters.yaml`` document. Relative kubeconfig paths resolve against ``base``."""
    base = base or Path.cwd()
    raw = _expect(raw, dict, "(top level)", "a mapping with manager, workers and policy")
    _unknown(raw, {"manager", "workers", "policy", "controllerName", "origin", "database"}, "")
    if "manager" not in raw:
        raise ConfigError("manager: required (the kubeconfig of the cluster users submit to)")
    manager = _kube(raw["manager"], "manager", base)
    workers_raw = raw.get("workers")
    if not isinstance(workers_raw, list) or not workers_raw:
        raise ConfigError(f"workers: expected a non-empty list of worker clusters, got {workers_raw!r}")
    workers: list[WorkerConfig] = []
    seen: set[str] = set()
    for i, entry in enumerate(workers_raw):
        path = f"workers[{i}]"
        w = _expect(entry, dict, path, "a mapping")
        _unknown(
            w, {"name", "kubeconfig", "context", "secretRef", "inCluster", "weight", "labels", "maxInFlight"}, path
        )
        name = w.get("name")
        if not isinstance(name, str) or not _NAME.match(name) or len(name) > 63:
            raise ConfigError(f"{path}.name: must be a lowercase DNS label (a-z, 0-9, '-'), got {name!r}")
        if name in seen:
            raise ConfigError(f"{path}.name: duplicate worker name {name!r}")
        seen.add(name)
        kube = _kube(
            {k: v for k, v in w.items() if k in ("kubeconfig", "context", "secretRef", "inCluster")}, path, base
        )
        weight = _number(w.get("weight", 1.0), f"{path}.weight", minimum=0, strict=True)
        labels = w.get("labels", {}) or {}
        if not isinstance(labels, dict) or not all(isinstance(k, str) for k in labels):
            raise ConfigError(f"{path}.labels: expected a mapping of strings, got {labels!r}")
        for key, value in labels.items():
            if not isinstance(value, (str, int, float, bool)):
                raise ConfigError(f"{path}.labels.{key}: expected a string, got {value!r}")
        max_in_flight = w.get("maxInFlight", DEFAULT_MAX_IN_FLIGHT)
        if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ConfigError(f"{path}.maxInFlight: must be an integer >= 1, got {max_in_flight!r}")
        workers.append(
            WorkerConfig(
                name=name,
                kube=kube,
                weight=weight,
                labels={k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in labels.items()},
                max_in_flight=max_in_flight,
            )
        )
    controller = raw.get("controllerName", DEFAULT_CONTROLLER_NAME)
    if not isinstance(controller, str) or "/" not in controller:
        raise ConfigError(
            f"controllerName: must be a domain-prefixed path such as kueue.x-k8s.io/multikueue, got {controller!r}"
        )
    origin = raw.get("origin", "manager")
    if not isinstance(origin, str) or not _NAME.match(origin):
        raise ConfigError(f"origin: must be a lowercase DNS label, got {origin!r}")
    database = raw.get("database")
    db_url = None
    if database is not None:
        database = _expect(database, dict, "database", "a mapping with url")
        _unknown(database, {"url"}, "database")
        db_url = _expect(database.get("url"), str, "database.url", "a SQLAlchemy URL")
    return DispatcherConfig(
        manager=manager,
        workers=tuple(workers),
        policy=_policy(raw.get("policy")),
        controller_name=controller,
        origin=origin,
        database_url=db_url,
    )


def load_config(path: str | Path) -> DispatcherConfig:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the configuration: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{p}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    return parse_config(raw, base=p.parent.resolve())
