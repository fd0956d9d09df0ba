"""The Tuner facade: embedding example, validation, fallbacks, warnings, history and timing."""

import math
import textwrap
import warnings

import numpy as np
import pytest

import autotune
from autotune import (
    AutotuneWarning,
    BoolKnob,
    FeedForwardController,
    FixedController,
    IntKnob,
    KnobSpace,
    PIController,
    Tuner,
)

SPACE = KnobSpace([IntKnob("ao_rays", 0, 64), BoolKnob("shadows")])


def model(c: dict) -> np.ndarray:
    return 0.002 + 0.0002 * c["ao_rays"] + 0.004 * c["shadows"]


def test_module_docstring_example_runs() -> None:
    doc = autotune.__doc__
    block = doc.split("::\n\n", 1)[1]  # the indented block after the '::' line
    lines = []
    for line in block.splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line)
    namespace: dict = {}
    exec(textwrap.dedent("\n".join(lines)), namespace)
    tuner = namespace["tuner"]
    assert len(tuner.history) == 3
    assert all(r.measured is not None and r.measured > 0 for r in tuner.history)


@pytest.mark.parametrize("bad", [0, -0.01, math.nan, math.inf, -math.inf, "fast", True])
def test_bad_target_raises_naming_the_value(bad) -> None:
    with pytest.raises(ValueError, match="target_seconds") as err:
        Tuner(SPACE, model, bad)
    assert repr(bad) in str(err.value)
    tuner = Tuner(SPACE, model, 0.01)
    with pytest.raises(ValueError, match="target_seconds"):
        tuner.target_seconds = bad
    assert tuner.target_seconds == 0.01


def test_target_can_change_at_run_time() -> None:
    tuner = Tuner(SPACE, model, 0.010)
    low = tuner.choose()
    tuner.observe(low.predicted)
    tuner.target_seconds = 0.020
    high = tuner.choose()
    assert high.predicted > low.predicted and high.predicted <= 0.020
    assert tuner.history[-1].target == 0.020


def test_nothing_fits_gives_cheapest_and_warns_once() -> None:
    tuner = Tuner(SPACE, model, 0.001)
    with pytest.warns(AutotuneWarning, match="no setting fits") as caught:
        for _ in range(5):
            decision = tuner.choose()
            tuner.observe(0.002)
    assert len(caught) == 1
    assert decision.over_budget and decision.knobs == {"ao_rays": 0, "shadows": False}
    assert tuner.trouble["over-budget"] == 5
    assert all(r.over_budget for r in tuner.history)


def test_predictor_failures_fall_back_and_warn_once_per_kind() -> None:
    mode = {"now": "raise"}

    def flaky(c: dict) -> np.ndarray:
        if mode["now"] == "raise":
            raise ZeroDivisionError("boom")
        if mode["now"] == "nan":
            return model(c) * np.nan
        if mode["now"] == "negative":
            return -model(c)
        return model(c)

    tuner = Tuner(SPACE, flaky, 0.010)
    with pytest.warns(AutotuneWarning) as caught:
        first = tuner.choose()  # very first frame: nothing good yet -> cheapest
        tuner.observe(0.003)
        assert first.knobs == SPACE.lowest()
        mode["now"] = "ok"
        good = tuner.choose()
        tuner.observe(good.predicted)
        for kind in ("raise", "nan", "negative", "raise", "nan"):
            mode["now"] = kind
            assert tuner.choose().knobs == good.knobs  # keeps the last good setting
            tuner.observe(0.009)
    assert len(caught) == 3
    assert {str(w.message).split(" ")[1] for w in caught} >= {"raised", "returned"}
    assert tuner.trouble == {
        "predictor-raised": 3,
        "predictor-non-finite": 2,
        "predictor-negative": 1,
    }
    assert [r.trouble for r in tuner.history][:3] == ["predictor-raised", None, "predictor-raised"]
    assert tuner.correction == pytest.approx(1.0)  # fallback frames never feed the correction


def test_bad_measurements_are_ignored_with_a_warning() -> None:
    tuner = Tuner(SPACE, model, 0.010)
    with pytest.warns(AutotuneWarning, match="ignored measured time"):
        for bad in (math.nan, 0.0, -1.0, math.inf):
            tuner.choose()
            tuner.observe(bad)
    assert tuner.trouble["bad-measurement"] == 4
    assert tuner.correction == 1.0
    assert all(r.measured is None for r in tuner.history)


def test_observe_without_a_pending_frame_raises() -> None:
    tuner = Tuner(SPACE, model, 0.010)
    with pytest.raises(RuntimeError):
        tuner.observe(0.01)
    tuner.choose()
    tuner.observe(0.01)
    with pytest.raises(RuntimeError):
        tuner.observe(0.01)


def test_frame_times_the_block_unless_observed_inside() -> None:
    tuner = Tuner(SPACE, model, 0.010)
    with tuner.frame() as knobs:
        assert set(knobs) == {"ao_rays", "shadows"}
    assert 0 < tuner.history[-1].measured < 0.5
    with tuner.frame():
        tuner.observe(0.0123)  # e.g. a GPU-measured time
    assert tuner.history[-1].measured == 0.0123


def test_frame_that_raises_is_not_observed() -> None:
    tuner = Tuner(SPACE, model, 0.010)
    with pytest.raises(KeyError), tuner.frame():
        raise KeyError("render failed")
    assert tuner.history[-1].measured is None
    tuner.choose()  # the loop carries on


def test_scalar_predictor_path() -> None:
    calls = []

    def scalar(knobs: dict) -> float:
        calls.append(knobs)
        return 0.002 + 0.0002 * knobs["ao_rays"] + 0.004 * knobs["shadows"]

    tuner = Tuner(SPACE, scalar, 0.010, vectorized=False)
    decision = tuner.choose()
    assert decision.predicted <= 0.010 and decision.predicted > 0.009
    assert len(calls) == decision.evaluations < 20
    assert all(type(k["ao_rays"]) is int and type(k["shadows"]) is bool for k in calls)


@pytest.mark.parametrize(
    ("name", "cls"),
    [("feedforward", FeedForwardController), ("fixed", FixedController), ("pi", PIController)],
)
def test_controller_by_name(name: str, cls: type) -> None:
    tuner = Tuner(SPACE, model, 0.010, controller=name)
    assert isinstance(tuner.controller, cls)
    with tuner.frame():
        pass


def test_controller_instance_and_unknown_name() -> None:
    ctrl = FeedForwardController(SPACE, 1.0, gain=0.3)
    tuner = Tuner(SPACE, model, 0.010, controller=ctrl)
    assert tuner.controller is ctrl and ctrl.target_seconds == 0.010
    with pytest.raises(ValueError, match="'pid'"):
        Tuner(SPACE, model, 0.010, controller="pid")
    other = KnobSpace([IntKnob("ao_rays", 0, 8)])
    with pytest.raises(ValueError, match="knobs"):
        Tuner(other, model, 0.010, controller=ctrl)


def test_history_is_bounded() -> None:
    tuner = Tuner(SPACE, model, 0.010, history_limit=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(10):
            with tuner.frame():
                pass
    assert len(tuner.history) == 4
    assert tuner.history[1:] == [tuner.history[1], tuner.history[2], tuner.history[3]]
    with pytest.raises(ValueError, match="history_limit"):
        Tuner(SPACE, model, 0.010, history_limit=0)


def test_pi_over_budget_warning_quotes_no_prediction() -> None:
    """PI has no model: its over-budget warning names the target, not a 'nan ms' prediction."""
    tuner = Tuner(SPACE, model, 0.001, controller="pi")
    with pytest.warns(AutotuneWarning, match="no setting fits") as caught:
        for _ in range(40):
            tuner.choose()
            tuner.observe(0.010)
    assert "nan" not in str(caught[0].message) and "cheapest" in str(caught[0].message)
