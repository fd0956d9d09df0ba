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
from benchmarks.harness.run_record import (
    RunRecord,
    changed_options,
    mark_limits,
    stamp,
    variant_name,
)
from common.atomic_files import check_output_dir, output_dir
from governed.volume.volume_sets import CALIBRATION_VOLUMES, GOVERNED_VOLUME
from raytracer.mpi.launch import launch

#: the options a protocol run leaves at their defaults (one rank per core, the full run, the
#: shipped calibration volumes); --size is the protocol's own choice, in every saved name
PROTOCOL_OPTIONS = ("ranks", "quick", "calibrate_on")


def parser() -> argparse.ArgumentParser:
    """The benchmark's options; the protocol is every option of :data:`PROTOCOL_OPTIONS` at
    its default."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="24-frame orbit, fewer frames, 128² unless --size is given")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.add_argument("--ranks", type=int, default=max(2, os.cpu_count() or 2),
                   help="MPI ranks (default: one per core)")
    p.add_argument("--size", type=int, default=None,
                   help="image width and height (default 256, quick 128)")
    p.add_argument("--calibrate-on", default=",".join(CALIBRATION_VOLUMES),
                   help=f"volumes calibrated on (the first must be {GOVERNED_VOLUME}, "
                        "the governed one)")
    opt.add_plots(p)
    p.add_argument("--save", action="store_true",
                   help="also write results/<machine>/volume_tuned_<size>_<runtime>.json "
                        "(with the options set away from their defaults before <runtime>: "
                        "such a run decides no goal)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a table or JSON (``--json``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    options = parser()
    args = options.parse_args(argv)
    changed = changed_options(options, args, PROTOCOL_OPTIONS)
    if args.size is None:
        args.size = 128 if args.quick else 256
    if args.worker:
        from benchmarks.governed.volume_tuned.runs import worker  # lazy: loads pyopencl

        return worker(args)
    if args.plots:
        check_output_dir(args.plots, args.force)
    run = RunRecord()
    if args.calibrate_on.split(",")[0] != GOVERNED_VOLUME:
        options.error(f"--calibrate-on must start with {GOVERNED_VOLUME}, the governed "
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
    stamp(figures, run, changed)
    if args.plots:
        with output_dir(args.plots, args.force) as d:
            plot(figures, d / "volume_tuned.png")
    if args.json:
        emit(figures, True)
    else:
        emit(brief(figures), False, "Governed distributed volume renderer")
    if args.save:
        save_result(variant_name(f"volume_tuned_{args.size}", changed, figures["runtime"]),
                    figures)
    return 0


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
