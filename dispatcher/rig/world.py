"""The real rig: a manager and N workers (real Kubernetes components), the files every command reads, and an admin
endpoint for faults — the same files and the same admin API as ``dispatcher sim up``, so that the dispatcher,
``drill``, the tests and kubectl take either rig."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from kubesim.topology import Topology, default_topology

from .addons import reconfigure_kueue
from .binaries import RigBinaries
from .cluster import ClusterPlan, RealCluster, rig_json
from .multikueue import DEFAULT_EXTERNAL_DISPATCHER, FLAVOURS, connect_multikueue, multikueue_config
from .process import ComponentError

__all__ = ["FAULT_MODES", "RealWorld", "RealWorldOptions"]

Obj = dict[str, Any]

FAULT_MODES = ("none", "stop", "down", "partition", "hang", "restart")


@dataclass(frozen=True)
class RealWorldOptions:
    workers: int = 2
    gpu_workers: int = 0
    run_seconds: float = 2.0
    admin_port: int = 0
    #: Real Kueue with MultiKueue on the manager, in this flavour (``all-at-once``, ``incremental``,
    #: ``external``); empty: the manager runs no Kueue.
    manager_kueue: str = ""
    #: MultiKueue's ``workerLostTimeout`` (set to the dispatcher's ``lostTimeout`` of the rig's clusters.yaml).
    worker_lost_timeout: float = 60.0
    #: The external dispatcher's name (Kueue's ``multiKueue.dispatcherName`` in the ``external`` flavour).
    dispatcher_name: str = DEFAULT_EXTERNAL_DISPATCHER


class RealWorld:
    def __init__(
        self, options: RealWorldOptions, directory: Path, binaries: RigBinaries, topology: Topology | None = None
    ) -> None:
        self.options = options
        self.directory = directory
        self.binaries = binaries
        self.topology = topology or default_topology()
        jobset = binaries.has("jobset")
        flavour = options.manager_kueue
        self.manager = RealCluster(
            ClusterPlan(
                "manager",
                worker=False,
                kueue=bool(flavour),
                multikueue=flavour,
                kueue_config=self._multikueue(flavour) if flavour else None,
            ),
            directory,
            binaries,
            self.topology,
            run_seconds=options.run_seconds,
        )
        self.workers = [
            RealCluster(
                ClusterPlan(
                    f"worker-{i}",
                    worker=True,
                    gpu=i > options.workers - options.gpu_workers,
                    kueue=True,
                    jobset=jobset,
                ),
                directory,
                binaries,
                self.topology,
                run_seconds=options.run_seconds,
            )
            for i in range(1, options.workers + 1)
        ]
        for c in self.clusters:
            c.on_change = self.write_state
        #: The manager's current MultiKueue flavour (switched by the admin endpoint), empty without Kueue there.
        self.flavour = flavour
        self.admin_url = ""
        self._admin: web.AppRunner | None = None

    @property
    def clusters(self) -> list[RealCluster]:
        return [self.manager, *self.workers]

    def cluster(self, name: str) -> RealCluster:
        for c in self.clusters:
            if c.name == name:
                return c
        raise KeyError(name)

    async def start(self) -> None:
        """Every cluster at once (each waits on its own components); on a failure everything started is stopped."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.write_state()  # rig.json from the first moment: `rig down` finds the pids of whatever has started
        results = await asyncio.gather(*(c.start() for c in self.clusters), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.stop()
            first = errors[0]
            if isinstance(first, ComponentError | FileNotFoundError | OSError):
                raise ComponentError(str(first)) from None
            raise first
        if self.options.manager_kueue:
            try:
                await connect_multikueue(self.manager, self.workers)
            except BaseException:
                await self.stop()
                raise
        await self._start_admin()
        await asyncio.to_thread(self.write_files)

    async def stop(self) -> None:
        if self._admin is not None:
            await self._admin.cleanup()
            self._admin = None
        results = await asyncio.gather(*(c.stop() for c in self.clusters), return_exceptions=True)
        with contextlib.suppress(FileNotFoundError):
            (self.directory / "rig.json").unlink()
        for r in results:
            if isinstance(r, BaseException):
                raise r

    def _multikueue(self, flavour: str) -> dict[str, Any]:
        """The manager Kueue's MultiKueue section and, with GPU workers, their resource transformations (HAMi's
        per-GPU memory and cores into per-pod totals): the manager must count a workload's GPU quota as the workers
        do, or its ClusterQueues gate on numbers the workers never see."""
        config = multikueue_config(
            flavour, worker_lost_timeout=self.options.worker_lost_timeout, external_name=self.options.dispatcher_name
        )
        resources = (self.topology.gpu_worker.kueue_config or {}).get("resources")
        if self.options.gpu_workers and resources:
            config["resources"] = resources
        return config

    async def set_multikueue(self, flavour: str) -> None:
        """Switch the manager's MultiKueue dispatcher (its Kueue restarts with the new Configuration)."""
        if not self.manager.plan.kueue:
            raise ValueError("the manager runs no Kueue: start the rig with --manager-kueue")
        if flavour not in FLAVOURS:
            raise ValueError(f"flavour must be one of {', '.join(FLAVOURS)}, got {flavour!r}")
        await reconfigure_kueue(self.manager, self._multikueue(flavour))
        self.flavour = flavour
        await asyncio.to_thread(self.write_files)

    # -- files -------------------------------------------------------------------------------------

    def write_files(self) -> None:
        """Kubeconfigs (admin, and the dispatcher's least-privilege ones), ``clusters.yaml`` and ``rig.json``."""
        for c in self.clusters:
            c.write_kubeconfigs()
        config: dict[str, Any] = {
            "manager": {"kubeconfig": str(self.manager.dispatcher_kubeconfig_path.resolve()), "context": "manager"},
            "workers": [
                {
                    "name": w.name,
                    "kubeconfig": str(w.dispatcher_kubeconfig_path.resolve()),
                    "context": w.name,
                    "labels": {"gpu": "true" if w.plan.gpu else "false", "zone": f"zone-{(i % 3) + 1}"},
                    # Each worker runs `dispatcher agent` (deploy/worker/agent/'s identity): exactly-once failover.
                    # MultiKueue's copies are its own: as its external dispatcher, failover is MultiKueue's.
                    "fencing": "none" if self.flavour == "external" else "agent",
                }
                for i, w in enumerate(self.workers)
            ],
            "policy": {
                "mode": "binpack",
                "admissionTimeout": "120s",
                "lostTimeout": f"{self.options.worker_lost_timeout:g}s",
                "fencing": {"leaseDuration": "20s", "grace": "10s"},
            },
        }
        if self.flavour == "external":
            # MultiKueue's external dispatcher: the dispatcher nominates workers, MultiKueue mirrors (README).
            config["mode"] = "kueue-external"
            config["kueueNative"] = {"dispatcherName": self.options.dispatcher_name}
        (self.directory / "clusters.yaml").write_text(
            "# Written by `dispatcher rig up --real`: the dispatcher's configuration for these real clusters.\n"
            "# It uses the dispatcher's own least-privilege credentials (<cluster>.dispatcher.kubeconfig);\n"
            "# <cluster>.kubeconfig is an administrator's, for kubectl.\n" + yaml.safe_dump(config, sort_keys=False)
        )
        self.write_state()

    def write_state(self) -> None:
        (self.directory / "rig.json").write_text(rig_json(self.clusters, self.admin_url, os.getpid()))

    # -- admin -------------------------------------------------------------------------------------

    async def _start_admin(self) -> None:
        app = web.Application()
        app.router.add_get("/clusters", self._admin_list)
        app.router.add_post("/clusters/{name}/fault", self._admin_fault)
        app.router.add_post("/clusters/{name}/components/{component}", self._admin_component)
        app.router.add_post("/multikueue", self._admin_multikueue)
        app.router.add_post("/clusters/{name}/kueue-config", self._admin_kueue_config)
        runner = web.AppRunner(app, access_log=None)
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
            [
                {"name": c.name, "url": c.url, "fault": c.fault, "running": c.procs["apiserver"].running}
                for c in self.clusters
            ]
        )

    async def _body(self, request: web.Request) -> Obj:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            raise web.HTTPBadRequest(text='{"error": "body must be JSON"}', content_type="application/json") from None
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(text='{"error": "body must be a JSON object"}', content_type="application/json")
        return body

    async def _admin_fault(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            cluster = self.cluster(name)
        except KeyError:
            return web.json_response({"error": f"no cluster named {name!r}"}, status=404)
        body = await self._body(request)
        mode = body.get("mode")
        if mode not in FAULT_MODES:
            return web.json_response(
                {"error": f"mode must be one of {', '.join(FAULT_MODES)} on the real rig, got {mode!r}"}, status=400
            )
        try:
            await cluster.set_fault(str(mode), downtime=float(body.get("downtime", 0.5)))
        except (TypeError, ValueError, ComponentError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        await asyncio.to_thread(self.write_state)
        return web.json_response({"name": name, "fault": cluster.fault})

    async def _admin_component(self, request: web.Request) -> web.Response:
        name, component = request.match_info["name"], request.match_info["component"]
        try:
            cluster = self.cluster(name)
        except KeyError:
            return web.json_response({"error": f"no cluster named {name!r}"}, status=404)
        body = await self._body(request)
        try:
            await cluster.component(component, str(body.get("action")))
        except KeyError:
            return web.json_response({"error": f"{name} runs no component {component!r}"}, status=404)
        except (ValueError, ComponentError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        await asyncio.to_thread(self.write_state)
        return web.json_response({"name": name, "component": component, "running": cluster.procs[component].running})

    async def _admin_kueue_config(self, request: web.Request) -> web.Response:
        """``POST /clusters/<worker>/kueue-config {"extra": {...}}``: restart the worker's Kueue with ``extra`` merged
        into its Configuration, on top of what its topology gives it (e.g. ``fairSharing``; ``{}``: back to that)."""
        name = request.match_info["name"]
        try:
            cluster = self.cluster(name)
        except KeyError:
            return web.json_response({"error": f"no cluster named {name!r}"}, status=404)
        if not cluster.plan.worker or not cluster.plan.kueue:
            return web.json_response({"error": f"{name} is not a worker running Kueue"}, status=400)
        body = await self._body(request)
        extra = body.get("extra")
        if not isinstance(extra, dict):
            return web.json_response({"error": "extra must be a JSON object"}, status=400)
        worker = self.topology.gpu_worker if cluster.plan.gpu else self.topology.cpu_worker
        try:
            await reconfigure_kueue(cluster, {**(worker.kueue_config or {}), **extra})
        except (ValueError, ComponentError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"name": name, "extra": extra})

    async def _admin_multikueue(self, request: web.Request) -> web.Response:
        """``POST /multikueue {"flavour": "all-at-once|incremental|external"}``: the manager's dispatcher."""
        body = await self._body(request)
        try:
            await self.set_multikueue(str(body.get("flavour")))
        except (ValueError, ComponentError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        await asyncio.to_thread(self.write_state)
        return web.json_response({"flavour": self.flavour})
