"""The drift the governed ray tracer carries the last probe's prices along (pure)."""

from __future__ import annotations

import pytest

from governed.mesh.workload_trend import WorkloadTrend


def test_a_steady_drift_is_carried_and_the_next_probe_finds_it_priced():
    trend = WorkloadTrend(scatter=0.02)
    assert trend.probed(None, 1.0) is None and trend.factor() == 1.0
    for _ in range(3):
        trend.step()
    assert trend.factor() == 1.0  # no rate measured yet
    assert trend.probed(1.0, 1.1) == pytest.approx(0.1)  # 10 % in 4 frames, none carried
    assert trend.per_frame == pytest.approx((0.1 - 0.02) / 4)
    for _ in range(3):
        trend.step()
    carried = (1 + trend.per_frame) ** 3
    assert trend.factor() == pytest.approx(carried)
    missed = trend.probed(1.1, 1.1 * (1 + trend.per_frame) ** 4)  # the drift held
    assert missed == pytest.approx(0.0, abs=1e-12)


def test_a_change_within_the_scatter_or_as_fast_as_a_cut_is_not_carried():
    trend = WorkloadTrend(scatter=0.02)
    trend.probed(None, 1.0)
    trend.probed(1.0, 1.015)  # sampling noise
    assert trend.per_frame == 0.0
    trend.probed(1.0, 1.5)  # 50 % in one frame: a cut
    assert trend.per_frame == 0.0
    trend.step()
    trend.probed(1.0, 0.94)  # a shrinking view: 6 % down in two frames
    assert trend.per_frame == pytest.approx(-0.02)
