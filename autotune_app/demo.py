"""``autotune demo``: the tuned animation, headless — frames, plots and a short report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autotune_app import options as opt
from autotune_app.animation import (
    image_quality,
    logs_to_dicts,
    orbit_camera_path,
    plot_run,
    reference_frame_target,
    reference_images,
    run_path,
    summarize,
)
from autotune_app.limits import check_device_memory
from autotune_app.report import tracking_report
from autotune_app.scenes import load_scene
from common.atomic_files import check_output_dir, output_dir, write_json, write_text
from governed.mesh.tuned_renderer import TunedRenderer
from raytracer.mesh.tracer import Tracer
from raytracer.mpi.launch import launch

REPORT = """autotune demo: {scene} ({triangles} triangles) on {device}
{frames} frames at {width}x{height}, target {target_ms:.1f} ms per frame (the frame the \
user waits for: the tuner's work + kernels + read-back), controller {controller}

{tracking}{quality}
frames/      every frame as PNG
plot.png     frame times vs target, AO rays, model errors
figures.json the figures above and every frame's knobs and times
"""

VOLUME_REPORT = """
Distributed volume renderer: {volume} on {ranks} MPI ranks ({algorithm}), {frames} frames of \
the cluster study's double orbit at {size}x{size}
target {target_ms:.1f} ms (rank 0's frame: probe + choice + render + compositing + gather + \
upscale), controller {controller}, model calibrated on {calibration_frames} frames off the path
mean |frame - target| / target {mean_err:.1%} (p95 {p95_err:.1%}), {over} frames > target + 5 %
mean PSNR {psnr} dB, SSIM {ssim} against the full-quality frame
volume/      its frames, frames.csv, timings.json (every rank's phases), summary.json, plot.png
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
    given = opt.target_seconds(args)
    if not given:  # the frame the user waits for at a mid setting, without the tuner
        reference = TunedRenderer(scene, args.width, args.height, 1.0, tracer=tracer)
        given = reference_frame_target(reference, cameras[0])
    target = given
    renderer = TunedRenderer(scene, args.width, args.height, target,
                             controller=args.controller, tracer=tracer,
                             probe_policy=args.probe_policy)
    n = len(cameras)
    kept: dict = dict.fromkeys(sorted({0, n // 3, (2 * n) // 3, n - 1}))
    with output_dir(out, args.force) as work:
        (work / "frames").mkdir(exist_ok=True)
        logs = run_path(renderer, cameras, desc="demo", frames_dir=work / "frames", keep=kept)
        figures = summarize(logs)
        figures["image_quality"] = image_quality(
            kept, reference_images(tracer, cameras, sorted(kept), args.width, args.height))
        plot_run({args.controller: logs}, f"{scene.name}: tuned to {target * 1e3:.1f} ms",
                 work / "plot.png")
        info = {"scene": scene.name, "triangles": scene.triangle_count,
                "device": tracer.device.name, "width": args.width, "height": args.height,
                "target_ms": target * 1e3, "controller": args.controller}
        write_json(work / "figures.json",
                   {**info, "summary": figures, "per_frame": logs_to_dicts(logs)}, indent=1)
        q = figures["image_quality"]
        quality = (f"PSNR / SSIM vs the full-quality frame (64 AO rays + shadows + Phong) of "
                   f"frames {', '.join(map(str, q['frames']))}: "
                   f"{_figure(q['mean_psnr_db'], '.1f', 'inf (identical)')} dB / "
                   f"{q['mean_ssim']:.3f} (lowest SSIM {q['min_ssim']:.3f})\n")
        report = REPORT.format(**info, frames=len(logs), tracking=tracking_report(figures),
                               quality=quality)
        if args.volume_ranks > 0:
            report += run_volume_part(args, work / "volume")
        write_text(work / "report.txt", report)
    print(report)
    print(f"written to {out}/")
    return 0


def run_volume_part(args: argparse.Namespace, out: Path) -> str:
    """The governed distributed volume renderer on ``args.volume_ranks`` ranks: this process
    launches ``mpiexec`` itself (``autotune volume`` on every rank) and reads its summary."""
    cmd = ["autotune_app.cli", "volume", "--volume", args.volume, "--frames",
           str(args.volume_frames), "--width", str(args.volume_size), "--height",
           str(args.volume_size),
           *(["--target-ms", f"{args.volume_target_ms:g}"] if args.volume_target_ms
             else ["--target-share", "0.5"]),
           "--controller", args.controller, "--calibration-frames", "12", "-o", str(out)]
    print(f"demo: governed volume run on {args.volume_ranks} ranks "
          f"(mpiexec -n {args.volume_ranks} autotune {' '.join(cmd[1:])})", flush=True)
    done = launch(cmd, args.volume_ranks, timeout=1800, capture=False)
    if done.returncode != 0:
        print(f"demo: the volume run failed (exit {done.returncode})", file=sys.stderr)
        raise SystemExit(done.returncode)
    s = json.loads((out / "summary.json").read_text())
    g = s["governed"]
    return VOLUME_REPORT.format(
        volume=s["volume"], ranks=s["ranks"], algorithm=s["algorithm"], frames=s["frames"],
        size=args.volume_size, target_ms=g["target_ms"], controller=g["controller"],
        calibration_frames=12, mean_err=g["mean_abs_error_vs_target"],
        p95_err=g["p95_abs_error_vs_target"], over=g["frames_over_target_5pct"],
        psnr=_figure(g.get("mean_psnr"), ".1f", "inf (identical)"),
        ssim=_figure(g.get("mean_ssim"), ".3f", "-"))


def _figure(value: float | None, spec: str, missing: str) -> str:
    """A summary figure as text; JSON has no inf, so identical frames' PSNR comes back None."""
    return missing if value is None else format(value, spec)
