"""What limits each goal of ``bench volume-tuned`` that a run did not meet, in one line from the
same run's figures: the per-rank model on the validation volumes and calibrated on each test
volume's own views, a rank's render repeated, the oracle and the noise floor, the baseline that
won, the tuner's parts. The issue asks for the goals "met or not"; a line says where the miss
sits, so that a reader can tell a model's miss from the machine's scatter."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.page_cells import percent
from benchmarks.harness.run_record import unmet_goal_lines

#: the goals' partitions, by the name their goals and figures use
PARTITIONS = ("balanced", "subdomains_3to1", "content_on_half_the_ranks")


def goal_limits(figures: dict[str, Any]) -> dict[str, str]:
    """One line per goal not met, keyed by the goal's name."""
    return unmet_goal_lines(figures.get("goals"),
                            lambda name, goal: _limit(name, goal, figures))


def _limit(name: str, goal: dict, figures: dict) -> str | None:
    """The line of goal ``name``, or None for a goal this benchmark no longer names."""
    if name.startswith("model_error_") and name[len("model_error_"):] in PARTITIONS:
        return _model(name[len("model_error_"):], figures)
    if name.startswith("governed_test_volume_"):
        return _governed(figures)
    if name == "beats_baselines":
        return _baselines(goal, figures.get("test_volume_controllers") or {})
    if name == "controller_cost":
        return _cost(figures)
    return None


def _model(partition: str, f: dict) -> str:
    """The carried-over model per test volume, beside the same partition on the validation
    volumes, a model calibrated on the test volume's own views, and a rank's render repeated."""
    errors = f["model_error"]
    line = f"carried over: {_per_volume(errors['test'], partition, with_split=True)}"
    validation = (((f.get("diagnostics") or {}).get("hemocell_study_side_by_side_validation")
                   or {}).get("value") or {}).get(partition)
    if validation:
        line += f"; the same partition on the validation volumes {percent(validation['mean'])}"
    own = _per_volume((errors.get("self_calibrated") or {}).get("test") or {}, partition)
    if own:
        line += f"; calibrated on each test volume's own views: {own}"
    repeat = ((errors.get("validation") or {}).get("imbalanced_orbit") or {}).get(
        "rank_render_repeat")
    if repeat:
        line += (f"; a rank's render of the same view at the same knobs, repeated, strays "
                 f"{percent(repeat['spread_mean'])} mean / {percent(repeat['spread_p95'])} p95 "
                 "on this host, a scatter no per-rank model can go under")
    return line


def _per_volume(volumes: dict[str, dict], partition: str, with_split: bool = False) -> str:
    """"volume X %" for each volume evaluated on ``partition``, joined by commas; with
    ``with_split``, each followed by its first frames' and later frames' errors."""
    return ", ".join(f"{volume} {percent(parts[partition]['rank_render_error']['mean'])}"
                     + (_learning(parts[partition]) if with_split else "")
                     for volume, parts in volumes.items() if partition in parts)


def _learning(figures: dict) -> str:
    """`` (its first N frames A, the M after B)``: the error while each rank's correction
    learns a new volume, and after; empty for a run from before it was measured."""
    split = figures.get("rank_render_error_while_learning")
    if not split or split.get("after") is None:
        return ""
    return (f" (its first {split['frames']} frames {percent(split['first'])}, the "
            f"{figures['frames'] - split['frames']} after {percent(split['after'])})")


def _governed(f: dict) -> str:
    run = f["governed_test_volume"]
    summary, oracle = run["summary"], run.get("oracle") or {}
    floor = f.get("noise_floor") or {}
    return (f"on {run['volume']} the oracle, which knows each sampled view's median cost from "
            f"re-renders, is {percent(oracle.get('mean_error'))} mean / "
            f"{percent(oracle.get('p95_error'))} p95 off, against feed-forward's "
            f"{percent(summary['mean_error'])} / {percent(summary['p95_error'])}; its model + "
            f"feedback misprices frames by {percent(summary.get('model_plus_feedback_error'))}; "
            f"one view at fixed knobs strays {percent(floor.get('mean_off_median'))} mean / "
            f"{percent(floor.get('p95_off_median'))} p95 from its median"
            + ("" if summary.get("frames_a_rank_was_descheduled") is None else
               f"; a rank was descheduled on {summary['frames_a_rank_was_descheduled']} of "
               f"{summary['frames']} frames"))


def _baselines(goal: dict, contest: dict[str, dict[str, dict]]) -> str:
    """Each baseline that was not beaten, against feed-forward on that volume."""
    parts = []
    for lost in goal.get("lost_to") or []:
        volume, _, name = lost.partition(": ")
        runs = contest.get(volume) or {}
        ff, rival = runs.get("feedforward"), runs.get(name)
        if ff and rival:
            margin = rival["mean_ssim"] - ff["mean_ssim"]
            parts.append(f"{volume}: {name} {percent(rival['mean_error'])} mean error at SSIM "
                         f"{rival['mean_ssim']:.5f}, {rival['over_5pct']} frames over 5 %, "
                         f"against feed-forward's {percent(ff['mean_error'])} at "
                         f"{ff['mean_ssim']:.5f}, {ff['over_5pct']} over"
                         + (f" (lost on SSIM alone, by {margin:.5f})"
                            if ff["mean_error"] < rival["mean_error"] else ""))
    return "; ".join(parts)


def _cost(f: dict) -> str:
    cost = f["controller_cost"]
    parts = ("probe", "search", "bookkeeping")
    line = (f"probe {cost['probe_ms']:.2f} ms, search {cost['search_ms']:.2f} ms and "
            f"bookkeeping {cost['bookkeeping_ms']:.2f} ms a frame")
    if cost["mean_share_of_frame"] > 0:  # the frame the shares are of
        frame_ms = sum(cost[f"{p}_ms"] for p in parts) / cost["mean_share_of_frame"]
        line += f", of a {frame_ms:.1f} ms frame"
    if f.get("full_quality_first_view_ms"):
        line += (f"; this host rendered the full-quality first view in "
                 f"{f['full_quality_first_view_ms']:.0f} ms, and a faster host's shorter frames "
                 "raise the share")
    return line
