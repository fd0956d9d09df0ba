"""The online learned predictor on the real ray tracer: no calibration, no model, unseen scenes.

Issue 21's product claim: a user with only a render function and a target gets the target
held by :class:`autotune.LearnedPredictor` learning from the frames it times. Here the render
function is the ray tracer itself (``Tracer.render``: no probe, no Hong–Kim, no calibration
file), over the ray tracer's own knob space (the AO knob's rays, shadows, Phong: 1,220
settings), on each test scene's orbit (scenes the project's model was never tuned on; the
learner has seen nothing at all). Target: the median frame of 8 AO rays + shadows + Phong on
the orbit's first view, the same reference ``bench tracer-tuned`` uses. Controlled time: the
wall time of the render call (kernels + read-back), timed by ``Tuner.frame``.

Figures per scene: mean |frame − target| / target after the first ``SETTLE`` frames, and the
largest frame / target over the whole run (the exploration from the safe start included).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import numpy as np

from autotune import LearnedPredictor, Tuner
from autotune_app.animation import REFERENCE_SETTINGS, orbit_camera_path
from benchmarks.harness.run_record import at_most
from governed.mesh.tuned_renderer import knob_space
from raytracer.mesh.scene import load_scene
from raytracer.mesh.tracer import RenderSettings, Tracer

SETTLE = 20  # frames the learner is given before its tracking counts
GOAL_MEAN, GOAL_OVERSHOOT = 0.05, 1.20
REFERENCE_REPEATS = 5


def reference_target(tracer: Any, camera: Any, width: int, height: int) -> float:
    """Median wall seconds of 8 AO rays + shadows + Phong on ``camera`` (after a warm-up)."""
    tracer.render(camera, width, height, REFERENCE_SETTINGS)
    times = []
    for i in range(REFERENCE_REPEATS):
        t0 = time.perf_counter()
        tracer.render(camera, width, height, REFERENCE_SETTINGS, seed=i)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def fly(scene_name: str, frames: int, width: int, height: int,
        device: str | None = None) -> dict[str, Any]:
    """One scene's orbit under a fresh LearnedPredictor: its frames against the target."""
    scene = load_scene(scene_name)
    tracer = Tracer(scene, device=device)
    cameras = orbit_camera_path(scene, frames)
    target = reference_target(tracer, cameras[0], width, height)
    space = knob_space()
    learned = LearnedPredictor(space)
    tuner = Tuner(space, predictor=learned, target_seconds=target)
    for i, camera in enumerate(cameras):
        with tuner.frame() as knobs:
            settings = RenderSettings(float(knobs["ao_rays"]), 0.1, bool(knobs["shadows"]),
                                      bool(knobs["phong"]))
            tracer.render(camera, width, height, settings, seed=i)
    measured = np.array([r.measured for r in tuner.history])
    return {"scene": scene_name, "target_ms": target * 1e3, "frames": frames,
            "width": width, "height": height, **tracking(measured / target),
            "mean_ao_rays_after_settle": float(np.mean(
                [r.knobs["ao_rays"] for r in tuner.history[SETTLE:]])),
            "confidence": asdict(learned.confidence())}


def tracking(ratios: np.ndarray) -> dict[str, float]:
    """Mean |ratio − 1| after ``SETTLE`` frames and the largest ratio of the run."""
    return {"mean_error_after_settle": float(np.mean(np.abs(ratios[SETTLE:] - 1))),
            "max_over_target": float(ratios.max()),
            "first_frame_over_target": float(ratios[0])}


def run(scenes: tuple[str, ...], quick: bool, device: str | None = None) -> dict[str, Any]:
    """Every scene's run (60 frames at 480x270; quick: 40 frames at 320x180)."""
    frames, (width, height) = (40, (320, 180)) if quick else (60, (480, 270))
    return {"settle_frames": SETTLE, "what": __doc__.split("\n\n")[0],
            "scenes": [fly(s, frames, width, height, device) for s in scenes]}


def goals(online: Mapping[str, Any]) -> dict[str, dict]:
    """On every scene: tracking after the settle frames, and the overshoot while exploring."""
    runs = online["scenes"]
    worst_mean = max(r["mean_error_after_settle"] for r in runs)
    worst_over = max(r["max_over_target"] for r in runs)
    names = ", ".join(r["scene"] for r in runs)
    return {
        "online_learned_mean_error_after_20_frames": at_most(
            worst_mean, GOAL_MEAN, f"worst scene's mean |frame - target| / target after frame "
            f"{SETTLE}, the ray tracer with no model and no calibration ({names})"),
        "online_learned_max_over_target": at_most(
            worst_over, GOAL_OVERSHOOT,
            f"largest frame / target over every run, exploration included ({names})"),
    }


def table_lines(online: Mapping[str, Any]) -> list[str]:
    """One line per scene."""
    lines = [f"Online learned predictor on the ray tracer (no model, no calibration): mean "
             f"|frame - target| / target after frame {SETTLE}, largest frame / target"]
    for r in online["scenes"]:
        lines.append(f"  {r['scene']:<10} target {r['target_ms']:7.1f} ms   "
                     f"{r['mean_error_after_settle']:6.1%}   max {r['max_over_target']:.2f}x")
    return lines
