"""The configuration and value classes HAMi's rules pass around.

:class:`HamiConfig` holds the scheduler and device-plugin settings that change results (section 8 of
``/work/shared/hami-rules.md``; chart defaults). The value classes follow HAMi's ``pkg/device/devices.go``
(``DeviceInfo``, ``DeviceUsage``, ``ContainerDeviceRequest``, ``ContainerDevice``), the MIG types of
``pkg/device/nvidia`` and ``pkg/util/device_scoring_weights.go``.

Hot-path conventions: the value classes use ``@dataclass(slots=True)``; :class:`DeviceUsage` and
:class:`ContainerDevice` are treated as immutable values (functions build new ones instead of mutating), so a
simulated placement copies only the few devices it touches and never deep-copies a node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .names import NVIDIA, POLICY_BINPACK, POLICY_SPREAD

__all__ = [
    "DEFAULT_CONFIG",
    "ContainerDevice",
    "ContainerRequest",
    "DeviceInfo",
    "DeviceUsage",
    "HamiConfig",
    "MigAllocation",
    "MigPlacement",
    "MigProfile",
    "ScoringWeights",
]


@dataclass(slots=True, frozen=True)
class HamiConfig:
    """The scheduler and device-plugin settings that change results (section 8; chart defaults)."""

    resource_count: str = "nvidia.com/gpu"
    resource_memory: str = "nvidia.com/gpumem"
    resource_memory_percentage: str = "nvidia.com/gpumem-percentage"
    resource_cores: str = "nvidia.com/gpucores"
    resource_priority: str = "nvidia.com/priority"
    default_memory: int = 0
    default_cores: int = 0
    default_gpu_num: int = 1
    memory_factor: int = 1
    gpu_policy: str = POLICY_SPREAD
    node_policy: str = POLICY_BINPACK
    #: ``--scheduler-name``: the chart passes ``hami-scheduler``; empty leaves ``spec.schedulerName`` alone.
    scheduler_name: str = "hami-scheduler"
    force_overwrite_default_scheduler: bool = True
    runtime_class_name: str = ""
    gpu_core_policy: str = "default"
    overwrite_env: bool = False


DEFAULT_CONFIG: Final = HamiConfig()


@dataclass(slots=True, frozen=True)
class MigPlacement:
    """A MIG placement (start slice and size) as NVML reports it."""

    start: int
    size: int


@dataclass(slots=True, frozen=True)
class MigProfile:
    """One MIG profile a GPU offers (``migProfiles`` in the register annotation)."""

    name: str
    memory_mb: int
    core: int
    slice_count: int
    #: ``None`` is Go's nil slice (marshalled as ``null``), ``()`` an empty one (``[]``).
    placements: tuple[MigPlacement, ...] | None


@dataclass(slots=True, frozen=True)
class DeviceInfo:
    """One registered GPU (an element of ``hami.io/node-nvidia-register``). Shared, never copied."""

    id: str
    index: int = 0
    count: int = 0
    devmem: int = 0
    devcore: int = 0
    type: str = ""
    numa: int = 0
    health: bool = False
    mode: str = ""
    mig_profiles: tuple[MigProfile, ...] = ()


@dataclass(slots=True)
class DeviceUsage:
    """A GPU and what bound pods use on it (HAMi's ``DeviceUsage``). Treat as an immutable value.

    ``mig_in_use`` holds the MIG placements already taken on a MIG-mode GPU.
    """

    info: DeviceInfo
    used: int = 0
    usedmem: int = 0
    usedcores: int = 0
    mig_in_use: tuple[MigPlacement, ...] = ()

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def free_mem(self) -> int:
        return self.info.devmem - self.usedmem

    @property
    def free_cores(self) -> int:
        return self.info.devcore - self.usedcores


@dataclass(slots=True, frozen=True)
class ContainerRequest:
    """One container's request (``ContainerDeviceRequest``). ``mem_percentage`` 101 means "not set"."""

    nums: int
    memreq: int = 0
    mem_percentage: int = 101
    coresreq: int = 0
    type: str = NVIDIA


@dataclass(slots=True)
class ContainerDevice:
    """One GPU given to a container (``ContainerDevice``). Treat as an immutable value.

    ``index`` (the device index) and ``slots`` (collapsed usage only) are not part of the annotation wire form.
    """

    uuid: str
    type: str
    usedmem: int
    usedcores: int
    index: int = 0
    slots: int = 0
    mig_profile: str = ""
    mig_placement: MigPlacement | None = None


@dataclass(slots=True, frozen=True)
class ScoringWeights:
    """``hami.io/device-scoring-weights`` (pkg/util/device_scoring_weights.go); default 1/1/1."""

    slot: int = 1
    core: int = 1
    memory: int = 1


_DEFAULT_WEIGHTS: Final = ScoringWeights()


@dataclass(slots=True, frozen=True)
class MigAllocation:
    """An element of ``hami.io/vgpu-mig-allocations`` (pkg/device/nvidia/mig_allocations.go)."""

    container_index: int
    device_index: int
    gpu_uuid: str
    profile: str
    placement: MigPlacement
    mig_uuid: str = ""
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
