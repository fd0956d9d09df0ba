"""``autotune demo``: the tuned animation, headless — frames, plots and a short report."""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from autotune.app.animation import (
    logs_to_dicts,
    orbit_camera_path,
    plot_run,
    reference_target,
    run_path,
    summarize,
)
from raytracer.scene import load_scene
from raytracer.tracer import Tracer
from raytracer.tuning.tuned_renderer import TunedRenderer

REPORT = """autotune demo: {scene} ({triangles} triangles) on {device}
{frames} frames at {width}x{height}, target {target_ms:.1f} ms per frame (kernel time)

mean |frame - target| / target : {mean_abs_error_vs_target:.1%}
p95  |frame - target| / target : {p95_abs_error_vs_target:.1%}
frames over budget (>5%)       : {frames_over_budget}
mean model error               : {mean_model_error:.1%}
mean model + feedback error    : {mean_model_feedback_error:.1%}
mean AO rays chosen            : {mean_ao_rays:.1f}
mean probe time                : {mean_probe_ms:.2f} ms

frames/      every frame as PNG
plot.png     frame times vs target, AO rays, model errors
figures.json the figures above and every frame's knobs and times
"""


def run_demo(args: argparse.Namespace) -> int:
    """Render the orbit-and-dolly animation under the feed-forward tuner into ``args.out``.

    Everything is written to a temporary folder beside ``args.out`` and moved into place at
    the end, so an interrupted demo leaves nothing half-written.
    """
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    scene = load_scene(args.scene)
    tracer = Tracer(scene, device=args.device)
    cameras = orbit_camera_path(scene, args.frames)
    if args.target_ms is not None and not args.target_ms > 0:
        raise ValueError(f"--target-ms must be a positive number of milliseconds, "
                         f"got {args.target_ms}")
    target = (args.target_ms / 1e3 if args.target_ms
              else reference_target(tracer, cameras[0], args.width, args.height))
    renderer = TunedRenderer(scene, args.width, args.height, target, tracer=tracer)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (work / "frames").mkdir()
        logs = run_path(renderer, cameras, desc="demo", frames_dir=work / "frames")
        figures = summarize(logs)
        plot_run({"feedforward": logs}, f"{scene.name}: tuned to {target * 1e3:.1f} ms",
                 work / "plot.png")
        info = {"scene": scene.name, "triangles": scene.triangle_count,
                "device": tracer.device.name, "width": args.width, "height": args.height,
                "target_ms": target * 1e3}
        (work / "figures.json").write_text(json.dumps(
            {**info, "summary": figures, "per_frame": logs_to_dicts(logs)}, indent=1))
        report = REPORT.format(**info, **figures)
        (work / "report.txt").write_text(report)
        if out.exists():
            shutil.rmtree(out)
        work.replace(out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    print(report)
    print(f"written to {out}/")
    return 0
