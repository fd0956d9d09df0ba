"""Calibrate a device for the ray tracer: microbenchmarks, then fit the model to measured frames.

Step 1 (``autotune.calibration``) measures the Hong–Kim device parameters with OpenCL
microbenchmarks. Step 2 renders a set of views with several knob settings and fits, by robust
least squares (scipy), the model's free parameters to the measured phase times: the device
latencies and issue cost the microbenchmarks only estimate (they stay in the device profile),
and per phase ``measured = scale * HongKim + offset * pixels`` (what the analytical model leaves
out here: the ray tracer's application calibration, stored apart from the profile).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares
from tqdm import tqdm

from autotune.atomic_files import check_writable_file
from autotune.profile_store import (
    keep_in_memory,
    save_calibration,
    save_profile,
    store,
    writable_store,
)
from models.app_calibration import OFFSET_MAX, SCALE_MAX, AppCalibration
from models.device_profile import DeviceProfile
from models.hong_kim import predict_seconds
from models.raytrace_cost import KernelCounts, phase_instructions, predict_phase_seconds
from models.workload import Workload
from raytracer.camera import Camera, orbit_path
from raytracer.opencl_device import DeviceInfo
from raytracer.phases import PHASES, TILE
from raytracer.scene import Scene, load_scene
from raytracer.tracer import RenderSettings, Tracer
from raytracer.tuning.instruction_counts import load_kernel_counts
from raytracer.tuning.probe import Probe

QUICK_SCENES = ("dragon-small", "city")
FULL_SCENES = ("dragon", "sibenik", "city", "bunny")
FREE_PARAMETERS = ("issue_cycles", "mem_latency", "dep_delay_coal", "dep_delay_uncoal")
FIT_RANGE = 1000.0  # each free device parameter stays within this factor of its measured value
RENDERER = "raytracer"  # the key of the ray tracer's application calibration
# per-phase scale and offset stay inside what AppCalibration accepts
SCALE_BOUNDS = (np.log(1e-6), np.log(SCALE_MAX * (1 - 1e-6)))
OFFSET_BOUNDS = (0.0, OFFSET_MAX * (1 - 1e-6))
# (latency, departure-delay) multipliers of the microbenchmark figures the fit starts from
FIT_STARTS = ((1.0, 1.0), (0.1, 0.01), (0.01, 0.001), (0.1, 0.1))
CALIBRATION_SETTINGS = (
    RenderSettings(0, 0.1, False, False), RenderSettings(2, 0.1, True, True),
    RenderSettings(8, 0.1, False, True), RenderSettings(16, 0.1, True, False),
)


@dataclass(frozen=True)
class FittedModel:
    """A calibration's result: the device profile (hardware parameters, some refined by the fit)
    and the ray tracer's application calibration fitted with it."""

    profile: DeviceProfile
    calibration: AppCalibration

    def to_dict(self) -> dict:
        return {"profile": self.profile.to_dict(), "calibration": self.calibration.to_dict()}


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


def _model_phases(fitted: FittedModel, counts: KernelCounts, sample: Sample) -> dict[str, float]:
    s = sample.settings
    return predict_phase_seconds(fitted.profile, counts, sample.workload, s.ao_rays, s.shadows,
                                 s.phong, TILE * TILE, fitted.calibration)


def _phase_arrays(counts: KernelCounts, samples: list[Sample]) -> dict[str, tuple[np.ndarray, ...]]:
    """Per phase: Hong–Kim inputs (compute, coal, uncoal, blocks), pixels, measured seconds."""
    rows: dict[str, list[tuple[float, ...]]] = {p: [] for p in PHASES}
    for s in samples:
        st = s.settings
        ins = phase_instructions(counts, s.workload, st.ao_rays, st.shadows, st.phong)
        blocks = math.ceil(s.workload.pixels / (TILE * TILE))
        for phase, measured in s.phase_seconds.items():
            i = ins[phase]
            rows[phase].append((i.compute, i.coal, i.uncoal, blocks, s.workload.pixels,
                                measured))
    return {p: tuple(np.array(r, np.float64).T) for p, r in rows.items() if len(r) >= 2}


def fit_profile(base: DeviceProfile, counts: KernelCounts, samples: list[Sample],
                source: str = "") -> FittedModel:
    """Least-squares fit of the free Hong–Kim parameters to measured phase times.

    Fitted: issue cycles, memory latency and the two departure delays (the device figures the
    microbenchmarks only estimate, in log space so they stay positive), and per phase a scale
    and a per-pixel offset (the calibration). Residuals are relative, so short and long frames
    count alike. The calibration records the fit's in-sample mean frame error.
    """
    data = _phase_arrays(counts, samples)
    phases = list(data)
    free0 = np.log([getattr(base, f) for f in FREE_PARAMETERS])

    def unpack(x: np.ndarray) -> tuple[DeviceProfile, dict[str, float]]:
        profile = dataclasses.replace(base, **{
            f: float(np.exp(v)) for f, v in zip(FREE_PARAMETERS, x, strict=False)})
        k = len(FREE_PARAMETERS)
        fitted = {}
        for j, phase in enumerate(phases):
            fitted[f"scale_{phase}"] = float(np.exp(x[k + 2 * j]))
            fitted[f"offset_{phase}"] = float(x[k + 2 * j + 1])
        return profile, fitted

    def residuals(x: np.ndarray) -> np.ndarray:
        profile, fitted = unpack(x)
        out = []
        for phase in phases:
            compute, coal, uncoal, blocks, pixels, measured = data[phase]
            model = predict_seconds(profile, compute, coal, uncoal, 0.0, TILE * TILE, blocks)
            pred = model * fitted[f"scale_{phase}"] + fitted[f"offset_{phase}"] * pixels
            out.append((pred - measured) / measured)
        return np.concatenate(out)

    lower = [v - np.log(FIT_RANGE) for v in free0] + [SCALE_BOUNDS[0], OFFSET_BOUNDS[0]] * len(
        phases)
    upper = [v + np.log(FIT_RANGE) for v in free0] + [SCALE_BOUNDS[1], OFFSET_BOUNDS[1]] * len(
        phases)
    best = None
    # The regimes make the cost surface piecewise: start from the microbenchmark figures and
    # from cache-like latencies (the tracer's working set is mostly cached), keep the best.
    for latency_factor, delay_factor in FIT_STARTS:
        start = free0 + np.log([1.0, latency_factor, delay_factor, delay_factor])
        start = np.clip(start, np.array(lower[:len(free0)]) + 1e-9,
                        np.array(upper[:len(free0)]) - 1e-9)
        x0 = list(start)
        trial, _ = unpack(np.concatenate([start, np.zeros(2 * len(phases))]))
        for phase in phases:  # each phase's scale where that start's shape fits best
            compute, coal, uncoal, blocks, _, measured = data[phase]
            model = predict_seconds(trial, compute, coal, uncoal, 0.0, TILE * TILE, blocks)
            scale = np.log(np.median(measured / np.maximum(model, 1e-12)))
            x0 += [float(np.clip(scale, SCALE_BOUNDS[0] + 1e-9, SCALE_BOUNDS[1] - 1e-9)), 0.0]
        result = least_squares(residuals, np.array(x0), bounds=(lower, upper), loss="soft_l1",
                               f_scale=0.1, x_scale="jac")
        if best is None or result.cost < best.cost:
            best = result
    profile, fitted = unpack(best.x)
    if source:
        profile = dataclasses.replace(profile, source=source)
    calibration = AppCalibration(
        RENDERER, profile.name, profile.driver,
        scale={p: fitted[f"scale_{p}"] for p in phases},
        offset={p: fitted[f"offset_{p}"] for p in phases},
        source=source, device_profile=profile.fingerprint())
    result = FittedModel(profile, calibration)
    errors = model_errors(result, counts, samples)
    if not math.isfinite(errors.mean()):
        raise ValueError(f"calibration of {base.name} produced a non-finite model error")
    fit = {"mean_error": float(errors.mean()), "frames": float(len(samples))}
    return FittedModel(profile, dataclasses.replace(calibration, fit=fit))


def model_errors(fitted: FittedModel, counts: KernelCounts, samples: list[Sample]) -> np.ndarray:
    """|predicted - measured| / measured of whole frames."""
    predicted = np.array([sum(_model_phases(fitted, counts, s).values()) for s in samples])
    measured = np.array([sum(s.phase_seconds.values()) for s in samples])
    return np.abs(predicted - measured) / measured


def base_profile(device: DeviceInfo, quick: bool) -> DeviceProfile:
    """Step 1: the device's Hong–Kim parameters from OpenCL microbenchmarks.

    On a CPU, PoCL runs the tracer's work-items one after another on a core (its divergent
    traversal loops do not vectorize across work-items: the numba twin is as fast), so a
    work-group behaves as one warp and a core holds one warp at a time: N = 1, nothing hides
    latency, and Hong–Kim reduces to its balanced case, linear in the instruction counts.
    """
    from autotune.calibration import measure_device_profile

    profile = measure_device_profile(device.platform_index, device.device_index, quick=quick)
    if device.kind == "CPU":
        profile = dataclasses.replace(profile, warp_size=TILE * TILE, transactions_per_uncoal=1,
                                      max_blocks_per_core=1)
    return profile


def calibrate(device: DeviceInfo, quick: bool = False, save: bool = True, progress: bool = True,
              out: Path | None = None) -> FittedModel:
    """Measure and fit ``device``'s profile and the ray tracer's calibration.

    With ``save``, both go to the profile store (atomically); a store that cannot be written is
    found before the work starts and the result is then kept in memory for this process, with
    one warning. ``out`` also writes the profile there and the calibration beside it as
    ``<stem>--raytracer.json``; a path that cannot be written fails before the work starts.
    """
    extra = (out, calibration_output(out)) if out is not None else ()
    for path in extra:
        check_writable_file(path)
    writable = save and writable_store(device.name, device.driver, RENDERER)
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
            probe = Probe(scene, tracer.bvh, simd_width=tracer.device_info.simd_width)
            samples += collect_samples(tracer, probe, calibration_views(scene, views), width,
                                       height, bar=bar)
    source = (f"autotune calibrate{' --quick' if quick else ''}: microbenchmarks + fit on "
              f"{', '.join(scenes)}")
    result = fit_profile(base, counts, samples, source=source)
    if writable:
        try:
            store(result.profile, result.calibration)
        except OSError as exc:  # the folder changed under us: keep the work all the same
            warnings.warn(f"cannot write the profile store ({exc}); this calibration is kept "
                          f"in memory for this run only", stacklevel=2)
            writable = False
    if save and not writable:
        keep_in_memory(result.profile, result.calibration)
    if extra:
        save_profile(result.profile, extra[0])
        save_calibration(result.calibration, extra[1])
    return result


def calibration_output(profile_out: Path) -> Path:
    """Where ``calibrate -o FILE`` writes the ray tracer's calibration: beside FILE."""
    profile_out = Path(profile_out)
    return profile_out.with_name(f"{profile_out.stem}--{RENDERER}.json")
