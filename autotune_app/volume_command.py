"""``autotune volume`` and ``autotune volumes``: the distributed volume renderer from the shell.

``mpiexec -n 4 autotune volume --volume bonsai --frames 72 -o DIR`` renders the 72-frame
double orbit of the cluster study (Tkachev, Frey, Müller, Bruder, Ertl: "Prediction of
Distributed Volume Visualization Performance to Support Render Hardware Acquisition") with one
brick per rank (``autotune volume`` alone runs one process).
Fixed knobs come from ``--step/--scale/--ert``; with ``--target-ms`` or ``--fps`` the tuner
chooses them every frame (``--controller``), after a calibration on views the path never uses.

Every rank runs this module. Bad input (unknown volume, unreadable file, bad transfer
function, a non-empty ``-o`` folder without ``--force``) is decided on every rank before any
collective and reported once, by rank 0, as one line; every rank exits with status 2. Any
other failure on any rank ends the whole job (``raytracer.mpi.faults.install_excepthook``), so the
console script, which is not started through ``python -m mpi4py``, never hangs.

Rank 0 writes into the output folder (built beside it and renamed into place, so a failed
run leaves nothing half-written): every frame as PNG, ``frames.csv`` (one row a frame),
``timings.json`` (every phase of every rank of every frame), ``summary.json`` and
``plot.png``.

This module parses the two commands' options; ``volume_run`` runs them, ``volume_plot`` draws
the plot.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from pathlib import Path
from typing import Any

from autotune_app import options as opt
from raytracer.volume.compositing import ALGORITHMS

#: Calibration frames by default (also bench volume-tuned's, for a model calibrated on a
#: volume's own views): on bonsai at 512², 20 ms, six runs each, 16 frames held the target at
#: 7.3 % mean off, 48 at 6.3 % (calibration 1.5 -> 2.3 s). The viewer keeps 16: its 1280x720
#: frames take seconds each.
CALIBRATION_FRAMES = 48

DEFAULT_OUT = Path("volume_out")
RANK_ENV = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK")


def launcher_rank() -> int:
    """This process's rank as the MPI launcher announced it (0 without a launcher), read
    from the environment so that argument errors are printed once without starting MPI."""
    for key in RANK_ENV:
        with contextlib.suppress(KeyError, ValueError):
            return int(os.environ[key])
    return 0


def rank0_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Argument errors are the same on every rank: only rank 0 prints them (all exit 2)."""
    plain = parser.error

    def error(message: str):  # type: ignore[no-untyped-def]
        if launcher_rank() != 0:
            sys.exit(2)
        plain(message)

    parser.error = error  # type: ignore[method-assign]
    return parser


def unit_interval(text: str) -> float:
    """argparse type: a number in (0, 1]."""
    value = opt.number(text)
    if not (math.isfinite(value) and 0 < value <= 1):
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text!r}")
    return value


def triple(kind: type) -> Any:
    """argparse type: three positive numbers of ``kind`` written X,Y,Z (or XxYxZ)."""

    def parse(text: str) -> tuple:
        parts = text.replace("x", ",").replace(" ", "").split(",")
        try:
            values = tuple(kind(p) for p in parts)
        except ValueError:
            values = ()
        if len(values) != 3 or not all(math.isfinite(v) and v > 0 for v in values):
            raise argparse.ArgumentTypeError(f"expected X,Y,Z (three positive numbers), got "
                                             f"{text!r}")
        return values

    return parse


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``autotune volume`` and ``autotune volumes``."""
    text = ("render a volume with one brick per MPI rank (run under mpiexec -n K): frames, "
            "per-rank timings, plot")
    p = rank0_errors(sub.add_parser("volume", help=text, description=text,
                                     formatter_class=opt.HelpFormatter))
    p.add_argument("--volume", default="bonsai",
                   help="a shipped or procedural volume (autotune volumes lists them) or a "
                        "raw/NRRD/NIfTI/.npy file, or VTK image data (.vti/.vtk, with VTK "
                        "installed)")
    p.add_argument("--dims", type=triple(int), metavar="X,Y,Z",
                   help="voxel counts of a .raw file whose name does not give them")
    p.add_argument("--dtype", choices=("uint8", "uint16", "int16", "float32"),
                   help="voxel type of a .raw file whose name does not give it")
    p.add_argument("--spacing", type=triple(float), metavar="X,Y,Z",
                   help="voxel spacing (default: from the file's header, else 1,1,1)")
    p.add_argument("--tf", metavar="PRESET|FILE.json",
                   help="transfer function: a preset (autotune volumes lists them) or a JSON "
                        "file (default: the volume's own preset, else grey)")
    p.add_argument("--frames", type=opt.positive_int, default=72,
                   help="frames of the cluster study's double orbit (Tkachev et al.)")
    opt.add_size(p, 512, 512)
    p.add_argument("--step", type=opt.finite_positive, default=None,
                   help="sample step in voxels (fixed knobs; default 1)")
    p.add_argument("--scale", type=unit_interval, default=None,
                   help="image scale in (0, 1]: render at this share of each side, then "
                        "upscale (fixed knobs; default 1)")
    p.add_argument("--ert", type=unit_interval, default=None,
                   help="early-ray-termination opacity in (0, 1], 1 = only once opaque (fixed "
                        "knobs; default 1)")
    p.add_argument("--algorithm", choices=ALGORITHMS, default="radix-k",
                   help="sort-last compositing algorithm")
    p.add_argument("--balance", action="store_true",
                   help="split bricks by the empty-space cost grid instead of voxel counts")
    opt.add_target(p, None, "none: fixed knobs from --step/--scale/--ert")
    opt.add_controller(p, "controller for --target-ms/--fps")
    opt.add_probe_policy(p)
    p.add_argument("--target-share", type=unit_interval, metavar="F",
                   help="governed, with the target F times the first view's full-quality frame "
                        "(measured after calibration): a target this machine can hold without "
                        "knowing its speed (instead of --target-ms/--fps)")
    p.add_argument("--calibration-frames", type=opt.calibration_frames,
                   default=CALIBRATION_FRAMES,
                   help="frames rendered to calibrate the model before a governed run")
    p.add_argument("--quality", action=argparse.BooleanOptionalAction, default=True,
                   help="governed runs: after the timed frames, render each frame again at its "
                        "settings and at full quality for PSNR/SSIM (untimed)")
    p.add_argument("--emulate", type=Path, metavar="HIST.json",
                   help="emulation (Tkachev et al. §4): each rank sleeps a local render time drawn "
                        "from this performance histogram instead of ray casting, then "
                        "composites a real-sized image of random data")
    p.add_argument("--emulate-mode", choices=("histogram", "per-frame", "vector"),
                   default="histogram",
                   help="draw from the path's histogram, from each frame's own histogram, or "
                        "sleep each rank's mean time (vector; needs the histogram's rank count)")
    opt.add_device(p)
    p.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT, metavar="DIR",
                   help="folder to write; must be new or empty unless --force")
    p.add_argument("--force", action="store_true",
                   help="write into an existing non-empty --out folder: same-named files are "
                        "replaced, nothing else is deleted")
    p.add_argument("--json", action="store_true",
                   help="print the summary as JSON instead of a table")
    text = "list the shipped volumes, the procedural ones and the transfer-function presets"
    p = sub.add_parser("volumes", help=text, description=text, formatter_class=opt.HelpFormatter)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
