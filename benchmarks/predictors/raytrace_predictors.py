"""The ray tracer's frames as rows for the predictor comparison, and its two analytical models.

The two: Hong–Kim (the project's fitted model) and the BSP model of the kernel-model paper
(Amarís, de Camargo, Dyab, Goldman, Trystram, "A Comparison of GPU Execution Time Prediction
using Machine Learning and Analytical Modeling").

Features of a phase (each + 1, so log2 is defined, as the paper does for counts), in three sets:

- ``probe``: the probe's workload (``models.workload.Workload``'s ten numbers), the knobs (AO
  rays, shadows, Phong) and the device profile (cores, clock, bandwidth; constant on one
  device), the same for every phase;
- ``counts``: the paper's kind of features for the phase's launch: its total compute, coalesced
  and uncoalesced memory instructions (the §4.3 per-thread counts times the pixels), threads
  and work-groups, and the device profile;
- ``both``: the two together.

BSP (``studies.kernel_models.bsp``, Eq. 3) prices a phase as ``t * (Comp + CommGM) / (R * P *
lambda)`` with ``t`` the pixels, ``Comp`` the phase's per-thread compute instructions (one cycle
each), its memory instructions as global loads plus one global store (the pixel's result) at
the paper's 500 cycles, ``R`` the clock and ``P`` the lanes that run at once (compute units x
SIMD width). Lambda is fitted per phase on the calibration rows: the geometric mean of
``T(lambda=1) / measured``, the paper's one-run fit taken over many runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from benchmarks.predictors.part_predictors import PartRows
from governed.mesh.calibration_frames import Sample
from governed.mesh.tuned_renderer import RayTraceModel
from models.device_profile import DeviceProfile
from models.raytrace_cost import PHASES, KernelCounts, PhaseInstructions, phase_instructions
from raytracer.mesh.phases import TILE
from raytracer.mesh.tracer import RenderSettings
from studies.kernel_models.bsp import ThreadCounts, bsp_seconds

FEATURE_SETS = ("probe", "counts", "both")


def measured(samples: Sequence[Sample]) -> np.ndarray:
    """(rows, phases) measured seconds, NaN where a phase did not run."""
    return np.array([[s.phase_seconds.get(p, math.nan) for p in PHASES] for s in samples])


def device_columns(profile: DeviceProfile) -> list[float]:
    """The device profile's cores, clock (MHz) and bandwidth (GB/s)."""
    return [float(profile.cores), profile.clock_ghz * 1e3, profile.bandwidth_gbs]


def knob_columns(settings: RenderSettings) -> list[float]:
    """AO rays, shadows and Phong as numbers."""
    return [float(settings.ao_rays), float(settings.shadows), float(settings.phong)]


def count_columns(ins: PhaseInstructions | None, pixels: int) -> list[float]:
    """A launch's total compute, coalesced and uncoalesced instructions, threads, work-groups
    (zeros where the phase does not run)."""
    if ins is None:
        return [0.0] * 5
    return [ins.compute * pixels, ins.coal * pixels, ins.uncoal * pixels, float(pixels),
            float(math.ceil(pixels / (TILE * TILE)))]


def instructions(counts: KernelCounts, sample: Sample) -> dict[str, PhaseInstructions]:
    """The §4.3 per-thread counts of each phase that runs with the sample's knobs."""
    st = sample.settings
    return phase_instructions(counts, sample.workload, st.ao_rays, st.shadows, st.phong,
                              ao_filter=st.ao_filter)


def rows(samples: Sequence[Sample], counts: KernelCounts, profile: DeviceProfile) -> PartRows:
    """The samples as rows: measured phase seconds and every feature set per phase."""
    device = device_columns(profile)
    probe = np.array([[*s.workload.features(), *knob_columns(s.settings), *device]
                      for s in samples]) + 1.0
    per_phase = [instructions(counts, s) for s in samples]
    features: dict[str, tuple[np.ndarray, ...]] = {"probe": (probe,) * len(PHASES)}
    counted = tuple(np.array([[*count_columns(ins.get(p), s.workload.pixels), *device]
                              for s, ins in zip(samples, per_phase, strict=True)]) + 1.0
                    for p in PHASES)
    features["counts"] = counted
    features["both"] = tuple(np.hstack([probe, c]) for c in counted)
    return PartRows(PHASES, measured(samples), features)


def model_seconds(model: RayTraceModel, samples: Sequence[Sample]) -> np.ndarray:
    """(rows, phases) seconds the model predicts, NaN where a phase did not run."""
    pred = [model.phase_seconds(s.workload, s.settings) for s in samples]
    return np.where(np.isfinite(measured(samples)),
                    np.array([[p[phase] for phase in PHASES] for p in pred]), np.nan)


def bsp_unit_seconds(samples: Sequence[Sample], counts: KernelCounts, clock_hz: float,
                     lanes: float) -> np.ndarray:
    """(rows, phases) BSP seconds with lambda = 1, NaN where a phase did not run."""
    out = np.full((len(samples), len(PHASES)), math.nan)
    for i, s in enumerate(samples):
        for phase, ins in instructions(counts, s).items():
            work = ThreadCounts(comp=ins.compute, ld1=ins.coal + ins.uncoal, st1=1.0)
            out[i, PHASES.index(phase)] = bsp_seconds(work, s.workload.pixels, clock_hz, lanes)
    return out


def fit_lambdas(unit: np.ndarray, measured_seconds: np.ndarray) -> dict[str, float]:
    """Lambda per phase: geometric mean of ``unit / measured`` over the rows it ran in."""
    out = {}
    for j, phase in enumerate(PHASES):
        ran = np.isfinite(measured_seconds[:, j]) & np.isfinite(unit[:, j])
        if ran.any():
            out[phase] = float(np.exp(np.mean(np.log(unit[ran, j] / measured_seconds[ran, j]))))
    return out


def bsp_seconds_of(unit: np.ndarray, lambdas: Mapping[str, float]) -> np.ndarray:
    """(rows, phases) BSP seconds: ``unit / lambda`` (NaN for a phase with no lambda)."""
    lam = np.array([lambdas.get(p, math.nan) for p in PHASES])
    return unit / lam
