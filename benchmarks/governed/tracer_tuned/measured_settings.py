"""The best setting under a target on one view, found by rendering: the fixed baseline's on its
first view, and the oracle's on each sampled view (one search, as the volume renderer's
:func:`~governed.volume.measured_baselines.best_setting_by_measurement` serves both of its).

The tracer's settings in one order of rising cost: no AO with shadows and Phong off, then Phong
on, then shadows on, then the AO knob's levels with both on. :func:`bisect_by_measurement`
walks that order; each setting measured is the median of 3 frames with the tuner off (kernels +
read-back, no tuner work).
"""

from __future__ import annotations

import math

from autotune.baselines import bisect_by_measurement
from autotune_app.animation import measure_settings
from governed.mesh.tuned_renderer import TunedRenderer, ao_levels
from raytracer.camera import Camera
from raytracer.mesh.tracer import RenderSettings

FRAMES_PER_SETTING = 3  # the median of this many frames measures one setting


def settings_by_cost(ao_radius: float) -> list[RenderSettings]:
    """Every setting the search can pick, cost rising: without AO, Phong, then shadows are
    switched on; then AO rays are added over the AO knob's levels with both on."""
    return ([RenderSettings(0.0, ao_radius, False, False),
             RenderSettings(0.0, ao_radius, False, True)]
            + [RenderSettings(float(rays), ao_radius, True, True) for rays in ao_levels()])


def best_setting_by_measurement(renderer: TunedRenderer, camera: Camera, target: float,
                                tolerance: float = 0.0) -> tuple[RenderSettings, float, int]:
    """The best-looking setting whose measured median frame on ``camera`` fits ``target`` (the
    cheapest, if none does), its measured seconds and the frames spent. With ``tolerance``
    the search stops at the first measured setting that fits within that share of the target
    (the fixed baseline's hand tuning); without it, it is exact (the oracle's). Leaves the
    renderer's tuning on."""
    order = settings_by_cost(renderer.ao_radius)
    found = bisect_by_measurement(
        len(order), lambda i: measure_settings(renderer, camera, order[i], FRAMES_PER_SETTING),
        target, tolerance=tolerance, iterations=len(order).bit_length())
    measured, seconds = found.measured, found.seconds
    if math.isnan(seconds):  # nothing fitted: the cheapest, measured now
        seconds = measure_settings(renderer, camera, order[0], FRAMES_PER_SETTING)
        measured += 1
    renderer.tuning = True
    return order[found.index], seconds, measured * FRAMES_PER_SETTING
