"""The fixed baseline's and the oracle's search by measurement (``bench tracer-tuned``): the
best-looking setting whose measured frame fits the target, over the settings in cost order."""

from __future__ import annotations

import pytest

from benchmarks.governed.tracer_tuned import measured_settings as ms
from governed.mesh.tuned_renderer import ao_levels


class FakeRenderer:
    """Only what the search touches: the AO radius and the tuning switch."""

    ao_radius = 0.1
    tuning = False


def cost(settings) -> float:
    """Seconds rising with every knob: 10 ms + 1 ms Phong + 2 ms shadows + 1 ms per AO ray."""
    return 0.010 + 0.001 * settings.phong + 0.002 * settings.shadows + 0.001 * settings.ao_rays


@pytest.fixture()
def measured(monkeypatch):
    calls = []

    def measure(renderer, camera, settings, repeats):
        calls.append(settings)
        return cost(settings)

    monkeypatch.setattr(ms, "measure_settings", measure)
    return calls


def test_the_order_rises_in_cost_and_holds_every_ao_level():
    order = ms.settings_by_cost(0.1)
    assert [cost(s) for s in order] == sorted(cost(s) for s in order)
    assert [s.ao_rays for s in order[2:]] == list(ao_levels())
    assert (order[0].shadows, order[0].phong, order[1].shadows, order[1].phong) == (
        False, False, False, True)


def test_the_exact_search_finds_the_best_setting_that_fits(measured):
    renderer = FakeRenderer()
    setting, seconds, spent = ms.best_setting_by_measurement(renderer, None, 0.0161)
    # 3 1/16 rays cost 16.06 ms, 3 1/8 rays 16.13 ms: over
    assert (setting.ao_rays, setting.shadows, setting.phong) == (3.0625, True, True)
    assert seconds == pytest.approx(0.0160625)
    assert spent == ms.FRAMES_PER_SETTING * len(measured)
    assert len(measured) <= len(ms.settings_by_cost(0.1)).bit_length()
    assert renderer.tuning is True
    assert not any(cost(s) <= 0.0161 and s.ao_rays > setting.ao_rays for s in measured)


def test_the_search_drops_shadows_then_phong_before_it_gives_up(measured):
    setting, _, _ = ms.best_setting_by_measurement(FakeRenderer(), None, 0.0115)
    assert (setting.ao_rays, setting.shadows, setting.phong) == (0.0, False, True)
    setting, seconds, spent = ms.best_setting_by_measurement(FakeRenderer(), None, 0.005)
    assert (setting.ao_rays, setting.shadows, setting.phong) == (0.0, False, False)
    assert seconds == pytest.approx(0.010)  # nothing fits: the cheapest, measured


def test_a_tolerance_stops_at_the_first_setting_that_fits_close_under_the_target(measured):
    exact = ms.best_setting_by_measurement(FakeRenderer(), None, 0.0400)
    count = len(measured)
    measured.clear()
    rough = ms.best_setting_by_measurement(FakeRenderer(), None, 0.0400, tolerance=0.2)
    assert len(measured) < count
    assert 0.8 * 0.04 <= rough[1] <= 0.04
    assert rough[0].ao_rays <= exact[0].ao_rays
