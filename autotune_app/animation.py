"""Camera paths of the paper's experiments and a runner that records every tuned frame."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from autotune_app.report import pyplot, tracking_figures
from common.atomic_files import save_figure, save_png
from common.image_quality import psnr, ssim
from governed.mesh.tuned_renderer import TunedRenderer
from raytracer.camera import Camera, orbit_path, turn_path, with_next
from raytracer.mesh.scene import Scene
from raytracer.mesh.tracer import MAX_AO_RAYS, RenderSettings, Tracer

REVERSAL_WINDOW = 10  # frames within which a raised knob lowered again is a reversal
REVERSAL_KNOBS = ("ao_rays", "shadows", "phong")  # the knobs whose reversals are counted
REFERENCE_SETTINGS = RenderSettings(ao_rays=8, ao_radius=0.1, shadows=True, phong=True)


def frame_times(renderer: TunedRenderer, camera: Camera, settings: RenderSettings,
                frames: int) -> list[float]:
    """Times of ``frames`` frames of one view at fixed knobs, as a user without the tuner
    waits for them (tuning off prices nothing, so nothing is probed: kernels + read-back +
    host); leaves the renderer's tuning off."""
    renderer.tuning, renderer.settings = False, settings
    return [renderer.render(camera).measured for _ in range(frames)]


def measure_settings(renderer: TunedRenderer, camera: Camera, settings: RenderSettings,
                     repeats: int = 3) -> float:
    """Median of :func:`frame_times`' ``repeats`` frames; leaves the renderer's tuning off."""
    return float(np.median(frame_times(renderer, camera, settings, repeats)))


def reference_frame_target(renderer: TunedRenderer, camera: Camera, repeats: int = 5) -> float:
    """A target the scene can meet with a mid setting (8 AO rays + shadows + Phong): the median
    frame of that setting on ``camera`` without the tuner (its work comes out of the same
    budget, so a tuner that costs more than it buys falls short of the setting)."""
    target = measure_settings(renderer, camera, REFERENCE_SETTINGS, repeats)
    renderer.tuning = True
    return target


FULL_SETTINGS = RenderSettings(ao_rays=MAX_AO_RAYS, ao_radius=0.1, shadows=True, phong=True,
                               ao_history=False, ao_filter=False)
#: Added to a frame's index for its reference's AO seed: the reference's rays must not be the
#: judged frame's (a frame rendered with seed i shares its first rays with a reference of
#: seed i, which made 7 AO rays score SSIM 0.58 and 7.25 rays 0.50 on sibenik's first view,
#: 0.25 and 0.10 on its tenth; with independent rays 0.69 and 0.69, 0.27 and 0.24)
REFERENCE_SEED_OFFSET = 1 << 30


def reference_images(tracer: Tracer, cameras: list[Camera], frames: list[int], width: int,
                     height: int) -> dict[int, np.ndarray]:
    """The full-quality image (64 AO rays + shadows + Phong, no history) of each of
    ``frames``, by frame index, its AO rays independent of any governed frame's."""
    return {i: tracer.render(cameras[i], width, height, FULL_SETTINGS,
                             seed=REFERENCE_SEED_OFFSET + i).image for i in frames}


def image_quality(kept: dict[int, np.ndarray], references: dict[int, np.ndarray]) -> dict:
    """PSNR / SSIM of kept frames against their full-quality frames
    (:func:`reference_images`): holding a target must not hide dropping to the floor."""
    frames = sorted(references)
    p = [psnr(kept[i] / 255.0, references[i] / 255.0) for i in frames]
    s = [ssim(kept[i] / 255.0, references[i] / 255.0) for i in frames]
    finite = [x for x in p if np.isfinite(x)]
    return {"frames": frames, "reference": "64 AO rays + shadows + Phong, same view, "
                                           "independent AO rays",
            "psnr_db": [x if np.isfinite(x) else None for x in p],
            "mean_psnr_db": float(np.mean(finite)) if finite else None,
            "min_psnr_db": float(np.min(finite)) if finite else None,
            "identical_frames": len(p) - len(finite), "ssim": s,
            "mean_ssim": float(np.mean(s)), "min_ssim": float(np.min(s))}


@dataclass
class FrameLog:
    """What one tuned frame measured and predicted (a row of the benchmark's CSV/JSON)."""

    frame: int
    target: float
    measured: float
    predicted: float
    corrected: float
    ao_rays: float
    shadows: bool
    phong: bool
    probe_seconds: float
    over_budget: bool
    kernel_seconds: float = 0.0  # the kernels' event time (the second figure)
    tuner_seconds: float = 0.0  # the tuner's work in the frame: probe + choice + bookkeeping


def orbit_camera_path(scene: Scene, frames: int) -> list[Camera]:
    """Orbit half a turn around the scene while moving in: the animation of Ganestam &
    Doggett, "Auto-tuning Interactive Ray Tracing using an Analytical GPU Architecture Model"."""
    cam = scene.camera
    return orbit_path(np.asarray(cam.target), np.asarray(cam.eye), frames, turns=0.5, dolly=0.5,
                      up=cam.up, fov_y=cam.fov_y)


def heldout_camera_path(scene: Scene, frames: int) -> list[Camera]:
    """A path that shares no view with calibration: an orbit that starts an eighth of a turn
    away from the scene's camera, a quarter higher, turning the other way while moving in."""
    cam = scene.camera
    target = np.asarray(cam.target, np.float64)
    offset = np.asarray(cam.eye, np.float64) - target
    c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)
    start = target + np.array([c * offset[0] - s * offset[2], offset[1] * 1.25 + 0.05 *
                               np.linalg.norm(offset), s * offset[0] + c * offset[2]])
    return orbit_path(target, start, frames, turns=-0.4, dolly=0.6, up=cam.up, fov_y=cam.fov_y)


def heldout_turn_path(scene: Scene, frames: int) -> tuple[list[Camera], int]:
    """Look away from the scene from a point of the held-out path, then turn to the scene."""
    target = np.asarray(scene.camera.target, np.float64)
    eye = np.asarray(heldout_camera_path(scene, 5)[2].eye, np.float64)
    turn_at = frames // 2
    cams = turn_path(eye, eye + (eye - target), target, frames, turn_at, scene.camera.up,
                     scene.camera.fov_y)
    return cams, turn_at


def run_path(renderer: TunedRenderer, cameras: list[Camera], desc: str = "",
             frames_dir: Path | None = None, progress: bool = True,
             keep: dict[int, np.ndarray | None] | None = None,
             before_frame: Callable[[int], None] | None = None) -> list[FrameLog]:
    """Render every camera of the path through the tuner; optionally save each frame as PNG.

    ``keep``: a dict whose keys are frame indices; their images are stored into it.
    ``before_frame(i)``: called before frame ``i`` (e.g. to change the cost mid-path)."""
    logs = []
    for i, (cam, nxt) in enumerate(tqdm(with_next(cameras), desc=desc, unit="frame",
                                        total=len(cameras), disable=not progress,
                                        leave=False)):
        if before_frame is not None:
            before_frame(i)
        f = renderer.render(cam, nxt)
        logs.append(FrameLog(i, renderer.target_seconds, f.measured, f.predicted, f.corrected,
                             f.settings.ao_rays, f.settings.shadows, f.settings.phong,
                             f.probe_seconds, f.over_budget, f.kernel_seconds,
                             f.tuner_seconds))
        if keep is not None and i in keep:
            keep[i] = f.image
        if frames_dir is not None:
            save_png(f.image, frames_dir / f"frame_{i:04d}.png")
    return logs


def summarize(logs: list[FrameLog], turn_at: int | None = None) -> dict[str, float]:
    """The experiment's figures: :func:`tracking_figures`, the mean AO rays, frame and kernel
    times, the tuner's work and share, the probed frames and the quality reversals."""
    return {**tracking_figures(logs, turn_at),
            "mean_ao_rays": float(np.mean([x.ao_rays for x in logs])),
            "mean_frame_ms": float(np.mean([x.measured for x in logs]) * 1e3),
            "mean_kernel_ms": float(np.mean([x.kernel_seconds for x in logs]) * 1e3),
            "mean_tuner_ms": float(np.mean([x.tuner_seconds for x in logs]) * 1e3),
            "tuner_share_of_frame": float(sum(x.tuner_seconds for x in logs)
                                          / sum(x.measured for x in logs)),
            "probed_frames": sum(x.probe_seconds > 0 for x in logs),
            "quality_reversals": quality_reversals(logs)}


def quality_reversals(logs: list[FrameLog], window: int = REVERSAL_WINDOW) -> int:
    """Knob raises undone within ``window`` frames (see :func:`reversals`)."""
    return reversals({knob: [float(getattr(x, knob)) for x in logs]
                      for knob in REVERSAL_KNOBS}, window)


def reversals(series: dict[str, list[float]], window: int) -> int:
    """For each knob's series of values, each step that raises it and is followed by a step
    that lowers it within ``window`` steps."""
    count = 0
    for values in series.values():
        step = np.diff(np.asarray(values, np.float64))
        for i in np.flatnonzero(step > 0):
            count += bool((step[i + 1:i + 1 + window] < 0).any())
    return count


def logs_to_dicts(logs: list[FrameLog]) -> list[dict]:
    return [asdict(x) for x in logs]


def plot_run(logs_by_controller: dict[str, list[FrameLog]], title: str, path: Path,
             turn_at: int | None = None) -> None:
    """Ganestam & Doggett's figures 5 and 8 in one PNG: frame times vs target, AO rays, model
    errors."""
    plt = pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    for name, logs in logs_by_controller.items():
        x = [r.frame for r in logs]
        axes[0].plot(x, [r.measured * 1e3 for r in logs], label=f"{name}: measured")
        if name == "feedforward":
            axes[0].plot(x, [r.predicted * 1e3 for r in logs], "--", label="model")
            axes[0].plot(x, [r.corrected * 1e3 for r in logs], ":", label="model + feedback")
            axes[2].plot(x, [100 * (r.predicted - r.measured) / r.measured for r in logs],
                         label="model")
            axes[2].plot(x, [100 * (r.corrected - r.measured) / r.measured for r in logs],
                         label="model + feedback")
        axes[1].plot(x, [r.ao_rays for r in logs], label=name)
    first = next(iter(logs_by_controller.values()))
    axes[0].plot([r.frame for r in first], [r.target * 1e3 for r in first], "k-", lw=1,
                 label="target")
    if turn_at is not None:
        for ax in axes:
            ax.axvline(turn_at, color="grey", lw=0.8, ls=":")
    axes[0].set_ylabel("frame time (ms)")
    axes[1].set_ylabel("AO rays")
    axes[2].set_ylabel("error vs measured (%)")
    axes[2].set_xlabel("frame")
    for ax in axes:
        ax.legend(fontsize=7, loc="best")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)

