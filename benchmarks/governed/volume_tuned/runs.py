"""Inside ``bench volume-tuned``'s MPI job: the governed runs (the controllers compared, PI's
gains tuned, recovery after a target drop and a volume swap, the noise floor, a test volume)
and the job's entry, :func:`worker`, which runs the whole experiment on every rank."""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

import numpy as np

from autotune_app.volume_command import CALIBRATION_FRAMES
from benchmarks.governed.volume_tuned.model_error import model_errors
from benchmarks.governed.volume_tuned.run_constants import MARK, QUALITY_EVERY, TARGET_DROP
from benchmarks.harness.noise_floor import WARMUP_FRAMES, frame_spread
from governed.probe_policy import PROBE_POLICIES
from governed.volume.knobs import BEST, ERT, RATES, SCALES
from governed.volume.model_fit import volume_calibration_views
from governed.volume.tuned_volume import TunedVolumeRenderer
from governed.volume.volume_sets import (
    GOVERNED_VOLUME,
    TEST_VOLUMES,
    VALIDATION_VOLUMES,
    volume_sets,
)
from raytracer.camera import with_next
from raytracer.mpi.faults import install_excepthook, world
from raytracer.volume.distributed import DESCHEDULED_SECONDS, load_everywhere, seed_orbit

ORACLE_EVERY = 6  # the oracle's sampled views: every this many frames of a path
ORACLE_FRESH_FRAMES = 3  # frames of the oracle's setting its error is measured on


def governed_run(tuned: Any, cameras: list, quality_every: int,
                 targets: list[float] | None = None, swap_at: int | None = None,
                 swap_to: Any = None) -> list[dict] | None:
    """Governed frames; per frame rank 0 records time, prediction and knobs, and every
    ``quality_every``-th frame its quality, measured after the timed frames (a full-quality
    render between governed frames slowed the next one: :meth:`quality_of`). ``targets``
    (rank 0's, None elsewhere) travel to the other ranks with each frame's state."""
    if swap_at is not None and quality_every > 0:
        raise ValueError("quality is measured after the run, on the volume it ends with: "
                         "not for a run that swaps volumes")
    rows, chosen = [], []
    for i, (cam, nxt) in enumerate(with_next(cameras)):
        if targets is not None and tuned.rank == 0:
            tuned.target_seconds = targets[i]
        if swap_at is not None and i == swap_at:
            tuned.swap_renderer(swap_to)
        t0 = time.perf_counter()
        # the path's next view, probed ahead as the product does on a device that is not the
        # CPU (not across a swap: the next view is of another volume)
        f = tuned.render(cam, nxt if swap_at != i + 1 else None)
        if f is None:
            continue
        chosen.append(f.settings)
        rows.append({"frame": i, "target": tuned.target_seconds, "measured": f.measured,
                     "predicted": f.predicted, "corrected": f.corrected,
                     "rate": 1.0 / f.settings.step, "scale": f.settings.image_scale,
                     "ert": f.settings.ert_threshold, "probe": f.probe_seconds,
                     "choose": f.search_seconds, "bookkeeping": f.bookkeeping_seconds,
                     "descheduled": f.record.descheduled_seconds,
                     "loop": time.perf_counter() - t0})
    for i in range(0, len(cameras), quality_every) if quality_every > 0 else ():
        quality = tuned.quality_of(cameras[i], chosen[i] if tuned.rank == 0 else None)
        if tuned.rank == 0:
            rows[i].update(quality)
    return rows if tuned.rank == 0 else None


def _summary(rows: list[dict]) -> dict[str, float]:
    """A governed run's figures: error against the target, the model's (with feedback),
    frames over by 5 %, image quality where measured, mean frame time, and the frames in which
    a rank did not run for over ``DESCHEDULED_SECONDS`` (what no controller can price)."""
    m = np.array([r["measured"] for r in rows])
    t = np.array([r["target"] for r in rows])
    c = np.array([r["corrected"] for r in rows])
    err = np.abs(m - t) / t
    q = [r for r in rows if "ssim" in r]
    model = np.abs(c - m) / m
    return {"mean_error": float(err.mean()), "p95_error": float(np.percentile(err, 95)),
            "over_5pct": int(np.sum(m > 1.05 * t)), "frames": len(rows),
            "model_plus_feedback_error": float(np.nanmean(model)),
            "mean_psnr": float(np.mean([r["psnr"] for r in q])) if q else math.nan,
            "mean_ssim": float(np.mean([r["ssim"] for r in q])) if q else math.nan,
            "mean_ms": float(m.mean() * 1e3),
            "frames_a_rank_was_descheduled": int(sum(r["descheduled"] > DESCHEDULED_SECONDS
                                                     for r in rows))}


def settled(row: dict, tolerance: float = 0.05) -> bool:
    """A governed frame within ``tolerance`` of its target, or as close as the knobs allow:
    under target at the best setting, or over it at the cheapest (a volume cheaper than the
    target at full quality has nothing to recover)."""
    ratio = row["measured"] / row["target"]
    knobs = (row["rate"], row["scale"], row["ert"])
    best = all(v >= k[1] - 1e-9 for v, k in zip(knobs, (RATES, SCALES, ERT), strict=True))
    cheapest = all(v <= k[0] + 1e-9 for v, k in zip(knobs, (RATES, SCALES, ERT), strict=True))
    return abs(ratio - 1) <= tolerance or (ratio < 1 and best) or (ratio > 1 and cheapest)


def recovery_frames(rows: list[dict], change_at: int, tolerance: float = 0.05) -> int:
    """Frames after ``change_at`` until three frames in a row are :func:`settled`."""
    for k in range(change_at, len(rows) - 2):
        if all(settled(r, tolerance) for r in rows[k:k + 3]):
            return k - change_at
    return len(rows) - change_at


#: Frames of the PI baseline's training orbit (one turn: the evaluated orbit's pace)
PI_TRAINING_FRAMES = 36


def tune_pi_gains(tuned: Any, training: list) -> tuple[tuple[float, float] | None, dict]:
    """PI gains with the least mean error on a training orbit (collective); rank 0 gets the
    gains and its figures, the others (None, {}): the PI tuner is rank 0's."""
    gains = [(0.05, 0.1), (0.1, 0.3), (0.2, 0.5), (0.4, 0.8)]
    scores = []
    for g in gains:
        tuned.use_controller("pi", g)
        rows = governed_run(tuned, training, 0)
        if tuned.rank == 0:
            scores.append(_summary(rows)["mean_error"])
    if tuned.rank != 0:
        return None, {}
    best = gains[int(np.argmin(scores))]
    return best, {"path": f"elevated orbit, {len(training)} frames", "gains": gains,
                  "mean_error": scores, "chosen": list(best)}


def compare_controllers(tuned: Any, orbit: list, pi_gains: tuple[float, float] | None,
                        every: int = QUALITY_EVERY) -> dict[str, Any]:
    """``orbit`` (bonsai's double orbit, or an unseen volume's) under feed-forward, fixed
    (tuned by measurement on the first frame) and PI (``pi_gains``), in that order; quality
    every ``every`` frames (collective; rank 0's)."""
    runs: dict[str, Any] = {}
    for name in ("feedforward", "fixed", "pi"):
        if name == "fixed":
            tuned.use_controller("fixed")
            tuned.tune_fixed_by_measurement(orbit[0])
        else:
            tuned.use_controller(name, pi_gains if name == "pi" else None)
        rows = governed_run(tuned, orbit, every)
        if tuned.rank == 0:
            runs[name] = {"summary": _summary(rows), "frames": rows}
    return runs


def compare_probe_policies(tuned: Any, orbit: list) -> dict[str, Any]:
    """Feed-forward on the same orbit under each probe policy, run back to back (the machine's
    state drifts over a run): mean and p95 error, the tuner's share of the frame and the
    frames probed (collective; rank 0's)."""
    out: dict[str, Any] = {}
    default = tuned.probe_policy
    for policy in PROBE_POLICIES:
        tuned.probe_policy = policy
        tuned.use_controller("feedforward")
        rows = governed_run(tuned, orbit, 0)
        if tuned.rank == 0:
            s = _summary(rows)
            out[policy] = {"mean_error": s["mean_error"], "p95_error": s["p95_error"],
                           "tuner_share_of_frame":
                               controller_cost(rows)["mean_share_of_frame"],
                           "frames_probed": sum(r["probe"] > 0 for r in rows),
                           "frames": len(rows)}
    tuned.probe_policy = default
    return out


def recoveries(tuned: Any, orbit: list, target: float | None, held_renderer: Any,
               held_name: str) -> dict[str, Any]:
    """Frames to recover after the target drops to 70 % mid-run (still reachable) and after
    the volume is swapped mid-run (collective; rank 0's figures, ``target`` rank 0's)."""
    out: dict[str, Any] = {}
    tuned.use_controller("feedforward")
    half = len(orbit) // 2
    targets = ([target] * half + [TARGET_DROP * target] * (len(orbit) - half)
               if tuned.rank == 0 else None)
    rows = governed_run(tuned, orbit, 0, targets=targets)
    if tuned.rank == 0:
        out["target_change"] = {"at": half, "recovery_frames": recovery_frames(rows, half),
                                "summary_after": _summary(rows[half:]), "frames": rows}
    tuned.use_controller("feedforward")
    if tuned.rank == 0:
        tuned.target_seconds = target
    rows = governed_run(tuned, orbit, 0, swap_at=half, swap_to=held_renderer)
    if tuned.rank == 0:
        out["volume_swap"] = {"at": half, "to": held_name,
                              "recovery_frames": recovery_frames(rows, half),
                              "summary_after": _summary(rows[half:]), "frames": rows}
    return out


def noise_floor(tuned: Any, camera: Any, frames: int = 24) -> dict[str, float] | None:
    """One view rendered ``frames`` times at the fixed baseline's knobs (collective; rank
    0's): how far a frame strays from the median when nothing changes. A controller that
    knew each setting's cost exactly still misses the target by this much on average."""
    times = tuned.repeated_frame_seconds(camera, tuned.fixed_settings, frames + WARMUP_FRAMES)
    return None if times is None else frame_spread(times)


def oracle_on_path(tuned: Any, cameras: list, every: int = ORACLE_EVERY,
                   fresh: int = ORACLE_FRESH_FRAMES) -> dict[str, Any] | None:
    """What a controller that knew every setting's cost on every view would deliver: on every
    ``every``-th view, the best setting whose median of 3 frames fits the target (bisection
    per pair of scale and threshold), its error then measured on ``fresh`` new frames after
    :data:`WARMUP_FRAMES` (the first frames after other settings run slower): the floor of
    noise and knob steps no controller goes below here. A frame under the target at
    the best setting counts as on target (collective; rank 0's)."""
    errors, views, top = [], [], 0
    for i in range(0, len(cameras), every):
        settings = tuned.best_setting_by_measurement(cameras[i])
        times = tuned.repeated_frame_seconds(cameras[i], settings, WARMUP_FRAMES + fresh)
        if tuned.rank != 0:
            continue
        t = np.array(times[WARMUP_FRAMES:])  # after the search's other settings, as steady
        err = np.abs(t - tuned.target_seconds) / tuned.target_seconds
        if settings == BEST:  # nothing more to buy
            err[t < tuned.target_seconds] = 0.0
            top += int(np.sum(t < tuned.target_seconds))
        errors.extend(err.tolist())
        views.append({"frame": i, "rate": 1.0 / settings.step, "scale": settings.image_scale,
                      "ert": settings.ert_threshold, "mean_ms": float(t.mean() * 1e3)})
    if tuned.rank != 0:
        return None
    return {"views": views, "fresh_frames_per_view": fresh, "frames_at_top_under_target": top,
            "mean_error": float(np.mean(errors)), "p95_error": float(np.percentile(errors, 95))}


def controller_cost(frames: list[dict]) -> dict[str, float]:
    """The tuner's work per frame (probe, search, bookkeeping after the frame) as a share of
    the frame and in ms, and each part's share."""
    def share(key: str) -> float:
        return float(np.mean([r[key] / r["measured"] for r in frames]))

    parts = {"probe": "probe", "search": "choose", "bookkeeping": "bookkeeping"}
    out = {"mean_share_of_frame": sum(share(key) for key in parts.values())}
    for name, key in parts.items():
        out[f"{name}_share_of_frame"] = share(key)
        out[f"{name}_ms"] = float(np.mean([r[key] for r in frames]) * 1e3)
    return out


def cost_after_calibration(renderer: Any, size: int, orbit: list, target: float | None
                           ) -> dict[str, Any] | None:
    """The tuner's work per frame on ``orbit`` right after a fresh calibration of
    ``renderer``'s volume, as ``autotune volume`` calibrates it (its own views,
    CALIBRATION_FRAMES), where the ranks' correction still learns and so has every new view
    probed: what the product's first frames pay, beside the goal's run (which comes after the
    model checks have taught the correction) (collective; rank 0's; ``target`` rank 0's)."""
    fresh = TunedVolumeRenderer(renderer, size, size, 1.0)
    fresh.calibrate(volume_calibration_views(renderer.volume.radius), frames=CALIBRATION_FRAMES)
    if fresh.rank == 0:
        fresh.target_seconds = target
    rows = governed_run(fresh, orbit, 0)
    if fresh.rank != 0:
        return None
    return {**controller_cost(rows), "frames_probed": sum(r["probe"] > 0 for r in rows),
            "frames": len(rows), "summary": _summary(rows)}


def governed_on_volume(tuned: Any, renderer: Any, name: str, frames: int,
                       pi_gains: tuple[float, float] | None, with_oracle: bool) -> dict | None:
    """Feed-forward, then the fair baselines (fixed, PI: :func:`compare_controllers`), on a
    volume the model never saw: the calibrated tuner swapped to it, at half its first view's
    full-quality time, over the orbit of the cluster study (Tkachev et al., "Prediction of
    Distributed Volume Visualization Performance to Support Render Hardware Acquisition"),
    and the oracle on the same path if ``with_oracle`` (collective; rank 0's)."""
    home, target = tuned.renderer, tuned.target_seconds
    tuned.swap_renderer(renderer)
    orbit = seed_orbit(renderer.volume.radius, frames)
    full = tuned.full_quality_seconds(orbit[0])
    if tuned.rank == 0:
        tuned.target_seconds = 0.5 * full
    runs = compare_controllers(tuned, orbit, pi_gains)
    tuned.use_controller("feedforward")
    oracle = oracle_on_path(tuned, orbit) if with_oracle else None
    tuned.swap_renderer(home)
    if tuned.rank != 0:
        return None
    tuned.target_seconds = target
    return {"volume": name, "target_ms": 0.5 * full * 1e3,
            "summary": runs["feedforward"]["summary"], "oracle": oracle,
            "frames": runs["feedforward"]["frames"],
            "baselines": {k: runs[k]["summary"] for k in ("fixed", "pi")}}


def worker(args: argparse.Namespace) -> int:
    """Every rank of the MPI job: model error, the governed runs, recovery; rank 0 prints."""
    install_excepthook()
    comm = world()
    rank = comm.Get_rank()
    frames = 24 if args.quick else 72
    # each calibration volume as the command calibrates a volume (CALIBRATION_FRAMES): on
    # collected frames (2 ranks, 512²), models fitted on 48 frames each of bonsai and
    # ironprot priced the validation volumes' orbits 7.4 % off per rank, on 24 each 9.0 %
    calib_frames = 16 if args.quick else CALIBRATION_FRAMES
    own_frames = calib_frames  # a volume's own model, calibrated the same way
    vol, tf = load_everywhere(GOVERNED_VOLUME, comm=comm)
    out: dict[str, Any] = {
        "ranks": comm.Get_size(), "size": args.size,
        "sets": {**volume_sets(),
                 "calibrated_on": f"{args.calibrate_on}: calibration views, random knobs",
                 "validation_views": f"{GOVERNED_VOLUME}: held-out orbit and close-ups"},
        "frames": frames}
    t0 = time.perf_counter()
    views = volume_calibration_views(vol.radius)
    orbit = seed_orbit(vol.radius, frames)
    evaluation = seed_orbit(vol.radius, 12 if args.quick else 24, orbits=1.0, distance=2.6)
    also = [name for name in args.calibrate_on.split(",")[1:] if name]
    tuned, renderers, figures = model_errors(vol, tf, also, args.size, views, evaluation,
                                             calib_frames, own_frames, comm)
    node = tuned.renderer.node  # the machine's cores and ranks, as the renderer shares them
    out.update(figures, cores=node.cores, oversubscribed=node.oversubscribed)
    info = getattr(tuned.renderer.local, "device_info", None)
    out["runtime"] = info.runtime if info is not None else "host"  # what rank 0 renders with

    # the target: half the first view's full-quality frame time (rank 0's; the other ranks
    # take it from each frame's state)
    full = tuned.full_quality_seconds(orbit[0])
    target = 0.5 * full if rank == 0 else None
    if rank == 0:
        tuned.target_seconds = target
        out["target_ms"] = target * 1e3
        out["full_quality_first_view_ms"] = 2 * target * 1e3

    # not the evaluated path, but its pace (10° a frame): the 12 views it had were 30° apart,
    # where gains that oscillate on the orbit looked best (bonsai 512²: PI 43 % off on the
    # orbit with gains that were 11 % off on those 12 frames, and 53-56 % in other runs)
    training = seed_orbit(vol.radius, PI_TRAINING_FRAMES, orbits=1.0, elevation=0.8)
    best, pi_figures = tune_pi_gains(tuned, training)
    runs = compare_controllers(tuned, orbit, best)
    policies = compare_probe_policies(tuned, orbit)
    noise = noise_floor(tuned, orbit[0])
    oracle = oracle_on_path(tuned, orbit)
    swap_to = VALIDATION_VOLUMES[0]
    changes = recoveries(tuned, orbit, target, renderers[swap_to], swap_to)
    # the validation volumes first: what a choice about feed-forward against the baselines
    # is made on; the test volumes only report
    unseen = {name: governed_on_volume(tuned, renderers[name], name, frames, best,
                                       with_oracle=name == TEST_VOLUMES[0])
              for name in VALIDATION_VOLUMES + TEST_VOLUMES}
    first_frames = cost_after_calibration(tuned.renderer, args.size, orbit, target)
    if rank == 0:
        out["pi_gain_tuning"] = pi_figures
        out["governed"] = runs
        out["noise_floor"] = noise
        out["oracle"] = oracle
        out["governed_test_volume"] = unseen[TEST_VOLUMES[0]]
        for key, names in (("validation_volume_controllers", VALIDATION_VOLUMES),
                           ("test_volume_controllers", TEST_VOLUMES)):
            out[key] = {name: {"feedforward": unseen[name]["summary"],
                               **unseen[name]["baselines"]} for name in names}
        out.update(changes)
        out["controller_cost"] = controller_cost(runs["feedforward"]["frames"])
        out["controller_cost_after_calibration"] = first_frames
        out["probe_policies"] = policies
        out["wall_seconds"] = time.perf_counter() - t0
        print(MARK + json.dumps(out), flush=True)
    return 0
