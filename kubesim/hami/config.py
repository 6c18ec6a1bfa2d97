"""Names, settings and errors of the simulated HAMi (``Project-HAMi/HAMi``, see ``/work/shared/hami-rules.md``).

The settings are the chart's defaults (rules section 8): the four ``nvidia.com`` resource names, ``defaultMemory``
0 (a request without memory takes the whole card), ``defaultCores`` 0, ``defaultGPUNum`` 1, ``memoryFactor`` 1,
GPU policy ``spread`` and node policy ``binpack``, the scheduler named ``hami-scheduler``. Annotation names and
failure reasons are HAMi's (``pkg/util/types.go``, ``pkg/device/nvidia/device.go``,
``pkg/device/common/common.go``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "ALLOCATED_ANNOTATION",
    "ASSIGNED_NODE_ANNOTATION",
    "ASSIGNED_TIME_ANNOTATION",
    "BIND_PHASE_ANNOTATION",
    "BIND_TIME_ANNOTATION",
    "CORDON_ANNOTATION",
    "DEFAULT_CONFIG",
    "GPU_POLICY_ANNOTATION",
    "HANDSHAKE_ANNOTATION",
    "NODE_POLICY_ANNOTATION",
    "NVIDIA",
    "PAIR_SCORE_ANNOTATION",
    "REGISTER_ANNOTATION",
    "SCORING_WEIGHTS_ANNOTATION",
    "TO_ALLOCATE_ANNOTATION",
    "HamiAdmissionError",
    "HamiConfig",
    "HamiFormatError",
    "HamiSchedulingError",
]

#: The request type of NVIDIA containers (``NvidiaGPUDevice``); registered GPUs are typed ``NVIDIA-<model>``.
NVIDIA: Final = "NVIDIA"
MODE_HAMI_CORE: Final = "hami-core"

REGISTER_ANNOTATION: Final = "hami.io/node-nvidia-register"
PAIR_SCORE_ANNOTATION: Final = "hami.io/node-nvidia-score"
HANDSHAKE_ANNOTATION: Final = "hami.io/node-handshake"
CORDON_ANNOTATION: Final = "hami.io/device-cordon"
TO_ALLOCATE_ANNOTATION: Final = "hami.io/vgpu-devices-to-allocate"
ALLOCATED_ANNOTATION: Final = "hami.io/vgpu-devices-allocated"
ASSIGNED_NODE_ANNOTATION: Final = "hami.io/vgpu-node"
ASSIGNED_TIME_ANNOTATION: Final = "hami.io/vgpu-time"
BIND_PHASE_ANNOTATION: Final = "hami.io/bind-phase"
BIND_TIME_ANNOTATION: Final = "hami.io/bind-time"
USE_GPUTYPE_ANNOTATION: Final = "nvidia.com/use-gputype"
NOUSE_GPUTYPE_ANNOTATION: Final = "nvidia.com/nouse-gputype"
USE_GPUUUID_ANNOTATION: Final = "nvidia.com/use-gpuuuid"
NOUSE_GPUUUID_ANNOTATION: Final = "nvidia.com/nouse-gpuuuid"
NUMA_BIND_ANNOTATION: Final = "nvidia.com/numa-bind"
VGPU_MODE_ANNOTATION: Final = "nvidia.com/vgpu-mode"
GPU_POLICY_ANNOTATION: Final = "hami.io/gpu-scheduler-policy"
NODE_POLICY_ANNOTATION: Final = "hami.io/node-scheduler-policy"
SCORING_WEIGHTS_ANNOTATION: Final = "hami.io/device-scoring-weights"

# Fit failure reasons.
CARD_TYPE_MISMATCH: Final = "CardTypeMismatch"
CARD_UUID_MISMATCH: Final = "CardUuidMismatch"
CARD_TIME_SLICING_EXHAUSTED: Final = "CardTimeSlicingExhausted"
CARD_COMPUTE_UNITS_EXHAUSTED: Final = "CardComputeUnitsExhausted"
CARD_INSUFFICIENT_MEMORY: Final = "CardInsufficientMemory"
CARD_INSUFFICIENT_CORE: Final = "CardInsufficientCore"
CARD_NOT_HEALTH: Final = "CardNotHealth"
CARD_CORDONED: Final = "CardCordoned"
NUMA_NOT_FIT: Final = "NumaNotFit"
EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT: Final = "ExclusiveDeviceAllocateConflict"
NODE_INSUFFICIENT_DEVICE: Final = "NodeInsufficientDevice"
ALLOCATED_CARDS_INSUFFICIENT_REQUEST: Final = "AllocatedCardsInsufficientRequest"


@dataclass(frozen=True)
class HamiConfig:
    """The scheduler, webhook and device-plugin settings that change results."""

    resource_count: str = "nvidia.com/gpu"
    resource_memory: str = "nvidia.com/gpumem"
    resource_memory_percentage: str = "nvidia.com/gpumem-percentage"
    resource_cores: str = "nvidia.com/gpucores"
    resource_priority: str = "nvidia.com/priority"
    default_memory: int = 0
    default_cores: int = 0
    default_gpu_num: int = 1
    memory_factor: int = 1
    gpu_policy: str = "spread"
    node_policy: str = "binpack"
    scheduler_name: str = "hami-scheduler"
    force_overwrite_default_scheduler: bool = True
    runtime_class_name: str = ""
    gpu_core_policy: str = "default"
    overwrite_env: bool = False


DEFAULT_CONFIG: Final = HamiConfig()


class HamiFormatError(ValueError):
    """An annotation HAMi cannot decode; the message is HAMi's."""


class HamiSchedulingError(ValueError):
    """HAMi's Filter returns an error for the pod (for example, unreadable scoring weights)."""


class HamiAdmissionError(Exception):
    """The webhook denies (403) or errors (500) with HAMi's message."""

    def __init__(self, message: str, code: int = 403) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
