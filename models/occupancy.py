"""CUDA occupancy calculator: resident blocks and warps per SM for a launch (pure arithmetic).

The rules of NVIDIA's occupancy calculator (CUDA C Programming Guide, "Compute Capabilities"
table and the occupancy calculator spreadsheet): a block is resident only if every per-SM
resource still has room for it, so the resident blocks per SM are the least of

- warps: ``floor(max_warps_per_sm / warps_per_block)``, ``warps_per_block = ceil(t / warp)``;
- blocks: ``max_blocks_per_sm``;
- registers, allocated per warp: ``regs_per_warp = ceil(r * warp / unit) * unit`` (unit 256),
  ``floor(registers_per_sm / (regs_per_warp * warps_per_block))``;
- shared memory: ``per_block = ceil((s + reserved) / unit) * unit``, where ``reserved`` is
  the 1 KiB the driver keeps per block on cc >= 8.0; ``floor(shared_per_sm / per_block)``.

Ties name the first of blocks, warps, registers, shared. The register rule is warp-granular
over the whole SM (real hardware splits the file between 4 sub-partitions, which can cost a
warp in rare cases). ``shared_per_sm`` is the largest carve-out blocks may use.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, fields
from typing import Literal

Limiter = Literal["blocks", "warps", "registers", "shared"]
KIB = 1024


@dataclass(frozen=True)
class GpuLimits:
    """Per-SM and per-block resource limits of one NVIDIA compute capability."""

    warp_size: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    registers_per_sm: int
    max_registers_per_thread: int
    register_alloc_unit: int  # registers; allocation granularity per warp
    shared_per_sm: int  # bytes usable by resident blocks (largest carve-out)
    shared_per_block_max: int  # bytes one block may use (opt-in maximum)
    shared_alloc_unit: int  # bytes; allocation granularity per block
    reserved_shared_per_block: int  # bytes the driver keeps per block (1 KiB on cc >= 8.0)

    def __post_init__(self) -> None:
        """Reject non-positive limits (reserved shared memory may be 0) at construction."""
        for f in fields(self):
            value = getattr(self, f.name)
            lowest = 0 if f.name == "reserved_shared_per_block" else 1
            if not isinstance(value, int) or value < lowest:
                raise ValueError(f"GpuLimits.{f.name} must be an integer >= {lowest}, "
                                 f"got {value!r}")


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks and warps per SM for one launch configuration, and what limits them."""

    active_blocks: int  # blocks resident per SM (0: one block does not fit)
    active_warps: int
    occupancy: float  # active warps / max warps per SM
    limiter: Limiter


def _limits(warps: int, blocks: int, threads: int, shared_sm_kib: int, shared_block_kib: int,
            shared_unit: int, reserved: int) -> GpuLimits:
    """A GpuLimits with the fields every listed capability shares (65536 registers, 255 per
    thread, 256-register units) filled in."""
    return GpuLimits(
        warp_size=32,
        max_warps_per_sm=warps,
        max_blocks_per_sm=blocks,
        max_threads_per_block=threads,
        registers_per_sm=65536,
        max_registers_per_thread=255,
        register_alloc_unit=256,
        shared_per_sm=shared_sm_kib * KIB,
        shared_per_block_max=shared_block_kib * KIB,
        shared_alloc_unit=shared_unit,
        reserved_shared_per_block=reserved,
    )


# (major, minor) -> limits, from the CUDA C Programming Guide's table of technical
# specifications per compute capability and the occupancy calculator's allocation units.
LIMITS: dict[tuple[int, int], GpuLimits] = {
    (5, 0): _limits(64, 32, 1024, 64, 48, 256, 0),  # Maxwell GM107
    (5, 2): _limits(64, 32, 1024, 96, 48, 256, 0),  # Maxwell GM20x
    (5, 3): _limits(64, 32, 1024, 64, 48, 256, 0),  # Tegra X1
    (6, 0): _limits(64, 32, 1024, 64, 48, 256, 0),  # Pascal GP100
    (6, 1): _limits(64, 32, 1024, 96, 48, 256, 0),  # Pascal GP10x
    (6, 2): _limits(64, 32, 1024, 64, 48, 256, 0),  # Tegra X2
    (7, 0): _limits(64, 32, 1024, 96, 96, 256, 0),  # Volta V100
    (7, 5): _limits(32, 16, 1024, 64, 64, 256, 0),  # Turing
    (8, 0): _limits(64, 32, 1024, 164, 163, 128, KIB),  # Ampere A100
    (8, 6): _limits(48, 16, 1024, 100, 99, 128, KIB),  # Ampere GA10x
    (8, 9): _limits(48, 24, 1024, 100, 99, 128, KIB),  # Ada
    (9, 0): _limits(64, 32, 1024, 228, 227, 128, KIB),  # Hopper H100 / H200
}


def limits_for_compute_capability(major: int, minor: int) -> GpuLimits:
    """The limits of compute capability ``major.minor``; ValueError for one not in the table
    (a guess from a neighbour would silently mis-size occupancy)."""
    key = (operator.index(major), operator.index(minor))
    if key not in LIMITS:
        known = ", ".join(f"{a}.{b}" for a, b in LIMITS)
        raise ValueError(f"compute capability {major}.{minor} is not in the occupancy table "
                         f"(known: {known}); add its limits to models/occupancy.py")
    return LIMITS[key]


def _checked(name: str, value: int, lowest: int, highest: int) -> int:
    """``value`` as an int within [lowest, highest], else one ValueError naming it."""
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if not lowest <= number <= highest:
        raise ValueError(f"{name} = {number} is outside the allowed range "
                         f"{lowest}..{highest}")
    return number


def occupancy(limits: GpuLimits, threads_per_block: int, registers_per_thread: int | None,
              shared_bytes_per_block: int) -> Occupancy:
    """Resident blocks per SM of blocks of ``threads_per_block`` threads using
    ``registers_per_thread`` registers (None or 0: unknown, not limiting) and
    ``shared_bytes_per_block`` bytes of shared memory, by the rules in the module docstring."""
    threads = _checked("threads_per_block", threads_per_block, 1, limits.max_threads_per_block)
    shared = _checked("shared_bytes_per_block", shared_bytes_per_block, 0,
                      limits.shared_per_block_max)
    regs = 0 if registers_per_thread is None else _checked(
        "registers_per_thread", registers_per_thread, 0, limits.max_registers_per_thread)
    warps_per_block = math.ceil(threads / limits.warp_size)
    by: dict[Limiter, int] = {
        "blocks": limits.max_blocks_per_sm,
        "warps": limits.max_warps_per_sm // warps_per_block,
    }
    if regs:
        unit = limits.register_alloc_unit
        regs_per_warp = math.ceil(regs * limits.warp_size / unit) * unit
        by["registers"] = limits.registers_per_sm // (regs_per_warp * warps_per_block)
    shared_need = shared + limits.reserved_shared_per_block
    if shared_need:
        unit = limits.shared_alloc_unit
        by["shared"] = limits.shared_per_sm // (math.ceil(shared_need / unit) * unit)
    limiter = min(by, key=lambda k: by[k])  # dict order: the first of equal limits wins
    blocks = by[limiter]
    warps = blocks * warps_per_block
    return Occupancy(blocks, warps, warps / limits.max_warps_per_sm, limiter)
