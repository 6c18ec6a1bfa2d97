"""Create manifests on a real cluster, as ``kubectl create`` would: the resource of each kind from discovery."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from ..kube.client import ClusterClient, KubeError, Resource

__all__ = ["Applier", "load_manifests"]

Obj = dict[str, Any]


def load_manifests(*paths: Path) -> list[Obj]:
    """Every object in the YAML files (multi-document), in order; empty documents are dropped."""
    out: list[Obj] = []
    for p in paths:
        for doc in yaml.safe_load_all(p.read_text()):
            if isinstance(doc, dict) and doc.get("kind"):
                out.append(doc)
    return out


class Applier:
    """Creates objects on one cluster; the REST resource of a kind comes from the server's discovery."""

    def __init__(self, client: ClusterClient) -> None:
        self.client = client
        self._resources: dict[tuple[str, str], Resource] = {}

    async def resource(self, api_version: str, kind: str, *, wait: float = 0.0) -> Resource:
        """The resource serving ``kind`` in ``api_version``; waits up to ``wait`` seconds for a new CRD to appear."""
        key = (api_version, kind)
        if key in self._resources:
            return self._resources[key]
        deadline = time.monotonic() + wait
        group, _, version = api_version.rpartition("/")
        path = f"/apis/{api_version}" if group else f"/api/{version}"
        while True:
            try:
                listing = await self.client.request("GET", path)
            except KubeError as exc:
                if not exc.not_found or time.monotonic() > deadline:
                    raise
                listing = {"resources": []}
            for r in listing.get("resources") or []:
                if "/" in r["name"]:
                    continue
                self._resources[(api_version, r["kind"])] = Resource(
                    group, version, r["name"], r["kind"], namespaced=bool(r.get("namespaced"))
                )
            if key in self._resources:
                return self._resources[key]
            if time.monotonic() > deadline:
                raise KubeError(404, "NotFound", f"{self.client.name} serves no {kind} in {api_version}")
            await asyncio.sleep(0.2)

    async def create(self, obj: Obj, *, wait: float = 0.0, exist_ok: bool = True) -> Obj:
        """Create ``obj``; an object that already exists is left as it is (``exist_ok``)."""
        res = await self.resource(obj["apiVersion"], obj["kind"], wait=wait)
        namespace = (obj.get("metadata") or {}).get("namespace") if res.namespaced else None
        if res.namespaced and not namespace:
            namespace = "default"
        try:
            return await self.client.create(res, namespace, obj, field_manager="kueue-dispatcher-rig")
        except KubeError as exc:
            if exist_ok and exc.already_exists:
                return obj
            raise

    async def create_all(self, objs: Iterable[Obj], *, wait: float = 0.0) -> None:
        for obj in objs:
            await self.create(obj, wait=wait)
