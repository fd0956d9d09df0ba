"""Calibrate a device for the ray tracer: microbenchmarks, then fit the model to measured frames.

Step 1 (``autotune.calibration``) measures the Hong–Kim device parameters with OpenCL
microbenchmarks. Step 2 renders a set of views with several knob settings and fits, by robust
least squares (scipy), the model's free parameters to the measured phase times: the device
latencies and issue cost the microbenchmarks only estimate, and per phase
``measured = scale * HongKim + offset * pixels`` (what the analytical model leaves out here).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares
from tqdm import tqdm

from autotune.profile_store import profile_path
from models.device_profile import DeviceProfile, save_profile
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
# (latency, departure-delay) multipliers of the microbenchmark figures the fit starts from
FIT_STARTS = ((1.0, 1.0), (0.1, 0.01), (0.01, 0.001), (0.1, 0.1))
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


def fit_profile(base: DeviceProfile, counts: KernelCounts, samples: list[Sample]) -> DeviceProfile:
    """Least-squares fit of the free Hong–Kim parameters to measured phase times.

    Fitted: issue cycles, memory latency and the two departure delays (the device figures the
    microbenchmarks only estimate, in log space so they stay positive), and per phase a scale
    and a per-pixel offset. Residuals are relative, so short and long frames count alike.
    """
    data = _phase_arrays(counts, samples)
    phases = list(data)
    free0 = np.log([getattr(base, f) for f in FREE_PARAMETERS])

    def unpack(x: np.ndarray) -> tuple[DeviceProfile, dict[str, float]]:
        profile = dataclasses.replace(base, fitted={}, **{
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

    lower = [v - np.log(FIT_RANGE) for v in free0] + [-np.inf, 0.0] * len(phases)
    upper = [v + np.log(FIT_RANGE) for v in free0] + [np.inf, np.inf] * len(phases)
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
            x0 += [float(np.log(np.median(measured / np.maximum(model, 1e-12)))), 0.0]
        result = least_squares(residuals, np.array(x0), bounds=(lower, upper), loss="soft_l1",
                               f_scale=0.1, x_scale="jac")
        if best is None or result.cost < best.cost:
            best = result
    profile, fitted = unpack(best.x)
    return dataclasses.replace(profile, fitted=fitted)


def model_errors(profile: DeviceProfile, counts: KernelCounts, samples: list[Sample]) -> np.ndarray:
    """|predicted - measured| / measured of whole frames."""
    predicted = np.array([sum(_model_phases(profile, counts, s).values()) for s in samples])
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
            probe = Probe(scene, tracer.bvh, simd_width=tracer.device_info.simd_width)
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
