"""The launches of the kernel-model comparison: the nine kernels' shapes, per-item counts, features.

The comparison: Amarís, de Camargo, Dyab, Goldman, Trystram, "A Comparison of GPU Execution Time
Prediction using Machine Learning and Analytical Modeling" (the kernel-model paper below); its
nine applications, their sweep of sizes and blocks, and its 13 features of a launch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from studies.kernel_models.bsp import SEED_KERNELS
from studies.kernel_models.learned_comparators import SEED_FEATURES

MATRIX_MULTIPLY = ("MMGU", "MMGC", "MMSU", "MMSC")
TWO_D = (*MATRIX_MULTIPLY, "MAU", "MAC")
MSA_THREADS = 4096  # the paper's MSA launch: 32 blocks of 128
LINE_BYTES = 64


@dataclass(frozen=True)
class Sweep:
    """Sizes and blocks to try: matrix sides for MM and MA, vector lengths for the rest."""

    mm_sizes: tuple[int, ...]
    ma_sizes: tuple[int, ...]
    vector_sizes: tuple[int, ...]
    blocks_2d: tuple[int, ...]  # work-items per block (square: 8x8 = 64, ...)
    blocks_1d: tuple[int, ...]
    max_launch_s: float

    def sizes(self, kernel: str) -> tuple[int, ...]:
        if kernel in MATRIX_MULTIPLY:
            return self.mm_sizes
        return self.ma_sizes if kernel in TWO_D else self.vector_sizes

    def blocks(self, kernel: str) -> tuple[int, ...]:
        return self.blocks_2d if kernel in TWO_D else self.blocks_1d


def work_exponent(kernel: str) -> int:
    """How a kernel's work grows with its size: n^3 for a matrix multiply, n^2 for an add of
    matrices, n for the vector kernels."""
    if kernel in MATRIX_MULTIPLY:
        return 3
    return 2 if kernel in TWO_D else 1


QUICK = Sweep((64, 128, 256), (256, 512, 1024), (1 << 18, 1 << 19, 1 << 20), (64, 256),
              (64, 256), 0.2)
# The paper's ranges (2-D sides 2^8..2^13, vectors 2^18..2^27; MM from 2^6 for more points), cut
# where the next size would take longer than max_launch_s.
FULL = Sweep(tuple(1 << e for e in range(6, 14)), tuple(1 << e for e in range(8, 14)),
             tuple(1 << e for e in range(18, 28)), (64, 256, 1024), (64, 128, 256, 512), 1.0)


@dataclass(frozen=True)
class DeviceFacts:
    """What the features and models need of one device."""

    name: str
    runtime: str
    cores: int  # OpenCL compute units
    clock_mhz: float
    bandwidth_gbs: float
    simd_width: int  # the warp: work-items in lockstep


@dataclass(frozen=True)
class Access:
    """Per-work-item counts of one kernel as written in amaris_applications.cl."""

    flops: float
    ld_coal: float  # global loads, coalesced (or one word for the whole warp)
    ld_uncoal: float
    st_coal: float
    st_uncoal: float
    ld_sm: float = 0.0  # local-memory loads
    st_sm: float = 0.0
    barriers: float = 0.0


@dataclass(frozen=True)
class Run:
    """One timed launch."""

    device: str
    kernel: str
    n: int
    block: int
    seconds: float


def launch_shape(kernel: str, n: int, block: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(global, local) sizes of a launch; 2-D kernels use square blocks of ``block`` items."""
    if kernel in TWO_D:
        side = math.isqrt(block)
        if side * side != block or n % side:
            raise ValueError(f"{kernel}: block {block} must be a square whose side divides {n}")
        return (n, n), (side, side)
    if kernel == "MSA":
        if MSA_THREADS % block or n % MSA_THREADS:
            raise ValueError(f"MSA: block {block} must divide {MSA_THREADS}, which must divide n")
        return (MSA_THREADS,), (block,)
    if n % block:
        raise ValueError(f"{kernel}: block {block} must divide {n}")
    return (n,), (block,)


def thread_count(kernel: str, n: int) -> int:
    """Work-items of one launch."""
    if kernel in TWO_D:
        return n * n
    return MSA_THREADS if kernel == "MSA" else n


def thread_access(kernel: str, n: int, block: int) -> Access:
    """Per-work-item operations of ``kernel`` (a broadcast load counts as coalesced)."""
    if kernel == "MMGU":  # A's row is uncoalesced, B's word is one for the warp
        return Access(2.0 * n, float(n), float(n), 0.0, 1.0)
    if kernel == "MMGC":
        return Access(2.0 * n, 2.0 * n, 0.0, 1.0, 0.0)
    if kernel in ("MMSU", "MMSC"):
        tiles = n / math.isqrt(block)
        ld = 2.0 * tiles
        coal = kernel == "MMSC"
        return Access(2.0 * n, ld * coal, ld * (not coal), float(coal), float(not coal),
                      ld_sm=2.0 * n, st_sm=ld, barriers=2.0 * tiles)
    if kernel in ("MAU", "MAC", "vAdd"):
        coal = kernel != "MAU"
        return Access(1.0, 2.0 * coal, 2.0 * (not coal), float(coal), float(not coal))
    if kernel == "dotP":
        steps = math.log2(block)
        # the tree reduction: block - 1 adds, each two loads and a store, over the block
        share = (block - 1) / block
        return Access(1.0 + share, 2.0, 0.0, 1.0 / block, 0.0, ld_sm=2.0 * share,
                      st_sm=1.0 + share, barriers=1.0 + steps)
    if kernel == "MSA":
        length = n / MSA_THREADS
        return Access(5.0 * length, 0.0, length, 0.0, 5.0)
    raise ValueError(f"unknown kernel {kernel!r}; one of {SEED_KERNELS}")


def transactions(count: float, coalesced: bool, warp: int) -> float:
    """Modelled memory transactions per work-item for ``count`` accesses of 4 bytes."""
    lines = math.ceil(4 * warp / LINE_BYTES) if coalesced else warp
    return count * lines / warp


def occupancy(groups: int, cores: int) -> float:
    """Share of compute-unit slots the work-groups fill over their waves (1 is full)."""
    return groups / (cores * math.ceil(groups / cores))


def features(kernel: str, n: int, block: int, dev: DeviceFacts) -> dict[str, float]:
    """The kernel-model paper's 13 features of one launch (names as ``SEED_FEATURES``), all > 0."""
    a = thread_access(kernel, n, block)
    t = thread_count(kernel, n)
    groups = t // block
    w = dev.simd_width
    values = {
        "num_of_cores": dev.cores, "max_clock_rate": dev.clock_mhz,
        "bandwidth": dev.bandwidth_gbs, "input_size": n,
        "total_load_gm": 1 + t * (transactions(a.ld_coal, True, w)
                                  + transactions(a.ld_uncoal, False, w)),
        "total_store_gm": 1 + t * (transactions(a.st_coal, True, w)
                                   + transactions(a.st_uncoal, False, w)),
        "total_load_sm": 1 + t * a.ld_sm, "total_store_sm": 1 + t * a.st_sm,
        "flops_sp": 1 + t * a.flops, "block_size": block, "grid_size": groups,
        "threads": t, "achieved_occupancy": occupancy(groups, dev.cores),
    }
    return {k: float(values[k]) for k in SEED_FEATURES}


def feature_matrix(runs: Sequence[Run], devices: dict[str, DeviceFacts]) -> np.ndarray:
    """Rows of :func:`features` for ``runs`` (columns in ``SEED_FEATURES`` order)."""
    return np.array([list(features(r.kernel, r.n, r.block, devices[r.device]).values())
                     for r in runs])
