"""``autotune bench tracer-tuned``: the runs (see the package's description).

Every path under every controller, the noise floor, the cost step and the load runs.
"""

from __future__ import annotations

import argparse
import os
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from autotune_app import options as opt
from autotune_app.animation import (
    REFERENCE_SETTINGS,
    FrameLog,
    frame_times,
    heldout_turn_path,
    image_quality,
    logs_to_dicts,
    orbit_camera_path,
    plot_run,
    reference_frame_target,
    reference_images,
    run_path,
    summarize,
)
from autotune_app.report import emit
from benchmarks.governed.tracer_tuned.goals import goals
from benchmarks.governed.tracer_tuned.limits import goal_limits
from benchmarks.governed.tracer_tuned.measured_settings import best_setting_by_measurement
from benchmarks.governed.tracer_tuned.oracle import oracle_path
from benchmarks.governed.tracer_tuned.plots import quality_plot
from benchmarks.harness.cpu_load import CpuLoad
from benchmarks.harness.noise_floor import WARMUP_FRAMES, frame_spread
from benchmarks.harness.results import save_result
from benchmarks.harness.run_record import (
    RunRecord,
    changed_options,
    mark_limits,
    stamp,
    variant_name,
)
from benchmarks.harness.tracking import frames_to_within
from common.atomic_files import check_output_dir, output_dir
from governed.mesh.scene_sets import evaluation_scenes, refusal, sets_record
from governed.mesh.tuned_renderer import PROBE_PIXELS, TunedRenderer, knobs_of
from governed.probe_policy import DEFAULT_PROBE_POLICY, PROBE_POLICIES
from raytracer.camera import Camera
from raytracer.mesh.scene import Scene, load_scene
from raytracer.mesh.tracer import MAX_AO_RAYS, RenderSettings, Tracer

PI_TUNING_SCENE = "bunny"  # a calibration scene: neither validation nor test
PI_GAIN_GRID = tuple((kp, ki) for kp in (0.02, 0.05, 0.15) for ki in (0.05, 0.15, 0.4))
CONTROLLED = ("frame the user waits for: the tuner's work (probe, choice, bookkeeping) + "
              "kernels + read-back, wall clock")
# frames of each path whose SSIM and PSNR are measured: one view's SSIM against the 64-ray
# frame ranges from 0.1 to 1.0 along an orbit, so a mean over 6 views moved by more than the
# controllers' differences (sibenik's orbit: more AO rays on average, a lower mean SSIM)
QUALITY_FRAMES = 30
STEP_TOLERANCE = 0.05
# the fixed baseline's tuning stops at a measured setting this close under the target
FIXED_TOLERANCE = 0.01
LOAD_LIMIT_S = 30.0  # a load process ends by itself after this, whatever the benchmark does
LOAD_FEEDBACKS = ("phase", "frame")
# what each run is: (controller, feedback, probe policy); "feedforward" is the product at its
# default policy, "feedforward-<policy>" the other policies, "feedforward-frame" the frame's
# single correction only (no per-phase feedback)
VARIANTS = {"feedforward": ("feedforward", "phase", DEFAULT_PROBE_POLICY),
            **{f"feedforward-{policy}": ("feedforward", "phase", policy)
               for policy in PROBE_POLICIES if policy != DEFAULT_PROBE_POLICY},
            "feedforward-frame": ("feedforward", "frame", DEFAULT_PROBE_POLICY),
            "fixed": ("fixed", "phase", DEFAULT_PROBE_POLICY),
            "pi": ("pi", "phase", DEFAULT_PROBE_POLICY),
            "governor": ("governor", "phase", DEFAULT_PROBE_POLICY)}


def tune_fixed(renderer: TunedRenderer, camera: Camera, frame: int, target: float
               ) -> tuple[RenderSettings, dict]:
    """The fixed baseline's setting, tuned by measurement on ``camera`` (the path's frame
    ``frame``): the best one that fits ``target``, the search stopped within
    :data:`FIXED_TOLERANCE` under it; and what the tuning found."""
    settings, seconds, spent = best_setting_by_measurement(renderer, camera, target,
                                                           tolerance=FIXED_TOLERANCE)
    err = seconds / target - 1.0
    return settings, {"tuned_on_frame": frame, "ao_rays": settings.ao_rays,
                      "shadows": settings.shadows, "phong": settings.phong,
                      "measured_error": err, "within_1pct": abs(err) <= FIXED_TOLERANCE,
                      "frames_spent": spent}


def pi_gains(width: int, height: int, device: str | None, frames: int
             ) -> tuple[tuple[float, float], str]:
    """PI gains tuned live, in the settings space the evaluation uses, on a scene and path the
    evaluation does not use: the calibration scene ``PI_TUNING_SCENE``'s orbit at the same size
    and target rule; the (kp, ki) of :data:`PI_GAIN_GRID` with the lowest mean |frame − target|
    / target wins. (Gains tuned on a 24-setting replay walked 1,028 settings here, over a
    quality order whose cost is not monotone: the baseline was not given a fair chance.)"""
    scene = load_scene(PI_TUNING_SCENE)
    tracer = Tracer(scene, device=device)
    cameras = orbit_camera_path(scene, frames)
    target = reference_frame_target(TunedRenderer(scene, width, height, 1.0, tracer=tracer),
                                    cameras[0])
    scores = {}
    for kp, ki in PI_GAIN_GRID:
        renderer = TunedRenderer(scene, width, height, target, tracer=tracer)
        renderer.use_controller("pi", (kp, ki))
        logs = run_path(renderer, cameras, desc=f"PI gains {kp}/{ki}")
        scores[kp, ki] = float(np.mean([abs(x.measured - x.target) / x.target for x in logs]))
    best = min(scores, key=scores.get)
    return best, (f"tuned live on {PI_TUNING_SCENE}'s orbit ({frames} frames, {width}x{height}, "
                  f"{len(PI_GAIN_GRID)} gain pairs; best mean error {scores[best]:.1%})")


class _Doubled:
    """A tracer whose every frame costs twice: each kernel runs twice (a lasting 2x step)."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def __getattr__(self, name: str):
        return getattr(self._tracer, name)

    def render(self, *args, **kwargs):
        first = self._tracer.render(*args, **kwargs)
        second = self._tracer.render(*args, **kwargs)
        second.phase_seconds = {p: v + first.phase_seconds.get(p, 0.0)
                                for p, v in second.phase_seconds.items()}
        return second


def step_run(scene: Scene, tracer: Tracer, cameras: list[Camera], width: int, height: int,
             target: float, step_at: int) -> dict:
    """Feed-forward through a lasting 2x kernel-cost step at ``step_at``."""
    renderer = TunedRenderer(scene, width, height, target, tracer=tracer)
    doubled = _Doubled(tracer)

    def before(i: int) -> None:
        if i == step_at:
            renderer.tracer = doubled

    logs = run_path(renderer, cameras, desc=f"{scene.name} 2x step", before_frame=before)
    err = np.array([abs(x.measured - x.target) / x.target for x in logs])
    model = np.array([abs(x.corrected - x.measured) / x.measured for x in logs])
    after = err[step_at:]
    return {"step_at": step_at, "frames": len(logs),
            "frames_to_within_5pct_of_target": frames_to_within(after, STEP_TOLERANCE),
            "frames_to_model_within_5pct": frames_to_within(model[step_at:], STEP_TOLERANCE),
            "median_error_before_step": float(np.median(err[:step_at])),
            "median_error_from_5_frames_after": float(np.median(after[5:])) if after.size > 5
            else None,
            "per_frame": logs_to_dicts(logs)}


def load_run(scene: Scene, tracer: Tracer, cameras: list[Camera], width: int, height: int,
             target: float, feedback: str, processes: int) -> dict:
    """Feed-forward with ``feedback`` while ``processes`` busy processes run from a quarter of
    the path to five eighths of it: frames until back within 5 % after the load starts and
    after it stops."""
    renderer = TunedRenderer(scene, width, height, target, tracer=tracer, feedback=feedback)
    start_at, stop_at = len(cameras) // 4, len(cameras) * 5 // 8
    with CpuLoad(processes, LOAD_LIMIT_S) as load:
        ended_early = []

        def before(i: int) -> None:
            if i == start_at:
                load.start()
            elif i == stop_at:
                ended_early.append(load.ended)
                load.stop()

        logs = run_path(renderer, cameras, desc=f"{scene.name} load ({feedback} feedback)",
                        before_frame=before)
    err = np.array([abs(x.measured - x.target) / x.target for x in logs])
    return {"feedback": feedback, "load_processes": processes, "load_from": start_at,
            "load_until": stop_at, "frames": len(logs),
            "load_ended_before_stop": bool(ended_early and ended_early[0]),
            "frames_to_within_5pct_after_load_starts": frames_to_within(err[start_at:stop_at],
                                                                        STEP_TOLERANCE),
            "frames_to_within_5pct_after_load_stops": frames_to_within(err[stop_at:],
                                                                       STEP_TOLERANCE),
            "frames_outside_5pct_under_load": int((err[start_at:stop_at] > STEP_TOLERANCE).sum()),
            "frames_outside_5pct_after_load": int((err[stop_at:] > STEP_TOLERANCE).sum()),
            "median_error_before_load": float(np.median(err[:start_at])),
            "median_error_under_load": float(np.median(err[start_at:stop_at])),
            "median_error_after_load": float(np.median(err[stop_at:])),
            "per_frame": logs_to_dicts(logs)}


def noise_floor(renderer: TunedRenderer, camera: Camera, frames: int = 24) -> dict:
    """The target's setting rendered ``frames`` times on one view (after two warm-up frames):
    how far the frame strays from its median when nothing changes. A controller that knew
    every setting's cost exactly would still miss the target by this much on average."""
    seconds = frame_times(renderer, camera, REFERENCE_SETTINGS, frames + WARMUP_FRAMES)
    renderer.tuning = True
    return frame_spread(seconds)


def quality_frames_of(frames: int, mark: int | None, count: int) -> list[int]:
    """About ``count`` evenly spaced frames of a path of ``frames``, and its ``mark`` (the
    turn's first frame): where image quality is measured."""
    return sorted({*range(0, frames, max(frames // count, 1)), *([mark] if mark else [])})


def run_scene(scene_name: str, controllers: tuple[str, ...], frames: int, width: int,
              height: int, target_ms: float | None, device: str | None, plots: Path | None,
              gains: tuple[float, float], quality_frames: int,
              probe_pixels: int = PROBE_PIXELS, oracle: bool = True) -> dict:
    """Both paths under every controller (the run-time probe at least ``probe_pixels`` rays)
    and, with ``oracle``, the oracle on sampled views of each; figures and per-frame logs.
    Image quality is measured on about ``quality_frames`` evenly spaced frames of each path
    (and the turn's first)."""
    scene = load_scene(scene_name)
    tracer = Tracer(scene, device=device)
    orbit = orbit_camera_path(scene, frames)
    turn, turn_at = heldout_turn_path(scene, max(frames // 2, 4))
    probe_renderer = TunedRenderer(scene, width, height, 1.0, tracer=tracer)
    probe_renderer.probe.measure(orbit[0], width, height)  # its compiled code loaded, untimed
    target = (target_ms / 1e3 if target_ms
              else reference_frame_target(probe_renderer, orbit[0]))
    result: dict = {"scene": scene_name, "target_ms": target * 1e3, "width": width,
                    "height": height, "frames": frames, "controlled_time": CONTROLLED,
                    "target_is": "median frame time of 8 AO rays + shadows + Phong on the "
                                 "orbit's first view, without the tuner" if not target_ms
                                 else "given",
                    "controllers": {}, "fixed_tuning": {}, "oracle": {},
                    "noise_floor": noise_floor(probe_renderer, orbit[0])}
    paths = {"orbit": (orbit, None, 0), "turn": (turn, turn_at, turn_at)}
    keep_at = {p: quality_frames_of(len(c), m, quality_frames) for p, (c, m, _) in paths.items()}
    refs = {p: reference_images(tracer, paths[p][0], keep_at[p], width, height) for p in paths}
    logs_all: dict[str, dict] = {"orbit": {}, "turn": {}}
    for name in controllers:
        figures = {}
        for path_name, (cameras, mark, scene_view) in paths.items():
            controller, feedback, policy = VARIANTS[name]
            renderer = TunedRenderer(scene, width, height, target, controller=controller,
                                     tracer=tracer, feedback=feedback, probe_policy=policy,
                                     probe_pixels=probe_pixels)
            if name == "fixed":  # tuned by measurement, then a fresh renderer holds it
                settings, result["fixed_tuning"][path_name] = tune_fixed(
                    renderer, cameras[scene_view], scene_view, target)
                renderer = TunedRenderer(scene, width, height, target, controller=name,
                                         tracer=tracer)
                renderer.loop.hold(knobs_of(settings))
            elif name == "pi":
                renderer.use_controller("pi", gains)
            kept: dict[int, np.ndarray | None] = dict.fromkeys(keep_at[path_name])
            # every controller's path starts with no AO history (the fixed baseline's tuning
            # frames on the first view had given its first frame SSIM 0.80 against 0.48)
            tracer.forget_history()
            logs = run_path(renderer, cameras, desc=f"{scene_name} {name} {path_name}",
                            keep=kept)
            figures[path_name] = {**summarize(logs, mark), **top_on_target(logs),
                                  "image_quality": image_quality(kept, refs[path_name])}
            if mark:  # an empty view cannot spend the budget: the frames that show the scene
                after = summarize(logs[mark:])
                figures[path_name]["from_the_turn_on"] = {
                    k: after[k] for k in ("frames", "mean_abs_error_vs_target",
                                          "p95_abs_error_vs_target", "frames_over_budget",
                                          "mean_model_feedback_error")}
            logs_all[path_name][name] = logs
        result["controllers"][name] = figures
    if oracle:
        for path_name, (cameras, _, _) in paths.items():
            result["oracle"][path_name] = oracle_path(probe_renderer, cameras, target)
            floor = result["oracle"][path_name]["mean_abs_error_vs_target"]
            for figures in result["controllers"].values():  # each one's error over the floor
                figures[path_name]["mean_error_over_oracle"] = (
                    figures[path_name]["mean_abs_error_top_on_target"] / floor if floor > 0
                    else None)
    if plots is not None:
        for path_name, mark in (("orbit", None), ("turn", turn_at)):
            plot_run(logs_all[path_name], f"{scene_name}: {path_name}, target "
                     f"{target * 1e3:.1f} ms (frame incl. the tuner's work)",
                     plots / f"paper_{scene_name}_{path_name}.png", mark)
        quality_plot(result, plots / f"quality_{scene_name}.png")
    result["per_frame"] = {p: {c: logs_to_dicts(v) for c, v in d.items()}
                           for p, d in logs_all.items()}
    result["_tracer"], result["_orbit"], result["_target"] = tracer, orbit, target
    return result


def top_on_target(logs: list[FrameLog]) -> dict:
    """Tracking error where a frame under the target at the highest setting counts as on
    target (there is nothing more to buy), and how many such frames the path has."""
    err = np.array([abs(x.measured - x.target) / x.target for x in logs])
    top = np.array([x.ao_rays >= MAX_AO_RAYS and x.shadows and x.phong
                    and x.measured < x.target for x in logs])
    err[top] = 0.0
    return {"frames_at_top_under_target": int(top.sum()),
            "mean_abs_error_top_on_target": float(err.mean()),
            "p95_abs_error_top_on_target": float(np.percentile(err, 95))}


def load_runs(scene_name: str, tracer: Tracer, cameras: list[Camera], width: int, height: int,
              target: float, per_frame: bool) -> dict[str, dict]:
    """:func:`load_run` under each of :data:`LOAD_FEEDBACKS`, with half the CPUs (at least one)
    kept busy; per-frame logs only if asked."""
    processes = max(1, (os.cpu_count() or 2) // 2)
    runs = {}
    for feedback in LOAD_FEEDBACKS:
        runs[feedback] = load_run(tracer.scene, tracer, cameras, width, height, target, feedback,
                                  processes)
        runs[feedback]["scene"] = scene_name
        if not per_frame:
            runs[feedback].pop("per_frame")
    return runs


#: the options a protocol run leaves at their defaults (the set's scenes, every controller, the
#: full run's path and size, every part); --set chooses between the two protocols
PROTOCOL_OPTIONS = ("scene", "controller", "quick", "frames", "width", "height", "target_ms",
                    "no_step", "no_load", "no_oracle", "probe_pixels")


def main(argv: list[str] | None = None) -> int:
    """Run the experiment on the set's scenes; print a table or JSON (``--json``)."""
    parser = argparse.ArgumentParser(prog="autotune bench tracer-tuned", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    opt.add_evaluation_set(parser)
    parser.add_argument("--controller", choices=(*VARIANTS, "all"), default="all",
                        help="feedforward (per-phase feedback, default probe policy), "
                             "feedforward-POLICY (another probe policy), feedforward-frame "
                             "(the frame's correction only), fixed, pi, governor, or all")
    parser.add_argument("--quick", action="store_true", help="one scene of the set "
                        "(validation: dragon-small, test: grass), 24 frames, 256x144")
    parser.add_argument("--frames", type=int, help="frames of the orbit path (default 60)")
    parser.add_argument("--width", type=int)
    parser.add_argument("--height", type=int)
    parser.add_argument("--target-ms", type=float, help="default: the scene's reference time")
    parser.add_argument("--no-step", action="store_true", help="skip the 2x cost-step run")
    parser.add_argument("--no-load", action="store_true",
                        help="skip the runs under a CPU load that starts and stops mid-path")
    parser.add_argument("--no-oracle", action="store_true",
                        help="skip the oracle (each setting's cost measured on sampled views); "
                             "the error goals are then judged absolutely")
    parser.add_argument("--device")
    parser.add_argument("--probe-pixels", type=int, default=PROBE_PIXELS,
                        help=f"the run-time probe's rays at least (default {PROBE_PIXELS})")
    opt.add_plots(parser)
    parser.add_argument("--per-frame", action="store_true", help="include per-frame logs")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--save", action="store_true", help="also write results/<machine>/"
                        "tracer_tuned[_test]_<runtime>.json (with the options set away from "
                        "their defaults before <runtime>: such a run decides no goal)")
    args = parser.parse_args(argv)
    changed = changed_options(parser, args, PROTOCOL_OPTIONS)
    scenes = args.scene or list(evaluation_scenes(args.set, args.quick))
    refused = refusal(scenes, args.set)
    if refused:
        parser.error(refused)
    frames = args.frames or (24 if args.quick else 60)
    width = args.width or (256 if args.quick else 480)
    height = args.height or (144 if args.quick else 270)
    controllers = tuple(VARIANTS) if args.controller == "all" else (args.controller,)
    if args.plots:
        check_output_dir(args.plots, args.force)  # before the runs, not after
    run = RunRecord()
    gains, trained_on = pi_gains(width, height, args.device, max(frames // 2, 12))
    results, step, load = [], None, None
    with (output_dir(args.plots, args.force) if args.plots else nullcontext()) as plots:
        for name in scenes:
            r = run_scene(name, controllers, frames, width, height, args.target_ms,
                          args.device, plots, gains, QUALITY_FRAMES, args.probe_pixels,
                          not args.no_oracle)
            tracer, orbit, target = r.pop("_tracer"), r.pop("_orbit"), r.pop("_target")
            r["device"] = tracer.device_info.describe()
            runtime = tracer.device_info.runtime
            if step is None and not args.no_step and "feedforward" in controllers:
                step = step_run(load_scene(name), tracer, orbit[: max(frames // 2, 16)],
                                width, height, target, step_at=max(frames // 6, 5))
                step["scene"] = name
                if not args.per_frame:
                    step.pop("per_frame")
            if load is None and not args.no_load and "feedforward" in controllers:
                load = load_runs(name, tracer, orbit[: max(frames // 2, 24)], width, height,
                                 target, args.per_frame)
            if not args.per_frame:
                r.pop("per_frame")
            results.append(r)
    figures = {"controlled_time": CONTROLLED, "second_figure": "kernel_ms: the kernels' "
               "OpenCL event time",
               "pi_gains": {"kp": gains[0], "ki": gains[1], "tuned_on": trained_on},
               "sets": sets_record(args.set, scenes), "paper": results, "cost_step": step,
               "probe_policy_default": DEFAULT_PROBE_POLICY, "changing_load": load,
               "goals": goals(results, step, load)}
    mark_limits(figures["goals"], goal_limits(figures))
    emit(stamp(figures, run, changed), args.json,
         title="Ganestam & Doggett's experiment: tracking a target frame time")
    if args.save:
        stem = "tracer_tuned_test" if args.set == "test" else "tracer_tuned"
        save_result(variant_name(stem, changed, runtime), figures)
    return 0

