"""What an OpenCL device does on this machine, measured once and cached: whether it builds a
kernel at all, how many work-items run in lockstep, and its clock.

Drivers do not say these reliably. PoCL 3.0's LLVM rejects CPUs newer than it (every build on
an AMD Zen 5 fails with ``unknown target CPU 'generic'``); Intel's CPU runtime reports a clock of
0 MHz and a ``PREFERRED_WORK_GROUP_SIZE_MULTIPLE`` of 128 that is not its SIMD width. So:

* **builds**: a small kernel is built; the driver's first error line is kept.
* **SIMD width**: a kernel whose work-items loop ``work[i] * steps`` times is timed with every
  item working (uniform) and with only every k-th item working. Lanes that run in lockstep wait
  for the slowest, so while k ≤ the SIMD width W every group still holds a working item and the
  time stays that of the uniform launch; past it the time falls as W/k. Every k up to the
  work-group size is measured, and the width is the W whose curve ``min(1, W/k)`` fits all the
  ratios best (in log terms): one ratio misread on a busy machine cannot move it (1 where
  work-items run one at a time, as on PoCL: the time halves at k = 2, quarters at 4, ...).
  A measurement that no width fits closely (several ratios misread) is repeated, up to three
  times, and each k's median ratio decides if none fits. A GPU driver that reports its warp
  width (NVIDIA's ``CL_DEVICE_WARP_SIZE_NV``, AMD's wavefront width) is taken at its word
  instead: there the timing hides the width, since the idle warps of every-k launches leave
  the working ones the issue slots (an H200 read 64, twice its warp of 32).
* **clock**: the device's ``max_clock_frequency``; where it reports none (a CPU runtime), the
  OS's (``cpufreq``'s maximum, else ``/proc/cpuinfo``), else measured from a chain of dependent
  one-cycle integer operations. The source is kept beside the figure.

Results live in ``<cache>/devices/<key>.json`` (see :func:`common.cache_folder.cache_dir`),
keyed by platform, device, driver and, for CPU devices, the host CPU's family and model, so a
driver update or another CPU measures again.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyopencl as cl

from common.cache_folder import cache_dir
from common.cpu_info import cpuinfo
from raytracer.device.event_time import event_seconds
from raytracer.device.runtimes import prepare_runtimes, store_cache_file

TRAITS_VERSION = 6  # 6: a GPU driver's reported warp width where it gives one
WIDTH_ATTEMPTS = 3  # measurements of the SIMD width at most
WIDTH_MISFIT = 0.1  # a measurement's best squared log misfit that is taken (quiet: < 0.01)
SIMD_CANDIDATES = (2, 4, 8, 16, 32, 64)
# GPU drivers' own warp widths: (extension that offers the query, query code, its name)
REPORTED_WIDTHS = (("cl_nv_device_attribute_query", 0x4003, "CL_DEVICE_WARP_SIZE_NV"),
                   ("cl_amd_device_attribute_query", 0x4043, "CL_DEVICE_WAVEFRONT_WIDTH_AMD"))
LOCAL_SIZE = 64  # the tracer's 8x8 work-group
TARGET_SECONDS = 0.004  # uniform launch length the loop count is grown to
CLOCK_CHAIN_OPS = 3  # shift, xor, add: one cycle each, each waits for the one before

PROBE_SOURCE = """
__kernel void lanes(__global const int *work, __global float *out, const int steps) {
    const int i = get_global_id(0);
    float x = (float)i * 1e-6f;
    const int n = work[i] * steps;
    for (int k = 0; k < n; ++k)
        x = x * 0.99990f + 0.5f;
    out[i] = x;
}
"""


@dataclass(frozen=True)
class DeviceTraits:
    """Measured facts of one device on this machine (see the module docstring)."""

    builds: bool
    build_error: str  # the driver's first error line; "" when it builds
    simd_width: int  # work-items that run in lockstep (1: one at a time)
    simd_source: str
    clock_mhz: float  # 0 when unknown
    clock_source: str


def _first_error_line(text: str) -> str:
    """The line of a build log that says what went wrong (``error: ...``), else its first."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in lines:
        if "error" in line.lower() and "clBuildProgram failed" not in line:
            return line
    return lines[0] if lines else "build failed"


def host_cpu_signature() -> str:
    """Vendor, family, model and stepping of this machine's CPU (from ``/proc/cpuinfo``)."""
    fields = cpuinfo()
    if not fields:
        return "unknown-cpu"
    keys = ("vendor_id", "cpu family", "model", "stepping", "model name")
    return " ".join(fields.get(k, "?") for k in keys)


def traits_key(device: cl.Device) -> str:
    """A file-name-safe key for this device, driver and (CPU devices) host CPU."""
    parts = [device.platform.name, device.name, device.driver_version]
    if device.type & cl.device_type.CPU:
        parts.append(hashlib.sha256(host_cpu_signature().encode()).hexdigest()[:12])
    return re.sub(r"[^a-z0-9]+", "-", " ".join(parts).lower()).strip("-")


def os_clock_mhz() -> tuple[float, str]:
    """This CPU's clock from the OS: cpufreq's maximum, else ``/proc/cpuinfo``; (0, "") if none."""
    sysfs = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    try:
        return int(sysfs.read_text()) / 1000.0, f"OS: {sysfs}"
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("cpu mhz"):
                    return float(line.split(":")[1]), "OS: /proc/cpuinfo cpu MHz"
    except (OSError, ValueError, IndexError):
        pass
    return 0.0, ""


def measure_clock_mhz(iterations: int = 30_000_000) -> float:
    """This core's clock from a chain of dependent one-cycle integer operations (best of 3)."""
    from numba import njit  # lazy: a heavy import; only this clock measurement needs it

    @njit(cache=False)
    def chain(n: int, seed: int) -> int:
        x = seed
        for _ in range(n):
            x = (x ^ (x >> 1)) + 1
        return x

    chain(1000, 1)  # compile
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        chain(iterations, 7)
        best = min(best, time.perf_counter() - start)
    return CLOCK_CHAIN_OPS * iterations / best / 1e6


def device_clock(device: cl.Device) -> tuple[float, str]:
    """(MHz, where the figure comes from) for ``device``."""
    reported = float(device.max_clock_frequency or 0)
    if reported > 0:
        return reported, "reported by the OpenCL device"
    if device.type & cl.device_type.CPU:
        mhz, source = os_clock_mhz()
        if mhz > 0:
            return mhz, source
        return measure_clock_mhz(), "measured: dependent integer chain, 3 cycles a step"
    return 0.0, "unknown: the device reports none"


def _launch_seconds(queue: cl.CommandQueue, kernel: cl.Kernel, items: int, work: cl.Buffer,
                    out: cl.Buffer, steps: int) -> float:
    """One launch's time in seconds, from its profiling event."""
    kernel.set_args(work, out, np.int32(steps))
    event = cl.enqueue_nd_range_kernel(queue, kernel, (items,), (LOCAL_SIZE,))
    event.wait()
    return event_seconds(event)


def width_misfit(width: int, ratios: dict[int, float]) -> float:
    """Squared log error of the curve ``min(1, width / k)`` against the measured every-k-th-item
    / uniform time ratios."""
    return sum(math.log(max(r, 1e-6) / min(1.0, width / k)) ** 2 for k, r in ratios.items())


def width_from_ratios(ratios: dict[int, float]) -> int:
    """The SIMD width W (1 or a measured k) whose curve ``min(1, W / k)`` fits the measured
    ratios best (:func:`width_misfit`); the smaller W on a tie."""
    return min([1, *sorted(ratios)], key=lambda width: width_misfit(width, ratios))


def width_from_attempts(measure: Callable[[], dict[int, float]],
                        attempts: int = WIDTH_ATTEMPTS) -> int:
    """The width of the first of up to ``attempts`` measurements (``measure()``: ratios per k)
    whose best curve fits within :data:`WIDTH_MISFIT`; if none does, the width of each k's
    median ratio over them. A measurement on a loaded machine can misread several k at once:
    a fresh-clone CI run read PoCL's width as 2 where quiet measurements fit 1 within 0.01."""
    measured = []
    for _ in range(attempts):
        ratios = measure()
        width = width_from_ratios(ratios)
        if width_misfit(width, ratios) <= WIDTH_MISFIT:
            return width
        measured.append(ratios)
    return width_from_ratios({k: float(np.median([r[k] for r in measured]))
                              for k in measured[0]})


def measure_simd_width(context: cl.Context, program: cl.Program, device: cl.Device) -> int:
    """Work-items in lockstep, from uniform vs every-k-th-item launches (module docstring).

    Each every-k launch is compared with uniform launches timed alternately with it (best of
    three each), so that a stretch of the machine slowed by something else (another runtime's
    worker threads still spinning, say) slows both sides of a comparison alike. Each every-k
    buffer is launched once untimed first: on PoCL 3.1 the first launches on a new buffer read
    0.35-0.86 of the uniform time at k = 2 where warmed ones read 0.50. Even warmed, a busy CI
    machine once read PoCL's k = 2 above 0.7 (a width of 2 by a threshold on that ratio alone),
    hence the fit over every k."""
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    kernel = cl.Kernel(program, "lanes")
    items = int(device.max_compute_units) * LOCAL_SIZE * 16
    index = np.arange(items)
    mf = cl.mem_flags
    out = cl.Buffer(context, mf.WRITE_ONLY, 4 * items)

    def buffer(every: int) -> cl.Buffer:
        flags = (index % every == 0).astype(np.int32)
        return cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=flags)

    uniform = buffer(1)
    steps = 64
    while (min(_launch_seconds(queue, kernel, items, uniform, out, steps) for _ in range(3))
           < TARGET_SECONDS and steps < 1 << 20):
        steps *= 4
    sparse = {every: buffer(every) for every in SIMD_CANDIDATES if every <= LOCAL_SIZE}

    def ratios() -> dict[int, float]:
        measured = {}
        for every, flags in sparse.items():
            t_uniform = t_sparse = math.inf
            _launch_seconds(queue, kernel, items, flags, out, steps)  # warm the buffer
            for _ in range(3):
                t_uniform = min(t_uniform,
                                _launch_seconds(queue, kernel, items, uniform, out, steps))
                t_sparse = min(t_sparse, _launch_seconds(queue, kernel, items, flags, out, steps))
            measured[every] = t_sparse / t_uniform
        return measured

    return width_from_attempts(ratios)


def reported_simd_width(device: cl.Device) -> tuple[int, str] | None:
    """``(width, source)`` where the driver reports its warp width, else None."""
    extensions = str(device.extensions).split()
    for extension, code, name in REPORTED_WIDTHS:
        if extension not in extensions:
            continue
        try:
            width = int(device.get_info(code))
        except (cl.Error, ValueError, TypeError):
            continue
        if width > 0:
            return width, f"reported by the driver ({name})"
    return None


def measure_traits(device: cl.Device) -> DeviceTraits:
    """Build a small kernel on ``device``; if it builds, measure its SIMD width; and its clock."""
    clock, clock_source = device_clock(device)
    context = cl.Context([device])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)  # Intel's, on every build
            program = cl.Program(context, PROBE_SOURCE).build()
    except cl.Error as exc:
        return DeviceTraits(False, _first_error_line(str(exc)), 1, "", clock, clock_source)
    width, source = (reported_simd_width(device)
                     or (measure_simd_width(context, program, device),
                         "measured: divergent vs uniform kernel"))
    return DeviceTraits(True, "", width, source, clock, clock_source)


_memo: dict[str, DeviceTraits] = {}


def _load(path: Path) -> DeviceTraits | None:
    try:
        data = json.loads(path.read_text())
        if data.get("version") != TRAITS_VERSION:
            return None
        return DeviceTraits(**data["traits"])
    except (OSError, ValueError, TypeError, KeyError):
        return None  # absent or unreadable: measure again and overwrite


def device_traits(device: cl.Device) -> DeviceTraits:
    """The cached traits of ``device``, measured on first use (a build and a few launches).
    The runtimes are readied first (:func:`prepare_runtimes`; a no-op after the device layer's
    own query), so a device found by a caller's own platform query builds the probe as ours do."""
    prepare_runtimes()
    key = traits_key(device)
    if key in _memo:
        return _memo[key]
    path = cache_dir() / "devices" / f"{key}.json"
    traits = _load(path)
    if traits is None:
        traits = measure_traits(device)
        store_cache_file(path, {"version": TRAITS_VERSION, "traits": asdict(traits)})
    _memo[key] = traits
    return traits
