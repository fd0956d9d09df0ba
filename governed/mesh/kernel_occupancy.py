"""Each phase's occupancy from its compiled kernel: work-groups resident per core on NVIDIA.

The Hong–Kim model needs the work-groups a core holds at once. A device profile has one guess
for every kernel (``max_blocks_per_core``); on an NVIDIA GPU the compiler says what each kernel
uses (registers per thread, shared memory per work-group: ``-cl-nv-verbose``, see
:mod:`raytracer.device.nvidia`), and the CUDA occupancy rules (:mod:`models.occupancy`) turn
that into the work-groups resident per SM. Measured on an H200 (cc 9.0, 64-item groups):
primary 116 registers, shadow 111, ao 113, shade 32, i.e. 8, 9, 8 and 32 work-groups.

Only NVIDIA's driver reports registers; every other device gets None (the profile's figure
stays). A figure that cannot be read (no compute capability, a capability outside the
occupancy table, a build that logs nothing) is left out with a warning, never guessed.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import pyopencl as cl

from models.occupancy import Occupancy, limits_for_compute_capability, occupancy
from raytracer.device.choice import DeviceError, DeviceInfo, choose_device
from raytracer.device.launches import KernelLaunches, device_launches, with_sub_groups
from raytracer.device.nvidia import (
    KernelResources,
    NvidiaFiguresError,
    compute_capability,
    kernel_resources,
)
from raytracer.mesh.phases import PHASE_LIST, RAY_PACKET
from raytracer.mesh.tracer import KERNELS, build_options, kernel_for, kernel_source, time_launches

NVIDIA = "nvidia"  # DeviceInfo.runtime of the devices whose compiler reports registers


@dataclass(frozen=True)
class PhaseKernel:
    """One phase's compiled kernel on the device: its entry, launch, resources, occupancy."""

    entry: str
    threads_per_block: int
    resources: KernelResources
    occupancy: Occupancy | None  # None where the registers are not reported

    def to_dict(self) -> dict:
        return {"entry": self.entry, "threads_per_block": self.threads_per_block,
                **asdict(self.resources),
                "occupancy": asdict(self.occupancy) if self.occupancy else None}


def phase_kernels(device: DeviceInfo, launches: KernelLaunches | None = None
                  ) -> dict[str, PhaseKernel] | None:
    """Phase name -> its kernel as NVIDIA's compiler built it for ``device``: registers and
    shared memory per work-group, and the work-groups they let an SM hold (``launches``: the
    kernels' launches, default: the device's, as a :class:`~raytracer.mesh.tracer.Tracer` on it
    uses them).

    None on any device that is not NVIDIA's (nothing is built or queried there), and where
    nothing could be read (with a warning)."""
    if device.runtime != NVIDIA:
        return None
    try:
        _, dev = choose_device(device.spec)
        capability = compute_capability(dev)
        if capability is None:
            _unknown(device, "the tracer's kernels", "the device reports no compute capability")
            return None
        limits = limits_for_compute_capability(*capability)
        if launches is None:
            spec = device.spec
            launches = device_launches(dev, kernel_source(), KERNELS,
                                       lambda options: time_launches(spec, options),
                                       device.simd_width, (RAY_PACKET,))
        source = with_sub_groups(kernel_source(), {k: launches[k].sub_group for k in KERNELS})
        context = cl.Context([dev])
        entries = {p.name: kernel_for(p.kernel, launches[p.kernel]) for p in PHASE_LIST}
        options = build_options(device)
        resources = kernel_resources(source, options, context, dev)
        if any(_registers(resources, e) is None for e in entries.values()):
            # NVIDIA's driver caches builds, and a cached build logs nothing: build it anew
            fresh = [*options, f"-DAUTOTUNE_RESOURCES_BUILD={time.time_ns()}"]
            resources = kernel_resources(source, fresh, context, dev)
    except (DeviceError, NvidiaFiguresError, cl.Error, ValueError) as exc:
        _unknown(device, "the tracer's kernels", f"{type(exc).__name__}: {exc}")
        return None
    out: dict[str, PhaseKernel] = {}
    for p in PHASE_LIST:
        entry, launch = entries[p.name], launches[p.kernel]
        res = resources.get(entry) or KernelResources()
        threads = launch.group[0] * launch.group[1]
        occ = (occupancy(limits, threads, res.registers, res.shared_bytes or 0)
               if res.registers is not None else None)
        out[p.name] = PhaseKernel(entry, threads, res, occ)
    return out


def kernel_occupancy(device: DeviceInfo, launches: KernelLaunches | None = None
                     ) -> dict[str, int] | None:
    """Phase name -> work-groups of its kernel resident per core (SM) on ``device``
    (:func:`phase_kernels`). A phase whose registers are not reported, or whose work-group
    does not fit, is left out with a warning: the model then uses the profile's
    ``max_blocks_per_core`` for it. None on a device that is not NVIDIA's."""
    kernels = phase_kernels(device, launches)
    if kernels is None:
        return None
    out: dict[str, int] = {}
    for phase, kernel in kernels.items():
        if kernel.occupancy is None:
            _unknown(device, f"{phase} ({kernel.entry})", "the build logged no registers for "
                     "it; run with CUDA_CACHE_DISABLE=1 to force a logged build")
        elif kernel.occupancy.active_blocks < 1:
            _unknown(device, f"{phase} ({kernel.entry})",
                     f"a work-group does not fit, by {kernel.occupancy.limiter}")
        else:
            out[phase] = kernel.occupancy.active_blocks
    return out or None


def _unknown(device: DeviceInfo, what: str, why: str) -> None:
    warnings.warn(f"occupancy of {what} on {device.name} is unknown ({why}); the model "
                  f"uses the profile's max_blocks_per_core there", stacklevel=4)


def _registers(resources: Mapping[str, KernelResources], entry: str) -> int | None:
    res = resources.get(entry)
    return None if res is None else res.registers
