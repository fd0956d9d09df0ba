"""Interactive viewer (``autotune view``): the tuned ray tracer, or with ``--volume`` the
distributed volume renderer (under ``mpiexec -n K``: rank 0's frames), in a window with a live
overlay.

An application on top of the runtime: the core ``autotune`` package never imports it. GL and
window libraries load only when a view actually starts, so parsing the command line stays cheap.
"""

from __future__ import annotations

import argparse
import sys

from autotune import CONTROLLERS
from autotune_app import options as opt
from autotune_app.viewer.errors import ViewerError
from autotune_app.volume_command import rank0_errors


class _SizeAlias(argparse.Action):
    """``--size WxH``: the old spelling of ``--width W --height H`` (deprecated)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        try:
            w, h = (opt.image_side(v) for v in values.lower().split("x"))
        except (ValueError, argparse.ArgumentTypeError):
            raise argparse.ArgumentError(
                self, f"size must be WIDTHxHEIGHT, each 1..{opt.MAX_SIZE}, got {values!r}"
            ) from None
        namespace.width, namespace.height = w, h


def add_view_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``view`` subcommand and its options to a CLI's subparsers."""
    p = subparsers.add_parser(
        "view",
        help="show the tuned ray tracer (or a volume: --volume) in a window with a live "
        "frame-time overlay",
        description="Open a window showing the ray-traced scene, or with --volume the "
        "distributed volume renderer's frames (run under mpiexec -n K for K ranks; rank 0 "
        "shows them); the tuner governs every frame. Press H in the window for the key list.",
        formatter_class=opt.HelpFormatter,
    )
    rank0_errors(p)  # under mpiexec, an argument error is printed once
    opt.add_scene(p)
    p.add_argument(
        "--volume",
        metavar="NAME|FILE",
        help="show this volume (autotune volumes lists them) with the distributed volume "
        "renderer instead of a scene, one brick per MPI rank",
    )
    p.add_argument(
        "--tf",
        metavar="PRESET|FILE.json",
        help="with --volume: transfer function (default: the volume's own preset, else grey)",
    )
    p.add_argument(
        "--calibration-frames",
        type=opt.calibration_frames,
        default=16,
        help="with --volume: frames rendered to calibrate the per-rank model first",
    )
    opt.add_size(p, 1280, 720)
    p.add_argument(
        "--size", action=_SizeAlias, metavar="WxH",
        help="deprecated spelling of --width W --height H",
    )
    opt.add_target(p, 50.0)
    opt.add_controller(p, f"controller at start (keys 1-{len(CONTROLLERS)} switch it)")
    opt.add_probe_policy(p)
    opt.add_device(p)
    p.add_argument(
        "--record",
        metavar="DIR",
        help="save every displayed frame, frames.csv, camera_path.json and run.json in DIR; "
        "DIR must be new or empty unless --force",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --record into a non-empty DIR: record into a new sub-folder DIR/run-N "
        "(nothing in DIR is deleted or overwritten)",
    )
    p.add_argument(
        "--path",
        metavar="FILE",
        help="replay a camera path JSON (e.g. a recorded camera_path.json)",
    )
    p.add_argument("--frames", type=opt.positive_int, metavar="N", help="stop after N frames")
    p.add_argument(
        "--headless",
        action="store_true",
        help="render offscreen (EGL), no window; needs --frames or --path",
    )
    p.set_defaults(func=run_view)
    return p


def run_view(args: argparse.Namespace) -> int:
    """Run ``autotune view``; a :class:`ViewerError` is printed as one line and returns 2."""
    try:
        if getattr(args, "volume", None):
            from autotune_app.viewer.volume_source import run_volume  # lazy: numba, pyopencl

            return run_volume(args)
        from autotune_app.viewer.app import run  # lazy: glfw, moderngl, pyopencl, numba

        run(args)
    except ViewerError as exc:
        print(f"autotune view: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("autotune view: interrupted", file=sys.stderr)
        return 130
    return 0
