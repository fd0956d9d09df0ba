"""Calibrate a device for the ray tracer: microbenchmarks, then fit the model to measured frames.

Step 1 (``governed.mesh.microbench``) measures the Hong–Kim device parameters with OpenCL
microbenchmarks. Step 2 renders views of the calibration scenes with several knob settings at
two resolutions and fits, by robust least squares (scipy), what the measured phase times can
tell apart: per phase ``measured = scale * HongKim + offset * pixels + miss * missed_pixels +
launch`` (the ray tracer's application calibration, stored apart from the profile) and those
device parameters (issue cycles, latency, departure delays) that move the predictions in a way
the per-phase terms cannot; the figures the fit moves are stored in the calibration, and the
device profile keeps the microbenchmarks' (hardware only).

On an NVIDIA GPU each phase's occupancy (work-groups resident per SM) is computed from its
compiled kernel's registers and shared memory (:mod:`governed.mesh.kernel_occupancy`); the
fit's model runs with it and the calibration stores it, so the tuner predicts with the
occupancy it was fitted with. Elsewhere every phase has the profile's ``max_blocks_per_core``.

Only parameters that matter on the device are fitted. Each candidate's column of the residual
Jacobian at the start point (microbenchmark figures) is compared with those already admitted
(per-phase scales first, then the device parameters, then launch, miss and offset terms):
one whose direction is within ``IDENTIFIABLE`` of their span cannot be told apart from them
and is held at its measured value (a zero term). On a CPU profile with one warp per core
(N = MWP = CWP = 1) the departure delays have no effect and latency trades exactly against the
scales: they are held, and the fit reports so. The fitted parameters' standard errors come
from the Jacobian at the solution (``(J^T J)^-1`` times the residual variance).

The frames (scenes, sizes, views, knobs, and how each is timed) are
:mod:`governed.mesh.calibration_frames`.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from common.atomic_files import check_writable_file
from governed.mesh.calibration_frames import (
    CALIBRATION_SCENES,
    Sample,
    calibration_sizes,
    collect_calibration_samples,
)
from governed.mesh.instruction_counts import (
    counts_fingerprint,
    load_kernel_counts,
)
from governed.mesh.kernel_occupancy import kernel_occupancy
from governed.mesh.microbench import measure_device_profile
from governed.mesh.profile_store import (
    keep_in_memory,
    save_calibration,
    save_profile,
    store,
    writable_store,
)
from models.app_calibration import LAUNCH_MAX, OFFSET_MAX, SCALE_MAX, AppCalibration
from models.device_profile import DeviceProfile, plausible_range
from models.hong_kim import predict_seconds
from models.raytrace_cost import (
    KernelCounts,
    phase_instructions,
    predict_phase_seconds,
    resident_blocks,
)
from raytracer.device.choice import DeviceInfo
from raytracer.mesh.phases import PHASES, TILE

FREE_PARAMETERS = ("issue_cycles", "mem_latency", "dep_delay_coal", "dep_delay_uncoal")
PHASE_TERMS = ("scale", "launch", "miss", "offset")  # admitted in this order after the device's
IDENTIFIABLE = 0.02  # a normalized Jacobian column must keep this much outside the span
UNDETERMINED = 0.5  # relative standard error beyond which a device figure is held where fitted
NO_EFFECT = 1e-6  # a log-parameter whose column is below this share of the scales' does nothing
FIT_RANGE = 1000.0  # each free device parameter stays within this factor of its measured value
BOUND_MARGIN = 1e-9  # log units kept inside a device figure's plausible range
CONFOUNDED = 0.9  # |correlation| with a phase scale beyond which the pair is reported as one
RENDERER = "raytracer"  # the key of the ray tracer's application calibration
# per-phase terms stay inside what AppCalibration accepts
SCALE_BOUNDS = (np.log(1e-6), np.log(SCALE_MAX * (1 - 1e-6)))
TERM_BOUNDS = {"offset": (0.0, OFFSET_MAX * (1 - 1e-6)), "miss": (0.0, OFFSET_MAX * (1 - 1e-6)),
               "launch": (0.0, LAUNCH_MAX * (1 - 1e-6))}
# (latency, departure-delay, issue-cycle) multipliers of the microbenchmark figures the fit
# starts from: cache-like latencies, and compute-heavier mixes (with one warp per core only
# the latency / issue-cycle ratio matters, and microbenchmarks under load moved it 5-100x)
FIT_STARTS = ((1.0, 1.0, 1.0), (0.1, 0.01, 1.0), (0.01, 0.001, 1.0), (0.1, 0.1, 1.0),
              (1.0, 1.0, 10.0), (1.0, 1.0, 100.0))


@dataclass(frozen=True)
class FittedModel:
    """A calibration's result: the device profile (the hardware's measured figures only) and
    the ray tracer's application calibration fitted on it (with the device figures the fit
    moved, see :meth:`AppCalibration.model_profile`)."""

    profile: DeviceProfile
    calibration: AppCalibration
    samples: tuple[Sample, ...] = ()  # the frames it was fitted on (not saved with it)

    @property
    def model_profile(self) -> DeviceProfile:
        """The profile the ray tracer's model runs on: measured figures, fitted ones applied."""
        return self.calibration.model_profile(self.profile)

    def to_dict(self) -> dict:
        return {"profile": self.profile.to_dict(), "calibration": self.calibration.to_dict()}


def _model_phases(fitted: FittedModel, counts: KernelCounts, sample: Sample) -> dict[str, float]:
    s = sample.settings
    return predict_phase_seconds(fitted.profile, counts, sample.workload, s.ao_rays, s.shadows,
                                 s.phong, TILE * TILE, fitted.calibration,
                                 fitted.calibration.occupancy or None)


def _phase_arrays(counts: KernelCounts, samples: list[Sample], profile: DeviceProfile,
                  occupancy: Mapping[str, int] | None = None
                  ) -> dict[str, tuple[np.ndarray, ...]]:
    """Per phase: Hong–Kim inputs (compute, coal, uncoal, blocks, active blocks), pixels,
    missed pixels, measured seconds (instructions as ``profile``'s device issues them, in or
    out of order; active blocks: work-groups resident per core, ``occupancy``'s figure for
    the phases it names, else the profile's, as the predictions take them)."""
    rows: dict[str, list[tuple[float, ...]]] = {p: [] for p in PHASES}
    for s in samples:
        st = s.settings
        ins = phase_instructions(counts, s.workload, st.ao_rays, st.shadows, st.phong,
                                 profile.out_of_order, st.ao_filter)
        w = s.workload
        blocks = math.ceil(w.pixels / (TILE * TILE))
        for phase, measured in s.phase_seconds.items():
            i = ins[phase]
            rows[phase].append((i.compute, i.coal, i.uncoal, blocks,
                                resident_blocks(profile, blocks, phase, occupancy), w.pixels,
                                (1.0 - w.hit_fraction) * w.pixels, measured))
    return {p: tuple(np.array(r, np.float64).T) for p, r in rows.items() if len(r) >= 2}


@dataclass(frozen=True)
class _Parameter:
    """One candidate of the fit: a device field (log space), or a phase's term."""

    kind: str  # "device" or one of PHASE_TERMS
    key: str  # device field or phase

    @property
    def name(self) -> str:
        return f"{self.kind}.{self.key}"

    @property
    def logarithmic(self) -> bool:
        return self.kind in ("device", "scale")


class _Problem:
    """Relative residuals of every measured phase time as a function of the parameters."""

    def __init__(self, base: DeviceProfile, counts: KernelCounts, samples: list[Sample],
                 occupancy: Mapping[str, int] | None = None) -> None:
        self.base = base
        self.data = _phase_arrays(counts, samples, base, occupancy)
        self.phases = list(self.data)
        self.candidates = [_Parameter("scale", p) for p in self.phases]
        self.candidates += [_Parameter("device", f) for f in FREE_PARAMETERS]
        self.candidates += [_Parameter(t, p) for t in PHASE_TERMS[1:] for p in self.phases]
        self._device_key: tuple[float, ...] | None = None  # see device_seconds
        self._device_seconds: dict[str, np.ndarray] = {}

    def start(self, latency_factor: float = 1.0, delay_factor: float = 1.0,
              issue_factor: float = 1.0) -> dict[str, float]:
        """Every candidate's start value: device figures as measured (times the factors),
        each phase's scale where that device fits best, zero terms."""
        factors = {"mem_latency": latency_factor, "dep_delay_coal": delay_factor,
                   "dep_delay_uncoal": delay_factor, "issue_cycles": issue_factor}
        # a start pushed past the plausible range by its factor is clamped inside it
        values = {f"device.{f}": float(np.clip(math.log(getattr(self.base, f)
                                                        * factors.get(f, 1.0)), *_log_range(f)))
                  for f in FREE_PARAMETERS}
        device = self.device_seconds(values)
        for phase in self.phases:
            measured = self.data[phase][-1]
            scale = np.log(np.median(measured / np.maximum(device[phase], 1e-12)))
            values[f"scale.{phase}"] = float(np.clip(scale, SCALE_BOUNDS[0] + 1e-9,
                                                     SCALE_BOUNDS[1] - 1e-9))
            for term in PHASE_TERMS[1:]:
                values[f"{term}.{phase}"] = 0.0
        return values

    def profile(self, values: dict[str, float]) -> DeviceProfile:
        return dataclasses.replace(self.base, **{
            f: float(np.exp(values[f"device.{f}"])) for f in FREE_PARAMETERS})

    def device_seconds(self, values: dict[str, float]) -> dict[str, np.ndarray]:
        """Per phase, the device model's seconds of each frame at the device figures in
        ``values``. Kept for the last figures asked: the phase terms (scale, launch, miss,
        offset) leave the device model as it is, so the finite differences along them, most
        of a fit's residual evaluations, need not run it again (the same numbers, computed
        once: ``bench tracer-model --quick`` spent two thirds of its time here)."""
        key = tuple(values[f"device.{f}"] for f in FREE_PARAMETERS)
        if self._device_key != key:
            profile = self.profile(values)
            self._device_seconds = {
                phase: predict_seconds(profile, compute, coal, uncoal, 0.0, TILE * TILE, blocks,
                                       active)
                for phase, (compute, coal, uncoal, blocks, active, *_) in self.data.items()}
            self._device_key = key
        return self._device_seconds

    def residuals(self, values: dict[str, float]) -> np.ndarray:
        device = self.device_seconds(values)
        out = []
        for phase in self.phases:
            _, _, _, _, _, pixels, missed, measured = self.data[phase]
            model = device[phase]
            pred = (model * np.exp(values[f"scale.{phase}"]) + values[f"launch.{phase}"]
                    + values[f"miss.{phase}"] * missed + values[f"offset.{phase}"] * pixels)
            out.append((pred - measured) / measured)
        return np.concatenate(out)

    def jacobian(self, values: dict[str, float], names: list[str]) -> np.ndarray:
        """Forward-difference Jacobian of the residuals in the fit's coordinates."""
        r0 = self.residuals(values)
        cols = []
        for name in names:
            step = 1e-6 if name.split(".")[0] in ("device", "scale") else self._term_step(name)
            moved = dict(values, **{name: values[name] + step})
            cols.append((self.residuals(moved) - r0) / step)
        return np.column_stack(cols) if cols else np.empty((len(r0), 0))

    def _term_step(self, name: str) -> float:
        kind, phase = name.split(".")
        _, _, _, _, _, pixels, missed, measured = self.data[phase]
        per = {"launch": 1.0, "miss": max(missed.mean(), 1.0), "offset": pixels.mean()}[kind]
        return 1e-4 * float(np.median(measured)) / per

    def identifiable(self, values: dict[str, float]) -> tuple[list[_Parameter], list[_Parameter]]:
        """(fitted, held): greedy, in candidate order, by each normalized Jacobian column's
        distance from the span of those admitted before it."""
        jac = self.jacobian(values, [c.name for c in self.candidates])
        # a log-space column this much smaller than the scales' moves nothing (rounding noise)
        floor = NO_EFFECT * max(float(np.linalg.norm(jac[:, i])) for i, c in
                                enumerate(self.candidates) if c.kind == "scale")
        admitted: list[np.ndarray] = []
        fitted, held = [], []
        for candidate, col in zip(self.candidates, jac.T, strict=True):
            norm = float(np.linalg.norm(col))
            if not math.isfinite(norm) or norm == 0.0 or (candidate.logarithmic
                                                          and norm < floor):
                held.append(candidate)
                continue
            v = col / norm
            if admitted:
                q, _ = np.linalg.qr(np.column_stack(admitted))
                v = v - q @ (q.T @ v)
            if np.linalg.norm(v) >= IDENTIFIABLE:
                admitted.append(col / norm)
                fitted.append(candidate)
            else:
                held.append(candidate)
        return fitted, held

    def bounds(self, p: _Parameter, start: dict[str, float]) -> tuple[float, float]:
        if p.kind == "device":
            return device_bounds(p.key, getattr(self.base, p.key))
        if p.kind == "scale":
            return SCALE_BOUNDS
        return TERM_BOUNDS[p.kind]


def _log_range(key: str) -> tuple[float, float]:
    """The log of a device figure's plausible range, a hair inside it (exp(log(1e5)) is
    100000.00000000001: a fit or a start at the edge would make a profile that does not
    load)."""
    low, high = (math.log(v) for v in plausible_range(key))
    return low + BOUND_MARGIN, high - BOUND_MARGIN


def device_bounds(key: str, measured: float) -> tuple[float, float]:
    """Log-space bounds of a fitted device figure: within FIT_RANGE of its measured value and
    inside its plausible range (:func:`_log_range`)."""
    low, high = _log_range(key)
    centre = math.log(measured)
    return max(centre - math.log(FIT_RANGE), low), min(centre + math.log(FIT_RANGE), high)


def samples_kernels(samples: list[Sample]) -> str:
    """The kernels fingerprint every sample was rendered with (the counts' own where samples
    do not record one); samples from different kernels or launches cannot make one fit."""
    found = {s.kernels for s in samples} - {""}
    if len(found) > 1:
        raise ValueError(f"calibration samples were rendered by different kernels or kernel "
                         f"launches ({sorted(found)}); fit each on its own")
    return found.pop() if found else counts_fingerprint()


def fit_profile(base: DeviceProfile, counts: KernelCounts, samples: list[Sample],
                source: str = "", occupancy: Mapping[str, int] | None = None) -> FittedModel:
    """Least-squares fit of what the measured phase times can identify (see the module doc).

    Residuals are relative, so short and long frames count alike; the loss is robust (soft
    L1 beyond 10 %). The calibration records the fit's in-sample mean frame error, the
    standard error of every fitted parameter and the parameters held at their measured values.
    ``occupancy`` (phase -> work-groups resident per core, :func:`kernel_occupancy`): the
    model fits with it for the phases it names and the calibration keeps it for them.
    """
    problem = _Problem(base, counts, samples, occupancy)
    fitted, held = problem.identifiable(problem.start())
    result, start, uncertainty = _solve(problem, fitted)
    # A device figure with no effect at the solution (an infinite standard error: e.g. the
    # latency once the bandwidth bound sets the access time) is held as measured and the rest
    # refitted. One that is merely loose (relative error > UNDETERMINED: pushed along a flat
    # valley, e.g. towards FIT_RANGE where memory instructions stop mattering) is held where
    # the fit left it ("<name>=fitted"): the predictions do not depend on where in the valley
    # it stops, the noisy microbenchmark figure would change them, and the other parameters'
    # errors are then their own rather than the valley's.
    idle = [p for p in fitted if p.kind == "device" and uncertainty[p.name] >= 1e300]
    loose = [p for p in fitted if p.kind == "device" and UNDETERMINED < uncertainty[p.name]
             < 1e300]
    if idle or loose:
        values = dict(start, **dict(zip([p.name for p in fitted], result.x, strict=True)))
        problem.base = dataclasses.replace(problem.base, **{
            p.key: float(np.exp(values[p.name])) for p in loose})
        fitted = [p for p in fitted if p not in idle and p not in loose]
        held += idle + [_Parameter(p.kind, f"{p.key}=fitted") for p in loose]
        result, start, uncertainty = _solve(problem, fitted)
    names = [p.name for p in fitted]
    values = dict(start, **dict(zip(names, result.x, strict=True)))
    moved = problem.profile(values)
    # the figures the fit moved go to the calibration, not the profile (a held figure comes
    # back through exp(log(x)), a few ulps off: not moved)
    figures = {f: getattr(moved, f) for f in FREE_PARAMETERS
               if not math.isclose(getattr(moved, f), getattr(base, f), rel_tol=1e-9)}
    profile = dataclasses.replace(base, source=source) if source else base
    phases = problem.phases
    calibration = AppCalibration(
        RENDERER, profile.name, profile.driver,
        scale={p: float(np.exp(values[f"scale.{p}"])) for p in phases},
        offset={p: values[f"offset.{p}"] for p in phases},
        miss={p: values[f"miss.{p}"] for p in phases},
        launch={p: values[f"launch.{p}"] for p in phases},
        uncertainty=uncertainty, held=tuple(p.name for p in held),
        source=source, device_profile=profile.fingerprint(), kernels=samples_kernels(samples),
        device_figures=figures,
        occupancy={p: int(occupancy[p]) for p in phases if occupancy and p in occupancy})
    out = FittedModel(profile, calibration)
    errors = model_errors(out, counts, samples)
    if not math.isfinite(errors.mean()):
        raise ValueError(f"calibration of {base.name} produced a non-finite model error")
    fit = {"mean_error": float(errors.mean()), "frames": float(len(samples)),
           **confounded(result, fitted)}
    return FittedModel(profile, dataclasses.replace(calibration, fit=fit), tuple(samples))


def _solve(problem: _Problem, fitted: list[_Parameter]):
    """Robust least squares of the ``fitted`` parameters from each start; the best result, its
    start values and the fitted parameters' standard errors."""
    names = [p.name for p in fitted]
    best = None
    for factors in FIT_STARTS:
        start = problem.start(*factors)
        lower, upper = zip(*(problem.bounds(p, start) for p in fitted), strict=True)
        x0 = np.clip([start[n] for n in names], np.array(lower) + 1e-12 * np.abs(lower),
                     upper)

        def residuals(x: np.ndarray, start: dict[str, float] = start) -> np.ndarray:
            return problem.residuals(dict(start, **dict(zip(names, x, strict=True))))

        result = least_squares(residuals, x0, bounds=(lower, upper), loss="soft_l1",
                               f_scale=0.1, x_scale="jac")
        if best is None or result.cost < best[0].cost:
            best = (result, start)
    result, start = best
    return result, start, _standard_errors(result, names, [p.logarithmic for p in fitted])


def _covariance(result) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(covariance of the fitted parameters, Jacobian column norms, right singular vectors,
    which singular values were kept) from the Jacobian at the solution."""
    jac = np.asarray(result.jac, np.float64)
    m, n = jac.shape
    variance = 2.0 * float(result.cost) / max(1, m - n)
    norms = np.linalg.norm(jac, axis=0)
    safe = np.where(norms > 0, norms, 1.0)
    unit = jac / safe  # columns differ by 1e8 (s per pixel vs log-scale): invert them alike
    _, sv, vt = np.linalg.svd(unit, full_matrices=False)
    keep = sv > 1e-8 * sv.max()
    cov = (vt[keep].T / sv[keep] ** 2) @ vt[keep] / np.outer(safe, safe) * variance
    return cov, norms, vt, keep


def confounded(result, fitted: list[_Parameter]) -> dict[str, float]:
    """The device figures that trade against a per-phase scale, as ``fit`` entries:
    ``"correlation <device>~<scale>"`` (beyond :data:`CONFOUNDED`) and ``"product_relative_sd
    <device>*<scale>"``. Such a pair is determined mainly as its product (issue cycles 3.2 in
    one fit, 34.6 in another, the phase scale moving inversely, the product ~8.7 in both), so
    each one's own standard error says little; the product's says how well the data pin it.
    The figure is still fitted: the ratio of the device's figures (memory latency over issue
    cycles) differs between phases and workloads, and holding both costs accuracy."""
    cov = _covariance(result)[0]
    var = np.clip(np.diag(cov), 1e-300, None)
    sd = np.sqrt(var)  # the product of two variances this small underflows to 0 (0/0)
    corr = cov / np.outer(sd, sd)
    out: dict[str, float] = {}
    for i, p in enumerate(fitted):
        if p.kind != "device":
            continue
        for j, q in enumerate(fitted):
            if q.kind == "scale" and abs(corr[i, j]) > CONFOUNDED:
                out[f"correlation {p.name}~{q.name}"] = float(corr[i, j])
                product_var = var[i] + var[j] + 2.0 * cov[i, j]  # both fitted in log space
                out[f"product_relative_sd {p.name}*{q.name}"] = float(
                    math.sqrt(max(product_var, 0.0)))
    return out


def _standard_errors(result, names: list[str], logarithmic: list[bool]) -> dict[str, float]:
    """Standard error of each fitted parameter from the Jacobian at the solution: relative for
    the log-space ones (scales, device figures), in seconds for the terms."""
    cov, norms, vt, keep = _covariance(result)
    n = len(names)
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    # a parameter that no longer moves anything at the solution (or only together with
    # others) is not determined at all: an infinite error, not the pseudo-inverse's zero
    null = np.abs(vt[~keep]).max(axis=0) if (~keep).any() else np.zeros(n)
    log = np.asarray(logarithmic, bool)
    idle = log & (norms < NO_EFFECT * max(norms[log].max(initial=0.0), 1e-300))
    sd = np.where((norms == 0) | idle | (null > 1e-3), np.inf, sd)
    return {name: float(v) if math.isfinite(v) else 1e300 for name, v in zip(names, sd,
                                                                            strict=True)}


def fit_report(fitted: FittedModel) -> dict:
    """What a calibration fitted, with standard errors, and what it held (for JSON output)."""
    cal, profile = fitted.calibration, fitted.model_profile
    params = {}
    for name, sd in cal.uncertainty.items():
        kind, key = name.split(".", 1)
        if kind == "device":
            value = getattr(profile, key)
            params[name] = {"value": value, "relative_sd": sd}
        elif kind == "scale":
            params[name] = {"value": cal.scale[key], "relative_sd": sd}
        else:
            value = getattr(cal, kind)[key]
            params[name] = {"value": value, "sd": sd,  # none relative at the zero bound
                            "relative_sd": sd / value if value > 1e-6 * sd else None}
    traded = {k: v for k, v in cal.fit.items() if k.startswith(("correlation ",
                                                                  "product_relative_sd "))}
    return {"fitted": params, "held": list(cal.held), "confounded": traded,
            "in_sample_mean_frame_error": cal.fit.get("mean_error"),
            "frames": cal.fit.get("frames")}


def model_errors(fitted: FittedModel, counts: KernelCounts, samples: list[Sample]) -> np.ndarray:
    """|predicted - measured| / measured of whole frames."""
    predicted = np.array([sum(_model_phases(fitted, counts, s).values()) for s in samples])
    measured = np.array([sum(s.phase_seconds.values()) for s in samples])
    return np.abs(predicted - measured) / measured


def base_profile(device: DeviceInfo, quick: bool) -> DeviceProfile:
    """Step 1: the device's Hong–Kim parameters from OpenCL microbenchmarks.

    On a CPU a core runs one work-group at a time, its SIMD groups one after another (PoCL:
    groups of one work-item; Intel's runtime: groups of 16 lanes on AVX-512, each as long as
    its slowest lane, which the probe's per-group counts carry). So a work-group behaves as one
    warp and a core holds one warp at a time: N = 1, nothing hides latency, and Hong–Kim
    reduces to its balanced case, linear in the instruction counts. A core does run one
    work-item's independent instructions out of order, which hides what a kernel issues ahead
    of a traversal (the next AO ray's set-up): ``out_of_order``.
    """
    profile = measure_device_profile(device.spec, quick=quick)
    if device.kind == "CPU":
        profile = dataclasses.replace(profile, warp_size=TILE * TILE, transactions_per_uncoal=1,
                                      max_blocks_per_core=1, out_of_order=True)
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
    samples = collect_calibration_samples(device, quick, progress)
    scenes = CALIBRATION_SCENES
    sizes = calibration_sizes(device, quick)
    source = (f"autotune calibrate{' --quick' if quick else ''}: microbenchmarks + fit on "
              f"{', '.join(scenes)} at {', '.join(f'{w}x{h}' for w, h in sizes)}; "
              f"{device.runtime} runtime, SIMD width {device.simd_width}; cycles at "
              f"{device.clock_mhz:.0f} MHz from {device.clock_source}")
    # NVIDIA: each phase's work-groups per SM from its kernel's registers (None elsewhere)
    occupancy = kernel_occupancy(device)
    result = fit_profile(base, counts, samples, source=source, occupancy=occupancy)
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
