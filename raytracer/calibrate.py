"""Calibrate a device for the ray tracer: microbenchmarks, then fit the model to measured frames.

Step 1 (``autotune.calibration``) measures the Hong–Kim device parameters with OpenCL
microbenchmarks. Step 2 renders a set of views with several knob settings, and fits per phase
``measured = scale * HongKim + offset`` by non-negative least squares (scipy), which absorbs
what the analytical model leaves out on this device (the "remaining free parameters").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import nnls
from tqdm import tqdm

from autotune.profile_store import profile_path
from models.device_profile import DeviceProfile, save_profile
from models.raytrace_cost import KernelCounts, predict_phase_seconds
from models.workload import Workload
from raytracer.camera import Camera, orbit_path
from raytracer.instruction_counts import load_kernel_counts
from raytracer.opencl_device import DeviceInfo
from raytracer.probe import Probe
from raytracer.scene import Scene, load_scene
from raytracer.tracer import PHASES, TILE, RenderSettings, Tracer

QUICK_SCENES = ("dragon-small", "city")
FULL_SCENES = ("dragon", "sibenik", "city", "bunny")
CALIBRATION_SETTINGS = (
    RenderSettings(0, 0.1, False, False), RenderSettings(2, 0.1, True, True),
    RenderSettings(8, 0.1, False, True), RenderSettings(16, 0.1, True, False),
)


@dataclass(frozen=True)
class Sample:
    """One measured frame: its workload, knobs and kernel seconds per phase."""

    workload: Workload
    settings: RenderSettings
    phase_seconds: dict[str, float]


def calibration_views(scene: Scene, count: int) -> list[Camera]:
    """Views that orbit and dolly into the scene (the paper's animation, sampled)."""
    cam = scene.camera
    return orbit_path(np.asarray(cam.target), np.asarray(cam.eye), count, turns=0.75,
                      dolly=0.45, up=cam.up, fov_y=cam.fov_y)


def collect_samples(tracer: Tracer, probe: Probe, cameras: list[Camera], width: int, height: int,
                    settings: tuple[RenderSettings, ...] = CALIBRATION_SETTINGS,
                    bar: tqdm | None = None) -> list[Sample]:
    """Render every view with every setting (after one warm-up) and keep what was measured."""
    samples = []
    tracer.render(cameras[0], width, height, settings[0])  # warm-up: first launch compiles
    for cam in cameras:
        workload = probe.measure(cam, width, height)
        for s in settings:
            frame = tracer.render(cam, width, height, s)
            samples.append(Sample(workload, s, frame.phase_seconds))
            if bar is not None:
                bar.update(1)
    return samples


def _model_phases(profile: DeviceProfile, counts: KernelCounts, sample: Sample) -> dict[str, float]:
    s = sample.settings
    return predict_phase_seconds(profile, counts, sample.workload, s.ao_rays, s.shadows, s.phong,
                                 TILE * TILE)


def fit_profile(base: DeviceProfile, counts: KernelCounts, samples: list[Sample]) -> DeviceProfile:
    """Fit ``scale_<phase>`` and ``offset_<phase>`` of every phase to the measured samples."""
    raw = dataclasses.replace(base, fitted={})
    fitted: dict[str, float] = {}
    for phase in PHASES:
        rows = [(_model_phases(raw, counts, s)[phase], s.phase_seconds[phase])
                for s in samples if phase in s.phase_seconds]
        if len(rows) < 2:
            continue
        model, measured = np.array(rows).T
        # relative least squares: every frame counts alike, whatever its length
        weight = 1.0 / np.maximum(measured, 1e-9)
        coef, _ = nnls(np.stack([model * weight, weight], axis=1), measured * weight)
        if coef[0] <= 0:  # the offset alone fits best: keep the model's shape, scale only
            coef, _ = nnls((model * weight)[:, None], measured * weight)
            coef = (coef[0], 0.0)
        fitted[f"scale_{phase}"] = float(coef[0])
        fitted[f"offset_{phase}"] = float(coef[1])
    return dataclasses.replace(base, fitted=fitted)


def model_errors(profile: DeviceProfile, counts: KernelCounts, samples: list[Sample]) -> np.ndarray:
    """|predicted - measured| / measured of whole frames."""
    predicted = np.array([sum(_model_phases(profile, counts, s).values()) for s in samples])
    measured = np.array([sum(s.phase_seconds.values()) for s in samples])
    return np.abs(predicted - measured) / measured


def base_profile(device: DeviceInfo, quick: bool) -> DeviceProfile:
    """Step 1: the device's Hong–Kim parameters from OpenCL microbenchmarks."""
    from autotune.calibration import measure_device_profile

    return measure_device_profile(device.platform_index, device.device_index, quick=quick)


def calibrate(device: DeviceInfo, quick: bool = False, save: bool = True, progress: bool = True,
              out: Path | None = None) -> DeviceProfile:
    """Measure and fit a profile for ``device``; save it to the profile store (atomically)."""
    base = base_profile(device, quick)
    counts = load_kernel_counts()
    scenes = QUICK_SCENES if quick else FULL_SCENES
    views = 4 if quick else 10
    width, height = (320, 180) if quick else (640, 360)
    spec = f"{device.platform_index}:{device.device_index}"
    samples: list[Sample] = []
    total = len(scenes) * views * len(CALIBRATION_SETTINGS)
    with tqdm(total=total, desc="calibrating", unit="frame", disable=not progress) as bar:
        for name in scenes:
            scene = load_scene(name)
            tracer = Tracer(scene, device=spec)
            probe = Probe(scene, tracer.bvh)
            samples += collect_samples(tracer, probe, calibration_views(scene, views), width,
                                       height, bar=bar)
    profile = fit_profile(base, counts, samples)
    errors = model_errors(profile, counts, samples)
    fitted = dict(profile.fitted, fit_mean_error=float(errors.mean()),
                  fit_frames=float(len(samples)))
    profile = dataclasses.replace(profile, fitted=fitted,
                                  source=f"autotune calibrate{' --quick' if quick else ''}: "
                                         f"microbenchmarks + fit on {', '.join(scenes)}")
    if save:
        store = profile_path(profile.name, profile.driver)
        store.parent.mkdir(parents=True, exist_ok=True)
        save_profile(profile, store)
    if out is not None:
        save_profile(profile, out)
    if not math.isfinite(errors.mean()):
        raise ValueError(f"calibration of {device.name} produced a non-finite model error")
    return profile
