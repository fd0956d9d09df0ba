"""The SIMD group ratio: carried across image scales, fitted on the probe's roughness."""

import numpy as np
import pytest

from models.simd_groups import (
    GROUP_EXCESS_EXPONENT,
    GroupRatioFit,
    group_ratio_at,
    roughness_at,
)


def test_group_ratio_grows_as_the_image_gets_coarser():
    """A SIMD group's excess over its lanes' mean grows as scale^-0.7 (bonsai: 0.59 at 256²,
    0.96 at 128²); at the scale it was measured at it is what was measured."""
    assert group_ratio_at(1.59, 1.0, 1.0) == pytest.approx(1.59)
    assert group_ratio_at(1.59, 1.0, 0.5) == pytest.approx(1 + 0.59 * 2 ** GROUP_EXCESS_EXPONENT)
    got = group_ratio_at(np.array([[1.5], [2.0]]), 0.5, np.array([[0.5, 1.0]]))
    assert got.shape == (2, 2) and np.all(got[:, 1] < got[:, 0]) and np.all(got >= 1.0)


def test_roughness_carries_to_the_pixel_spacing_as_the_group_excess_does():
    """Roughness measured between probe rays is larger than between the image's closer
    pixels; a coarser image moves it as :func:`group_ratio_at` moves the excess."""
    assert roughness_at(0.2, 32, 32) == pytest.approx(0.2)
    assert roughness_at(0.2, 32, 256) < 0.2
    fine, coarse = roughness_at(0.2, 32, np.array([256.0, 128.0]))
    assert coarse / fine == pytest.approx(group_ratio_at(2.0, 1.0, 0.5) - 1.0)


def test_fit_recovers_each_ranks_slope_and_falls_back_until_it_has_a_frame():
    fit = GroupRatioFit(3)
    fallback = np.array([1.7, 1.8, 1.9])
    rough = np.full((2, 3), 0.1)  # (thresholds, ranks), between probe rays 32 apart
    widths = np.array([32.0, 64.0, 128.0, 256.0])  # the probe's own spacing first
    assert np.array_equal(fit.table(rough, 32, widths[:1], fallback, 32.0)[0, :, 0], fallback)
    rng = np.random.default_rng(0)
    slopes = np.array([4.0, 2.0, 0.0])
    for _ in range(20):
        x = rng.uniform(0.05, 0.2, 3)
        x[2] = 0.0  # a rank whose rays never differ (an empty brick): no fit
        fit.observe(x, 1.0 + slopes * x * rng.normal(1.0, 0.01, 3))
    assert fit.fitted.tolist() == [True, True, False]
    got = fit.table(rough, 32, widths, fallback, 256.0)  # (thresholds, ranks, widths)
    assert got.shape == (2, 3, 4)
    np.testing.assert_allclose(got[:, :2, 0], [[1.4, 1.2]] * 2, rtol=2e-3)
    # the fitted ranks carry the roughness, the other its fallback, each by its formula
    want = 1 + slopes[:2, None] * roughness_at(0.1, 32, widths)[None, :]
    np.testing.assert_allclose(got[0, :2], want, rtol=2e-3)
    np.testing.assert_allclose(got[:, 2], np.broadcast_to(
        group_ratio_at(1.9, 1.0, widths / 256.0), (2, 4)), rtol=1e-12)


def test_a_shallow_copy_keeps_the_fit_as_it_was():
    """The governed loop keeps the model as it priced a frame (a shallow copy) and then
    teaches the fit that frame: the copy must not learn it."""
    import copy

    fit = GroupRatioFit(1)
    fit.observe([0.1], [1.5])
    before = copy.copy(fit)
    fit.observe([0.1], [2.5])
    rough, widths, fallback = np.array([[0.1]]), np.array([32.0]), np.ones(1)
    assert before.table(rough, 32, widths, fallback, 32.0)[0, 0, 0] == pytest.approx(1.5)
    assert fit.table(rough, 32, widths, fallback, 32.0)[0, 0, 0] == pytest.approx(2.0)
