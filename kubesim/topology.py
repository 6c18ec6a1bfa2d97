"""What simulated clusters start with: nodes (some with HAMi GPUs) and Kueue objects.

The defaults (documented in the README and printed by ``dispatcher sim defaults``):

- every cluster: namespaces ``default``, ``team-a``, ``team-b``;
- every worker: 4 nodes of 8 CPU / 32Gi, ResourceFlavor ``default-flavor``, three ClusterQueues
  ``default``, ``team-a``, ``team-b`` in cohort ``org`` with 8 CPU / 32Gi nominal quota each, and a
  LocalQueue ``user-queue`` in each namespace pointing at the ClusterQueue of the same name;
- a Kueue ``Topology`` ``default`` (levels block, rack, hostname) over the nodes' topology labels: the CPU nodes
  form block ``b1`` with racks ``r1`` (nodes 1-2) and ``r2`` (nodes 3-4), GPU nodes block ``b2`` rack ``r3``, for
  TAS flavors to name (none of the default flavors does);
- GPU workers also: 2 nodes of 32 CPU / 128Gi with 4 NVIDIA A100 40GB each, registered by HAMi
  (split count 10, 40960 MiB, 100 cores per GPU), a flavor ``hami-vgpu`` for them, GPU quota in the
  ClusterQueues (``nvidia.com/gpu`` vGPU slots and the ``nvidia.com/total-gpumem`` /
  ``nvidia.com/total-gpucores`` totals that Kueue's documented HAMi resource transformation yields),
  and that Kueue Configuration in ``kueue-system/kueue-manager-config``.

A YAML file (``--topology``) can replace any part: see :func:`load_topology`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["GpuSpec", "NodeGroup", "Topology", "WorkerClass", "default_topology", "load_topology"]

Obj = dict[str, Any]

KUEUE_CONFIG_NAMESPACE = "kueue-system"
KUEUE_CONFIG_NAME = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"

#: The topology the default nodes describe (Kueue TAS): its name and its level labels, highest first.
TOPOLOGY_NAME = "default"
BLOCK_LABEL = "topology.kueue-dispatcher.io/block"
RACK_LABEL = "topology.kueue-dispatcher.io/rack"
HOSTNAME_LABEL = "kubernetes.io/hostname"
TOPOLOGY_LEVELS = (BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL)


@dataclass(frozen=True)
class GpuSpec:
    count: int = 4
    type: str = "NVIDIA-A100-SXM4-40GB"
    memory_mib: int = 40960
    split: int = 10
    cores: int = 100


@dataclass(frozen=True)
class NodeGroup:
    prefix: str
    count: int
    cpu: str = "8"
    memory: str = "32Gi"
    pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Obj] = field(default_factory=list)
    gpus: GpuSpec | None = None
    #: Labels of node 1, 2, ... on top of ``labels`` (e.g. each node's rack in a topology).
    per_node_labels: tuple[dict[str, str], ...] = ()

    def labels_of(self, index: int) -> dict[str, str]:
        """The labels of node ``index`` (from 1): the group's, then its own."""
        own = self.per_node_labels[index - 1] if 0 < index <= len(self.per_node_labels) else {}
        return {**self.labels, **own}


@dataclass(frozen=True)
class WorkerClass:
    nodes: list[NodeGroup]
    objects: list[Obj]
    kueue_config: Obj | None = None


@dataclass(frozen=True)
class Topology:
    namespaces: list[str]
    cpu_worker: WorkerClass
    gpu_worker: WorkerClass
    manager_objects: list[Obj] = field(default_factory=list)


def _flavor(name: str, labels: dict[str, str] | None = None) -> Obj:
    spec: Obj = {}
    if labels:
        spec["nodeLabels"] = labels
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def _cluster_queue(name: str, *, gpu: bool) -> Obj:
    groups: list[Obj] = [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": "default-flavor",
                    "resources": [{"name": "cpu", "nominalQuota": "8"}, {"name": "memory", "nominalQuota": "32Gi"}],
                }
            ],
        }
    ]
    if gpu:
        groups.append(
            {
                "coveredResources": ["nvidia.com/gpu", "nvidia.com/total-gpumem", "nvidia.com/total-gpucores"],
                "flavors": [
                    {
                        "name": "hami-vgpu",
                        "resources": [
                            {"name": "nvidia.com/gpu", "nominalQuota": "24"},
                            {"name": "nvidia.com/total-gpumem", "nominalQuota": "100000"},
                            {"name": "nvidia.com/total-gpucores", "nominalQuota": "250"},
                        ],
                    }
                ],
            }
        )
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": "org",
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": groups,
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        },
    }


def _local_queue(namespace: str, cluster_queue: str) -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "user-queue", "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def _topology() -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": TOPOLOGY_NAME},
        "spec": {"levels": [{"nodeLabel": label} for label in TOPOLOGY_LEVELS]},
    }


def _racks(block: str, *racks: str) -> tuple[dict[str, str], ...]:
    return tuple({BLOCK_LABEL: block, RACK_LABEL: rack} for rack in racks)


def _priority_classes() -> list[Obj]:
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
            "description": desc,
        }
        for name, value, desc in (("low", 100, "Batch work that can wait"), ("high", 1000, "Urgent work"))
    ]


HAMI_KUEUE_CONFIG: Obj = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "resources": {
        "transformations": [
            {
                "input": "nvidia.com/gpucores",
                "strategy": "Replace",
                "multiplyBy": "nvidia.com/gpu",
                "outputs": {"nvidia.com/total-gpucores": "1"},
            },
            {
                "input": "nvidia.com/gpumem",
                "strategy": "Replace",
                "multiplyBy": "nvidia.com/gpu",
                "outputs": {"nvidia.com/total-gpumem": "1"},
            },
        ]
    },
}


def default_topology() -> Topology:
    namespaces = ["default", "team-a", "team-b"]
    queues = {"default": "default", "team-a": "team-a", "team-b": "team-b"}

    def objects(gpu: bool) -> list[Obj]:
        objs = [_flavor("default-flavor")]
        if gpu:
            objs.append(_flavor("hami-vgpu", {"hami.io/vgpu": "true"}))
        objs += [_cluster_queue(cq, gpu=gpu) for cq in sorted(set(queues.values()))]
        objs += [_local_queue(ns, cq) for ns, cq in queues.items()]
        objs += _priority_classes()
        objs.append(_topology())
        return objs

    cpu_nodes = [
        NodeGroup(prefix="cpu", count=4, cpu="8", memory="32Gi", per_node_labels=_racks("b1", "r1", "r1", "r2", "r2"))
    ]
    gpu_nodes = [
        *cpu_nodes,
        NodeGroup(
            prefix="gpu",
            count=2,
            cpu="32",
            memory="128Gi",
            labels={"hami.io/vgpu": "true", "nvidia.com/gpu.present": "true", "gpu": "on"},
            gpus=GpuSpec(),
            per_node_labels=_racks("b2", "r3", "r3"),
        ),
    ]
    return Topology(
        namespaces=namespaces,
        cpu_worker=WorkerClass(nodes=cpu_nodes, objects=objects(False)),
        gpu_worker=WorkerClass(nodes=gpu_nodes, objects=objects(True), kueue_config=HAMI_KUEUE_CONFIG),
        manager_objects=_priority_classes(),
    )


class TopologyError(ValueError):
    """A topology file with a bad key; the message names the key path."""


def _node_groups(raw: Any, path: str) -> list[NodeGroup]:
    if not isinstance(raw, list):
        raise TopologyError(f"{path}: expected a list of node groups, got {type(raw).__name__}")
    groups = []
    for i, g in enumerate(raw):
        p = f"{path}[{i}]"
        if not isinstance(g, dict):
            raise TopologyError(f"{p}: expected a mapping")
        unknown = set(g) - {"prefix", "count", "cpu", "memory", "pods", "labels", "taints", "gpus", "perNodeLabels"}
        if unknown:
            raise TopologyError(f"{p}.{sorted(unknown)[0]}: unknown key")
        gpus = None
        if g.get("gpus") is not None:
            gr = g["gpus"]
            if not isinstance(gr, dict):
                raise TopologyError(f"{p}.gpus: expected a mapping")
            bad = set(gr) - {"count", "type", "memoryMiB", "split", "cores"}
            if bad:
                raise TopologyError(f"{p}.gpus.{sorted(bad)[0]}: unknown key")
            gpus = GpuSpec(
                count=_int(gr, "count", 4, f"{p}.gpus"),
                type=str(gr.get("type", "NVIDIA-A100-SXM4-40GB")),
                memory_mib=_int(gr, "memoryMiB", 40960, f"{p}.gpus"),
                split=_int(gr, "split", 10, f"{p}.gpus"),
                cores=_int(gr, "cores", 100, f"{p}.gpus"),
            )
        labels = g.get("labels") or {}
        if not isinstance(labels, dict):
            raise TopologyError(f"{p}.labels: expected a mapping of label names to values")
        taints = g.get("taints") or []
        if not isinstance(taints, list) or not all(isinstance(t, dict) for t in taints):
            raise TopologyError(f"{p}.taints: expected a list of taints")
        per_node = g.get("perNodeLabels") or []
        if not isinstance(per_node, list) or not all(isinstance(x, dict) for x in per_node):
            raise TopologyError(f"{p}.perNodeLabels: expected a list of label mappings (node 1, 2, ...)")
        groups.append(
            NodeGroup(
                prefix=str(g.get("prefix", "node")),
                count=_int(g, "count", 1, p),
                cpu=_quantity(g, "cpu", "8", p),
                memory=_quantity(g, "memory", "32Gi", p),
                pods=_int(g, "pods", 110, p),
                labels={str(k): str(v) for k, v in labels.items()},
                taints=list(taints),
                gpus=gpus,
                per_node_labels=tuple({str(k): str(v) for k, v in x.items()} for x in per_node),
            )
        )
    return groups


def _int(raw: Obj, key: str, default: int, path: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TopologyError(f"{path}.{key}: expected a non-negative integer, got {value!r}")
    return value


def _quantity(raw: Obj, key: str, default: str, path: str) -> str:
    from kubecommon.quantity import QuantityError, parse_quantity

    value = raw.get(key, default)
    try:
        if parse_quantity(value) < 0:
            raise QuantityError("must be non-negative")
    except QuantityError as exc:
        raise TopologyError(f"{path}.{key}: {value!r} is not a valid quantity ({exc})") from None
    return str(value)


def load_topology(path: Path) -> Topology:
    """Read a topology file; keys left out keep their defaults.

    ```yaml
    namespaces: [default, team-a]
    cpuWorker:
      nodes: [{prefix: cpu, count: 2, cpu: "16", memory: 64Gi,
               perNodeLabels: [{topology.kueue-dispatcher.io/rack: r1}, {topology.kueue-dispatcher.io/rack: r2}]}]
      objects: [ ...manifests... ]     # replaces the default Kueue objects
    gpuWorker:
      nodes: [{prefix: gpu, count: 1, cpu: "32", memory: 128Gi, labels: {hami.io/vgpu: "true"},
               gpus: {count: 8, type: NVIDIA-H100, memoryMiB: 81920, split: 10}}]
      kueueConfig: { ...Kueue Configuration... }
    managerObjects: [ ... ]
    ```
    """
    base = default_topology()
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise TopologyError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise TopologyError(f"{path}: expected a mapping at the top level")
    unknown = set(raw) - {"namespaces", "cpuWorker", "gpuWorker", "managerObjects"}
    if unknown:
        raise TopologyError(
            f"{sorted(unknown)[0]}: unknown key (expected namespaces, cpuWorker, gpuWorker, managerObjects)"
        )

    def worker(key: str, default: WorkerClass) -> WorkerClass:
        w = raw.get(key)
        if w is None:
            return default
        if not isinstance(w, dict):
            raise TopologyError(f"{key}: expected a mapping")
        bad = set(w) - {"nodes", "objects", "kueueConfig"}
        if bad:
            raise TopologyError(f"{key}.{sorted(bad)[0]}: unknown key")
        objects = w.get("objects", default.objects)
        if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
            raise TopologyError(f"{key}.objects: expected a list of manifests")
        return WorkerClass(
            nodes=_node_groups(w["nodes"], f"{key}.nodes") if "nodes" in w else default.nodes,
            objects=objects,
            kueue_config=w.get("kueueConfig", default.kueue_config),
        )

    namespaces = raw.get("namespaces", base.namespaces)
    if not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces):
        raise TopologyError("namespaces: expected a list of names")
    return Topology(
        namespaces=namespaces,
        cpu_worker=worker("cpuWorker", base.cpu_worker),
        gpu_worker=worker("gpuWorker", base.gpu_worker),
        manager_objects=list(raw.get("managerObjects", base.manager_objects)),
    )
