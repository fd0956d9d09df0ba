"""``autotune bench probe``: what the CPU probe costs against a 30 fps frame budget.

Reference measured in the same run: the OpenCL primary-ray phase of the same view at full
resolution, so the ratio says how much of the frame's own tracing the probe adds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from autotune.app.animation import orbit_camera_path
from autotune.app.report import emit
from raytracer.scene import load_scene
from raytracer.tracer import RenderSettings, Tracer
from raytracer.tuning.probe import Probe

BUDGET_30FPS = 1.0 / 30.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="autotune bench probe", description=__doc__)
    parser.add_argument("--scene", action="append", help="default: dragon, sibenik, city")
    parser.add_argument("--factor", type=int, action="append",
                        help="probe resolution divisors per axis (default 8, 16, 32)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--device")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    scenes = args.scene or (["dragon-small"] if args.quick else ["dragon", "sibenik", "city"])
    factors = args.factor or [8, 16, 32]
    width, height = 1280, 720
    views = 3 if args.quick else 8
    figures: dict = {"width": width, "height": height, "budget_ms": BUDGET_30FPS * 1e3,
                     "scenes": {}}
    for name in scenes:
        scene = load_scene(name)
        tracer = Tracer(scene, device=args.device)
        cams = orbit_camera_path(scene, views)
        tracer.render(cams[0], width, height, RenderSettings(0, 0.1, False, False))
        primary = np.median([tracer.render(c, width, height, RenderSettings(0, 0.1, False, False))
                             .phase_seconds["primary"] for c in cams])
        row = {"primary_phase_ms": float(primary * 1e3)}
        for f in factors:
            probe = Probe(scene, tracer.bvh, factor=f, simd_width=tracer.device_info.simd_width,
                          min_pixels=1)  # measure the factor itself, without the floor
            probe.measure(cams[0], width, height)  # compile / warm caches
            seconds = []
            for c in cams:
                start = time.perf_counter()
                probe.measure(c, width, height)
                seconds.append(time.perf_counter() - start)
            ms = float(np.median(seconds) * 1e3)
            row[f"factor_{f}"] = {"probe_ms": ms,
                                  "share_of_30fps_budget": ms / (BUDGET_30FPS * 1e3),
                                  "ratio_to_primary_phase": ms / (primary * 1e3)}
        figures["scenes"][name] = row
    emit(figures, args.json, title="CPU probe cost at 1280x720")
    return 0
