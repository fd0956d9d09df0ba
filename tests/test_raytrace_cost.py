"""Ray-tracing instruction counts and frame-time prediction (§4.3 of Ganestam & Doggett,
"Auto-tuning Interactive Ray Tracing using an Analytical GPU Architecture Model")."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from recorded_devices import every_profile

from models.app_calibration import AppCalibration, CalibrationError
from models.device_profile import DeviceProfile, builtin_profiles
from models.hong_kim import KernelLaunch, predict_cycles
from models.raytrace_cost import (
    PHASES,
    LoopCounts,
    PhaseInstructions,
    phase_instructions,
    predict_frame_seconds,
    predict_frame_seconds_batch,
    predict_phase_seconds,
)
from models.workload import Workload
from raytracer.mesh.phases import PHASE_LIST
from raytracer.mesh.phases import PHASES as TRACER_PHASES

COUNTS = {
    "primary": LoopCounts(i_ct=2, i_ci=3, i_cco=10, i_mt=1, i_mi=2, i_mco=4),
    "shadow": LoopCounts(i_ct=2, i_ci=3, i_cco=5, i_mt=1, i_mi=2, i_mco=1),
    "ao": LoopCounts(i_ct=1, i_ci=2, i_cco=7, i_mt=2, i_mi=1, i_mco=3),
    "shade_phong": LoopCounts(i_cco=50, i_mco=4),
    "shade_flat": LoopCounts(i_cco=20, i_mco=2),
}
# (s_t + p_t) / 23 = (a_t + p_t) / 23 = 2, so a_ca = 1 - 2^-1 = 0.5 for shadow and AO rays.
SMALL = Workload(
    pixels=1000, hit_fraction=0.9, p_t=10, p_i=4, s_t=36, s_i=2, a_t=36, a_i=6, t_v=12, m=0.5
)
FRAME = Workload(
    pixels=1920 * 1080,
    hit_fraction=0.8,
    p_t=40,
    p_i=12,
    s_t=25,
    s_i=6,
    a_t=15,
    a_i=4,
    t_v=30,
    m=0.6,
)
REAL_COUNTS = {
    "primary": LoopCounts(20, 30, 60, 2, 3, 6),
    "shadow": LoopCounts(18, 28, 20, 2, 3, 2),
    "ao": LoopCounts(18, 28, 20, 2, 3, 2),
    "shade_phong": LoopCounts(i_cco=120, i_mco=8),
    "shade_flat": LoopCounts(i_cco=40, i_mco=6),
}
ALL_PROFILES = every_profile()  # the seeds' devices and two recorded CPU devices
PROFILES = sorted(ALL_PROFILES)


def test_hand_computed_counts_per_phase() -> None:
    got = phase_instructions(COUNTS, SMALL, ao_rays=3, shadows=True, phong=True)
    # primary: i_c = 2*10 + 3*4 + 10; i_t = (10 + 8 + 4) * (1 - 0.25) = 16.5, split by m = 0.5
    assert got["primary"] == PhaseInstructions(compute=42.0, coal=8.25, uncoal=8.25)
    # shadow: i_c = 2*36 + 3*2 + 5*0.9 (the constant only where the primary ray hit);
    # miss = 1 - (1 - a_ca) m^2 = 1 - 0.5 * 0.25 = 0.875; a_m = 0.875 * (1*36 + 2*2/2) = 33.25;
    # i_mu = 33.25 + 1*0.9
    assert got["shadow"] == pytest.approx(PhaseInstructions(compute=82.5, coal=0.0,
                                                            uncoal=34.15))
    # ao, a_r = 3: i_c = 1*36*3 + 2*6*3 + 7*0.9; a_m = 0.875 * (2*36*3 + 6*1*3/2) = 196.875;
    # + 3*0.9
    assert got["ao"] == pytest.approx(PhaseInstructions(compute=150.3, coal=0.0,
                                                        uncoal=199.575))
    # shade (phong), paid by the 90 % of pixels that hit: i_c = 50; i_t = 4 * 0.75 = 3, by m
    assert got["shade"] == pytest.approx(PhaseInstructions(compute=45.0, coal=1.35, uncoal=1.35))
    flat = phase_instructions(COUNTS, SMALL, ao_rays=0, shadows=False, phong=False)
    assert set(flat) == {"primary", "shade"}
    assert flat["shade"] == pytest.approx(PhaseInstructions(compute=18.0, coal=0.675, uncoal=0.675))


def test_ao_cache_estimate_is_zero_for_shallow_traversal() -> None:
    shallow = dataclasses.replace(SMALL, a_t=5.0)  # (5 + 10) / 23 < 1: a_ca = 0
    got = phase_instructions(COUNTS, shallow, ao_rays=2, shadows=False, phong=True)
    # then only incoherence misses: (1 - m^2) of the loop fetches, plus i_mco where it hit
    assert got["ao"].uncoal == pytest.approx(0.75 * (2 * 5 * 2 + 6 * 1 * 2 / 2) + 3.0 * 0.9)
    coherent = dataclasses.replace(shallow, m=1.0)
    got = phase_instructions(COUNTS, coherent, ao_rays=2, shadows=False, phong=True)
    assert got["ao"].uncoal == pytest.approx(3.0 * 0.9)  # every fetch kept: only i_mco


def test_phase_seconds_match_hand_computed_hong_kim_example() -> None:
    # AO counts of the Hong-Kim worked example (27 compute + 6 uncoalesced, no barriers):
    # a_ca = 0 so i_mu = i_mco = 6; i_c = 3*2*2 + 5*1*2 + 5 = 27; 80 blocks of 128 threads.
    profile = DeviceProfile(
        name="hk",
        driver="",
        cores=16,
        warp_size=32,
        issue_cycles=4,
        max_blocks_per_core=8,
        clock_ghz=1.0,
        bandwidth_gbs=80,
        mem_latency=420,
        dep_delay_coal=4,
        dep_delay_uncoal=10,
    )
    counts = {**COUNTS, "ao": LoopCounts(i_ct=3, i_ci=5, i_cco=5, i_mco=6)}
    w = dataclasses.replace(SMALL, pixels=80 * 128, p_t=1, a_t=2, a_i=1, hit_fraction=1.0)
    got = predict_phase_seconds(profile, counts, w, 2, False, True, threads_per_block=128)
    assert got["ao"] == pytest.approx(38428.1875e-9)
    assert got["shadow"] == 0.0
    assert set(got) == set(PHASES)


@pytest.mark.parametrize("key", PROFILES)
def test_phase_seconds_are_hong_kim_of_the_counts(key: str) -> None:
    profile = ALL_PROFILES[key]  # the raw model: no calibration
    got = predict_phase_seconds(profile, COUNTS, SMALL, 3, True, False, threads_per_block=32)
    ins = phase_instructions(COUNTS, SMALL, 3, True, False)
    for phase, i in ins.items():
        launch = KernelLaunch(i.compute, i.coal, i.uncoal, threads_per_block=32, blocks=32)
        assert got[phase] == predict_cycles(profile, launch).seconds
    total = predict_frame_seconds(profile, COUNTS, SMALL, 3, True, False, threads_per_block=32)
    assert total == pytest.approx(sum(got.values()))


def _calibration(profile: DeviceProfile, **scale: float) -> AppCalibration:
    scales = dict.fromkeys(PHASES, 1.0) | scale
    return AppCalibration("raytracer", profile.name, profile.driver, scale=scales,
                          offset=dict.fromkeys(PHASES, 0.0))


def test_calibrated_scale_per_phase() -> None:
    base = builtin_profiles()["gf580"]
    calibration = _calibration(base, ao=2.0, shade=0.5)
    a = predict_phase_seconds(base, COUNTS, SMALL, 4, True, True)
    b = predict_phase_seconds(base, COUNTS, SMALL, 4, True, True, calibration=calibration)
    assert b["ao"] == pytest.approx(2 * a["ao"])
    assert b["shade"] == pytest.approx(0.5 * a["shade"])
    assert (b["primary"], b["shadow"]) == (a["primary"], a["shadow"])


def test_calibrated_offset_is_per_pixel() -> None:
    base = builtin_profiles()["gf580"]
    calibration = dataclasses.replace(_calibration(base), offset=dict.fromkeys(PHASES, 1e-9))
    a = predict_phase_seconds(base, COUNTS, SMALL, 4, True, True)
    b = predict_phase_seconds(base, COUNTS, SMALL, 4, True, True, calibration=calibration)
    assert all(b[p] == pytest.approx(a[p] + 1e-9 * SMALL.pixels) for p in PHASES)


def test_a_calibration_without_a_phase_is_refused_not_defaulted() -> None:
    base = builtin_profiles()["gf580"]
    partial = AppCalibration("raytracer", base.name, base.driver, scale={"primary": 2.0},
                             offset={"primary": 0.0})
    with pytest.raises(CalibrationError, match="no fit for ao"):
        predict_phase_seconds(base, COUNTS, SMALL, 4, False, True, calibration=partial)


def test_model_phases_are_the_tracer_phase_registry() -> None:
    """models cannot import the ray tracer, so its phase list is written twice: pin them."""
    import governed.mesh  # lazy: the import is the check (it refuses if they differ)

    assert PHASES == TRACER_PHASES == tuple(p.name for p in PHASE_LIST)
    assert governed.mesh.__name__ == "governed.mesh"


@pytest.mark.parametrize("key", PROFILES)
def test_zero_hit_workload_is_finite_and_small(key: str) -> None:
    profile = ALL_PROFILES[key]  # the raw model: no calibration
    empty = Workload(
        pixels=FRAME.pixels,
        hit_fraction=0,
        p_t=0,
        p_i=0,
        s_t=0,
        s_i=0,
        a_t=0,
        a_i=0,
        t_v=0,
        m=0,
    )
    phases = predict_phase_seconds(profile, REAL_COUNTS, empty, 16, True, True)
    assert all(np.isfinite(s) and s >= 0 for s in phases.values())
    total = sum(phases.values())
    assert 0 < total < 0.2 * predict_frame_seconds(profile, REAL_COUNTS, FRAME, 16, True, True)


@pytest.mark.parametrize("key", PROFILES)
def test_more_ao_rays_take_more_time(key: str) -> None:
    profile = ALL_PROFILES[key]
    times = [predict_frame_seconds(profile, REAL_COUNTS, FRAME, a, True, True) for a in range(33)]
    assert np.all(np.diff(times) > 0)
    with_shadows = predict_frame_seconds(profile, REAL_COUNTS, FRAME, 4, True, False)
    assert with_shadows > predict_frame_seconds(profile, REAL_COUNTS, FRAME, 4, False, False)


def test_ao_rays_of_a_pixel_average_out_the_slowest_lane() -> None:
    """The probe's group maximum is measured at two AO rays a pixel; with more rays the
    slowest lane's excess over the lane mean shrinks as 1/sqrt(rays), so each further ray
    costs a little less; with no lane mean measured, every ray costs the same."""
    w = dataclasses.replace(FRAME, a_t_lane=FRAME.a_t * 0.5, a_i_lane=FRAME.a_i * 0.5)
    steps, tests = w.ao_per_ray(np.array([2.0, 8.0]))
    assert steps[0] == pytest.approx(FRAME.a_t) and tests[0] == pytest.approx(FRAME.a_i)
    assert steps[1] == pytest.approx(FRAME.a_t * (0.5 + 0.5 * 0.5))
    assert FRAME.ao_per_ray(8.0) == (FRAME.a_t, FRAME.a_i)
    profile = builtin_profiles()["gf580"]
    times = [predict_phase_seconds(profile, REAL_COUNTS, w, a, False, False)["ao"]
             for a in (2, 4, 8, 16)]
    marginal = np.diff(times) / np.diff([2, 4, 8, 16])
    assert np.all(np.diff(marginal) < 0) and np.all(marginal > 0)
    batch = predict_frame_seconds_batch(profile, REAL_COUNTS, w, np.array([2, 16]), False,
                                        False)
    scalar = [predict_frame_seconds(profile, REAL_COUNTS, w, a, False, False) for a in (2, 16)]
    assert batch == pytest.approx(scalar, rel=1e-12)


@pytest.mark.parametrize("key", PROFILES)
def test_batch_agrees_with_scalar(key: str) -> None:
    profile = ALL_PROFILES[key]
    cal = dataclasses.replace(_calibration(profile, primary=1.3),
                              offset=dict.fromkeys(PHASES, 1e-10))
    rng = np.random.default_rng(42)
    ao = rng.integers(0, 33, 300)
    shadows = rng.random(300) < 0.5
    phong = rng.random(300) < 0.5
    got = predict_frame_seconds_batch(profile, REAL_COUNTS, FRAME, ao, shadows, phong,
                                      calibration=cal)
    for i in range(300):
        want = predict_frame_seconds(
            profile, REAL_COUNTS, FRAME, int(ao[i]), bool(shadows[i]), bool(phong[i]),
            calibration=cal,
        )
        assert got[i] == pytest.approx(want, rel=1e-12)


def test_batch_broadcasts_scalar_knobs() -> None:
    profile = builtin_profiles()["gf580"]
    out = predict_frame_seconds_batch(profile, REAL_COUNTS, FRAME, np.arange(4), True, False)
    assert out.shape == (4,)
    assert out[2] == pytest.approx(
        predict_frame_seconds(profile, REAL_COUNTS, FRAME, 2, True, False)
    )


def test_shade_fallback_and_missing_phase_errors() -> None:
    profile = builtin_profiles()["gf580"]
    plain = {"primary": COUNTS["primary"], "shade": COUNTS["shade_flat"]}
    assert predict_frame_seconds(profile, plain, SMALL, 0, False, True) > 0
    with pytest.raises(ValueError, match="no 'ao' phase"):
        predict_frame_seconds(profile, plain, SMALL, 1, False, True)
    with pytest.raises(ValueError, match="no 'shadow' phase"):
        predict_frame_seconds_batch(profile, plain, SMALL, [0, 0], [False, True], True)
    with pytest.raises(ValueError, match="ao_rays"):
        predict_frame_seconds(profile, COUNTS, SMALL, -1, False, True)
    with pytest.raises(ValueError, match="pixels"):
        predict_frame_seconds(profile, COUNTS, dataclasses.replace(SMALL, pixels=0), 0, False, True)
    with pytest.raises(ValueError, match="LoopCounts.i_ct"):
        LoopCounts(i_ct=-1)


def test_batch_of_a_million_candidates() -> None:
    """One vectorized call prices 1M candidates (no wall-clock assert: it flakes on a shared
    machine; the search's cost is measured by ``autotune bench controller-cost``)."""
    profile = builtin_profiles()["gf580"]
    rng = np.random.default_rng(0)
    n = 1_000_000
    ao, shadows, phong = rng.integers(0, 33, n), rng.random(n) < 0.5, rng.random(n) < 0.5
    out = predict_frame_seconds_batch(profile, REAL_COUNTS, FRAME, ao, shadows, phong)
    assert out.shape == (n,) and np.isfinite(out).all() and (out > 0).all()


@pytest.mark.parametrize("key", PROFILES)
def test_phong_is_priced_by_the_shade_kernels_difference(key: str) -> None:
    """A knob the model cannot price is a knob the tuner always turns on."""
    profile = ALL_PROFILES[key]
    cal = dataclasses.replace(_calibration(profile, shade=1.7), launch=dict.fromkeys(PHASES, 1e-5))
    on = predict_phase_seconds(profile, REAL_COUNTS, FRAME, 4, True, True, calibration=cal)
    off = predict_phase_seconds(profile, REAL_COUNTS, FRAME, 4, True, False, calibration=cal)
    assert {p: on[p] for p in PHASES if p != "shade"} == {p: off[p] for p in PHASES
                                                          if p != "shade"}
    phong = predict_cycles(profile, KernelLaunch(*_shade_launch(True)))
    flat = predict_cycles(profile, KernelLaunch(*_shade_launch(False)))
    assert on["shade"] - off["shade"] == pytest.approx(1.7 * (phong.seconds - flat.seconds))
    assert on["shade"] > off["shade"]
    batch = predict_frame_seconds_batch(profile, REAL_COUNTS, FRAME, 4, True, [True, False],
                                        calibration=cal)
    assert batch[0] - batch[1] == pytest.approx(on["shade"] - off["shade"])


def _shade_launch(phong: bool) -> tuple:
    ins = phase_instructions(REAL_COUNTS, FRAME, 0, False, phong)["shade"]
    return ins.compute, ins.coal, ins.uncoal, 64, -(-FRAME.pixels // 64)


def test_missed_pixels_are_priced_by_the_miss_term_and_launches_by_the_launch_term() -> None:
    base = builtin_profiles()["gf580"]
    plain = _calibration(base)
    cal = dataclasses.replace(plain, miss=dict.fromkeys(PHASES, 2e-9),
                              launch=dict.fromkeys(PHASES, 3e-4))
    for h in (0.0, 0.5, 1.0):
        w = dataclasses.replace(FRAME, hit_fraction=h)
        a = predict_phase_seconds(base, REAL_COUNTS, w, 4, True, True, calibration=plain)
        b = predict_phase_seconds(base, REAL_COUNTS, w, 4, True, True, calibration=cal)
        for p in PHASES:
            assert b[p] == pytest.approx(a[p] + 2e-9 * (1 - h) * FRAME.pixels + 3e-4)
        got = predict_frame_seconds_batch(base, REAL_COUNTS, w, [4], True, True, calibration=cal)
        assert got[0] == pytest.approx(sum(b.values()))


def test_secondary_constants_are_paid_where_the_primary_ray_hit() -> None:
    """An empty view runs the shadow and AO kernels' exit path only: the analytical part is
    (nearly) nothing, the miss term carries it."""
    empty = dataclasses.replace(FRAME, hit_fraction=0.0, s_t=0, s_i=0, a_t=0, a_i=0, t_v=0)
    got = phase_instructions(REAL_COUNTS, empty, 8, True, True)
    for phase in ("shadow", "ao", "shade"):
        assert got[phase].compute == 0 and got[phase].uncoal == 0


def test_ao_ray_set_up_is_priced_only_where_the_device_issues_it_in_order() -> None:
    # an out-of-order core builds each AO ray while the one before it is traversed
    counts = {**COUNTS, "ao_ray": LoopCounts(i_cco=40, i_mco=2)}
    in_order = phase_instructions(counts, SMALL, ao_rays=3, shadows=False, phong=True)
    ooo = phase_instructions(counts, SMALL, ao_rays=3, shadows=False, phong=True,
                             out_of_order=True)
    # h a_r i_cco_ray = 0.9 * 3 * 40 (and its memory, 0.9 * 3 * 2) only in order
    assert in_order["ao"].compute - ooo["ao"].compute == pytest.approx(108.0)
    assert in_order["ao"].uncoal - ooo["ao"].uncoal == pytest.approx(5.4)
    assert ooo["ao"] == phase_instructions(COUNTS, SMALL, ao_rays=3, shadows=False,
                                           phong=True)["ao"]
    assert ooo["primary"] == in_order["primary"] and ooo["shade"] == in_order["shade"]
    profile = dataclasses.replace(builtin_profiles()["gf580"], out_of_order=True)
    batch = predict_frame_seconds_batch(profile, counts, FRAME, np.array([0, 4]), True, True)
    scalar = [predict_frame_seconds(profile, counts, FRAME, a, True, True) for a in (0, 4)]
    assert batch == pytest.approx(scalar, rel=1e-12)
    in_order_frame = predict_frame_seconds(builtin_profiles()["gf580"], counts, FRAME, 4, True,
                                           True)
    assert in_order_frame > scalar[1]


# ---- per-phase occupancy (issue: occupancy from the kernel's resource use) ---------------------

H200_OCCUPANCY = {"primary": 8, "shadow": 9, "ao": 8, "shade": 32}


@pytest.mark.parametrize("phase", PHASES)
def test_a_phase_occupancy_moves_that_phase_only_as_a_profile_with_that_figure(phase) -> None:
    """A phase's own resident work-groups change its prediction only, and it equals the one
    of a profile whose max_blocks_per_core is that figure."""
    base = dataclasses.replace(builtin_profiles()["gf580"], max_blocks_per_core=32)
    cal = dataclasses.replace(_calibration(base, ao=1.5), offset=dict.fromkeys(PHASES, 1e-10))
    plain = predict_phase_seconds(base, REAL_COUNTS, FRAME, 4, True, True, calibration=cal)
    got = predict_phase_seconds(base, REAL_COUNTS, FRAME, 4, True, True, calibration=cal,
                                active_blocks={phase: 3})
    alone = predict_phase_seconds(dataclasses.replace(base, max_blocks_per_core=3),
                                  REAL_COUNTS, FRAME, 4, True, True, calibration=cal)
    assert got[phase] == alone[phase] != plain[phase]
    assert {p: v for p, v in got.items() if p != phase} == {
        p: v for p, v in plain.items() if p != phase}


def test_no_occupancy_is_bit_identical_to_the_profile_figure() -> None:
    for key in PROFILES:
        profile = ALL_PROFILES[key]
        for mapping in (None, {}):
            assert predict_phase_seconds(profile, REAL_COUNTS, FRAME, 3, True, False,
                                         active_blocks=mapping) == predict_phase_seconds(
                profile, REAL_COUNTS, FRAME, 3, True, False)
            ao = np.arange(0, 9, 0.25)
            assert np.array_equal(
                predict_frame_seconds_batch(profile, REAL_COUNTS, FRAME, ao, ao > 2, ao < 5,
                                            active_blocks=mapping),
                predict_frame_seconds_batch(profile, REAL_COUNTS, FRAME, ao, ao > 2, ao < 5))


def test_occupancy_is_capped_by_the_blocks_a_core_gets() -> None:
    """A small launch fills fewer work-groups a core than the kernel could hold."""
    profile = builtin_profiles()["gf580"]  # 16 cores
    w = dataclasses.replace(SMALL, pixels=16 * 64 * 2)  # 2 work-groups a core
    got = predict_phase_seconds(profile, COUNTS, w, 2, True, True, active_blocks={"ao": 30})
    assert got == predict_phase_seconds(profile, COUNTS, w, 2, True, True)
    with pytest.raises(ValueError, match="active_blocks"):
        predict_phase_seconds(profile, COUNTS, SMALL, 2, True, True, active_blocks={"ao": 0})


@pytest.mark.parametrize("occupancy", [H200_OCCUPANCY, {"ao": 2}, {"shade": 5, "shadow": 1}])
def test_batch_agrees_with_scalar_with_an_occupancy(occupancy) -> None:
    profile = dataclasses.replace(builtin_profiles()["gf580"], max_blocks_per_core=16)
    cal = dataclasses.replace(_calibration(profile, primary=1.3),
                              offset=dict.fromkeys(PHASES, 1e-10))
    rng = np.random.default_rng(7)
    ao = rng.integers(0, 33, 120) / rng.choice([1, 4], 120)
    shadows = rng.random(120) < 0.5
    phong = rng.random(120) < 0.5
    got = predict_frame_seconds_batch(profile, REAL_COUNTS, FRAME, ao, shadows, phong,
                                      calibration=cal, active_blocks=occupancy)
    plain = predict_frame_seconds_batch(profile, REAL_COUNTS, FRAME, ao, shadows, phong,
                                        calibration=cal)
    assert not np.allclose(got, plain)
    for i in range(120):
        want = predict_frame_seconds(profile, REAL_COUNTS, FRAME, float(ao[i]),
                                     bool(shadows[i]), bool(phong[i]), calibration=cal,
                                     active_blocks=occupancy)
        assert got[i] == pytest.approx(want, rel=1e-12)
