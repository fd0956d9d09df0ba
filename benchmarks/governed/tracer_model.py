"""``autotune bench tracer-model``: how well the probe + Hong–Kim model predict frames it never saw.

No feedback. The model is calibrated here, from the device's microbenchmark parameters, on the
calibration set of ``autotune calibrate`` (procedural spheres and city, the bunny mesh, at
320x180 and 640x360 along the calibration orbit), and evaluated on a held-out set: the
validation scenes (dragon, sibenik), or with ``--set test`` the test scenes (grass, terrain,
aneurism; only to report, see ``governed.mesh.scene_sets``), other resolutions (256x144,
480x270) and another camera path (an orbit that starts an eighth of a turn away, higher,
turning the other way), with AO rays {0, 1, 4, 16} x shadows x Phong. Figures per phase and
per frame: |predicted - measured| / measured.

Columns: ``held_out`` (the headline: calibrated on the calibration set, evaluated on the held-out
set), ``in_sample`` (the same fit on its own calibration frames, labelled so), ``transfer`` (a
fit on ``city`` alone at one size, starting from microbenchmark parameters only), ``shipped``
(the calibration the product uses, with what it was fitted on). The measured time is the
device timer's (see ``timer`` in the JSON): CPU busy time on a CPU device, so that other
tenants of a shared machine do not count; the kernel events' inflation is reported beside.

Per runtime: every OpenCL runtime that builds here is measured in turn (PoCL and Intel's CPU
runtime are two; ``--device`` picks one). ``runtime_transfer`` predicts one runtime's held-out
frames with the calibrations shipped for other devices (calibrated on another runtime, no
recalibration), then times a quick calibration on this runtime and gives its error on the same
frames. ``measurement_repeat``: every held-out frame is measured a second time after all the
scenes' first pass, and the two measurements' difference is reported beside the model's error
(the measured side's own scatter, a floor under any model error). ``ao_rays``: the AO phase
of each view as a line in its ray count, measured and predicted (median intercept and slope
per pixel): what a frame pays whatever its AO rays apart from what each ray adds. The JSON's
``run`` block says how quiet the machine was (``others_share``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from autotune_app import options as opt
from autotune_app.animation import heldout_camera_path
from autotune_app.report import emit, pyplot, summary_stats
from benchmarks.harness.results import save_result
from benchmarks.harness.run_record import (
    at_most,
    mark_goals,
    measured_run,
    quick_run,
    variant_name,
)
from common.atomic_files import check_output_dir, output_dir, save_figure
from common.cpu_info import this_machine
from governed.mesh.calibration_fit import (
    FittedModel,
    base_profile,
    calibrate,
    fit_profile,
    fit_report,
)
from governed.mesh.calibration_frames import (
    CALIBRATION_SCENES,
    CALIBRATION_SETTINGS,
    Sample,
    calibration_sizes,
    calibration_views,
    collect_samples,
)
from governed.mesh.instruction_counts import load_kernel_counts
from governed.mesh.probe import Probe
from governed.mesh.scene_sets import evaluation_scenes, refusal, sets_record
from governed.mesh.timers import default_timer
from governed.mesh.tuned_renderer import RayTraceModel, device_model
from models.app_calibration import builtin_calibrations
from models.device_profile import machine_profiles
from raytracer.camera import Camera
from raytracer.device.choice import DeviceInfo, one_device_per_runtime
from raytracer.mesh.phases import PHASES
from raytracer.mesh.scene import Scene, load_scene
from raytracer.mesh.tracer import RenderSettings, Tracer

EVAL_SIZES = ((256, 144), (480, 270))
AO_COUNTS = (0, 1, 4, 16)
TRANSFER_SCENE = "city"
GOALS = {"frame_mean": 0.10, "frame_p95": 0.25, "phase_mean": 0.15, "quick_calibration_s": 30.0,
         "quick_over_full": 0.02}


def eval_settings(quick: bool) -> tuple[RenderSettings, ...]:
    """The held-out settings: AO rays (fewer with ``quick``) x shadows x Phong."""
    ao = (0, 2, 8) if quick else AO_COUNTS
    return tuple(RenderSettings(a, 0.1, s, p) for a in ao for s in (False, True)
                 for p in (False, True))


def measure(scene_name: str, cameras_of: Callable[[Scene], list[Camera]],
            sizes: Sequence[tuple[int, int]], settings: Sequence[RenderSettings],
            device: str | None, bar: tqdm) -> tuple[Tracer, list[Sample]]:
    """Render each size of the scene's path with every setting; one probe per view."""
    scene = load_scene(scene_name)
    tracer = Tracer(scene, device=device)
    probe = Probe.for_tracer(tracer)
    samples = []
    for width, height in sizes:
        samples += collect_samples(tracer, probe, cameras_of(scene), width, height, settings, bar,
                                   scene=scene_name)
    return tracer, samples


def errors(model: RayTraceModel, samples: list[Sample]) -> dict:
    """Mean and p95 relative error per phase and per frame, and the signed mean
    (``bias``: (predicted - measured) / measured; negative where the model prices too little),
    which tells a scene the model misprices throughout from scatter around the truth."""
    per_phase: dict[str, list[float]] = {p: [] for p in PHASES}
    frame_err = []
    for s in samples:
        pred = model.phase_seconds(s.workload, s.settings)
        for p, measured in s.phase_seconds.items():
            per_phase[p].append((pred[p] - measured) / measured)
        measured_total = sum(s.phase_seconds.values())
        frame_err.append((sum(pred.values()) - measured_total) / measured_total)

    def stats(signed: list[float]) -> dict:
        return {**summary_stats(np.abs(signed), ("mean", "p95")),
                "bias": summary_stats(signed, ("mean",))["mean"], "n": len(signed)}

    return {"frame": stats(frame_err), "phases": {p: stats(v) for p, v in per_phase.items() if v}}


def phong_price(model: RayTraceModel, samples: list[Sample]) -> dict:
    """What Phong adds to the shade phase: measured (same view, same other knobs) vs predicted."""
    by_key: dict[tuple, dict[bool, Sample]] = {}
    for s in samples:
        key = (id(s.workload), s.settings.ao_rays, s.settings.shadows)
        by_key.setdefault(key, {})[s.settings.phong] = s
    measured, predicted = [], []
    for pair in by_key.values():
        if len(pair) == 2:
            measured.append(pair[True].phase_seconds["shade"] - pair[False].phase_seconds["shade"])
            on = model.phase_seconds(pair[True].workload, pair[True].settings)["shade"]
            off = model.phase_seconds(pair[False].workload, pair[False].settings)["shade"]
            predicted.append(on - off)
    if not measured:
        return {}
    return {"measured_ms_median": float(np.median(measured) * 1e3),
            "predicted_ms_median": float(np.median(predicted) * 1e3),
            "predicted_over_measured": float(np.median(predicted) / np.median(measured))
            if np.median(measured) > 0 else None, "pairs": len(measured)}


def ao_ray_split(model: RayTraceModel, samples: list[Sample]) -> dict:
    """The AO phase on each view as a line in its ray count, ``intercept + slope * rays``
    (least squares over the view's frames with AO on, per pixel), measured and predicted:
    the part a frame pays whatever its ray count (the kernel's setup, the filter, the launch)
    apart from what each ray adds. A model right on average at one ray count but wrong in this
    split is wrong at every other count, and a per-phase correction learnt at one count
    carries that error to the next."""
    by_view: dict[int, list[Sample]] = {}
    for s in samples:
        if s.settings.ao_rays > 0 and "ao" in s.phase_seconds:
            by_view.setdefault(id(s.workload), []).append(s)
    lines: dict[str, list[tuple[float, float]]] = {"measured": [], "predicted": []}
    for view in by_view.values():
        rays = np.array([s.settings.ao_rays for s in view], np.float64)
        if len(np.unique(rays)) < 2:
            continue
        pixels = view[0].workload.pixels
        measured = np.array([s.phase_seconds["ao"] for s in view]) / pixels
        predicted = np.array([model.phase_seconds(s.workload, s.settings)["ao"]
                              for s in view]) / pixels
        for key, seconds in (("measured", measured), ("predicted", predicted)):
            slope, intercept = np.polyfit(rays, seconds, 1)
            lines[key].append((float(intercept) * 1e9, float(slope) * 1e9))
    if not lines["measured"]:
        return {}
    med = {k: np.median(np.array(v), axis=0) for k, v in lines.items()}
    return {"views": len(lines["measured"]),
            **{k: {"intercept_ns_per_pixel": float(m[0]),
                   "slope_ns_per_pixel_per_ray": float(m[1])} for k, m in med.items()},
            "intercept_predicted_over_measured": float(med["predicted"][0] / med["measured"][0])
            if med["measured"][0] > 0 else None,
            "slope_predicted_over_measured": float(med["predicted"][1] / med["measured"][1])
            if med["measured"][1] > 0 else None}


def contention(samples: list[Sample]) -> dict:
    """How much the kernel events exceed the timer's figure (other tenants' share)."""
    ratio = [sum(s.event_seconds.values()) / sum(s.phase_seconds.values()) for s in samples
             if s.event_seconds]
    return summary_stats(ratio, ("median", "p95", "max")) if ratio else {}


def repeat_scatter(first: list[Sample], again: list[Sample]) -> dict:
    """|again - first| / first of the same held-out frames measured twice in one run, per frame
    and per phase: how far the measured side moves alone, which no model error can go below."""
    frame = [abs(sum(b.phase_seconds.values()) / sum(a.phase_seconds.values()) - 1.0)
             for a, b in zip(first, again, strict=True)]
    phases: dict[str, list[float]] = {p: [] for p in PHASES}
    for a, b in zip(first, again, strict=True):
        for p, seconds in a.phase_seconds.items():
            phases[p].append(abs(b.phase_seconds[p] / seconds - 1.0))
    return {"what": "the held-out frames measured a second time after every scene's first "
                    "pass (same views, sizes and knobs): |second - first| / first",
            "frame": summary_stats(frame, ("mean", "p95")),
            "phases": {p: summary_stats(v, ("mean",)) for p, v in phases.items() if v}}


def device_goals(figures: dict) -> dict:
    """One device's goals: held-out frame mean and p95, each phase; quick calibration time."""
    held = figures["all"]["held_out"]
    repeat = figures["measurement_repeat"]["frame"]["mean"]
    out = {
        "held_out_mean_frame_error": at_most(
            held["frame"]["mean"], GOALS["frame_mean"],
            f"mean |predicted - measured| / measured frame, held-out scenes/sizes/path (the "
            f"same frames measured twice differ by {repeat:.1%} on average: "
            f"measurement_repeat)"),
        "held_out_p95_frame_error": at_most(held["frame"]["p95"], GOALS["frame_p95"],
                                            "p95 of the same"),
    }
    for phase, st in held["phases"].items():
        out[f"held_out_mean_{phase}_error"] = at_most(
            st["mean"], GOALS["phase_mean"], f"mean relative error of the {phase} phase, held out")
    transfer = figures["runtime_transfer"]
    quick = transfer["quick_calibration"]
    out["quick_calibration_seconds"] = at_most(
        quick["seconds"], GOALS["quick_calibration_s"],
        "seconds of `autotune calibrate --quick` (microbenchmarks + frames + fit)")
    if "full_calibration_here" in transfer:
        full = transfer["full_calibration_here"]["mean"]
        out["quick_calibration_error_over_full"] = at_most(
            quick["frame"]["mean"] - full, GOALS["quick_over_full"],
            f"the quick calibration's mean held-out frame error less the full calibration's "
            f"({quick['frame']['mean']:.1%} against {full:.1%}), the same frames")
    return out


def plot(samples_by_scene: dict[str, list[Sample]], model: RayTraceModel, path: Path) -> None:
    """Predicted vs measured frame time per frame, one panel per scene."""
    plt = pyplot()
    fig, axes = plt.subplots(len(samples_by_scene), 1, figsize=(9, 3 * len(samples_by_scene)),
                             squeeze=False)
    for ax, (name, samples) in zip(axes[:, 0], samples_by_scene.items(), strict=True):
        meas = [sum(s.phase_seconds.values()) * 1e3 for s in samples]
        pred = [sum(model.phase_seconds(s.workload, s.settings).values()) * 1e3 for s in samples]
        ax.plot(meas, label="measured")
        ax.plot(pred, "--", label="predicted (held out)")
        ax.set_title(f"{name}: every held-out frame (views x sizes x settings)")
        ax.set_ylabel("ms")
        ax.legend(fontsize=7)
    axes[-1, 0].set_xlabel("frame")
    fig.tight_layout()
    save_figure(fig, path)


def measure_device(info: DeviceInfo, args: argparse.Namespace, scenes: list[str]) -> dict:
    """Calibration and held-out frames of one device, and its models' errors on them."""
    cal_scenes = CALIBRATION_SCENES
    cal_sizes = calibration_sizes(info, args.quick)
    frames = args.frames or (3 if args.quick else 6)
    sizes = ((256, 144),) if args.quick else EVAL_SIZES
    settings = eval_settings(args.quick)
    cal_views = 3 if args.quick else 6
    counts = load_kernel_counts()
    total = (len(cal_scenes) * len(cal_sizes) * (cal_views + 2) * len(CALIBRATION_SETTINGS)
             + 2 * len(scenes) * len(sizes) * frames * len(settings))
    with tqdm(total=total, desc=f"model accuracy ({info.runtime})", unit="frame") as bar:
        cal_samples: list[Sample] = []
        for name in cal_scenes:
            _, s = measure(name, lambda sc: calibration_views(sc, cal_views, True), cal_sizes,
                           CALIBRATION_SETTINGS, info.spec, bar)
            cal_samples += s
        transfer_samples = [s for s in cal_samples if s.scene == TRANSFER_SCENE
                            and s.workload.pixels == cal_sizes[-1][0] * cal_sizes[-1][1]]
        samples_by_scene, repeats = {}, []
        for name in scenes:
            tracer, samples_by_scene[name] = measure(
                name, lambda sc: heldout_camera_path(sc, frames), sizes, settings, info.spec,
                bar)
        for name in scenes:  # the same frames again, after all the others: the measured side
            repeats += measure(name, lambda sc: heldout_camera_path(sc, frames), sizes,
                               settings, info.spec, bar)[1]
    base = base_profile(info, quick=True)  # microbenchmark parameters, nothing fitted
    calibrated = fit_profile(base, counts, cal_samples)
    transfer = fit_profile(base, counts, transfer_samples)

    def as_model(f: FittedModel) -> RayTraceModel:
        return RayTraceModel(f.profile, counts, f.calibration)

    held_model, transfer_model = as_model(calibrated), as_model(transfer)
    shipped = device_model(tracer)
    all_samples = [s for v in samples_by_scene.values() for s in v]
    timer = default_timer(tracer)
    figures: dict = {
        "device": info.name, "runtime": info.runtime, "platform": info.platform,
        "driver": info.driver, "simd_width": info.simd_width, "clock_mhz": info.clock_mhz,
        "clock_source": info.clock_source,
        "timer": timer.name, "timer_what": timer.describe(),
        "calibration_set": {"scenes": list(cal_scenes),
                            "sizes": [f"{w}x{h}" for w, h in cal_sizes],
                            "path": f"calibration orbit, {cal_views} views + one aside and "
                                    f"one turned away",
                            "settings": "AO 0/2/8/16 with shadows/Phong varied (4 settings)",
                            "frames": len(cal_samples)},
        "held_out_set": {"scenes": scenes, "sizes": [f"{w}x{h}" for w, h in sizes],
                         "path": f"held-out orbit (other start, height and direction), "
                                 f"{frames} views", "settings": len(settings),
                         "frames": len(all_samples)},
        "fit": fit_report(calibrated),
        "transfer_fit": {"fitted_on": f"{TRANSFER_SCENE} at {cal_sizes[-1][0]}x"
                                      f"{cal_sizes[-1][1]} from microbenchmark parameters",
                         **fit_report(transfer)},
        "shipped_calibration": shipped.calibration.source if shipped.calibration else None,
        "kernel_events_over_timer": contention(all_samples + cal_samples),
        "measurement_repeat": repeat_scatter(all_samples, repeats),
        "scenes": {},
    }
    for name, samples in samples_by_scene.items():
        figures["scenes"][name] = {"held_out": errors(held_model, samples),
                                   "transfer": errors(transfer_model, samples),
                                   "shipped": errors(shipped, samples)}
    figures["all"] = {"held_out": errors(held_model, all_samples),
                      "in_sample": errors(held_model, cal_samples),
                      "transfer": errors(transfer_model, all_samples),
                      "shipped": errors(shipped, all_samples)}
    figures["phong"] = {"held_out": phong_price(held_model, all_samples)}
    figures["ao_rays"] = {"held_out": ao_ray_split(held_model, all_samples),
                          "in_sample": ao_ray_split(held_model, cal_samples),
                          "shipped": ao_ray_split(shipped, all_samples)}
    figures["runtime_transfer"] = runtime_transfer(info, held_model, all_samples)
    if args.plots:
        with output_dir(args.plots, args.force) as plots:
            plot(samples_by_scene, held_model, plots / f"model_accuracy_{info.runtime}.png")
    return {"figures": figures, "model": held_model, "samples": all_samples}


def runtime_transfer(info: DeviceInfo, own: RayTraceModel, samples: list[Sample]) -> dict:
    """This runtime's held-out frames predicted by the calibration of every other device
    shipped for this machine (no recalibration), then by a quick calibration here: its seconds
    and its error."""
    counts = load_kernel_counts()
    out: dict = {"without_recalibration": {}}
    for cal in builtin_calibrations(this_machine()):
        if (cal.device, cal.driver) == (info.name, info.driver):
            continue
        profile = next((p for p in machine_profiles(this_machine())
                        if (p.name, p.driver) == (cal.device, cal.driver)), None)
        if profile is None:
            continue
        model = RayTraceModel(profile, counts, cal)
        out["without_recalibration"][f"{cal.device} (driver {cal.driver})"] = {
            "calibration": cal.source, **errors(model, samples)}
    start = time.perf_counter()
    quick = calibrate(info, quick=True, save=False, progress=False)
    seconds = time.perf_counter() - start
    out["quick_calibration"] = {"seconds": seconds,
                                **errors(RayTraceModel(quick.profile, counts, quick.calibration),
                                         samples)}
    out["full_calibration_here"] = errors(own, samples)["frame"]
    return out


def goals(figures: dict) -> dict:
    """Per runtime: held-out frame and phase errors; the quick calibration's seconds."""
    out = {}
    for runtime, fig in figures["runtimes"].items():
        out.update({f"{runtime}_{k}": v for k, v in device_goals(fig).items()})
    return out


def main(argv: list[str] | None = None) -> int:
    """Calibrate and evaluate on every runtime; print a table or JSON (``--json``)."""
    parser = argparse.ArgumentParser(prog="autotune bench tracer-model", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    opt.add_evaluation_set(parser)
    parser.add_argument("--frames", type=int, help="views of the held-out path (default 6, "
                        "quick 3)")
    parser.add_argument("--quick", action="store_true",
                        help="quick calibration set; one scene of the set (validation: "
                             "dragon-small, test: grass) at 256x144, AO {0, 2, 8}")
    parser.add_argument("--device", help="one device (P:D, gpu, cpu, intel-cpu, pocl); default: "
                                         "one device of every OpenCL runtime that builds here")
    opt.add_plots(parser, "the PNG plots")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--save", action="store_true", help="also write results/<machine>/"
                        "tracer_model[_test][_quick]_<runtimes>.json")
    args = parser.parse_args(argv)
    if args.plots:
        check_output_dir(args.plots, args.force)  # before the measurements, not after
    scenes = args.scene or list(evaluation_scenes(args.set, args.quick))
    refused = refusal(scenes, args.set)
    if refused:
        parser.error(refused)
    with measured_run() as run:
        results = {info.runtime: measure_device(info, args, scenes)
                   for info in one_device_per_runtime(args.device)}
    figures: dict = {"run": run.figures(), "sets": sets_record(args.set, scenes),
                     "runtimes": {r: res["figures"] for r, res in results.items()}}
    figures["goals"] = mark_goals(goals(figures), figures["run"], quick_run(args.quick))
    emit(figures, args.json, title="model accuracy without feedback (held out), per runtime")
    if args.save:
        stem = "tracer_model_test" if args.set == "test" else "tracer_model"
        save_result(variant_name(stem, quick_run(args.quick), "+".join(sorted(results))),
                    figures)
    return 0
