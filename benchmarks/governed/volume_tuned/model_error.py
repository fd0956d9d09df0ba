"""Inside ``bench volume-tuned``'s MPI job: the volume model's error per rank and per frame,
predicted against measured at random knobs, on held-out views and on volumes it never saw
(carried over from bonsai, and calibrated on each volume's own views)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from benchmarks.governed.volume_tuned.run_constants import CONTENT_ON_HALF, SUBDOMAINS_3TO1
from governed.volume.knobs import settings_of, volume_knob_space
from governed.volume.model_fit import (
    counted_render_models,
    volume_calibration_views,
    work_seconds,
)
from governed.volume.tuned_volume import TunedVolumeRenderer
from governed.volume.volume_sets import TEST_VOLUMES, VALIDATION_VOLUMES
from governed.volume.workload_probe import nearest_threshold
from models.core_sharing import shared_finish
from models.rank_correction import PRIOR_FRAMES, RankCorrection
from raytracer.camera import Camera
from raytracer.volume.distributed import DistributedRenderer, load_everywhere, seed_orbit
from raytracer.volume.partition import kd_partition
from raytracer.volume.volume_data import Volume

#: Frames after which :func:`while_learning` splits a path: the ranks' correction counts as
#: many frames of prior, so by then the volume's own frames hold half its weight
LEARNING_SPLIT = int(PRIOR_FRAMES)


def evaluate_model(tuned: Any, cameras: list, seed: int, repeat: bool = False
                   ) -> dict[str, Any] | None:
    """Random knobs on ``cameras``: predicted vs measured per rank (render) and per frame;
    beside the per-rank figure, the same model form fitted on and priced with the caster's
    own counts, corrected per rank by the same rule from its own errors on the frames before
    (``rank_render_error_counted``: what is left without the probe's error), and the error of
    each frame's busiest rank alone, the one that sets the frame (``busiest_rank_render_error``:
    a rank left a sliver of the samples is a small time, far off in relative terms). With
    ``repeat`` every frame is rendered once more after the pass, outside the tuner
    (``rank_render_repeat``: how far the measurement alone strays, per rank). The per-rank
    error of the first frames and of those after is beside it
    (``rank_render_error_while_learning``, :func:`while_learning`)."""
    rng = np.random.default_rng(seed)
    space = volume_knob_space()
    counted = None  # rank 0: the frame model with its render models fitted on the counts
    if tuned.rank == 0:
        counted = dataclasses.replace(tuned.model.model,
                                      render=counted_render_models(tuned.pricing_samples))
        counted_correction = RankCorrection(counted.ranks)
    rank_err, counted_err, frame_err, share, busiest_err = [], [], [], [], []
    by_frame = []  # each frame's mean per-rank error, in path order
    chosen, first = [], []  # rank 0: each frame's settings and per-rank render seconds
    for cam in cameras:
        settings = None
        if tuned.rank == 0:
            settings = settings_of(space.at_levels([int(rng.integers(len(k)))
                                                    for k in space.knobs]))
        res, sec = tuned.render_predicted(cam, settings)
        if tuned.rank != 0:
            continue
        rec = res.record
        per_rank = sec["render_per_rank"][:, 0]
        measured = np.array([r.render_seconds for r in rec.ranks])
        chosen.append(settings)
        first.append(measured)
        errs = np.abs(per_rank - measured) / measured
        rank_err.extend(errs)
        by_frame.append(float(np.mean(errs)))
        counts = np.array([[r.samples * r.group_ratio, r.skipped, r.rays] for r in rec.ranks])
        pixels = rec.render_width * rec.render_height
        probed = tuned.model.workload
        jumps = probed.jump_counts(nearest_threshold(probed.thresholds, [settings.ert_threshold]),
                                   np.array([pixels]))  # the caster does not count them
        work = counted.rank_work(counts[:, 0:1], counts[:, 1:2], counts[:, 2:3], pixels,
                                 tuned.model.streamed, probed.slice_crossing, jumps,
                                 probed.plane_crossing)
        from_counts = shared_finish(work * counted_correction.factor[:, None], counted.cores,
                                    counted.threads, counted.core_groups)[:, 0]
        if counted_correction.learning:
            counted_correction.observe([work_seconds(r) for r in rec.ranks], work[:, 0])
        counted_err.extend(np.abs(from_counts - measured) / measured)
        pred_frame = float(sec["frame"][0])  # no time spent before the frame
        frame_err.append(abs(pred_frame - rec.frame_seconds) / rec.frame_seconds)
        samples = np.array([r.samples for r in rec.ranks], float)
        share.append(float(samples.max() / max(samples.sum(), 1.0)))
        busiest_err.append(float(errs[np.argmax(samples)]))
    again = render_again(tuned, cameras, chosen, first) if repeat else None
    if tuned.rank != 0:
        return None
    return {"frames": len(cameras), **({"rank_render_repeat": again} if repeat else {}),
            "rank_render_error": {"mean": float(np.mean(rank_err)),
                                  "p95": float(np.percentile(rank_err, 95)),
                                  "max": float(np.max(rank_err))},
            "rank_render_error_while_learning": while_learning(by_frame),
            "busiest_rank_render_error": {"mean": float(np.mean(busiest_err)),
                                          "p95": float(np.percentile(busiest_err, 95))},
            "rank_render_error_counted": {"mean": float(np.mean(counted_err)),
                                          "p95": float(np.percentile(counted_err, 95))},
            "frame_error": {"mean": float(np.mean(frame_err)),
                            "p95": float(np.percentile(frame_err, 95))},
            "busiest_rank_sample_share": float(np.mean(share))}


def while_learning(by_frame: list[float]) -> dict[str, Any]:
    """The per-rank error of the path's first :data:`LEARNING_SPLIT` frames, while each rank's
    correction is learning the volume, and of the frames after them: how much of a carried-over
    model's error a new volume's first frames carry."""
    first, rest = by_frame[:LEARNING_SPLIT], by_frame[LEARNING_SPLIT:]
    return {"frames": LEARNING_SPLIT, "first": float(np.mean(first)),
            "after": float(np.mean(rest)) if rest else None}


def render_again(tuned: Any, cameras: list, chosen: list, first: list) -> dict | None:
    """Render each of ``cameras`` once more at rank 0's ``chosen`` settings, by the renderer
    alone (no probe or choice before the frame; the tuner learns nothing from them), and
    compare each rank's render seconds with the ``first`` pass's (collective; rank 0's): each
    rank's mean offset (what the tuner's work before a frame costs its render) and the
    spread around it (the measurement's own, under which no per-rank model can come)."""
    chosen = tuned.comm.bcast(chosen if tuned.rank == 0 else None, root=0)
    ratios = []
    for cam, settings, before in zip(cameras, chosen, first or [None] * len(cameras),
                                     strict=True):
        rec = tuned.renderer.render_frame(cam, tuned.width, tuned.height, settings).record
        if rec is not None:
            ratios.append(np.array([r.render_seconds for r in rec.ranks]) / before - 1)
    if tuned.rank != 0:
        return None
    d = np.array(ratios)  # (frames, ranks)
    spread = np.abs(d - d.mean(axis=0))
    return {"per_rank_mean_offset": d.mean(axis=0).tolist(), "spread_mean": float(spread.mean()),
            "spread_p95": float(np.percentile(spread, 95))}


def close_views(radius: float, count: int, seed: int = 5) -> list:
    """Views from 1.1-1.5 radii that look at one corner region: most samples land on one rank."""
    rng = np.random.default_rng(seed)
    cams = []
    for _ in range(count):
        corner = rng.choice([-1.0, 1.0], 3) * 0.35 * radius
        d = rng.normal(size=3)
        d /= np.linalg.norm(d)
        eye = corner + d * radius * rng.uniform(1.1, 1.5)
        cams.append(Camera(tuple(map(float, eye)), tuple(map(float, corner)), (0.0, 1.0, 0.0),
                           45.0))
    return cams


def subdomain_shares(ranks: int) -> tuple[float, ...]:
    """The HemoCell study's imbalanced subdomains: half the ranks get three times the cells
    of the others (75 % of the volume on half the ranks)."""
    return tuple(3.0 if r < max(1, ranks // 2) else 1.0 for r in range(ranks))


def dense_on_first_ranks(vol: Volume, ranks: int) -> Volume:
    """The HemoCell study's imbalanced content: the volume with everything outside the bricks of the
    first half of the ranks (cell-count partition) set to its minimum, so all the content,
    and the samples, sit on those ranks while the others hold empty space."""
    partition = kd_partition(vol.dims, ranks, vol.spacing)
    keep = np.zeros(vol.data.shape, bool)
    for brick in partition.bricks[:max(1, ranks // 2)]:
        (x0, y0, z0), (x1, y1, z1) = brick.ghost_lo, brick.ghost_hi
        keep[z0:z1, y0:y1, x0:x1] = True
    data = np.where(keep, vol.data, vol.data.min())
    return Volume(data, vol.spacing, f"{vol.name}:dense-on-first-ranks",
                  f"{vol.source}, emptied outside the first half of the ranks' bricks")


def volume_errors(tuned: Any, tuned_bal: Any, name: str, comm: Any, seed: int,
                  own_frames: int
                  ) -> tuple[dict[str, Any] | None, dict[str, Any] | None, Any]:
    """Another volume's orbit (random knobs), on both partitions (collective): the
    bonsai-fitted models carried over, and a model calibrated on ``own_frames`` frames of the
    volume's own calibration views (off its orbit, as ``autotune volume`` calibrates on the
    volume it is given); and the HemoCell study's two imbalanced scenarios, under the models
    calibrated on the cell-count partition: ``subdomains_3to1`` (:func:`subdomain_shares`)
    and ``content_on_half_the_ranks`` (:func:`dense_on_first_ranks`), on the validation
    volumes as on the test ones, so that a choice for them has figures to be made on.
    Returns rank 0's figures of each and the volume's cell-count renderer."""
    vol, tf = load_everywhere(name, comm=comm)
    orbit = seed_orbit(vol.radius, 12, orbits=1.0)
    carried: dict[str, Any] = {}
    own: dict[str, Any] = {}
    renderers = {}
    for label, t, balance in (("imbalanced", tuned, False), ("balanced", tuned_bal, True)):
        home = t.renderer
        renderers[label] = DistributedRenderer(vol, tf, balance=balance)
        t.swap_renderer(renderers[label])
        carried[label] = evaluate_model(t, orbit, seed=seed)
        t.swap_renderer(home)
        fresh = TunedVolumeRenderer(renderers[label], t.width, t.height, 1.0)
        fresh.calibrate(volume_calibration_views(vol.radius), frames=own_frames)
        own[label] = evaluate_model(fresh, orbit, seed=seed)
    ranks = tuned.renderer.size
    for label, renderer in (
            (SUBDOMAINS_3TO1, DistributedRenderer(vol, tf, shares=subdomain_shares(ranks))),
            (CONTENT_ON_HALF, DistributedRenderer(dense_on_first_ranks(vol, ranks), tf))):
        home = tuned.renderer
        tuned.swap_renderer(renderer)
        carried[label] = evaluate_model(tuned, orbit, seed=seed)
        tuned.swap_renderer(home)
    if tuned.rank != 0:
        return None, None, renderers["imbalanced"]
    return carried, own, renderers["imbalanced"]


def model_errors(vol: Any, tf: Any, also: list[str], size: int, views: list,
                 evaluation: list, calib_frames: int, own_frames: int, comm: Any
                 ) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Calibrate on the cell-count (imbalanced) and the cost-balanced partition (with the
    volumes ``also`` beside ``vol``, ``calib_frames`` each), then measure the models' error on
    held-out views and on the validation and test volumes, carried over and calibrated on
    each volume's own views (``own_frames``) (collective). Returns the imbalanced tuned
    renderer, the other volumes' cell-count renderers by name, and rank 0's figures
    (model_error, calibration)."""
    others = [load_everywhere(name, comm=comm) for name in also]
    tuned = TunedVolumeRenderer(DistributedRenderer(vol, tf, balance=False), size, size, 1.0)
    tuned_bal = TunedVolumeRenderer(DistributedRenderer(vol, tf, balance=True), size, size, 1.0)
    for t, balance in ((tuned, False), (tuned_bal, True)):
        t.calibrate(views, frames=calib_frames,
                    also=[(DistributedRenderer(v, f, balance=balance),
                           volume_calibration_views(v.radius, len(views))) for v, f in others])
    validation: dict[str, Any] = {
        "imbalanced_orbit": evaluate_model(tuned, evaluation, seed=1, repeat=True),
        "balanced_orbit": evaluate_model(tuned_bal, evaluation, seed=1),
        "imbalanced_close_up": evaluate_model(tuned, close_views(vol.radius, 8), seed=2),
    }
    renderers, test = {}, {}
    carried_to = {"validation": validation, "test": test}
    own: dict[str, dict[str, Any]] = {"validation": {}, "test": {}}
    for i, name in enumerate(VALIDATION_VOLUMES + TEST_VOLUMES):
        which = "validation" if name in VALIDATION_VOLUMES else "test"
        carried, calibrated, renderers[name] = volume_errors(tuned, tuned_bal, name, comm,
                                                             3 + i, own_frames)
        carried_to[which][name] = carried
        own[which][name] = calibrated
    figures: dict[str, Any] = {}
    if tuned.rank == 0:
        figures["model_error"] = {"validation": validation, "test": test,
                                  "self_calibrated": own}
        figures["calibration"] = {"volumes": [vol.name, *also],
                                  "frames_per_volume": calib_frames, "views": len(views),
                                  "self_calibration_frames": own_frames,
                                  "model": tuned.model.model.to_dict(),
                                  "quality_losses": tuned.losses.to_dict()}
    return tuned, renderers, figures
