"""OpenCL platform/device discovery and choice: first GPU, else CPU; overridable."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyopencl as cl

DEVICE_ENV = "AUTOTUNE_DEVICE"
INSTALL_HINT = ("install a CPU OpenCL driver with `pip install pocl-binary-distribution`, "
                "or a GPU vendor's OpenCL driver")


class DeviceError(RuntimeError):
    """No usable OpenCL device, or a device specification that matches none."""


@dataclass(frozen=True)
class DeviceInfo:
    """One OpenCL device as ``autotune devices`` lists it."""

    platform_index: int
    device_index: int
    platform: str
    name: str
    kind: str  # "GPU" | "CPU" | "ACCELERATOR" | "OTHER"
    compute_units: int
    clock_mhz: int
    global_mem_mb: int
    driver: str
    simd_width: int  # work-items that execute in lockstep (a warp; 1 where each runs alone)


def _kind(device: cl.Device) -> str:
    t = device.type
    if t & cl.device_type.GPU:
        return "GPU"
    if t & cl.device_type.CPU:
        return "CPU"
    if t & cl.device_type.ACCELERATOR:
        return "ACCELERATOR"
    return "OTHER"


def _simd_width(device: cl.Device, kind: str) -> int:
    """Work-items executing in lockstep: NVIDIA's warp, AMD's wavefront; 1 on PoCL's CPU device;
    else the float vector width (a CPU driver that vectorizes across work-items).

    PoCL 3.0 vectorizes across work-items only loop-free, call-free code: a kernel with a
    divergent traversal loop runs each work-item as scalar code, one after another (measured:
    no "vectorized loop" remark, xmm-only code, no gain from any local size; only the explicit
    float4 of one work-item's box test becomes SIMD). So no lane waits for a slower one."""
    vendor = device.vendor.lower()
    if kind == "GPU" and "nvidia" in vendor:
        return 32
    if kind == "GPU" and ("amd" in vendor or "advanced micro" in vendor):
        return 64
    if kind == "CPU" and "portable computing language" in device.platform.name.lower():
        return 1
    return max(1, int(device.native_vector_width_float))


def _all_devices() -> list[tuple[DeviceInfo, cl.Device]]:
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # e.g. PLATFORM_NOT_FOUND_KHR when no ICD is installed
        raise DeviceError(f"no OpenCL platform found ({exc}); {INSTALL_HINT}") from None
    found = []
    for p_i, platform in enumerate(platforms):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        for d_i, dev in enumerate(devices):
            kind = _kind(dev)
            info = DeviceInfo(p_i, d_i, platform.name.strip(), dev.name.strip(), kind,
                              dev.max_compute_units, dev.max_clock_frequency,
                              dev.global_mem_size // (1 << 20), dev.driver_version,
                              _simd_width(dev, kind))
            found.append((info, dev))
    if not found:
        raise DeviceError(f"no OpenCL device found; {INSTALL_HINT}")
    return found


def list_devices() -> list[DeviceInfo]:
    """Every OpenCL device on every platform."""
    return [info for info, _ in _all_devices()]


def choose_device(spec: str | None = None) -> tuple[DeviceInfo, cl.Device]:
    """Pick a device by ``spec`` (``gpu``, ``cpu``, ``P:D`` indices or a name substring),
    else ``$AUTOTUNE_DEVICE``, else the first GPU, else the first CPU."""
    found = _all_devices()
    spec = spec or os.environ.get(DEVICE_ENV) or ""
    spec = spec.strip()
    if not spec:
        for kind in ("GPU", "CPU"):
            for info, dev in found:
                if info.kind == kind:
                    return info, dev
        return found[0]
    if spec.lower() in ("gpu", "cpu"):
        matches = [(i, d) for i, d in found if i.kind == spec.upper()]
    elif ":" in spec and all(part.isdigit() for part in spec.split(":", 1)):
        p, d = (int(x) for x in spec.split(":", 1))
        matches = [(i, dv) for i, dv in found if (i.platform_index, i.device_index) == (p, d)]
    else:
        matches = [(i, d) for i, d in found
                   if spec.lower() in i.name.lower() or spec.lower() in i.platform.lower()]
    if not matches:
        known = "; ".join(f"{i.platform_index}:{i.device_index} {i.name} ({i.kind})"
                          for i, _ in found)
        raise DeviceError(f"no OpenCL device matches {spec!r}; available: {known}")
    return matches[0]
