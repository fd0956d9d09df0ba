"""OpenCL device discovery and choice: the first GPU that builds, else the preferred CPU runtime
that builds; forced with ``--device`` / ``$AUTOTUNE_DEVICE``; optionally cut to fewer compute
units (``$AUTOTUNE_COMPUTE_UNITS``: each CPU runtime's thread setting, else device fission).

Two CPU runtimes come from pip and behave differently: PoCL runs work-items one at a time and its
LLVM 14 cannot build for CPUs newer than it (AMD Zen 5); Intel's CPU runtime packs work-items
into SIMD lanes and reports no clock. Whether a device builds, its SIMD width and its clock are
measured once per device and driver (:mod:`raytracer.device.traits`). A device that cannot build
is never chosen by default; forcing one is an error that names it and the way out.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, replace

import pyopencl as cl

from raytracer.device.runtimes import COMPUTE_UNITS_ENV, THREAD_LIMIT_ENV, prepare_runtimes
from raytracer.device.traits import device_traits

DEVICE_ENV = "AUTOTUNE_DEVICE"
INSTALL_HINT = ("install a CPU OpenCL runtime with `pip install intel-opencl-rt "
                "intel-cmplr-lib-rt` (x86-64) or `pip install pocl-binary-distribution`, "
                "or a GPU vendor's OpenCL driver")
# Default choice among CPU runtimes that build, first preferred. Intel's runtime runs the
# kernels in SIMD lanes and builds on every x86-64 CPU it supports; PoCL 3.0 fails on CPUs
# newer than its LLVM (docs/opencl-runtimes.md).
CPU_RUNTIME_PREFERENCE = ("intel-cpu", "pocl")


class DeviceError(RuntimeError):
    """No usable OpenCL device, or a device specification that matches none or cannot build."""


@dataclass(frozen=True)
class DeviceInfo:
    """One OpenCL device as ``autotune devices`` lists it, with what was measured of it here."""

    platform_index: int
    device_index: int
    platform: str
    name: str
    kind: str  # "GPU" | "CPU" | "ACCELERATOR" | "OTHER"
    compute_units: int
    clock_mhz: float
    global_mem_mb: int
    driver: str
    simd_width: int  # work-items that execute in lockstep (a warp; 1 where each runs alone)
    runtime: str = ""  # "pocl", "intel-cpu", "nvidia", "amd", ... (see runtime_of)
    clock_source: str = ""
    simd_source: str = ""
    builds: bool = True
    build_error: str = ""

    @property
    def spec(self) -> str:
        """``P:D``, as ``--device`` takes it."""
        return f"{self.platform_index}:{self.device_index}"

    @property
    def is_pocl(self) -> bool:
        return self.runtime == "pocl"

    def describe(self) -> str:
        """One line: where it is, what it is, and whether it builds here."""
        state = "builds" if self.builds else f"cannot build here: {self.build_error}"
        clock = f"{self.clock_mhz:.0f} MHz ({self.clock_source})" if self.clock_mhz else "no clock"
        return (f"{self.spec}  {self.kind:<4} {self.name} [{self.platform}; {self.runtime}; "
                f"{self.compute_units} CUs; SIMD {self.simd_width}; {clock}; "
                f"{self.global_mem_mb} MiB; driver {self.driver}] {state}")


def _kind(device: cl.Device) -> str:
    t = device.type
    if t & cl.device_type.GPU:
        return "GPU"
    if t & cl.device_type.CPU:
        return "CPU"
    if t & cl.device_type.ACCELERATOR:
        return "ACCELERATOR"
    return "OTHER"


def runtime_of(platform_name: str, vendor: str) -> str:
    """A short name of the OpenCL runtime: ``pocl``, ``intel-cpu``, ``nvidia``, ``amd``, ..."""
    p, v = platform_name.lower(), vendor.lower()
    if "portable computing language" in p:
        return "pocl"
    if "intel" in p and "opencl" in p and "graphics" not in p:
        return "intel-cpu" if "fpga" not in p else "intel-fpga"
    if "nvidia" in p or "nvidia" in v:
        return "nvidia"
    if "amd" in p or "advanced micro" in v:
        return "amd"
    return p.split()[0] if p else "unknown"


def _info(p_i: int, d_i: int, platform: cl.Platform, dev: cl.Device) -> DeviceInfo:
    traits = device_traits(dev)
    return DeviceInfo(p_i, d_i, platform.name.strip(), dev.name.strip(), _kind(dev),
                      dev.max_compute_units, traits.clock_mhz, dev.global_mem_size // (1 << 20),
                      dev.driver_version, traits.simd_width,
                      runtime_of(platform.name, dev.vendor), traits.clock_source,
                      traits.simd_source, traits.builds, traits.build_error)


def _all_devices() -> list[tuple[DeviceInfo, cl.Device]]:
    """Every device of every platform; the runtimes are readied first (:func:`prepare_runtimes`:
    the loader reads what it finds on this first query)."""
    prepare_runtimes()
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
            found.append((_info(p_i, d_i, platform, dev), dev))
    if not found:
        raise DeviceError(f"no OpenCL device found; {INSTALL_HINT}")
    return found


def list_devices() -> list[DeviceInfo]:
    """Every OpenCL device on every platform, with whether it builds here."""
    return [info for info, _ in _all_devices()]


def one_device_per_runtime(spec: str | None = None) -> list[DeviceInfo]:
    """``spec``'s device, else the first device of every OpenCL runtime that builds here (what
    a benchmark measures to report each runtime)."""
    if spec:
        return [choose_device(spec)[0]]
    seen: dict[str, DeviceInfo] = {}
    for info in list_devices():
        if info.builds and info.runtime not in seen:
            seen[info.runtime] = info
    return list(seen.values())


def default_order(infos: list[DeviceInfo]) -> list[DeviceInfo]:
    """Devices in the order the default choice tries them: GPUs, then CPU runtimes by
    :data:`CPU_RUNTIME_PREFERENCE`, then the rest; listing order breaks ties."""
    def rank(info: DeviceInfo) -> tuple[int, int]:
        if info.kind == "GPU":
            return 0, 0
        if info.kind == "CPU":
            pref = (CPU_RUNTIME_PREFERENCE.index(info.runtime)
                    if info.runtime in CPU_RUNTIME_PREFERENCE else len(CPU_RUNTIME_PREFERENCE))
            return 1, pref
        return 2, 0
    return sorted(infos, key=rank)


_warned: set[str] = set()


def pick_default(infos: list[DeviceInfo]) -> DeviceInfo:
    """The first device of :func:`default_order` that builds; each better-ranked device that
    cannot build is reported once per process with a warning."""
    for info in default_order(infos):
        if info.builds:
            return info
        if info.spec not in _warned:
            _warned.add(info.spec)
            warnings.warn(f"skipping OpenCL device {info.spec} {info.name} ({info.platform}): "
                          f"it cannot build kernels here ({info.build_error})", stacklevel=3)
    listing = "; ".join(i.describe() for i in infos)
    raise DeviceError(f"no OpenCL device here can build kernels: {listing}; {INSTALL_HINT}")


def _match(spec: str, found: list[tuple[DeviceInfo, cl.Device]]) -> list[tuple[DeviceInfo,
                                                                             cl.Device]]:
    if spec.lower() in ("gpu", "cpu"):
        kind = spec.upper()
        order = default_order([i for i, _ in found if i.kind == kind])
        ranked = [i for i in order if i.builds] + [i for i in order if not i.builds]
        return [(i, d) for r in ranked for i, d in found if i == r]
    if ":" in spec and all(part.isdigit() for part in spec.split(":", 1)):
        p, d = (int(x) for x in spec.split(":", 1))
        return [(i, dv) for i, dv in found if (i.platform_index, i.device_index) == (p, d)]
    s = spec.lower()
    named = [(i, d) for i, d in found
             if s in i.name.lower() or s in i.platform.lower() or s == i.runtime]
    return sorted(named, key=lambda m: not m[0].builds)  # one that builds first (stable)


def compute_units_request(value: int | None = None) -> int | None:
    """Compute units asked for: ``value``, else ``$AUTOTUNE_COMPUTE_UNITS``; None for all."""
    if value is None:
        text = os.environ.get(COMPUTE_UNITS_ENV, "").strip()
        if not text:
            return None
        if not text.isdigit() or int(text) < 1:
            raise DeviceError(f"${COMPUTE_UNITS_ENV} must be a positive integer, got {text!r}")
        value = int(text)
    if value < 1:
        raise DeviceError(f"compute units must be >= 1, got {value}")
    return value


def restrict_compute_units(info: DeviceInfo, dev: cl.Device, units: int | None
                           ) -> tuple[DeviceInfo, cl.Device]:
    """``info`` and ``dev`` cut to ``units`` compute units (None: all).

    A CPU runtime with a documented thread setting got it from ``$AUTOTUNE_COMPUTE_UNITS`` when
    it loaded (:func:`raytracer.device.runtimes.limit_cpu_threads`): its device is returned as
    it is, with that count. Any other device is cut by OpenCL device fission (partition
    equally), or the request is one clear error."""
    if units is None or units >= info.compute_units:
        return info, dev
    if info.runtime in THREAD_LIMIT_ENV:
        return replace(info, compute_units=units), dev
    try:
        sub = dev.create_sub_devices([cl.device_partition_property.EQUALLY, units])[0]
    except (cl.Error, AttributeError) as exc:
        raise DeviceError(f"device {info.spec} {info.name} cannot be cut to {units} compute "
                          f"units ({exc}); unset ${COMPUTE_UNITS_ENV}") from None
    return replace(info, compute_units=int(sub.max_compute_units)), sub


def choose_device(spec: str | None = None, compute_units: int | None = None
                  ) -> tuple[DeviceInfo, cl.Device]:
    """Pick a device by ``spec`` (``gpu``, ``cpu``, ``P:D`` indices, a runtime such as
    ``intel-cpu`` / ``pocl``, or a name substring), else ``$AUTOTUNE_DEVICE``, else the first
    GPU that builds, else the preferred CPU runtime that builds (:func:`pick_default`).

    ``compute_units`` (else ``$AUTOTUNE_COMPUTE_UNITS``, which shares a machine's cores between
    processes and so applies to CPU devices only: a GPU is not cut to a core count) cuts the
    device to that many compute units. A forced device that cannot build raises
    :class:`DeviceError` naming it."""
    found = _all_devices()
    spec = (spec or os.environ.get(DEVICE_ENV) or "").strip()
    units = compute_units_request(compute_units)

    def restricted(info: DeviceInfo, dev: cl.Device) -> tuple[DeviceInfo, cl.Device]:
        cut = units if compute_units is not None or info.kind == "CPU" else None
        return restrict_compute_units(info, dev, cut)

    if not spec:
        chosen = pick_default([i for i, _ in found])
        return restricted(chosen, next(d for i, d in found if i == chosen))
    matches = _match(spec, found)
    if not matches:
        known = "; ".join(f"{i.spec} {i.name} ({i.kind}, {i.runtime})" for i, _ in found)
        raise DeviceError(f"no OpenCL device matches {spec!r}; available: {known}")
    info, dev = matches[0]
    if not info.builds:
        others = [i.spec for i, _ in found if i.builds]
        way_out = (f"choose another with --device or ${DEVICE_ENV} ({', '.join(others)} "
                   f"builds; `autotune devices` lists them)" if others else INSTALL_HINT)
        raise DeviceError(f"OpenCL device {info.spec} {info.name} ({info.platform}) cannot build "
                          f"kernels here: {info.build_error}; {way_out}")
    return restricted(info, dev)


def build_quietly(program: cl.Program, options: list[str]) -> cl.Program:
    """``program.build(options)`` without PyOpenCL's "Non-empty compiler output" warning, which
    Intel's CPU runtime triggers on every build; errors still raise."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.CompilerWarning)
        return program.build(options=options)
