"""Hong & Kim (ISCA 2009) analytical GPU model: cycles of one kernel launch from counts.

Seed 002 §3 prints a shortened form; this is the full model of DESIGN.md ("Hong–Kim model"):
mixed coalesced/uncoalesced memory latency and departure delay, MWP limited by latency,
bandwidth and occupancy, CWP, the three regimes of seed 002 Table 3, and the barrier
synchronisation cost. Two entry points compute the same numbers: ``predict_cycles`` (one
launch, every intermediate kept) and ``predict_seconds`` (numpy arrays, for controllers).

Two choices the equations leave open, taken as Hong & Kim do:
- warps per block are ``ceil(threads_per_block / warp_size)`` (a partial warp still holds a
  warp slot), so ``N = active_blocks * warps_per_block``;
- ``rep = blocks / (active_blocks * active_cores)`` with ``active_cores = min(cores, blocks)``
  (Hong & Kim's #Active_SMs), fractional when the last wave is partial.
A kernel with no memory instructions is compute bound with ``exec = c_c * N * rep`` (no
memory latency to expose, and the memory-regime terms would divide by zero).

As published (and kept): the regime test ``CWP >= MWP or c_c > c_m`` makes the time drop
where ``c_c`` overtakes ``c_m`` in the compute regime, and adding coalesced instructions to an
uncoalesced kernel can lower the weighted latency; the model is monotone in compute
instructions within a regime, in barriers, and under scaling of all counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from models.device_profile import DeviceProfile

Regime = Literal["balanced", "memory", "compute"]


def active_blocks_per_core(profile: DeviceProfile, blocks: int) -> int:
    """Occupancy: blocks resident per core, ``min(max_blocks_per_core, ceil(blocks / cores))``."""
    return min(profile.max_blocks_per_core, math.ceil(blocks / profile.cores))


@dataclass(frozen=True)
class KernelLaunch:
    """Per-thread instruction counts of one kernel and its launch shape (Hong–Kim inputs)."""

    compute: float  # compute instructions per thread (i_c), barriers excluded
    coal: float  # coalesced memory instructions per thread
    uncoal: float  # uncoalesced memory instructions per thread
    threads_per_block: int  # t_b
    blocks: int  # b_t
    barriers: float = 0.0  # synchronisation (barrier) instructions per thread
    active_blocks: int | None = None  # b_o actually resident per core; None: occupancy helper

    def __post_init__(self) -> None:
        for key in ("compute", "coal", "uncoal", "barriers"):
            value = getattr(self, key)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"KernelLaunch.{key} must be finite and >= 0, got {value}")
        for key in ("threads_per_block", "blocks", "active_blocks"):
            value = getattr(self, key)
            if value is not None and (int(value) != value or value < 1):
                raise ValueError(f"KernelLaunch.{key} must be a positive integer, got {value}")


@dataclass(frozen=True)
class HongKimResult:
    """Every intermediate of one Hong–Kim evaluation, for inspection, plots and tests."""

    mem_l: float  # Mem_L: weighted memory latency, cycles
    departure_delay: float  # weighted departure delay, cycles
    mwp_without_bw: float  # Mem_L / departure_delay
    mwp_peak_bw: float  # M_d / (BW_per_warp * D_c)
    mwp: float
    cwp: float
    n: float  # active warps per core
    rep: float  # block repetitions (waves)
    active_blocks: int
    comp_cycles: float  # c_c = C_i * (compute + memory instructions)
    mem_cycles: float  # c_m = Mem_L * memory instructions
    regime: Regime
    exec_cycles: float
    sync_cycles: float
    total_cycles: float
    seconds: float


def predict_cycles(profile: DeviceProfile, launch: KernelLaunch) -> HongKimResult:
    """Evaluate the Hong–Kim model for one launch, keeping every intermediate."""
    p = profile
    active = launch.active_blocks or active_blocks_per_core(p, launch.blocks)
    mem_insts = launch.coal + launch.uncoal
    w_uncoal = launch.uncoal / mem_insts if mem_insts > 0 else 0.0
    w_coal = 1.0 - w_uncoal
    mem_l_uncoal = p.mem_latency + (p.transactions_per_uncoal - 1) * p.dep_delay_uncoal
    mem_l = mem_l_uncoal * w_uncoal + p.mem_latency * w_coal
    departure = p.dep_delay_uncoal * p.transactions_per_uncoal * w_uncoal
    departure += p.dep_delay_coal * w_coal
    mwp_without_bw = mem_l / departure
    bw_per_warp = p.clock_ghz * p.warp_size * p.bytes_per_access / mem_l
    mwp_peak_bw = p.bandwidth_gbs / (bw_per_warp * p.cores)
    n = float(active * math.ceil(launch.threads_per_block / p.warp_size))
    mwp = min(mwp_without_bw, mwp_peak_bw, n)
    comp = p.issue_cycles * (launch.compute + mem_insts)
    mem = mem_l * mem_insts
    rep = launch.blocks / (active * min(p.cores, launch.blocks))
    regime: Regime
    if mem_insts == 0:
        cwp = 1.0 if comp > 0 else 0.0
        regime, exec_cycles = "compute", comp * n * rep
    else:
        cwp = min((mem + comp) / comp, n)
        if mwp == n and cwp == n:
            regime = "balanced"
            exec_cycles = (mem + comp + comp / mem_insts * (mwp - 1)) * rep
        elif cwp >= mwp or comp > mem:
            regime = "memory"
            exec_cycles = (mem * n / mwp + comp / mem_insts * (mwp - 1)) * rep
        else:
            regime = "compute"
            exec_cycles = (mem_l + comp * n) * rep
    sync_cycles = departure * (mwp - 1) * launch.barriers * active * rep
    total = exec_cycles + sync_cycles
    return HongKimResult(
        mem_l=mem_l,
        departure_delay=departure,
        mwp_without_bw=mwp_without_bw,
        mwp_peak_bw=mwp_peak_bw,
        mwp=mwp,
        cwp=cwp,
        n=n,
        rep=rep,
        active_blocks=active,
        comp_cycles=comp,
        mem_cycles=mem,
        regime=regime,
        exec_cycles=exec_cycles,
        sync_cycles=sync_cycles,
        total_cycles=total,
        seconds=total / (p.clock_ghz * 1e9),
    )


def predict_seconds(
    profile: DeviceProfile,
    compute: ArrayLike,
    coal: ArrayLike,
    uncoal: ArrayLike,
    barriers: ArrayLike,
    threads_per_block: ArrayLike,
    blocks: ArrayLike,
    active_blocks: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Vectorized ``predict_cycles(...).seconds`` over broadcast numpy arrays (controller path).

    Inputs are not validated (the hot path); pass finite counts >= 0 and positive launch sizes.
    """
    p = profile
    c, mc, mu, bar, tpb, bt = np.broadcast_arrays(
        *(
            np.asarray(x, dtype=np.float64)
            for x in (compute, coal, uncoal, barriers, threads_per_block, blocks)
        )
    )
    if active_blocks is None:
        active = np.minimum(p.max_blocks_per_core, np.ceil(bt / p.cores))
    else:
        active = np.broadcast_to(np.asarray(active_blocks, dtype=np.float64), c.shape)
    mem_insts = mc + mu
    has_mem = mem_insts > 0
    safe_mem = np.where(has_mem, mem_insts, 1.0)
    w_uncoal = mu / safe_mem  # 0 where there is no memory instruction
    w_coal = 1.0 - w_uncoal
    mem_l_uncoal = p.mem_latency + (p.transactions_per_uncoal - 1) * p.dep_delay_uncoal
    mem_l = mem_l_uncoal * w_uncoal + p.mem_latency * w_coal
    departure = (p.dep_delay_uncoal * p.transactions_per_uncoal) * w_uncoal
    departure += p.dep_delay_coal * w_coal
    mwp_without_bw = mem_l / departure
    mwp_peak_bw = mem_l * (p.bandwidth_gbs / (p.clock_ghz * p.warp_size * p.bytes_per_access))
    mwp_peak_bw /= p.cores
    n = active * np.ceil(tpb / p.warp_size)
    mwp = np.minimum(np.minimum(mwp_without_bw, mwp_peak_bw), n)
    comp = p.issue_cycles * (c + mem_insts)
    mem = mem_l * mem_insts
    rep = bt / (active * np.minimum(p.cores, bt))
    cwp = np.minimum((mem + comp) / np.where(comp > 0, comp, 1.0), n)
    overlap = comp / safe_mem * (mwp - 1)
    balanced = (mwp == n) & (cwp == n)
    memory = ~balanced & ((cwp >= mwp) | (comp > mem))
    exec_cycles = np.where(
        balanced,
        mem + comp + overlap,
        np.where(memory, mem * n / mwp + overlap, mem_l + comp * n),
    )
    exec_cycles = np.where(has_mem, exec_cycles, comp * n)
    total = (exec_cycles + departure * (mwp - 1) * bar * active) * rep
    return total / (p.clock_ghz * 1e9)
