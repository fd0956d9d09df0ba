"""``autotune bench gpu``: the Hong–Kim GPU model measured on a GPU in one prepared run.

A GPU machine is lent to this project now and then for a few minutes, bare, with no package
index (``tools/gpu_wheelhouse.sh`` prepares the wheels it lacks). This check does, in order of
importance and within a time budget (default 8 minutes; a step that would not fit is skipped
and says so):

1. ``platforms``: the OpenCL platforms and devices; a GPU driver's OpenCL library that no
   ``.icd`` file names (a container that mounts ``libnvidia-opencl.so.1`` without
   ``nvidia.icd``) is registered first (:mod:`raytracer.device.runtimes`), and what was found
   is reported;
2. ``device``: the figures the model needs, read from the device (SMs, warp width, clock,
   memory, registers; NVIDIA's ``cl_nv_device_attribute_query`` where present);
3. ``build``: the tracer's kernels built on the device (and its BVH), with each kernel's
   registers and local memory from the driver and the occupancy they allow;
4. ``image``: one frame on the device against the CPU reference
   (:mod:`raytracer.mesh.reference_check`, the rule every device is held to);
5. ``ptx``: instruction counts from the driver's own PTX (NVIDIA's program binary) against
   clang's, which the model uses;
6. ``calibration``: a quick calibration (microbenchmarks + fit on the calibration scenes);
7. ``heldout``: the model's error on held-out frames (validation scenes, another camera path)
   at 1920x1080, no feedback;
8. ``tuned``: the tuned path at 1920x1080 (then 3840x2160 if time allows): tracking error, the
   probe's share hidden behind the previous frame, rays per second per ray kind;
9. ``volume``: the volume caster on one rank, governed: frame time and model error.

Every step's result is written to ``results.json`` in the output folder as soon as it ends, so
a run stopped at its time limit keeps what it measured. ``--device cpu --quick`` runs the same
steps on a CPU device at tiny sizes (CI does, so the check cannot rot); the goals are then
"not run".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl

from autotune_app.animation import (
    heldout_camera_path,
    logs_to_dicts,
    orbit_camera_path,
    reference_frame_target,
    run_path,
    summarize,
)
from autotune_app.options import MIN_CALIBRATION_FRAMES
from benchmarks.governed.tracer_model import errors, eval_settings, measure
from benchmarks.harness.checkout_tools import load_tool
from benchmarks.harness.results import results_root
from benchmarks.harness.run_record import (
    QUIET_LIMIT,
    RunRecord,
    at_most,
    checkout_commit,
    cpu_model,
    mark_goals,
    quick_run,
)
from common.atomic_files import check_output_dir, save_png, write_json, write_text
from governed.mesh.calibration_fit import calibrate, fit_report
from governed.mesh.instruction_counts import COUNTS_PATH, load_kernel_counts
from governed.mesh.kernel_occupancy import phase_kernels
from governed.mesh.probe import Probe
from governed.mesh.tuned_renderer import RayTraceModel, TunedRenderer
from raytracer.camera import Camera
from raytracer.device import runtimes
from raytracer.device.choice import DeviceInfo, build_quietly, choose_device, list_devices
from raytracer.device.nvidia import compare_counts, driver_ptx, nvidia_device_figures
from raytracer.mesh.phases import PHASE_LIST
from raytracer.mesh.reference_check import image_agreement, reference_render
from raytracer.mesh.scene import load_scene
from raytracer.mesh.tracer import RenderSettings, Tracer, build_options

BUDGET_S = 480.0  # the limit for the whole check on a GPU
VALIDATION_SCENES = ("dragon", "sibenik")  # held-out frames: never calibrated on
TUNED_SCENE = "dragon"
IMAGE_SETTINGS = RenderSettings(ao_rays=4, ao_radius=0.1, shadows=True, phong=True,
                                ao_history=False, ao_filter=False)
RAY_SETTINGS = RenderSettings(ao_rays=8, ao_radius=0.1, shadows=True, phong=True,
                              ao_history=False, ao_filter=False)
GOALS = {"check_seconds": BUDGET_S, "heldout_frame_mean": 0.10, "tuned_mean": 0.03,
         "tuned_p95": 0.08}


class Sizes:
    """The frame sizes and counts of a full (GPU) or ``quick`` (CPU, CI) check."""

    def __init__(self, quick: bool) -> None:
        self.image = (96, 54) if quick else (640, 360)
        self.heldout = ((160, 90),) if quick else ((1920, 1080),)
        self.heldout_views = 2 if quick else 3
        self.tuned = ((192, 108),) if quick else ((1920, 1080), (3840, 2160))
        self.tuned_frames = 6 if quick else 48
        self.volume = 64 if quick else 1024
        self.volume_frames = 4 if quick else 24
        self.volume_calibration = MIN_CALIBRATION_FRAMES if quick else 12


# a step's rough length on the GPU (seconds; quick: a fifth), for the budget: a step is skipped
# when what is left of the budget is less than this
ESTIMATES = {"platforms": 5, "device": 2, "build": 60, "image": 30, "ptx": 15,
             "calibration": 90, "heldout": 60, "tuned_1920x1080": 60, "volume": 120,
             "tuned_3840x2160": 90}


STEPS = ("device", "build", "image", "ptx", "calibration", "heldout", "tuned_1920x1080",
         "volume", "tuned_3840x2160")


class Check:
    """Runs the steps in order within the budget; writes ``results.json`` after each one."""

    def __init__(self, out: Path, budget_s: float, quick: bool,
                 skip: frozenset[str] = frozenset()) -> None:
        self.out, self.budget_s, self.quick, self.skip = out, budget_s, quick, skip
        self.started = time.perf_counter()
        self.run = RunRecord()
        # what does not change during the run, read once (a git call, /proc/cpuinfo)
        self.machine = {"cpu": cpu_model(), "python": platform.python_version(),
                        "pyopencl": cl.VERSION_TEXT, "commit": checkout_commit()}
        self.results: dict[str, Any] = {"steps": {}, "quick": quick}

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.started)

    def step(self, name: str, work: Callable[[], dict]) -> dict | None:
        """Run one step unless it would not fit; its figures, seconds and errors are kept."""
        estimate = ESTIMATES.get(name, 30) * (0.2 if self.quick else 1.0)
        if name in self.skip:
            self.record(name, {"status": "skipped", "why": "asked (--skip)"})
            return None
        if self.left() < estimate:
            self.record(name, {"status": "skipped", "why": f"{self.left():.0f} s of the budget "
                               f"left, the step takes about {estimate:.0f} s"})
            return None
        print(f"gpu check: {name} ({self.left():.0f} s of the budget left)", flush=True)
        t0 = time.perf_counter()
        try:
            figures = work()
        except Exception as exc:  # one step's failure must not lose the others' figures
            self.record(name, {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
                               "traceback": traceback.format_exc(limit=6),
                               "seconds": time.perf_counter() - t0})
            print(f"gpu check: {name} failed: {exc}", flush=True)
            return None
        self.record(name, {"status": "done", "seconds": time.perf_counter() - t0, **figures})
        return figures

    def record(self, name: str, entry: dict) -> None:
        self.results["steps"][name] = entry
        self.save()

    def save(self) -> None:
        self.results["check_seconds"] = time.perf_counter() - self.started
        share = self.run.others_share()
        self.results["run"] = {**self.machine, "others_share": round(share, 4),
                               "quiet": share <= QUIET_LIMIT}
        write_json(self.out / "results.json", self.results, indent=1)


def platforms_step() -> dict:
    """What the loader was given (the system's ``.icd`` files, GPU driver libraries found
    without one, the folder registered before the first platform query) and every device."""
    runtimes.prepare_runtimes()
    system = runtimes.existing_icds(environ={})
    folders = runtimes.driver_search_folders()
    return {"system_icd_files": system,
            "driver_libraries_without_icd": {
                vendor: str(path) for vendor, path in
                runtimes.driver_libraries(system, folders).items()},
            "searched": [str(f) for f in folders],
            "vendors_folder": os.environ.get(runtimes.VENDORS_ENV),
            "registered_icd_files": runtimes.existing_icds(),
            "devices": [info.describe() for info in list_devices()]}


def device_step(info: DeviceInfo, device: cl.Device) -> dict:
    """What the model needs of the device, read from it."""
    figures = {"device": info.describe(), "kind": info.kind, "runtime": info.runtime,
               "compute_units": info.compute_units, "simd_width": info.simd_width,
               "clock_mhz": info.clock_mhz, "global_mem_mb": info.global_mem_mb}
    if info.runtime == "nvidia":
        figures["nvidia"] = nvidia_device_figures(device)
    return figures


def build_step(tracer: Tracer, build_seconds: float) -> dict:
    """The tracer's build, its launches, and on NVIDIA each kernel's resources and occupancy."""
    figures: dict[str, Any] = {
        "tracer_seconds": build_seconds,
        "bvh_seconds": tracer.bvh.stats.build_seconds,
        "launches": {p.name: {"group": list(tracer.launches[p.kernel].group),
                              "packet": list(tracer.launches[p.kernel].packet)}
                     for p in PHASE_LIST},
    }
    kernels = phase_kernels(tracer.device_info, tracer.launches)
    if kernels is not None:
        figures["kernels"] = {phase: k.to_dict() for phase, k in kernels.items()}
    return figures


def image_step(tracer: Tracer, size: tuple[int, int], out: Path) -> dict:
    """One frame on the device against the CPU twin's, by the rule every device meets."""
    width, height = size
    camera = tracer.scene.camera
    frame = tracer.render(camera, width, height, IMAGE_SETTINGS, seed=5)
    reference = reference_render(tracer, camera, width, height, IMAGE_SETTINGS, 5)[0]
    save_png(frame.image, out / "image_device.png")
    save_png(reference, out / "image_cpu_reference.png")
    return {"scene": tracer.scene.name, "size": [width, height],
            "settings": vars(IMAGE_SETTINGS), **image_agreement(frame.image, reference).to_dict()}


def ptx_step(tracer: Tracer, out: Path) -> dict:
    """Counts from the driver's own PTX, split as ``tools/count_ptx.py`` splits clang's (the
    leaf test and the shade variants compiled by the driver too), against clang's counts,
    which the model uses."""
    if tracer.device_info.runtime != "nvidia":
        return {"status_note": f"not an NVIDIA device ({tracer.device_info.runtime}): its "
                               f"program binary is not PTX"}
    options = build_options(tracer.device_info)
    source = tracer.program.get_info(cl.program_info.SOURCE)

    def compile_on_driver(variant: str) -> str:
        return driver_ptx(build_quietly(cl.Program(tracer.context, variant), options))

    ptx = driver_ptx(tracer.program)
    (out / "driver.ptx").write_text(ptx)
    document = load_tool("ptx_analysis").counts_document(source, ptx, compile_on_driver)
    document["compiler"] = f"NVIDIA OpenCL {tracer.device_info.driver} ({_ptx_target(ptx)})"
    write_json(out / "driver_kernel_counts.json", document)
    return {"ptx_bytes": len(ptx), "target": _ptx_target(ptx),
            "comparison": compare_counts(document["phases"], load_kernel_counts())}


def _ptx_target(ptx: str) -> str:
    match = re.search(r"^\s*\.target\s+([\w.]+)", ptx, re.MULTILINE)
    return match.group(1) if match else ""


def calibration_step(info: DeviceInfo, out: Path, models: dict, quick: bool) -> dict:
    """A calibration (``autotune calibrate [--quick]``) kept in the output folder, not the
    user's store."""
    t0 = time.perf_counter()
    fitted = calibrate(info, quick=quick, save=False, progress=False,
                       out=out / "calibrated_profile.json")
    models["fitted"] = fitted
    write_json(out / "calibration_frames.json", [f.to_dict() for f in fitted.samples], indent=0)
    # the counts of the kernels that ran, for tools/gpu_refit.py once the shipped ones change
    write_text(out / "kernel_counts.json", COUNTS_PATH.read_text())
    report = fit_report(fitted)
    return {"calibration_seconds": time.perf_counter() - t0, "quick": quick, "fit": report,
            "profile": fitted.profile.to_dict(),
            "occupancy": fitted.calibration.occupancy or None}


def fitted_model(models: dict) -> RayTraceModel:
    """The model this run calibrated; a step that needs it fails when calibration did."""
    if "fitted" not in models:
        raise RuntimeError("no calibration in this run (its step failed or was skipped)")
    fitted = models["fitted"]
    return RayTraceModel(fitted.profile, load_kernel_counts(), fitted.calibration)


def heldout_step(info: DeviceInfo, sizes: Sizes, models: dict, out: Path) -> dict:
    """The calibrated model's error on the validation scenes along another path, no
    feedback (``autotune bench tracer-model``'s held-out figures at the GPU's frame sizes)."""
    model = fitted_model(models)
    settings = eval_settings(quick=True)
    samples = []
    for name in VALIDATION_SCENES[:1] if sizes.heldout_views < 3 else VALIDATION_SCENES:
        _, scene_samples = measure(name, lambda s: heldout_camera_path(s, sizes.heldout_views),
                                   sizes.heldout, settings, info.spec, bar=None)
        samples += scene_samples
    write_json(out / "heldout_frames.json", [f.to_dict() for f in samples], indent=0)
    return {"sizes": [list(s) for s in sizes.heldout], "views": sizes.heldout_views,
            "frames": len(samples), "errors": errors(model, samples)}


def tuned_step(info: DeviceInfo, size: tuple[int, int], frames: int, models: dict) -> dict:
    """The tuned orbit at ``size``: tracking, the probe hidden behind the previous frame, and
    rays per second per ray kind at 8 AO rays + shadows."""
    fitted = models.get("fitted")
    width, height = size
    scene = load_scene(TUNED_SCENE)
    tracer = Tracer(scene, device=info.spec)
    profile, calibration = (fitted.profile, fitted.calibration) if fitted else (None, None)
    cameras = orbit_camera_path(scene, frames)
    reference = TunedRenderer(scene, width, height, 1.0, tracer=tracer, profile=profile,
                              calibration=calibration)
    target = reference_frame_target(reference, cameras[0])
    renderer = TunedRenderer(scene, width, height, target, tracer=tracer, profile=profile,
                             calibration=calibration)
    logs = run_path(renderer, cameras, progress=False)
    probe = Probe.for_tracer(tracer)
    alone = []
    for cam in cameras[:: max(1, frames // 6)]:
        t0 = time.perf_counter()
        probe.measure(cam, width, height)
        alone.append(time.perf_counter() - t0)
    figures = summarize(logs)
    exposed = figures["mean_probe_ms"] / 1e3
    return {"scene": scene.name, "size": [width, height], "target_ms": target * 1e3,
            "overlap_probe": renderer.overlap_probe, **figures,
            "probe_alone_ms": float(np.median(alone) * 1e3),
            "probe_hidden_share": float(max(0.0, 1.0 - exposed / max(np.median(alone), 1e-12))),
            "rays_per_second": rays_per_second(tracer, cameras[0], width, height),
            "per_frame": logs_to_dicts(logs)}


def rays_per_second(tracer: Tracer, camera: Camera, width: int, height: int) -> dict:
    """Million rays per second of each ray kind at :data:`RAY_SETTINGS` (best of 3 launches):
    a ray per pixel for primary rays, per hit pixel for shadow rays, 8 per hit pixel for AO."""
    tracer.render(camera, width, height, RAY_SETTINGS)
    hit = int((tracer.hits()[..., 3].view(np.int32) >= 0).sum())
    rays = {"primary": width * height, "shadow": hit, "ao": hit * int(RAY_SETTINGS.ao_rays)}
    out = {}
    for kind, count in rays.items():
        best = min(tracer.time_phase(kind, camera, width, height, RAY_SETTINGS)
                   for _ in range(3))
        out[kind] = {"rays": count, "ms": best * 1e3, "mrays_per_s": count / best / 1e6}
    return out


def volume_step(info: DeviceInfo, sizes: Sizes, out: Path, left: float) -> dict:
    """The governed volume caster on one rank (``autotune volume``, target half the first
    view's full-quality frame): frame time, tracking and model error."""
    folder = out / "volume"
    cmd = [sys.executable, "-m", "autotune_app.cli", "volume", "--volume", "bonsai",
           "--frames", str(sizes.volume_frames), "--width", str(sizes.volume), "--height",
           str(sizes.volume), "--target-share", "0.5", "--calibration-frames",
           str(sizes.volume_calibration), "--device", info.spec, "-o", str(folder)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=max(10.0, left))
    (out / "volume.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"autotune volume exited {done.returncode}: "
                           f"{done.stderr.strip().splitlines()[-1:] or ''}")
    summary = json.loads((folder / "summary.json").read_text())
    return {"command": " ".join(cmd[1:]), "summary": summary}


def goals(results: dict, on_gpu: bool) -> dict:
    """The issue's goals; on a CPU device each is "not run"."""
    steps = results["steps"]
    if not on_gpu:
        why = "no GPU: the check ran on a CPU device (the goals are a GPU's)"
        return {k: {"value": None, "met": None, "not_run": why}
                for k in ("check_seconds", "heldout_frame_mean_1080p", "tuned_mean_1080p",
                          "tuned_p95_1080p", "image_equals_cpu_reference")}

    def value(step: str, *keys: str) -> Any:
        entry = steps.get(step, {})
        for key in keys:
            entry = entry.get(key, {}) if isinstance(entry, dict) else {}
        return entry if isinstance(entry, int | float | bool) else None

    tuned = "tuned_1920x1080"
    image = value("image", "agrees")
    return {
        "check_seconds": at_most(results["check_seconds"], GOALS["check_seconds"],
                                 "the whole check's wall seconds on the device machine"),
        "heldout_frame_mean_1080p": at_most(
            value("heldout", "errors", "frame", "mean"), GOALS["heldout_frame_mean"],
            "mean |predicted - measured| / measured of held-out frames at 1920x1080, no "
            "feedback"),
        "tuned_mean_1080p": at_most(value(tuned, "mean_abs_error_vs_target"),
                                    GOALS["tuned_mean"],
                                    "mean |frame - target| / target, tuned orbit, probe "
                                    "overlapped with the previous frame"),
        "tuned_p95_1080p": at_most(value(tuned, "p95_abs_error_vs_target"), GOALS["tuned_p95"],
                                   "p95 |frame - target| / target of the same frames"),
        "image_equals_cpu_reference": {"value": image, "goal": "true", "met": image,
                                       "what": "the device's image against the CPU twin's"},
    }


def machine_key(info: DeviceInfo) -> str:
    """A folder name for the device's results, e.g. ``nvidia-h200``."""
    text = f"{info.runtime}-{info.name}" if info.runtime not in info.name.lower() else info.name
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def run_check(args: argparse.Namespace) -> dict:
    """Every step in order within the budget; returns the results (also in results.json)."""
    platforms = platforms_step()
    info, device = choose_device(args.device)
    out = args.out or results_root() / machine_key(info) / "gpu"
    check_output_dir(out, args.force)
    out.mkdir(parents=True, exist_ok=True)
    sizes = Sizes(args.quick)
    check = Check(out, args.budget, args.quick, frozenset(args.skip))
    check.results["device"] = info.describe()
    check.record("platforms", {"status": "done", **platforms})
    check.step("device", lambda: device_step(info, device))
    tracers: dict[str, Tracer] = {}

    def build() -> dict:
        t0 = time.perf_counter()
        tracers["main"] = Tracer(load_scene(TUNED_SCENE), device=info.spec)
        return build_step(tracers["main"], time.perf_counter() - t0)

    check.step("build", build)
    if "main" in tracers:
        check.step("image", lambda: image_step(tracers["main"], sizes.image, out))
        check.step("ptx", lambda: ptx_step(tracers["main"], out))
    models: dict = {}
    check.step("calibration",
               lambda: calibration_step(info, out, models, args.calibration == "quick"))
    check.step("heldout", lambda: heldout_step(info, sizes, models, out))
    tuned = [(f"tuned_{w}x{h}", (w, h)) for w, h in sizes.tuned]
    first, rest = tuned[:1], tuned[1:]
    for name, size in first:
        check.step(name, lambda size=size: tuned_step(info, size, sizes.tuned_frames, models))
    check.step("volume", lambda: volume_step(info, sizes, out, check.left()))
    for name, size in rest:
        check.step(name, lambda size=size: tuned_step(info, size, sizes.tuned_frames, models))
    check.results["check_seconds"] = time.perf_counter() - check.started
    check.results["goals"] = goals(check.results, info.kind == "GPU")
    check.save()
    if info.kind == "GPU":  # a run whose CPUs other processes shared decides no goal
        mark_goals(check.results["goals"], check.results["run"], quick_run(args.quick))
        check.save()
    return check.results


def step_names(text: str) -> list[str]:
    """argparse type: a comma-separated list of :data:`STEPS`."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in STEPS]
    if unknown:
        raise argparse.ArgumentTypeError(f"no step {', '.join(unknown)} (steps: "
                                         f"{', '.join(STEPS)})")
    return names


def main(argv: list[str] | None = None) -> int:
    """Run the GPU check's steps within the budget; print and write its results."""
    parser = argparse.ArgumentParser(prog="autotune bench gpu", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="gpu",
                        help="OpenCL device (default gpu; cpu runs the steps on a CPU device)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and few frames (CI, on a CPU device)")
    parser.add_argument("--budget", type=float, default=BUDGET_S, metavar="SECONDS",
                        help="time budget; steps that would not fit are skipped (default 480)")
    parser.add_argument("--calibration", choices=("quick", "full"), default="quick",
                        help="the calibration step's (autotune calibrate [--quick]; default "
                             "quick)")
    parser.add_argument("--skip", type=step_names, default=[], metavar="STEP,...",
                        help=f"steps to leave out ({', '.join(STEPS)})")
    parser.add_argument("-o", "--out", type=Path, default=None, metavar="DIR",
                        help="results folder (default results/<device>/gpu); must be new or "
                             "empty unless --force")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty --out (same-named files are replaced)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    results = run_check(args)
    if args.json:
        print(json.dumps(results, indent=1, default=str))
    else:
        for name, step in results["steps"].items():
            print(f"{name:<18} {step['status']:<8} {step.get('seconds', 0):7.1f} s  "
                  f"{step.get('error') or step.get('why') or ''}")
        for name, goal in results["goals"].items():
            print(f"goal {name:<28} {goal.get('value')!s:<24} met: {goal.get('met')}")
    return 0
