"""OpenCL microbenchmarks that measure a device's Hong–Kim parameters.

The parameters of Table 4 of Ganestam & Doggett, "Auto-tuning Interactive Ray Tracing using an
Analytical GPU Architecture Model" (§3).

Four measurements, in the spirit of Hong & Kim (ISCA 2009), each timed with profiling
events as the slope between two loop lengths (so launch overhead cancels):

1. memory latency ``c_ml``: one work-item chases pointers through a random single-cycle
   permutation of a buffer much larger than the last-level cache; seconds per dependent
   load times the clock gives cycles (the device's, else the OS's or a measured one: a CPU
   runtime may report none; see :mod:`raytracer.device.traits`);
2. departure delays: every work-item issues dependent loads, coalesced (lanes of a warp read
   consecutive words) or uncoalesced (every lane a random word of its own), at growing
   occupancy ``n`` warps per core. With ``n`` warps in flight a round of loads takes
   ``max(latency, n * departure_delay)`` cycles; ``fit_departure_delay`` fits both from the
   curve (the slope where the memory system, not latency, limits);
3. issue cycles ``C_i``: 8 independent chains of dependent multiply-adds per work-item over
   32 warps per core; cycles per warp instruction per core, a multiply-add counted as one
   instruction (one FMA, as PTX counts it);
4. effective read bandwidth in GB/s: a grid-stride float4 sweep over the large buffer.

Device terms: a core is an OpenCL compute unit (an SM, a SIMD engine, or on a CPU a hardware
thread); a warp is the work-items that run in lockstep, as measured for the device
(:attr:`raytracer.device.choice.DeviceInfo.simd_width`: 32 on NVIDIA, 16 for Intel's CPU
runtime on AVX-512, 1 for PoCL, which runs work-items one at a time). Launches use one warp per
work-group, so ``n`` warps per core are ``n * cores`` work-groups; where a warp is one
work-item, each work-item streams its own contiguous range instead of interleaving with its
neighbours.

Occupancy on NVIDIA: where the device reports its compute capability
(``cl_nv_device_attribute_query``), the occupancy sweep stops at the warps per core that can be
resident at once in one-warp work-groups (``models.occupancy``: 32 on an H100/H200, whose SMs
hold 64 warps but only 32 work-groups; more warps would run in waves, not in flight together),
and the profile's ``max_blocks_per_core`` is the calculator's for the tracer's 64-item groups.

The uncoalesced departure delay is stored per memory transaction, the unit of
``DeviceProfile.dep_delay_uncoal``: the fitted per-warp delay divided by the transactions of
one warp access, taken as the warp size (each lane touches its own cache line).

The device comes from :func:`raytracer.device.choice.choose_device`, like the tracer's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np
import pyopencl as cl
from numpy.typing import ArrayLike

from models.device_profile import DeviceProfile
from models.occupancy import Occupancy, limits_for_compute_capability, occupancy
from raytracer.device.choice import DeviceError, DeviceInfo, build_quietly, choose_device
from raytracer.device.event_time import event_seconds
from raytracer.device.nvidia import compute_capability
from raytracer.device.traits import LOCAL_SIZE

CHAINS = 8  # independent FMA chains per work-item in fma_chain (see microbench.cl)
QUICK_WARPS = (1, 2, 4, 8, 16, 32)
FULL_WARPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
Progress = Callable[[str], None]


class MicrobenchError(RuntimeError):
    """No OpenCL device, a kernel that failed to build, or a measurement that makes no sense."""


@dataclass(frozen=True)
class DepartureFit:
    """Fit of ``cycles = max(latency, n * departure_delay)`` to a per-occupancy curve."""

    latency: float  # cycles per round while latency bound (flat part)
    departure_delay: float  # cycles per warp where the memory system limits (slope)
    limited_points: int  # points on the sloped part; 0 means departure_delay is an upper bound


@dataclass(frozen=True)
class MicrobenchResult:
    """Measured Hong–Kim parameters of one device (cycles at ``clock_ghz``) and raw data."""

    device_name: str
    cores: int
    warp_size: int
    clock_ghz: float
    mem_latency_cycles: float  # c_ml from pointer chasing
    dep_delay_coal: float  # cycles between coalesced warp accesses
    dep_delay_uncoal: float  # cycles per transaction of an uncoalesced warp access
    transactions_per_uncoal: int  # transactions of one uncoalesced warp access (= warp size)
    issue_cycles: float  # C_i: cycles per warp instruction per core
    bandwidth_gbs: float  # effective read bandwidth
    quick: bool
    raw: dict[str, Any] = field(default_factory=dict, hash=False)  # every measurement


def fit_departure_delay(warps_per_core: ArrayLike, cycles_per_round: ArrayLike) -> DepartureFit:
    """Fit ``max(latency, n * dd)`` to (warps, cycles) by trying every split into flat and
    sloped points (geometric means in each part, least squares in log space)."""
    n = np.asarray(warps_per_core, dtype=np.float64)
    y = np.asarray(cycles_per_round, dtype=np.float64)
    if n.shape != y.shape or n.ndim != 1 or len(n) < 2:
        raise ValueError("need two equally long 1-D sequences of at least 2 points")
    if not (np.all(np.isfinite(n)) and np.all(np.isfinite(y)) and np.all(n > 0) & np.all(y > 0)):
        raise ValueError("warps and cycles must be finite and positive")
    order = np.argsort(n, kind="stable")
    n, y = n[order], y[order]
    log_y = np.log(y)
    best: tuple[float, DepartureFit] | None = None
    for k in range(len(n), -1, -1):  # the first k points are latency bound (ties: more)
        dd = math.exp(float(np.mean(log_y[k:] - np.log(n[k:])))) if k < len(n) else None
        lat = math.exp(float(np.mean(log_y[:k]))) if k > 0 else None
        if lat is None:
            assert dd is not None
            lat = dd * float(n[0])  # all sloped: the knee is at or below the first point
        if dd is None:
            dd = lat / float(n[-1])  # all flat: the knee is at or past the last point
        sse = float(np.sum((np.log(np.maximum(lat, n * dd)) - log_y) ** 2))
        if best is None or sse < best[0] - 1e-12:
            best = (sse, DepartureFit(lat, dd, len(n) - k))
    assert best is not None
    return best[1]


# --------------------------------------------------------------------------- device helpers


def _is_cpu(device: cl.Device) -> bool:
    return bool(device.type & cl.device_type.CPU)


def _warp_items(info: DeviceInfo, device: cl.Device) -> int:
    """Work-items of one warp as the benchmarks launch it (their work-group size)."""
    return min(info.simd_width, device.max_work_group_size)


def nvidia_occupancy(device: cl.Device, items_per_group: int) -> Occupancy | None:
    """Resident work-groups of ``items_per_group`` items per SM by the occupancy calculator, on
    an NVIDIA device that reports a compute capability the table knows (else None).

    Registers and shared memory depend on the kernel and are unknown here, so the limit is the
    one without them (no registers, no shared memory beyond the driver's reserve): an upper
    bound that a register-hungry kernel may not reach.
    """
    cc = compute_capability(device)
    if cc is None:
        return None
    try:
        limits = limits_for_compute_capability(*cc)
    except ValueError:  # a capability newer than the table: keep the vendor guess
        return None
    return occupancy(limits, items_per_group, None, 0)


def default_warps_per_core(info: DeviceInfo, device: cl.Device, quick: bool
                           ) -> tuple[int, ...]:
    """The occupancy sweep: QUICK_WARPS or FULL_WARPS, cut at the warps per core that can be
    resident at once in one-warp work-groups where :func:`nvidia_occupancy` knows them."""
    warps = QUICK_WARPS if quick else FULL_WARPS
    occ = nvidia_occupancy(device, _warp_items(info, device))
    if occ is None:
        return warps
    return tuple(n for n in warps if n <= occ.active_warps)


def kernel_source() -> str:
    """The OpenCL C source of the microbenchmark kernels."""
    path = resources.files("governed.mesh") / "kernels" / "microbench.cl"
    return path.read_text()


# --------------------------------------------------------------------------- runner


class _Bench:
    """One device's context, queue, kernels and timing helpers."""

    def __init__(self, info: DeviceInfo, device: cl.Device, quick: bool,
                 progress: Progress) -> None:
        self.device = device
        self.quick = quick
        self.progress = progress
        self.ctx = cl.Context([device])
        self.queue = cl.CommandQueue(
            self.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE
        )
        try:
            self.program = build_quietly(cl.Program(self.ctx, kernel_source()),
                                         ["-cl-mad-enable"])
        except cl.Error as exc:
            raise MicrobenchError(
                f"governed/mesh/kernels/microbench.cl failed to build on "
                f"{device.name.strip()}:\n{exc}"
            ) from None
        self.kernels = {
            name: cl.Kernel(self.program, name)
            for name in ("chase", "stream_coal", "stream_uncoal", "fma_chain", "read_bw")
        }
        self.target_s = 0.01 if quick else 0.05
        self.repeats = 3 if quick else 5
        self.cores = int(device.max_compute_units)
        self.warp = _warp_items(info, device)
        self.serial_items = self.warp == 1  # work-items run one at a time (PoCL)
        self.clock_hz = float(info.clock_mhz) * 1e6
        if self.clock_hz <= 0:
            raise MicrobenchError(f"{info.name}: no clock frequency ({info.clock_source})")

    def strides(self, items: int, words: int) -> tuple[int, int]:
        """(lane_stride, round_stride) of the device's best streaming pattern over ``words``."""
        if self.serial_items:
            return max(1, words // items), 1
        return 1, items

    def run(self, kernel: cl.Kernel, global_size: int, local_size: int | None, *args: Any) -> float:
        """Seconds of one launch from its profiling event (best of ``repeats``)."""
        kernel.set_args(*args)
        best = math.inf
        local = (local_size,) if local_size else None
        for _ in range(self.repeats):
            event = cl.enqueue_nd_range_kernel(self.queue, kernel, (global_size,), local)
            event.wait()
            best = min(best, event_seconds(event))
        return best

    def per_iter(self, timed: Callable[[int], float], iters0: int, max_iters: int) -> float:
        """Seconds per loop iteration: slope between two loop lengths sized to the target."""
        iters = iters0
        t = timed(iters)
        while t < self.target_s / 4 and iters < max_iters:
            iters = min(max_iters, iters * 4)
            t = timed(iters)
        iters = int(min(max_iters, max(iters, iters * self.target_s / max(t, 1e-9))))
        half = max(1, iters // 2)
        t_half, t_full = timed(half), timed(iters)
        slope = (t_full - t_half) / (iters - half) if iters > half else 0.0
        if not slope > 0:  # noisy device: fall back to the mean including overhead
            slope = t_full / iters
        return slope


def _progress_callback(progress: bool | Progress | None, total: int) -> tuple[Progress, Any]:
    if callable(progress):
        return progress, None
    if progress:
        from tqdm import tqdm  # lazy: only a progress bar needs it

        bar = tqdm(total=total, desc="microbenchmarks", unit="step")

        def tick(msg: str) -> None:
            bar.set_postfix_str(msg)
            bar.update(1)

        return tick, bar
    return (lambda msg: None), None


def run_microbench(
    info: DeviceInfo,
    device: cl.Device,
    quick: bool = False,
    progress: bool | Progress | None = None,
    seed: int = 0,
    warps_per_core: Sequence[int] | None = None,
) -> MicrobenchResult:
    """Measure latency, departure delays, issue cycles and bandwidth of ``device`` (``info``:
    what :func:`~raytracer.device.choice.choose_device` measured of it: SIMD width, clock).

    ``progress``: True for a tqdm bar, or a callable given one message per finished step.
    ``quick`` takes a few seconds (64 MiB buffer, short timings); the full run is steadier.
    ``warps_per_core``: the occupancy sweep, run as given; default
    :func:`default_warps_per_core`.
    """
    warps = tuple(warps_per_core or default_warps_per_core(info, device, quick))
    tick, bar = _progress_callback(progress, 4 + 2 * len(warps))
    try:
        return _measure(info, device, quick, warps, seed, tick)
    finally:
        if bar is not None:
            bar.close()


def _buffer_words(device: cl.Device, quick: bool) -> int:
    """Power-of-two buffer length in 32-bit words: 64 MiB quick, 256 MiB full, at least twice
    the device's reported cache, capped by its allocation limit."""
    want = max((64 if quick else 256) << 20, 2 * int(device.global_mem_cache_size or 0))
    cap = min(int(device.max_mem_alloc_size), int(device.global_mem_size) // 4)
    return (1 << int(math.floor(math.log2(min(want, cap))))) // 4


def _chain_buffer(b: _Bench, n_words: int, seed: int) -> cl.Buffer:
    """A device buffer holding one random cycle through all ``n_words`` words (for chasing)."""
    perm = np.random.default_rng(seed).permutation(n_words).astype(np.uint32)
    nxt = np.empty(n_words, np.uint32)
    nxt[perm[:-1]] = perm[1:]  # one cycle through every word
    nxt[perm[-1]] = perm[0]
    return cl.Buffer(b.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=nxt)


def _latency_seconds(b: _Bench, data: cl.Buffer, out: cl.Buffer, n_words: int) -> float:
    """Seconds per dependent load: one work-item chasing pointers through the buffer."""
    chase = b.kernels["chase"]
    return b.per_iter(lambda s: b.run(chase, 1, 1, data, np.uint32(0), np.int32(s), out),
                      1 << 10, min(n_words * 4, 1 << 24))


def _stream_cycles(b: _Bench, data: cl.Buffer, out: cl.Buffer, n_words: int,
                   warps: tuple[int, ...], coalesced: bool) -> list[float]:
    """Cycles per round of dependent loads at each occupancy (warps per core)."""
    mask = np.uint32(n_words - 1)
    kernel = b.kernels["stream_coal" if coalesced else "stream_uncoal"]
    cycles = []
    for n in warps:
        items = b.cores * n * b.warp
        if coalesced:
            lane, step = (np.uint32(x) for x in b.strides(items, n_words))
            per = b.per_iter(lambda k, items=items, lane=lane, step=step: b.run(
                kernel, items, b.warp, data, mask, lane, step, np.int32(k), out), 16, 1 << 22)
        else:
            per = b.per_iter(lambda k, items=items: b.run(
                kernel, items, b.warp, data, mask, np.int32(k), out), 4, 1 << 22)
        cycles.append(per * b.clock_hz)
        b.progress(f"{'coalesced' if coalesced else 'uncoalesced'} {n} warps/core")
    return cycles


def _fma_round_seconds(b: _Bench, out: cl.Buffer, warps: int) -> float:
    """Seconds per round of ``CHAINS`` dependent multiply-adds over ``warps`` warps per core."""
    items = b.cores * warps * b.warp
    fma = b.kernels["fma_chain"]
    return b.per_iter(lambda k: b.run(fma, items, b.warp, np.int32(k), np.float32(0.999999),
                                      np.float32(1e-7), out), 64, 1 << 24)


def _bandwidth(b: _Bench, data: cl.Buffer, out: cl.Buffer, n_words: int
               ) -> tuple[float, float, int]:
    """(GB/s, seconds, bytes) of one float4 sweep over the buffer at 32 warps per core."""
    items = b.cores * 32 * b.warp
    per_item = n_words // 4 // items
    bytes_read = 16 * per_item * items
    lane, step = (np.uint32(x) for x in b.strides(items, n_words // 4))
    seconds = b.run(b.kernels["read_bw"], items, b.warp, data, lane, step, np.int32(per_item),
                    out)
    return bytes_read / seconds / 1e9, seconds, bytes_read


def _measure(
    info: DeviceInfo, device: cl.Device, quick: bool, warps: tuple[int, ...], seed: int,
    tick: Progress,
) -> MicrobenchResult:
    b = _Bench(info, device, quick, tick)
    tick("build")
    n_words = _buffer_words(device, quick)
    data = _chain_buffer(b, n_words, seed)
    out = cl.Buffer(b.ctx, cl.mem_flags.READ_WRITE, size=4 * b.cores * max(max(warps), 32)
                    * b.warp)
    latency_s = _latency_seconds(b, data, out, n_words)
    mem_latency = latency_s * b.clock_hz
    tick("latency")
    cl.enqueue_fill_buffer(b.queue, data, np.uint32(0), 0, 4 * n_words).wait()
    coal_cycles = _stream_cycles(b, data, out, n_words, warps, coalesced=True)
    uncoal_cycles = _stream_cycles(b, data, out, n_words, warps, coalesced=False)
    fit_c = fit_departure_delay(warps, coal_cycles)
    fit_u = fit_departure_delay(warps, uncoal_cycles)
    compute_warps = 32
    per = _fma_round_seconds(b, out, compute_warps)
    issue_cycles = per * b.clock_hz / (compute_warps * CHAINS)
    tick("compute")
    bandwidth, t_bw, bytes_read = _bandwidth(b, data, out, n_words)
    tick("bandwidth")
    data.release()
    out.release()

    values = {
        "mem_latency": mem_latency,
        "dep_delay_coal": fit_c.departure_delay,
        "dep_delay_uncoal": fit_u.departure_delay / b.warp,
        "issue_cycles": issue_cycles,
        "bandwidth_gbs": bandwidth,
    }
    for key, value in values.items():
        if not (math.isfinite(value) and value > 0):
            raise MicrobenchError(f"{device.name.strip()}: measured {key} = {value} is unusable")
    raw = {
        "clock_source": info.clock_source,
        "simd_width_source": info.simd_source,
        "buffer_bytes": 4 * n_words,
        "seconds_per_dependent_load": latency_s,
        "warps_per_core": list(warps),
        "coal_cycles_per_round": coal_cycles,
        "uncoal_cycles_per_round": uncoal_cycles,
        "coal_fit": vars(fit_c),
        "uncoal_fit": vars(fit_u),
        "dep_delay_uncoal_per_warp": fit_u.departure_delay,
        "compute_warps_per_core": compute_warps,
        "fma_chains": CHAINS,
        "seconds_per_fma_round": per,
        "bandwidth_seconds": t_bw,
        "bandwidth_bytes": bytes_read,
    }
    return MicrobenchResult(
        device_name=device.name.strip(),
        cores=b.cores,
        warp_size=b.warp,
        clock_ghz=b.clock_hz / 1e9,
        mem_latency_cycles=mem_latency,
        dep_delay_coal=fit_c.departure_delay,
        dep_delay_uncoal=fit_u.departure_delay / b.warp,
        transactions_per_uncoal=b.warp,
        issue_cycles=issue_cycles,
        bandwidth_gbs=bandwidth,
        quick=quick,
        raw=raw,
    )


def profile_from_microbench(
    result: MicrobenchResult,
    device_name: str,
    driver: str,
    cores: int,
    warp_size: int,
    clock_ghz: float,
    max_blocks_per_core: int,
) -> DeviceProfile:
    """A DeviceProfile from measurements; cycle figures are rescaled if ``clock_ghz`` differs
    from the clock the measurement assumed (seconds are what was measured)."""
    scale = clock_ghz / result.clock_ghz
    return DeviceProfile(
        name=device_name,
        driver=driver,
        cores=cores,
        warp_size=warp_size,
        issue_cycles=result.issue_cycles * scale,
        max_blocks_per_core=max_blocks_per_core,
        clock_ghz=clock_ghz,
        bandwidth_gbs=result.bandwidth_gbs,
        mem_latency=result.mem_latency_cycles * scale,
        dep_delay_coal=result.dep_delay_coal * scale,
        dep_delay_uncoal=result.dep_delay_uncoal * scale,
        transactions_per_uncoal=result.transactions_per_uncoal,
        source=(
            f"microbenchmarks ({'quick' if result.quick else 'full'}) on "
            f"{result.device_name}, governed.mesh.microbench; cycles at "
            f"{result.clock_ghz:.3f} GHz, clock from "
            f"{result.raw.get('clock_source') or 'the device'}"
        ),
    )


def default_max_blocks_per_core(device: cl.Device) -> int:
    """Occupancy limit for the tracer's 64-item work-groups: 1 per CPU thread (PoCL); on an
    NVIDIA device reporting its compute capability, :func:`nvidia_occupancy`'s (registers not
    counted); else a guess: 16 per NVIDIA SM, 8 otherwise."""
    if _is_cpu(device):
        return 1
    occ = nvidia_occupancy(device, LOCAL_SIZE)
    if occ is not None:
        return occ.active_blocks
    return 16 if "nvidia" in device.vendor.lower() else 8


def measure_device_profile(
    spec: str | None = None,
    quick: bool = False,
    progress: bool | Progress | None = None,
    max_blocks_per_core: int | None = None,
) -> DeviceProfile:
    """Run the microbenchmarks on a device (``spec`` as ``--device`` takes it; default: the
    device :func:`~raytracer.device.choice.choose_device` picks) and profile it."""
    try:
        info, device = choose_device(spec)
    except DeviceError as exc:
        raise MicrobenchError(str(exc)) from None
    result = run_microbench(info, device, quick=quick, progress=progress)
    return profile_from_microbench(
        result,
        device_name=info.name,
        driver=info.driver,
        cores=result.cores,
        warp_size=result.warp_size,
        clock_ghz=result.clock_ghz,
        max_blocks_per_core=max_blocks_per_core or default_max_blocks_per_core(device),
    )
