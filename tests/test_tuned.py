"""The tuned ray tracer: the model drives the knobs, targets are honoured, profiles are found."""

from __future__ import annotations

import dataclasses
import json

import pytest

import raytracer.tuning.tuned_renderer as tuned_mod
from autotune import CONTROLLERS
from models.device_profile import builtin_profiles
from models.raytrace_cost import predict_phase_seconds
from raytracer.tracer import RenderSettings
from raytracer.tuning.calibration_fit import (
    Sample,
    calibration_views,
    collect_samples,
    fit_profile,
    model_errors,
)
from raytracer.tuning.instruction_counts import load_kernel_counts
from raytracer.tuning.probe import Probe
from raytracer.tuning.profile_store import find_device_profile, profile_path, save_profile
from raytracer.tuning.tuned_renderer import TunedRenderer

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
    assert f.over_budget and f.settings == RenderSettings(0, 0.1, False, False)
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
    assert r.controller == CONTROLLERS[controller].__name__
    chosen = [f.settings for f in frames]
    if controller == "fixed":  # tuned on the first frame, then held
        assert all(c == chosen[0] for c in chosen)
    if controller == "feedforward":  # each choice is predicted to fit (or flagged)
        assert all(f.corrected <= 1.0001 and not f.over_budget for f in frames)
        assert max(c.ao_rays for c in chosen) > 0
    r.target_seconds = 1e-5  # far below anything: every controller must go cheaper
    for _ in range(3 if controller == "pi" else 1):
        cheap = r.render(tracer.scene.camera).settings
    if controller != "fixed":
        assert cheap.ao_rays < max(c.ao_rays for c in chosen) or cheap.ao_rays == 0
    r.set_controller("pi")
    assert r.controller == "PIController" and r.render(tracer.scene.camera).settings.ao_rays <= 64


def test_missing_profile_runs_quick_calibration(tracers, fitted, monkeypatch):
    tracer = tracers("dragon-small")
    import raytracer.tuning.calibration_fit as calibrate_mod

    monkeypatch.setattr(calibrate_mod, "calibrate", lambda *a, **k: fitted)
    monkeypatch.setattr(tuned_mod, "find_device_profile", lambda name, driver: None)
    with pytest.warns(UserWarning, match="no calibrated profile.*quick calibration"):
        model = tuned_mod.device_model(tracer)
    assert model.profile is fitted.profile and model.calibration is fitted.calibration


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
    """The shipped profile of this device, found independently of the store (None if none)."""
    same = [p for p in builtin_profiles().values() if (p.name, p.driver) == (info.name,
                                                                             info.driver)]
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


def test_interrupted_calibration_leaves_no_profile(tracers, monkeypatch):
    import raytracer.tuning.calibration_fit as calibrate_mod

    info = tracers("dragon-small").device_info

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(calibrate_mod, "base_profile",
                        lambda device, quick: _device_profile(tracers("dragon-small")))
    monkeypatch.setattr(calibrate_mod, "collect_samples", interrupted)
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
    assert r.overhead_seconds > 0.0
    assert r.tuner.history[-1].measured == frames[-1].measured


def test_per_phase_feedback_learns_the_mispriced_phase(tracers, fitted):
    """A calibration that prices the shadow phase at half its cost: per-phase feedback gives
    that phase twice the factor the true calibration gets on the same frames (the two run
    interleaved, so they share the machine's load); the other phases' factors agree."""
    tracer = tracers("dragon-small")
    cal = fitted.calibration
    halved = dataclasses.replace(
        cal, scale={**cal.scale, "shadow": cal.scale["shadow"] / 2},
        offset={**cal.offset, "shadow": cal.offset["shadow"] / 2},
        miss={**cal.miss, "shadow": cal.miss.get("shadow", 0.0) / 2},
        launch={**cal.launch, "shadow": cal.launch.get("shadow", 0.0) / 2})
    pair = [TunedRenderer(tracer.scene, W, H, 1.0, profile=fitted.profile, calibration=c,
                          tracer=tracer) for c in (cal, halved)]
    for r in pair:
        r.force_shadows = True  # and 1 s: both choose the best look
    for _ in range(2):  # first launches at this size and setting: paid before, not learnt
        tracer.render(tracer.scene.camera, W, H, RenderSettings(64, 0.1, True, True))
    for _ in range(10):
        for r in pair:
            r.render(tracer.scene.camera)
    true, wrong = (r.phase_corrections.factors() for r in pair)
    assert 1.6 < wrong["shadow"] / true["shadow"] < 2.5, (true, wrong)
    assert 0.8 < wrong["ao"] / true["ao"] < 1.25, (true, wrong)
    assert pair[0].settings == pair[1].settings
    frame_only = TunedRenderer(tracer.scene, W, H, 1.0, profile=fitted.profile,
                               calibration=halved, tracer=tracer, feedback="frame")
    frame_only.render(tracer.scene.camera)
    assert frame_only.phase_corrections.factors() == dict.fromkeys(true, 1.0)  # not used
    with pytest.raises(ValueError, match="feedback must be one of phase, frame"):
        TunedRenderer(tracer.scene, W, H, 1.0, profile=fitted.profile, tracer=tracer,
                      feedback="kernels")
