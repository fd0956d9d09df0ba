"""``autotune bench paper``: seed 002's experiment (figures 5 and 8) on the shipped scenes.

An orbit-and-dolly animation and an abrupt 180° turn from an empty view to the scene, each
rendered under the feed-forward controller and the two baselines, at the same target.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from pathlib import Path

from autotune.app.animation import (
    logs_to_dicts,
    orbit_camera_path,
    plot_run,
    reference_target,
    run_path,
    summarize,
    turn_camera_path,
)
from autotune.app.report import emit
from autotune.atomic_files import check_output_dir, output_dir
from autotune.controllers import CONTROLLERS
from raytracer.scene import load_scene
from raytracer.tracer import Tracer
from raytracer.tuning.tuned_renderer import TunedRenderer


def run_scene(scene_name: str, controllers: tuple[str, ...], frames: int, width: int, height: int,
              target_ms: float | None, device: str | None, plots: Path | None,
              progress: bool = True) -> dict:
    """Both paths under every controller; returns figures and per-frame logs."""
    scene = load_scene(scene_name)
    tracer = Tracer(scene, device=device)
    orbit = orbit_camera_path(scene, frames)
    turn, turn_at = turn_camera_path(scene, max(frames // 2, 4))
    target = target_ms / 1e3 if target_ms else reference_target(tracer, orbit[0], width, height)
    result: dict = {"scene": scene_name, "target_ms": target * 1e3, "width": width,
                    "height": height, "frames": frames, "controllers": {}}
    logs_all: dict[str, dict] = {"orbit": {}, "turn": {}}
    for name in controllers:
        figures = {}
        for path_name, cameras, mark in (("orbit", orbit, None), ("turn", turn, turn_at)):
            renderer = TunedRenderer(scene, width, height, target, controller=name, tracer=tracer)
            logs = run_path(renderer, cameras, desc=f"{scene_name} {name} {path_name}",
                            progress=progress)
            figures[path_name] = summarize(logs, mark)
            logs_all[path_name][name] = logs
        result["controllers"][name] = figures
    if plots is not None:
        plots.mkdir(parents=True, exist_ok=True)
        for path_name, mark in (("orbit", None), ("turn", turn_at)):
            plot_run(logs_all[path_name], f"{scene_name}: {path_name}, target "
                     f"{target * 1e3:.1f} ms", plots / f"paper_{scene_name}_{path_name}.png", mark)
    result["per_frame"] = {p: {c: logs_to_dicts(v) for c, v in d.items()}
                           for p, d in logs_all.items()}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="autotune bench paper", description=__doc__)
    parser.add_argument("--scene", action="append", help="scene(s) (default: dragon, sibenik)")
    parser.add_argument("--controller", choices=(*CONTROLLERS, "all"), default="all")
    parser.add_argument("--quick", action="store_true", help="30 frames at 320x180")
    parser.add_argument("--frames", type=int, help="frames of the orbit path (default 100)")
    parser.add_argument("--width", type=int)
    parser.add_argument("--height", type=int)
    parser.add_argument("--target-ms", type=float, help="default: the scene's mid-setting time")
    parser.add_argument("--device")
    parser.add_argument("--plots", type=Path,
                        help="folder for PNG plots; must be new or empty unless --force")
    parser.add_argument("--force", action="store_true",
                        help="write --plots into a non-empty folder (same-named plots are "
                             "replaced, nothing else is deleted)")
    parser.add_argument("--per-frame", action="store_true", help="include per-frame logs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    scenes = args.scene or (["dragon-small"] if args.quick else ["dragon", "sibenik"])
    frames = args.frames or (30 if args.quick else 100)
    width = args.width or (320 if args.quick else 640)
    height = args.height or (180 if args.quick else 360)
    controllers = tuple(CONTROLLERS) if args.controller == "all" else (args.controller,)
    if args.plots:
        check_output_dir(args.plots, args.force)  # before the runs, not after
    results = []
    with (output_dir(args.plots, args.force) if args.plots else nullcontext()) as plots:
        for name in scenes:
            r = run_scene(name, controllers, frames, width, height, args.target_ms, args.device,
                          plots, progress=True)
            if not args.per_frame:
                r.pop("per_frame")
            results.append(r)
    emit({"paper": results}, args.json, title="seed 002 experiment: tracking a target frame time")
    return 0
