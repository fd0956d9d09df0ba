"""The ray tracer's calibration lives apart from the device profile, and bad ones never tune.

Issue 8: the per-phase scale/offset moved out of DeviceProfile into an AppCalibration keyed by
device and renderer; old profile files that hold them still load. Issue 10: a calibration that
would wreck tuning (all-zero, negative, huge, empty, missing a phase) is refused with the file
and the key named, and the shipped one is used instead; an unwritable store is found before the
work and the result kept in memory; ``calibrate -o MISSING/x.json`` fails before calibrating.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import warnings
from pathlib import Path

import pytest
from recorded_devices import RECORDED

import governed.mesh.calibration_fit as calibrate_mod
import governed.mesh.calibration_frames as frames_mod
import governed.mesh.profile_store as store_mod
import models.app_calibration as app_calibration_mod
import models.device_profile as device_profile_mod
from autotune_app.cli import main
from common.atomic_files import OutputError
from governed.mesh.profile_store import (
    calibration_path,
    find_app_calibration,
    find_device_profile,
    profile_path,
    save_calibration,
    store,
)
from models.app_calibration import (
    AppCalibration,
    CalibrationError,
    builtin_calibrations,
    load_calibration,
    load_profile_and_calibration,
)
from models.device_profile import load_profile
from models.raytrace_cost import PHASES, predict_frame_seconds, predict_phase_seconds
from models.workload import Workload
from raytracer.device.choice import DeviceInfo
from raytracer.mesh.tracer import RenderSettings

SHIPPED = load_profile(RECORDED / "pocl-pthread-amd-epyc.json")
SHIPPED_CAL = load_calibration(RECORDED / "pocl-pthread-amd-epyc--raytracer.json")


@pytest.fixture(autouse=True)
def private_store(tmp_path, monkeypatch):
    """A private user store, and the recorded devices shipped as this machine's."""
    monkeypatch.setenv("AUTOTUNE_PROFILE_DIR", str(tmp_path / "profiles"))
    monkeypatch.setattr(store_mod, "_memory_profiles", {})
    monkeypatch.setattr(store_mod, "_memory_calibrations", {})
    for module in (device_profile_mod, app_calibration_mod):
        monkeypatch.setattr(module, "MACHINES_DIR", RECORDED.parent)
    monkeypatch.setattr(store_mod, "this_machine", lambda: RECORDED.name)


def _legacy(fitted: dict) -> dict:
    """The shipped PoCL profile as files were written before the split."""
    return {**SHIPPED.to_dict(), "fitted": fitted}


def _legacy_fitted(scale: float = 2.0, offset: float = 1e-9) -> dict:
    fitted = {}
    for p in PHASES:
        fitted |= {f"scale_{p}": scale, f"offset_{p}": offset}
    return fitted | {"fit_mean_error": 0.1, "fit_frames": 40.0}


def _write_user_profile(data: dict) -> Path:
    path = profile_path(SHIPPED.name, SHIPPED.driver)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _lookup() -> tuple[object, AppCalibration | None, list[str]]:
    """find the profile and calibration as TunedRenderer does; return them and the warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profile = find_device_profile(SHIPPED.name, SHIPPED.driver)
        calibration = find_app_calibration(profile, "raytracer", PHASES)
    return profile, calibration, [str(w.message) for w in caught]


# ---- the record itself ------------------------------------------------------------------------

def _cal_dict(**changes) -> dict:
    d = SHIPPED_CAL.to_dict()
    d.update(changes)
    return d


@pytest.mark.parametrize(("changes", "key"), [
    ({"scale": dict.fromkeys(PHASES, 0.0)}, "scale.primary"),  # all zero: 64 AO rays every frame
    ({"scale": dict.fromkeys(PHASES, 1.0) | {"ao": -2.0}}, "scale.ao"),  # negative times
    ({"scale": dict.fromkeys(PHASES, 1.0) | {"shade": 1e300}}, "scale.shade"),
    ({"scale": dict.fromkeys(PHASES, 1.0) | {"shadow": float("nan")}}, "scale.shadow"),
    ({"offset": dict.fromkeys(PHASES, 0.0) | {"ao": -1e-9}}, "offset.ao"),
    ({"offset": dict.fromkeys(PHASES, 0.0) | {"ao": 1.0}}, "offset.ao"),  # 1 s a pixel
    ({"scale": {}, "offset": {}}, "'scale' is empty"),
    ({"offset": {"primary": 0.0}}, "same components"),
    ({"fit": {"mean_error": -1}}, "fit.mean_error"),
    ({"renderer": ""}, "'renderer'"),
    ({"schema_version": 7}, "schema_version"),
    ({"extra": 1}, "'extra'"),
    ({"miss": {"ao": -1e-9}}, "miss.ao"),  # a missed pixel cannot save time
    ({"launch": {"ao": 5.0}}, "launch.ao"),  # 5 s a launch
    ({"launch": {"sky": 1e-4}}, "component(s) sky"),  # a component the fit does not have
    ({"uncertainty": {"scale.ao": float("nan")}}, "uncertainty.scale.ao"),
    ({"held": [3]}, "'held'"),
    ({"device_figures": {"warp_speed": 9.0}}, "device_figures.warp_speed"),  # not a parameter
    ({"device_figures": {"issue_cycles": -1.0}}, "device_figures.issue_cycles"),
    ({"device_figures": [1]}, "'device_figures'"),
])
def test_invalid_calibrations_are_refused_naming_the_key(tmp_path, changes, key):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(_cal_dict(**changes)))
    with pytest.raises(CalibrationError) as err:
        load_calibration(path)
    assert str(path) in str(err.value) and key in str(err.value)


def test_a_missing_key_is_named(tmp_path):
    d = _cal_dict()
    del d["offset"]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(d))
    with pytest.raises(CalibrationError, match=r"c\.json: missing key\(s\) 'offset'"):
        load_calibration(path)


def test_direct_construction_is_validated():
    with pytest.raises(CalibrationError, match="scale.ao"):
        dataclasses.replace(SHIPPED_CAL, scale=dict(SHIPPED_CAL.scale, ao=0.0))


def test_shipped_calibration_round_trips_and_predicts_what_the_old_profile_did(tmp_path):
    path = save_calibration(SHIPPED_CAL, tmp_path / "c.json")
    assert load_calibration(path) == SHIPPED_CAL
    assert SHIPPED_CAL.matches(SHIPPED) and set(SHIPPED_CAL.scale) == set(PHASES)


# ---- old profile files ------------------------------------------------------------------------

def test_an_old_profile_with_fitted_still_loads_split_and_silent():
    fitted = _legacy_fitted()
    path = _write_user_profile(_legacy(fitted))
    profile, calibration = load_profile_and_calibration(path)
    assert profile == SHIPPED and "fitted" not in profile.to_dict()
    assert calibration.scale == dict.fromkeys(PHASES, 2.0) and calibration.fit["frames"] == 40
    found_profile, found, messages = _lookup()
    assert found_profile == SHIPPED and found == calibration and messages == []


def test_an_old_profile_with_empty_fitted_has_no_calibration():
    path = _write_user_profile(_legacy({}))
    assert load_profile_and_calibration(path)[1] is None


@pytest.mark.parametrize(("fitted", "key"), [
    (_legacy_fitted(scale=0.0, offset=0.0), "fitted.scale_primary"),  # issue 10: all zero
    (_legacy_fitted(scale=-1.0), "fitted.scale_primary"),
    (_legacy_fitted(scale=1e300), "fitted.scale_primary"),
    (_legacy_fitted() | {"scale_bogus": 1.0}, "same components"),
    ({"scale_primary": 1.0, "offset_primary": 0.0, "foo": 1.0}, "fitted.foo"),
])
def test_a_bad_old_profile_falls_back_to_the_shipped_one_with_one_warning(fitted, key):
    path = _write_user_profile(_legacy(fitted))
    profile, calibration, messages = _lookup()
    assert profile == SHIPPED and calibration == SHIPPED_CAL
    assert len(messages) == 1, messages
    assert str(path) in messages[0] and key in messages[0]


def test_an_implausible_device_parameter_falls_back_with_one_warning():
    path = _write_user_profile(SHIPPED.to_dict() | {"issue_cycles": 1e-300})
    profile, calibration, messages = _lookup()
    assert profile == SHIPPED and calibration == SHIPPED_CAL
    assert len(messages) == 1 and str(path) in messages[0] and "issue_cycles" in messages[0]


def test_a_bad_user_calibration_falls_back_to_the_shipped_one_with_one_warning():
    path = calibration_path(SHIPPED.name, SHIPPED.driver, "raytracer")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_cal_dict(scale=dict(SHIPPED_CAL.scale, ao=-4.0))))
    _, calibration, messages = _lookup()
    assert calibration == SHIPPED_CAL
    assert len(messages) == 1 and str(path) in messages[0] and "scale.ao" in messages[0]


def test_a_calibration_missing_a_phase_is_not_used():
    partial = dataclasses.replace(SHIPPED_CAL, scale={"primary": 2.0}, offset={"primary": 0.0},
                                  miss={}, launch={}, uncertainty={})
    path = calibration_path(SHIPPED.name, SHIPPED.driver, "raytracer")
    path.parent.mkdir(parents=True)
    save_calibration(partial, path)
    _, calibration, messages = _lookup()
    assert calibration == SHIPPED_CAL
    assert len(messages) == 1 and "no fit for shadow, ao, shade" in messages[0]


def test_the_user_calibration_wins_over_the_shipped_one(caplog):
    mine = dataclasses.replace(SHIPPED_CAL, scale=dict.fromkeys(PHASES, 3.0))
    store(SHIPPED, mine)
    with caplog.at_level(logging.INFO, logger="governed"):
        _, calibration, messages = _lookup()
    assert calibration == mine and messages == []
    # it says which calibration prices the frames: the user's file
    path = str(calibration_path(SHIPPED.name, SHIPPED.driver, "raytracer"))
    assert sum(path in r.getMessage() for r in caplog.records) == 1
    # once per process: a run that sets up another renderer is not told again
    with caplog.at_level(logging.INFO, logger="governed"):
        assert _lookup()[1] == mine
    assert sum(path in r.getMessage() for r in caplog.records) == 1


# ---- one file per renderer --------------------------------------------------------------------

def test_calibrating_another_renderer_never_overwrites_the_ray_tracers():
    ray = dataclasses.replace(SHIPPED_CAL, scale=dict.fromkeys(PHASES, 3.0))
    volume = AppCalibration("volume", SHIPPED.name, SHIPPED.driver, scale={"rank0": 1.5},
                            offset={"rank0": 0.0}, device_profile=SHIPPED.fingerprint())
    store(SHIPPED, ray)
    store(SHIPPED, volume)
    assert find_app_calibration(SHIPPED, "raytracer", PHASES) == ray
    assert find_app_calibration(SHIPPED, "volume") == volume
    files = sorted(p.name for p in calibration_path(SHIPPED.name, SHIPPED.driver, "x").parent
                   .iterdir())
    assert files == ["pthread-amd-epyc-3-0-rc2--raytracer.json",
                     "pthread-amd-epyc-3-0-rc2--volume.json"]
    assert "fitted" not in json.loads(profile_path(SHIPPED.name, SHIPPED.driver).read_text())


def test_a_calibration_of_another_profile_of_the_device_warns_to_recalibrate():
    changed = dataclasses.replace(SHIPPED, issue_cycles=SHIPPED.issue_cycles * 2)
    with pytest.warns(UserWarning, match="another device profile.*recalibrate"):
        assert find_app_calibration(changed, "raytracer", PHASES) == SHIPPED_CAL


def test_a_calibration_fitted_for_other_kernels_is_skipped_with_a_warning():
    """Its scales absorbed another program's instruction counts (PoCL's shipped fit priced
    the leaf-test kernels 141 % off): the caller calibrates instead."""
    mine = dataclasses.replace(SHIPPED_CAL, kernels="a" * 64)
    store(SHIPPED, mine)
    assert find_app_calibration(SHIPPED, "raytracer", PHASES, kernels="a" * 64) == mine
    assert find_app_calibration(SHIPPED, "raytracer", PHASES) == mine  # kernels not named
    with pytest.warns(UserWarning, match="other kernels.*recalibrate"):
        found = find_app_calibration(SHIPPED, "raytracer", PHASES, kernels="b" * 64)
    assert found is None or found.kernels in ("", "b" * 64)
    assert AppCalibration.from_dict(mine.to_dict()) == mine


def test_shipped_calibrations_name_their_kernels():
    """Each names the counts' source digest it was fitted with, then the launches that were not
    the default and the build options (those recorded before options were named have none),
    so the tuned renderer can ignore it for other kernels."""
    for calibration in builtin_calibrations(RECORDED.name):
        digest, *launches = calibration.kernels.split()
        assert re.fullmatch(r"[0-9a-f]{64}", digest)
        assert all(re.fullmatch(r"[a-z_]+=\d+x\d+(/sg\d+)?(/p\d+x\d+)?", launch)
                   or re.fullmatch(r"build=[\w+.=-]+", launch) for launch in launches)


def test_calibrated_predictions_are_what_the_old_fitted_profile_gave():
    """The split keeps the figures: per phase ``scale * model + offset * pixels``, as before,
    plus the miss-pixel and launch terms of issue 12."""
    from governed.mesh.instruction_counts import load_kernel_counts

    counts = load_kernel_counts()
    frame = Workload(pixels=640 * 360, hit_fraction=0.6, p_t=40, p_i=8, s_t=20, s_i=4, a_t=15,
                     a_i=3, t_v=1.0, m=0.7)
    seconds = predict_frame_seconds(SHIPPED, counts, frame, 8, True, True,
                                    calibration=SHIPPED_CAL)
    bare = predict_phase_seconds(SHIPPED_CAL.model_profile(SHIPPED), counts, frame, 8, True,
                                 True)
    missed = (1 - frame.hit_fraction) * frame.pixels
    by_hand = sum(SHIPPED_CAL.scale[p] * v + SHIPPED_CAL.offset[p] * frame.pixels
                  + SHIPPED_CAL.miss.get(p, 0.0) * missed + SHIPPED_CAL.launch.get(p, 0.0)
                  for p, v in bare.items())
    assert seconds == pytest.approx(by_hand)


def test_the_shipped_intel_profile_is_measured_and_its_calibration_holds_the_fit():
    """Issue 19: fitted numbers stay out of the hardware-only profile. The fitted issue cycles
    (a figure the microbenchmark puts below one cycle) live in the calibration, and the model
    runs on the two together."""
    profile = load_profile(RECORDED / "intel-cpu-amd-epyc.json")
    cal = load_calibration(RECORDED / "intel-cpu-amd-epyc--raytracer.json")
    assert cal.matches(profile)
    assert profile.issue_cycles < 1.0 < cal.device_figures["issue_cycles"]
    assert cal.model_profile(profile).issue_cycles == cal.device_figures["issue_cycles"]
    assert cal.model_profile(cal.model_profile(profile)) == cal.model_profile(profile)


# ---- where calibration writes, checked before the work ----------------------------------------

def _device() -> DeviceInfo:
    return DeviceInfo(0, 0, "test", SHIPPED.name, "CPU", 2, 2596, 1024, SHIPPED.driver, 16)


@pytest.fixture
def fake_calibration(monkeypatch, tracers):
    """calibrate() with the microbenchmarks and the frames replaced by a few synthetic frames;
    ``events`` records when the work started."""
    tracer = tracers("dragon-small")
    events: list[str] = []
    from governed.mesh.probe import Probe

    probe = Probe(tracer.scene, tracer.bvh)
    workload = probe.measure(tracer.scene.camera, 32, 18)
    counts = calibrate_mod.load_kernel_counts()
    samples = []
    for s in (RenderSettings(2, 0.1, True, True), RenderSettings(8, 0.1, True, False),
              RenderSettings(4, 0.1, True, True)):
        model = predict_phase_seconds(SHIPPED, counts, workload, s.ao_rays, s.shadows, s.phong)
        samples.append(frames_mod.Sample(workload, s, {p: 3 * v for p, v in model.items()}))

    def base_profile(device, quick):
        events.append("calibrating")
        return SHIPPED

    monkeypatch.setattr(calibrate_mod, "base_profile", base_profile)
    monkeypatch.setattr(frames_mod, "load_scene", lambda name: tracer.scene)
    monkeypatch.setattr(frames_mod, "Tracer", lambda scene, device: tracer)
    monkeypatch.setattr(frames_mod, "collect_samples", lambda *a, **k: samples)
    monkeypatch.setattr(calibrate_mod, "FIT_STARTS", ((1.0, 1.0, 1.0),))  # one start will do
    return events


def test_an_unwritable_store_is_found_first_and_the_result_kept_in_memory(
        tmp_path, monkeypatch, fake_calibration):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the profile folder should be")
    monkeypatch.setenv("AUTOTUNE_PROFILE_DIR", str(blocker / "profiles"))

    def warn(message, *args, **kwargs):
        fake_calibration.append(f"warning: {message}")

    monkeypatch.setattr(store_mod.warnings, "warn", warn)
    result = calibrate_mod.calibrate(_device(), quick=True, progress=False)
    assert fake_calibration[0].startswith("warning: cannot write the profile store")
    assert str(blocker) in fake_calibration[0] and fake_calibration[1] == "calibrating"
    assert len(fake_calibration) == 2  # one warning
    assert find_device_profile(SHIPPED.name, SHIPPED.driver) is result.profile  # in memory
    assert find_app_calibration(result.profile, "raytracer", PHASES) is result.calibration
    assert blocker.read_text().startswith("a file")  # nothing written over it


def test_calibrate_saves_profile_and_calibration_apart(fake_calibration):
    result = calibrate_mod.calibrate(_device(), quick=True, progress=False)
    saved = json.loads(profile_path(SHIPPED.name, SHIPPED.driver).read_text())
    assert "fitted" not in saved
    assert load_calibration(calibration_path(SHIPPED.name, SHIPPED.driver, "raytracer")) == \
        result.calibration


def test_calibrate_output_into_a_missing_folder_fails_before_calibrating(tmp_path,
                                                                         fake_calibration):
    with pytest.raises(OutputError, match="does not exist"):
        calibrate_mod.calibrate(_device(), quick=True, progress=False,
                                out=tmp_path / "missing" / "x.json")
    assert fake_calibration == []  # no work was done


def test_calibrate_output_writes_profile_and_calibration(tmp_path, fake_calibration):
    out = tmp_path / "mine.json"
    result = calibrate_mod.calibrate(_device(), quick=True, progress=False, out=out,
                                     save=False)
    assert json.loads(out.read_text()) == result.profile.to_dict()
    assert load_calibration(tmp_path / "mine--raytracer.json") == result.calibration


def test_cli_calibrate_output_into_a_missing_folder_is_one_line_exit_2(tmp_path, capsys,
                                                                       fake_calibration):
    rc = main(["calibrate", "--quick", "-o", str(tmp_path / "missing" / "x.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "does not exist" in err and "Traceback" not in err
    assert fake_calibration == []


def test_cli_calibrate_ship_writes_this_machine_s_shipped_files(tmp_path, monkeypatch, capsys,
                                                                fake_calibration):
    """``--ship`` writes the profile and calibration where the store looks for what ships
    with this machine; with ``-o`` as well it is one error line."""
    machines = tmp_path / "machines"
    for module in (device_profile_mod, app_calibration_mod, store_mod):
        monkeypatch.setattr(module, "MACHINES_DIR", machines)
    monkeypatch.setattr(store_mod, "this_machine", lambda: "some-cpu-family1-model2-4cpus")
    assert main(["calibrate", "--quick", "--ship", "--json"]) == 0
    capsys.readouterr()
    folder = machines / "some-cpu-family1-model2-4cpus"
    calibration_file, profile_file = sorted(p.name for p in folder.iterdir())
    assert calibration_file == profile_file.replace(".json", "--raytracer.json")
    [shipped] = builtin_calibrations("some-cpu-family1-model2-4cpus")
    [profile] = device_profile_mod.machine_profiles("some-cpu-family1-model2-4cpus")
    assert shipped.matches(profile) and shipped == load_calibration(
        calibration_path(SHIPPED.name, SHIPPED.driver, "raytracer"))
    rc = main(["calibrate", "--quick", "--ship", "-o", str(tmp_path / "x.json")])
    assert rc == 2 and "not both" in capsys.readouterr().err


def test_miss_launch_and_the_fit_report_round_trip(tmp_path):
    cal = dataclasses.replace(SHIPPED_CAL, miss=dict.fromkeys(PHASES, 1e-9),
                              launch={"shade": 2e-4}, uncertainty={"scale.ao": 0.03},
                              held=("device.dep_delay_coal",))
    path = tmp_path / "c.json"
    path.write_text(cal.to_json())
    back = load_calibration(path)
    assert back == cal and back.held == ("device.dep_delay_coal",)
    assert back.apply("shade", 1.0, 100, 10) == pytest.approx(
        SHIPPED_CAL.scale["shade"] + SHIPPED_CAL.offset["shade"] * 100 + 1e-8 + 2e-4)
    assert "miss" not in SHIPPED_CAL.to_dict() or SHIPPED_CAL.miss  # absent means zero


# ---- per-phase occupancy ----------------------------------------------------------------------

H200_OCCUPANCY = {"primary": 8, "shadow": 9, "ao": 8, "shade": 32}


def test_occupancy_round_trips_and_is_written_only_when_present(tmp_path):
    cal = dataclasses.replace(SHIPPED_CAL, occupancy=H200_OCCUPANCY)
    path = save_calibration(cal, tmp_path / "c.json")
    assert json.loads(path.read_text())["occupancy"] == H200_OCCUPANCY
    back = load_calibration(path)
    assert back == cal and back.occupancy == H200_OCCUPANCY
    assert all(type(v) is int for v in back.occupancy.values())
    assert "occupancy" not in SHIPPED_CAL.to_dict() and SHIPPED_CAL.occupancy == {}


def test_shipped_calibration_files_are_written_back_unchanged():
    """No occupancy, no key: the shipped files (and so their digests) stay byte for byte."""
    from models.device_profile import MACHINES_DIR

    for path in sorted([*MACHINES_DIR.glob("*/*--*.json"), *RECORDED.glob("*--*.json")]):
        cal = load_calibration(path)
        assert cal.occupancy == {}
        assert json.loads(cal.to_json()) == json.loads(path.read_text())


@pytest.mark.parametrize(("occupancy", "message"), [
    ({"ao": 0}, r"'occupancy\.ao' must be a whole number .* got 0$"),
    ({"shade": -3}, r"'occupancy\.shade' must be a whole number .* got -3$"),
    ({"primary": 2.5}, r"'occupancy\.primary' must be a whole number .* got 2\.5$"),
    ({"primary": True}, r"'occupancy\.primary' must be a whole number .* got True$"),
    ({"primary": 1e9}, r"'occupancy\.primary' must be a whole number"),
    ({"sky": 4}, r"'occupancy' names component 'sky' that 'scale' does not"),
    ([8], r"'occupancy' must be an object"),
])
def test_a_bad_occupancy_is_refused_naming_the_phase_and_value(tmp_path, occupancy, message):
    if isinstance(occupancy, dict):
        with pytest.raises(CalibrationError, match=message):
            dataclasses.replace(SHIPPED_CAL, occupancy=occupancy)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(_cal_dict(occupancy=occupancy)))
    with pytest.raises(CalibrationError, match=message) as err:
        load_calibration(path)
    assert str(path) in str(err.value)


def test_calibrate_stores_the_kernels_occupancy_it_fitted_with(monkeypatch, fake_calibration):
    """On an NVIDIA device the occupancy measured from the kernels goes into the fit and the
    calibration; elsewhere (the CPU test device) there is none and nothing changes."""
    plain = calibrate_mod.calibrate(_device(), quick=True, progress=False, save=False)
    assert plain.calibration.occupancy == {} and "occupancy" not in plain.calibration.to_dict()
    measured = []

    def kernel_occupancy(device):
        measured.append(device.runtime)
        return dict(H200_OCCUPANCY) if device.runtime == "nvidia" else None

    monkeypatch.setattr(calibrate_mod, "kernel_occupancy", kernel_occupancy)
    nvidia = dataclasses.replace(_device(), runtime="nvidia")
    result = calibrate_mod.calibrate(nvidia, quick=True, progress=False)
    assert measured == ["nvidia"]
    assert result.calibration.occupancy == H200_OCCUPANCY
    assert load_calibration(calibration_path(SHIPPED.name, SHIPPED.driver, "raytracer")) == \
        result.calibration
