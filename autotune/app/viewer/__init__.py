"""Interactive viewer (``autotune view``): the tuned ray tracer in a window, with a live overlay.

An application on top of the runtime: the core ``autotune`` package never imports it. GL and
window libraries load only when a view actually starts, so parsing the command line stays cheap.
"""

from __future__ import annotations

import argparse
import sys

from autotune.controllers import CONTROLLERS


class ViewerError(RuntimeError):
    """The viewer cannot start or go on; the message says why and what to do instead."""


def _size(text: str) -> tuple[int, int]:
    """Parse ``WIDTHxHEIGHT`` for ``--size``."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must be WIDTHxHEIGHT, got {text!r}") from None
    if w < 1 or h < 1:
        raise argparse.ArgumentTypeError(f"size must be positive, got {text!r}")
    return w, h


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def add_view_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``view`` subcommand and its options to a CLI's subparsers."""
    p = subparsers.add_parser(
        "view",
        help="show the tuned ray tracer in a window with a live frame-time overlay",
        description="Open a window showing the ray-traced scene; the tuner governs every frame. "
        "Press H in the window for the key list.",
    )
    p.add_argument("--scene", default="sibenik", help="scene name or mesh file (default sibenik)")
    p.add_argument(
        "--target-ms",
        type=_positive_float,
        default=50.0,
        help="target frame time in milliseconds (default 50)",
    )
    p.add_argument(
        "--size",
        type=_size,
        default=(1280, 720),
        metavar="WxH",
        help="window / framebuffer size (default 1280x720)",
    )
    p.add_argument(
        "--controller",
        choices=CONTROLLERS,
        default="feedforward",
        help="controller at start (keys 1-3 switch it)",
    )
    p.add_argument("--device", default=None, help="OpenCL device (substring of its name)")
    p.add_argument(
        "--record",
        metavar="DIR",
        help="save every displayed frame, frames.csv, camera_path.json and run.json",
    )
    p.add_argument(
        "--path",
        metavar="FILE",
        help="replay a camera path JSON (e.g. a recorded camera_path.json)",
    )
    p.add_argument("--frames", type=_positive_int, metavar="N", help="stop after N frames")
    p.add_argument(
        "--headless",
        action="store_true",
        help="render offscreen (EGL), no window; needs --frames or --path",
    )
    p.set_defaults(func=run_view)
    return p


def run_view(args: argparse.Namespace) -> int:
    """Run ``autotune view``; a :class:`ViewerError` is printed as one line and returns 2."""
    from autotune.app.viewer.app import run

    try:
        run(args)
    except ViewerError as exc:
        print(f"autotune view: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0
