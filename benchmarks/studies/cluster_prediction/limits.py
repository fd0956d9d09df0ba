"""What limits each goal of ``bench cluster-prediction`` that a run did not meet, in one line
from the same run's figures: the other models scored on the same real runs (which tells the
network's miss from the features'), the cluster model's bias, the emulation's error against
real runs, and how far the node runs that give the features are from the runs they predict."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.page_cells import percent
from benchmarks.harness.run_record import unmet_goal_lines
from benchmarks.studies.cluster_prediction.goals import MODELS, experiment_scores, shipped

#: the goal's name -> its experiment
GOALS = {f"{name}_r2": name for name in MODELS}


def goal_limits(figures: dict[str, Any]) -> dict[str, str]:
    """One line per goal not met, keyed by the goal's name."""
    return unmet_goal_lines(figures.get("goals"), lambda name, _goal: (
        _experiment(GOALS[name], figures) if name in GOALS else None))


def _experiment(name: str, figures: dict) -> str:
    scores = experiment_scores(figures)[name]
    key = shipped(figures)[name]
    others = "; ".join(f"{what} {scores[k]['r2']:.3f}" for k, what in MODELS[name]
                       if k != key and k in scores)
    own = scores[key]
    line = (f"on the same {own.get('n', '—')} real runs, R² of {others}; the cluster model is "
            f"{percent(own['mean_rel_error'])} off on average, "
            f"{percent(own['mean_signed_rel_error'])} signed")
    emulation = (figures.get("emulation_vs_real") or {}).get("scores", {}).get(
        "one_rank_per_core", {}).get("histogram")
    if emulation:
        line += (f"; the emulation its rows come from is {percent(emulation['mean_rel_error'])} "
                 "off the real runs")
    fidelity = figures.get("upgrade", {}).get("feature_fidelity")
    if fidelity:
        line += (f"; the node runs that give the features are "
                 f"{percent(fidelity['mean_abs_off'])} off the real runs' render times")
    return line
