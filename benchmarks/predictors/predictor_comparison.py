"""The kernel-model paper's comparison on this project's own work, run by ``bench kernel-models``.

The paper: Amarís, de Camargo, Dyab, Goldman, Trystram, "A Comparison of GPU Execution Time
Prediction using Machine Learning and Analytical Modeling" (issue 21 item 2 here).

**Ray tracer** (the first OpenCL device that builds, or ``--device``): frames rendered and
probed as ``autotune bench tracer-model`` does (``benchmarks.governed.tracer_model.measure``;
each phase timed by the device's timer, CPU busy time on a CPU device). Calibration: the
calibration scenes (spheres, city, bunny) along the calibration orbit
with the calibration settings; validation: dragon and sibenik (quick: dragon-small), test:
grass, terrain, aneurism (quick: grass), both along the held-out path at other sizes with AO x
shadows x Phong (``governed.mesh.scene_sets``). Approaches, each fitted on calibration rows
only: ``HK``, the project's model (Hong–Kim + the ray tracer's calibration) fitted on them by
``fit_profile`` from the stored device profile; ``BSP``
(``benchmarks.predictors.raytrace_predictors``); ``LR``, ``SVR``, ``RF`` per phase on the
probe's workload + knobs + device profile, or the paper's count features, or both, in log2 or
raw; ``hybrid``, Hong–Kim times a learned residual. Each learned approach's configuration (and
the hybrid's approach) is chosen on the validation scenes
(``benchmarks.predictors.part_predictors``); the test scenes are only reported.

**Volume renderer** (``benchmarks.predictors.volume_predictors``): rank 0's render CPU seconds,
the linear model of the per-process analytical model (HemoCell study) vs the same learned
approaches and its hybrid; calibration views / the cluster study's orbit (Tkachev et al.,
"Prediction of Distributed Volume Visualization Performance to Support Render Hardware
Acquisition") / the first test volume (governed.volume.volume_sets).

Goals, on the ray tracer's test scenes: the best learned predictor (chosen on validation) vs
Hong–Kim, mean frame error; and the hybrid no worse than the better of the two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
from tqdm import tqdm

from autotune_app.animation import heldout_camera_path
from benchmarks.governed.tracer_model import EVAL_SIZES, eval_settings, measure
from benchmarks.predictors import raytrace_predictors, volume_predictors
from benchmarks.predictors.part_predictors import (
    PartRows,
    best_of,
    group_scores,
    learned_and_hybrid,
    scores,
)
from governed.mesh import calibration_frames as cf
from governed.mesh.calibration_fit import base_profile, fit_profile
from governed.mesh.instruction_counts import load_kernel_counts
from governed.mesh.profile_store import find_device_profile
from governed.mesh.scene_sets import evaluation_scenes
from governed.mesh.timers import default_timer
from governed.mesh.tuned_renderer import RayTraceModel
from governed.volume.model_fit import volume_calibration_views
from governed.volume.volume_sets import GOVERNED_VOLUME, TEST_VOLUMES
from raytracer.device.choice import DeviceError, one_device_per_runtime
from raytracer.volume.distributed import DistributedRenderer, load_everywhere, seed_orbit
from studies.kernel_models.learned_comparators import APPROACHES

SETS = ("cal", "val", "test")
VOLUME_SIZE = 256
VOLUME_FRAMES = {False: (32, 16, 16), True: (16, 8, 8)}  # calibration, validation, test


def raytrace_samples(spec: str, quick: bool) -> tuple[dict[str, list], str]:
    """Calibration, validation and test frames of the ray tracer (rendered, probed, timed),
    and what the timer counts."""
    cal_scenes = cf.CALIBRATION_SCENES
    cal_sizes = cf.QUICK_SIZES if quick else cf.FULL_SIZES
    views = 3 if quick else 6
    frames = 3 if quick else 4
    sizes = ((256, 144),) if quick else EVAL_SIZES
    out: dict[str, list] = {k: [] for k in SETS}
    with tqdm(desc="own work: ray tracer frames", unit="frame") as bar:
        for name in cal_scenes:
            out["cal"] += measure(name, lambda sc: cf.calibration_views(sc, views, True),
                                  cal_sizes, cf.CALIBRATION_SETTINGS, spec, bar)[1]
        for key, which in (("val", "validation"), ("test", "test")):
            for name in evaluation_scenes(which, quick):
                tracer, found = measure(name, lambda sc: heldout_camera_path(sc, frames), sizes,
                                        eval_settings(quick), spec, bar)
                out[key] += found
    return out, default_timer(tracer).describe()


def hong_kim(info: Any, cal: list) -> tuple[Any, str]:
    """The project's model fitted on the calibration frames, from the stored device profile
    (quick microbenchmarks where none is stored); and which start it had."""
    counts = load_kernel_counts()
    base = find_device_profile(info.name, info.driver)
    start = f"stored profile ({base.source})" if base else "quick microbenchmarks"
    fitted = fit_profile(base or base_profile(info, quick=True), counts, cal)
    return RayTraceModel(fitted.profile, counts, fitted.calibration), start


def compare(sets: Mapping[str, PartRows], model: Mapping[str, np.ndarray],
            analytical: str, feature_sets: tuple[str, ...],
            extra: Mapping[str, Mapping[str, np.ndarray]] | None = None,
            groups: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """Validation and test scores of the analytical model (``model`` per set), any ``extra``
    predictions per set, and the learned approaches and hybrid chosen on validation; with
    ``groups`` (a label per row of the val and test sets) frame scores per label too."""
    choices = learned_and_hybrid(feature_sets, sets["cal"], sets["val"], sets["test"], model)
    preds = {analytical: model, **dict(extra or {})}
    preds.update({a: {"val": c.validation, "test": c.test} for a, c in choices.items()})
    per_group = {}
    if groups:
        per_group = {"per_group": {
            name: {a: group_scores(p[key], sets[key], groups[key]) for a, p in preds.items()}
            for key, name in (("val", "validation"), ("test", "test"))}}
    return {
        "validation": {a: scores(p["val"], sets["val"]) for a, p in preds.items()},
        "test": {a: scores(p["test"], sets["test"]) for a, p in preds.items()},
        **per_group,
        "chosen": {a: c.config.name for a, c in choices.items()},
        "validation_frame_error_per_config": {a: c.validation_errors
                                              for a, c in choices.items()},
        "best_learned": best_of({a: choices[a] for a in APPROACHES}),
        "rows": {k: int(len(v.measured)) for k, v in sets.items()},
    }


def raytrace_figures(samples: Mapping[str, list], hk: Any, counts: Any, clock_hz: float,
                     lanes: float) -> dict[str, Any]:
    """The ray tracer's comparison from its frames and the fitted Hong–Kim model ``hk``."""
    rp = raytrace_predictors
    sets = {k: rp.rows(samples[k], counts, hk.profile) for k in SETS}
    model = {k: rp.model_seconds(hk, samples[k]) for k in SETS}
    unit = {k: rp.bsp_unit_seconds(samples[k], counts, clock_hz, lanes) for k in SETS}
    lambdas = rp.fit_lambdas(unit["cal"], sets["cal"].measured)
    bsp = {k: rp.bsp_seconds_of(unit[k], lambdas) for k in SETS}
    scenes = {k: [s.scene for s in samples[k]] for k in SETS}
    out = compare(sets, model, "HK", rp.FEATURE_SETS, {"BSP": bsp}, scenes)
    out["bsp_lambda"] = lambdas
    return out


def raytracer(spec: str | None, quick: bool) -> dict[str, Any]:
    """Render, fit and compare on the ray tracer; the figures with what they were made of."""
    infos = one_device_per_runtime(spec)
    if not infos:
        raise DeviceError("no OpenCL device builds here; `autotune devices` says why")
    info = infos[0]
    samples, timer = raytrace_samples(info.spec, quick)
    hk, start = hong_kim(info, samples["cal"])
    out = raytrace_figures(samples, hk, hk.counts, info.clock_mhz * 1e6,
                           info.compute_units * info.simd_width)
    scenes = {k: sorted({s.scene for s in v}) for k, v in samples.items()}
    return {"device": info.name, "runtime": info.runtime, "hong_kim_start": start,
            "scenes": scenes, "measured": f"each phase's seconds: {timer}",
            **out}


def volume_figures(samples: Mapping[str, list]) -> dict[str, Any]:
    """The volume renderer's comparison from its calibration, validation and test frames."""
    vp = volume_predictors
    sets = {k: vp.rows(samples[k], vp.probe_thresholds()) for k in SETS}
    linear = vp.fit_linear(sets["cal"])
    model = {k: vp.linear_seconds(linear, sets[k]) for k in SETS}
    out = compare(sets, model, "linear", vp.FEATURE_SETS)
    out["linear_model"] = asdict(linear)
    return out


def volume(quick: bool) -> dict[str, Any]:
    """Render the volume sets on one rank and compare."""
    cal_n, val_n, test_n = VOLUME_FRAMES[quick]
    vol, tf = load_everywhere(GOVERNED_VOLUME)
    held, held_tf = load_everywhere(TEST_VOLUMES[0])
    renderer = DistributedRenderer(vol, tf)
    samples = {
        "cal": volume_predictors.collect(renderer, volume_calibration_views(vol.radius, cal_n),
                                         VOLUME_SIZE, seed=11),
        "val": volume_predictors.collect(
            renderer, seed_orbit(vol.radius, val_n, orbits=1.0, distance=2.6), VOLUME_SIZE,
            seed=1),
        "test": volume_predictors.collect(DistributedRenderer(held, held_tf),
                                          seed_orbit(held.radius, test_n, orbits=1.0),
                                          VOLUME_SIZE, seed=3),
    }
    return {"ranks": 1, "size": VOLUME_SIZE,
            "sets": {"cal": f"{vol.name}, {cal_n} calibration views",
                     "val": f"{vol.name}, the cluster study's orbit, {val_n} views",
                     "test": f"{held.name} (a test volume), the cluster study's orbit, "
                             f"{test_n} views"},
            "measured": "rank 0's render CPU seconds (what the per-process model is fitted "
                        "on)",
            **volume_figures(samples)}


def run(spec: str | None, quick: bool) -> dict[str, Any]:
    """Both comparisons: the ``own_work`` block of ``bench kernel-models``."""
    return {"raytracer": raytracer(spec, quick), "volume": volume(quick)}


def goals(own: Mapping[str, Any]) -> dict[str, dict]:
    """On the ray tracer's test scenes: the best learned predictor vs Hong–Kim, and the hybrid
    vs the better of the two (mean frame error)."""
    rt = own["raytracer"]
    test = rt["test"]
    best = rt["best_learned"]
    hk = test["HK"]["frame"]["mean_error"]
    learned = test[best]["frame"]["mean_error"]
    hybrid = test["hybrid"]["frame"]["mean_error"]
    better = min(hk, learned)
    return {
        "raytracer_test_best_learned_vs_hong_kim": {
            "value": learned, "goal": f"<= Hong–Kim's {hk:.4f}", "met": bool(learned <= hk),
            "what": f"mean frame error on the test scenes of the best learned predictor "
                    f"({best}, chosen on validation: {rt['chosen'][best]}) against Hong–Kim's"},
        "raytracer_test_hybrid_vs_better": {
            "value": hybrid, "goal": f"<= {better:.4f} (the better of Hong–Kim and {best})",
            "met": bool(hybrid <= better),
            "what": f"mean frame error on the test scenes of the hybrid ({rt['chosen']['hybrid']},"
                    f" chosen on validation)"},
    }


def table_lines(own: Mapping[str, Any]) -> list[str]:
    """Validation and test tables of both comparisons as text."""
    lines = []
    for name, what in (("raytracer", "ray tracer"), ("volume", "volume renderer, per rank")):
        block = own[name]
        parts = [p for p in next(iter(block["validation"].values())) if p != "frame"]
        for key, label in (("validation", "validation"), ("test", "TEST")):
            lines.append(f"Own work, {what}, {label}: mean |pred - meas| / meas per part and "
                         f"frame; accuracy pred/meas mean +- sd of the frame")
            lines.append("  " + "approach".ljust(8) + "".join(p.rjust(9) for p in parts)
                         + "frame".rjust(9) + "   accuracy       chosen on validation")
            for a, sc in block[key].items():
                chosen = block["chosen"].get(a, "")
                lines.append("  " + a.ljust(8)
                             + "".join(f"{sc[p]['mean_error']:9.3f}" for p in parts)
                             + f"{sc['frame']['mean_error']:9.3f}"
                             + f"   {sc['frame']['accuracy_mean']:5.2f} +- "
                               f"{sc['frame']['accuracy_sd']:<5.2f}  {chosen}")
    return lines
