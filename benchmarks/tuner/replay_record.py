"""``autotune bench replay-record``: record the real ray tracer for the replay runner.

For every frame of a camera path: the probe's workload, the model's prediction and the measured
time of each setting of a small grid (AO rays x shadows x Phong, ordered worst look first by the
tuner's own quality score). :func:`autotune.replay.replay` then runs any controller on these
identical frames, deterministically (tests/test_replay_recorded.py does so in CI on
``tests/data/replay_dragon_small*.json``).

The recorded controlled time is the frame the user waits for without the machine's other
tenants: the probe's CPU time + each phase's CPU busy time (governed.mesh.timers.CpuBusy on
a CPU device; kernel events on a GPU); the read-back is a few microseconds at these sizes and
is left out. The prediction covers the same span: the probe's time + the model's kernel time
(the device's shipped or stored calibration, no feedback).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numba
import numpy as np
from tqdm import tqdm

from autotune.replay import Recording
from autotune_app.animation import heldout_camera_path, orbit_camera_path
from autotune_app.report import emit
from benchmarks.harness.run_record import RunRecord, stamp
from common.atomic_files import write_json
from governed.mesh.probe import Probe
from governed.mesh.timers import default_timer, process_cpu_seconds
from governed.mesh.tuned_renderer import device_model, knob_space
from raytracer.mesh.scene import load_scene
from raytracer.mesh.tracer import RenderSettings, Tracer

AO_GRID = (0, 1, 2, 4, 8, 16)
PATHS = {"orbit": orbit_camera_path, "heldout": heldout_camera_path}


def grid(ao: tuple[float, ...] = AO_GRID) -> tuple[list[RenderSettings], np.ndarray]:
    """The settings, worst look first, and their quality by the tuner's own score."""
    settings = [RenderSettings(a, 0.1, s, p) for a in ao for s in (False, True)
                for p in (False, True)]
    space = knob_space()
    quality = space.quality({"ao_rays": np.array([s.ao_rays for s in settings], float),
                             "shadows": np.array([s.shadows for s in settings]),
                             "phong": np.array([s.phong for s in settings])})
    order = np.argsort(quality, kind="stable")
    return [settings[i] for i in order], np.asarray(quality)[order]


def record(scene_name: str, path: str, frames: int, width: int, height: int,
           device: str | None = None, progress: bool = True) -> Recording:
    """Render every setting of the grid on every frame of the path; see the module doc."""
    scene = load_scene(scene_name)
    tracer = Tracer(scene, device=device)
    probe = Probe.for_tracer(tracer)
    model = device_model(tracer)
    timer = default_timer(tracer)
    settings, quality = grid()
    cameras = PATHS[path](scene, frames)
    threads = _numba_threads()
    tracer.render(cameras[0], width, height, settings[0])  # compile
    probe.measure(cameras[0], width, height)
    predicted = np.empty((frames, len(settings)))
    measured = np.empty((frames, len(settings)))
    workloads = []
    for f, cam in enumerate(tqdm(cameras, desc=f"recording {scene_name}", unit="frame",
                                 disable=not progress)):
        cpu0 = process_cpu_seconds()
        workload = probe.measure(cam, width, height)
        probe_seconds = (process_cpu_seconds() - cpu0) / threads
        workloads.append({**workload.to_dict(), "probe_seconds": probe_seconds})
        for i, s in enumerate(settings):
            timed = timer.render(tracer, cam, width, height, s, seed=f)
            measured[f, i] = probe_seconds + sum(timed.phase_seconds.values())
            predicted[f, i] = probe_seconds + sum(model.phase_seconds(workload, s).values())
    meta = {"scene": scene_name, "path": path, "width": width, "height": height,
            "device": tracer.device_info.name, "timer": timer.describe(),
            "controlled": "probe CPU time + kernels (timer above); read-back left out",
            "predicted": "probe time + model kernel seconds, no feedback",
            "calibration": model.calibration.source if model.calibration else None,
            "load_average_1min": os.getloadavg()[0], "workloads": workloads}
    return Recording([{"ao_rays": s.ao_rays, "shadows": s.shadows, "phong": s.phong}
                      for s in settings], quality, predicted, measured, meta)


def _numba_threads() -> int:
    return max(1, int(numba.get_num_threads()))


def main(argv: list[str] | None = None) -> int:
    """Record the grid on a camera path; print the model's error, write it with ``--out``."""
    parser = argparse.ArgumentParser(prog="autotune bench replay-record", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scene", default="dragon-small")
    parser.add_argument("--path", choices=tuple(PATHS), default="orbit")
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=180)
    parser.add_argument("--device")
    parser.add_argument("-o", "--out", type=Path, help="write the recording (JSON) here")
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.out is not None and args.out.exists() and not args.force:
        parser.error(f"{args.out} exists; pass --force to replace it")
    run = RunRecord()
    rec = record(args.scene, args.path, args.frames, args.width, args.height, args.device)
    if args.out is not None:
        doc = rec.to_dict()
        doc["predicted"] = np.round(rec.predicted, 7).tolist()  # 0.1 µs: a small file
        doc["measured"] = np.round(rec.measured, 7).tolist()
        write_json(args.out, doc, indent=None)
    err = np.abs(rec.predicted - rec.measured) / rec.measured
    probe = np.array([w["probe_seconds"] for w in rec.meta["workloads"]])[:, None]
    kernel_err = np.abs((rec.predicted - probe) / (rec.measured - probe) - 1)
    emit(stamp({"scene": args.scene, "path": args.path, "frames": rec.frames,
          "settings": len(rec.settings), "model_error_mean": float(err.mean()),
          "model_error_p95": float(np.percentile(err, 95)),
          "model_error_kernels_mean": float(kernel_err.mean()),
          "model_error_kernels_p95": float(np.percentile(kernel_err, 95)),
          "model_error_note": "model_error_* include the probe's measured time on both sides "
                              "(a third of the frame); model_error_kernels_* are the model's "
                              "own (kernels only)",
          "frame_ms_range": [float(rec.measured.min() * 1e3), float(rec.measured.max() * 1e3)],
          "written": str(args.out) if args.out else None}, run), args.json,
         title="replay recording")
    return 0
