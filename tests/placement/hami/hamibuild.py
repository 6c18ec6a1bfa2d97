"""Builders shared by the HAMi tests in tests/placement/hami/: devices, containers, pod specs, requests.

``fit`` is ``fit_container`` over devices in the order given (HAMi's own ``TestDevices_Fit`` shape).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatcher.placement.hami.devices import (
    ContainerDevice,
    ContainerRequest,
    DeviceInfo,
    DeviceUsage,
    MigPlacement,
    MigProfile,
)
from dispatcher.placement.hami.fit import fit_container


def dev(
    uuid: str,
    *,
    index: int = 0,
    count: int = 10,
    devmem: int = 8192,
    devcore: int = 100,
    type: str = "NVIDIA",
    numa: int = 0,
    health: bool = True,
    mode: str = "hami-core",
    used: int = 0,
    usedmem: int = 0,
    usedcores: int = 0,
    profiles: tuple[MigProfile, ...] = (),
) -> DeviceUsage:
    info = DeviceInfo(uuid, index, count, devmem, devcore, type, numa, health, mode, profiles)
    return DeviceUsage(info, used, usedmem, usedcores)


def container(
    limits: Mapping[str, Any] | None = None, requests: Mapping[str, Any] | None = None, name: str = "c"
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = dict(limits)
    if requests is not None:
        resources["requests"] = dict(requests)
    return {"name": name, "resources": resources}


def gpu_spec(
    gpus: int | str, mem: int | str | None = None, cores: int | None = None, pct: int | None = None
) -> dict[str, Any]:
    limits: dict[str, Any] = {"nvidia.com/gpu": gpus}
    if mem is not None:
        limits["nvidia.com/gpumem"] = mem
    if cores is not None:
        limits["nvidia.com/gpucores"] = cores
    if pct is not None:
        limits["nvidia.com/gpumem-percentage"] = pct
    return {"containers": [container(limits)]}


def req(nums: int, mem: int = 0, pct: int = 101, cores: int = 0, type: str = "NVIDIA") -> ContainerRequest:
    return ContainerRequest(nums, mem, pct, cores, type)


def fit(
    devices: list[DeviceUsage], request: ContainerRequest, annos: Mapping[str, str] | None = None, **kw: Any
) -> tuple[bool, list[ContainerDevice], str]:
    return fit_container(devices, request, annos, **kw)


def cd(uuid: str, mem: int, cores: int, type: str = "NVIDIA") -> ContainerDevice:
    return ContainerDevice(uuid, type, mem, cores)


MIG_PROFILES = (
    MigProfile("1g.10gb", 9856, 15, 1, tuple(MigPlacement(i, 1) for i in range(7))),
    MigProfile("3g.40gb", 39424, 43, 3, (MigPlacement(0, 4), MigPlacement(4, 4))),
    MigProfile("7g.80gb", 80000, 100, 7, (MigPlacement(0, 8),)),
)


def a100(uuid: str, index: int, **kw: Any) -> DeviceUsage:
    return dev(uuid, index=index, devmem=40960, type="NVIDIA-A100-SXM4-40GB", numa=index // 4, **kw)


def gpu_node(name: str, gpus: int = 8, busy: int = 0, mem: int = 0, cores: int = 0) -> list[DeviceUsage]:
    return [
        a100(
            f"{name}-g{i}",
            i,
            used=1 if i < busy else 0,
            usedmem=mem if i < busy else 0,
            usedcores=cores if i < busy else 0,
        )
        for i in range(gpus)
    ]
