"""The online learned predictor's figures and goals (no rendering: synthetic frame ratios)."""

import numpy as np

from benchmarks.predictors import online_predictor


def test_tracking_counts_after_the_settle_frames_and_the_largest_overshoot():
    ratios = np.concatenate([np.full(online_predictor.SETTLE, 0.3), [1.15],
                             np.full(29, 1.02)])
    t = online_predictor.tracking(ratios)
    assert t["first_frame_over_target"] == 0.3
    assert t["max_over_target"] == 1.15
    assert abs(t["mean_error_after_settle"] - (0.15 + 29 * 0.02) / 30) < 1e-12


def test_goals_take_the_worst_scene():
    runs = [{"scene": "a", "mean_error_after_settle": 0.02, "max_over_target": 1.1},
            {"scene": "b", "mean_error_after_settle": 0.07, "max_over_target": 1.25}]
    g = online_predictor.goals({"scenes": runs})
    mean, over = (g["online_learned_mean_error_after_20_frames"],
                  g["online_learned_max_over_target"])
    assert mean["value"] == 0.07 and not mean["met"]
    assert over["value"] == 1.25 and not over["met"]
    assert online_predictor.goals({"scenes": runs[:1]})["online_learned_max_over_target"]["met"]
