"""``autotune volume`` and ``autotune volumes`` run: the frame loop on every rank, rank 0's files.

``cmd_volume`` decides bad input on every rank alike before any collective, renders the path
(fixed knobs, or governed after calibration), and rank 0 writes ``frames.csv``,
``timings.json``, ``summary.json`` and ``plot.png`` (``volume_plot``) into the output folder.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from autotune_app import options as opt
from autotune_app.report import emit, plain, summary_stats
from autotune_app.volume_plot import plot
from common.atomic_files import check_output_dir, output_dir, save_png, write_json, write_text
from raytracer.camera import with_next
from raytracer.mpi.faults import AgreedError, agree, guarded, install_excepthook, world
from raytracer.volume.blend import to_rgb8
from raytracer.volume.distributed import (
    DistributedRenderer,
    FrameSettings,
    load_everywhere,
    seed_orbit,
)
from raytracer.volume.transfer_function import PRESETS
from raytracer.volume.volume_data import FILE_FORMATS, MAX_PROCEDURAL, PROCEDURAL, shipped_volumes
from studies.cluster_prediction.emulation import EmulatedRenderer
from studies.cluster_prediction.files import read_histogram
from studies.cluster_prediction.training_data import emulation_times

FIRST_FRAMES = 3  # the governed frames the summary lists one by one (what a user sees first)


def cmd_volumes(args: argparse.Namespace) -> int:
    """``autotune volumes``."""
    shipped = [{"name": n, "dims": list(d), "kind": "shipped"}
               for n, d in shipped_volumes().items()]
    made = [{"name": f"{n}[:N]", "dims": [size] * 3, "kind": "procedural",
             "sizes": f"N in 2..{MAX_PROCEDURAL}, default {size}"}
            for n, size in PROCEDURAL.items()]
    if args.json:
        print(json.dumps({"volumes": shipped + made, "transfer_functions": list(PRESETS)},
                         indent=2))
        return 0
    print(f"  {'volume':<20}{'dims':>16}  kind")
    for v in shipped + made:
        dims = "x".join(map(str, v["dims"]))
        print(f"  {v['name']:<20}{dims:>16}  {v['kind']}"
              + (f" ({v['sizes']})" if "sizes" in v else ""))
    print(f"(any {'/'.join(FILE_FORMATS)} file works too: --volume path/to/data.raw)")
    print("transfer functions: " + ", ".join(PRESETS) + " (or --tf file.json)")
    return 0


def cmd_volume(args: argparse.Namespace) -> int:
    """``autotune volume`` on every rank; returns the exit status (2: bad input)."""
    install_excepthook()
    comm = world()
    rank, size = comm.Get_rank(), comm.Get_size()
    try:
        return _volume(args, comm)
    except AgreedError as exc:  # the same on every rank, before any collective
        if rank == 0:
            print(f"autotune volume: error: {exc}", file=sys.stderr, flush=True)
        return 2
    except Exception as exc:  # one rank's failure: end the whole job, never leave one waiting
        if size > 1:
            sys.excepthook(type(exc), exc, exc.__traceback__)
        raise


def _governed(args: argparse.Namespace) -> bool:
    return opt.target_seconds(args) is not None or args.target_share is not None


def _check_args(args: argparse.Namespace, comm: Any) -> None:
    """Decisions every rank takes alike (arguments) or rank 0 takes for all (the folder)."""
    fixed = [name for name, v in (("--step", args.step), ("--scale", args.scale),
                                  ("--ert", args.ert)) if v is not None]
    problem = ""
    if args.target_share is not None and opt.target_seconds(args) is not None:
        problem = "give --target-share or --target-ms/--fps, not both"
    elif _governed(args) and fixed:
        problem = (f"{'/'.join(fixed)} fix the knobs; with --target-ms/--fps the tuner chooses "
                   f"them (drop one or the other)")
    elif not _governed(args) and args.controller != opt.DEFAULT_CONTROLLER:
        problem = "--controller needs a target (--target-ms or --fps)"
    elif _governed(args) and args.emulate is not None:
        problem = "--emulate sleeps instead of rendering: the tuner has no knobs to turn there"
    if not problem and comm.Get_rank() == 0:
        try:
            check_output_dir(args.out, args.force)
        except OSError as exc:
            problem = str(exc)
    agree(not problem, problem, comm)


def _volume(args: argparse.Namespace, comm: Any) -> int:
    rank = comm.Get_rank()
    _check_args(args, comm)
    volume, tf = load_everywhere(args.volume, args.tf, comm, dims=args.dims, dtype=args.dtype,
                                 spacing=args.spacing)
    renderer = DistributedRenderer(volume, tf, comm, algorithm=args.algorithm,
                                   device=args.device, balance=args.balance,
                                   local=_emulated(args, comm))
    cameras = seed_orbit(volume.radius, args.frames)
    run = VolumeRun(args, renderer, volume, tf)
    if _governed(args):
        run.calibrate(cameras[0])
        frames = (run.governed_frame(cam, nxt) for cam, nxt in with_next(cameras))
    else:
        settings = FrameSettings(step=args.step or 1.0, image_scale=args.scale or 1.0,
                                 ert_threshold=args.ert or 1.0)
        # one untimed frame first: the kernel build and the blend JIT (seconds) are not frame 0
        renderer.render_frame(cameras[0], args.width, args.height, settings)
        if hasattr(renderer.local, "frame"):  # --emulate: path frame 0 draws frame 0's time
            renderer.local.frame = 0
        frames = (run.fixed_frame(cam, settings) for cam in cameras)
    folder_cm = output_dir(args.out, args.force) if rank == 0 else contextlib.nullcontext(None)
    with folder_cm as folder:
        for i, frame in enumerate(_progress(frames, len(cameras), rank)):
            if frame is not None:
                run.keep(i, frame, folder)
        if _governed(args) and args.quality:
            if rank == 0:
                print("measuring each frame's quality against its full-quality frame "
                      "(untimed)...", file=sys.stderr, flush=True)
            run.measure_quality(cameras)
        if rank == 0:
            summary = run.write(folder)
    if rank == 0:
        summary["output"] = str(args.out)
        emit(_headline(summary), args.json, title=run.title())
    return 0


def _emulated(args: argparse.Namespace, comm: Any) -> Any:
    """``--emulate``: this rank's sleeping local renderer (None: ray cast). Every rank reads
    the histogram and draws the same (frames, ranks) times, so a bad file is one error."""
    if args.emulate is None:
        return None

    def times() -> Any:
        hist = read_histogram(args.emulate)
        return emulation_times(hist, args.frames, comm.Get_size(), args.emulate_mode, seed=0)

    t = guarded(times, "--emulate", comm)
    return EmulatedRenderer(t[:, comm.Get_rank()], seed=comm.Get_rank())


def _progress(frames: Any, total: int, rank: int) -> Any:
    if rank != 0:
        return frames
    return tqdm(frames, total=total, desc="frames", file=sys.stderr, leave=False)


class VolumeRun:
    """One run's frame loop and what rank 0 keeps of it."""

    def __init__(self, args: argparse.Namespace, renderer: Any, volume: Any, tf: Any) -> None:
        self.args, self.renderer, self.volume, self.tf = args, renderer, volume, tf
        self.comm, self.rank = renderer.comm, renderer.rank
        self.tuned: Any = None
        self.calibration_seconds = 0.0
        self.calibration_note = ""  # which calibration prices the frames (governed runs)
        self.rows: list[dict[str, Any]] = []
        self.records: list[dict[str, Any]] = []
        self.settings: list[Any] = []  # each kept frame's settings
        self.fixed_settings: Any = None
        self.target = opt.target_seconds(args) or 1.0  # --target-share: set by calibrate()

    def title(self) -> str:
        a = self.args
        mode = (f"target {1e3 * self.target:.0f} ms, {a.controller}"
                if _governed(a) else "fixed knobs")
        return (f"autotune volume: {self.volume.name} on {self.renderer.size} rank(s), "
                f"{a.algorithm}, {a.width}x{a.height}, {mode}")

    # ------------------------------------------------------------------ frames

    def calibrate(self, first_camera: Any) -> None:
        """Fit the per-rank model on calibration views (collective); print how long it took."""
        from governed.volume.model_fit import (  # lazy: pyopencl, which --emulate never needs
            CALIBRATION_VIEWS,
            volume_calibration_views,
        )
        from governed.volume.tuned_volume import TunedVolumeRenderer  # lazy: loads pyopencl too

        a = self.args
        self.tuned = TunedVolumeRenderer(self.renderer, a.width, a.height, self.target,
                                         controller=a.controller, probe_policy=a.probe_policy)
        if self.rank == 0:
            print(f"calibrating on {CALIBRATION_VIEWS} views off the path "
                  f"({a.calibration_frames} frames + quality sweeps)...", file=sys.stderr,
                  flush=True)
        t0 = time.perf_counter()
        self.tuned.calibrate(volume_calibration_views(self.volume.radius),
                             frames=a.calibration_frames)
        self.calibration_note = (f"the per-rank model calibrated on {self.volume.name} itself: "
                                 f"{a.calibration_frames} frames at random knobs from "
                                 f"{CALIBRATION_VIEWS} views off the path")
        if a.target_share is not None:
            full = self.tuned.full_quality_seconds(first_camera)  # None on ranks >= 1
            if self.rank == 0:
                self.target = a.target_share * full
                self.tuned.target_seconds = self.target  # the next frame's state takes it
                # everywhere
                print(f"target {1e3 * self.target:.1f} ms = {a.target_share:g} x the first "
                      f"view's full-quality frame", file=sys.stderr, flush=True)
        if a.controller == "fixed":
            self.fixed_settings = self.tuned.tune_fixed_by_measurement(first_camera)
        self.calibration_seconds = time.perf_counter() - t0
        if self.rank == 0:
            print(f"calibrated in {self.calibration_seconds:.1f} s", file=sys.stderr, flush=True)

    def fixed_frame(self, camera: Any, settings: Any) -> dict[str, Any] | None:
        self.comm.Barrier()  # frames start together, as a display loop paced by rank 0 would
        res = self.renderer.render_frame(camera, self.args.width, self.args.height, settings)
        if self.rank != 0:
            return None
        return {"image": res.image, "record": res.record, "settings": settings,
                "measured": res.record.frame_seconds}

    def governed_frame(self, camera: Any, next_camera: Any = None) -> dict[str, Any] | None:
        """One governed frame; the path's ``next_camera`` is probed ahead on a device that is
        not the CPU (:meth:`TunedVolumeRenderer.render`)."""
        self.comm.Barrier()
        f = self.tuned.render(camera, next_camera)
        if f is None:
            return None
        return {"image": f.image, "record": f.record, "settings": f.settings,
                "measured": f.measured, "predicted": f.predicted, "corrected": f.corrected,
                "probe_seconds": f.probe_seconds, "over_budget": f.over_budget,
                "sections": f.sections}

    def measure_quality(self, cameras: Sequence[Any]) -> None:
        """PSNR/SSIM of every governed frame against its full-quality frame, rendered after
        the timed frames so that neither render shows in a governed frame's time
        (collective; rank 0 fills its rows)."""
        for i, camera in enumerate(cameras):
            q = self.tuned.quality_of(camera, self.settings[i] if self.rank == 0 else None)
            if self.rank == 0:
                self.rows[i].update(q)
                self.records[i]["governed"].update(q)

    # ------------------------------------------------------------------ rank 0 keeps

    def keep(self, index: int, frame: dict[str, Any], folder: Path) -> None:
        """Write the frame's PNG and keep its row and timings (rank 0)."""
        save_png(to_rgb8(frame["image"]), folder / f"frame_{index:04d}.png")
        rec = frame["record"]
        r0 = rec.ranks[0]
        s = frame["settings"]
        row: dict[str, Any] = {
            "frame": index, "step": s.step, "image_scale": s.image_scale,
            "ert_threshold": s.ert_threshold, "render_width": rec.render_width,
            "render_height": rec.render_height,
            "frame_ms": 1e3 * rec.frame_seconds,
            "render_ms": 1e3 * r0.render_seconds,
            "render_max_ms": 1e3 * rec.render_max,
            "composite_ms": 1e3 * (r0.composite_seconds - r0.gather.seconds),
            "gather_ms": 1e3 * r0.gather.seconds,
            "upscale_ms": 1e3 * rec.finish_seconds,
            "kernel_max_ms": 1e3 * max(r.kernel_seconds for r in rec.ranks),
            "samples": sum(r.samples for r in rec.ranks),
            # the longest a rank did not run during its render (the OS or the host had its core)
            "descheduled_ms": 1e3 * rec.descheduled_seconds,
            "descheduled": int(rec.descheduled),
        }
        if "predicted" in frame:
            row.update({
                "target_ms": 1e3 * self.tuned.target_seconds,
                "measured_ms": 1e3 * frame["measured"],
                "predicted_ms": 1e3 * frame["predicted"], "corrected_ms": 1e3 * frame["corrected"],
                "probe_ms": 1e3 * frame["probe_seconds"], "over_budget": int(frame["over_budget"]),
                "psnr": math.nan, "ssim": math.nan,  # measure_quality's, after the frames
            })
        self.rows.append(row)
        entry = rec.to_dict()
        entry["frame"] = index
        entry["render_max"] = rec.render_max
        if "predicted" in frame:
            entry["governed"] = {k: row[k] for k in ("measured_ms", "predicted_ms",
                                                     "corrected_ms", "probe_ms", "psnr", "ssim")}
            entry["governed"]["predicted_sections_s"] = frame["sections"]
        self.records.append(entry)
        self.settings.append(s)

    # ------------------------------------------------------------------ rank 0 writes

    def write(self, folder: Path) -> dict[str, Any]:
        """frames.csv, timings.json, summary.json, plot.png; returns the summary."""
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(self.rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v)
                             for k, v in row.items()})
        write_text(folder / "frames.csv", buf.getvalue())
        write_json(folder / "timings.json", plain({
            "about": "per frame, per rank: local render wall and kernel seconds, samples, "
                     "every compositing stage (seconds, blend seconds, bytes sent/received, "
                     "partners) and the gather; frame_seconds = rank 0 from frame start to "
                     "the final (upscaled) image",
            "ranks": self.renderer.size, "algorithm": self.args.algorithm,
            "bricks": [{"rank": i, "lo": list(b.lo), "hi": list(b.hi)}
                       for i, b in enumerate(self.renderer.partition.bricks)],
            "frames": self.records,
        }), indent=1)
        summary = self.summary()
        write_json(folder / "summary.json", plain(summary))
        plot(self.rows, self.records, summary, folder / "plot.png")
        return summary

    def summary(self) -> dict[str, Any]:
        a = self.args
        col = {k: np.array([r[k] for r in self.rows], np.float64) for k in self.rows[0]}
        per_rank = np.array([[r["render_seconds"] for r in rec["ranks"]]
                             for rec in self.records]) * 1e3
        mean_rank = per_rank.mean(axis=0)
        out: dict[str, Any] = {
            "volume": self.volume.name, "dims": list(self.volume.dims),
            "transfer_function": self.tf.name, "ranks": self.renderer.size,
            "opencl_threads_per_rank": getattr(self.renderer, "threads", None),
            "algorithm": a.algorithm, "balance": bool(a.balance),
            "width": a.width, "height": a.height, "frames": len(self.rows),
            "frame_ms": summary_stats(col["frame_ms"]),
            "fps": float(1e3 / col["frame_ms"].mean()),
            "mean_ms": {k: float(col[f"{k}_ms"].mean()) for k in
                        ("render", "render_max", "composite", "gather", "upscale")},
            "render_per_rank_mean_ms": mean_rank.tolist(),
            "render_imbalance": float(mean_rank.max() / mean_rank.mean()),
            "warm_up": "one untimed frame before the path" if not _governed(a) else
                       "the calibration frames",
            "controlled_time": "rank 0: frame start to final image (render + composite + "
                               "gather + upscale)" + (" + probe and choice" if _governed(a)
                                                      else ""),
        }
        if not _governed(a):
            out["settings"] = {"step": a.step or 1.0, "image_scale": a.scale or 1.0,
                               "ert_threshold": a.ert or 1.0}
            return out
        target = self.target * 1e3
        err = np.abs(col["measured_ms"] - target) / target
        model_err = np.abs(col["corrected_ms"] - col["measured_ms"]) / col["measured_ms"]
        out["governed"] = {
            "target_ms": target, "controller": a.controller,
            "calibration": self.calibration_note,
            "calibration_seconds": self.calibration_seconds,
            "calibration_frames": a.calibration_frames,
            "first_frames_ms": [round(float(x), 2) for x in col["measured_ms"][:FIRST_FRAMES]],
            "measured_ms": summary_stats(col["measured_ms"]),
            "mean_abs_error_vs_target": float(err.mean()),
            "p95_abs_error_vs_target": float(np.percentile(err, 95)),
            "frames_over_target_5pct": int((col["measured_ms"] > 1.05 * target).sum()),
            # frames a rank did not run for a while during its render: no model prices those
            "frames_a_rank_was_descheduled": int(col["descheduled"].sum()),
            "mean_model_error": float(np.mean(np.abs(col["predicted_ms"] - col["measured_ms"])
                                              / col["measured_ms"])),
            "mean_model_feedback_error": float(model_err.mean()),
            "mean_knobs": {"sampling_rate": float(np.mean(1.0 / col["step"])),
                           "image_scale": float(col["image_scale"].mean()),
                           "ert_threshold": float(col["ert_threshold"].mean())},
            "mean_probe_ms": float(col["probe_ms"].mean()),
        }
        if self.fixed_settings is not None:
            s = self.fixed_settings
            out["governed"]["fixed_settings"] = {"step": s.step, "image_scale": s.image_scale,
                                                 "ert_threshold": s.ert_threshold}
        if a.quality:
            finite = col["psnr"][np.isfinite(col["psnr"])]
            out["governed"]["mean_psnr"] = float(finite.mean()) if finite.size else math.inf
            out["governed"]["frames_equal_to_full_quality"] = int(np.isinf(col["psnr"]).sum())
            out["governed"]["mean_ssim"] = float(np.nanmean(col["ssim"]))
        return out


def _headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The few figures printed at the end (summary.json holds all)."""
    keys = ("volume", "ranks", "algorithm", "frames", "frame_ms", "fps", "mean_ms",
            "render_imbalance", "settings", "governed", "output")
    out = {k: summary[k] for k in keys if k in summary}
    if "governed" in out:
        g = out["governed"]
        out["governed"] = {k: g[k] for k in (
            "target_ms", "controller", "calibration", "calibration_seconds", "first_frames_ms",
            "mean_abs_error_vs_target",
            "p95_abs_error_vs_target", "frames_over_target_5pct",
            "frames_a_rank_was_descheduled", "mean_model_feedback_error",
            "mean_knobs", "mean_psnr", "mean_ssim", "frames_equal_to_full_quality",
            "fixed_settings") if k in g}
    return out
