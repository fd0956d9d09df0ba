"""Seed 004's communication ratio as a factor against the added term: each form is fitted
and scored leaving one configuration out; where every stage has one partner they agree."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.renderers.compositing_forms import (
    communication_ratio_forms,
    forms_table,
    stage_columns,
)


def _config(stages: list[tuple[int, float, float]], seconds: float, messages: bool = False
            ) -> tuple[str, dict]:
    name = "2-3-swap (messages)" if messages else "2-3-swap"
    return name, {"stage_work_max": [list(s) for s in stages],
                  "stages_ms": [1e3 * seconds / len(stages)] * len(stages)}


def _algorithms(seconds_of) -> dict:
    """Configurations of uneven partner counts (1 or 2 per stage) timed by ``seconds_of``."""
    rng = np.random.default_rng(3)
    out = {}
    for k in range(12):
        stages = [(int(rng.integers(1, 3)), float(rng.uniform(1e6, 8e6)),
                   float(rng.uniform(1e5, 5e5))) for _ in range(int(rng.integers(1, 4)))]
        name, config = _config(stages, seconds_of(stages))
        out[str(k)] = {name: config}
    return out


def _factor_seconds(stages) -> float:
    most = max(p for p, _, _ in stages)
    return sum(1e-4 * p / most + 2e-9 * (p / most) * b + 1e-8 * px for p, b, px in stages)


def test_the_form_the_times_follow_predicts_them_best():
    forms = communication_ratio_forms(_algorithms(_factor_seconds))["forms"]["default"]
    assert forms["configurations"] == 12 and forms["with_uneven_partner_counts"] > 0
    assert forms["factor"]["leave_one_out_mean_error"] < 1e-3
    assert forms["added"]["leave_one_out_mean_error"] > 10 * forms["factor"][
        "leave_one_out_mean_error"]


def test_with_one_partner_in_every_stage_the_forms_are_one_model():
    config = {"stage_work_max": [[1, 4e6, 2e5], [1, 2e6, 1e5]]}
    assert stage_columns(config, "added") == pytest.approx(stage_columns(config, "factor"))


def test_transports_are_fitted_apart():
    algorithms = _algorithms(_factor_seconds)
    for runs in list(algorithms.values())[:6]:
        (config,) = runs.values()
        runs["2-3-swap (messages)"] = config
    got = communication_ratio_forms(algorithms)["forms"]
    assert got["messages"]["configurations"] == 6 and got["default"]["configurations"] == 12


def test_the_page_shows_both_forms_per_transport():
    table = forms_table(communication_ratio_forms(_algorithms(_factor_seconds)))
    rows = [line for line in table if line.startswith("| default")]
    assert len(rows) == 1 and rows[0].count("%") == 4
