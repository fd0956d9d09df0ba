"""The ray tracer governed by the tuner: probe -> §4.3 counts -> Hong–Kim -> choose -> render.

This is the wiring of figures 1 and 2 of the ray tracer's auto-tuner (Ganestam & Doggett,
"Auto-tuning Interactive Ray Tracing using an Analytical GPU Architecture Model") for the
OpenCL tracer; the viewer, the demo and the paper benchmark all drive frames through
:class:`TunedRenderer`.

The controlled time is the frame the user waits for (docs/architecture.md, "What frame time
means"): from the start of the probe to the image read back, i.e. the probe (unless it ran
hidden during the previous frame), every kernel, the read-back and the host's launch overhead.
The prediction is the probe time already spent + the model's kernel seconds + a running
estimate of the host overhead; kernel time stays available as a second figure.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

import numpy as np

from autotune import (
    DEFAULT_CONTROLLER,
    GOVERNOR_SETTLE,
    AutotuneWarning,
    BoolKnob,
    FloatKnob,
    FrameLoop,
    FramePrice,
    Governed,
    KnobSpace,
    ModelFitCheck,
    PartCorrections,
    PartDrift,
    RunningOverhead,
)
from governed.mesh.calibration_fit import RENDERER, calibrate
from governed.mesh.instruction_counts import kernels_fingerprint, load_kernel_counts
from governed.mesh.probe import Probe
from governed.mesh.profile_store import find_app_calibration, find_device_profile
from governed.probe_policy import DEFAULT_PROBE_POLICY, ProbeSchedule
from models.app_calibration import AppCalibration
from models.device_profile import DeviceProfile
from models.raytrace_cost import (
    PHASES,
    CandidatePhases,
    KernelCounts,
    candidate_phase_seconds,
    predict_phase_seconds,
)
from models.workload import Workload
from raytracer.camera import Camera
from raytracer.mesh.phases import TILE
from raytracer.mesh.scene import Scene
from raytracer.mesh.tracer import MAX_AO_RAYS, Frame, RenderSettings, Tracer

# The run-time probe's rays at least: an eighth of the calibration's probe (160x90). Chosen on
# the validation scenes (bench tracer-tuned, two quiet runs each): against 80x45 the tuner's
# share fell (dragon's orbit 3.5-4.1 % from 3.9-5.1 %, sibenik's 1.5-1.7 % from 2.7 %) with no
# larger tracking errors; 30x30 cut it further but worsened p95 errors and first frames
PROBE_PIXELS = 60 * 30
PHASE_MEMO = 4  # (workload, setting) pairs whose phase seconds the model remembers
# The AO knob moves in quarter rays, and in sixteenths below AO_FINE_BELOW rays: at a few rays
# a quarter ray was 4-8 % of dragon's frame (480x270), so the best setting under the target
# often sat that far below it
AO_STEP, AO_FINE_STEP, AO_FINE_BELOW = 0.25, 1.0 / 16, 4.0
EXCLUDED_SECONDS = 1e6  # prediction given to candidates a user has ruled out (forced knobs)
MIN_KERNEL_SHARE = 0.25  # frames whose modelled kernels are less of the frame teach no bias
FEEDBACK = ("phase", "frame")  # per-phase corrections + the frame's, or the frame's only
# Between probes, each phase's price follows the frames rendered since the last one
# (PartDrift's gain), and feed-forward raises as a governor does (GOVERNOR_SETTLE). Chosen on
# the validation orbits (dragon, sibenik; two quiet runs each, on change): against no drift
# and no settling, mean error 6.0 -> 5.1 % and 8.8 -> 7.8 %, reversals per 60 frames 10 -> 4.5
# and 10 -> 8.5. A gain of 1.0 measured alike; settling every raise (no band) left sibenik's
# p95 error at 0.19-0.50, with the band 0.14-0.25
DRIFT_GAIN = 0.6
# The per-phase corrections are scoped by the workload's phases priced at this many AO rays
# with shadows and Phong on (autotune.feedback's Scope): a knob change is not a new workload
SCOPE_AO_RAYS = 1.0


def knob_space(max_ao_rays: int = MAX_AO_RAYS) -> KnobSpace:
    """The ray tracer's knobs, ordered by how much they add to the image.

    Phong shading matters most, then shadows, then AO whose visual gain flattens with the ray
    count (quality grows with log2 of the rays). The AO count is continuous: a fractional
    count traces one more ray in that share of the pixels, so the target can be met between
    whole-ray steps.
    """
    def quality(c: dict[str, np.ndarray]) -> np.ndarray:
        rays = np.log2(1.0 + np.asarray(c["ao_rays"], np.float64)) / np.log2(1.0 + max_ao_rays)
        return 2.0 * np.asarray(c["phong"], np.float64) + 1.5 * np.asarray(c["shadows"]) + rays

    ao = FloatKnob.at("ao_rays", ao_levels(max_ao_rays))
    return KnobSpace([ao, BoolKnob("shadows"), BoolKnob("phong")], quality=quality)


def ao_levels(max_ao_rays: int = MAX_AO_RAYS) -> np.ndarray:
    """The AO knob's ray counts: sixteenths of a ray below :data:`AO_FINE_BELOW`, then quarter
    rays up to ``max_ao_rays``."""
    fine = np.arange(0.0, min(AO_FINE_BELOW, max_ao_rays), AO_FINE_STEP)
    coarse = np.arange(min(AO_FINE_BELOW, max_ao_rays), max_ao_rays + AO_STEP / 2, AO_STEP)
    return np.concatenate([fine, coarse])


def knobs_of(settings: RenderSettings) -> dict[str, float | bool]:
    """The tuner's knobs of render settings (the AO radius is not a knob)."""
    return {"ao_rays": float(settings.ao_rays), "shadows": bool(settings.shadows),
            "phong": bool(settings.phong)}


class RayTraceModel:
    """Predicts phase and frame seconds of the tracer from a workload (pure model calls).

    ``calibration`` is the ray tracer's fit on this device (per-phase scale and offset, and
    where it was measured each phase's occupancy, which the predictions then use); None gives
    the bare analytical model. It remembers what it priced for the last workload: without a new
    probe a frame asks for the same candidates and settings again, and only the per-phase
    factors move.
    """

    def __init__(self, profile: DeviceProfile, counts: KernelCounts,
                 calibration: AppCalibration | None = None) -> None:
        if calibration is not None:
            calibration.require(PHASES)
            profile = calibration.model_profile(profile)  # the figures the fit moved
        self.profile, self.counts, self.calibration = profile, counts, calibration
        # work-groups resident per core of each phase the fit measured (None: the profile's)
        self.active_blocks = (calibration.occupancy or None) if calibration is not None else None
        # the last workload's candidates (their arrays) and their phases before factors
        self._candidates: tuple[tuple, list[np.ndarray], CandidatePhases] | None = None
        self._phases: dict[tuple, dict[str, float]] = {}
        self._index: tuple[list[np.ndarray], dict] | None = None  # _candidate_index's
        self._grid: list[np.ndarray] | None = None  # the candidates a search prices (prepare)

    def frame_seconds(self, workload: Workload, ao_rays, shadows, phong,
                      phase_factors: dict[str, float] | None = None) -> np.ndarray:
        """Vectorized over candidate knob arrays; ``phase_factors`` scale single phases."""
        arrays = [np.asarray(a) for a in (ao_rays, shadows, phong)]
        self._price_candidates(workload, arrays)
        return self._candidates[2].total(phase_factors)

    def _price_candidates(self, workload: Workload, arrays: list[np.ndarray]) -> None:
        """The candidates' phases on ``workload``, unless they are the ones priced last (the
        same read-only arrays, a search's grid, are known without reading them)."""
        last = self._candidates
        if last is not None and all(a is b and not a.flags.writeable
                                    for a, b in zip(arrays, last[1], strict=True)):
            if last[0][0] is workload:
                return
            arrays = last[1]  # the same candidates: their index stays (_candidate_index)
        key = (workload, *((a.dtype.str, a.shape, a.tobytes()) for a in arrays))
        if last is None or last[0] != key:
            self._candidates = (key, arrays, candidate_phase_seconds(
                self.profile, self.counts, workload, *arrays, TILE * TILE, self.calibration,
                self.active_blocks))

    def prepare(self, candidates: Mapping[str, np.ndarray]) -> None:
        """The candidate grid a search will price (read-only arrays): a workload that
        :meth:`phase_seconds` is asked about first has them all priced at once, as the search
        would next."""
        self._grid = [np.asarray(candidates[k]) for k in ("ao_rays", "shadows", "phong")]

    def _candidate_index(self) -> dict[tuple[float, bool, bool], int]:
        """The candidates' positions by setting (the first of equal ones), built once per
        candidate arrays: the governed loop looks a setting up two or three times a frame."""
        arrays = self._candidates[1]
        if self._index is None or self._index[0] is not arrays:
            index: dict[tuple[float, bool, bool], int] = {}
            for i, setting in enumerate(zip(*(np.ravel(a).tolist() for a in arrays),
                                            strict=True)):
                index.setdefault((float(setting[0]), bool(setting[1]), bool(setting[2])), i)
            self._index = (arrays, index)
        return self._index[1]

    def phase_seconds(self, workload: Workload, settings: RenderSettings) -> dict[str, float]:
        """Each phase's seconds of ``settings`` on ``workload``: read from the candidates'
        table (a new workload's candidates are priced at once: the search prices them all
        next), else computed (the last few remembered) where no grid was prepared and no
        search has priced any."""
        if self._candidates is None and self._grid is not None:
            self._price_candidates(workload, self._grid)
        if self._candidates is not None:
            if self._candidates[0][0] is not workload and self._candidates[0][0] != workload:
                self._price_candidates(workload, self._candidates[1])
            at = self._candidate_index().get(
                (float(settings.ao_rays), bool(settings.shadows), bool(settings.phong)))
            if at is not None:
                return self._candidates[2].at(at)
        key = (workload, settings)
        if key not in self._phases:
            if len(self._phases) >= PHASE_MEMO:
                del self._phases[next(iter(self._phases))]
            self._phases[key] = predict_phase_seconds(
                self.profile, self.counts, workload, settings.ao_rays, settings.shadows,
                settings.phong, TILE * TILE, self.calibration, self.active_blocks)
        return self._phases[key]


def device_model(tracer: Tracer, profile: DeviceProfile | None = None,
                 calibration: AppCalibration | None = None) -> RayTraceModel:
    """The model for the tracer's device.

    Given a ``profile``, that profile with ``calibration`` (None: the bare model). Otherwise the
    device's stored profile and ray-tracer calibration (the user's, else the shipped ones); when
    either is missing, a quick calibration is run once and kept.
    """
    if profile is not None:
        return RayTraceModel(profile, load_kernel_counts(), calibration)
    info = tracer.device_info
    profile = find_device_profile(info.name, info.driver)
    if profile is not None:
        kernels = kernels_fingerprint(tracer.launches, tracer.build_options)
        calibration = find_app_calibration(profile, RENDERER, PHASES, kernels)
    if profile is None or calibration is None:
        what = "profile" if profile is None else "ray-tracer calibration"
        warnings.warn(f"no calibrated {what} for {info.name} (driver {info.driver}); "
                      f"running a quick calibration (run `autotune calibrate` to keep one)",
                      stacklevel=2)
        fitted = calibrate(tracer.device_info, quick=True, save=True, progress=False)
        profile, calibration = fitted.profile, fitted.calibration
    if profile.name == info.name and profile.cores != info.compute_units:
        # the same device cut by fission (AUTOTUNE_COMPUTE_UNITS): its own core count
        profile = replace(profile, cores=info.compute_units)
    return RayTraceModel(profile, load_kernel_counts(), calibration)


@dataclass
class TunedFrame:
    """A rendered frame with what the tuner chose and predicted for it."""

    image: np.ndarray
    settings: RenderSettings
    measured: float  # frame seconds the user waits for: tuner's work + kernels + read-back
    predicted: float  # model seconds for the same span (probe spent + kernels + overhead)
    corrected: float  # model kernels x slow-feedback correction + the measured parts
    phase_seconds: dict[str, float]
    probe_seconds: float
    workload: Workload | None  # None: the controller priced no frame, nothing was probed
    over_budget: bool = False
    predicted_phases: dict[str, float] = field(default_factory=dict)
    kernel_seconds: float = 0.0  # sum of the kernels' event times (the second figure)
    # the tuner's own work in this frame: probe + choice + bookkeeping (the frame less the
    # tracer's render call)
    tuner_seconds: float = 0.0


class TunedRenderer(Governed):
    """Renders each frame with the knobs the tuner chooses for a target frame time."""

    def __init__(self, scene: Scene, width: int, height: int, target_seconds: float,
                 controller: str = DEFAULT_CONTROLLER, device: str | None = None,
                 profile: DeviceProfile | None = None, tracer: Tracer | None = None,
                 ao_radius: float = 0.1, probe_factor: int = 16, probe_ao_samples: int = 2,
                 probe_pixels: int = PROBE_PIXELS,
                 calibration: AppCalibration | None = None, feedback: str = "phase",
                 probe_policy: str = DEFAULT_PROBE_POLICY) -> None:
        if feedback not in FEEDBACK:
            raise ValueError(f"feedback must be one of {', '.join(FEEDBACK)}, got {feedback!r}")
        self.scene = scene
        # "phase": each kernel phase corrected by its own slow feedback, then the controller's
        # correction of the whole frame takes what is left; "frame": that one correction only
        self.feedback = feedback
        self.phase_corrections = PartCorrections(PHASES)
        self.drift = PartDrift(DRIFT_GAIN)  # phases' drift since the last probe
        self.tracer = tracer or Tracer(scene, device=device)
        self.model = device_model(self.tracer, profile, calibration)
        self.probe = Probe.for_tracer(self.tracer, factor=probe_factor,
                                      ao_samples=probe_ao_samples, ao_radius=ao_radius,
                                      min_pixels=probe_pixels)
        # one probe now, untimed: the first call loads its compiled code from numba's cache,
        # which the first frame would pay (a 20.8 ms probe there in a 12 ms target)
        self.probe.measure(scene.camera, width, height)
        self.width, self.height = width, height
        self.ao_radius = ao_radius  # also the probe's (the AO workload depends on it)
        self.space = knob_space()
        self.model.prepare(self.space.grid())
        self.force_shadows: bool | None = None
        self.frame_index = 0
        self._workload: Workload | None = None
        self._settings = RenderSettings(0, ao_radius, False, False)
        # probing the next view during this frame only pays where the device is not the CPU
        self.overlap_probe = self.tracer.device_info.kind != "CPU"
        self._pending_probe: tuple[tuple, Future, float] | None = None
        self.schedule = ProbeSchedule(probe_policy)  # which frames are probed
        self._probed_key: tuple | None = None  # what the last probe's workload depends on
        self._priced = False  # whether the last frame's controller priced it
        self._fresh = False  # whether this frame's workload was probed on its view
        self._spent = 0.0  # seconds of this frame spent before the knobs take effect (probe)
        self._scope: dict[str, float] = {}  # the workload's phases at SCOPE_AO_RAYS
        self.overhead = RunningOverhead()  # read-back + launch + host per frame
        self.fit_check = ModelFitCheck()  # whether the calibration fits this machine
        self._warm_up()
        self.loop = FrameLoop(target_seconds, controller, corrects_itself=feedback == "phase",
                              settle=GOVERNOR_SETTLE)
        self.loop.configure(self.space, self._price)

    def _warm_up(self) -> None:
        """One untimed frame at the cheapest setting that launches every phase: it pays the
        first render's one-off costs at this size, and its host overhead (launches, read-back)
        is the first frames' estimate, which the first frame's price would otherwise lack."""
        settings = RenderSettings(AO_FINE_STEP, self.ao_radius, True, True)
        started = time.perf_counter()
        frame = self.tracer.render(self.scene.camera, self.width, self.height, settings)
        self.overhead.start_from(time.perf_counter() - started - frame.seconds)
        self.tracer.forget_history()  # the warm-up's AO is not the first frame's history

    @property
    def ao_radius(self) -> float:
        """AO radius (fraction of the scene diagonal) of the frames and of the probe's AO rays."""
        return self._ao_radius

    @ao_radius.setter
    def ao_radius(self, value: float) -> None:
        RenderSettings(0, value, False, False).validate()  # refuse what the tracer cannot use
        self._ao_radius = float(value)
        self.probe.ao_radius = float(value)

    @property
    def settings(self) -> RenderSettings:
        """The knobs of the last frame; set them (with ``tuning = False``) to hold them."""
        return self._settings

    @settings.setter
    def settings(self, value: RenderSettings) -> None:
        value.validate()
        self._settings = RenderSettings(value.ao_rays, self.ao_radius, value.shadows,
                                        value.phong)
        if not self.tuning:
            self.loop.hold(knobs_of(self._settings))

    def resize(self, width: int, height: int) -> None:
        self.width, self.height = width, height

    def _price(self, c: dict[str, np.ndarray]) -> FramePrice:
        """Model kernel seconds (with the per-phase corrections) + the frame's measured part
        (probe spent + host overhead); candidates a user ruled out cost ``EXCLUDED_SECONDS``."""
        seconds = self.model.frame_seconds(self._workload, c["ao_rays"], c["shadows"], c["phong"],
                                           self._phase_factors())
        if self.force_shadows is not None:
            seconds = np.where(np.asarray(c["shadows"]) == self.force_shadows, seconds,
                               EXCLUDED_SECONDS)
        return FramePrice(seconds, self._known())

    def _phase_factors(self) -> dict[str, float] | None:
        """Per-phase corrections times the phases' drift since the last probe when
        ``feedback == "phase"``, else None (the bare model)."""
        if self.feedback != "phase":
            return None
        drift = self.drift.factors(PHASES)
        return {p: c * drift[p] for p, c in self.phase_corrections.factors().items()}

    def _known(self) -> float:
        """Seconds of this frame that are measured, not modelled: probe spent + overhead."""
        return self._spent + self.overhead.seconds

    @property
    def probe_policy(self) -> str:
        """Which frames are probed (:data:`~governed.probe_policy.PROBE_POLICIES`);
        setting it starts the schedule afresh."""
        return self.schedule.policy

    @probe_policy.setter
    def probe_policy(self, policy: str) -> None:
        self.schedule = ProbeSchedule(policy)

    def _probe_key(self) -> tuple:
        """Everything a probe's workload depends on besides the camera and the geometry."""
        p = self.probe
        return (self.width, self.height, p.ao_radius, p.ao_samples, p.factor, p.min_pixels,
                p.simd_width, self.scene.light.tobytes())  # bytes: no NumPy call a frame

    def _measure(self, camera: Camera) -> tuple[Workload | None, float]:
        """The view's workload and the seconds this frame spent measuring it: none for a
        controller that does not price frames; the last probe's where the probe policy lets it
        stand in; else from the probe started during the last frame (a device that is not the
        CPU), else probed now."""
        pending, self._pending_probe = self._pending_probe, None
        priced, self._priced = self._priced, self.loop.needs_price
        if not self._priced:
            if pending is not None:
                pending[1].result()  # dropped, never left running
            return None, 0.0
        key = self._probe_key()
        if key != self._probed_key or not priced:
            self.schedule.restart()
        if pending is not None:
            workload = pending[1].result()
            if pending[0] == (camera, key):
                return self._probed(camera, key, workload), pending[2]
        if self._workload is not None and not self.schedule.due(camera, self.scene.diagonal):
            return self._workload, 0.0
        workload = self.probe.measure(camera, self.width, self.height)
        return self._probed(camera, key, workload), self.probe.last_seconds

    def _probed(self, camera: Camera, key: tuple, workload: Workload) -> Workload:
        """Tell the schedule how far the new probe's frame moved from the last one's. Asking
        the model prices every candidate on the new workload here (it knows the grid), within
        the probe's measured time, which the frame's price includes (the choice's own time is
        learnt from the frames before): on a renderer's first frame, pricing and indexing
        them in the choice had left 1.2 ms of dragon's 53 ms frame unpriced."""
        before = (sum(self.model.phase_seconds(self._workload, self._settings).values())
                  if self._workload is not None and key == self._probed_key else None)
        after = sum(self.model.phase_seconds(workload, self._settings).values())
        change = None if before is None else abs(after - before) / max(before, 1e-12)
        self.schedule.probed(camera, change)
        self._probed_key = key
        self.drift.restart()
        return workload

    def render(self, camera: Camera, next_camera: Camera | None = None) -> TunedFrame:
        """Probe the view, choose knobs (unless tuning is off), render, feed back the time.

        With ``next_camera`` and ``overlap_probe``, the next view is probed on a worker thread
        while the device renders this one (Ganestam & Doggett §5: free on a GPU, contended on
        a CPU).
        """
        started_frame = time.perf_counter()
        self._workload, probe_seconds = self._measure(camera)
        self._fresh = camera == self.schedule.last_probed
        if self._workload is not None and self.feedback == "phase":
            # a phase far from where its correction was learnt, sized at fixed knobs
            self._scope = self.model.phase_seconds(
                self._workload, RenderSettings(SCOPE_AO_RAYS, self.ao_radius, True, True))
            self.phase_corrections.rescope(self._scope)
        self._spent = time.perf_counter() - started_frame
        decision = self.loop.choose()
        k = decision.knobs
        self._settings = RenderSettings(float(k["ao_rays"]), self.ao_radius,
                                        bool(k["shadows"]), bool(k["phong"]))
        settings = self._settings
        prices = self._prices(settings)
        if next_camera is not None and self.overlap_probe and self._priced:
            started = time.perf_counter()
            future = self.probe.measure_async(next_camera, self.width, self.height)
            self._pending_probe = ((next_camera, self._probe_key()), future, 0.0)
        rendering = time.perf_counter()
        frame: Frame = self.tracer.render(camera, self.width, self.height, settings,
                                          seed=self.frame_index)
        rendered = time.perf_counter()
        if self._pending_probe is not None:  # the probe's time not hidden behind the frame
            key, future, _ = self._pending_probe
            future.result()
            hidden = max(0.0, self.probe.last_seconds - (time.perf_counter() - started))
            self._pending_probe = (key, future, hidden)
        wall = time.perf_counter() - started_frame
        self.overhead.update(wall - self._spent - frame.seconds)  # a per-size constant
        predicted_phases, predicted, corrected, teaches = prices
        if teaches and self.feedback == "phase":
            self._learn_phases(predicted_phases, frame.phase_seconds)
        if teaches:
            self._check_fit(sum(predicted_phases.values()), frame.seconds)
        self.loop.observe(wall, corrected, teaches)
        self.schedule.observed(corrected, wall)
        self.frame_index += 1
        tuner = wall - (rendered - rendering)
        return TunedFrame(frame.image, settings, wall, predicted, corrected, frame.phase_seconds,
                          probe_seconds, self._workload, decision.over_budget, predicted_phases,
                          frame.seconds, tuner)

    def _check_fit(self, predicted: float, measured: float) -> None:
        """Warn once where the first frames' kernels took far from what the calibration in use
        priced them at (:class:`~autotune.feedback.ModelFitCheck`)."""
        ratio = self.fit_check.observe(predicted, measured)
        if ratio is not None:
            warnings.warn(
                f"the calibration in use priced the kernels on {self.tracer.device_info.name} at "
                f"{1 / ratio:.2f}x what they took over the first {self.fit_check.frames} "
                f"frames: the feedback corrects it within a few frames, but each new scene's "
                f"first frame starts from it (`autotune calibrate` fits one on this machine)",
                AutotuneWarning, stacklevel=3)

    def _learn_phases(self, predicted: dict[str, float], measured: dict[str, float]) -> None:
        """The slow per-phase corrections learn what the drift since the last probe left
        (both as this frame was priced); the drift learns on frames priced on an older probe."""
        drift, slow = self.drift.factors(PHASES), self.phase_corrections.factors()
        drifted = {p: t * drift[p] for p, t in predicted.items()}
        self.phase_corrections.update(drifted, measured, self._scope)
        if not self._fresh:
            self.drift.update({p: t * slow[p] for p, t in drifted.items()}, measured)

    def _prices(self, settings: RenderSettings) -> tuple[dict[str, float], float, float, bool]:
        """The chosen setting's predicted phases, frame, corrected frame, and whether the
        frame can teach the model (NaN and nothing where the controller priced no frame)."""
        if self._workload is None:
            return {}, float("nan"), float("nan"), False
        predicted_phases = self.model.phase_seconds(self._workload, settings)
        kernels = float(sum(predicted_phases.values()))
        factors = self._phase_factors() or {}
        phase_corrected = sum(factors.get(p, 1.0) * t for p, t in predicted_phases.items())
        known = self._known()
        predicted = kernels + known
        # a frame whose modelled kernels are a small part of it (an empty sky: probe and
        # overhead dominate) says little about the model's bias (autotune.frame_loop's rules)
        teaches = kernels >= MIN_KERNEL_SHARE * predicted
        return predicted_phases, predicted, self.loop.expected(phase_corrected, known), teaches

