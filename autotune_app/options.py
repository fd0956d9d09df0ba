"""Options shared by the commands, so each is spelled, checked and explained the same way.

Image size is ``--width``/``--height`` everywhere; a target is ``--target-ms`` or ``--fps``;
``--scene``, ``--up``, ``--eye``/``--look-at`` and ``--controller`` mean the same in every
command. Values are checked while parsing, so a bad one is one line and exit code 2.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from autotune.controllers import CONTROLLERS, DEFAULT_CONTROLLER
from governed.probe_policy import DEFAULT_PROBE_POLICY, PROBE_POLICIES
from raytracer.camera import Camera
from raytracer.mesh.scene import DEFAULT_SCENE, UP_AXES

MAX_AO_RAYS = 64
MAX_SEED = 2**32 - 1  # the kernels take a 32-bit unsigned seed
MAX_SIZE = 16384  # per side; the device and OpenGL limits are checked when they are known


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: X)`` after an option's help where there is a default worth showing."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        hidden = action.default is None or action.default is False
        if (hidden or action.default == argparse.SUPPRESS or "%(default)" in text
                or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


def number(text: str) -> float:
    """A float from the command line, or an error that quotes what was given."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: not a number") from None


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: not an integer") from None


def positive_int(text: str) -> int:
    value = integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


#: Frames a volume calibration needs at least: the first is not fitted, and the per-rank
#: render model of one volume has 8 coefficients (models.volume_cost.RenderModel.fit)
MIN_CALIBRATION_FRAMES = 9


def calibration_frames(text: str) -> int:
    """``--calibration-frames``: enough frames to fit the volume model."""
    value = positive_int(text)
    if value < MIN_CALIBRATION_FRAMES:
        raise argparse.ArgumentTypeError(
            f"must be >= {MIN_CALIBRATION_FRAMES} (the first is not fitted, and the per-rank "
            f"model has {MIN_CALIBRATION_FRAMES - 1} coefficients), got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    value = integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def image_side(text: str) -> int:
    value = positive_int(text)
    if value > MAX_SIZE:
        raise argparse.ArgumentTypeError(f"must be in 1..{MAX_SIZE}, got {text!r}")
    return value


def finite_positive(text: str) -> float:
    value = number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got {text!r}")
    return value


def seed(text: str) -> int:
    value = integer(text)
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be in 0..{MAX_SEED}, got {text!r}")
    return value


def ao_rays(text: str) -> float:
    value = number(text)
    if not (math.isfinite(value) and 0 <= value <= MAX_AO_RAYS):
        raise argparse.ArgumentTypeError(f"must be a number in 0..{MAX_AO_RAYS}, got {text!r}")
    return value


def ao_radius(text: str) -> float:
    value = number(text)
    if not (math.isfinite(value) and 0 < value <= 1):
        raise argparse.ArgumentTypeError(
            f"must be in (0, 1] (a fraction of the scene diagonal), got {text!r}")
    return value


def point(text: str) -> tuple[float, float, float]:
    """``X,Y,Z`` in scene units."""
    parts = text.replace(" ", "").split(",")
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected X,Y,Z (three finite numbers), got {text!r}")
    return values  # type: ignore[return-value]


def add_scene(p: argparse.ArgumentParser, default: str = DEFAULT_SCENE) -> None:
    p.add_argument("--scene", default=default,
                   help="a shipped scene (autotune scenes lists them) or an .obj/.ply file, "
                        "optionally .gz")
    p.add_argument("--up", choices=tuple(UP_AXES), default="y",
                   help="the mesh's axis that points up: z for a Z-up mesh, --up=-z for the "
                        "negative axis")


def add_camera(p: argparse.ArgumentParser) -> None:
    p.add_argument("--eye", type=point, metavar="X,Y,Z",
                   help="camera position in scene units (default: the scene's own view)")
    p.add_argument("--look-at", type=point, metavar="X,Y,Z",
                   help="point the camera looks at (default: the scene's own view)")


def add_size(p: argparse.ArgumentParser, width: int, height: int) -> None:
    p.add_argument("--width", type=image_side, default=width, help="image width in pixels")
    p.add_argument("--height", type=image_side, default=height, help="image height in pixels")


def add_target(p: argparse.ArgumentParser, default_ms: float | None,
               default_text: str | None = None) -> None:
    """``--target-ms`` or ``--fps`` (one of them); :func:`target_seconds` reads them."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("--target-ms", type=finite_positive, default=default_ms, metavar="MS",
                       help="target frame time in milliseconds"
                       + (f" (default: {default_text})" if default_text else ""))
    group.add_argument("--fps", type=finite_positive,
                       help="target frames per second (instead of --target-ms)")


def target_seconds(args: argparse.Namespace) -> float | None:
    if getattr(args, "fps", None):
        return 1.0 / args.fps
    return args.target_ms / 1e3 if args.target_ms is not None else None


def add_controller(p: argparse.ArgumentParser, text: str = "controller") -> None:
    p.add_argument("--controller", choices=tuple(CONTROLLERS), default=DEFAULT_CONTROLLER,
                   help=f"{text}: " + ", ".join(f"{name} ({c.summary})"
                                               for name, c in CONTROLLERS.items()))


def add_probe_policy(p: argparse.ArgumentParser) -> None:
    p.add_argument("--probe-policy", choices=PROBE_POLICIES, default=DEFAULT_PROBE_POLICY,
                   help="governed runs: which frames the CPU probe measures: always (every "
                        "frame), on-change (a new view, a jump, a mispriced frame, or an old "
                        "probe; default) or never (the first view only)")


def add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", help="OpenCL device: gpu, cpu, P:D or part of its name "
                                    "(default: $AUTOTUNE_DEVICE, else the first GPU, else CPU)")


def apply_camera(scene: Any, args: argparse.Namespace) -> None:
    """Replace the scene's default view by ``--eye``/``--look-at`` where given."""
    eye, look_at = getattr(args, "eye", None), getattr(args, "look_at", None)
    if eye is None and look_at is None:
        return
    cam = scene.camera
    eye = eye if eye is not None else cam.eye
    look_at = look_at if look_at is not None else cam.target
    if math.dist(eye, look_at) == 0:
        raise ValueError(f"--eye and --look-at must differ, both are {','.join(map(str, eye))}")
    scene.camera = Camera(tuple(eye), tuple(look_at), cam.up, cam.fov_y)


def add_plots(p: argparse.ArgumentParser, what: str = "PNG plots") -> None:
    """``--plots DIR`` and ``--force``: every benchmark's plot folder, under one rule (a new or
    empty folder; with --force same-named files are replaced and nothing else is deleted)."""
    p.add_argument("--plots", type=Path,
                   help=f"folder for {what}; must be new or empty unless --force")
    p.add_argument("--force", action="store_true",
                   help="write --plots into a non-empty folder (same-named files are replaced, "
                        "nothing else is deleted)")


def add_evaluation_set(p: argparse.ArgumentParser) -> None:
    """``--scene`` and ``--set``: what a model benchmark evaluates on, under one rule (the
    scene sets of :mod:`governed.mesh.scene_sets`; a calibration scene is refused)."""
    from governed.mesh.scene_sets import EVALUATION_SETS  # lazy: loads pyopencl and numba

    p.add_argument("--scene", action="append", help="scene(s) (default: the set's scenes); a "
                   "calibration scene is refused")
    p.add_argument("--set", choices=EVALUATION_SETS, default="validation",
                   help="evaluate on the validation scenes (dragon, sibenik: they choose "
                        "changes) or the test scenes (grass, terrain, aneurism: only to report)")
