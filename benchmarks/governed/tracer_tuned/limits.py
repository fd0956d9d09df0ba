"""What limits each goal of ``bench tracer-tuned`` that a run did not meet, in one line from the
same run's figures: the oracle and the noise floor measured beside the product, the probe
policies and feedback run beside it, the baseline that beat it. The issue asks for the goals
"met or not, with what limits each"; a line says where the miss sits, not why it must."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.governed.tracer_tuned.goals import LOAD_FEEDBACK, PRODUCT, over_budget_failures
from benchmarks.governed.tracer_tuned.oracle import ORACLE_EVERY
from benchmarks.harness.page_cells import percent
from benchmarks.harness.run_record import unmet_goal_lines

#: the product's variants run on the same paths: each probe policy, and frame feedback
POLICIES = {"feedforward-always": "a probe every frame", "feedforward-never": "no probe after "
            "the first", "feedforward-frame": "feedback on the whole frame"}


def goal_limits(figures: dict[str, Any]) -> dict[str, str]:
    """One line per goal not met, keyed by the goal's name (goals with nothing in the run
    that bears on them are left out)."""
    by_scene = {r["scene"]: r for r in figures.get("paper") or []}
    return unmet_goal_lines(figures.get("goals"),
                            lambda name, goal: _limit(name, goal, figures, by_scene))


def _limit(name: str, goal: dict, figures: dict, by_scene: dict[str, dict]) -> str | None:
    """The line of goal ``name``: a scene-and-path goal, or one over the whole run."""
    if name == "frames_over_budget_vs_baselines_as_good":
        return _over_budget(goal)
    if name == "cost_step_recovery_frames":
        return _cost_step(figures.get("cost_step") or {})
    if name.startswith("load_recovery_after_"):
        return _load(name.removeprefix("load_recovery_after_").removesuffix("_frames"),
                     figures.get("changing_load") or {})
    scene, _, rest = name.partition("_")
    r = by_scene.get(scene)
    if r is None:
        return None
    if rest == "tuner_share":
        return _tuner_share(r)
    if rest == "first_frame_of_scene":
        return _first_frame(r, "orbit", "error_first_frame", "the first frame of the scene")
    path, _, kind = rest.partition("_")
    if path not in r["controllers"].get(PRODUCT, {}):
        return None
    if kind in ("mean_error", "p95_error"):
        return _tracking(r, path)
    if kind == "model_feedback_vs_noise":
        return _pricing(r, path)
    if kind == "not_dominated":
        return _dominance(r, path, goal.get("dominated_by") or [])
    if kind == "quality_reversals_per_60_frames":
        return _reversals(r, path)
    if kind == "first_frame_after_turn":
        return _first_frame(r, path, "error_first_frame_after_turn", "the view after the turn")
    return None


def _variants(r: dict, path: str, key: str, form: Callable[[float], str] = percent) -> str:
    """``key`` of the same path under each other probe policy and feedback, as "label value"
    pairs joined by semicolons."""
    found = [f"{label} {form(r['controllers'][v][path][key])}" for v, label in POLICIES.items()
             if v in r["controllers"] and r["controllers"][v][path].get(key) is not None]
    return "; ".join(found)


def _tracking(r: dict, path: str) -> str:
    ff, oracle = r["controllers"][PRODUCT][path], (r.get("oracle") or {}).get(path) or {}
    floor = r["noise_floor"]
    gap = ""
    if (ff["mean_model_feedback_error"] or 0) > floor["mean_off_median"] and (
            ff["mean_abs_error_top_on_target"] > (oracle.get("mean_abs_error_vs_target") or 0)):
        gap = ", above the noise floor: the gap to the oracle is the pricing"
    return (f"the oracle, which knows each sampled view's median cost from re-renders, is "
            f"{percent(oracle.get('mean_abs_error_vs_target'))} mean / "
            f"{percent(oracle.get('p95_abs_error_vs_target'))} p95 off on this path, against the "
            f"product's {percent(ff['mean_abs_error_top_on_target'])} / "
            f"{percent(ff['p95_abs_error_top_on_target'])}; one view at fixed knobs strays "
            f"{percent(floor['mean_off_median'])} mean / {percent(floor['p95_off_median'])} "
            f"p95 from its median; the product's model + feedback misprices frames by "
            f"{percent(ff['mean_model_feedback_error'])}" + gap)


def _pricing(r: dict, path: str) -> str:
    ff = r["controllers"][PRODUCT][path]
    line = (f"model + feedback {percent(ff['mean_model_feedback_error'])} off the frames, the "
            f"model alone {percent(ff['mean_model_error'])}, against a noise floor of "
            f"{percent(r['noise_floor']['mean_off_median'])}")
    always = r["controllers"].get("feedforward-always", {}).get(path, {})
    if always.get("mean_model_feedback_error") is None or ff["mean_model_feedback_error"] is None:
        return line
    line += f"; under the other policies: {_variants(r, path, 'mean_model_feedback_error')}"
    gain = ff["mean_model_feedback_error"] - always["mean_model_feedback_error"]
    if abs(gain) <= r["noise_floor"]["mean_off_median"]:
        return line + (" (a probe on every frame prices about as well, within the noise floor: "
                       "the miss is in how a probe's workload prices the view, not in how "
                       "often it runs)")
    if gain > 0:
        return line + " (a probe on every frame prices better: the misses come between probes)"
    return line


def _dominance(r: dict, path: str, beaten_by: list[str]) -> str:
    """The baselines the goal found dominating the product (``dominated_by``), each beside it."""
    ff = r["controllers"][PRODUCT][path]
    ssim, over = ff["image_quality"]["mean_ssim"], ff["frames_over_budget"]
    beaten = {c: r["controllers"][c][path] for c in beaten_by}
    margin = max((p["image_quality"]["mean_ssim"] - ssim for p in beaten.values()), default=0)
    return "beaten by " + "; ".join(
        f"{c}, mean SSIM {p['image_quality']['mean_ssim']:.5f} against the product's "
        f"{ssim:.5f}, with {p['frames_over_budget']} frames over budget against its {over}"
        for c, p in beaten.items()) + (
        ": a margin in SSIM's fourth decimal or below" if 0 < margin < 1e-3 else "")


def _reversals(r: dict, path: str) -> str:
    ff, oracle = r["controllers"][PRODUCT][path], (r.get("oracle") or {}).get(path) or {}
    per_60 = 60.0 / ff["frames"]
    own = oracle.get("quality_reversals_per_60_frames")
    return (f"the oracle's own picks, on views {ORACLE_EVERY} frames apart, make "
            f"{'—' if own is None else f'{own:g}'} reversals per 60 frames; the product "
            f"{ff['quality_reversals'] * per_60:g}; under the other policies "
            + _variants(r, path, "quality_reversals", lambda v: f"{v * per_60:g}"))


def _first_frame(r: dict, path: str, key: str, which: str) -> str:
    ff = r["controllers"][PRODUCT][path]
    return (f"{which} is priced before any of its frames is measured: {percent(ff[key])} off; "
            f"the same frame under the other policies: {_variants(r, path, key)}")


def _tuner_share(r: dict) -> str:
    ff = r["controllers"][PRODUCT]["orbit"]
    return (f"on the orbit the tuner took {ff['mean_tuner_ms']:.2f} ms of a "
            f"{ff['mean_frame_ms']:.1f} ms frame, {ff['mean_probe_ms']:.2f} ms of it probing "
            f"({ff['probed_frames']} of {ff['frames']} frames probed)")


def _over_budget(goal: dict) -> str:
    value = goal["value"]
    worse = [f"{c} {value[c]['frames_over_budget']}" for c in over_budget_failures(value)]
    return (f"the product {value[PRODUCT]['frames_over_budget']} frames over budget, more "
            f"than half of {', '.join(worse)} at an equal or higher mean SSIM")


def _cost_step(step: dict) -> str:
    return (f"the model came within 5 % after {step.get('frames_to_model_within_5pct')} frames; "
            f"{percent(step.get('median_error_from_5_frames_after'))} median error from 5 frames "
            "after the step")


def _load(edge: str, load: dict) -> str:
    product, frame = load.get(LOAD_FEEDBACK) or {}, load.get("frame") or {}
    other = "stops" if edge == "starts" else "starts"
    here, there = (f"frames_to_within_5pct_after_load_{e}" for e in (edge, other))
    past = {"starts": "started", "stops": "stopped"}
    line = (f"the per-phase corrections were back within 5 % {product.get(here)} frames after "
            f"the load {past[edge]} ({product.get(there)} after it {past[other]}); frame "
            f"feedback, run beside them, {frame.get(here)} ({frame.get(there)}); "
            f"{percent(product.get('median_error_under_load'))} median error under load")
    known = all(d.get(k) is not None for d in (product, frame) for k in (here, there))
    if known and frame[here] < product[here] and frame[there] > product[there]:
        line += ": frame feedback's quicker take on this edge costs it the other"
    return line
