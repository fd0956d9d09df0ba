"""``autotune bench kernel-models``: seed 003's comparison (BSP model vs LR, SVR, RF) on the devices here.

The nine applications of seed 003 (MMGU, MMGC, MMSU, MMSC, MAU, MAC, vAdd, dotP, MSA; OpenCL C in
``studies/kernel_models/kernels/seed003.cl``) are swept over sizes and work-group (block) sizes as far
as the machine allows: sizes grow in powers of two until the next size's launch would take
longer than ``--max-launch-s`` (the slowest launch scaled by the work). Each launch is timed
with profiling events, best of 3 after one warm-up.

Approaches, all predicting seconds per launch:

- ``BSP``: seed 003's Eq. 3 (``studies.kernel_models.bsp``) with Table III's counts; ``P`` = compute units x SIMD
  width (the lanes that run at once), ``R`` = the clock. lambda is fitted from one run per kernel
  and device (the middle size at the smallest block), which is then left out of its figures.
- ``HK``: Hong and Kim with the device profile ``autotune calibrate`` stored (or a shipped one,
  else one from quick microbenchmarks), fed the kernels' own per-thread counts; nothing fitted.
- ``LR``, ``SVR``, ``RF``: ``studies.kernel_models.learned_comparators`` on the seed's 13 features in log2 space,
  one model per kernel as the seed trains per application. Held out: one device at a time where
  two or more OpenCL runtimes build (the seed's protocol), else one size at a time (all its blocks).
  Held out by size, RF cannot extrapolate past the sizes it saw, and on a power-of-two grid in
  log2 a held-out size sits exactly on the threshold between its neighbours, so RF predicts a
  neighbour's time; LR and SVR extrapolate the log-log trend.

The same comparison on this project's own work (``benchmarks.predictors.predictor_comparison``; ``--part
own`` runs it alone, ``--part seed003`` leaves it out): the ray tracer's phases and frames
(Hong–Kim vs BSP vs LR / SVR / RF and the hybrid on the probe's workload, the knobs and the
device profile) and the volume renderer's per-rank render time (seed 004's linear model vs the
learned ones), fitted on calibration scenes / views, chosen on validation ones, reported on
both and on the test ones. Its goals join the goals block; its figures are ``own_work``.
Then the online learned predictor on the ray tracer itself, with no model and no calibration,
on the test scenes (``benchmarks.predictors.online_predictor``; ``--part online``): ``online_learned``.

MSA keeps the seed's 4096 work-items; its block (the seed's 128) is swept like the others'.

The 13 features: the device's compute units, clock (MHz) and bandwidth (GB/s, from that
profile); the input size (matrix side or vector length); global load and store transactions,
local (shared) loads and stores, single-precision operations (totals over the launch from the
kernels' per-thread counts, + 1 so log2 is defined); block size, grid size (work-groups),
threads; and occupancy. Without a profiler the transactions are modelled: a coalesced warp
access costs ``ceil(4 * warp / 64)`` 64-byte lines, an uncoalesced one ``warp``; occupancy is
the share of compute-unit slots the work-groups fill over their waves.

Figures: tables like the seed's V (accuracy = predicted / measured, mean and sd, and NMSE per
device and approach; over every kernel, and over MMSC alone as the seed's) and VI (NMSE per kernel
and approach); every run with its predictions. ``--plots DIR``: a normal Q-Q plot of LR's
residuals without and with log2 (Fig. 1), accuracy box plots per kernel, approach and held-out
group (Fig. 3) and of the learned models on MMSC (Fig. 2).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from autotune_app import options as opt
from autotune_app.report import emit, pyplot
from benchmarks.harness.run_record import RunRecord, stamp
from common.atomic_files import check_output_dir, output_dir, save_figure
from models.device_profile import DeviceProfile
from models.hong_kim import predict_seconds
from studies.kernel_models.bsp import SEED_KERNELS, bsp_seconds, fit_lambda, seed_counts
from studies.kernel_models.learned_comparators import (
    APPROACHES,
    MIN_ROWS,
    SEED_FEATURES,
    LogRegressor,
    accuracy,
    nmse,
)

MATRIX_MULTIPLY = ("MMGU", "MMGC", "MMSU", "MMSC")
TWO_D = (*MATRIX_MULTIPLY, "MAU", "MAC")
REGULAR = tuple(k for k in SEED_KERNELS if k != "MSA")  # the seed's "regular behavior" kernels
MSA_THREADS = 4096  # the seed's MSA launch: 32 blocks of 128
ALL_APPROACHES = ("BSP", "HK", *APPROACHES)
BAND = (0.8, 1.2)  # the seed's analytical-model accuracy
LEARNED_BAND = (0.5, 1.5)  # the seed's learned-model accuracy
BSP_SHARE_GOAL = 0.9
LINE_BYTES = 64
REPEATS = 3


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
# The seed's ranges (2-D sides 2^8..2^13, vectors 2^18..2^27; MM from 2^6 for more points), cut
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
    """Per-work-item counts of one kernel as written in seed003.cl."""

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
    """Seed 003's 13 features of one launch (names as ``SEED_FEATURES``), all > 0."""
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


# --------------------------------------------------------------------------- predictions


def lambda_run(runs: Sequence[Run], idx: Sequence[int]) -> int:
    """The run of ``idx`` that lambda is fitted on: the middle size at the smallest block."""
    block = min(runs[i].block for i in idx)
    at_block = sorted((i for i in idx if runs[i].block == block), key=lambda i: runs[i].n)
    return at_block[len(at_block) // 2]


def bsp_unit_seconds(run: Run, dev: DeviceFacts) -> float:
    """Eq. 3 with lambda = 1 for one run."""
    counts = seed_counts(run.kernel, run.n, run.block)
    return bsp_seconds(counts, thread_count(run.kernel, run.n), dev.clock_mhz * 1e6,
                       dev.cores * dev.simd_width)


def groups_of(runs: Sequence[Run], key: Callable[[Run], Any]) -> dict[Any, list[int]]:
    """Indices of ``runs`` per ``key``, in first-seen order."""
    out: dict[Any, list[int]] = {}
    for i, r in enumerate(runs):
        out.setdefault(key(r), []).append(i)
    return out


def bsp_predictions(runs: Sequence[Run], devices: dict[str, DeviceFacts]
                    ) -> tuple[np.ndarray, dict[str, dict[str, float]]]:
    """BSP seconds per run (NaN at each lambda run) and lambda per device and kernel."""
    pred = np.full(len(runs), np.nan)
    lambdas: dict[str, dict[str, float]] = {}
    for (device, kernel), idx in groups_of(runs, lambda r: (r.device, r.kernel)).items():
        fit = lambda_run(runs, idx)
        lam = fit_lambda(bsp_unit_seconds(runs[fit], devices[device]), runs[fit].seconds)
        lambdas.setdefault(device, {})[kernel] = lam
        for i in idx:
            if i != fit:
                pred[i] = bsp_unit_seconds(runs[i], devices[device]) / lam
    return pred, lambdas


def hk_predictions(runs: Sequence[Run], profiles: dict[str, DeviceProfile | None]) -> np.ndarray:
    """Hong–Kim seconds per run from the kernels' own counts (NaN where no profile)."""
    pred = np.full(len(runs), np.nan)
    for i, r in enumerate(runs):
        profile = profiles.get(r.device)
        if profile is None:
            continue
        a = thread_access(r.kernel, r.n, r.block)
        pred[i] = float(predict_seconds(
            profile, a.flops + a.ld_sm + a.st_sm, a.ld_coal + a.st_coal,
            a.ld_uncoal + a.st_uncoal, a.barriers, r.block,
            thread_count(r.kernel, r.n) // r.block))
    return pred


def holdout_key(split: str) -> Callable[[Run], Any]:
    """What one fold holds out: a device, or a size."""
    if split == "device":
        return lambda r: r.device
    if split == "size":
        return lambda r: r.n
    raise ValueError(f"split must be 'device' or 'size', got {split!r}")


def folds(runs: Sequence[Run], split: str) -> list[tuple[list[int], list[int]]]:
    """(train, test) indices per kernel and held-out group; a fold with too few rows to train
    on is left out (its runs stay unpredicted)."""
    key = holdout_key(split)
    out = []
    for idx in groups_of(runs, lambda r: r.kernel).values():
        for held in dict.fromkeys(key(runs[i]) for i in idx):
            test = [i for i in idx if key(runs[i]) == held]
            train = [i for i in idx if key(runs[i]) != held]
            if len(train) >= MIN_ROWS:
                out.append((train, test))
    return out


def learned_predictions(runs: Sequence[Run], x: np.ndarray, split: str
                        ) -> dict[str, np.ndarray]:
    """Seconds per run and learned approach, each run predicted by the fold that held it out."""
    y = np.array([r.seconds for r in runs])
    pred = {a: np.full(len(runs), np.nan) for a in APPROACHES}
    for train, test in folds(runs, split):
        for approach in APPROACHES:
            model = LogRegressor(approach).fit(x[train], y[train])
            pred[approach][test] = model.predict(x[test])
    return pred


# --------------------------------------------------------------------------- tables and goals


def accuracy_stats(predicted: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """Accuracy mean and sd, NMSE and count over the runs that have a prediction."""
    ok = np.isfinite(predicted)
    if not ok.any():
        return {"accuracy_mean": math.nan, "accuracy_sd": math.nan, "nmse": math.nan, "n": 0}
    acc = accuracy(predicted[ok], measured[ok])
    return {"accuracy_mean": float(acc.mean()), "accuracy_sd": float(acc.std()),
            "nmse": nmse(predicted[ok], measured[ok]), "n": int(ok.sum())}


def table(runs: Sequence[Run], preds: dict[str, np.ndarray], key: Callable[[Run], Any]
          ) -> dict[str, dict[str, dict[str, float]]]:
    """{group: {approach: accuracy_stats}} with runs grouped by ``key``."""
    measured = np.array([r.seconds for r in runs])
    return {str(g): {a: accuracy_stats(p[idx], measured[idx]) for a, p in preds.items()}
            for g, idx in groups_of(runs, key).items()}


def table_vi(runs: Sequence[Run], preds: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Seed 003 Table VI: NMSE per kernel and approach."""
    return {k: {a: s["nmse"] for a, s in row.items()}
            for k, row in table(runs, preds, lambda r: r.kernel).items()}


def band_share(predicted: np.ndarray, measured: np.ndarray, band: tuple[float, float]) -> float:
    """Share of the predicted runs whose accuracy lies in ``band`` (NaN if none predicted)."""
    ok = np.isfinite(predicted)
    if not ok.any():
        return math.nan
    acc = accuracy(predicted[ok], measured[ok])
    return float(np.mean((acc >= band[0]) & (acc <= band[1])))


def bsp_regular(runs: Sequence[Run], bsp: np.ndarray) -> dict[str, dict[str, float]]:
    """BSP accuracy over the regular kernels (all but MSA), lambda runs left out: at lambda's
    block, over sizes only (the seed's analytical-model data), and over every block."""
    fit_block = {key: min(runs[i].block for i in idx)
                 for key, idx in groups_of(runs, lambda r: (r.device, r.kernel)).items()}
    out = {}
    for name, keep in (("at_lambda_block", lambda r: r.block == fit_block[r.device, r.kernel]),
                       ("all_blocks", lambda r: True)):
        idx = [i for i, r in enumerate(runs) if r.kernel in REGULAR and keep(r)]
        measured = np.array([runs[i].seconds for i in idx])
        out[name] = {**accuracy_stats(bsp[idx], measured),
                     "share_in_band": band_share(bsp[idx], measured, BAND)}
    return out


def goals(figures: dict) -> dict[str, dict]:
    """BSP's share of regular runs in 0.8-1.2 at lambda's block; each learned approach's mean
    accuracy per device."""
    share = figures["bsp_regular"]["at_lambda_block"]["share_in_band"]
    out = {"bsp_regular_share_in_0.8_1.2": {
        "value": share, "goal": f">= {BSP_SHARE_GOAL}",
        "met": bool(share >= BSP_SHARE_GOAL),
        "what": "share of BSP predictions on the 8 regular kernels with accuracy in 0.8..1.2, "
                "over sizes at the block lambda was fitted on (one run per kernel and device, "
                "left out), as the seed's analytical data; bsp_regular.all_blocks has the rest"}}
    low, high = LEARNED_BAND
    for device, row in figures["table_v"].items():
        for approach in APPROACHES:
            mean = row[approach]["accuracy_mean"]
            out[f"{device}_{approach}_mean_accuracy"] = {
                "value": mean, "goal": f"{low}..{high}", "met": bool(low <= mean <= high),
                "what": f"mean predicted/measured of {approach} on {device}, every kernel, "
                        f"runs held out by {figures['split']}"}
    return out


# --------------------------------------------------------------------------- OpenCL timing


def kernel_source() -> str:
    """The OpenCL C source of the nine applications."""
    return (resources.files("studies.kernel_models") / "kernels" / "seed003.cl").read_text()


class KernelBench:
    """One device's context, profiling queue and the nine kernels; times and runs launches."""

    def __init__(self, device: Any) -> None:
        import pyopencl as cl

        from raytracer.device.choice import build_quietly

        self.cl = cl
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
        cl = self.cl
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
        from raytracer.device.event_time import event_seconds

        cl = self.cl
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
    from governed.mesh.microbench import measure_device_profile
    from governed.mesh.profile_store import find_device_profile

    return (find_device_profile(info.name, info.driver)
            or measure_device_profile(info.spec, quick=True))


def measure(specs: Sequence[str], sweep: Sweep
            ) -> tuple[list[Run], dict[str, DeviceFacts], dict[str, DeviceProfile | None], dict]:
    """Sweep every device: runs, facts and profile per device (keyed by its runtime, one device
    per runtime), and the sizes reached."""
    from tqdm import tqdm

    from raytracer.device.choice import choose_device

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
        with tqdm(desc=f"seed 003 kernels ({info.runtime})", unit="run") as bar:

            def tick(msg: str) -> None:
                bar.set_postfix_str(msg)
                bar.update(1)

            found, reached[info.runtime] = sweep_device(KernelBench(device), info.runtime,
                                                        sweep, tick)
        runs += found
    return runs, facts, profiles, reached


# --------------------------------------------------------------------------- figures and plots


def evaluate(runs: Sequence[Run], facts: dict[str, DeviceFacts],
             profiles: dict[str, DeviceProfile | None], split: str) -> tuple[dict, dict]:
    """Every approach's predictions and the figures: tables V and VI, lambdas, BSP on regular."""
    bsp, lambdas = bsp_predictions(runs, facts)
    preds = {"BSP": bsp, "HK": hk_predictions(runs, profiles),
             **learned_predictions(runs, feature_matrix(runs, facts), split)}
    mmsc = [i for i, r in enumerate(runs) if r.kernel == "MMSC"]  # the seed's Table V kernel
    figures = {
        "split": split,
        "devices": {name: asdict(f) for name, f in facts.items()},
        "hong_kim_profile": {d: p.source if p else None for d, p in profiles.items()},
        "lambda": lambdas,
        "table_v": table(runs, preds, lambda r: r.device),
        "table_v_mmsc": table([runs[i] for i in mmsc], {a: p[mmsc] for a, p in preds.items()},
                              lambda r: r.device),
        "table_vi": table_vi(runs, preds),
        "per_held_out_size": table(runs, {a: preds[a] for a in APPROACHES}, lambda r: r.n)
        if split == "size" else None,
        "bsp_regular": bsp_regular(runs, bsp),
        "runs": [{**asdict(r), **{a: p[i] for a, p in preds.items()}}
                 for i, r in enumerate(runs)],
    }
    figures["goals"] = goals(figures)
    return figures, preds


def table_lines(figures: dict) -> list[str]:
    """Tables V (every kernel, then MMSC alone as the seed's) and VI as text."""
    lines = []
    for key, what in (("table_v", "every kernel"), ("table_v_mmsc", "MMSC")):
        lines.append(f"Table V ({what}): accuracy (mean +- sd) and NMSE per device and approach")
        for device, row in figures[key].items():
            lines.append(f"  {device}")
            for a, s in row.items():
                lines.append(f"    {a:<4} {s['accuracy_mean']:7.3f} +- "
                             f"{s['accuracy_sd']:<7.3f} NMSE {s['nmse']:9.4f}  (n={s['n']})")
    lines.append("Table VI: NMSE per kernel and approach")
    lines.append("  " + "kernel".ljust(6) + "".join(a.rjust(10) for a in ALL_APPROACHES))
    for kernel, row in figures["table_vi"].items():
        lines.append("  " + kernel.ljust(6) + "".join(f"{row[a]:10.4f}" for a in ALL_APPROACHES))
    return lines


def log_residuals(runs: Sequence[Run], x: np.ndarray, log: bool) -> np.ndarray:
    """Standardized in-sample residuals of LR per kernel, on raw or log2 features and time."""
    from sklearn.linear_model import LinearRegression

    y = np.array([r.seconds for r in runs])
    out = []
    for idx in groups_of(runs, lambda r: r.kernel).values():
        xs, ys = (np.log2(x[idx]), np.log2(y[idx])) if log else (x[idx], y[idx])
        res = ys - LinearRegression().fit(xs, ys).predict(xs)
        if res.std() > 0:
            out.append(res / res.std())
    return np.concatenate(out) if out else np.array([])


def plot_qq(runs: Sequence[Run], x: np.ndarray, path: Path) -> None:
    """Fig. 1: normal Q-Q plot of LR residuals without and with the log2 transform."""
    from scipy import stats

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    for ax, log in zip(axes, (False, True), strict=True):
        stats.probplot(log_residuals(runs, x, log), plot=ax)
        ax.set_title(f"LR residuals, {'log2' if log else 'linear'} scale")
    fig.tight_layout()
    save_figure(fig, path)


def plot_accuracy(runs: Sequence[Run], preds: dict[str, np.ndarray], key: Callable[[Run], Any],
                  what: str, path: Path) -> None:
    """Figs. 2-3: accuracy box plots, one panel per kernel, a box per approach and group."""
    plt = pyplot()
    measured = np.array([r.seconds for r in runs])
    kernels = groups_of(runs, lambda r: r.kernel)
    fig, axes = plt.subplots(len(kernels), 1, figsize=(10, 2.2 * len(kernels)), squeeze=False)
    for ax, (kernel, idx) in zip(axes[:, 0], kernels.items(), strict=True):
        data, labels = [], []
        for a, p in preds.items():
            for g, sub in groups_of([runs[i] for i in idx], key).items():
                rows = np.array(idx)[sub]
                ok = rows[np.isfinite(p[rows])]
                if ok.size:
                    data.append(accuracy(p[ok], measured[ok]))
                    labels.append(f"{a}\n{g}")
        ax.boxplot(data, tick_labels=labels)
        ax.axhspan(*BAND, color="green", alpha=0.15)
        ax.set_yscale("log")
        ax.set_ylabel(f"{kernel}\npred/meas")
        ax.tick_params(axis="x", labelsize=6)
    axes[0, 0].set_title(f"accuracy per approach and {what}")
    fig.tight_layout()
    save_figure(fig, path)


def write_plots(runs: Sequence[Run], facts: dict[str, DeviceFacts],
                preds: dict[str, np.ndarray], split: str, folder: Path, force: bool) -> None:
    """The Q-Q plot and the accuracy box plots into ``folder``."""
    key = holdout_key(split)
    with output_dir(folder, force) as out:
        plot_qq(runs, feature_matrix(runs, facts), out / "seed003_qq.png")
        plot_accuracy(runs, preds, key, f"held-out {split}", out / "seed003_accuracy.png")
        mmsc = [i for i, r in enumerate(runs) if r.kernel == "MMSC"]
        learned = {a: preds[a][mmsc] for a in APPROACHES}
        plot_accuracy([runs[i] for i in mmsc], learned, key, f"held-out {split} (MMSC)",
                      out / "seed003_mmsc_learned.png")


def main(argv: list[str] | None = None) -> int:
    """Sweep the nine kernels on every device, predict each run four ways, print the tables."""
    parser = argparse.ArgumentParser(prog="autotune bench kernel-models", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="three sizes per kernel, two blocks; the own-work comparison on "
                             "fewer scenes and frames (a smoke run)")
    parser.add_argument("--device", help="one device (P:D, cpu, intel-cpu, ...); default: one "
                                         "device of every OpenCL runtime that builds here")
    parser.add_argument("--split", choices=("auto", "device", "size"), default="auto",
                        help="what the learned models hold out; auto: device where two or more "
                             "devices build, else size")
    parser.add_argument("--max-launch-s", type=opt.finite_positive,
                        help="stop growing a kernel's size where a launch would take longer "
                             f"(default {FULL.max_launch_s}, quick {QUICK.max_launch_s})")
    parser.add_argument("--part", choices=("all", "seed003", "own", "online"), default="all",
                        help="seed 003's kernels, the comparison on the project's own renderers "
                             "(benchmarks.predictors.predictor_comparison), the online learned predictor "
                             "on the ray tracer (benchmarks.predictors.online_predictor), or all (default)")
    opt.add_plots(parser, "the Q-Q and accuracy box plots")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.plots:
        check_output_dir(args.plots, args.force)
    run = RunRecord()
    from benchmarks.predictors import online_predictor, predictor_comparison
    from governed.mesh.scene_sets import TEST_SCENES
    from raytracer.device.choice import DeviceError, one_device_per_runtime

    figures: dict[str, Any] = {}
    if args.part in ("all", "seed003"):
        sweep = QUICK if args.quick else FULL
        if args.max_launch_s:
            sweep = replace(sweep, max_launch_s=args.max_launch_s)
        specs = [info.spec for info in one_device_per_runtime(args.device)]
        if not specs:
            raise DeviceError("no OpenCL device builds here; `autotune devices` says why")
        split = args.split if args.split != "auto" else ("device" if len(specs) > 1 else "size")
        if split == "device" and len(specs) < 2:
            parser.error("--split device needs two or more devices that build here")
        runs, facts, profiles, reached = measure(specs, sweep)
        figures, preds = evaluate(runs, facts, profiles, split)
        figures["largest_size"] = reached
        figures["sweep"] = asdict(sweep)
        if args.plots:
            write_plots(runs, facts, preds, split, args.plots, args.force)
    if args.part in ("all", "own"):
        figures["own_work"] = predictor_comparison.run(args.device, args.quick)
        figures.setdefault("goals", {}).update(predictor_comparison.goals(figures["own_work"]))
    if args.part in ("all", "online"):
        scenes = TEST_SCENES[:1] if args.quick else TEST_SCENES
        figures["online_learned"] = online_predictor.run(scenes, args.quick, args.device)
        figures.setdefault("goals", {}).update(online_predictor.goals(figures["online_learned"]))
    stamp(figures, run)
    if args.json:
        emit(figures, True)
        return 0
    if args.part in ("all", "seed003"):
        print("\n".join(table_lines(figures)))
    if args.part in ("all", "own"):
        print("\n".join(predictor_comparison.table_lines(figures["own_work"])))
    if args.part in ("all", "online"):
        print("\n".join(online_predictor.table_lines(figures["online_learned"])))
    shown = {k: v for k, v in figures.items() if k not in (
        "runs", "table_v", "table_v_mmsc", "table_vi", "own_work", "online_learned")}
    emit(shown, False, "seed 003: BSP, Hong-Kim, LR, SVR, RF on the devices here and on the "
                       "project's own renderers")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
