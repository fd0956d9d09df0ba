"""Replay runner: controllers compared on identical recorded frames, deterministically."""

import numpy as np
import pytest

from autotune import FeedForwardController, PIController
from autotune.replay import (
    Recording,
    RecordingError,
    fixed_by_measurement,
    fixed_controller,
    replay,
    tune_pi_gains,
)


def synthetic(seed: int, frames: int = 60, step_at: int = 30) -> Recording:
    """40 settings of rising cost; the view's cost doubles at ``step_at``; 3 % noise on the
    measured frames. The model is imperfect the way a probe and a model are: 20 % low overall,
    wrong in slope across settings (cheap ones 15 % under, dear ones 15 % over), and its
    estimate of each view 5 % off at random."""
    rng = np.random.default_rng(seed)
    cost = np.linspace(0.004, 0.02, 40)
    view = np.where(np.arange(frames) >= step_at, 2.0, 1.0) * rng.uniform(0.9, 1.1, frames)
    measured = view[:, None] * cost[None, :] * rng.normal(1.0, 0.03, (frames, 40))
    view_estimate = view * rng.normal(1.0, 0.05, frames)
    slope = 1.0 + 0.15 * np.linspace(-1.0, 1.0, 40)
    predicted = 0.8 * view_estimate[:, None] * (cost * slope)[None, :]
    settings = [{"ao_rays": a} for a in range(40)]
    return Recording(settings, np.arange(40.0), predicted, measured, {"seed": seed})


def test_replay_is_deterministic_and_feedforward_beats_fair_baselines():
    target = 0.012
    evaluate = synthetic(1)
    runs = {}
    kp, ki = tune_pi_gains([synthetic(2), synthetic(3)], lambda r: target)
    for name, make in {
        "feedforward": lambda r: FeedForwardController(r.space(), target),
        "fixed": lambda r: fixed_controller(r, target),
        "pi": lambda r: PIController(r.space(), target, kp=kp, ki=ki),
    }.items():
        a = replay(evaluate, make(evaluate)).summary()
        b = replay(evaluate, make(evaluate)).summary()
        assert a == b
        runs[name] = a
    ff = runs["feedforward"]
    # what is left is the model's own error after feedback (5 % view noise + 3 % frame noise),
    # not the controller's: a controller that mis-steps adds to it
    assert ff["mean_error"] < 0.07 and ff["mean_error"] <= 1.3 * ff["model_error"]
    assert runs["feedforward"]["mean_error"] < runs["pi"]["mean_error"]
    assert runs["feedforward"]["mean_error"] < runs["fixed"]["mean_error"]
    assert runs["feedforward"]["over"] < runs["pi"]["over"]


def test_fixed_baseline_is_tuned_by_measurement_on_the_first_frame():
    r = synthetic(4)
    i = fixed_by_measurement(r, 0.012)
    assert r.measured[0, i] <= 0.012 < r.measured[0, i + 1]
    chosen = replay(r, fixed_controller(r, 0.012)).chosen
    assert np.all(chosen == i)


def test_target_may_change_per_frame():
    r = synthetic(5)
    targets = np.where(np.arange(r.frames) < 45, 0.012, 0.024)
    res = replay(r, FeedForwardController(r.space(), 0.012), targets)
    assert res.measured[50:].mean() > 1.5 * res.measured[35:45].mean()


def test_recording_round_trip_and_errors():
    r = synthetic(6, frames=4)
    again = Recording.from_dict(r.to_dict(), "rec.json")
    np.testing.assert_array_equal(again.measured, r.measured)
    with pytest.raises(RecordingError, match="rec.json.*version"):
        Recording.from_dict(r.to_dict() | {"version": 7}, "rec.json")
    with pytest.raises(RecordingError, match="finite"):
        Recording(r.settings, r.quality, r.predicted, r.measured * np.nan)
    with pytest.raises(RecordingError, match="worst look first"):
        Recording(r.settings, r.quality[::-1], r.predicted, r.measured)
