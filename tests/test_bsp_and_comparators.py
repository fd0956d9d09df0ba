"""The BSP model (Eqs. 3-5) of Amarís et al. ("A Comparison of GPU Execution Time Prediction
using Machine Learning and Analytical Modeling") and its learned comparators on synthetic data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from studies.kernel_models.bsp import (
    G_GM,
    G_SM,
    SEED_KERNELS,
    ThreadCounts,
    bsp_seconds,
    comm_gm,
    comm_sm,
    fit_lambda,
    seed_counts,
)
from studies.kernel_models.learned_comparators import (
    APPROACHES,
    SEED_FEATURES,
    LogRegressor,
    accuracy,
    log2_features,
    nmse,
)


def test_equations_3_to_5_by_hand():
    c = ThreadCounts(comp=100, ld1=4, st1=1, ld0=6, st0=2, l1=1, l2=0)
    assert comm_sm(c) == 8 * G_SM
    assert comm_gm(c) == (4 + 1 - 1) * G_GM  # the L1 hit leaves global memory (minus sign)
    seconds = bsp_seconds(c, threads=4096, clock_hz=1e9, cores=8, lam=2.0)
    assert seconds == pytest.approx(4096 * (100 + 2000 + 40) / (1e9 * 8 * 2.0))


def test_lambda_from_one_run_makes_that_run_exact():
    c = seed_counts("MMSC", 256, 256)
    measured = 0.0123
    lam = fit_lambda(bsp_seconds(c, 256 * 256, 1e9, 4), measured)
    assert bsp_seconds(c, 256 * 256, 1e9, 4, lam) == pytest.approx(measured)


def test_matrix_multiplication_scales_as_n_cubed_and_dotp_with_the_block():
    t = {n: bsp_seconds(seed_counts("MMGU", n, 256), n * n, 1e9, 1) for n in (256, 512)}
    assert t[512] / t[256] == pytest.approx(8.0, rel=0.01)
    small, big = seed_counts("dotP", 1 << 20, 64), seed_counts("dotP", 1 << 20, 1024)
    assert big.st0 - small.st0 == pytest.approx(math.log2(1024) - math.log2(64))
    assert {seed_counts(k, 1024, 256).comp > 0 for k in SEED_KERNELS} == {True}


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_bsp_rejects_bad_numbers(bad):
    with pytest.raises(ValueError, match="clock_hz"):
        bsp_seconds(ThreadCounts(1, 1, 1), 32, bad, 1)
    with pytest.raises(ValueError, match="unknown kernel"):
        seed_counts("FFT", 8, 8)


def synthetic(rng: np.random.Generator, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """A time that is a power law of three of the 13 features, with 3 % noise."""
    x = 2.0 ** rng.uniform(1, 12, size=(rows, len(SEED_FEATURES)))
    seconds = 1e-6 * x[:, 3] ** 1.0 * x[:, 4] ** 0.5 / x[:, 1] ** 0.8
    return x, seconds * np.exp(rng.normal(0, 0.03, rows))


@pytest.mark.parametrize("approach", APPROACHES)
def test_each_approach_learns_a_power_law_in_log2_space(approach):
    rng = np.random.default_rng(3)
    x, y = synthetic(rng, 300)
    xt, yt = synthetic(rng, 100)
    fitted = LogRegressor(approach).fit(x, y)
    acc = accuracy(fitted.predict(xt), yt)
    if approach == "RF":  # a forest only approximates a power law over six decades
        assert abs(np.median(acc) - 1) < 0.6
        assert np.corrcoef(np.log(fitted.predict(xt)), np.log(yt))[0, 1] > 0.8
    else:
        assert abs(np.median(acc) - 1) < 0.1 and nmse(fitted.predict(xt), yt) < 0.05


def test_nmse_is_zero_when_exact_and_about_half_when_double():
    m = np.array([2.0, 2.0, 2.0])
    assert nmse(m, m) == 0.0
    assert nmse(2 * m, m) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="equal"):
        nmse(m, m[:2])


def test_bad_features_and_too_few_rows_are_errors():
    with pytest.raises(ValueError, match="NaN or infinite"):
        log2_features([[1.0, math.nan]])
    with pytest.raises(ValueError, match="<= 0"):
        log2_features([[1.0, 0.0]])
    with pytest.raises(ValueError, match="at least 3 rows"):
        LogRegressor("LR").fit([[1.0], [2.0]], [1.0, 2.0])
    with pytest.raises(ValueError, match="not fitted"):
        LogRegressor("RF").predict([[1.0]])
    with pytest.raises(ValueError, match="unknown approach"):
        LogRegressor("GBM")


def test_raw_features_fit_a_linear_time_that_log2_space_cannot_take():
    """log2=False fits features and seconds as they are: a linear cost with a zero feature."""
    rng = np.random.default_rng(5)
    x = np.column_stack([rng.uniform(0, 100, 200), rng.uniform(1, 10, 200)])
    y = 1e-3 * x[:, 0] + 2e-3 * x[:, 1] + 1e-3
    fitted = LogRegressor("LR", log2=False).fit(x, y)
    assert np.allclose(fitted.predict([[0.0, 5.0]]), [0.011])
    with pytest.raises(ValueError, match="<= 0"):
        LogRegressor("LR").fit(x * 0, y)


def test_a_forest_on_fewer_features_than_its_mtry_tries_them_all():
    rng = np.random.default_rng(6)
    x = rng.uniform(1, 10, (50, 2))
    fitted = LogRegressor("RF").fit(x, x[:, 0])
    assert fitted.model.max_features == 2
    assert np.all(np.isfinite(fitted.predict(x)))
