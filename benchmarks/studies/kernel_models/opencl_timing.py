"""Timing the nine kernels with OpenCL profiling events on every device, over the sweep.

The kernels are those of the kernel-model paper (Amarís, de Camargo, Dyab, Goldman, Trystram,
"A Comparison of GPU Execution Time Prediction using Machine Learning and Analytical
Modeling"), in OpenCL C in ``studies/kernel_models/kernels/amaris_applications.cl``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

import numpy as np
import pyopencl as cl
from tqdm import tqdm

from benchmarks.studies.kernel_models.launches import (
    MSA_THREADS,
    TWO_D,
    DeviceFacts,
    Run,
    Sweep,
    launch_shape,
    work_exponent,
)
from governed.mesh.microbench import measure_device_profile
from governed.mesh.profile_store import find_device_profile
from models.device_profile import DeviceProfile
from raytracer.device.choice import (
    DeviceError,
    build_quietly,
    choose_device,
    one_device_per_runtime,
)
from raytracer.device.event_time import event_seconds
from studies.kernel_models.bsp import SEED_KERNELS

REPEATS = 3


def kernel_source() -> str:
    """The OpenCL C source of the nine applications."""
    kernels = resources.files("studies.kernel_models") / "kernels"
    return (kernels / "amaris_applications.cl").read_text()


class KernelBench:
    """One device's context, profiling queue and the nine kernels; times and runs launches."""

    def __init__(self, device: Any) -> None:
        self.ctx = cl.Context([device])
        self.queue = cl.CommandQueue(self.ctx,
                                     properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.program = build_quietly(cl.Program(self.ctx, kernel_source()), [])
        self.max_block = int(device.max_work_group_size)

    def inputs(self, kernel: str, n: int, seed: int = 0) -> list[np.ndarray]:
        """Host inputs of one size: two float matrices or vectors, or MSA's integers."""
        rng = np.random.default_rng(seed)
        if kernel == "MSA":
            return [rng.integers(-100, 101, n, dtype=np.int32)]
        shape = (n, n) if kernel in TWO_D else (n,)
        return [rng.random(shape, dtype=np.float32), rng.random(shape, dtype=np.float32)]

    def output_words(self, kernel: str, n: int, block: int) -> int:
        if kernel == "MSA":
            return 5 * MSA_THREADS
        if kernel == "dotP":
            return n // block
        return n * n if kernel in TWO_D else n

    def args(self, kernel: str, n: int, block: int, buffers: list, out: Any) -> list:
        """Kernel arguments: inputs, output, the size where the kernel takes one, local memory."""
        if kernel == "MSA":
            return [buffers[0], np.int32(n), out]
        if kernel == "dotP":
            return [*buffers, out, cl.LocalMemory(4 * block)]
        if kernel == "vAdd":
            return [*buffers, out]
        tiles = kernel in ("MMSU", "MMSC")
        extra = [cl.LocalMemory(4 * block), cl.LocalMemory(4 * block)] if tiles else []
        return [*buffers, out, np.int32(n), *extra]

    def launch(self, kernel: str, n: int, block: int, host: list[np.ndarray],
               repeats: int = REPEATS) -> tuple[float, np.ndarray]:
        """Best event seconds of ``repeats`` launches after one warm-up, and the output."""
        mf = cl.mem_flags
        buffers = [cl.Buffer(self.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=h) for h in host]
        dtype = np.int32 if kernel == "MSA" else np.float32
        result = np.empty(self.output_words(kernel, n, block), dtype)
        out = cl.Buffer(self.ctx, mf.WRITE_ONLY, size=result.nbytes)
        k = cl.Kernel(self.program, kernel)
        k.set_args(*self.args(kernel, n, block, buffers, out))
        global_size, local_size = launch_shape(kernel, n, block)
        best = math.inf
        for i in range(repeats + 1):
            event = cl.enqueue_nd_range_kernel(self.queue, k, global_size, local_size)
            event.wait()
            if i:  # the first launch is the warm-up
                best = min(best, event_seconds(event))
        cl.enqueue_copy(self.queue, result, out).wait()
        return best, result


def sweep_device(bench: KernelBench, device: str, sweep: Sweep,
                 tick: Callable[[str], None]) -> tuple[list[Run], dict[str, int]]:
    """Time every kernel over the sweep's sizes and blocks; a kernel stops growing where its
    next size would take longer than ``sweep.max_launch_s`` (its slowest launch scaled by the
    work). Returns the runs and the largest size per kernel."""
    runs: list[Run] = []
    largest: dict[str, int] = {}
    for kernel in SEED_KERNELS:
        blocks = [b for b in sweep.blocks(kernel) if b <= bench.max_block]
        sizes = sweep.sizes(kernel)
        for n, following in zip(sizes, (*sizes[1:], None), strict=True):
            host = bench.inputs(kernel, n)
            slowest = 0.0
            for block in blocks:
                seconds, _ = bench.launch(kernel, n, block, host)
                runs.append(Run(device, kernel, n, block, seconds))
                slowest = max(slowest, seconds)
                tick(f"{kernel} n={n} block={block}")
            largest[kernel] = n
            if following and slowest * (following / n) ** work_exponent(kernel) > \
                    sweep.max_launch_s:
                break
    return runs, largest


def device_profile(info: Any) -> DeviceProfile:
    """The device's stored (or shipped) Hong–Kim profile, else one from quick microbenchmarks."""
    return (find_device_profile(info.name, info.driver)
            or measure_device_profile(info.spec, quick=True))


def measure(specs: Sequence[str], sweep: Sweep
            ) -> tuple[list[Run], dict[str, DeviceFacts], dict[str, DeviceProfile | None], dict]:
    """Sweep every device: runs, facts and profile per device (keyed by its runtime, one device
    per runtime), and the sizes reached."""
    runs: list[Run] = []
    facts: dict[str, DeviceFacts] = {}
    profiles: dict[str, DeviceProfile | None] = {}
    reached: dict[str, dict[str, int]] = {}
    for spec in specs:
        info, device = choose_device(spec)
        profile = device_profile(info)
        facts[info.runtime] = DeviceFacts(info.name, info.runtime, info.compute_units,
                                          info.clock_mhz, profile.bandwidth_gbs, info.simd_width)
        profiles[info.runtime] = profile
        with tqdm(desc=f"kernel-model paper's kernels ({info.runtime})", unit="run") as bar:

            def tick(msg: str) -> None:
                bar.set_postfix_str(msg)
                bar.update(1)

            found, reached[info.runtime] = sweep_device(KernelBench(device), info.runtime,
                                                        sweep, tick)
        runs += found
    return runs, facts, profiles, reached


def runtime_specs(device: str | None) -> list[str]:
    """The device ``device`` names, or one device of every OpenCL runtime that builds here."""
    specs = [info.spec for info in one_device_per_runtime(device)]
    if not specs:
        raise DeviceError("no OpenCL device builds here; `autotune devices` says why")
    return specs
