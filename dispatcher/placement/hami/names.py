"""HAMi's names: the NVIDIA device type and modes, the annotation keys HAMi reads and writes, bind phases,
``Fit``'s reason strings, the GPU and node policies, and the errors the rules raise.

From ``pkg/device/nvidia/device.go:40-64``, ``pkg/util/types.go`` and ``pkg/device/common/common.go:25-44``
(``Project-HAMi/HAMi`` at commit 4707fb02, see ``/work/shared/hami-rules.md``). Every other module of
:mod:`dispatcher.placement.hami` imports its names from here, so a key or reason is spelled once.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ALLOCATED_ANNOTATION",
    "ASSIGNED_NODE_ANNOTATION",
    "ASSIGNED_TIME_ANNOTATION",
    "BIND_PHASE_ANNOTATION",
    "BIND_TIME_ANNOTATION",
    "CORDON_ANNOTATION",
    "GPU_POLICY_ANNOTATION",
    "HANDSHAKE_ANNOTATION",
    "MIG_ALLOCATIONS_ANNOTATION",
    "NODE_POLICY_ANNOTATION",
    "NOUSE_GPUTYPE_ANNOTATION",
    "NOUSE_GPUUUID_ANNOTATION",
    "NUMA_BIND_ANNOTATION",
    "NVIDIA",
    "PAIR_SCORE_ANNOTATION",
    "REGISTER_ANNOTATION",
    "SCORING_WEIGHTS_ANNOTATION",
    "TO_ALLOCATE_ANNOTATION",
    "USE_GPUTYPE_ANNOTATION",
    "USE_GPUUUID_ANNOTATION",
    "VGPU_MODE_ANNOTATION",
    "HamiAdmissionError",
    "HamiFormatError",
    "HamiSchedulingError",
]


NVIDIA: Final = "NVIDIA"
MODE_HAMI_CORE: Final = "hami-core"
MODE_MIG: Final = "mig"
MODE_MPS: Final = "mps"

REGISTER_ANNOTATION: Final = "hami.io/node-nvidia-register"
PAIR_SCORE_ANNOTATION: Final = "hami.io/node-nvidia-score"
HANDSHAKE_ANNOTATION: Final = "hami.io/node-handshake"
CORDON_ANNOTATION: Final = "hami.io/device-cordon"
NODE_LOCK_ANNOTATION: Final = "hami.io/mutex.lock"
TO_ALLOCATE_ANNOTATION: Final = "hami.io/vgpu-devices-to-allocate"
ALLOCATED_ANNOTATION: Final = "hami.io/vgpu-devices-allocated"
MIG_ALLOCATIONS_ANNOTATION: Final = "hami.io/vgpu-mig-allocations"
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

BIND_ALLOCATING: Final = "allocating"
BIND_SUCCESS: Final = "success"
BIND_FAILED: Final = "failed"

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
CARD_MIG_TOPOLOGY_INFEASIBLE: Final = "CardMigTopologyInfeasible"
NODE_INSUFFICIENT_DEVICE: Final = "NodeInsufficientDevice"
ALLOCATED_CARDS_INSUFFICIENT_REQUEST: Final = "AllocatedCardsInsufficientRequest"
RESOURCE_QUOTA_NOT_FIT: Final = "ResourceQuotaNotFit"

POLICY_BINPACK: Final = "binpack"
POLICY_SPREAD: Final = "spread"
POLICY_TOPOLOGY: Final = "topology-aware"
POLICY_MUTEX: Final = "mutex"
POLICY_NUMA: Final = "numa"


class HamiFormatError(ValueError):
    """An annotation HAMi cannot decode. The message is HAMi's (or Go's) own wording."""


class HamiSchedulingError(ValueError):
    """Scheduling cannot even start for this pod (HAMi's Filter returns an error, e.g. bad scoring weights)."""


class HamiAdmissionError(Exception):
    """The admission webhook refuses the pod: ``code`` 403 for ``admission.Denied``, 500 for ``Errored``."""

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
