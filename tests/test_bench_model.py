"""``autotune bench model``'s measurement repeat: the measured side's own scatter."""

from __future__ import annotations

import pytest

from benchmarks.model_accuracy import repeat_scatter
from models.workload import Workload
from raytracer.tracer import RenderSettings
from raytracer.tuning.calibration_fit import Sample

W = Workload(pixels=100, hit_fraction=1.0, p_t=1, p_i=1, s_t=1, s_i=1, a_t=1, a_i=1, t_v=1,
             m=0.5)
S = RenderSettings(0, 0.1, True, False)


def _sample(primary: float, shadow: float) -> Sample:
    return Sample(W, S, {"primary": primary, "shadow": shadow})


def test_repeat_scatter_is_the_relative_difference_of_the_same_frames():
    first = [_sample(1.0, 1.0), _sample(2.0, 2.0)]
    again = [_sample(1.1, 0.9), _sample(2.0, 3.0)]  # frames 0 % and 25 % apart
    out = repeat_scatter(first, again)
    assert out["frame"]["mean"] == pytest.approx(0.125)
    assert out["phases"]["primary"]["mean"] == pytest.approx(0.05)
    assert out["phases"]["shadow"]["mean"] == pytest.approx(0.3)
    assert set(out["phases"]) == {"primary", "shadow"}


def test_repeat_scatter_refuses_unpaired_passes():
    with pytest.raises(ValueError):
        repeat_scatter([_sample(1.0, 1.0)], [])
