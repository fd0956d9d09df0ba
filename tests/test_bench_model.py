"""``autotune bench tracer-model``'s figures: the model's errors, and the measurement repeat (the
measured side's own scatter)."""

from __future__ import annotations

import pytest

from benchmarks.governed.tracer_model import ao_ray_split, errors, repeat_scatter
from governed.mesh.calibration_frames import Sample
from models.workload import Workload
from raytracer.mesh.tracer import RenderSettings

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


class _Fixed:
    """A model that predicts the same seconds for every phase."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def phase_seconds(self, workload: Workload, settings: RenderSettings) -> dict[str, float]:
        return {"primary": self.seconds, "shadow": self.seconds}


def test_errors_give_the_bias_beside_the_absolute_error():
    """Frames priced 25 % high and a sixth low: the mean error and the bias differ; all priced
    25 % low: bias -25 %."""
    samples = [_sample(0.8, 0.8), _sample(1.2, 1.2)]
    out = errors(_Fixed(1.0), samples)
    assert out["frame"]["mean"] == pytest.approx((0.25 + 1 / 6) / 2)
    assert out["frame"]["bias"] == pytest.approx((0.25 - 1 / 6) / 2)
    low = errors(_Fixed(0.75), [_sample(1.0, 1.0)] * 2)
    assert low["frame"]["bias"] == pytest.approx(-0.25) and low["frame"]["mean"] == 0.25
    assert low["phases"]["shadow"] == {"mean": 0.25, "p95": 0.25, "bias": -0.25, "n": 2}


class _Line:
    """A model pricing the AO phase at ``intercept + slope * rays`` seconds a pixel."""

    def __init__(self, intercept: float, slope: float) -> None:
        self.intercept, self.slope = intercept, slope

    def phase_seconds(self, workload: Workload, settings: RenderSettings) -> dict[str, float]:
        return {"ao": (self.intercept + self.slope * settings.ao_rays) * workload.pixels}


def test_the_ao_split_reads_each_views_intercept_and_slope_apart():
    """Two views measured at 20 + 30 n ns a pixel (the second at twice the size), a model at
    40 + 30 n: the intercept priced twice over, the slope right; a frame without AO and a
    view with one ray count say nothing about the split."""
    big = Workload(**{**W.to_dict(), "pixels": 200})
    lone = Workload(**{**W.to_dict(), "pixels": 50})

    def frame(w: Workload, rays: float) -> Sample:
        return Sample(w, RenderSettings(rays, 0.1, True, False),
                      {"ao": (20e-9 + 30e-9 * rays) * w.pixels} if rays else {})

    samples = [frame(w, n) for w in (W, big) for n in (0, 1, 4, 16)] + [frame(lone, 4)]
    out = ao_ray_split(_Line(40e-9, 30e-9), samples)
    assert out["views"] == 2
    assert out["measured"]["intercept_ns_per_pixel"] == pytest.approx(20.0)
    assert out["measured"]["slope_ns_per_pixel_per_ray"] == pytest.approx(30.0)
    assert out["intercept_predicted_over_measured"] == pytest.approx(2.0)
    assert out["slope_predicted_over_measured"] == pytest.approx(1.0)
    assert ao_ray_split(_Line(40e-9, 30e-9), [frame(lone, 4)]) == {}


def test_the_quick_calibration_is_judged_against_the_full_one_on_the_same_frames():
    """Issue 49: a quick calibration's held-out error within 2 points of a full one's."""
    from benchmarks.governed.tracer_model import device_goals

    def figures(quick_mean: float) -> dict:
        return {"all": {"held_out": {"frame": {"mean": 0.08, "p95": 0.2}, "phases": {}}},
                "measurement_repeat": {"frame": {"mean": 0.02}},
                "runtime_transfer": {"quick_calibration": {"seconds": 12.0,
                                                           "frame": {"mean": quick_mean}},
                                     "full_calibration_here": {"mean": 0.08}}}

    near = device_goals(figures(0.095))["quick_calibration_error_over_full"]
    assert near["met"] and near["value"] == pytest.approx(0.015)
    far = device_goals(figures(0.13))["quick_calibration_error_over_full"]
    assert not far["met"] and far["value"] == pytest.approx(0.05)
