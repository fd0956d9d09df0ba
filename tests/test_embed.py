"""``autotune bench embed``: its figures, the goals block and a quick run (issue 52)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.tuner import embed


def test_the_path_turns_3_degrees_while_steady_then_12():
    a = embed.angles(6, steady=3)
    assert a.tolist() == [0, 3, 6, 9, 21, 33]


def test_figures_count_after_the_settle_frames_and_name_the_first_frame_within_5pct():
    ratios = [0.3] * 4 + [0.97] + [1.1] * 15 + [1.02] * 20
    run = {"seconds": [r * 0.05 for r in ratios], "knobs": [{"a": 1}] * 40, "dropped": [0]}
    f = embed.figures(run, 0.05, steady=40)
    assert f["first_frame_within_5pct"] == 5
    assert f["mean_off_after_settle"] == pytest.approx(0.02)
    assert f["worst_frame"] == pytest.approx(1.1)
    assert f["dropped_frames"] == [0] and f["last_knobs"] == {"a": 1}
    never = embed.figures({**run, "seconds": [0.5 * 0.05] * 40}, 0.05)
    assert never["first_frame_within_5pct"] is None


def test_the_oracle_takes_the_best_setting_that_fits_and_measures_fresh_frames_of_it(
        monkeypatch):
    costs = np.array([[0.02, 0.04, 0.09], [0.02, 0.06, 0.12]])
    quality = np.array([0.0, 1.0, 2.0])
    assert embed.oracle_pick(costs[0], quality, 0.05) == 1
    assert embed.oracle_pick(costs[1], quality, 0.05) == 0
    assert embed.oracle_pick(costs[1], quality, 0.01) == 0  # none fits: the cheapest
    space = embed.KnobSpace([embed.FloatKnob("k", 0.0, 2.0, levels=3)])
    rendered = []

    class Loop:
        def view(self, degrees):
            self.v = 0 if degrees == 0.0 else 1

        def render(self, k):
            rendered.append((self.v, k))

    loop = Loop()
    # a fresh frame runs 10 % dearer than the table said
    monkeypatch.setattr(embed, "timed", lambda render, knobs: (
        render(**knobs), 1.1 * costs[loop.v, int(round(knobs["k"]))])[1])
    table = {"frames": [0, 1], "seconds": costs, "path": [0.0, 3.0]}
    errors = embed.oracle_errors(loop, space, table, quality, 0.05)
    assert rendered.count((0, 1.0)) == rendered.count((1, 0.0)) == 1 + embed.ORACLE_FRESH
    assert errors.mean() == pytest.approx((abs(0.044 - 0.05) + abs(0.022 - 0.05)) / 2 / 0.05)
    assert np.mean(errors <= embed.WITHIN) == 0  # 12 and 56 % off: never within 5 %


def case(mean=0.04, oracle=0.02, worst=1.1, first=5):
    return {"case": "c", "mean_off_after_settle": mean, "oracle_error": oracle,
            "worst_frame": worst, "first_frame_within_5pct": first}


def test_the_goals_are_the_issues_three_and_take_the_worst_case():
    g = embed.goals([case(), case(mean=0.09, oracle=0.08)])
    assert set(g) == {"mean_off_target_after_frame_20", "worst_frame_over_target",
                      "within_5pct_by_frame_10_on_steady_orbit"}
    assert all(goal["met"] for goal in g.values())
    bad = embed.goals([case(), case(mean=0.06, worst=1.3, first=None)])
    assert bad["mean_off_target_after_frame_20"]["value"] == pytest.approx(0.06 / 0.05)
    assert not any(goal["met"] for goal in bad.values())
    assert bad["within_5pct_by_frame_10_on_steady_orbit"]["never"] == ["c"]
    limited = embed.goals([{**case(first=None), "oracle_within_5pct": 0.0, "target_ms": 80.0}])
    assert limited["within_5pct_by_frame_10_on_steady_orbit"]["oracle_never_within_5pct"] == [
        "c at 80 ms"]


@pytest.fixture(scope="module")
def vtk_reason() -> str | None:
    pytest.importorskip("vtk", reason="VTK is the bench extra")
    return embed.vtk_offscreen()


def test_a_quick_run_reports_every_figure_and_saves_with_its_run_block(vtk_reason, monkeypatch,
                                                                       capsys):
    if vtk_reason:
        pytest.skip(vtk_reason)
    saved = {}
    monkeypatch.setattr(embed, "save_result", lambda name, figures: saved.update({name: figures}))
    assert embed.main(["--quick", "--no-tracer", "--json", "--save"]) == 0
    out = json.loads(capsys.readouterr().out)
    name = "embed_quick_no_tracer.json"  # off the protocol twice: a name of its own
    assert list(saved) == [name] and saved[name]["goals"]
    assert not any(goal["decides"] for goal in saved[name]["goals"].values())
    assert {"machine", "commit", "others_share"} <= set(out["run"])
    (cold,) = out["cases"]
    assert cold["warm_up"] is False and 0 in cold["dropped_frames"]  # VTK's set-up frame
    assert len(cold["measured_ms"]) == embed.QUICK["frames"]
    for key in ("mean_off_after_settle", "p95_off_after_settle", "worst_frame",
                "first_frame_within_5pct", "oracle_error", "oracle_within_5pct"):
        assert key in cold
    assert len(out["goals"]) == 3


def test_the_tracer_case_runs_through_the_public_api(capsys):
    assert embed.main(["--quick", "--no-vtk", "--json"]) == 0
    (traced,) = json.loads(capsys.readouterr().out)["cases"]
    assert traced["case"].startswith("tracer") and traced["warm_up"] is True
    assert traced["oracle_error"] >= 0 and traced["worst_frame"] > 0
