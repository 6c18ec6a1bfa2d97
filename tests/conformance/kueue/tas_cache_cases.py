"""The cases of Kueue v0.17.0's ``pkg/cache/scheduler/tas_cache_test.go`` ``TestFindTopologyAssignments``, as data.

Transcribed from the Go test table (nodes with their labels, allocatable, taints and readiness; non-TAS pods; the
topology levels and the flavor's node labels; per pod set its topology request, count, per-pod requests in Kueue
units, node selector, tolerations and group, and the expected assignment ``(levels, [(values, count), ...])`` or
failure message). Kueue's case names are kept verbatim. ``test_tas_cache.py`` runs them.

Not transcribed, because they exercise features Kueue v0.17.0 leaves off by default (the test turns their alpha gates
``TASBalancedPlacement``, ``TASMultiLayerTopology`` or ``ElasticJobsViaWorkloadSlices(WithTAS)`` on) or state this
model does not keep (a previous assignment to extend, a failed node to replace):

* 'balanced placement; basic'
* 'balanced placement; select optmial set of domains'
* 'balanced placement; select optmial set of domains; with slices'
* 'balanced placement; select correct block'
* 'balanced placement; cannot chose domains from different blocks'
* 'balanced placement; select correct block; prefer blocks with single rack; with slices'
* 'balanced placement; four level topology; slice two levels below balanced level'
* 'balanced placement; four level topology; slice one level below balanced level'
* 'balanced placement; four level topology; balance on rack level; slice not on the lowest level'
* 'balanced placement; three level topology; balance on the same level as slice'
* 'balanced placement; three level topology; balance on the lowest level'
* 'balanced placement; leader worker set'
* 'balanced placement; prioritize (using entropy) balanced domains; second rack wins'
* 'balanced placement; prioritize (using entropy) balanced domains; first rack wins'
* 'balanced placement; two level topology; balance on the highest level'
* 'balanced placement; select correct block taking into account pruning'
* 'balanced placement; should not prune domain'
* 'multi-layer topology: block required; rack slices of 4; host slices of 2; TASMultiLayerTopology'
* 'multi-layer topology: host slice rounding makes rack slice impossible'
* 'multi-layer topology: small host kills rack slices despite enough total capacity'
* 'multi-layer topology: enough hostname slices but not enough rack slices'
* 'multi-layer topology: 3-layer negative case with small hosts cascading up'
* 'elastic workload scale up: delta-only placement preserves previous assignment'
* 'elastic workload scale up: spread across multiple nodes preserved'
* 'elastic workload scale down: truncates assignment'
* 'elastic workload same count: reuses previous assignment exactly'
* 'multi-layer topology: mimic a real-world GB200 cluster, with NVL36 arch (2GPUs/node); dc required; aizone slices
  of 48; rack slices of 16; TASMultiLayerTopology'
* the cases of ``TestFindTopologyAssignmentsMultiLayerReplacement`` (failed-node replacement, multi-layer slices).
"""

from __future__ import annotations

from typing import Any

CASES: list[dict[str, Any]] = [
    {
        "name": "minimize the number of used racks before optimizing the number of nodes; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "2", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "2", "pods": "20"},
            },
            {
                "name": "b1-r3-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r3",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b1-r3-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r3",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b1-r3-x2",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r3",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b1-r3-x4",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r3",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 4,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-block"},
                "want": (("kubernetes.io/hostname",), [(("x1",), 1), (("x2",), 1), (("x4",), 1), (("x6",), 1)]),
            }
        ],
    },
    {
        "name": "choose the node that can accommodate all Pods",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "2", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 2,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-block"},
                "want": (("kubernetes.io/hostname",), [(("x3",), 2)]),
            }
        ],
    },
    {
        "name": "no annotation; implied default to unconstrained; 6 pods fit into hosts scattered across the whole "
        "datacenter even they could fit into single rack; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "4", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r1-x6",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "2", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r1-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 6,
                "requests": {"cpu": 1000},
                "want": (
                    ("kubernetes.io/hostname",),
                    [(("x1",), 1), (("x3",), 1), (("x5",), 1), (("x2",), 1), (("x6",), 2)],
                ),
            }
        ],
    },
    {
        "name": "unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they could fit into "
        "single rack; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "4", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r1-x6",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "2", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r1-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 6,
                "requests": {"cpu": 1000},
                "topology": {"unconstrained": True},
                "want": (
                    ("kubernetes.io/hostname",),
                    [(("x1",), 1), (("x3",), 1), (("x5",), 1), (("x2",), 1), (("x6",), 2)],
                ),
            }
        ],
    },
    {
        "name": "unconstrained; a single pod fits into each host; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"unconstrained": True},
                "want": (("kubernetes.io/hostname",), [(("x3",), 1)]),
            }
        ],
    },
    {
        "name": "unconstrained; a single pod fits into each host; LeastFreeCapacity; TASProfileMixed",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "featureGates": {"TASProfileMixed": True},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"unconstrained": True},
                "want": (("kubernetes.io/hostname",), [(("x3",), 1)]),
            }
        ],
    },
    {
        "name": "block required; 4 pods fit into one host each; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r1-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r1-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x7",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x7",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x8",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x8",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 4,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-block"},
                "want": (("kubernetes.io/hostname",), [(("x3",), 1), (("x5",), 1), (("x1",), 1), (("x6",), 1)]),
            }
        ],
    },
    {
        "name": "host required; single Pod fits in the host; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "kubernetes.io/hostname"},
                "want": (("kubernetes.io/hostname",), [(("x3",), 1)]),
            }
        ],
    },
    {
        "name": "host required; single Pod fits in the host; BestFit; TASProfileMixed",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "featureGates": {"TASProfileMixed": True},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "kubernetes.io/hostname"},
                "want": (("kubernetes.io/hostname",), [(("x3",), 1)]),
            }
        ],
    },
    {
        "name": "host preferred; single Pod fits in the host; BestFit; TASProfileMixed",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "featureGates": {"TASProfileMixed": True},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "kubernetes.io/hostname"},
                "want": (("kubernetes.io/hostname",), [(("x3",), 1)]),
            }
        ],
    },
    {
        "name": "rack required; single Pod fits in a rack; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-rack"},
                "want": (("cloud.com/topology-block", "cloud.com/topology-rack"), [(("b1", "r1"), 1)]),
            }
        ],
    },
    {
        "name": "rack required; multiple Pods fit in a rack; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 3,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-rack"},
                "want": (("cloud.com/topology-block", "cloud.com/topology-rack"), [(("b1", "r2"), 3)]),
            }
        ],
    },
    {
        "name": "block preferred; Pods fit in 2 blocks; BestFit",
        "levels": ("cloud.com/topology-block",),
        "nodes": [
            {"name": "b1", "labels": {"cloud.com/topology-block": "b1"}, "allocatable": {"cpu": "2", "pods": "20"}},
            {"name": "b2", "labels": {"cloud.com/topology-block": "b2"}, "allocatable": {"cpu": "1", "pods": "10"}},
            {"name": "b3", "labels": {"cloud.com/topology-block": "b3"}, "allocatable": {"cpu": "4", "pods": "40"}},
        ],
        "podSets": [
            {
                "count": 5,
                "requests": {"cpu": 1000},
                "topology": {"preferred": "cloud.com/topology-block"},
                "want": (("cloud.com/topology-block",), [(("b2",), 1), (("b3",), 4)]),
            }
        ],
    },
    {
        "name": "rack required; multiple Pods fit in some racks; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 2,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-rack"},
                "want": (("cloud.com/topology-block", "cloud.com/topology-rack"), [(("b2", "r2"), 2)]),
            }
        ],
    },
    {
        "name": "rack required; too many pods to fit in any rack; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 4,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-rack"},
                "reason": 'topology "default" allows to fit only 3 out of 4 pod(s)',
            }
        ],
    },
    {
        "name": "block required; single Pod fits in a block and a single rack; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-block"},
                "want": (("cloud.com/topology-block", "cloud.com/topology-rack"), [(("b2", "r1"), 1)]),
            }
        ],
    },
    {
        "name": "block required; single Pod fits in a block spread across two racks; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 4,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-block"},
                "want": (
                    ("cloud.com/topology-block", "cloud.com/topology-rack"),
                    [(("b1", "r1"), 1), (("b1", "r2"), 3)],
                ),
            }
        ],
    },
    {
        "name": "block required; Pods fit in a block spread across two racks; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 4,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-block"},
                "want": (
                    ("cloud.com/topology-block", "cloud.com/topology-rack"),
                    [(("b1", "r1"), 1), (("b1", "r2"), 3)],
                ),
            }
        ],
    },
    {
        "name": "block required; single Pod which cannot be split; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 4000},
                "topology": {"required": "cloud.com/topology-block"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: '
                'resource "cpu": 4',
            }
        ],
    },
    {
        "name": "block required; too many Pods to fit requested; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 5,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-block"},
                "reason": 'topology "default" allows to fit only 4 out of 5 pod(s)',
            }
        ],
    },
    {
        "name": "rack required; single Pod requiring memory; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 4,
                "requests": {"memory": 1024},
                "topology": {"required": "cloud.com/topology-rack"},
                "want": (("cloud.com/topology-block", "cloud.com/topology-rack"), [(("b1", "r1"), 4)]),
            }
        ],
    },
    {
        "name": "rack preferred; but only block can accommodate the workload; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 4,
                "requests": {"cpu": 1000},
                "topology": {"preferred": "cloud.com/topology-rack"},
                "want": (
                    ("cloud.com/topology-block", "cloud.com/topology-rack"),
                    [(("b1", "r1"), 1), (("b1", "r2"), 3)],
                ),
            }
        ],
    },
    {
        "name": "rack preferred; but only multiple blocks can accommodate the workload; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 6,
                "requests": {"cpu": 1000},
                "topology": {"preferred": "cloud.com/topology-rack"},
                "want": (
                    ("cloud.com/topology-block", "cloud.com/topology-rack"),
                    [(("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2)],
                ),
            }
        ],
    },
    {
        "name": "block preferred; but only multiple blocks can accommodate the workload; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 6,
                "requests": {"cpu": 1000},
                "topology": {"preferred": "cloud.com/topology-block"},
                "want": (
                    ("cloud.com/topology-block", "cloud.com/topology-rack"),
                    [(("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2)],
                ),
            }
        ],
    },
    {
        "name": "block preferred; but the workload cannot be accommodate in entire topology; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 10,
                "requests": {"cpu": 1000},
                "topology": {"preferred": "cloud.com/topology-block"},
                "reason": 'topology "default" allows to fit only 7 out of 10 pod(s)',
            }
        ],
    },
    {
        "name": "only nodes with matching labels are considered; no matching node; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {"zone": "zone-a", "kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
                "ready": False,
            }
        ],
        "nodeLabels": {"zone": "zone-b"},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "kubernetes.io/hostname"},
                "reason": "no topology domains at level: kubernetes.io/hostname",
            }
        ],
    },
    {
        "name": "only nodes with matching labels are considered; matching node is found; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {"zone": "zone-a", "kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            }
        ],
        "nodeLabels": {"zone": "zone-a"},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "kubernetes.io/hostname"},
                "want": (("kubernetes.io/hostname",), [(("x3",), 1)]),
            }
        ],
    },
    {
        "name": "only nodes with matching levels are considered; no host label on node; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {"cloud.com/topology-block": "b1", "cloud.com/topology-rack": "r1"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            }
        ],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-rack"},
                "reason": "no topology domains at level: cloud.com/topology-rack",
            }
        ],
    },
    {
        "name": "don't consider unscheduled Pods when computing capacity; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "x3",
                "labels": {"kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            }
        ],
        "pods": [{"name": "test-unscheduled", "requests": {"cpu": "600m"}}],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 600},
                "topology": {"required": "kubernetes.io/hostname"},
                "want": (("kubernetes.io/hostname",), [(("x3",), 1)]),
            }
        ],
    },
    {
        "name": "don't consider terminal pods when computing the capacity; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "x3",
                "labels": {"kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            }
        ],
        "pods": [
            {"name": "test-failed", "node": "x3", "requests": {"cpu": "600m"}, "phase": "Failed"},
            {"name": "test-succeeded", "node": "x3", "requests": {"cpu": "600m"}, "phase": "Succeeded"},
        ],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 600},
                "topology": {"required": "kubernetes.io/hostname"},
                "want": (("kubernetes.io/hostname",), [(("x3",), 1)]),
            }
        ],
    },
    {
        "name": "include usage from pending scheduled non-TAS pods, blocked assignment; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "x3",
                "labels": {"kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            }
        ],
        "pods": [{"name": "test-pending", "node": "x3", "requests": {"cpu": "600m"}, "phase": "Pending"}],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 600},
                "topology": {"required": "kubernetes.io/hostname"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: '
                'resource "cpu": 1',
            }
        ],
    },
    {
        "name": "include usage from running non-TAS pods, blocked assignment; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "x3",
                "labels": {"kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            }
        ],
        "pods": [{"name": "test-running", "node": "x3", "requests": {"cpu": "600m"}, "phase": "Running"}],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 600},
                "topology": {"required": "kubernetes.io/hostname"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: '
                'resource "cpu": 1',
            }
        ],
    },
    {
        "name": "include usage from non-TAS pods; pod usage",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [{"name": "x3", "labels": {"kubernetes.io/hostname": "x3"}, "allocatable": {"pods": "10"}}],
        "pods": [
            {"name": "running1", "node": "x3", "phase": "Running"},
            {"name": "running2", "node": "x3", "phase": "Running"},
        ],
        "podSets": [
            {
                "count": 9,
                "requests": {"cpu": 0},
                "topology": {"required": "kubernetes.io/hostname"},
                "reason": 'topology "default" allows to fit only 8 out of 9 pod(s)',
            }
        ],
    },
    {
        "name": "include usage from running non-TAS pods, found free capacity on another node; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "x3",
                "labels": {"kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "x5",
                "labels": {"kubernetes.io/hostname": "x5"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
        ],
        "pods": [{"name": "test-pod", "node": "x3", "requests": {"cpu": "600m"}}],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 600},
                "topology": {"required": "kubernetes.io/hostname"},
                "want": (("kubernetes.io/hostname",), [(("x5",), 1)]),
            }
        ],
    },
    {
        "name": "no assignment as node is not ready; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {"zone": "zone-a", "kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
                "ready": False,
            }
        ],
        "nodeLabels": {"zone": "zone-a"},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "kubernetes.io/hostname"},
                "reason": "no topology domains at level: kubernetes.io/hostname",
            }
        ],
    },
    {
        "name": "no assignment as node is unschedulable; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {"zone": "zone-a", "kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
                "unschedulable": True,
            }
        ],
        "nodeLabels": {"zone": "zone-a"},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "kubernetes.io/hostname"},
                "reason": "no topology domains at level: kubernetes.io/hostname",
            }
        ],
    },
    {
        "name": "skip node which has untolerated taint; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "x3",
                "labels": {"zone": "zone-a", "kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
                "taints": [{"key": "example.com/gpu", "value": "present", "effect": "NoSchedule"}],
            }
        ],
        "nodeLabels": {"zone": "zone-a"},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "kubernetes.io/hostname"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: taint '
                '"example.com/gpu=present:NoSchedule": 1',
            }
        ],
    },
    {
        "name": "detailed failure message with exclusion stats",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "x1",
                "labels": {"kubernetes.io/hostname": "x1"},
                "allocatable": {"cpu": "1", "pods": "10"},
                "taints": [{"key": "key", "value": "value", "effect": "NoSchedule"}],
            },
            {
                "name": "x2",
                "labels": {"kubernetes.io/hostname": "x2", "zone": "zone-b"},
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "x3",
                "labels": {"kubernetes.io/hostname": "x3", "zone": "zone-b"},
                "allocatable": {"cpu": "2", "pods": "10"},
            },
            {
                "name": "x4",
                "labels": {"kubernetes.io/hostname": "x4", "zone": "zone-a"},
                "allocatable": {"cpu": "100m", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "kubernetes.io/hostname"},
                "nodeSelector": {"zone": "zone-a"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: '
                'nodeSelector: 2, resource "cpu": 1, taint "key=value:NoSchedule": 1',
            }
        ],
    },
    {
        "name": "resource exclusion picks most restrictive resource",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "dual-shortage",
                "labels": {"kubernetes.io/hostname": "dual-shortage"},
                "allocatable": {"cpu": "500m", "pods": "10", "example.com/gpu": "0"},
            }
        ],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "topology": {"required": "kubernetes.io/hostname"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: '
                'resource "cpu": 1',
            }
        ],
    },
    {
        "name": "allow to schedule on node with tolerated taint; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {"zone": "zone-a", "kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
                "taints": [{"key": "example.com/gpu", "value": "present", "effect": "NoSchedule"}],
            }
        ],
        "nodeLabels": {"zone": "zone-a"},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "kubernetes.io/hostname"},
                "tolerations": [{"key": "example.com/gpu", "value": "present", "operator": "Equal"}],
                "want": (("kubernetes.io/hostname",), [(("x3",), 1)]),
            }
        ],
    },
    {
        "name": "no assignment as node does not have enough allocatable pods (.status.allocatable['pods']); BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {"zone": "zone-a", "kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1000m", "pods": "1"},
            }
        ],
        "pods": [{"name": "test-running", "node": "b1-r1-x3", "requests": {"cpu": "300m"}, "phase": "Running"}],
        "nodeLabels": {"zone": "zone-a"},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 300},
                "topology": {"required": "kubernetes.io/hostname"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: '
                'resource "pods": 1',
            }
        ],
    },
    {
        "name": "skip node which doesn't match node selector, missing label; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "x3",
                "labels": {"zone": "zone-a", "kubernetes.io/hostname": "x3"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            }
        ],
        "nodeLabels": {"zone": "zone-a"},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 300},
                "topology": {"required": "kubernetes.io/hostname"},
                "nodeSelector": {"custom-label-1": "custom-value-1"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: '
                "nodeSelector: 1",
            }
        ],
    },
    {
        "name": "skip node which doesn't match node selector, label exists, value doesn't match; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "x3",
                "labels": {"zone": "zone-a", "kubernetes.io/hostname": "x3", "custom-label-1": "value-1"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            }
        ],
        "nodeLabels": {"zone": "zone-a"},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 300},
                "topology": {"required": "kubernetes.io/hostname"},
                "nodeSelector": {"custom-label-1": "value-2"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: '
                "nodeSelector: 1",
            }
        ],
    },
    {
        "name": "allow to schedule on node which matches node; BestFit",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {"zone": "zone-a", "kubernetes.io/hostname": "x3", "custom-label-1": "value-1"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {"zone": "zone-a", "kubernetes.io/hostname": "x5", "custom-label-1": "value-2"},
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
        ],
        "nodeLabels": {"zone": "zone-a"},
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "kubernetes.io/hostname"},
                "nodeSelector": {"custom-label-1": "value-2"},
                "want": (("kubernetes.io/hostname",), [(("x5",), 1)]),
            }
        ],
    },
    {
        "name": "block required for podset; host required for slices; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 6,
                "requests": {"cpu": 1000},
                "topology": {
                    "required": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "kubernetes.io/hostname",
                    "podSetSliceSize": 2,
                },
                "want": (("kubernetes.io/hostname",), [(("x1",), 2), (("x3",), 2), (("x5",), 2)]),
            }
        ],
    },
    {
        "name": "block required for podset; host required for slices; prioritize more free slice capacity first "
        "and then tight fit; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "6", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "5", "pods": "10"},
            },
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "4", "pods": "10"},
            },
            {
                "name": "b1-r1-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "2", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 12,
                "requests": {"cpu": 1000},
                "topology": {
                    "required": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "kubernetes.io/hostname",
                    "podSetSliceSize": 2,
                },
                "want": (("kubernetes.io/hostname",), [(("x1",), 4), (("x3",), 6), (("x6",), 2)]),
            }
        ],
    },
    {
        "name": "block required for podset; host required for slices; select domains with tight fit; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "2", "pods": "10"},
            },
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "2", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 4,
                "requests": {"cpu": 1000},
                "topology": {
                    "required": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "kubernetes.io/hostname",
                    "podSetSliceSize": 2,
                },
                "want": (("kubernetes.io/hostname",), [(("x1",), 2), (("x5",), 2)]),
            }
        ],
    },
    {
        "name": "block required for podset; rack required for slices; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b1-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b2-r1-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b2-r1-x7",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x7",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 4,
                "requests": {"cpu": 1000},
                "topology": {
                    "required": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "cloud.com/topology-rack",
                    "podSetSliceSize": 2,
                },
                "want": (("kubernetes.io/hostname",), [(("x3",), 1), (("x5",), 1), (("x1",), 1), (("x2",), 1)]),
            }
        ],
    },
    {
        "name": "block preferred for podset; rack required for slices; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 4,
                "requests": {"cpu": 1000},
                "topology": {
                    "preferred": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "cloud.com/topology-rack",
                    "podSetSliceSize": 2,
                },
                "want": (("kubernetes.io/hostname",), [(("x1",), 1), (("x5",), 1), (("x4",), 2)]),
            }
        ],
    },
    {
        "name": "block required for podset; host required for slices; optimize last domain; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "4", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "2", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 6,
                "requests": {"cpu": 1000},
                "topology": {
                    "required": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "kubernetes.io/hostname",
                    "podSetSliceSize": 2,
                },
                "want": (("kubernetes.io/hostname",), [(("x1",), 2), (("x3",), 4)]),
            }
        ],
    },
    {
        "name": "block preferred for podset; host required for slices; 2 blocks with unbalanced subdomains; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
            {
                "name": "b2-r1-x6",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "6", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 12,
                "requests": {"cpu": 1000},
                "topology": {
                    "preferred": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "kubernetes.io/hostname",
                    "podSetSliceSize": 3,
                },
                "want": (("kubernetes.io/hostname",), [(("x1",), 3), (("x3",), 3), (("x6",), 6)]),
            }
        ],
    },
    {
        "name": "block required for podset; rack required for slices; podset fits in a block, but slices do not fit in "
        "racks",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "2", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "2", "pods": "10"},
            },
            {
                "name": "b1-r3-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r3",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "2", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 6,
                "requests": {"cpu": 1000},
                "topology": {
                    "required": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "cloud.com/topology-rack",
                    "podSetSliceSize": 3,
                },
                "reason": 'topology "default" doesn\'t allow to fit any of 2 slice(s)',
            }
        ],
    },
    {
        "name": "block required for podset; rack required for slices; only 1 out of 2 slices fit the topology",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b1-r3-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r3",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b1-r4-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r4",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 6,
                "requests": {"cpu": 1000},
                "topology": {
                    "required": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "cloud.com/topology-rack",
                    "podSetSliceSize": 3,
                },
                "reason": 'topology "default" allows to fit only 1 out of 2 slice(s)',
            }
        ],
    },
    {
        "name": "block required for podset; rack required for slices; podset fits in both blocks, but slices "
        "fit in only one block",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "2", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "2", "pods": "10"},
            },
            {
                "name": "b1-r3-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r3",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "2", "pods": "10"},
            },
            {
                "name": "b2-r4-x6",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r4",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
            {
                "name": "b2-r5-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r5",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 6,
                "requests": {"cpu": 1000},
                "topology": {
                    "required": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "cloud.com/topology-rack",
                    "podSetSliceSize": 3,
                },
                "want": (("kubernetes.io/hostname",), [(("x6",), 3), (("x2",), 3)]),
            }
        ],
    },
    {
        "name": "slice required topology level cannot be above the main required topology level",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {
                    "required": "kubernetes.io/hostname",
                    "podSetSliceRequiredTopology": "cloud.com/topology-block",
                    "podSetSliceSize": 1,
                },
                "reason": "podset slice topology cloud.com/topology-block is above the podset topology "
                "kubernetes.io/hostname",
            }
        ],
    },
    {
        "name": "slice size is required when slice topology is requested",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {
                    "required": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "kubernetes.io/hostname",
                },
                "reason": "slice topology requested, but slice size not provided",
            }
        ],
    },
    {
        "name": "cannot request not existing slice topology",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {
                    "required": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "not-existing-topology-level",
                    "podSetSliceSize": 1,
                },
                "reason": "no requested topology level for slices: not-existing-topology-level",
            }
        ],
    },
    {
        "name": "no topology for podset; host required for slices; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 6,
                "requests": {"cpu": 1000},
                "topology": {"podSetSliceRequiredTopology": "kubernetes.io/hostname", "podSetSliceSize": 2},
                "want": (("kubernetes.io/hostname",), [(("x1",), 2), (("x3",), 2), (("x5",), 2)]),
            }
        ],
    },
    {
        "name": "no topology for podset; host required for slices; multiple blocks; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "4", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r1-x6",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "2", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r1-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 6,
                "requests": {"cpu": 1000},
                "topology": {"podSetSliceRequiredTopology": "kubernetes.io/hostname", "podSetSliceSize": 2},
                "want": (("kubernetes.io/hostname",), [(("x3",), 4), (("x6",), 2)]),
            }
        ],
    },
    {
        "name": "no topology for podset; rack required for slices; multiple blocks; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "count": 4,
                "requests": {"cpu": 1000},
                "topology": {"podSetSliceRequiredTopology": "cloud.com/topology-rack", "podSetSliceSize": 2},
                "want": (("kubernetes.io/hostname",), [(("x1",), 1), (("x5",), 1), (("x4",), 2)]),
            }
        ],
    },
    {
        "name": "find topology assignment for two podsets with overlapping domain",
        "levels": ("cloud.com/topology-block",),
        "nodes": [
            {"name": "b1", "labels": {"cloud.com/topology-block": "b1"}, "allocatable": {"cpu": "2", "pods": "10"}},
            {"name": "b2", "labels": {"cloud.com/topology-block": "b2"}, "allocatable": {"cpu": "2", "pods": "10"}},
            {"name": "b3", "labels": {"cloud.com/topology-block": "b3"}, "allocatable": {"cpu": "2", "pods": "10"}},
        ],
        "podSets": [
            {
                "name": "podset1",
                "count": 3,
                "requests": {"cpu": 1000},
                "topology": {"preferred": "cloud.com/topology-block"},
                "want": (("cloud.com/topology-block",), [(("b1",), 2), (("b2",), 1)]),
            },
            {
                "name": "podset2",
                "count": 3,
                "requests": {"cpu": 1000},
                "topology": {"preferred": "cloud.com/topology-block"},
                "want": (("cloud.com/topology-block",), [(("b2",), 1), (("b3",), 2)]),
            },
        ],
    },
    {
        "name": "find topology assignment for two podsets with the same group",
        "levels": ("cloud.com/topology-block",),
        "nodes": [
            {
                "name": "b1",
                "labels": {"cloud.com/topology-block": "b1"},
                "allocatable": {"cpu": "2", "example.com/gpu": "2", "memory": "2Gi", "pods": "10"},
            },
            {
                "name": "b2",
                "labels": {"cloud.com/topology-block": "b2"},
                "allocatable": {"cpu": "5", "example.com/gpu": "4", "pods": "10"},
            },
            {
                "name": "b3",
                "labels": {"cloud.com/topology-block": "b3"},
                "allocatable": {"cpu": "2", "example.com/gpu": "2", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "name": "leader",
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "want": (("cloud.com/topology-block",), [(("b2",), 1)]),
            },
            {
                "name": "workers",
                "count": 4,
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "want": (("cloud.com/topology-block",), [(("b2",), 4)]),
            },
        ],
    },
    {
        "name": "find topology assignment for two podsets with the same group with domains that can tightly fit "
        "leader and workers",
        "levels": ("cloud.com/topology-block",),
        "nodes": [
            {
                "name": "b1",
                "labels": {"cloud.com/topology-block": "b1"},
                "allocatable": {"cpu": "2", "example.com/gpu": "2", "pods": "10"},
            },
            {
                "name": "b2",
                "labels": {"cloud.com/topology-block": "b2"},
                "allocatable": {"cpu": "8", "example.com/gpu": "8", "pods": "10"},
            },
            {
                "name": "b3",
                "labels": {"cloud.com/topology-block": "b3"},
                "allocatable": {"cpu": "2", "example.com/gpu": "2", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "name": "leader",
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "want": (("cloud.com/topology-block",), [(("b2",), 1)]),
            },
            {
                "name": "workers",
                "count": 4,
                "requests": {"cpu": 1000, "example.com/gpu": 2},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "want": (("cloud.com/topology-block",), [(("b2",), 4)]),
            },
        ],
    },
    {
        "name": "find topology assignment for two podsets with the same group - no fit",
        "levels": ("cloud.com/topology-block",),
        "nodes": [
            {
                "name": "b1",
                "labels": {"cloud.com/topology-block": "b1"},
                "allocatable": {"cpu": "1", "example.com/gpu": "0", "pods": "10"},
            },
            {
                "name": "b2",
                "labels": {"cloud.com/topology-block": "b2"},
                "allocatable": {"cpu": "4", "example.com/gpu": "4", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "name": "leader",
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "reason": 'topology "default" allows to fit only 4 out of 4 pod(s). Total nodes: 2; excluded: '
                'resource "example.com/gpu": 1',
            },
            {
                "name": "workers",
                "count": 4,
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "reason": 'topology "default" allows to fit only 4 out of 4 pod(s). Total nodes: 2; excluded: '
                'resource "example.com/gpu": 1',
            },
        ],
    },
    {
        "name": "find topology assignment for two podsets with the same group - optimizes domain for both leader and "
        "workers",
        "levels": ("cloud.com/topology-block",),
        "nodes": [
            {
                "name": "b1",
                "labels": {"cloud.com/topology-block": "b1"},
                "allocatable": {"cpu": "11", "example.com/gpu": "8", "pods": "10"},
            },
            {
                "name": "b2",
                "labels": {"cloud.com/topology-block": "b2"},
                "allocatable": {"cpu": "4", "example.com/gpu": "4", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "name": "leader",
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "want": (("cloud.com/topology-block",), [(("b1",), 1)]),
            },
            {
                "name": "workers",
                "count": 4,
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "want": (("cloud.com/topology-block",), [(("b1",), 4)]),
            },
        ],
    },
    {
        "name": "BestFit: podset group workers spread across hosts",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "20", "example.com/gpu": "4", "pods": "10"},
            },
            {
                "name": "b1-r1-x2",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "20", "example.com/gpu": "2", "pods": "10"},
            },
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "20", "example.com/gpu": "2", "pods": "10"},
            },
            {
                "name": "b1-r1-x4",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "20", "example.com/gpu": "2", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "name": "leader",
                "count": 1,
                "requests": {"cpu": 1000},
                "topology": {"preferred": "cloud.com/topology-block"},
                "group": "sameGroup",
                "want": (("kubernetes.io/hostname",), [(("x1",), 1)]),
            },
            {
                "name": "workers",
                "count": 6,
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "topology": {
                    "preferred": "cloud.com/topology-block",
                    "podSetSliceSize": 2,
                    "podSetSliceRequiredTopology": "kubernetes.io/hostname",
                },
                "group": "sameGroup",
                "want": (("kubernetes.io/hostname",), [(("x1",), 4), (("x2",), 2)]),
            },
        ],
    },
    {
        "name": "find topology assignment for two podsets with the same group - leader does not fit anywhere",
        "levels": ("cloud.com/topology-block",),
        "nodes": [
            {
                "name": "b1",
                "labels": {"cloud.com/topology-block": "b1"},
                "allocatable": {"cpu": "4", "example.com/gpu": "4", "pods": "10"},
            },
            {
                "name": "b2",
                "labels": {"cloud.com/topology-block": "b2"},
                "allocatable": {"cpu": "4", "example.com/gpu": "4", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "name": "leader",
                "count": 1,
                "requests": {"cpu": 10000},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "reason": 'topology "default" allows to fit only 4 out of 4 pod(s)',
            },
            {
                "name": "workers",
                "count": 4,
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "reason": 'topology "default" allows to fit only 4 out of 4 pod(s)',
            },
        ],
    },
    {
        "name": "find topology assignment for two podsets with the same group - multiple hosts",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "2", "pods": "10", "example.com/gpu": "1"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "2", "pods": "10", "example.com/gpu": "1"},
            },
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "2", "pods": "10", "example.com/gpu": "1"},
            },
            {
                "name": "b2-r4-x6",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r4",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "pods": "10", "example.com/gpu": "1"},
            },
            {
                "name": "b2-r5-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r5",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "2", "pods": "10", "example.com/gpu": "1"},
            },
            {
                "name": "b2-r6-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r6",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "2", "pods": "10", "example.com/gpu": "1"},
            },
        ],
        "podSets": [
            {
                "name": "leader",
                "count": 1,
                "requests": {"cpu": 2000},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "want": (("kubernetes.io/hostname",), [(("x1",), 1)]),
            },
            {
                "name": "workers",
                "count": 2,
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "want": (("kubernetes.io/hostname",), [(("x3",), 1), (("x5",), 1)]),
            },
        ],
    },
    {
        "name": "find topology assignment for two podsets with the same group requesting same resources and "
        "nodes in the same rack",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "1", "pods": "10", "example.com/gpu": "1"},
            },
            {
                "name": "b1-r1-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "1", "pods": "10", "example.com/gpu": "1"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "pods": "10", "example.com/gpu": "1"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "1", "pods": "10", "example.com/gpu": "1"},
            },
            {
                "name": "b2-r3-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r3",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "1", "pods": "10", "example.com/gpu": "1"},
            },
            {
                "name": "b2-r3-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r3",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "1", "pods": "10", "example.com/gpu": "1"},
            },
            {
                "name": "b2-r4-x7",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r4",
                    "kubernetes.io/hostname": "x7",
                },
                "allocatable": {"cpu": "1", "pods": "10", "example.com/gpu": "1"},
            },
            {
                "name": "b2-r4-x8",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r4",
                    "kubernetes.io/hostname": "x8",
                },
                "allocatable": {"cpu": "1", "pods": "10", "example.com/gpu": "1"},
            },
        ],
        "podSets": [
            {
                "name": "leader",
                "count": 1,
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "want": (("kubernetes.io/hostname",), [(("x3",), 1)]),
            },
            {
                "name": "workers",
                "count": 2,
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "topology": {"required": "cloud.com/topology-block"},
                "group": "sameGroup",
                "want": (("kubernetes.io/hostname",), [(("x5",), 1), (("x1",), 1)]),
            },
        ],
    },
    {
        "name": "multiple podsets: rack required for both, different resource requests; BestFit",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "10", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "10", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "10", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "10", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r1-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "10", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "20", "memory": "4Gi", "pods": "40"},
            },
        ],
        "podSets": [
            {
                "name": "podset1",
                "count": 2,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-rack"},
                "want": (("cloud.com/topology-block", "cloud.com/topology-rack"), [(("b1", "r1"), 2)]),
            },
            {
                "name": "podset2",
                "count": 1,
                "requests": {"memory": 1024},
                "topology": {"required": "cloud.com/topology-rack"},
                "want": (("cloud.com/topology-block", "cloud.com/topology-rack"), [(("b1", "r1"), 1)]),
            },
        ],
    },
    {
        "name": "multiple podsets: block required for one, unconstrained for another; TASProfileMixed",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "10", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x5",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x5",
                },
                "allocatable": {"cpu": "10", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "10", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b1-r2-x6",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x6",
                },
                "allocatable": {"cpu": "10", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r1-x2",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "10", "memory": "1Gi", "pods": "10"},
            },
            {
                "name": "b2-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b2",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "20", "memory": "4Gi", "pods": "40"},
            },
        ],
        "featureGates": {"TASProfileMixed": True},
        "podSets": [
            {
                "name": "podset1",
                "count": 8,
                "requests": {"cpu": 1000},
                "topology": {"required": "cloud.com/topology-block"},
                "want": (("kubernetes.io/hostname",), [(("x2",), 8)]),
            },
            {
                "name": "podset2",
                "count": 2,
                "requests": {"cpu": 1000},
                "topology": {"unconstrained": True},
                "want": (("kubernetes.io/hostname",), [(("x2",), 2)]),
            },
        ],
    },
    {
        "name": "temporary state cleanup prevents leakage across PodSets",
        "levels": ("kubernetes.io/hostname",),
        "nodes": [
            {
                "name": "n1",
                "labels": {"kubernetes.io/hostname": "x1"},
                "allocatable": {"cpu": "4", "memory": "4Gi", "pods": "10"},
            },
            {
                "name": "n2",
                "labels": {"kubernetes.io/hostname": "x2"},
                "allocatable": {"cpu": "4", "memory": "4Gi", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "name": "ps1",
                "count": 1,
                "requests": {"cpu": 1000, "memory": 1000},
                "want": (("kubernetes.io/hostname",), [(("x1",), 1)]),
            },
            {
                "name": "ps2",
                "count": 1,
                "requests": {"cpu": 1000, "memory": 1000},
                "nodeSelector": {"never": "match"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 2; excluded: '
                "nodeSelector: 2",
            },
        ],
    },
    {
        "name": "multi-layer topology: no feature gate; additional layers ignored",
        "levels": ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"),
        "nodes": [
            {
                "name": "b1-r1-x1",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x1",
                },
                "allocatable": {"cpu": "1", "pods": "10"},
            },
            {
                "name": "b1-r1-x2",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r1",
                    "kubernetes.io/hostname": "x2",
                },
                "allocatable": {"cpu": "4", "pods": "10"},
            },
            {
                "name": "b1-r2-x3",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x3",
                },
                "allocatable": {"cpu": "3", "pods": "10"},
            },
            {
                "name": "b1-r2-x4",
                "labels": {
                    "cloud.com/topology-block": "b1",
                    "cloud.com/topology-rack": "r2",
                    "kubernetes.io/hostname": "x4",
                },
                "allocatable": {"cpu": "4", "pods": "10"},
            },
        ],
        "podSets": [
            {
                "count": 8,
                "requests": {"cpu": 1000},
                "topology": {
                    "required": "cloud.com/topology-block",
                    "podSetSliceRequiredTopology": "cloud.com/topology-rack",
                    "podSetSliceSize": 4,
                },
                "want": (("kubernetes.io/hostname",), [(("x1",), 1), (("x2",), 3), (("x3",), 3), (("x4",), 1)]),
            }
        ],
    },
]
