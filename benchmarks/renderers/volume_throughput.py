"""Volume renderer speed: our OpenCL ray caster against VTK's CPU ray caster, the compositing
figures, and strong scaling of the distributed renderer over 1..8 ranks.

- ``raycast``: bonsai 256³ at 512² (256² with ``--quick``), unshaded emission-absorption, the
  volume's transfer function, sample distance 1 voxel, on the same views. Ours: the
  whole-volume :class:`~raytracer.volume.raycaster.Raycaster` on one device of every OpenCL
  runtime that builds here (``--device``: one device), each against VTK in the same process. VTK:
  ``vtkFixedPointVolumeRayCastMapper`` rendered offscreen (EGL) with the same colour and
  opacity points, opacity unit distance and sample distance, automatic sample-distance
  adjustment off. Both terminate rays at full opacity (VTK's fixed-point accumulation stops
  at 1 − 2⁻¹⁵; ours is given that threshold). Each thread count runs in its own process with
  ``AUTOTUNE_COMPUTE_UNITS=N`` and the VTK mapper on N threads; ours and VTK alternate in
  every repeat (best of the repeats), so load from other processes hits both alike. Times are
  wall seconds of one frame as an application sees it: ours = kernel + read-back, VTK =
  ``Render()``. Samples/s counts the lattice samples along the rays inside the volume
  (evaluated + skipped as empty), the same count for both.
- ``compositing``: the 2-rank reference of ``benchmarks.renderers.compositing`` (memcpy,
  ``Sendrecv``, binary swap + gather on the default transport and on messages), run through
  its own launcher, with its goal.
- ``scaling``: bonsai at 512² (256² quick) on 1..8 ranks (1, 2, 4 quick), radix-k, on the
  orbit of the cluster study (Tkachev et al., "Prediction of Distributed Volume Visualization
  Performance to Support Render Hardware Acquisition"), one brick per rank, each rank's PoCL
  given cores // ranks threads; per frame the slowest rank's local render, rank 0's
  compositing stages, the gather and rank 0's frame time. This machine has 2 cores: above 2
  ranks they are oversubscribed, so those rows show the schedule under contention, not a
  cluster's speed-up.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from autotune_app import options as opt
from autotune_app.report import emit, plain, pyplot
from benchmarks.harness.results import save_result
from benchmarks.harness.run_record import RunRecord, changed_options, stamp, variant_name
from benchmarks.harness.vtk_volume import volume_property
from benchmarks.renderers import compositing as comp
from common.atomic_files import check_output_dir, output_dir, save_figure, save_png
from common.image_quality import psnr, ssim
from raytracer.camera import Camera
from raytracer.device.choice import one_device_per_runtime
from raytracer.device.runtimes import POCL_METHOD_ENV, prepare_runtimes
from raytracer.mpi.faults import install_excepthook, world
from raytracer.mpi.launch import launch
from raytracer.volume.blend import to_rgb8
from raytracer.volume.distributed import (
    DistributedRenderer,
    FrameSettings,
    load_everywhere,
    seed_orbit,
)
from raytracer.volume.raycaster import Raycaster
from raytracer.volume.transfer_function import default_for
from raytracer.volume.volume_data import load_volume

ROOT = Path(__file__).resolve().parents[2]
MARK = "VOLUME-BENCH "
VTK_ERT = 1.0 - 2.0**-15  # VTK's fixed-point ray caster stops at this accumulated opacity
VTK_REFERENCE_2T_S = 0.14  # VTK fixed-point, bonsai 256³ at 512², 2 threads, first dev machine


# ------------------------------------------------------------------------- views


def views(radius: float, count: int) -> list[Any]:
    """Front, 45 degrees round and an elevated diagonal view, all 2.8 radii out."""
    d = 2.8 * radius
    eyes = [(0.0, 0.0, d), (d * math.sin(math.pi / 4), 0.0, d * math.cos(math.pi / 4)),
            (0.55 * d, 0.5 * d, 0.67 * d)]
    return [Camera(e, (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), 45.0) for e in eyes[:count]]


# ------------------------------------------------------------------------- VTK side


class VtkRenderer:
    """``vtkFixedPointVolumeRayCastMapper`` offscreen, set up like our ray caster."""

    def __init__(self, volume: Any, tf: Any, width: int, height: int, threads: int,
                 step: float = 1.0) -> None:
        import vtk  # lazy: loads VTK (the bench extra), for the raycast part only
        from vtk.util import numpy_support  # lazy: loads VTK (the bench extra)

        vtk.vtkObject.GlobalWarningDisplayOff()
        self.vtk, self.width, self.height = vtk, width, height
        lo, hi = volume.value_range
        data = volume.data
        as_u8 = data.astype(np.uint8)
        if lo >= 0 and hi <= 255 and np.array_equal(as_u8, data):
            scalars, self.scalar_type = as_u8, "uint8"  # VTK's usual fast path for 8-bit CT
            kind = vtk.VTK_UNSIGNED_CHAR
        else:
            scalars, self.scalar_type, kind = data, "float32", vtk.VTK_FLOAT
        self._keep = np.ascontiguousarray(scalars).ravel()  # x fastest, as VTK's points
        image = vtk.vtkImageData()
        image.SetDimensions(*volume.dims)
        image.SetSpacing(*volume.spacing)
        image.SetOrigin(*map(float, volume.origin))
        image.GetPointData().SetScalars(
            numpy_support.numpy_to_vtk(self._keep, deep=True, array_type=kind))
        prop = volume_property(tf.colors, tf.opacities, lo, hi, shade=False)
        spacing = min(volume.spacing)
        prop.SetScalarOpacityUnitDistance(tf.reference_step * spacing)
        mapper = vtk.vtkFixedPointVolumeRayCastMapper()
        mapper.SetInputData(image)
        mapper.SetAutoAdjustSampleDistances(0)
        mapper.SetLockSampleDistanceToInputSpacing(0)
        mapper.SetSampleDistance(step * spacing)
        mapper.SetImageSampleDistance(1.0)
        mapper.SetNumberOfThreads(threads)
        self.mapper = mapper
        actor = vtk.vtkVolume()
        actor.SetMapper(mapper)
        actor.SetProperty(prop)
        self.renderer = vtk.vtkRenderer()
        self.renderer.AddVolume(actor)
        self.renderer.SetBackground(0.0, 0.0, 0.0)
        self.window = vtk.vtkRenderWindow()
        self.window.SetOffScreenRendering(1)
        self.window.AddRenderer(self.renderer)
        self.window.SetSize(width, height)
        self.window_class = type(self.window).__name__
        self._grab = vtk.vtkWindowToImageFilter()
        self._grab.SetInput(self.window)
        self._grab.SetInputBufferTypeToRGB()
        self._grab.ReadFrontBufferOff()

    def set_camera(self, camera: Any) -> None:
        """Look through ``camera`` (eye, target, up, vertical field of view)."""
        cam = self.renderer.GetActiveCamera()
        cam.SetPosition(*camera.eye)
        cam.SetFocalPoint(*camera.target)
        cam.SetViewUp(*camera.up)
        cam.SetViewAngle(camera.fov_y)
        cam.OrthogonalizeViewUp()
        self.renderer.ResetCameraClippingRange()

    def render(self) -> float:
        """Render one frame; its wall seconds."""
        t = time.perf_counter()
        self.window.Render()
        return time.perf_counter() - t

    def image(self) -> np.ndarray:
        """The last frame as (H, W, 3) uint8, top row first."""
        from vtk.util import numpy_support  # lazy: loads VTK (the bench extra)

        self._grab.Modified()
        self._grab.Update()
        out = self._grab.GetOutput()
        w, h, _ = out.GetDimensions()
        rgb = numpy_support.vtk_to_numpy(out.GetPointData().GetScalars()).reshape(h, w, -1)
        return np.ascontiguousarray(rgb[::-1, :, :3])


# ---------------------------------------------------------------- raycast worker


def worker_raycast(volume_name: str, size: int, threads: int, repeats: int, nviews: int,
                   images: str) -> dict[str, Any]:
    """One process, one thread count: ours and VTK alternate on each view, best of repeats."""
    volume = load_volume(volume_name)
    tf = default_for(volume.name)
    ours = Raycaster(volume, tf)
    theirs = VtkRenderer(volume, tf, size, size, threads)
    out: dict[str, Any] = {
        "threads": threads, "compute_units": os.environ.get("AUTOTUNE_COMPUTE_UNITS"),
        "vtk_threads": theirs.mapper.GetNumberOfThreads(), "vtk_window": theirs.window_class,
        "vtk_scalars": theirs.scalar_type, "device": ours.device.name,
        "launch": ours.launch.label, "views": []}
    for v, cam in enumerate(views(volume.radius, nviews)):
        theirs.set_camera(cam)
        frame = ours.render(cam, size, size, 1.0, VTK_ERT)  # warm-up (and the image)
        theirs.render()
        ours_wall, ours_kernel, vtk_wall = [], [], []
        for _ in range(repeats):
            t = time.perf_counter()
            frame = ours.render(cam, size, size, 1.0, VTK_ERT)
            ours_wall.append(time.perf_counter() - t)
            ours_kernel.append(frame.kernel_seconds)
            vtk_wall.append(theirs.render())
        a, b = to_rgb8(frame.rgba), theirs.image()
        np.save(Path(images) / f"ours_t{threads}_v{v}.npy", a)
        np.save(Path(images) / f"vtk_t{threads}_v{v}.npy", b)
        lattice = frame.samples + frame.skipped
        best_ours, best_vtk = min(ours_wall), min(vtk_wall)
        fa, fb = a.astype(np.float64) / 255.0, b.astype(np.float64) / 255.0
        out["views"].append({
            "view": v, "eye": list(cam.eye),
            "ours_ms": 1e3 * best_ours, "ours_median_ms": 1e3 * float(np.median(ours_wall)),
            "ours_kernel_ms": 1e3 * min(ours_kernel),
            "vtk_ms": 1e3 * best_vtk, "vtk_median_ms": 1e3 * float(np.median(vtk_wall)),
            "speedup_vs_vtk": best_vtk / best_ours,
            "speedup_vs_vtk_median": float(np.median(vtk_wall) / np.median(ours_wall)),
            "samples_evaluated": frame.samples, "samples_skipped": frame.skipped,
            "rays": frame.rays,
            "ours_lattice_Msamples_per_s": lattice / best_ours / 1e6,
            "ours_evaluated_Msamples_per_s": frame.samples / best_ours / 1e6,
            "vtk_lattice_Msamples_per_s": lattice / best_vtk / 1e6,
            "image_psnr_db": psnr(fa, fb), "image_ssim": ssim(fa, fb),
            "image_mean_abs_diff_8bit": float(np.abs(a.astype(int) - b.astype(int)).mean()),
        })
    return out


def run_raycast(volume_name: str, size: int, threads: int, repeats: int, nviews: int,
                images: str, device: str) -> dict[str, Any]:
    """The raycast part for one device and thread count, in its own process (PoCL reads its
    thread count once, at start-up)."""
    env = {**os.environ, "AUTOTUNE_COMPUTE_UNITS": str(threads), "AUTOTUNE_DEVICE": device}
    cmd = [sys.executable, "-m", "benchmarks.renderers.volume_throughput", "--worker", "raycast",
           volume_name, str(size), str(threads), str(repeats), str(nviews), images]
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise RuntimeError(f"raycast benchmark on {device} at {threads} thread(s) failed (exit "
                       f"{done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


# ---------------------------------------------------------------- scaling worker


def worker_scaling(volume_name: str, size: int, frames: int, algorithm: str) -> dict | None:
    """Inside ``mpiexec -n K``: the distributed renderer on the cluster study's orbit, every
    phase."""
    install_excepthook()
    comm = world()
    volume, tf = load_everywhere(volume_name, None, comm)
    renderer = DistributedRenderer(volume, tf, comm, algorithm=algorithm)
    settings = FrameSettings()
    cams = seed_orbit(volume.radius, frames)
    renderer.render_frame(cams[0], size, size, settings)  # warm-up
    rows = []
    for cam in cams:
        comm.Barrier()
        res = renderer.render_frame(cam, size, size, settings)
        if res.record is None:
            continue
        rec = res.record
        r0 = rec.ranks[0]
        rows.append({
            "frame_ms": 1e3 * rec.frame_seconds,
            "render_max_ms": 1e3 * rec.render_max,
            "render_mean_ms": 1e3 * float(np.mean([r.render_seconds for r in rec.ranks])),
            "kernel_max_ms": 1e3 * max(r.kernel_seconds for r in rec.ranks),
            "composite_ms": 1e3 * (r0.composite_seconds - r0.gather.seconds),
            "composite_after_render_ms": 1e3 * (rec.frame_seconds - rec.render_max
                                                - r0.gather.seconds - rec.finish_seconds),
            "gather_ms": 1e3 * r0.gather.seconds,
            "bytes_exchanged": sum(s.bytes_sent for r in rec.ranks for s in r.stages),
        })
    if comm.Get_rank() != 0:
        return None
    med = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
    return {"ranks": comm.Get_size(), "threads_per_rank": renderer.node.threads,
            "frames": len(rows), "median": med,
            "mean_frame_ms": float(np.mean([r["frame_ms"] for r in rows]))}


def run_scaling(volume_name: str, size: int, frames: int, ranks: int,
                algorithm: str) -> dict[str, Any]:
    """The scaling part on ``ranks`` MPI ranks; rank 0's figures."""
    done = launch(["benchmarks.renderers.volume_throughput", "--worker", "scaling", volume_name,
                   str(size), str(frames), algorithm], ranks, timeout=1200, cwd=ROOT)
    for line in (done.stdout or "").splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise RuntimeError(f"scaling run on {ranks} ranks failed (exit {done.returncode}):\n"
                       f"{(done.stdout or '')[-2000:]}\n{(done.stderr or '')[-2000:]}")


def worker_main(argv: list[str]) -> int:
    """``--worker raycast ...`` or ``--worker scaling ...``: one part in this process."""
    part, rest = argv[0], argv[1:]
    if part == "raycast":
        name, size, threads, repeats, nviews, images = rest
        result = worker_raycast(name, int(size), int(threads), int(repeats), int(nviews),
                                images)
    else:
        name, size, frames, algorithm = rest
        result = worker_scaling(name, int(size), int(frames), algorithm)
    if result is not None:
        print(MARK + json.dumps(plain(result)), flush=True)
    return 0


# ---------------------------------------------------------------------- figures


def goals(figures: dict[str, Any]) -> dict[str, Any]:
    """The goals block, from the figures."""
    out: dict[str, Any] = {}
    for runtime, raycast in figures["raycast"].items():
        for t, part in raycast["by_threads"].items():
            value = part["speedup_vs_vtk"]
            out[f"{runtime}_raycast_vs_vtk_{t}_thread{'s' if t != '1' else ''}"] = {
                "value": value, "goal": ">= 1.5", "met": bool(value >= 1.5),
                "what": f"VTK fixed-point CPU ray caster time / ours on {runtime}, "
                        f"{raycast['volume']} at {raycast['size']}², {t} thread(s) each, "
                        f"geometric mean over views, interleaved in one process",
            }
    worst = min(v["image_ssim"] for raycast in figures["raycast"].values()
                for p in raycast["by_threads"].values() for v in p["views"])
    out["same_image_as_vtk"] = {
        "value": worst, "goal": ">= 0.9", "met": bool(worst >= 0.9),
        "what": "lowest SSIM between our frame and VTK's over the runtimes and views (both "
                "8-bit RGB over black): they render the same thing",
    }
    if "compositing" in figures:
        out.update(figures["compositing"]["goals"])
    return out


def summarize_raycast(parts: list[dict[str, Any]], volume: str, size: int,
                      device: str) -> dict[str, Any]:
    """One device's raycast runs: per thread count the geometric mean ratio over the views."""
    by = {}
    for p in parts:
        ratios = [v["speedup_vs_vtk"] for v in p["views"]]
        by[str(p["threads"])] = {
            **p,
            "speedup_vs_vtk": float(np.exp(np.mean(np.log(ratios)))),
            "ours_ms_mean": float(np.mean([v["ours_ms"] for v in p["views"]])),
            "vtk_ms_mean": float(np.mean([v["vtk_ms"] for v in p["views"]])),
            "ours_lattice_Msamples_per_s": float(np.mean(
                [v["ours_lattice_Msamples_per_s"] for v in p["views"]])),
            "vtk_lattice_Msamples_per_s": float(np.mean(
                [v["vtk_lattice_Msamples_per_s"] for v in p["views"]])),
        }
    return {"device": device, "volume": volume, "size": size, "step_voxels": 1.0,
            "ert": VTK_ERT, "vtk_reference_2_threads_s": VTK_REFERENCE_2T_S, "by_threads": by}


def plot_images(images: Path, raycast: dict[str, Any], runtime: str, folder: Path) -> None:
    """Both renderers' frames of one runtime's run as PNGs and side by side with their
    difference."""
    plt = pyplot()
    t = max(raycast["by_threads"], key=int)
    part = raycast["by_threads"][t]
    n = len(part["views"])
    fig, axes = plt.subplots(n, 3, figsize=(9.6, 3.3 * n), squeeze=False)
    for v in range(n):
        a = np.load(images / f"ours_t{t}_v{v}.npy")
        b = np.load(images / f"vtk_t{t}_v{v}.npy")
        save_png(a, folder / f"raycast_ours_{runtime}_view{v}.png")
        save_png(b, folder / f"raycast_vtk_{runtime}_view{v}.png")
        diff = np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=2)
        info = part["views"][v]
        for ax, img, title in (
                (axes[v, 0], a, f"ours {info['ours_ms']:.0f} ms"),
                (axes[v, 1], b, f"VTK fixed-point {info['vtk_ms']:.0f} ms"),
                (axes[v, 2], diff, f"|difference| (8-bit), SSIM {info['image_ssim']:.3f}")):
            ax.imshow(img, cmap="magma" if img.ndim == 2 else None,
                      vmin=0, vmax=max(1, int(diff.max())) if img.ndim == 2 else None)
            ax.set_title(title, fontsize=9)
            ax.axis("off")
    fig.suptitle(f"{raycast['volume']} {raycast['size']}², ours on {runtime}, {t} thread(s), "
                 f"step 1 voxel", fontsize=10)
    fig.tight_layout()
    save_figure(fig, folder / f"raycast_vs_vtk_{runtime}.png")


def plot_scaling(figures: dict[str, Any], path: Path) -> None:
    """As the cluster study plots it: per rank count, the frame split into local render and
    compositing."""
    plt = pyplot()
    rows = figures["scaling"]["runs"]
    ranks = [r["ranks"] for r in rows]
    render = np.array([r["median"]["render_max_ms"] for r in rows])
    comp = np.array([r["median"]["composite_after_render_ms"] for r in rows])
    gather = np.array([r["median"]["gather_ms"] for r in rows])
    x = np.arange(len(ranks))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.bar(x, render, label="local render (slowest rank)")
    ax.bar(x, comp, bottom=render, label="compositing after the slowest render")
    ax.bar(x, gather, bottom=render + comp, label="gather to rank 0")
    ax.plot(x, [r["median"]["render_mean_ms"] for r in rows], "k.--", lw=0.8,
            label="local render (mean over ranks)")
    cores = figures["machine"]["cores"]
    if max(ranks) > cores:
        edge = max(i for i, k in enumerate(ranks) if k <= cores) + 0.5
        ax.axvline(edge, color="grey", lw=0.8)
        ax.text(edge + 0.05, ax.get_ylim()[1] * 0.95, f"more ranks than {cores} cores →",
                fontsize=8, color="grey", va="top")
    ax.set_ylim(0, 1.45 * max(render + comp + gather))  # room for the legend
    ax.set_xticks(x, [str(k) for k in ranks])
    ax.set_xlabel("ranks")
    ax.set_ylabel("median ms per frame")
    s = figures["scaling"]
    ax.set_title(f"Strong scaling: {s['volume']} at {s['size']}², {s['algorithm']}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3, axis="y")
    save_figure(fig, path)


#: the options a protocol run leaves at their defaults (bonsai at 512², every part, 1-8 ranks);
#: the device is in the saved name already, as its runtime
PROTOCOL_OPTIONS = ("quick", "volume", "repeats", "max_ranks", "parts")


def parse(argv: list[str]) -> argparse.Namespace:
    """The benchmark's options (an unknown part is an argument error); ``changed``: those of
    :data:`PROTOCOL_OPTIONS` set away from their defaults."""
    parser = argparse.ArgumentParser(prog="autotune bench volume-throughput",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="256² images, 2 views, ranks 1/2/4, fewer repeats")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")
    parser.add_argument("--volume", default="bonsai", help="volume for all parts")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (best of)")
    parser.add_argument("--max-ranks", type=int, default=None, help="largest rank count")
    parser.add_argument("--parts", default="raycast,compositing,scaling",
                        help="comma-separated subset of raycast, compositing, scaling")
    parser.add_argument("--device", default=None,
                        help="one OpenCL device for the raycast part (gpu, cpu, P:D, intel-cpu, "
                             "pocl, name); default: one device of every runtime that builds here")
    parser.add_argument("--save", action="store_true",
                        help="also write results/<machine>/volume_<runtimes>.json "
                             "(volume.json without the raycast part; with the options set "
                             "away from their defaults before <runtimes>: such a run decides "
                             "no goal)")
    opt.add_plots(parser, "PNG plots and both renderers' images")
    args = parser.parse_args(argv)
    args.changed = changed_options(parser, args, PROTOCOL_OPTIONS)
    args.parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    unknown = args.parts - {"raycast", "compositing", "scaling"}
    if unknown:
        parser.error(f"unknown part(s) {sorted(unknown)}")
    return args


def raycast_part(volume: str, size: int, repeats: int, nviews: int, images: Path,
                 devices: list[Any], bar: Any) -> dict[str, Any]:
    """Our ray caster on each of ``devices`` against VTK's on 1 and 2 threads, by runtime
    (each runtime's frames in a folder of its own under ``images``)."""
    out = {}
    for info in devices:
        folder = images / info.runtime
        folder.mkdir()
        runs = []
        for threads in (1, 2):
            bar.set_postfix_str(f"raycast vs VTK, {info.runtime}, {threads} thread(s)")
            runs.append(run_raycast(volume, size, threads, repeats, nviews, str(folder),
                                    info.spec))
            bar.update(1)
        out[info.runtime] = summarize_raycast(runs, volume, size, info.describe())
    return out


def compositing_part(quick: bool, repeats: int, bar: Any) -> dict[str, Any]:
    """The compositing reference (2 ranks) of ``benchmarks/renderers/compositing.py``."""
    bar.set_postfix_str("compositing reference (2 ranks)")
    ref = comp.run_part("reference", 2, 1024 if quick else 2048, repeats)
    comp.add_ratios(ref)
    bar.update(1)
    return {"reference": ref,
            "goals": comp.goals({"reference": ref, "reference_runs": [comp.run_summary(ref)]}),
            "source": "benchmarks/renderers/compositing.py (its reference part; "
                      "autotune bench compositing has every algorithm)"}


def scaling_part(volume: str, size: int, frames: int, counts: list[int],
                 bar: Any) -> dict[str, Any]:
    """Strong scaling with radix-k over ``counts`` ranks (speed-up against one rank)."""
    runs = []
    for k in counts:
        bar.set_postfix_str(f"scaling, {k} rank(s)")
        runs.append(run_scaling(volume, size, frames, k, "radix-k"))
        bar.update(1)
    one = runs[0]["median"]["frame_ms"]
    for r in runs:
        r["speedup_vs_1_rank"] = one / r["median"]["frame_ms"]
        r["oversubscribed"] = r["ranks"] > (os.cpu_count() or 1)
    return {
        "volume": volume, "size": size, "algorithm": "radix-k", "frames": frames,
        "runs": runs,
        "note": f"{os.cpu_count()} cores: above {os.cpu_count()} ranks the cores are "
                "oversubscribed (ranks share them; MPICH yields while waiting), so "
                "those rows measure the schedule under contention, not a cluster",
    }


def machine(quick: bool, with_vtk: bool) -> dict[str, Any]:
    """Where and when the figures were taken."""
    prepare_runtimes()  # sets the method where the user did not (done already if a device ran)
    out = {
        "cores": os.cpu_count(),
        "load_avg_at_end": list(os.getloadavg()),
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "python": platform.python_version(), "quick": bool(quick),
        "pocl_work_group_method": os.environ.get(POCL_METHOD_ENV),
    }
    if with_vtk:
        import vtk  # lazy: loads VTK (the bench extra)

        out["vtk"] = vtk.vtkVersion.GetVTKVersion()
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a table or JSON (``--json``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    args = parse(argv)
    if args.plots:
        check_output_dir(args.plots, args.force)
    run = RunRecord()
    parts = args.parts
    size = 256 if args.quick else 512
    repeats = args.repeats or (3 if args.quick else 5)
    nviews = 2 if args.quick else 3
    counts = [1, 2, 4] if args.quick else list(range(1, (args.max_ranks or 8) + 1))
    if args.max_ranks:
        counts = [k for k in counts if k <= args.max_ranks]
    frames = 6 if args.quick else 12
    devices = []
    if "raycast" in parts:
        devices = one_device_per_runtime(args.device)
    steps = (2 * len(devices) + ("compositing" in parts)
             + len(counts) * ("scaling" in parts))
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="autotune-volume-bench-") as images, \
            tqdm(total=steps, file=sys.stderr, desc="bench volume-throughput") as bar:
        if "raycast" in parts:
            figures["raycast"] = raycast_part(args.volume, size, repeats, nviews, Path(images),
                                              devices, bar)
        if "compositing" in parts:
            figures["compositing"] = compositing_part(args.quick, repeats, bar)
        if "scaling" in parts:
            figures["scaling"] = scaling_part(args.volume, size, frames, counts, bar)
        figures["machine"] = machine(args.quick, "raycast" in figures)
        figures["goals"] = goals(figures) if "raycast" in figures else (
            figures.get("compositing", {}).get("goals", {}))
        if args.plots:
            with output_dir(args.plots, args.force) as folder:
                for runtime, raycast in figures.get("raycast", {}).items():
                    plot_images(Path(images) / runtime, raycast, runtime, folder)
                if "scaling" in figures:
                    plot_scaling(figures, folder / "volume_scaling.png")
    emit(stamp(figures, run, args.changed), args.json,
         "Volume renderer: ours vs VTK, compositing, strong scaling")
    if args.save:
        runtimes = "+".join(figures.get("raycast", {}))
        save_result(variant_name("volume", args.changed, runtimes), figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
