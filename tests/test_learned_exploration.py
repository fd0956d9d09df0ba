"""The learned predictor fills the budget: log-linear steps, trades, one-off frames (issue 52)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from autotune import AutotuneWarning, BoolKnob, FloatKnob, KnobSpace, LearnedPredictor, Tuner
from autotune.cost_ladder import CostLadder
from autotune.online_regression import OnlineRegression

SPACE = KnobSpace([FloatKnob("samples", 0.25, 2.0, levels=8),
                   FloatKnob("scale", 0.25, 1.0, levels=4)],
                  quality=lambda c: np.log(c["samples"]) + 2 * np.log(c["scale"]))


def caster(knobs: dict) -> float:
    """A volume caster's cost: set-up per pixel plus samples per pixel (seconds)."""
    pixels = knobs["scale"] ** 2
    return 0.012 + 0.03 * pixels + 0.04 * pixels * knobs["samples"]


def run(target: float, frames: int = 40, first: float = 0.0, stall_at: int | None = None,
        cost=caster, space: KnobSpace = SPACE) -> tuple[Tuner, LearnedPredictor, np.ndarray]:
    """A closed loop on ``cost`` (no noise); ``first`` adds a set-up to frame 0, ``stall_at``
    makes one frame four times dearer."""
    learned = LearnedPredictor(space)
    tuner = Tuner(space, learned, target)
    seconds = []
    for i in range(frames):
        decision = tuner.choose()
        t = cost(decision.knobs) + (first if i == 0 else 0.0)
        t *= 4.0 if i == stall_at else 1.0
        tuner.observe(t)
        seconds.append(t)
    return tuner, learned, np.array(seconds) / target


def best_under(target: float, cost=caster, space: KnobSpace = SPACE) -> float:
    """Cost of the highest-quality setting that fits (the oracle on a noiseless renderer)."""
    grid = space.grid()
    costs = np.array([cost(space.at_index(i)) for i in range(space.size)])
    quality = space.quality(grid)
    fits = costs <= target
    return float(costs[fits][np.argmax(quality[fits])])


HYSTERESIS = ("issue 52, not reachable here: the best setting is 0.983 of the target and the "
              "search keeps a setting that fits unless a better one fits with 2 % headroom "
              "(autotune/search.py), so from 0.90 it never climbs to 0.983")
LONG_TRADE = ("issue 52 not met yet: the best setting is a trade three rungs past the frames "
              "seen; its extrapolation's standard errors price it over the target until frame 15")


@pytest.mark.parametrize("target", [
    pytest.param(0.03, marks=pytest.mark.xfail(reason=HYSTERESIS, strict=True)), 0.045, 0.06,
    pytest.param(0.08, marks=pytest.mark.xfail(reason=LONG_TRADE, strict=True))])
def test_it_reaches_the_best_setting_under_the_target_within_a_few_frames(target):
    _, _, ratios = run(target)
    best = best_under(target) / target
    assert ratios.max() <= 1.2  # never more than its margin over
    reached = np.flatnonzero(ratios >= best - 1e-9)
    assert reached.size and reached[0] < 10
    assert np.all(ratios[20:] >= best - 1e-9) and np.all(ratios[20:] <= 1.0)


def test_it_trades_one_knob_for_another():
    # 0.08: the climb passes through image scale 1.0; the best setting lowers it to 0.75 for
    # twice the samples (at 0.06 the climb reaches the best setting with no trade)
    tuner, _, ratios = run(0.08)
    settled = tuner.history[-1].knobs
    assert ratios[-1] == pytest.approx(best_under(0.08) / 0.08)
    visited = {(r.knobs["samples"], r.knobs["scale"]) for r in tuner.history}
    assert any(s > settled["samples"] for s, _ in visited) or any(
        sc > settled["scale"] for _, sc in visited)


def test_the_first_frame_of_a_renderer_does_not_teach():
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutotuneWarning)  # no "no setting fits" from set-up
        tuner, learned, ratios = run(0.06, first=0.45)
    assert learned.dropped == [0]
    assert tuner.history[1].knobs == SPACE.lowest()  # the second frame confirms or not
    clean, _, _ = run(0.06)  # the same renderer with no set-up: the same climb, at most a
    # frame later (one frame fewer fitted), then the same choices

    def climb(t: Tuner) -> list[tuple]:
        steps = [tuple(r.knobs.values()) for r in t.history]
        return [s for i, s in enumerate(steps) if i == 0 or s != steps[i - 1]]

    assert climb(tuner) == climb(clean)
    assert [r.knobs for r in tuner.history[10:]] == [r.knobs for r in clean.history[10:]]
    assert ratios[1:].max() <= 1.0 and learned.confidence().frames == 39


def test_a_first_frame_that_the_second_confirms_is_kept():
    _, learned, _ = run(0.06)
    assert learned.dropped == [] and learned.confidence().frames == 40


def test_a_stall_is_dropped_and_does_not_move_the_setting():
    tuner, learned, ratios = run(0.06, stall_at=25)
    assert learned.dropped == [25]
    assert tuner.history[26].knobs == tuner.history[24].knobs
    assert ratios[-1] == pytest.approx(ratios[24])


def test_a_lasting_jump_is_learned_not_dropped():
    state = {"factor": 1.0}

    def heavier(knobs):
        return caster(knobs) * state["factor"]

    learned = LearnedPredictor(SPACE)
    tuner = Tuner(SPACE, learned, 0.06)
    for i in range(40):
        state["factor"] = 2.0 if i >= 20 else 1.0
        tuner.observe(heavier(tuner.choose().knobs))
    assert learned.dropped == []
    assert heavier(tuner.history[-1].knobs) <= 0.06


def test_a_knob_that_costs_nothing_goes_to_its_top():
    space = KnobSpace([FloatKnob("samples", 0.25, 2.0, levels=8), BoolKnob("free")])

    def cost(knobs):
        return 0.01 + 0.01 * knobs["samples"]

    tuner, _, ratios = run(0.1, cost=cost, space=space)
    assert tuner.history[-1].knobs["free"] is True
    assert ratios.max() <= 1.0


def test_a_target_no_setting_meets_keeps_the_cheapest_and_warns():
    with pytest.warns(AutotuneWarning, match="no setting fits"):
        tuner, _, _ = run(0.005, frames=6)
    assert all(r.knobs == SPACE.lowest() for r in tuner.history)


def test_the_ladder_has_a_rung_per_level_for_short_knobs_and_segments_for_long_ones():
    space = KnobSpace([FloatKnob("a", 0, 1, levels=4), FloatKnob("b", 0, 64, levels=65)])
    ladder = CostLadder(space)
    assert ladder.width == 3 + 8
    cols = ladder.columns(np.array([[2, 12]]))[0]
    assert cols[:3].tolist() == [1, 1, 0]
    assert cols[3:].tolist() == [1, 0.5, 0, 0, 0, 0, 0, 0]
    penalty = ladder.penalty()
    assert np.allclose(penalty, penalty.T) and np.all(np.linalg.eigvalsh(penalty) > -1e-12)
    assert penalty[2, 3] == 0  # rungs of different knobs are not tied
    with pytest.raises(ValueError, match="rungs"):
        CostLadder(space, rungs=0)
    with pytest.raises(ValueError, match="smoothness"):
        CostLadder(space, smoothness=-1.0)


def test_a_penalty_prices_an_unreached_rung_from_its_neighbour():
    ladder = CostLadder(KnobSpace([FloatKnob("a", 0, 3, levels=4)]))
    penalty = np.zeros((4, 4))
    penalty[1:, 1:] = ladder.penalty()
    fit = OnlineRegression(4, penalty=penalty, ridge=1e-9)
    for level, cost in ((0, 1.0), (1, 1.3), (0, 1.0), (1, 1.3)):
        fit.add(np.array([1.0, *ladder.columns(np.array([[level]]))[0]]), math.log(cost))
    mean, error = fit.predict(np.column_stack([np.ones(3), ladder.columns(np.arange(1, 4)[:,
                                                                           None])]))
    steps = np.diff(np.concatenate([[0.0], mean]))
    assert steps[1] == pytest.approx(steps[0], rel=0.05)  # the step not taken: the last one's
    assert error[2] > error[1] > error[0]  # and less sure the further from the frames seen
    with pytest.raises(ValueError, match="symmetric"):
        OnlineRegression(2, penalty=np.array([[0.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="penalty"):
        OnlineRegression(2, penalty=np.zeros((3, 3)))


def test_one_off_must_be_a_positive_number():
    with pytest.raises(ValueError, match="one_off"):
        LearnedPredictor(SPACE, one_off=0.0)
    with pytest.raises(ValueError, match="track"):
        OnlineRegression(2, track=0.0)
    with pytest.raises(ValueError, match="prior_rows"):
        OnlineRegression(2, prior_rows=-1.0)
