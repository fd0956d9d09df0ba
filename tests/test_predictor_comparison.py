"""The own-work predictor comparison: learned parts, hybrid, choice on validation, BSP, goals."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.predictors import predictor_comparison as pc
from benchmarks.predictors import raytrace_predictors as rp
from benchmarks.predictors import volume_predictors as vp
from benchmarks.predictors.part_predictors import (
    Config,
    PartRows,
    choose,
    configs,
    frame_seconds,
    group_scores,
    predict_parts,
    scores,
)
from governed.mesh.calibration_frames import Sample
from governed.mesh.instruction_counts import load_kernel_counts
from models.raytrace_cost import PHASES
from models.workload import Workload
from raytracer.mesh.tracer import RenderSettings


def linear_rows(rng: np.random.Generator, n: int, bias: float = 1.0) -> PartRows:
    """Two parts whose seconds are linear in a 'good' feature set; 'noise' holds nothing; the
    second part runs in every other row."""
    x = rng.uniform(1.0, 10.0, (n, 2))
    noise = rng.uniform(1.0, 10.0, (n, 2))
    measured = np.column_stack([1e-3 * x[:, 0] + 2e-3 * x[:, 1], 3e-3 * x[:, 1]]) * bias
    measured[::2, 1] = math.nan
    return PartRows(("a", "b"), measured, {"good": (x, x), "noise": (noise, noise)})


def test_a_learned_part_fits_its_time_and_stays_nan_where_the_part_did_not_run():
    rng = np.random.default_rng(0)
    cal, ev = linear_rows(rng, 40), linear_rows(rng, 10)
    pred = predict_parts(Config("LR", "good", log2=False), cal, ev)
    assert np.all(np.isnan(pred[::2, 1])) and np.all(np.isfinite(pred[1::2]))
    ran = np.isfinite(ev.measured)
    assert np.allclose(pred[ran], ev.measured[ran])


def test_the_hybrid_learns_a_models_bias_and_needs_the_model():
    rng = np.random.default_rng(1)
    cal, ev = linear_rows(rng, 40), linear_rows(rng, 10)
    hybrid = Config("LR", "good", log2=True, hybrid=True)
    # the model is 2x too slow everywhere: its residual is a constant the hybrid removes
    pred = predict_parts(hybrid, cal, ev, 2 * cal.measured, 2 * ev.measured)
    ran = np.isfinite(ev.measured)
    assert np.allclose(pred[ran], ev.measured[ran])
    with pytest.raises(ValueError, match="analytical model"):
        predict_parts(hybrid, cal, ev)


def test_too_few_calibration_rows_for_a_part_is_an_error():
    rng = np.random.default_rng(2)
    cal, ev = linear_rows(rng, 4), linear_rows(rng, 4)
    with pytest.raises(ValueError, match="b: 2 calibration rows"):
        predict_parts(Config("LR", "good", log2=False), cal, ev)


def test_scores_sum_only_the_parts_that_ran_and_give_the_seeds_accuracy():
    rows = PartRows(("a", "b"), np.array([[1.0, math.nan], [1.0, 1.0]]), {})
    pred = np.array([[2.0, 99.0], [1.0, 2.0]])
    assert list(frame_seconds(pred, rows.measured)) == [2.0, 3.0]
    s = scores(pred, rows)
    assert s["a"] == {"mean_error": 0.5, "accuracy_mean": 1.5, "accuracy_sd": 0.5, "n": 2}
    assert s["b"]["n"] == 1 and s["b"]["mean_error"] == 1.0
    assert s["frame"]["accuracy_mean"] == pytest.approx(1.75)


def test_the_choice_is_made_on_validation_rows_whatever_the_test_rows_say():
    rng = np.random.default_rng(3)
    cal, val = linear_rows(rng, 40), linear_rows(rng, 12)
    test = linear_rows(rng, 12)
    candidates = configs("LR", ("noise", "good"))
    picked = choose(candidates, cal, val, test)
    assert picked.config.feature_set == "good" and not picked.config.log2
    assert set(picked.validation_errors) == {c.name for c in candidates}
    # test rows whose times favour no feature set at all do not move the choice
    shuffled = PartRows(test.parts, test.measured[::-1].copy(), test.features)
    assert choose(candidates, cal, val, shuffled).config == picked.config


def samples(rng: np.random.Generator, n: int) -> list[Sample]:
    """Frames with made-up workloads and times, every phase's presence as its knobs say."""
    out = []
    for i in range(n):
        w = Workload(4096, rng.uniform(0.3, 1.0), *rng.uniform(2.0, 40.0, 6),
                     rng.uniform(10, 500), rng.uniform(0.1, 0.9))
        st = RenderSettings(float(i % 3) * 2, 0.1, bool(i % 2), bool(i % 4 < 2))
        phases = {"primary": 1e-3, "shade": 2e-4}
        if st.shadows:
            phases["shadow"] = 5e-4
        if st.ao_rays:
            phases["ao"] = 1e-3 * st.ao_rays
        out.append(Sample(w, st, phases, scene="synthetic"))
    return out


class ConstantModel:
    """Stands in for the ray tracer's model: the same seconds for every phase."""

    profile = SimpleNamespace(cores=2, clock_ghz=2.5, bandwidth_gbs=50.0)

    def phase_seconds(self, workload: Workload, settings: RenderSettings) -> dict[str, float]:
        return dict.fromkeys(PHASES, 1e-3)


def test_raytracer_rows_have_every_feature_set_and_nan_for_phases_that_did_not_run():
    rng = np.random.default_rng(4)
    data = samples(rng, 12)
    rows = rp.rows(data, load_kernel_counts(), ConstantModel.profile)
    assert rows.parts == PHASES and set(rows.features) == set(rp.FEATURE_SETS)
    no_shadow = [i for i, s in enumerate(data) if not s.settings.shadows]
    assert np.all(np.isnan(rows.measured[no_shadow, PHASES.index("shadow")]))
    for matrices in rows.features.values():
        assert all(m.shape[0] == 12 and np.all(m >= 1.0) for m in matrices)
    model = rp.model_seconds(ConstantModel(), data)
    assert np.array_equal(np.isnan(model), np.isnan(rows.measured))


def test_bsp_lambda_is_fitted_per_phase_and_reproduces_times_it_explains():
    rng = np.random.default_rng(5)
    data = samples(rng, 12)
    unit = rp.bsp_unit_seconds(data, load_kernel_counts(), 2.6e9, 32)
    assert np.array_equal(np.isnan(unit), np.isnan(rp.measured(data)))
    lambdas = {"primary": 2.0, "shadow": 0.5, "ao": 3.0, "shade": 1.0}
    truth = unit / np.array([lambdas[p] for p in PHASES])
    fitted = rp.fit_lambdas(unit, truth)
    assert fitted == pytest.approx(lambdas)
    assert np.allclose(rp.bsp_seconds_of(unit, fitted), truth, equal_nan=True)


def volume_sample(rng: np.random.Generator) -> SimpleNamespace:
    """A frame record and probe workload with the fields the render model reads."""
    length = rng.uniform(10, 100, (3, 1))
    jumps = rng.uniform(0.5, 8, (3, 1))
    workload = SimpleNamespace(length=length, span=length * 1.5, rays=rng.uniform(0.2, 1, 1),
                               jumps=jumps)
    step = float(rng.choice([0.5, 1.0, 2.0]))
    settings = SimpleNamespace(step=step, image_scale=1.0, ert_threshold=1.0)
    pixels = 64 * 64
    seconds = 1e-8 * length[2, 0] / step * pixels + 3e-8 * jumps[2, 0] * pixels + 1e-3
    rank = SimpleNamespace(cpu_seconds=seconds, render_seconds=seconds, group_ratio=1.0)
    record = SimpleNamespace(render_width=64, render_height=64, ranks=[rank])
    return SimpleNamespace(workload=workload, settings=settings, record=record)


def test_the_volume_linear_model_is_fitted_on_its_own_rows_and_predicts_them():
    rng = np.random.default_rng(6)
    th = np.array([0.95, 0.975, 1.0])
    cal = vp.rows([volume_sample(rng) for _ in range(20)], th)
    assert set(cal.features) == set(vp.FEATURE_SETS)
    assert cal.features["model+knobs"][0].shape == (20, 8)
    linear = vp.fit_linear(cal)
    assert np.allclose(vp.linear_seconds(linear, cal), cal.measured, rtol=1e-3)


def test_compare_scores_every_approach_and_the_goals_follow_the_test_figures():
    rng = np.random.default_rng(7)
    sets = {"cal": linear_rows(rng, 30), "val": linear_rows(rng, 10),
            "test": linear_rows(rng, 10)}
    model = {k: 1.3 * v.measured for k, v in sets.items()}
    labels = {k: ["p", "q"] * 5 for k in ("val", "test")}
    out = pc.compare(sets, model, "HK", ("good", "noise"), groups=labels)
    assert set(out["test"]) == {"HK", "LR", "SVR", "RF", "hybrid"}
    assert set(out["per_group"]["test"]["HK"]) == {"p", "q"}
    assert out["best_learned"] in ("LR", "SVR", "RF")
    assert out["test"]["HK"]["frame"]["accuracy_mean"] == pytest.approx(1.3)
    goals = pc.goals({"raytracer": out})
    best = out["test"][out["best_learned"]]["frame"]["mean_error"]
    assert goals["raytracer_test_best_learned_vs_hong_kim"]["met"] == (best <= 0.3 + 1e-12)
    hybrid = goals["raytracer_test_hybrid_vs_better"]
    assert hybrid["met"] == (hybrid["value"] <= min(best, out["test"]["HK"]["frame"]
                                                    ["mean_error"]))
    lines = pc.table_lines({"raytracer": out, "volume": out})
    assert any(line.startswith("  HK") for line in lines) and len(lines) == 4 * 7


def test_group_scores_split_the_frames_by_label():
    rows = PartRows(("a",), np.array([[1.0], [1.0], [2.0]]), {})
    out = group_scores(np.array([[1.0], [3.0], [2.0]]), rows, ["x", "x", "y"])
    assert list(out) == ["x", "y"]
    assert out["x"]["mean_error"] == 1.0 and out["x"]["n"] == 2
    assert out["y"]["mean_error"] == 0.0
