"""``autotune bench model``: how well the probe + Hong–Kim model predict frames, no feedback.

Orbit-and-dolly paths through each scene, rendered with AO rays {0, 2, 8, 32} x shadows
{off, on}; per phase and per frame, |predicted - measured| / measured with the device's
calibrated profile, and with a profile fitted on a different scene only (does it transfer?).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tqdm import tqdm

from autotune.app.animation import orbit_camera_path
from autotune.app.report import emit, pyplot, summary_stats
from autotune.atomic_files import check_output_dir, output_dir, save_figure
from models.device_profile import DeviceProfile
from raytracer.phases import PHASES
from raytracer.scene import load_scene
from raytracer.tracer import RenderSettings, Tracer
from raytracer.tuning.calibration_fit import Sample, calibration_views, collect_samples, fit_profile
from raytracer.tuning.probe import Probe
from raytracer.tuning.tuned_renderer import RayTraceModel, device_model

AO_COUNTS = (0, 2, 8, 32)
TRANSFER_SCENE = "city"


def measure_path(scene_name: str, frames: int, width: int, height: int, device: str | None,
                 bar: tqdm) -> tuple[Tracer, list[Sample]]:
    """Render the scene's path with every setting; one probe per view."""
    scene = load_scene(scene_name)
    tracer = Tracer(scene, device=device)
    probe = Probe(scene, tracer.bvh, simd_width=tracer.device_info.simd_width)
    settings = tuple(RenderSettings(a, 0.1, s, True) for a in AO_COUNTS for s in (False, True))
    samples = collect_samples(tracer, probe, orbit_camera_path(scene, frames), width, height,
                              settings, bar)
    return tracer, samples


def errors(model: RayTraceModel, samples: list[Sample]) -> dict:
    """Mean and p95 relative error per phase and per frame."""
    per_phase: dict[str, list[float]] = {p: [] for p in PHASES}
    frame_err = []
    for s in samples:
        pred = model.phase_seconds(s.workload, s.settings)
        for p, measured in s.phase_seconds.items():
            per_phase[p].append(abs(pred[p] - measured) / measured)
        measured_total = sum(s.phase_seconds.values())
        frame_err.append(abs(sum(pred.values()) - measured_total) / measured_total)

    def stats(x: list[float]) -> dict:
        return {**summary_stats(x, ("mean", "p95")), "n": len(x)}

    return {"frame": stats(frame_err), "phases": {p: stats(v) for p, v in per_phase.items() if v}}


def transfer_model(base: DeviceProfile, model: RayTraceModel, device: str | None,
                   width: int, height: int, views: int) -> RayTraceModel:
    """The device's profile and ray-tracer calibration fitted on ``TRANSFER_SCENE`` only."""
    scene = load_scene(TRANSFER_SCENE)
    tracer = Tracer(scene, device=device)
    probe = Probe(scene, tracer.bvh, simd_width=tracer.device_info.simd_width)
    samples = collect_samples(tracer, probe, calibration_views(scene, views),
                              width, height)
    fitted = fit_profile(base, model.counts, samples)
    return RayTraceModel(fitted.profile, model.counts, fitted.calibration)


def plot(samples_by_scene: dict[str, list[Sample]], model: RayTraceModel, path: Path) -> None:
    """Predicted vs measured frame time per frame, one panel per scene."""
    plt = pyplot()
    fig, axes = plt.subplots(len(samples_by_scene), 1, figsize=(9, 3 * len(samples_by_scene)),
                             squeeze=False)
    for ax, (name, samples) in zip(axes[:, 0], samples_by_scene.items(), strict=True):
        for ao in AO_COUNTS:
            sel = [s for s in samples if s.settings.ao_rays == ao and s.settings.shadows]
            meas = [sum(s.phase_seconds.values()) * 1e3 for s in sel]
            pred = [sum(model.phase_seconds(s.workload, s.settings).values()) * 1e3 for s in sel]
            line, = ax.plot(meas, label=f"AO {ao} measured")
            ax.plot(pred, "--", color=line.get_color(), label=f"AO {ao} predicted")
        ax.set_title(f"{name}: frames with shadows")
        ax.set_ylabel("ms")
        ax.legend(fontsize=6, ncol=4)
    axes[-1, 0].set_xlabel("frame of the orbit-and-dolly path")
    fig.tight_layout()
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="autotune bench model", description=__doc__)
    parser.add_argument("--scene", action="append", help="default: bunny, dragon, sibenik")
    parser.add_argument("--frames", type=int, help="views per path (default 100, quick 10)")
    parser.add_argument("--quick", action="store_true", help="dragon-small, 10 views, 256x144")
    parser.add_argument("--device")
    parser.add_argument("--plots", type=Path,
                        help="folder for the PNG plot; must be new or empty unless --force")
    parser.add_argument("--force", action="store_true",
                        help="write --plots into a non-empty folder (a same-named plot is "
                             "replaced, nothing else is deleted)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.plots:
        check_output_dir(args.plots, args.force)  # before the measurements, not after
    scenes = args.scene or (["dragon-small"] if args.quick else ["bunny", "dragon", "sibenik"])
    frames = args.frames or (10 if args.quick else 100)
    width, height = (256, 144) if args.quick else (320, 180)
    settings_count = len(AO_COUNTS) * 2
    samples_by_scene = {}
    with tqdm(total=len(scenes) * frames * settings_count, desc="model accuracy",
              unit="frame") as bar:
        for name in scenes:
            tracer, samples = measure_path(name, frames, width, height, args.device, bar)
            samples_by_scene[name] = samples
    model = device_model(tracer)
    other = transfer_model(model.profile, model, args.device, width, height,
                           4 if args.quick else 10)
    source = model.calibration.source if model.calibration else model.profile.source
    figures = {"device": tracer.device.name, "profile": source,
               "width": width, "height": height, "frames_per_path": frames,
               "transfer_profile_fitted_on": TRANSFER_SCENE, "scenes": {}}
    for name, samples in samples_by_scene.items():
        figures["scenes"][name] = {"calibrated": errors(model, samples),
                                   "transfer": errors(other, samples)}
    all_samples = [s for v in samples_by_scene.values() for s in v]
    figures["all"] = {"calibrated": errors(model, all_samples),
                      "transfer": errors(other, all_samples)}
    if args.plots:
        with output_dir(args.plots, args.force) as plots:
            plot(samples_by_scene, model, plots / "model_accuracy.png")
    emit(figures, args.json, title="model accuracy without feedback")
    return 0
