"""``autotune bench probe-cost``: what the CPU probe costs against a 30 fps frame budget, and
what a coarser probe costs in accuracy; and what a still camera gains by reusing the last
frame's workload instead of probing again (governed frames, both ways interleaved).

Reference measured in the same run: the OpenCL primary-ray phase of the same view at full
resolution, so the ratio says how much of the frame's own tracing the probe adds. Accuracy:
the frame time the model predicts (8 AO rays + shadows + Phong, the device's calibration) from
each probe resolution, against the prediction from a probe at half the frame's resolution per
axis (``reference_factor``), over the same views.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from autotune_app.animation import REFERENCE_SETTINGS, orbit_camera_path
from autotune_app.report import emit
from benchmarks.harness.results import save_result
from benchmarks.harness.run_record import RunRecord, quick_run, stamp, variant_name
from governed.mesh.probe import Probe
from governed.mesh.tuned_renderer import TunedRenderer, device_model
from raytracer.mesh.scene import load_scene
from raytracer.mesh.tracer import RenderSettings, Tracer

BUDGET_30FPS = 1.0 / 30.0
REFERENCE_FACTOR = 2  # the accuracy reference: a probe at half the frame's resolution per axis
STILL_SIZE = (480, 270)  # bench tracer-tuned's frames
STILL_FRAMES = 40  # per way; the first STILL_SETTLE are left out (feedback settling)
STILL_SETTLE = 10


def still_view(tracer: Tracer, frames: int = STILL_FRAMES) -> dict:
    """Governed frames of one still view, the last workload reused or probed every frame,
    interleaved; target: the median kernel time of five frames at ``REFERENCE_SETTINGS``
    (bench tracer-tuned's setting, without the probe: one target both ways must meet)."""
    scene, (width, height) = tracer.scene, STILL_SIZE
    full = [tracer.render(scene.camera, width, height, REFERENCE_SETTINGS).seconds
            for _ in range(5)]
    target = float(np.median(full))
    ways = {"reused": TunedRenderer(scene, width, height, target, tracer=tracer),
            "probed_every_frame": TunedRenderer(scene, width, height, target, tracer=tracer)}
    ways["probed_every_frame"].probe_policy = "always"
    logs: dict[str, list] = {name: [] for name in ways}
    for _ in range(frames):
        for name, renderer in ways.items():
            f = renderer.render(scene.camera)
            logs[name].append((f.measured, f.probe_seconds, f.settings.ao_rays))
    out: dict = {"size": f"{width}x{height}", "target_ms": target * 1e3, "frames": frames,
                 "settle_frames_left_out": STILL_SETTLE}
    for name, rows in logs.items():
        a = np.array(rows[STILL_SETTLE:], float)
        out[name] = {"mean_frame_ms": float(a[:, 0].mean() * 1e3),
                     "mean_probe_ms": float(a[:, 1].mean() * 1e3),
                     "mean_ao_rays": float(a[:, 2].mean()),
                     "mean_error_vs_target": float(np.mean(np.abs(a[:, 0] - target) / target))}
    return out


def main(argv: list[str] | None = None) -> int:
    """Time the probe at each resolution divisor on each scene; print a table or JSON."""
    parser = argparse.ArgumentParser(prog="autotune bench probe-cost", description=__doc__)
    parser.add_argument("--scene", action="append", help="default: dragon, sibenik, city")
    parser.add_argument("--factor", type=int, action="append",
                        help="probe resolution divisors per axis (default 8, 16, 32)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--device")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--save", action="store_true",
                        help="also write results/<machine>/probe_cost[_quick].json")
    args = parser.parse_args(argv)
    scenes = args.scene or (["dragon-small"] if args.quick else ["dragon", "sibenik", "city"])
    factors = args.factor or [4, 8, 16, 32]
    width, height = 1280, 720
    views = 3 if args.quick else 8
    run = RunRecord()
    figures: dict = {"width": width, "height": height, "budget_ms": BUDGET_30FPS * 1e3,
                     "reference_factor": REFERENCE_FACTOR,
                     "accuracy_settings": "8 AO rays + shadows + Phong", "scenes": {}}
    for name in scenes:
        scene = load_scene(name)
        tracer = Tracer(scene, device=args.device)
        cams = orbit_camera_path(scene, views)
        tracer.render(cams[0], width, height, RenderSettings(0, 0.1, False, False))
        primary = np.median([tracer.render(c, width, height, RenderSettings(0, 0.1, False, False))
                             .phase_seconds["primary"] for c in cams])
        row = {"primary_phase_ms": float(primary * 1e3)}
        model = device_model(tracer)

        def predicted(probe: Probe, cam, model=model) -> float:
            w = probe.measure(cam, width, height)
            return float(sum(model.phase_seconds(w, REFERENCE_SETTINGS).values()))

        exact = Probe.for_tracer(tracer, factor=REFERENCE_FACTOR, min_pixels=1)
        truth = [predicted(exact, c) for c in cams]
        for f in factors:
            probe = Probe.for_tracer(tracer, factor=f, min_pixels=1)  # the factor, no floor
            probe.measure(cams[0], width, height)  # compile / warm caches
            seconds, errors = [], []
            for c, ref in zip(cams, truth, strict=True):
                start = time.perf_counter()
                probe.measure(c, width, height)
                seconds.append(time.perf_counter() - start)
                errors.append(abs(predicted(probe, c) - ref) / ref)
            ms = float(np.median(seconds) * 1e3)
            pw, ph = probe.resolution(width, height)
            row[f"factor_{f}"] = {"probe_ms": ms, "probe_pixels": f"{pw}x{ph}",
                                  "share_of_30fps_budget": ms / (BUDGET_30FPS * 1e3),
                                  "ratio_to_primary_phase": ms / (primary * 1e3),
                                  "prediction_change_vs_reference_mean": float(np.mean(errors)),
                                  "prediction_change_vs_reference_max": float(np.max(errors))}
        if not args.quick:
            row["still_view"] = still_view(tracer)
        figures["scenes"][name] = row
    emit(stamp(figures, run, quick_run(args.quick)), args.json, title="CPU probe cost at 1280x720")
    if args.save:
        save_result(variant_name("probe_cost", quick_run(args.quick)), figures)
    return 0
