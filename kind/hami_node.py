"""Print the ``hami.io/node-nvidia-register`` annotation HAMi's device plugin would write for one node.

Used by kind/up.sh to make the GPU worker's kind nodes look like HAMi GPU nodes (no GPU, no HAMi): the value is
built with the dispatcher's own encoder of HAMi's format (``encode_node_devices``), for the simulator's GPU node
(4 × NVIDIA A100 40GB, split 10, 100 cores) unless told otherwise. GPU UUIDs are stable per node name.

    python kind/hami_node.py NODE [--count 4] [--memory-mib 40960] [--type NVIDIA-A100-SXM4-40GB] [--split 10]
    python kind/hami_node.py NODE --slots     # the node's nvidia.com/gpu (count × split) instead
"""

from __future__ import annotations

import argparse
import sys
import uuid

from dispatcher.placement.hami.nodecodec import encode_node_devices, register_device
from kubesim.topology import GpuSpec

#: The namespace of the GPU UUIDs (uuid5 of "NODE/INDEX"): any fixed value; this one is the rig's own.
_NAMESPACE = uuid.UUID("6f1c2f53-2d4e-4bd4-9a53-6a0f3c2b9e11")


def annotation(node: str, spec: GpuSpec) -> str:
    half = -(-spec.count // 2)  # two NUMA nodes: the first half of the GPUs on 0, the rest on 1
    devices = [
        register_device(
            f"GPU-{uuid.uuid5(_NAMESPACE, f'{node}/{i}')}",
            i,
            spec.memory_mib,
            spec.type,
            numa=i // half if spec.count > 1 else 0,
            split_count=spec.split,
        )
        for i in range(spec.count)
    ]
    return encode_node_devices(devices)


def main(argv: list[str] | None = None) -> int:
    default = GpuSpec()
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("node")
    parser.add_argument("--count", type=int, default=default.count, help="physical GPUs on the node")
    parser.add_argument("--memory-mib", type=int, default=default.memory_mib, help="memory per GPU, MiB")
    parser.add_argument("--type", default=default.type, help="GPU model as HAMi reports it")
    parser.add_argument("--split", type=int, default=default.split, help="vGPUs per GPU (HAMi's deviceSplitCount)")
    parser.add_argument("--slots", action="store_true", help="print count × split (the node's nvidia.com/gpu)")
    args = parser.parse_args(argv)
    if args.count < 1 or args.split < 1 or args.memory_mib < 1:
        parser.error("--count, --split and --memory-mib must be at least 1")
    spec = GpuSpec(count=args.count, type=args.type, memory_mib=args.memory_mib, split=args.split)
    sys.stdout.write(f"{spec.count * spec.split}\n" if args.slots else annotation(args.node, spec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
