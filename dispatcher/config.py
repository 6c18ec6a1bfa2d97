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
    "DEFAULT_SECRET_NAMESPACE",
    "MODES",
    "ConfigError",
    "DispatcherConfig",
    "FencingPolicy",
    "KubeconfigRef",
    "NativeConfig",
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
#: Where a ``secretRef`` looks when it names no namespace: the dispatcher's own namespace in deploy/ (its Role there
#: is what grants reading the worker kubeconfig Secrets).
DEFAULT_SECRET_NAMESPACE = "dispatcher-system"


class ConfigError(ValueError):
    """An invalid configuration; ``str()`` is the message for the user. It carries every problem found, so that
    a configuration is fixed in one pass: ``messages`` lists them, each with its key path and bad value."""

    def __init__(self, message: str | list[str]) -> None:
        self.messages = [message] if isinstance(message, str) else list(message)
        if len(self.messages) == 1:
            text = self.messages[0]
        else:
            text = f"{len(self.messages)} problems:\n" + "\n".join(f"  - {m}" for m in self.messages)
        super().__init__(text)


class _Problems:
    """Collects ConfigErrors so that parsing goes on and every problem is reported at once."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def check(self, fn: Any, *args: Any, default: Any = None, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConfigError as exc:
            self.messages.extend(exc.messages)
            return default

    def raise_any(self) -> None:
        if self.messages:
            raise ConfigError(self.messages)


_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def parse_duration(value: Any, path: str) -> float:
    """Seconds from ``90``, ``"90s"``, ``"1.5m"``, ``"2h"``, ``"7d"``, ``"500ms"``."""
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
            return number * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
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
    #: ``agent``: a fencing agent runs in the worker (``dispatcher agent``, deploy/worker/agent.yaml); the
    #: dispatcher renews a Lease there and a Lost worker's workloads start elsewhere only once the agent has stopped
    #: them (exactly once). ``none``: failover from a partitioned worker is at-least-once.
    fencing: str = "none"


@dataclass(frozen=True)
class FencingPolicy:
    """The fencing Lease a dispatcher renews in each worker with ``fencing: agent`` (see dispatcher/agent.py)."""

    #: The agent fences the copies when it has not seen the Lease renewed for this long (its own clock).
    lease_duration: float = 40.0
    #: Beyond the lease duration, how long the dispatcher waits before it starts a Lost worker's workloads
    #: elsewhere: time for the agent to notice and act, for the pods to stop (their termination grace), and for
    #: clock drift between the two.
    grace: float = 30.0
    #: The worker namespace of the Lease (and of the agent's heartbeat Lease).
    namespace: str = "kueue-system"

    @property
    def renew_interval(self) -> float:
        return self.lease_duration / 4


@dataclass(frozen=True)
class ScoringWeights:
    """Weights of the score terms (see ``dispatcher/placement/scoring.py`` for the formula)."""

    quota_headroom: float = 1.0
    vgpu_fit: float = 1.0
    backlog: float = 0.5
    cluster_weight: float = 0.3
    latency: float = 0.2
    #: TAS: a pod set with a preferred topology level placed in one domain of it (only for such pod sets).
    topology: float = 1.0
    #: Fair sharing: the ClusterQueue's dominant resource share after admission (only when the worker's Kueue has
    #: fair sharing on).
    fair_share: float = 0.5


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
    #: How long a finished workload's record (its decisions, placements and events) stays in SQL after its copy
    #: was cleaned up; then it is deleted, in batches.
    record_retention: float = 7 * 24 * 3600.0
    gc_interval: float = 60.0
    create_namespaces: bool = True
    #: The status sync runs a batch at once when a copy changes, then at most one batch per this many seconds:
    #: the changes of that time (a copy admitted and then running, many copies finishing) share one SQL
    #: transaction and one manager write per workload, as Kubernetes' Job controller batches pod events for 1 s
    #: (``SyncJobBatchPeriod``). 0: a batch per wake-up. Status-sync lag grows by at most this much.
    status_sync_period: float = 0.1
    incremental_round: int = 3
    incremental_interval: float = 300.0
    fencing: FencingPolicy = field(default_factory=FencingPolicy)

    def namespace_allowed(self, namespace: str) -> bool:
        return not self.allowed_namespaces or namespace in self.allowed_namespaces


#: ``mode``: the dispatcher mirrors and syncs itself (standalone), or it is MultiKueue's external dispatcher on a
#: manager running Kueue with MultiKueue (kueue-external: it only nominates workers; README "Kueue-native mode").
MODES = ("standalone", "kueue-external")
DEFAULT_NATIVE_DISPATCHER = "kueue-dispatcher.io/scored"


@dataclass(frozen=True)
class NativeConfig:
    """``kueueNative``: the dispatcher as MultiKueue's external dispatcher."""

    #: What the manager's Kueue names in ``multiKueue.dispatcherName`` (checked against its Configuration).
    dispatcher_name: str = DEFAULT_NATIVE_DISPATCHER
    #: How many workers to nominate at first, best first (1: one copy; more: an ordered fallback, MultiKueue keeps
    #: the first copy admitted).
    nominate: int = 1


@dataclass(frozen=True)
class DispatcherConfig:
    manager: KubeconfigRef
    workers: tuple[WorkerConfig, ...]
    policy: Policy = field(default_factory=Policy)
    controller_name: str = DEFAULT_CONTROLLER_NAME
    #: An optional name for this dispatcher's manager, written into origin labels of remote copies.
    origin: str = "manager"
    database_url: str | None = None
    mode: str = "standalone"
    native: NativeConfig = field(default_factory=NativeConfig)

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
        raise ConfigError([f"{prefix}{key}: unknown key (allowed: {', '.join(sorted(allowed))})" for key in extra])


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
        # The default is where deploy/ runs the dispatcher and where its RBAC lets it read Secrets.
        namespace = _expect(
            ref.get("namespace", DEFAULT_SECRET_NAMESPACE), str, f"{path}.secretRef.namespace", "a namespace"
        )
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


def _mode(raw: Mapping[str, Any]) -> str:
    mode = raw.get("mode", "binpack")
    if mode not in ("binpack", "spread"):
        raise ConfigError(f"policy.mode: must be binpack or spread, got {mode!r}")
    return str(mode)


def _strategy(raw: Mapping[str, Any]) -> str:
    strategy = raw.get("strategy", "scored")
    if strategy not in ("scored", "allAtOnce", "incremental"):
        raise ConfigError(f"policy.strategy: must be scored, allAtOnce or incremental, got {strategy!r}")
    return str(strategy)


def _weights(raw: Mapping[str, Any]) -> ScoringWeights:
    if "weights" not in raw:
        return ScoringWeights()
    w = _expect(raw["weights"], dict, "policy.weights", "a mapping")
    names = {
        "quotaHeadroom": "quota_headroom",
        "vgpuFit": "vgpu_fit",
        "backlog": "backlog",
        "clusterWeight": "cluster_weight",
        "latency": "latency",
        "topology": "topology",
        "fairShare": "fair_share",
    }
    problems = _Problems()
    problems.check(_unknown, w, set(names), "policy.weights")
    values = {
        names[k]: problems.check(_number, v, f"policy.weights.{k}", minimum=0, default=1.0)
        for k, v in w.items()
        if k in names
    }
    problems.raise_any()
    return ScoringWeights(**values)


def _namespaces(raw: Mapping[str, Any]) -> tuple[str, ...]:
    namespaces = raw.get("allowedNamespaces", [])
    if not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces):
        raise ConfigError(f"policy.allowedNamespaces: expected a list of namespace names, got {namespaces!r}")
    return tuple(namespaces)


def _incremental(raw: Mapping[str, Any]) -> tuple[int, float]:
    incremental = raw.get("incremental", {}) or {}
    _expect(incremental, dict, "policy.incremental", "a mapping with workersPerRound and roundInterval")
    problems = _Problems()
    problems.check(_unknown, incremental, {"workersPerRound", "roundInterval"}, "policy.incremental")
    per_round = incremental.get("workersPerRound", 3)
    if isinstance(per_round, bool) or not isinstance(per_round, int) or per_round < 1:
        problems.messages.append(f"policy.incremental.workersPerRound: must be an integer >= 1, got {per_round!r}")
    interval = problems.check(
        parse_duration, incremental.get("roundInterval", 300), "policy.incremental.roundInterval", default=300.0
    )
    problems.raise_any()
    return per_round, interval


def _positive_duration(raw: Mapping[str, Any], key: str, default: float, path: str = "policy") -> float:
    value = parse_duration(raw.get(key, default), f"{path}.{key}")
    if value <= 0:
        raise ConfigError(f"{path}.{key}: must be > 0, got {raw.get(key)!r}")
    return value


def _fencing(raw: Mapping[str, Any]) -> FencingPolicy:
    fencing = raw.get("fencing", {}) or {}
    _expect(fencing, dict, "policy.fencing", "a mapping with leaseDuration, grace and namespace")
    p = _Problems()
    p.check(_unknown, fencing, {"leaseDuration", "grace", "namespace"}, "policy.fencing")
    defaults = FencingPolicy()
    duration = p.check(
        _positive_duration, fencing, "leaseDuration", defaults.lease_duration, "policy.fencing", default=40.0
    )
    grace = p.check(parse_duration, fencing.get("grace", defaults.grace), "policy.fencing.grace", default=30.0)
    namespace = fencing.get("namespace", defaults.namespace)
    if not isinstance(namespace, str) or not _NAME.match(namespace):
        p.messages.append(f"policy.fencing.namespace: must be a namespace name, got {namespace!r}")
    p.raise_any()
    return FencingPolicy(lease_duration=duration, grace=grace, namespace=namespace)


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
        "recordRetention",
        "gcInterval",
        "statusSyncPeriod",
        "createNamespaces",
        "incremental",
        "fencing",
    }
    p = _Problems()
    p.check(_unknown, raw, allowed, "policy")
    mode = p.check(_mode, raw, default="binpack")
    strategy = p.check(_strategy, raw, default="scored")
    weights = p.check(_weights, raw, default=ScoringWeights())
    namespaces = p.check(_namespaces, raw, default=())
    per_round, interval = p.check(_incremental, raw, default=(3, 300.0))
    create_ns = p.check(_expect, raw.get("createNamespaces", True), bool, "policy.createNamespaces", "true or false")
    admission_timeout = p.check(_positive_duration, raw, "admissionTimeout", 300, default=300.0)
    lost_timeout = p.check(_positive_duration, raw, "lostTimeout", 60, default=60.0)
    suspect_after = p.check(
        parse_duration, raw.get("suspectAfter", min(10.0, lost_timeout / 2)), "policy.suspectAfter", default=0.0
    )
    if suspect_after > lost_timeout:
        p.messages.append(
            f"policy.suspectAfter: must not exceed policy.lostTimeout ({lost_timeout:g}s), "
            f"got {raw.get('suspectAfter')!r}"
        )
    gc_interval = p.check(_positive_duration, raw, "gcInterval", 60, default=60.0)
    retention = p.check(parse_duration, raw.get("finishedRetention", 600), "policy.finishedRetention", default=600.0)
    records = p.check(_positive_duration, raw, "recordRetention", 7 * 24 * 3600, default=7 * 24 * 3600.0)
    sync_period = p.check(parse_duration, raw.get("statusSyncPeriod", 0.1), "policy.statusSyncPeriod", default=0.1)
    if sync_period > 10:
        p.messages.append(
            f"policy.statusSyncPeriod: at most 10s (status would lag the copies by that much), "
            f"got {raw.get('statusSyncPeriod')!r}"
        )
    fencing = p.check(_fencing, raw, default=FencingPolicy())
    p.raise_any()
    return Policy(
        mode=mode,
        strategy=strategy,
        weights=weights,
        admission_timeout=admission_timeout,
        lost_timeout=lost_timeout,
        suspect_after=suspect_after,
        allowed_namespaces=namespaces,
        finished_retention=retention,
        record_retention=records,
        gc_interval=gc_interval,
        status_sync_period=sync_period,
        create_namespaces=bool(create_ns),
        incremental_round=per_round,
        incremental_interval=interval,
        fencing=fencing,
    )


def _worker(entry: Any, path: str, base: Path, seen: set[str]) -> WorkerConfig:
    w = _expect(entry, dict, path, "a mapping")
    p = _Problems()
    p.check(
        _unknown,
        w,
        {"name", "kubeconfig", "context", "secretRef", "inCluster", "weight", "labels", "maxInFlight", "fencing"},
        path,
    )
    name = w.get("name")
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > 63:
        p.messages.append(f"{path}.name: must be a lowercase DNS label (a-z, 0-9, '-'), got {name!r}")
        name = f"invalid-{len(seen)}"
    elif name in seen:
        p.messages.append(f"{path}.name: duplicate worker name {name!r}")
    seen.add(name)
    kube = p.check(
        _kube, {k: v for k, v in w.items() if k in ("kubeconfig", "context", "secretRef", "inCluster")}, path, base
    )
    weight = p.check(_number, w.get("weight", 1.0), f"{path}.weight", minimum=0, strict=True, default=1.0)
    labels = w.get("labels", {}) or {}
    if not isinstance(labels, dict) or not all(isinstance(k, str) for k in labels):
        p.messages.append(f"{path}.labels: expected a mapping of strings, got {labels!r}")
        labels = {}
    for key, value in labels.items():
        if not isinstance(value, (str, int, float, bool)):
            p.messages.append(f"{path}.labels.{key}: expected a string, got {value!r}")
    max_in_flight = w.get("maxInFlight", DEFAULT_MAX_IN_FLIGHT)
    if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 1:
        p.messages.append(f"{path}.maxInFlight: must be an integer >= 1, got {max_in_flight!r}")
    fencing = w.get("fencing", "none")
    if fencing not in ("agent", "none"):
        p.messages.append(
            f"{path}.fencing: must be agent (a fencing agent runs in the worker: exactly-once failover) or none "
            f"(at-least-once), got {fencing!r}"
        )
    p.raise_any()
    return WorkerConfig(
        name=name,
        kube=kube,
        weight=weight,
        labels={k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in labels.items()},
        max_in_flight=max_in_flight,
        fencing=str(fencing),
    )


def _controller(raw: Mapping[str, Any]) -> str:
    controller = raw.get("controllerName", DEFAULT_CONTROLLER_NAME)
    if not isinstance(controller, str) or "/" not in controller:
        raise ConfigError(
            f"controllerName: must be a domain-prefixed path such as kueue.x-k8s.io/multikueue, got {controller!r}"
        )
    return controller


def _origin(raw: Mapping[str, Any]) -> str:
    origin = raw.get("origin", "manager")
    if not isinstance(origin, str) or not _NAME.match(origin):
        raise ConfigError(f"origin: must be a lowercase DNS label, got {origin!r}")
    return origin


def _database(raw: Mapping[str, Any]) -> str | None:
    database = raw.get("database")
    if database is None:
        return None
    database = _expect(database, dict, "database", "a mapping with url")
    _unknown(database, {"url"}, "database")
    return str(_expect(database.get("url"), str, "database.url", "a SQLAlchemy URL"))


def _native(raw: Mapping[str, Any]) -> tuple[str, NativeConfig]:
    mode = raw.get("mode", "standalone")
    if mode not in MODES:
        raise ConfigError(f"mode: must be standalone or kueue-external, got {mode!r}")
    native = raw.get("kueueNative")
    if native is None:
        return str(mode), NativeConfig()
    native = _expect(native, dict, "kueueNative", "a mapping")
    _unknown(native, {"dispatcherName", "nominate"}, "kueueNative")
    name = native.get("dispatcherName", DEFAULT_NATIVE_DISPATCHER)
    if not isinstance(name, str) or "/" not in name or len(name) > 63:
        raise ConfigError(
            "kueueNative.dispatcherName: must be a domain-prefixed path of at most 63 characters, as Kueue's "
            f"multiKueue.dispatcherName (e.g. kueue-dispatcher.io/scored), got {name!r}"
        )
    nominate = native.get("nominate", 1)
    if isinstance(nominate, bool) or not isinstance(nominate, int) or not 1 <= nominate <= 20:
        raise ConfigError(f"kueueNative.nominate: must be an integer from 1 to 20, got {nominate!r}")
    return str(mode), NativeConfig(dispatcher_name=name, nominate=nominate)


def parse_config(raw: Any, *, base: Path | None = None) -> DispatcherConfig:
    """Validate a parsed ``clusters.yaml`` document. Relative kubeconfig paths resolve against ``base``. Every
    problem is reported at once (one :class:`ConfigError` listing them)."""
    base = base or Path.cwd()
    raw = _expect(raw, dict, "(top level)", "a mapping with manager, workers and policy")
    p = _Problems()
    p.check(
        _unknown,
        raw,
        {"manager", "workers", "policy", "controllerName", "origin", "database", "mode", "kueueNative"},
        "",
    )
    manager = None
    if "manager" not in raw:
        p.messages.append("manager: required (the kubeconfig of the cluster users submit to)")
    else:
        manager = p.check(_kube, raw["manager"], "manager", base)
    workers_raw = raw.get("workers")
    workers: list[WorkerConfig] = []
    if not isinstance(workers_raw, list) or not workers_raw:
        p.messages.append(f"workers: expected a non-empty list of worker clusters, got {workers_raw!r}")
    else:
        seen: set[str] = set()
        for i, entry in enumerate(workers_raw):
            worker = p.check(_worker, entry, f"workers[{i}]", base, seen)
            if worker is not None:
                workers.append(worker)
    controller = p.check(_controller, raw, default=DEFAULT_CONTROLLER_NAME)
    origin = p.check(_origin, raw, default="manager")
    db_url = p.check(_database, raw)
    policy = p.check(_policy, raw.get("policy"), default=Policy())
    mode, native = p.check(_native, raw, default=("standalone", NativeConfig()))
    p.raise_any()
    assert manager is not None
    return DispatcherConfig(
        manager=manager,
        workers=tuple(workers),
        policy=policy,
        controller_name=controller,
        origin=origin,
        database_url=db_url,
        mode=mode,
        native=native,
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
    try:
        return parse_config(raw, base=p.parent.resolve())
    except ConfigError as exc:
        raise ConfigError([f"{p}: {m}" for m in exc.messages]) from None
