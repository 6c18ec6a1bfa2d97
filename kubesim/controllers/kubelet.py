"""A kwok-like kubelet for every node: bound pods start, run for their scripted time, and exit.

A pod runs for ``sim.dispatcher.io/run-seconds`` (default :data:`DEFAULT_RUN_SECONDS`) and exits with
``sim.dispatcher.io/exit-code`` (default 0). A pod being deleted gracefully is removed at once, as
a kubelet that stops its containers immediately would do. Nodes are kept Ready.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable
from typing import Any

from ..api import Api, now_rfc3339
from ..constants import DEFAULT_RUN_SECONDS, EXIT_CODE, RUN_SECONDS
from ..store import StoreEvent
from .base import Controller

__all__ = ["Kubelet"]

Obj = dict[str, Any]


def _conditions(ready: bool, now: str) -> list[Obj]:
    status = "True" if ready else "False"
    return [
        {"type": "PodReadyToStartContainers", "status": "True", "lastProbeTime": None, "lastTransitionTime": now},
        {"type": "Initialized", "status": "True", "lastProbeTime": None, "lastTransitionTime": now},
        {
            "type": "Ready",
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": now,
            **({} if ready else {"reason": "PodCompleted"}),
        },
        {
            "type": "ContainersReady",
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": now,
            **({} if ready else {"reason": "PodCompleted"}),
        },
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now},
    ]


class Kubelet(Controller):
    name = "kubelet"
    resources = ("pods",)

    def __init__(self, api: Api, *, default_run_seconds: float = DEFAULT_RUN_SECONDS) -> None:
        super().__init__(api)
        self.default_run_seconds = default_run_seconds
        self._ip = 0
        self._started: dict[str, float] = {}

    def keys_for(self, event: StoreEvent) -> Iterable[Hashable]:
        if event.type == "DELETED":
            self._started.pop(event.obj["metadata"].get("uid", ""), None)
            return []
        spec = event.obj.get("spec") or {}
        if not spec.get("nodeName"):
            return []
        phase = (event.obj.get("status") or {}).get("phase")
        meta = event.obj["metadata"]
        if phase in ("Succeeded", "Failed") and not meta.get("deletionTimestamp"):
            return []
        return [("pods", meta.get("namespace", ""), meta["name"])]

    def _next_ip(self) -> str:
        self._ip += 1
        return f"10.244.{(self._ip // 250) % 250}.{self._ip % 250 + 2}"

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        _, namespace, name = key
        pod = self.api.store.get("pods", namespace, name)
        if pod is None:
            return
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            self.api.finalize_pod(namespace, name)
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        status = pod.get("status") or {}
        phase = status.get("phase", "Pending")
        annotations = meta.get("annotations") or {}
        loop = asyncio.get_running_loop()
        if phase == "Pending":
            now = now_rfc3339()
            containers = (pod.get("spec") or {}).get("containers") or []
            new = dict(pod)
            new["status"] = {
                **status,
                "phase": "Running",
                "conditions": _conditions(True, now),
                "hostIP": "172.18.0.2",
                "hostIPs": [{"ip": "172.18.0.2"}],
                "podIP": (ip := self._next_ip()),
                "podIPs": [{"ip": ip}],
                "startTime": now,
                "containerStatuses": [
                    {
                        "name": c.get("name"),
                        "image": c.get("image"),
                        "imageID": f"sim://{c.get('image')}",
                        "containerID": f"containerd://{meta['uid'][:8]}{i}",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": now}},
                        "lastState": {},
                    }
                    for i, c in enumerate(containers)
                ],
            }
            self.client.update_status(new)
            self._started[meta["uid"]] = loop.time()
            self.requeue_after(key, self._run_seconds(annotations))
            return
        if phase == "Running":
            started = self._started.get(meta["uid"])
            if started is None:
                self._started[meta["uid"]] = started = loop.time()
            left = started + self._run_seconds(annotations) - loop.time()
            if left > 0:
                self.requeue_after(key, left)
                return
            try:
                code = int(annotations.get(EXIT_CODE, "0"))
            except ValueError:
                code = 1
            now = now_rfc3339()
            new = dict(pod)
            new["status"] = {
                **status,
                "phase": "Succeeded" if code == 0 else "Failed",
                "conditions": _conditions(False, now),
                "containerStatuses": [
                    {
                        **cs,
                        "ready": False,
                        "started": False,
                        "state": {
                            "terminated": {
                                "exitCode": code,
                                "reason": "Completed" if code == 0 else "Error",
                                "startedAt": (cs.get("state") or {}).get("running", {}).get("startedAt", now),
                                "finishedAt": now,
                                "containerID": cs.get("containerID"),
                            }
                        },
                    }
                    for cs in status.get("containerStatuses") or []
                ],
            }
            self.client.update_status(new)
            self._started.pop(meta["uid"], None)

    def _run_seconds(self, annotations: dict[str, str]) -> float:
        try:
            return float(annotations.get(RUN_SECONDS, self.default_run_seconds))
        except ValueError:
            return self.default_run_seconds
