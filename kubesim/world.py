"""A set of simulated clusters: one manager and N workers, their kubeconfigs, a ``clusters.yaml``,
and a small admin endpoint for faults.

Admin endpoint (no auth, 127.0.0.1 only):

- ``GET  /clusters``: names, URLs, fault modes.
- ``POST /clusters/{name}/fault`` with ``{"mode": "stop|partition|slow|flaky|restart|none",
  "latency": seconds, "errorRate": 0..1, "downtime": seconds}``.
- ``POST /clusters/{name}/compact``: forget watch history (old resourceVersions answer 410).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from .cluster import ClusterOptions, SimCluster
from .errors import ApiError
from .faults import FAULT_MODES
from .http.common import BOOKMARK_INTERVAL
from .topology import Topology, TopologyError, WorkerClass, default_topology

__all__ = ["SimWorld", "WorldOptions", "worker_entry", "write_clusters_yaml", "write_private"]

Obj = dict[str, Any]


@dataclass
class WorldOptions:
    workers: int = 3
    gpu_workers: int = 1
    default_run_seconds: float = 2.0
    manager_kueue: bool = False
    bookmark_interval: float = BOOKMARK_INTERVAL
    admin_port: int = 0
    #: Serve the clusters over HTTPS with self-signed certificates (kubectl needs it for bearer tokens).
    tls: bool = True
    #: Cluster name -> API groups whose CRDs it lacks (``{"worker-1": ("ray.io",)}``: no KubeRay there).
    without_groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: One shard of a world spread over processes (:mod:`kubesim.shards`): the numbers of the workers this
    #: process runs (None: all of them) and whether it runs the manager. Names, GPU nodes and labels follow
    #: the worker's number in the whole world.
    worker_numbers: tuple[int, ...] | None = None
    with_manager: bool = True


@contextlib.contextmanager
def _refused_as_topology_error(cluster: SimCluster, path: str, obj: Obj | None = None) -> Iterator[None]:
    """An object of the topology that the simulated API refuses (or that is not a manifest at all) becomes a
    :class:`TopologyError` naming its key path, its kind and name, and the server's message."""
    try:
        yield
    except (ApiError, KeyError, TypeError, ValueError) as exc:
        what = ""
        if obj is not None:
            what = f" ({obj.get('kind', '?')} {(obj.get('metadata') or {}).get('name', '?')!r})"
        if isinstance(exc, ApiError):
            message = exc.message
        elif isinstance(exc, KeyError) and exc.args == ("name",):
            message = "metadata.name: Required value"
        elif isinstance(exc, KeyError) and obj is not None:
            message = f"no resource of kind {obj.get('kind')!r} in apiVersion {obj.get('apiVersion')!r}"
        else:
            message = f"not a valid manifest: {type(exc).__name__}: {exc}"
        raise TopologyError(f"{path}{what}: refused by {cluster.name}: {message}") from None


def worker_entry(directory: Path, name: str, gpu: bool) -> Obj:
    """A worker's entry in ``clusters.yaml`` (its zone label follows its number: worker-1 in zone-1, ...)."""
    number = int(name.rsplit("-", 1)[1])
    return {
        "name": name,
        "kubeconfig": str((directory / f"{name}.kubeconfig").resolve()),
        "context": name,
        "labels": {"gpu": "true" if gpu else "false", "zone": f"zone-{((number - 1) % 3) + 1}"},
    }


def write_clusters_yaml(directory: Path, workers: list[tuple[str, bool]], *, fencing: bool) -> None:
    """The dispatcher's ``clusters.yaml`` for a simulated world: the manager and ``workers`` ((name, has GPUs),
    in order), their kubeconfigs in ``directory``; ``fencing``: every worker runs a fencing agent."""
    config: Obj = {
        "manager": {"kubeconfig": str((directory / "manager.kubeconfig").resolve()), "context": "manager"},
        "workers": [worker_entry(directory, name, gpu) for name, gpu in workers],
        "policy": {"mode": "binpack", "admissionTimeout": "120s", "lostTimeout": "60s"},
    }
    if fencing:
        for worker in config["workers"]:
            worker["fencing"] = "agent"
        config["policy"]["fencing"] = {"leaseDuration": "20s", "grace": "10s"}
    (directory / "clusters.yaml").write_text(
        "# Written by `dispatcher sim up`: the dispatcher's configuration for these simulated clusters.\n"
        + yaml.safe_dump(config, sort_keys=False)
    )


def write_private(path: Path, doc: Obj) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)


class SimWorld:
    """A manager cluster and worker clusters, started and stopped together."""

    def __init__(self, options: WorldOptions | None = None, topology: Topology | None = None) -> None:
        self.options = options or WorldOptions()
        self.topology = topology or default_topology()
        if self.options.gpu_workers > self.options.workers:
            raise ValueError(
                f"--gpu-workers ({self.options.gpu_workers}) cannot exceed --workers ({self.options.workers})"
            )
        opts = self.options
        #: None (typed as a cluster for the many callers of whole worlds) in a shard without the manager.
        self.manager: SimCluster = None  # type: ignore[assignment]
        if opts.with_manager:
            self.manager = SimCluster(
                "manager",
                ClusterOptions(
                    kueue=opts.manager_kueue,
                    hami=False,
                    jobs=True,
                    default_run_seconds=opts.default_run_seconds,
                    bookmark_interval=opts.bookmark_interval,
                    tls=opts.tls,
                    without_groups=opts.without_groups.get("manager", ()),
                ),
            )
        self.workers: list[SimCluster] = []
        first_gpu = opts.workers - opts.gpu_workers + 1
        numbers = opts.worker_numbers if opts.worker_numbers is not None else range(1, opts.workers + 1)
        for i in numbers:
            gpu = i >= first_gpu
            self.workers.append(
                SimCluster(
                    f"worker-{i}",
                    ClusterOptions(
                        kueue=True,
                        hami=gpu,
                        default_run_seconds=opts.default_run_seconds,
                        bookmark_interval=opts.bookmark_interval,
                        tls=opts.tls,
                        without_groups=opts.without_groups.get(f"worker-{i}", ()),
                    ),
                )
            )
        self._admin: web.AppRunner | None = None
        self.admin_url = ""
        self._populate()

    @property
    def clusters(self) -> list[SimCluster]:
        return [self.manager, *self.workers] if self.manager is not None else list(self.workers)

    def cluster(self, name: str) -> SimCluster:
        for c in self.clusters:
            if c.name == name:
                return c
        raise KeyError(name)

    def _populate(self) -> None:
        """Create the topology's namespaces, nodes and objects. An object the API refuses raises
        :class:`TopologyError` naming its place in the topology file and the server's message."""
        topo = self.topology
        for c in self.clusters:
            for i, ns in enumerate(topo.namespaces):
                with _refused_as_topology_error(c, f"namespaces[{i}]"):
                    c.ensure_namespace(ns)
        for i, obj in enumerate(topo.manager_objects if self.manager is not None else ()):
            with _refused_as_topology_error(self.manager, f"managerObjects[{i}]", obj):
                self.manager.apply(obj)
        for w in self.workers:
            key = "gpuWorker" if w.options.hami else "cpuWorker"
            cls: WorkerClass = topo.gpu_worker if w.options.hami else topo.cpu_worker
            if cls.kueue_config:
                with _refused_as_topology_error(w, f"{key}.kueueConfig"):
                    w.set_kueue_config(cls.kueue_config)
            for group in cls.nodes:
                w.add_nodes(group)
            for i, obj in enumerate(cls.objects):
                with _refused_as_topology_error(w, f"{key}.objects[{i}]", obj):
                    w.apply(obj)

    async def start(self) -> None:
        for c in self.clusters:
            await c.start()
        await self._start_admin()

    async def stop(self) -> None:
        """Stop every cluster, all at once: each waits up to its server's shutdown timeout for open
        connections, which one after the other added up to a minute with a hundred workers."""
        if self._admin is not None:
            await self._admin.cleanup()
            self._admin = None
        await asyncio.gather(*(c.stop() for c in self.clusters))

    # -- admin -----------------------------------------------------------------------------------------

    async def _start_admin(self) -> None:
        app = web.Application()
        app.router.add_get("/clusters", self._admin_list)
        app.router.add_post("/clusters/{name}/fault", self._admin_fault)
        app.router.add_post("/clusters/{name}/compact", self._admin_compact)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self.options.admin_port)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.admin_url = f"http://127.0.0.1:{port}"
        self._admin = runner

    async def _admin_list(self, request: web.Request) -> web.Response:
        return web.json_response(
            [{"name": c.name, "url": c.url, "fault": c.faults.mode, "running": c.server.running} for c in self.clusters]
        )

    async def _admin_fault(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            cluster = self.cluster(name)
        except KeyError:
            return web.json_response({"error": f"no cluster named {name!r}"}, status=404)
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"error": 'body must be JSON: {"mode": ...}'}, status=400)
        mode = body.get("mode")
        if mode not in FAULT_MODES:
            return web.json_response(
                {"error": f"mode must be one of {', '.join(FAULT_MODES)}, got {mode!r}"}, status=400
            )
        try:
            await cluster.set_fault(
                mode,
                latency=float(body.get("latency", 0.0)),
                error_rate=float(body.get("errorRate", 0.0)),
                downtime=float(body.get("downtime", 0.5)),
            )
        except (TypeError, ValueError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"name": name, "fault": cluster.faults.mode})

    async def _admin_compact(self, request: web.Request) -> web.Response:
        try:
            cluster = self.cluster(request.match_info["name"])
        except KeyError:
            return web.json_response({"error": "no such cluster"}, status=404)
        cluster.compact()
        return web.json_response({"name": cluster.name, "compactedResourceVersion": cluster.store.compacted_rv})

    # -- files ---------------------------------------------------------------------------------------

    def write_files(self, directory: Path, *, fencing: bool = False) -> None:
        """Kubeconfigs (mode 0600: they hold tokens), ``clusters.yaml`` and ``sim.json``. Each worker also gets
        ``<worker>.agent.kubeconfig``, the credential of a fencing agent inside it (a ``partition`` does not cut it
        off); ``fencing``: clusters.yaml declares ``fencing: agent`` for every worker (whoever starts the world runs
        the agents: ``dispatcher sim up`` does)."""
        directory.mkdir(parents=True, exist_ok=True)
        for c in self.clusters:
            write_private(directory / f"{c.name}.kubeconfig", c.kubeconfig())
        for w in self.workers:
            write_private(directory / f"{w.name}.agent.kubeconfig", w.agent_kubeconfig())
            # From inside the worker (what `rig up --real` writes too): drills look into a partitioned worker.
            write_private(directory / f"{w.name}.inside.kubeconfig", w.agent_kubeconfig())
        write_clusters_yaml(directory, [(w.name, w.options.hami) for w in self.workers], fencing=fencing)
        (directory / "sim.json").write_text(
            json.dumps({"admin": self.admin_url, "clusters": [c.describe() for c in self.clusters]}, indent=2)
        )
