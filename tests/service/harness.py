"""A test rig: clusters, a database, and the dispatcher in the test's event loop.

The clusters are simulated (started per test, in the same loop) or the session's real rig (``tests/realrig.py``:
real kube-apiserver, Kueue, kwok...), for tests marked ``real_rig``. The dispatcher runs unchanged on both; a test
reaches the clusters through ``Rig.manager``/``Rig.workers`` (administrator clients) and makes faults with
``Rig.fault``, which either backend carries out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from realrig import RealRig, clean, hold_admission

from dispatcher import DEFAULT_CONTROLLER_NAME
from dispatcher.adapters.job import JobAdapter
from dispatcher.agent import AgentGroup
from dispatcher.config import DispatcherConfig, FencingPolicy, KubeconfigRef, Policy, load_config
from dispatcher.kube.client import ClusterClient, connect
from dispatcher.service import Dispatcher
from dispatcher.store.engine import make_engine
from dispatcher.store.migrate import upgrade
from dispatcher.store.models import Workload
from dispatcher.store.repo import Repo
from kubesim.world import SimWorld, WorldOptions

Obj = dict[str, Any]
T = TypeVar("T")
JOBS = JobAdapter.resource


async def eventually(probe: Callable[[], Awaitable[T | None]], *, timeout: float = 30.0, what: str = "condition") -> T:
    """Poll ``probe`` (cheap, in-memory or one query) until it returns something truthy, or fail."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last value: {last!r}")


def job(
    name: str,
    namespace: str = "team-a",
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    limits: Obj | None = None,
    seconds: float = 1.0,
    parallelism: int = 1,
    queue: str = "user-queue",
    priority: str | None = None,
    managed: bool = False,
    annotations: dict[str, str] | None = None,
) -> Obj:
    resources: Obj = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        resources["limits"] = limits
    spec: Obj = {
        "parallelism": parallelism,
        "completions": parallelism,
        "backoffLimit": 0,
        "template": {
            "metadata": {"annotations": {"sim.dispatcher.io/run-seconds": f"{seconds:g}"}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox:1.36", "resources": resources}],
            },
        },
    }
    if managed:
        spec["managedBy"] = DEFAULT_CONTROLLER_NAME
    else:
        spec["suspend"] = True
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    meta: Obj = {"name": name, "namespace": namespace, "labels": labels}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


@dataclass
class Rig:
    world: SimWorld | None
    config: DispatcherConfig
    repo: Repo
    dispatcher: Dispatcher
    manager: ClusterClient
    workers: dict[str, ClusterClient] = field(default_factory=dict)
    real: RealRig | None = None
    #: The fencing agents running inside the simulated workers (``start_rig(fencing=...)``).
    agents: AgentGroup | None = None
    #: Clients from inside each worker (as its fencing agent reaches it): a ``partition`` does not cut them off.
    inside: dict[str, ClusterClient] = field(default_factory=dict)

    @property
    def backend(self) -> str:
        return "real" if self.real is not None else "sim"

    def sim(self) -> SimWorld:
        """The simulated world, for a test step only the simulator can make."""
        assert self.world is not None, "a simulator-only step in a test that runs on the real rig"
        return self.world

    async def fault(self, cluster: str, mode: str) -> None:
        """A fault of the simulator's kinds that both rigs make: stop, down, partition, restart, none."""
        if self.real is not None:
            await self.real.fault(cluster, mode)
        else:
            await self.sim().cluster(cluster).set_fault(mode)

    async def hold_admission(self, worker: str) -> None:
        """The worker's Kueue takes copies but admits none from now on (the test's rig undoes it after)."""
        if self.real is not None:
            await hold_admission(self.real, worker, self.workers[worker])
        else:
            await self.sim().cluster(worker).controllers["kueue"].stop()

    async def submit(self, obj: Obj) -> Obj:
        return await self.manager.create(JOBS, obj["metadata"]["namespace"], obj)

    async def row(self, namespace: str, name: str) -> Workload | None:
        return await self.repo.get_workload(namespace, name)

    async def wait_state(self, namespace: str, name: str, *states: str, timeout: float = 30.0) -> Workload:
        async def probe() -> Workload | None:
            row = await self.row(namespace, name)
            return row if row is not None and row.state in states else None

        return await eventually(probe, timeout=timeout, what=f"{namespace}/{name} in {states}")

    async def copies(self, namespace: str, name: str) -> dict[str, Obj]:
        """Remote copies of a manager Job, by worker."""
        out = {}
        for wname, client in self.workers.items():
            obj = await client.get(JOBS, namespace, name)
            if obj is not None:
                out[wname] = obj
        return out


def _with_token(ref: KubeconfigRef, token: str, path: Path) -> KubeconfigRef:
    """A copy of ``ref``'s kubeconfig whose user authenticates with ``token`` instead."""
    import yaml

    raw = yaml.safe_load(Path(ref.path or "").read_text())
    for user in raw.get("users") or []:
        user["user"] = {"token": token}
    path.write_text(yaml.safe_dump(raw))
    path.chmod(0o600)
    return replace(ref, path=str(path))


async def start_rig(
    tmp: Path,
    db_url: str,
    *,
    workers: int = 3,
    gpu_workers: int = 1,
    policy: Policy | None = None,
    weights: dict[str, float] | None = None,
    run_seconds: float = 1.0,
    without_groups: dict[str, tuple[str, ...]] | None = None,
    real: RealRig | None = None,
    tokens: dict[str, str] | None = None,
    fencing: FencingPolicy | None = None,
    agent_clocks: dict[str, Callable[[], float]] | None = None,
) -> Rig:
    """Clusters, a database and a running dispatcher. ``tokens`` replaces the dispatcher's bearer token for the
    named clusters (a wrong credential); those workers are not waited on to be Ready. ``fencing``: every worker has
    ``fencing: agent`` with those Lease settings, and a fencing agent runs inside each (on the simulator, in this
    loop, with ``agent_clocks`` as their clocks; the real rig runs its own agent processes)."""
    world: SimWorld | None = None
    agents: AgentGroup | None = None
    if real is not None:
        assert (workers, gpu_workers) == (3, 1) and not without_groups, "the real rig has worker-1..3, worker-3 GPU"
        await clean(real)
        loaded = load_config(real.directory / "clusters.yaml")
        # kubectl in the tests uses the administrator's kubeconfigs, as beside a simulated rig.
        for name in ("manager", "worker-1", "worker-2", "worker-3"):
            target = tmp / f"{name}.kubeconfig"
            await asyncio.to_thread(target.write_bytes, real.kubeconfig(name).read_bytes())
    else:
        world = SimWorld(
            WorldOptions(
                workers=workers,
                gpu_workers=gpu_workers,
                default_run_seconds=run_seconds,
                without_groups=without_groups or {},
            )
        )
        await world.start()
        await asyncio.to_thread(world.write_files, tmp)
        loaded = load_config(tmp / "clusters.yaml")
        if fencing is not None:
            refs = {w.name: KubeconfigRef(path=str(tmp / f"{w.name}.agent.kubeconfig")) for w in world.workers}
            agents = await AgentGroup.start(refs, clocks=agent_clocks)
    worker_configs = tuple(
        replace(
            w,
            fencing="agent" if fencing is not None else "none",
            weight=(weights or {}).get(w.name, w.weight),
            kube=_with_token(w.kube, tokens[w.name], tmp / f"{w.name}.token.kubeconfig")
            if w.name in (tokens or {})
            else w.kube,
        )
        for w in loaded.workers
    )
    if "manager" in (tokens or {}):
        loaded = replace(
            loaded, manager=_with_token(loaded.manager, (tokens or {})["manager"], tmp / "manager.token.kubeconfig")
        )
    policy = policy or Policy(
        admission_timeout=60.0, lost_timeout=20.0, suspect_after=5.0, finished_retention=600.0, gc_interval=1.0
    )
    if fencing is not None:
        policy = replace(policy, fencing=fencing)
    config = replace(loaded, workers=worker_configs, policy=policy, database_url=db_url)
    engine = make_engine(db_url)
    await upgrade(engine)
    repo = Repo(engine)
    dispatcher = Dispatcher(config, repo, probe_interval=0.3)
    try:
        await dispatcher.start()
    except BaseException:
        await dispatcher.stop()
        await engine.dispose()
        if agents is not None:
            await agents.stop()
        if world is not None:
            await world.stop()
        raise

    # The tests' own clients are an administrator's (the dispatcher's credentials may be least-privilege).
    def admin(name: str, ref: KubeconfigRef) -> KubeconfigRef:
        return KubeconfigRef(path=str(real.kubeconfig(name))) if real is not None else ref

    manager = await connect("manager-test", admin("manager", config.manager))
    rig = Rig(world, config, repo, dispatcher, manager, real=real, agents=agents)
    for w in config.workers:
        rig.workers[w.name] = await connect(f"{w.name}-test", admin(w.name, w.kube))
        inside = real.inside_kubeconfig(w.name) if real is not None else tmp / f"{w.name}.agent.kubeconfig"
        rig.inside[w.name] = await connect(f"{w.name}-inside", KubeconfigRef(path=str(inside)))

    async def ready() -> bool:
        caps = [c for n, c in dispatcher.capacities.items() if n not in (tokens or {})]
        return all(c.synced and c.health == "Ready" for c in caps)

    await eventually(ready, timeout=20, what="every worker synced and Ready")
    return rig


async def stop_rig(rig: Rig) -> None:
    await rig.dispatcher.stop()
    await rig.manager.close()
    for c in (*rig.workers.values(), *rig.inside.values()):
        await c.close()
    await rig.repo.engine.dispose()
    if rig.agents is not None:
        await rig.agents.stop()
    if rig.world is not None:
        await rig.world.stop()
