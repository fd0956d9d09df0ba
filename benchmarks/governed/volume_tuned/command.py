"""The tuner holding the distributed volume renderer at a target: model error and governed runs.

The launcher: runs the MPI job (its ranks run ``runs.worker``), adds the goals block and plots.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from autotune_app import options as opt
from autotune_app.report import emit
from benchmarks.governed.volume_tuned.limits import goal_limits
from benchmarks.governed.volume_tuned.report import diagnostics, goals, plot, probe_and_form
from benchmarks.governed.volume_tuned.run_constants import MARK
from benchmarks.harness.results import save_result
from benchmarks.harness.run_record import RunRecord, mark_limits, quick_run, stamp
from common.atomic_files import check_output_dir, output_dir
from governed.volume.volume_sets import CALIBRATION_VOLUMES, GOVERNED_VOLUME
from raytracer.mpi.launch import launch


def protocol_ranks() -> int:
    """The protocol's rank count: one per core, at least two."""
    return max(2, os.cpu_count() or 2)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a table or JSON (``--json``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="24-frame orbit, fewer frames, 128² unless --size is given")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")
    parser.add_argument("--ranks", type=int, default=protocol_ranks(),
                        help="MPI ranks (default: one per core)")
    parser.add_argument("--size", type=int, default=None,
                        help="image width and height (default 256, quick 128)")
    parser.add_argument("--calibrate-on", default=",".join(CALIBRATION_VOLUMES),
                        help=f"volumes calibrated on (the first must be {GOVERNED_VOLUME}, "
                             "the governed one)")
    opt.add_plots(parser)
    parser.add_argument("--save", action="store_true",
                        help="also write results/<machine>/volume_tuned_<size>_<runtime>.json "
                             "(with _<K>ranks, _quick or _on-<volumes> before <runtime> where "
                             "the run differs from the protocol)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.size is None:
        args.size = 128 if args.quick else 256
    if args.worker:
        from benchmarks.governed.volume_tuned.runs import worker  # lazy: loads pyopencl

        return worker(args)
    if args.plots:
        check_output_dir(args.plots, args.force)
    run = RunRecord()
    if args.calibrate_on.split(",")[0] != GOVERNED_VOLUME:
        parser.error(f"--calibrate-on must start with {GOVERNED_VOLUME}, the governed "
                     f"volume; got {args.calibrate_on!r}")
    cmd = ["benchmarks.governed.volume_tuned", "--worker", "--size", str(args.size),
           "--calibrate-on", args.calibrate_on] + (["--quick"] if args.quick else [])
    done = launch(cmd, args.ranks, timeout=3600)
    lines = [x for x in done.stdout.splitlines() if x.startswith(MARK)]
    if done.returncode != 0 or not lines:
        sys.stderr.write(done.stderr[-3000:])
        print(f"bench volume-tuned: the {args.ranks}-rank job failed (exit {done.returncode})",
              file=sys.stderr)
        return 1
    figures = json.loads(lines[-1][len(MARK):])
    figures["controlled_time"] = ("rank 0's frame: probe + choice + knob broadcast + local "
                                  "render + compositing + gather + upscale")
    figures["machine_note"] = (f"{os.cpu_count()} cores; {args.ranks} ranks, each pinned to "
                               "its share of the cores (not when there are more ranks than "
                               "cores), its OpenCL device on that many threads "
                               "(AUTOTUNE_COMPUTE_UNITS)")
    figures["model_error_probe_and_form"] = probe_and_form(figures)
    figures["goals"] = goals(figures)
    figures["diagnostics"] = diagnostics(figures)
    mark_limits(figures["goals"], goal_limits(figures))
    stamp(figures, run, "; ".join(off_protocol(args).values()) or None)
    if args.plots:
        with output_dir(args.plots, args.force) as d:
            plot(figures, d / "volume_tuned.png")
    if args.json:
        emit(figures, True)
    else:
        emit(brief(figures), False, "Governed distributed volume renderer")
    if args.save:
        save_result(result_name(args, figures["runtime"]), figures)
    return 0


def off_protocol(args: argparse.Namespace) -> dict[str, str]:
    """What the run changed from the protocol its goals are set for (one rank per core, the
    full run, the shipped calibration volumes): the saved name's part for each, and why."""
    shipped = ",".join(CALIBRATION_VOLUMES)
    out = {}
    if args.ranks != protocol_ranks():
        out[f"{args.ranks}ranks"] = f"{args.ranks} ranks on {os.cpu_count()} cores"
    if args.quick:
        out["quick"] = quick_run(True)
    if args.calibrate_on != shipped:
        name = "on-" + args.calibrate_on.replace(",", "+").replace(":", "-")
        out[name] = f"calibrated on {args.calibrate_on}, not {shipped}"
    return out


def result_name(args: argparse.Namespace, runtime: str) -> str:
    """The saved file's name: size and runtime, and whatever the run changed from the
    protocol, so that a variant never replaces the protocol's result of the same size."""
    return "_".join([f"volume_tuned_{args.size}", *off_protocol(args), runtime]) + ".json"


def brief(figures: dict[str, Any]) -> dict[str, Any]:
    """The table's figures: each governed run's summary in place of its frames, and the
    recovery counts alone."""
    out = {k: v for k, v in figures.items() if k not in (
        "governed", "governed_test_volume", "target_change", "volume_swap", "calibration")}
    out["governed"] = {k: v["summary"] for k, v in figures["governed"].items()}
    out["governed_test_volume"] = figures["governed_test_volume"]["summary"]
    out["recovery_frames"] = {"target_change": figures["target_change"]["recovery_frames"],
                              "volume_swap": figures["volume_swap"]["recovery_frames"]}
    return out
