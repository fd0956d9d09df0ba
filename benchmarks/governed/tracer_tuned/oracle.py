"""The oracle of ``bench tracer-tuned``: what a controller that knew every setting's cost on every
view would deliver, measured on sampled views of the same path in the same run.

On each sampled view it takes the best setting whose measured median frame is under the target
(:func:`~benchmarks.governed.tracer_tuned.measured_settings.best_setting_by_measurement`, the
fixed baseline's search, run to the end). Its error is then measured on fresh frames
of that setting: the floor of frame-to-frame noise and knob steps that no controller can go
below on this machine. A view under the target at the highest setting counts as on target.
"""

from __future__ import annotations

import numpy as np

from autotune_app.animation import (
    REVERSAL_KNOBS,
    REVERSAL_WINDOW,
    frame_times,
    reversals,
)
from benchmarks.governed.tracer_tuned.measured_settings import best_setting_by_measurement
from governed.mesh.tuned_renderer import TunedRenderer
from raytracer.camera import Camera
from raytracer.mesh.tracer import MAX_AO_RAYS

ORACLE_EVERY = 5  # a sampled view every this many frames of the path
FRESH_FRAMES = 3  # frames of the chosen setting its error is measured on


def oracle_path(renderer: TunedRenderer, cameras: list[Camera], target: float,
                every: int = ORACLE_EVERY) -> dict:
    """The oracle on every ``every``-th view of ``cameras``: its settings, their reversals,
    and the mean and p95 of |frame - target| / target over :data:`FRESH_FRAMES` fresh frames
    per view."""
    errors, views, frames_spent, top = [], [], 0, 0
    for i in range(0, len(cameras), every):
        setting, _, spent = best_setting_by_measurement(renderer, cameras[i], target)
        times = np.array(frame_times(renderer, cameras[i], setting, FRESH_FRAMES))
        at_top = setting.ao_rays >= MAX_AO_RAYS and setting.shadows and setting.phong
        err = np.abs(times - target) / target
        if at_top:  # nothing more to buy: a frame under the target is on target
            err[times < target] = 0.0
            top += int((times < target).sum())
        errors.extend(err.tolist())
        views.append({"frame": i, "ao_rays": setting.ao_rays, "shadows": setting.shadows,
                      "phong": setting.phong, "mean_ms": float(times.mean() * 1e3)})
        frames_spent += spent + FRESH_FRAMES
    renderer.tuning = True
    picks = {k: [float(v[k]) for v in views] for k in REVERSAL_KNOBS}
    return {"views": views, "frames_measured": frames_spent,
            # raises undone within the reversal window, at the oracle's views (every frames
            # apart): how often the best setting under the target itself goes up and back down
            "quality_reversals_per_60_frames": (reversals(picks, REVERSAL_WINDOW // every)
                                                * 60.0 / len(cameras)),
            "fresh_frames_per_view": FRESH_FRAMES,
            "frames_at_top_under_target": top,
            "mean_abs_error_vs_target": float(np.mean(errors)),
            "p95_abs_error_vs_target": float(np.percentile(errors, 95))}
