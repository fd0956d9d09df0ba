"""The tuned ray tracer: the model drives the knobs, targets are honoured, profiles are found."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import warnings

import numpy as np
import pytest

import governed.mesh.calibration_fit as calibrate_mod
import governed.mesh.calibration_frames as frames_mod
import governed.mesh.tuned_renderer as tuned_mod
from autotune import AutotuneWarning, ModelFitCheck
from autotune.feedback import REGIME_FACTOR
from autotune_app.animation import REFERENCE_SETTINGS, frame_times, orbit_camera_path
from common.cpu_info import this_machine
from governed.mesh.calibration_fit import fit_profile, model_errors
from governed.mesh.calibration_frames import Sample, calibration_views, collect_samples
from governed.mesh.instruction_counts import load_kernel_counts
from governed.mesh.probe import Probe
from governed.mesh.profile_store import find_device_profile, profile_path, save_profile
from governed.mesh.tuned_renderer import RayTraceModel, TunedRenderer, ao_levels
from governed.probe_policy import PROBE_POLICIES
from models.app_calibration import AppCalibration
from models.device_profile import builtin_profiles, machine_profiles
from models.raytrace_cost import PHASES, predict_frame_seconds_batch, predict_phase_seconds
from models.workload import Workload
from raytracer.mesh.tracer import RenderSettings

W, H = 96, 54


@pytest.fixture(autouse=True)
def private_profile_store(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_PROFILE_DIR", str(tmp_path / "profiles"))


@pytest.fixture(scope="module")
def fitted(tracers):
    """A profile and ray-tracer calibration fitted on a few small frames of this device."""
    tracer = tracers("dragon-small")
    probe = Probe(tracer.scene, tracer.bvh)
    samples = collect_samples(tracer, probe, calibration_views(tracer.scene, 2), W, H)
    return fit_profile(builtin_profiles()["gf580"], load_kernel_counts(), samples)


def test_fit_reproduces_a_known_affine_device(tracers):
    tracer = tracers("dragon-small")
    probe = Probe(tracer.scene, tracer.bvh)
    base = builtin_profiles()["gf580"]
    counts = load_kernel_counts()
    samples = []
    for cam in calibration_views(tracer.scene, 3):
        w = probe.measure(cam, W, H)
        for s in (RenderSettings(0, 0.1, True, True), RenderSettings(8, 0.1, True, False),
                  RenderSettings(32, 0.1, True, True)):
            model = predict_phase_seconds(base, counts, w, s.ao_rays, s.shadows, s.phong)
            ran = {"primary", "shade"} | ({"shadow"} if s.shadows else set()) | (
                {"ao"} if s.ao_rays else set())  # the phases the tracer launches (and times)
            samples.append(Sample(w, s, {p: 3.0 * v + 0.002 for p, v in model.items()
                                         if p in ran}))
    result = fit_profile(base, counts, samples)
    # the scale trades off against the device latencies: what must hold is the fit itself
    assert model_errors(result, counts, samples).max() < 0.01
    assert all(result.calibration.offset[p] >= 0 for p in ("primary", "shadow", "ao", "shade"))
    assert result.calibration.fit["mean_error"] < 0.01 and result.calibration.matches(
        result.profile)
    assert "fitted" not in result.profile.to_dict()  # the device profile stays hardware only


def test_tuner_picks_more_quality_for_a_longer_target(tracers, fitted):
    tracer = tracers("dragon-small")
    cheap = TunedRenderer(tracer.scene, W, H, 1e-6, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer)
    with pytest.warns(RuntimeWarning, match="no setting fits"):
        f = cheap.render(tracer.scene.camera)
    # the cheapest setting by the model: no AO, no shadows; Phong whichever the fitted model
    # prices lower (a model fitted on a few noisy frames may price the two shade kernels
    # either way round)
    assert f.over_budget and f.settings.ao_rays == 0 and not f.settings.shadows
    flat, phong = (sum(cheap.model.phase_seconds(f.workload, RenderSettings(0, 0.1, False, p))
                       .values()) for p in (False, True))
    assert f.settings.phong == (phong < flat)
    rich = TunedRenderer(tracer.scene, W, H, 10.0, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer)
    f = rich.render(tracer.scene.camera)
    assert f.settings == RenderSettings(64, 0.1, True, True) and not f.over_budget
    assert f.measured > 0 and f.predicted > 0 and f.image.shape == (H, W, 4)
    assert set(f.phase_seconds) == set(f.predicted_phases) - {p for p, v in
                                                               f.predicted_phases.items() if not v}


def test_forced_shadows_and_fixed_knobs(tracers, fitted):
    tracer = tracers("dragon-small")
    r = TunedRenderer(tracer.scene, W, H, 10.0, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer)
    r.force_shadows = False
    assert r.render(tracer.scene.camera).settings.shadows is False
    r.tuning = False
    first = r.render(tracer.scene.camera).settings
    r.target_seconds = 1e-5
    assert r.render(tracer.scene.camera).settings == first


@pytest.mark.parametrize("controller", ["feedforward", "fixed", "pi"])
def test_every_controller_renders(tracers, fitted, controller):
    tracer = tracers("dragon-small")
    r = TunedRenderer(tracer.scene, W, H, 1.0, controller=controller, profile=fitted.profile,
                      calibration=fitted.calibration,
                      tracer=tracer)
    frames = [r.render(tracer.scene.camera) for _ in range(4)]  # 1 s: room for many AO rays
    assert r.controller == controller
    chosen = [f.settings for f in frames]
    if controller == "fixed":  # tuned on the first frame, then held
        assert all(c == chosen[0] for c in chosen)
    if controller == "feedforward":  # each choice is predicted to fit (or flagged)
        assert all(f.corrected <= 1.0001 and not f.over_budget for f in frames)
        assert max(c.ao_rays for c in chosen) > 0
    r.target_seconds = 1e-5  # far below anything: every controller must go cheaper
    # the model-based one says that nothing fits
    with (pytest.warns(AutotuneWarning, match="no setting fits") if controller == "feedforward"
          else contextlib.nullcontext()):
        for _ in range(3 if controller == "pi" else 1):
            cheap = r.render(tracer.scene.camera).settings
    if controller != "fixed":
        assert cheap.ao_rays < max(c.ao_rays for c in chosen) or cheap.ao_rays == 0
    r.use_controller("pi")
    assert r.controller == "pi" and r.render(tracer.scene.camera).settings.ao_rays <= 64


def test_missing_profile_runs_quick_calibration(tracers, fitted, monkeypatch):
    tracer = tracers("dragon-small")
    monkeypatch.setattr(tuned_mod, "calibrate", lambda *a, **k: fitted)
    monkeypatch.setattr(tuned_mod, "find_device_profile", lambda name, driver: None)
    with pytest.warns(UserWarning, match="no calibrated profile.*quick calibration"):
        model = tuned_mod.device_model(tracer)
    assert model.profile == fitted.model_profile and model.calibration is fitted.calibration


def _device_profile(tracer):
    info = tracer.device_info
    return dataclasses.replace(builtin_profiles()["gf580"], name=info.name, driver=info.driver)


def test_profile_store_round_trip(tracers):
    tracer = tracers("dragon-small")
    profile = _device_profile(tracer)
    path = profile_path(profile.name, profile.driver)
    path.parent.mkdir(parents=True)
    save_profile(profile, path)
    assert find_device_profile(profile.name, profile.driver) == profile


def test_corrupt_profile_warns_and_falls_back(tracers):
    info = tracers("dragon-small").device_info
    path = profile_path(info.name, info.driver)
    path.parent.mkdir(parents=True)
    path.write_text('{"schema_version": 1, "name": ')
    with pytest.warns(UserWarning, match="ignoring device profile.*not valid JSON"):
        found = find_device_profile(info.name, info.driver)
    assert found == _shipped_profile(info)  # the shipped one for this device, else None


def test_profile_for_another_device_warns(tracers):
    tracer = tracers("dragon-small")
    info = tracer.device_info
    path = profile_path(info.name, info.driver)
    path.parent.mkdir(parents=True)
    other = dataclasses.replace(_device_profile(tracer), name="Some Other GPU")
    path.write_text(json.dumps(other.to_dict()))
    with pytest.warns(UserWarning, match="profile is for 'Some Other GPU'"):
        found = find_device_profile(info.name, info.driver)
    assert found == _shipped_profile(info) and found != other


def _shipped_profile(info):
    """The profile of this device shipped for this machine, found independently of the store
    (None if none)."""
    same = [p for p in machine_profiles(this_machine())
            if (p.name, p.driver) == (info.name, info.driver)]
    assert len(same) <= 1
    return same[0] if same else None


def test_a_probe_keeps_the_renderers_ao_radius(tracers, fitted):
    """The AO workload depends on the radius: the probe must trace the renderer's."""
    tracer = tracers("dragon-small")
    r = TunedRenderer(tracer.scene, W, H, 10.0, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer, ao_radius=0.3)
    assert r.probe.ao_radius == 0.3 and r.probe.simd_width == tracer.device_info.simd_width
    r.ao_radius = 0.05
    assert r.probe.ao_radius == 0.05
    f = r.render(tracer.scene.camera)
    assert f.settings.ao_radius == 0.05
    assert f.workload == r.probe.measure(tracer.scene.camera, W, H)
    short = Probe(tracer.scene, tracer.bvh, ao_radius=0.3).measure(tracer.scene.camera, W, H)
    assert f.workload.a_t < short.a_t  # a shorter radius: fewer AO steps
    with pytest.raises(Exception, match="ao_radius"):
        r.ao_radius = 0.0


def test_overlapped_probe_gives_the_same_workload(tracers, fitted):
    tracer = tracers("dragon-small")
    cams = calibration_views(tracer.scene, 3)
    r = TunedRenderer(tracer.scene, W, H, 0.05, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer)
    r.overlap_probe = True
    first = r.render(cams[0], next_camera=cams[1])
    second = r.render(cams[1], next_camera=cams[2])
    assert second.workload == r.probe.measure(cams[1], W, H)
    assert first.probe_seconds > 0 and second.probe_seconds >= 0
    third = r.render(cams[0])  # not the prefetched view: probed again, nothing left running
    assert third.workload == r.probe.measure(cams[0], W, H)


def test_the_first_frames_candidates_are_priced_within_the_probes_time(tracers, fitted,
                                                                       monkeypatch):
    """The frame's price includes the probe's measured time, not the choice's: a renderer's
    first frame prices its candidates with the probe, so that the choice finds them priced."""
    tracer = tracers("dragon-small")
    r = TunedRenderer(tracer.scene, W, H, 0.05, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer)
    priced, choosing = [], []
    price = tuned_mod.candidate_phase_seconds
    monkeypatch.setattr(tuned_mod, "candidate_phase_seconds",
                        lambda *a, **k: priced.append(bool(choosing)) or price(*a, **k))
    choose = r.loop.choose

    def watched_choose():
        choosing.append(1)
        try:
            return choose()
        finally:
            choosing.clear()

    monkeypatch.setattr(r.loop, "choose", watched_choose)
    r.render(tracer.scene.camera)
    assert priced == [False]  # once, with the probe: the choice found them priced


def counted_probes(tracer, fitted, monkeypatch) -> tuple[TunedRenderer, list]:
    """A tuned renderer of ``tracer`` and the list its probe appends each view it probes to."""
    r = TunedRenderer(tracer.scene, W, H, 0.05, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer)
    probed: list = []
    measure = r.probe.measure
    monkeypatch.setattr(r.probe, "measure", lambda *a: probed.append(a) or measure(*a))
    return r, probed


def test_an_unchanged_view_is_not_probed_again(tracers, fitted, monkeypatch):
    """A still camera reuses the last frame's workload (the probe is deterministic); a change
    of view, size, AO radius or light probes again."""
    tracer = tracers("dragon-small")
    r, probed = counted_probes(tracer, fitted, monkeypatch)
    cams = calibration_views(tracer.scene, 2)
    first = r.render(cams[0])
    still = r.render(cams[0])
    assert len(probed) == 1 and still.probe_seconds == 0.0 and still.workload == first.workload
    r.render(cams[1])
    r.ao_radius = 0.2
    r.render(cams[1])
    r.resize(W // 2, H // 2)
    r.render(cams[1])
    monkeypatch.setattr(tracer.scene, "light", tracer.scene.light + 1.0)
    r.render(cams[1])
    assert len(probed) == 5


def test_frames_at_fixed_knobs_pay_no_probe(tracers, fitted, monkeypatch):
    """A target or a fixed setting measured on one view is the frame a user without the tuner
    waits for: tuning off prices nothing, so nothing is probed."""
    tracer = tracers("dragon-small")
    r, probed = counted_probes(tracer, fitted, monkeypatch)
    times = frame_times(r, tracer.scene.camera, REFERENCE_SETTINGS, 3)
    assert len(times) == 3 and probed == [] and not r.tuning


@pytest.mark.parametrize("controller", ["pi", "governor"])
def test_a_model_free_baseline_pays_for_no_probe(tracers, fitted, monkeypatch, controller):
    tracer = tracers("dragon-small")
    r, probed = counted_probes(tracer, fitted, monkeypatch)
    r.use_controller(controller)
    frames = [r.render(c) for c in orbit_camera_path(tracer.scene, 4)]
    assert probed == [] and all(f.workload is None and np.isnan(f.predicted) for f in frames)
    assert all(0 < f.tuner_seconds < f.measured for f in frames)
    r.use_controller("feedforward")  # pricing again: the next frame is probed
    assert r.render(tracer.scene.camera).workload is not None and len(probed) == 1


def test_probe_policies_on_an_orbit(tracers, fitted, monkeypatch):
    """always: every frame; never: the first; on-change: fewer than every frame on a slow
    orbit, and again at once after a cut."""
    tracer = tracers("dragon-small")
    orbit = orbit_camera_path(tracer.scene, 24)  # half a turn: 7.5 degrees a frame
    counts = {}
    for policy in PROBE_POLICIES:
        r, probed = counted_probes(tracer, fitted, monkeypatch)
        r.probe_policy = policy
        for camera in orbit:
            r.render(camera)
        counts[policy] = len(probed)
        if policy == "on-change":
            r.render(orbit[0])  # a cut: back to the start, half a turn away
            assert len(probed) == counts[policy] + 1
    assert counts["always"] == len(orbit) and counts["never"] == 1
    assert 1 < counts["on-change"] < len(orbit)


def test_interrupted_calibration_leaves_no_profile(tracers, monkeypatch):
    info = tracers("dragon-small").device_info

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(calibrate_mod, "base_profile",
                        lambda device, quick: _device_profile(tracers("dragon-small")))
    monkeypatch.setattr(frames_mod, "collect_samples", interrupted)
    with pytest.raises(KeyboardInterrupt):
        calibrate_mod.calibrate(info, quick=True, progress=False)
    assert not profile_path(info.name, info.driver).exists()
    assert not list(profile_path(info.name, info.driver).parent.glob("*"))


def test_controlled_time_is_the_frame_the_user_waits_for(tracers, fitted):
    """Probe + kernels + read-back, not kernel time alone; the prediction covers the same span."""
    tracer = tracers("dragon-small")
    r = TunedRenderer(tracer.scene, W, H, 10.0, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer)
    r.overlap_probe = False
    frames = [r.render(tracer.scene.camera) for _ in range(3)]
    for f in frames:
        assert f.measured >= f.kernel_seconds + f.probe_seconds
        assert f.kernel_seconds == pytest.approx(sum(f.phase_seconds.values()))
        assert f.predicted > sum(f.predicted_phases.values()) + 0.9 * f.probe_seconds
    assert r.overhead.seconds > 0.0
    assert r.tuner.history[-1].measured == frames[-1].measured


class _PlantClock:
    """The tuned renderer's clock (``time.perf_counter``) where only a plant's frames take
    time, the seconds their phases report: frames whose wall time holds no host noise."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def plant_clock(monkeypatch) -> _PlantClock:
    clock = _PlantClock()
    monkeypatch.setattr(tuned_mod, "time", clock)
    return clock


class _PhasesTimedByModel:
    """A tracer whose frames report, as each phase's measured seconds, what ``renderer``'s
    model predicts for the view's workload (its probe, deterministic) times ``truth``: a plant
    without timing noise in its phases, and with ``clock`` none in the frame's wall time."""

    def __init__(self, renderer, truth: dict[str, float],
                 clock: _PlantClock | None = None) -> None:
        self._tracer, self._renderer, self._truth = renderer.tracer, renderer, truth
        self._clock = clock

    def __getattr__(self, name: str):
        return getattr(self._tracer, name)

    def render(self, camera, width, height, settings, seed=0):
        frame = self._tracer.render(camera, width, height, settings, seed=seed)
        workload = self._renderer.probe.measure(camera, width, height)
        predicted = self._renderer.model.phase_seconds(workload, settings)
        frame.phase_seconds = {p: predicted[p] * self._truth.get(p, 1.0)
                               for p in frame.phase_seconds}
        if self._clock is not None:
            self._clock.now += frame.seconds
        return frame


def test_per_phase_feedback_learns_the_mispriced_phase(tracers, fitted):
    """The shadow phase costs twice what the model says (the other phases exactly what it
    says): per-phase feedback learns a factor of 2 for shadows and 1 for the rest, so the AO
    rays are priced right; the frame's single correction would spread the error over all."""
    tracer = tracers("dragon-small")
    r = TunedRenderer(tracer.scene, W, H, 1.0, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer)
    r.tracer = _PhasesTimedByModel(r, {"shadow": 2.0})
    r.force_shadows = True
    for _ in range(6):
        r.render(tracer.scene.camera)
    f = r.phase_corrections.factors()
    assert f["shadow"] == pytest.approx(2.0, rel=1e-6), f
    for phase in ("primary", "ao", "shade"):
        assert f[phase] == pytest.approx(1.0, rel=1e-6), f
    frame_only = TunedRenderer(tracer.scene, W, H, 1.0, profile=fitted.profile,
                               calibration=fitted.calibration, tracer=tracer, feedback="frame")
    frame_only.render(tracer.scene.camera)
    assert frame_only.phase_corrections.factors() == dict.fromkeys(f, 1.0)  # not used
    with pytest.raises(ValueError, match="feedback must be one of phase, frame"):
        TunedRenderer(tracer.scene, W, H, 1.0, profile=fitted.profile, tracer=tracer,
                      feedback="kernels")


@pytest.mark.parametrize("truth", [1.7, 1.0, 0.6])  # 1/1.6 = 0.625 rounds either way
def test_a_calibration_that_does_not_fit_this_machine_is_reported_once(tracers, fitted, truth):
    """Every phase takes ``truth`` times what the calibration in use prices: beyond the fit
    check's factor either way, the frame that completes the check warns once, naming the
    device, the factor and the command that fits a calibration here; within it, nothing."""
    tracer = tracers("dragon-small")
    r = TunedRenderer(tracer.scene, W, H, 1.0, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer)
    r.tracer = _PhasesTimedByModel(r, dict.fromkeys(PHASES, truth))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(2 * r.fit_check.frames):
            r.render(tracer.scene.camera)
            if i == r.fit_check.frames - 2:
                assert r.fit_check.ratio is None  # not decided before its last frame
    fit = [w for w in caught if "calibration in use" in str(w.message)]
    assert r.fit_check.ratio == pytest.approx(truth, rel=1e-9)
    if truth == 1.0:
        assert fit == []
    else:
        assert len(fit) == 1 and issubclass(fit[0].category, AutotuneWarning)
        message = str(fit[0].message)
        assert f"{1 / truth:.2f}x" in message and "autotune calibrate" in message
        assert tracer.device_info.name in message


def test_the_fit_check_takes_frames_that_ran_and_refuses_bad_settings():
    check = ModelFitCheck(frames=2, factor=1.25)
    assert check.observe(0.0, 1.0) is None and check.observe(1.0, -1.0) is None  # skipped
    assert check.observe(1.0, 1.2) is None and check.ratio is None
    assert check.observe(1.0, 1.5) == pytest.approx(math.sqrt(1.8))
    assert check.observe(1.0, 9.0) is None  # checked once
    for bad in ({"frames": 0}, {"factor": 1.0}):
        with pytest.raises(ValueError, match="fit check"):
            ModelFitCheck(**bad)


def test_a_knob_change_keeps_the_phase_corrections(tracers, fitted, plant_clock):
    """The AO phase costs twice what the model says. A tighter target cuts the AO rays, and
    the AO phase's price with them, by more than REGIME_FACTOR: that is the same workload,
    so its correction of 2 stays (a restarted one would raise the rays back over budget, as
    it did after a 2x cost step). The frames' wall time is the plant's alone: the host's
    jitter in it moved the controller's bias, and the rays with it (2 runs of 10 alone, 3 of
    8 beside a busy loop)."""
    tracer = tracers("dragon-small")
    r = TunedRenderer(tracer.scene, W, H, 1.0, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer)
    r.tracer = _PhasesTimedByModel(r, {"ao": 2.0}, plant_clock)
    for _ in range(6):
        before = r.render(tracer.scene.camera)
    assert r.phase_corrections.factors()["ao"] == pytest.approx(2.0, rel=1e-6)
    # about 2 rays: 8 would not cut the price by REGIME_FACTOR, the AO filter's cost being
    # the same at every ray count
    two = r.model.phase_seconds(before.workload, RenderSettings(2, 0.1, True, True))["ao"]
    r.target_seconds = before.corrected - 2.0 * (before.predicted_phases["ao"] - two)
    after = [r.render(tracer.scene.camera) for _ in range(3)]
    assert (before.predicted_phases["ao"]
            > REGIME_FACTOR * after[0].predicted_phases["ao"] > 0), (before.settings, after)
    # priced at 2x still (the frame's own correction follows the wall time: a step or two)
    assert all(a.settings.ao_rays <= 1.25 * after[0].settings.ao_rays for a in after[1:])
    assert r.phase_corrections.factors()["ao"] == pytest.approx(2.0, rel=1e-6)


def test_the_ray_tracers_ao_knob_is_finer_below_four_rays() -> None:
    rays = ao_levels(64)
    steps = np.diff(rays)
    assert rays[0] == 0.0 and rays[-1] == 64.0
    assert np.allclose(steps[rays[:-1] < 4.0], 1 / 16)
    assert np.allclose(steps[rays[:-1] >= 4.0], 0.25)
    assert ao_levels(2)[-1] == 2.0 and np.allclose(np.diff(ao_levels(2)), 1 / 16)


def test_the_model_predicts_with_the_occupancy_its_calibration_was_fitted_with():
    """RayTraceModel passes the calibration's per-phase occupancy to both predictions; a
    calibration without one predicts as before."""
    profile = dataclasses.replace(builtin_profiles()["gf580"], max_blocks_per_core=32)
    plain = AppCalibration("raytracer", profile.name, profile.driver,
                           scale=dict.fromkeys(PHASES, 1.5), offset=dict.fromkeys(PHASES, 0.0))
    occupancy = {"primary": 8, "shadow": 9, "ao": 8, "shade": 32}
    measured = dataclasses.replace(plain, occupancy=occupancy)
    counts = load_kernel_counts()
    w = Workload(pixels=1280 * 720, hit_fraction=0.7, p_t=30, p_i=8, s_t=20, s_i=5, a_t=12,
                 a_i=3, t_v=20, m=0.6)
    settings = RenderSettings(4, 0.1, True, True)
    model = RayTraceModel(profile, counts, measured)
    want = predict_phase_seconds(profile, counts, w, 4, True, True, 64, measured, occupancy)
    assert model.phase_seconds(w, settings) == want
    assert want != predict_phase_seconds(profile, counts, w, 4, True, True, 64, measured)
    ao = np.array([0.0, 2.0, 4.0])
    assert np.array_equal(model.frame_seconds(w, ao, True, True),
                          predict_frame_seconds_batch(profile, counts, w, ao, True, True, 64,
                                                      measured, None, occupancy))
    bare = RayTraceModel(profile, counts, plain)
    assert bare.active_blocks is None
    assert bare.phase_seconds(w, settings) == predict_phase_seconds(
        profile, counts, w, 4, True, True, 64, plain)


def test_phases_drift_between_probes_and_restart_at_a_probe(tracers, fitted):
    """On a plant that costs what the model says for each view's own workload, frames priced
    on an older probe's workload learn how far the AO phase moved since; a probe restarts the
    drift."""
    tracer = tracers("dragon-small")
    r = TunedRenderer(tracer.scene, W, H, 1.0, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer, probe_policy="never")
    r.tracer = _PhasesTimedByModel(r, {})
    orbit = orbit_camera_path(tracer.scene, 60)
    for _ in range(4):  # one probe; the slow corrections learn the plant (the model itself)
        r.render(orbit[0])
    for camera in orbit[1:8]:
        frame = r.render(camera)
    moved = (r.model.phase_seconds(r.probe.measure(orbit[7], W, H), frame.settings)["ao"]
             / frame.predicted_phases["ao"])  # the last view's AO against the stale price
    drift = r.drift.factors(PHASES)["ao"]
    assert abs(math.log(moved)) > 0.05, moved  # the orbit moved the workload
    assert abs(math.log(drift / moved)) < 0.5 * abs(math.log(moved)), (drift, moved)
    r.probe_policy = "always"
    r.render(orbit[8])
    assert r.drift.factors(PHASES) == dict.fromkeys(PHASES, 1.0)


def test_a_fresh_renderer_prices_its_first_frame_with_the_host_overhead(tracers, fitted):
    """The warm-up frame at construction measures the launches and read-back every frame
    pays, so the first frame's price holds them (it held none: the first frame is not learnt)."""
    tracer = tracers("dragon-small")
    r = TunedRenderer(tracer.scene, W, H, 0.05, profile=fitted.profile,
                      calibration=fitted.calibration, tracer=tracer)
    overhead = r.overhead.seconds
    assert overhead > 0
    first = r.render(tracer.scene.camera)
    known = first.predicted - sum(first.predicted_phases.values())
    assert known >= first.probe_seconds + overhead
