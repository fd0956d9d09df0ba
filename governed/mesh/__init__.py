"""Ties the ray tracer to the tuner: probe, instruction counts, calibration fit, TunedRenderer.

What a user imports::

    from raytracer import load_scene
    from governed.mesh import TunedRenderer
    scene = load_scene("dragon")
    renderer = TunedRenderer(scene, 640, 360, target_seconds=0.4)
    frame = renderer.render(scene.camera)   # probe, choose knobs, render, learn

Names load on first use (the probe alone does not pull in OpenCL).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.lazy_exports import lazy_exports
from models.raytrace_cost import PHASES as _MODEL_PHASES
from raytracer.mesh.phases import PHASES as _TRACER_PHASES

# models cannot import the ray tracer, so the cost model writes the phase list again: refuse to
# tie the two together if they ever differ (tests/test_raytrace_cost.py checks it too).
if _MODEL_PHASES != _TRACER_PHASES:
    raise ImportError(f"models.raytrace_cost.PHASES {_MODEL_PHASES} differ from the tracer's "
                      f"phase registry raytracer.mesh.phases {_TRACER_PHASES}")

_EXPORTS = {
    "tuned_renderer": ("RayTraceModel", "TunedFrame", "TunedRenderer", "device_model",
                       "knob_space"),
    "probe": ("Probe",),
    "calibration_fit": ("RENDERER", "FittedModel", "calibrate", "fit_profile", "fit_report",
                        "model_errors"),
    "calibration_frames": ("Sample", "calibration_views", "collect_samples"),
    "instruction_counts": ("load_kernel_counts",),
    "timers": ("CpuBusy", "KernelEvents", "default_timer"),
}
__all__ = [
    "CpuBusy",
    "FittedModel",
    "KernelEvents",
    "Probe",
    "RENDERER",
    "RayTraceModel",
    "Sample",
    "TunedFrame",
    "TunedRenderer",
    "calibrate",
    "calibration_views",
    "collect_samples",
    "default_timer",
    "device_model",
    "fit_profile",
    "fit_report",
    "knob_space",
    "load_kernel_counts",
    "model_errors",
]

if TYPE_CHECKING:
    from governed.mesh.calibration_fit import (
        RENDERER,
        FittedModel,
        calibrate,
        fit_profile,
        fit_report,
        model_errors,
    )
    from governed.mesh.calibration_frames import Sample, calibration_views, collect_samples
    from governed.mesh.instruction_counts import load_kernel_counts
    from governed.mesh.probe import Probe
    from governed.mesh.timers import CpuBusy, KernelEvents, default_timer
    from governed.mesh.tuned_renderer import (
        RayTraceModel,
        TunedFrame,
        TunedRenderer,
        device_model,
        knob_space,
    )


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
