"""``autotune bench kernel-models``: the kernel-model paper's comparison on the devices here.

The kernel-model paper: Amarís, de Camargo, Dyab, Goldman, Trystram, "A Comparison of GPU
Execution Time Prediction using Machine Learning and Analytical Modeling" (BSP model vs LR,
SVR, RF). Its nine applications (MMGU, MMGC, MMSU, MMSC, MAU, MAC, vAdd, dotP, MSA; OpenCL C
in ``studies/kernel_models/kernels/amaris_applications.cl``) are swept over sizes and
work-group (block) sizes as far as the machine allows: sizes grow in powers of two until the
next size's launch would take longer than ``--max-launch-s`` (the slowest launch scaled by the
work). Each launch is timed with profiling events, best of 3 after one warm-up.

Approaches, all predicting seconds per launch:

- ``BSP``: the paper's Eq. 3 (``studies.kernel_models.bsp``) with Table III's counts; ``P`` =
  compute units x SIMD width (the lanes that run at once), ``R`` = the clock. lambda is fitted
  from one run per kernel and device (the middle size at the smallest block), which is then
  left out of its figures.
- ``HK``: Hong and Kim with the device profile ``autotune calibrate`` stored (or a shipped one,
  else one from quick microbenchmarks), fed the kernels' own per-thread counts; nothing fitted.
- ``LR``, ``SVR``, ``RF``: ``studies.kernel_models.learned_comparators`` on the paper's 13
  features in log2 space, one model per kernel as the paper trains per application. Held out:
  one device at a time where three or more OpenCL runtimes build (the paper's protocol: each
  fold trains on two or more devices, so the device features vary), else one size at a time
  (all its blocks). Held out by size, RF cannot extrapolate past the sizes it
  saw, and on a power-of-two grid in log2 a held-out size sits exactly on the threshold between
  its neighbours, so RF predicts a neighbour's time; LR and SVR extrapolate the log-log trend.

The same comparison on this project's own work (``benchmarks.predictors.predictor_comparison``;
``--part own`` runs it alone, ``--part seed003`` leaves it out): the ray tracer's phases and
frames (Hong–Kim vs BSP vs LR / SVR / RF and the hybrid on the probe's workload, the knobs and
the device profile) and the volume renderer's per-rank render time (the linear model of the
per-process analytical model (HemoCell study) vs the learned ones), fitted on calibration
scenes / views, chosen on validation ones, reported on both and on the test ones. Its goals
join the goals block; its figures are ``own_work``. Then the online learned predictor on the
ray tracer itself, with no model and no calibration, on the test scenes
(``benchmarks.predictors.online_predictor``; ``--part online``): ``online_learned``.

MSA keeps the paper's 4096 work-items; its block (the paper's 128) is swept like the others'.

The 13 features: the device's compute units, clock (MHz) and bandwidth (GB/s, from that
profile); the input size (matrix side or vector length); global load and store transactions,
local (shared) loads and stores, single-precision operations (totals over the launch from the
kernels' per-thread counts, + 1 so log2 is defined); block size, grid size (work-groups),
threads; and occupancy. Without a profiler the transactions are modelled: a coalesced warp
access costs ``ceil(4 * warp / 64)`` 64-byte lines, an uncoalesced one ``warp``; occupancy is
the share of compute-unit slots the work-groups fill over their waves.

Figures: tables like the paper's V (accuracy = predicted / measured, mean and sd, and NMSE per
device and approach; over every kernel, and over MMSC alone as the paper's) and VI (NMSE per
kernel and approach); every run with its predictions. ``--plots DIR``: a normal Q-Q plot of
LR's residuals without and with log2 (Fig. 1), accuracy box plots per kernel, approach and
held-out group (Fig. 3) and of the learned models on MMSC (Fig. 2).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, replace
from typing import Any

from autotune_app import options as opt
from autotune_app.report import emit
from benchmarks.harness.results import save_result
from benchmarks.harness.run_record import RunRecord, quick_run, stamp, variant_name
from benchmarks.studies.kernel_models.launches import FULL, QUICK
from benchmarks.studies.kernel_models.plots import write_plots
from benchmarks.studies.kernel_models.predictions import DEVICE_SPLIT_DEVICES, default_split
from benchmarks.studies.kernel_models.tables import evaluate, table_lines
from common.atomic_files import check_output_dir


def parser() -> argparse.ArgumentParser:
    """The benchmark's options (``--help`` prints the module's description)."""
    p = argparse.ArgumentParser(prog="autotune bench kernel-models", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="three sizes per kernel, two blocks; the own-work comparison on "
                        "fewer scenes and frames (a smoke run)")
    p.add_argument("--device", help="one device (P:D, cpu, intel-cpu, ...); default: one "
                                    "device of every OpenCL runtime that builds here")
    p.add_argument("--split", choices=("auto", "device", "size"), default="auto",
                   help="what the learned models hold out; auto: device where "
                        f"{DEVICE_SPLIT_DEVICES} or more devices build, else size (with "
                        "two, each fold would train on one device and the learned goals "
                        "are not judged)")
    p.add_argument("--max-launch-s", type=opt.finite_positive,
                   help="stop growing a kernel's size where a launch would take longer "
                        f"(default {FULL.max_launch_s}, quick {QUICK.max_launch_s})")
    p.add_argument("--part", choices=("all", "seed003", "own", "online"), default="all",
                   help="the kernel-model paper's kernels (seed003), the comparison on the "
                        "project's own renderers (benchmarks.predictors.predictor_comparison), "
                        "the online learned predictor on the ray tracer "
                        "(benchmarks.predictors.online_predictor), or all (default)")
    opt.add_plots(p, "the Q-Q and accuracy box plots")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--save", action="store_true",
                   help="also write results/<machine>/kernel_models_<part>[_quick]"
                        "[_<runtimes>].json")
    return p


def result_name(part: str, quick: bool, figures: dict[str, Any]) -> str:
    """The file ``--save`` writes: the part, quick or not, and the runtimes it timed."""
    runtimes = "+".join(sorted(figures.get("devices", {})))
    return variant_name(f"kernel_models_{part}", quick_run(quick), runtimes)


def kernel_part(args: argparse.Namespace, p: argparse.ArgumentParser) -> dict[str, Any]:
    """Sweep the nine kernels on every device, predict each run four ways: the figures."""
    from benchmarks.studies.kernel_models import opencl_timing  # lazy: loads pyopencl

    sweep = QUICK if args.quick else FULL
    if args.max_launch_s:
        sweep = replace(sweep, max_launch_s=args.max_launch_s)
    specs = opencl_timing.runtime_specs(args.device)
    split = args.split if args.split != "auto" else default_split(len(specs))
    if split == "device" and len(specs) < 2:
        p.error("--split device needs two or more devices that build here")
    runs, facts, profiles, reached = opencl_timing.measure(specs, sweep)
    figures, preds = evaluate(runs, facts, profiles, split)
    figures["largest_size"] = reached
    figures["sweep"] = asdict(sweep)
    if args.plots:
        write_plots(runs, facts, preds, split, args.plots, args.force)
    return figures


def own_work_parts(args: argparse.Namespace, figures: dict[str, Any]) -> list[list[str]]:
    """The comparison on the project's own renderers and the online learned predictor, as
    ``--part`` asks, into ``figures``; their tables as lines."""
    from benchmarks.predictors import (  # lazy: loads pyopencl and numba
        online_predictor,
        predictor_comparison,
    )
    from governed.mesh.scene_sets import TEST_SCENES  # lazy: loads pyopencl and numba

    tables = []
    if args.part in ("all", "own"):
        figures["own_work"] = predictor_comparison.run(args.device, args.quick)
        figures.setdefault("goals", {}).update(predictor_comparison.goals(figures["own_work"]))
        tables.append(predictor_comparison.table_lines(figures["own_work"]))
    if args.part in ("all", "online"):
        scenes = TEST_SCENES[:1] if args.quick else TEST_SCENES
        figures["online_learned"] = online_predictor.run(scenes, args.quick, args.device)
        figures.setdefault("goals", {}).update(online_predictor.goals(figures["online_learned"]))
        tables.append(online_predictor.table_lines(figures["online_learned"]))
    return tables


def main(argv: list[str] | None = None) -> int:
    """Sweep the nine kernels on every device, predict each run four ways, print the tables."""
    p = parser()
    args = p.parse_args(argv)
    if args.plots:
        check_output_dir(args.plots, args.force)
    run = RunRecord()
    figures: dict[str, Any] = {}
    if args.part in ("all", "seed003"):
        figures = kernel_part(args, p)
    tables = own_work_parts(args, figures)
    stamp(figures, run, quick_run(args.quick))
    if args.save:
        save_result(result_name(args.part, args.quick, figures), figures)
    if args.json:
        emit(figures, True)
        return 0
    if args.part in ("all", "seed003"):
        tables.insert(0, table_lines(figures))
    for lines in tables:
        print("\n".join(lines))
    shown = {k: v for k, v in figures.items() if k not in (
        "runs", "table_v", "table_v_mmsc", "table_vi", "own_work", "online_learned")}
    emit(shown, False, "The kernel-model paper: BSP, Hong-Kim, LR, SVR, RF on the devices here "
                       "and on the project's own renderers")
    return 0
