"""Hong & Kim (ISCA 2009) analytical GPU model: cycles of one kernel launch from counts.

The ray tracer's auto-tuner (Ganestam & Doggett, "Auto-tuning Interactive Ray Tracing using an
Analytical GPU Architecture Model", §3) prints a shortened form; this is the full model:
mixed coalesced/uncoalesced memory latency and departure delay, MWP limited by latency,
bandwidth and occupancy, CWP, the three regimes of Ganestam & Doggett's Table 3, and the barrier
synchronisation cost. Two entry points compute the same numbers: ``predict_cycles`` (one
launch, every intermediate kept) and ``predict_seconds`` (numpy arrays, for controllers).

Two choices the equations leave open, taken as Hong & Kim do:
- warps per block are ``ceil(threads_per_block / warp_size)`` (a partial warp still holds a
  warp slot), so ``N = active_blocks * warps_per_block``;
- ``rep = blocks / (active_blocks * active_cores)`` with ``active_cores = min(cores, blocks)``
  (Hong & Kim's #Active_SMs), fractional when the last wave is partial.
A kernel with no memory instructions is compute bound with ``exec = c_c * N * rep`` (no
memory latency to expose, and the memory-regime terms would divide by zero).

Two additions, so that a tiny change of a measured device parameter never moves a prediction
by more than a tiny amount (the published model jumps at its regime boundaries: on a CPU
profile with one warp per core, lowering the bandwidth by one part in 10^7 once cut the
predictions to 0.3-8.5 % by flipping MWP = 1 - 1e-7 into the memory formula):

- **MWP < 1 guard.** Fewer than one warp's access in flight means one access takes longer
  than the latency: the latency is stretched by ``1 / MWP`` (to the departure delay, or to one
  warp's bytes at the core's share of the bandwidth) and MWP is held at 1.
- **Regime blend.** Within ``REGIME_BAND`` (5 % in ratio) below each published condition
  (``MWP == N``, ``CWP == N``, ``CWP >= MWP``, ``c_c > c_m``) the formulas are mixed linearly in
  the log ratio, so the cycles are continuous in every parameter. Outside the bands the
  published equations hold exactly (the golden worked example and Table 3 cases are unchanged).

As published (and kept outside the bands): the regime test ``CWP >= MWP or c_c > c_m`` makes
the time drop where ``c_c`` overtakes ``c_m`` in the compute regime, and adding coalesced
instructions to an uncoalesced kernel can lower the weighted latency; the model is monotone in
compute instructions within a regime, in barriers, and under scaling of all counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from models.device_profile import DeviceProfile

Regime = Literal["balanced", "memory", "compute"]

REGIME_BAND = 0.05  # log-ratio width of the blend below each regime condition


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
    latency_stretch: float  # >= 1: Mem_L's factor where MWP would fall below 1 (the guard)
    departure_delay: float  # weighted departure delay, cycles
    mwp_without_bw: float  # Mem_L / departure_delay
    mwp_peak_bw: float  # M_d / (BW_per_warp * D_c)
    mwp: float  # min(MWP_without_BW, MWP_peak_BW, N), held at >= 1
    cwp: float
    n: float  # active warps per core
    rep: float  # block repetitions (waves)
    active_blocks: int
    comp_cycles: float  # c_c = C_i * (compute + memory instructions)
    mem_cycles: float  # c_m = Mem_L * latency_stretch * memory instructions
    regime: Regime  # the regime of largest weight
    w_balanced: float  # weight of the balanced formula (1 or 0 outside the bands)
    w_memory: float  # weight of the memory formula among the other two
    exec_cycles: float
    sync_cycles: float
    total_cycles: float
    seconds: float


def _ramp(log_ratio: NDArray[np.float64]) -> NDArray[np.float64]:
    """1 where a condition ``a >= b`` holds (``log(a / b) >= 0``), 0 below ``-REGIME_BAND``,
    linear between: the published hard switch made continuous."""
    return np.clip(1.0 + log_ratio / REGIME_BAND, 0.0, 1.0)


def _log_ratio(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(a / b)
    return np.where(np.isnan(out), 0.0, out)  # 0/0: the condition holds with equality


def _evaluate(p: DeviceProfile, c, mc, mu, bar, tpb, bt, active) -> dict[str, NDArray[np.float64]]:
    """The model on broadcast float64 arrays; every intermediate, keyed as HongKimResult."""
    mem_insts = mc + mu
    has_mem = mem_insts > 0
    safe_mem = np.where(has_mem, mem_insts, 1.0)
    w_uncoal = mu / safe_mem  # 0 where there is no memory instruction
    w_coal = 1.0 - w_uncoal
    mem_l_uncoal = p.mem_latency + (p.transactions_per_uncoal - 1) * p.dep_delay_uncoal
    mem_l = mem_l_uncoal * w_uncoal + p.mem_latency * w_coal
    departure = (p.dep_delay_uncoal * p.transactions_per_uncoal) * w_uncoal
    departure = departure + p.dep_delay_coal * w_coal
    mwp_without_bw = mem_l / departure
    mwp_peak_bw = mem_l * (p.bandwidth_gbs / (p.clock_ghz * p.warp_size * p.bytes_per_access))
    mwp_peak_bw = mwp_peak_bw / p.cores
    n = active * np.ceil(tpb / p.warp_size)
    mwp_raw = np.minimum(np.minimum(mwp_without_bw, mwp_peak_bw), n)
    stretch = np.maximum(1.0, 1.0 / mwp_raw)  # MWP < 1 guard: a slower access, not MWP < 1
    mwp = np.maximum(mwp_raw, 1.0)
    latency = mem_l * stretch
    comp = p.issue_cycles * (c + mem_insts)
    mem = latency * mem_insts
    rep = bt / (active * np.minimum(p.cores, bt))
    cwp = np.minimum((mem + comp) / np.where(comp > 0, comp, 1.0), n)
    overlap = comp / safe_mem * (mwp - 1)
    balanced = mem + comp + overlap
    memory = mem * n / mwp + overlap
    compute = latency + comp * n
    w_balanced = _ramp(_log_ratio(mwp, n)) * _ramp(_log_ratio(cwp, n))
    w_memory = np.maximum(_ramp(_log_ratio(cwp, mwp)), _ramp(_log_ratio(comp, mem)))
    exec_cycles = w_balanced * balanced + (1 - w_balanced) * (
        w_memory * memory + (1 - w_memory) * compute)
    exec_cycles = np.where(has_mem, exec_cycles, comp * n)
    cwp = np.where(has_mem, cwp, np.where(comp > 0, 1.0, 0.0))
    w_balanced = np.where(has_mem, w_balanced, 0.0)
    w_memory = np.where(has_mem, w_memory, 0.0)
    exec_cycles = exec_cycles * rep
    sync_cycles = departure * (mwp - 1) * bar * active * rep
    total = exec_cycles + sync_cycles
    return dict(mem_l=mem_l, latency_stretch=stretch, departure_delay=departure,
                mwp_without_bw=mwp_without_bw, mwp_peak_bw=mwp_peak_bw, mwp=mwp, cwp=cwp, n=n,
                rep=rep, comp_cycles=comp, mem_cycles=mem, w_balanced=w_balanced,
                w_memory=w_memory, exec_cycles=exec_cycles, sync_cycles=sync_cycles,
                total_cycles=total, seconds=total / (p.clock_ghz * 1e9))


def predict_cycles(profile: DeviceProfile, launch: KernelLaunch) -> HongKimResult:
    """Evaluate the Hong–Kim model for one launch, keeping every intermediate."""
    active = launch.active_blocks or active_blocks_per_core(profile, launch.blocks)
    f = np.float64
    r = _evaluate(profile, f(launch.compute), f(launch.coal), f(launch.uncoal),
                  f(launch.barriers), f(launch.threads_per_block), f(launch.blocks), f(active))
    v = {k: float(x) for k, x in r.items()}
    regime: Regime
    if v["w_balanced"] >= 0.5:
        regime = "balanced"
    elif v["w_memory"] >= 0.5:
        regime = "memory"
    else:
        regime = "compute"
    return HongKimResult(active_blocks=active, regime=regime, **v)


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
    return _evaluate(p, c, mc, mu, bar, tpb, bt, active)["seconds"]
