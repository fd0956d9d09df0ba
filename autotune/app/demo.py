"""``autotune demo``: the tuned animation, headless — frames, plots and a short report."""

from __future__ import annotations

import argparse
from pathlib import Path

from autotune.app import options as opt
from autotune.app.animation import (
    logs_to_dicts,
    orbit_camera_path,
    plot_run,
    reference_target,
    run_path,
    summarize,
)
from autotune.app.limits import check_device_memory
from autotune.app.report import tracking_report
from autotune.app.scenes import load_scene
from autotune.atomic_files import check_output_dir, output_dir, write_json, write_text
from raytracer.tracer import Tracer
from raytracer.tuning.tuned_renderer import TunedRenderer

REPORT = """autotune demo: {scene} ({triangles} triangles) on {device}
{frames} frames at {width}x{height}, target {target_ms:.1f} ms per frame (kernel time), \
controller {controller}

{tracking}
frames/      every frame as PNG
plot.png     frame times vs target, AO rays, model errors
figures.json the figures above and every frame's knobs and times
"""


def run_demo(args: argparse.Namespace) -> int:
    """Render the orbit-and-dolly animation under the tuner into ``args.out``.

    The folder is built beside ``args.out`` and renamed into place at the end, so an
    interrupted demo leaves nothing half-written; an existing non-empty folder is refused
    unless ``args.force`` (then same-named files are replaced and nothing else is deleted).
    """
    out = Path(args.out)
    check_output_dir(out, args.force)  # before minutes of rendering, not after
    scene = load_scene(args.scene, up=args.up)
    opt.apply_camera(scene, args)
    tracer = Tracer(scene, device=args.device)
    check_device_memory(tracer, args.width, args.height)
    cameras = orbit_camera_path(scene, args.frames)
    target = (opt.target_seconds(args)
              or reference_target(tracer, cameras[0], args.width, args.height))
    renderer = TunedRenderer(scene, args.width, args.height, target,
                             controller=args.controller, tracer=tracer)
    with output_dir(out, args.force) as work:
        (work / "frames").mkdir(exist_ok=True)
        logs = run_path(renderer, cameras, desc="demo", frames_dir=work / "frames")
        figures = summarize(logs)
        plot_run({args.controller: logs}, f"{scene.name}: tuned to {target * 1e3:.1f} ms",
                 work / "plot.png")
        info = {"scene": scene.name, "triangles": scene.triangle_count,
                "device": tracer.device.name, "width": args.width, "height": args.height,
                "target_ms": target * 1e3, "controller": args.controller}
        write_json(work / "figures.json",
                   {**info, "summary": figures, "per_frame": logs_to_dicts(logs)}, indent=1)
        report = REPORT.format(**info, frames=len(logs), tracking=tracking_report(figures))
        write_text(work / "report.txt", report)
    print(report)
    print(f"written to {out}/")
    return 0
