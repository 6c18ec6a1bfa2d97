"""kwok on a rig worker: fake nodes, and the pod lifecycle the simulator's annotations script.

kwok's own stages (from the kwok module the binary is built from) initialise nodes, keep their leases renewed
and take pods to Running and through deletion; their random delays of up to 5 s are cut to a fixed 100 ms so
that tests wait on work, not on dice. The stage that ends a pod is ours: a container runs for
``sim.dispatcher.io/run-seconds`` (default from ``rig up --run-seconds``) and exits with
``sim.dispatcher.io/exit-code`` (default 0), so the real Job controller sees the pods succeed or fail and
completes or fails the Job by its own rules, exactly as on the simulated rig.
"""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path
from typing import Any

from kubesim.topology import GpuSpec, NodeGroup

from .apply import load_manifests

__all__ = ["KWOK_STAGES", "node_manifests", "stages"]

Obj = dict[str, Any]

KWOK_STAGES = (
    "node-initialize",
    "node-heartbeat-with-lease",
    "pod-create",
    "pod-init-container-running",
    "pod-init-container-completed",
    "pod-ready",
    "pod-delete",
)
RUN_SECONDS = "sim.dispatcher.io/run-seconds"
EXIT_CODE = "sim.dispatcher.io/exit-code"
#: HAMi's device plugin's node annotations (../shared/hami-rules.md).
HAMI_REGISTER = "hami.io/node-nvidia-register"
HAMI_HANDSHAKE = "hami.io/node-handshake"

_POD_EXIT = """{{ $now := Now }}
{{ $code := "0" }}
{{ with .metadata.annotations }}{{ with index . "%(exit)s" }}{{ $code = . }}{{ end }}{{ end }}
containerStatuses:
{{ range $index, $item := .spec.containers }}
- image: {{ $item.image | Quote }}
  name: {{ $item.name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: {{ $code }}
      finishedAt: {{ $now | Quote }}
      reason: {{ if eq $code "0" }}Completed{{ else }}Error{{ end }}
      startedAt: {{ $now | Quote }}
{{ end }}
phase: {{ if eq $code "0" }}Succeeded{{ else }}Failed{{ end }}
"""


def _exit_stage(default_run_seconds: float) -> Obj:
    """Running and Ready pods end after their run time, with their exit code (any owner, not only Jobs)."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "pod-exit"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                    {
                        "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
                        "operator": "In",
                        "values": ["True"],
                    },
                ]
            },
            "delay": {
                "durationMilliseconds": int(default_run_seconds * 1000),
                "durationFrom": {"jq": {"expression": f'.metadata.annotations["{RUN_SECONDS}"] // empty | . + "s"'}},
            },
            "next": {"statusTemplate": _POD_EXIT % {"exit": EXIT_CODE}},
        },
    }


def stages(manifests: Path, *, default_run_seconds: float) -> list[Obj]:
    """kwok's stages with fixed short delays, and the pod-exit stage."""
    out = []
    for loaded in load_manifests(*(manifests / f"{name}.yaml" for name in KWOK_STAGES)):
        stage = copy.deepcopy(loaded)
        delay = stage["spec"].get("delay")
        if delay is not None and stage["metadata"]["name"] != "node-heartbeat-with-lease":
            delay.pop("jitterDurationMilliseconds", None)
            delay.pop("jitterDurationFrom", None)
            delay["durationMilliseconds"] = 100
        out.append(stage)
    out.append(_exit_stage(default_run_seconds))
    return out


def _hami_annotations(node: str, gpus: GpuSpec) -> dict[str, str]:
    """What HAMi's device plugin registers for the node's GPUs (HAMi is not built for the rig: see the README)."""
    from kubesim.controllers.hami import gpu_uuid

    from ..placement.hami.nodecodec import encode_node_devices, register_device

    half = -(-gpus.count // 2)
    devices = [
        register_device(
            gpu_uuid(node, i),
            i,
            gpus.memory_mib,
            gpus.type,
            numa=(i // half if gpus.count > 1 else 0),
            split_count=gpus.split,
        )
        for i in range(gpus.count)
    ]
    devices = [d if d.devcore == gpus.cores else _with_cores(d, gpus.cores) for d in devices]
    now = dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    return {HAMI_REGISTER: encode_node_devices(devices), HAMI_HANDSHAKE: f"Requesting_{now}"}


def _with_cores(device: Any, cores: int) -> Any:
    from dataclasses import replace

    return replace(device, devcore=cores)


def node_manifests(cluster: str, groups: list[NodeGroup]) -> list[Obj]:
    """The cluster's fake nodes, named as on the simulated rig (``<cluster>-<prefix>-<i>``), with their status:
    a Node created with a status keeps it, and kwok (label ``type=kwok``) takes them over."""
    out = []
    for group in groups:
        for i in range(1, group.count + 1):
            name = f"{cluster}-{group.prefix}-{i}"
            capacity = {"cpu": group.cpu, "memory": group.memory, "pods": str(group.pods), "ephemeral-storage": "100Gi"}
            annotations = {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}
            if group.gpus is not None:
                capacity["nvidia.com/gpu"] = str(group.gpus.count * group.gpus.split)
                # Without HAMi's scheduler extender nothing tells kube-scheduler to ignore HAMi's per-container
                # memory and core requests, so the node advertises them as extended resources it can count.
                capacity["nvidia.com/gpumem"] = str(group.gpus.count * group.gpus.memory_mib)
                capacity["nvidia.com/gpucores"] = str(group.gpus.count * group.gpus.cores)
                annotations.update(_hami_annotations(name, group.gpus))
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **group.labels_of(i),
            }
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels, "annotations": annotations},
                    "spec": {"taints": list(group.taints)} if group.taints else {},
                    "status": {
                        "capacity": capacity,
                        "allocatable": dict(capacity),
                        "nodeInfo": {
                            "kubeletVersion": "fake",
                            "operatingSystem": "linux",
                            "architecture": "amd64",
                        },
                    },
                }
            )
    return out
