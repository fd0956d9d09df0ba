"""Ray throughput of our OpenCL tracer against Embree (embreex) on the same rays, at equal
thread counts, plus BVH build speed and quality, and memory.

Runtimes: every OpenCL runtime that builds here is measured (PoCL and Intel's CPU runtime are
two; ``--device`` picks one). Threads: each configuration runs in its own process.
``one_thread``: the CPU device cut to one compute unit (``AUTOTUNE_COMPUTE_UNITS=1``: device
fission, or PoCL's ``POCL_MAX_PTHREAD_COUNT``) against Embree on one thread (embreex's
``scene.run`` is single-threaded): the per-core comparison the goals use. ``all_cores``: the
device on every core against the same one-thread Embree, beside it. Within a process ours and
Embree are timed interleaved (one frame of ours, then
Embree's primary, shadow and AO batches, ``--repeats`` times) and the best of each is kept, so
both see the same machine load.

Primary rays: every pixel's ray counts, hit or miss, for both tracers (Mrays/s = pixels /
seconds). Ours: kernel time from the profiling event of the ``primary`` phase
(``Frame.phase_seconds``); Embree: wall time of one ``scene.run(origins, dirs)`` over exactly
the rays the kernel generates (eye, and ``normalize(top_left + (x+0.5) du + (y+0.5) dv)`` in
float32).

Shadow and AO rays (any hit, ``query='OCCLUDED'``): built on the CPU from our primary hits the
way the kernels build them (origin offset along the facing geometric normal; shadow rays to
the point light, skipped where the light is behind the surface, as unit directions with the
distance as tmax where the kernel traces the same segment unnormalized; 8 cosine-weighted AO
rays per hit pixel within 10 % of the scene diagonal). Only the rays actually traced count, the same
number for both; the AO directions are drawn from the same distribution, not bit-identical.
Our shadow/AO kernel time also includes the (cheap) pixels that trace nothing.

Embree's batches get their rays ready-made (numpy, untimed); our shadow and AO phases build
theirs in the kernel (normal fetch, offset; for AO the random numbers, basis and
sin/cos). What that costs is timed beside the ratios: the same kernels with every any-hit
``trace()`` call replaced by a use of its ray (:func:`without_traversal_source`), interleaved
with the rest, so ``ratio_traversal_only`` compares the traversal alone.

``kernel_launches``: how this device launches each kernel (``raytracer/device/launches.py``,
chosen by measurement once per device) and, where it chose other than the default, all four
phases timed both ways in the same loop (``default_over_chosen``: above 1, the choice pays).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba as nb
import numpy as np
from tqdm import tqdm

from autotune_app.report import emit, plain
from benchmarks.harness.checkout_tools import load_tool
from benchmarks.harness.results import save_result
from benchmarks.harness.run_record import (
    changed_options,
    cpu_model,
    mark_goals,
    measured_run,
    variant_name,
)
from benchmarks.renderers.throughput_rays import ao_rays, hit_frames, primary_rays, shadow_rays
from raytracer.device.choice import one_device_per_runtime
from raytracer.device.launches import DEFAULTS
from raytracer.device.runtimes import COMPUTE_UNITS_ENV, POCL_METHOD_ENV
from raytracer.mesh.bvh import build_bvh, build_bvh_full_sweep
from raytracer.mesh.phases import PHASES
from raytracer.mesh.scene import Scene, load_scene
from raytracer.mesh.tracer import RenderSettings, Tracer, kernel_source

SCENES = ("dragon", "sibenik")
QUICK_SCENES = SCENES[:1]  # --quick: dragon only, the scene the memory and build figures use
AO_RAYS = 8
AO_RADIUS = 0.1  # fraction of the scene diagonal
RAY_KINDS = ("primary", "shadow", "ao")
GOAL_RATIO = 1.0  # ours per core >= Embree per core
GOAL_BUILD_MTRIS = 2.0  # binned SAH + 8-wide collapse, all cores
GOAL_SAH_RATIO = 1.10  # binned SAH cost within 10 % of the full sweep
MARK = "THROUGHPUT-JSON "

ANY_HIT_TRACE = re.compile(r"trace\(nodes, tris, o, ([^,]+), &t, &u, &v, 1, &steps, &tests\) >= 0")
SHADOW_PACKET_TRAVERSAL = "if (ANY8(traced)) {"
UNTRAVERSED_PACKET = ("if (ANY8(traced) && ANY8(vload8(0, o) + vload8(1, o) + "
                      "vload8(2, o) + vload8(0, d) + vload8(1, d) + vload8(2, d) > "
                      "(float8)(INF_T))) {")


def without_traversal_source() -> str:
    """The kernels with each any-hit ``trace()`` (shadow, AO) replaced by a use of its ray
    that never counts as a hit, so the ray is still built but not traversed; in the shadow
    kernel's packet form the traversal guarded by a use of the packet's rays alike."""
    source, n = ANY_HIT_TRACE.subn(r"(DOT3(o + (\1) * t, (float3)(1.0f)) > INF_T)",
                                   kernel_source())
    if n != 2 or source.count(SHADOW_PACKET_TRAVERSAL) != 1:
        raise RuntimeError(f"expected the shadow and AO kernels' any-hit trace() calls and the "
                           f"shadow packet's traversal, found {n} calls and "
                           f"{source.count(SHADOW_PACKET_TRAVERSAL)} traversals")
    return source.replace(SHADOW_PACKET_TRAVERSAL, UNTRAVERSED_PACKET)


def timed(run: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall seconds, process CPU seconds (all threads) and result of one ``run()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = run()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def embree_threads(run: Callable[[], Any]) -> float:
    """CPU seconds per wall second of one ``run()`` (about 1.0 means single-threaded)."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-9)


def embree_scene(tris: np.ndarray) -> Any:
    """An Embree scene of ``tris`` (embreex commits it, builds its BVH, on its first query)."""
    from embreex import rtcore_scene as rtcs  # lazy: optional (the bench extra)
    from embreex.mesh_construction import TriangleMesh  # lazy: optional (the bench extra)

    scene = rtcs.EmbreeScene()
    TriangleMesh(scene, np.ascontiguousarray(tris, np.float32))
    return scene


def scene_tracers(scene: Scene, device: str | None) -> tuple[Tracer, Tracer, Tracer | None]:
    """Our tracer on ``scene``; the same kernels without any-hit traversal; and, where the
    device chose other kernel launches than the defaults, the same with the default ones."""
    tracer = Tracer(scene, device=device)
    untraced = Tracer(scene, tracer.bvh, device=device, source=without_traversal_source())
    default = (Tracer(scene, tracer.bvh, device=device, launches=DEFAULTS)
               if tracer.launches.signature else None)
    return tracer, untraced, default


def embree_batches(
    scene: Scene, tris: np.ndarray, tracer: Tracer, width: int, height: int, t: np.ndarray,
    prim: np.ndarray
) -> tuple[dict[str, Callable[[], Any]], dict[str, int]]:
    """Embree's batch of each ray kind over the rays ours traces (primary rays from the camera,
    shadow and AO rays from our primary hits ``t``, ``prim``), and each batch's ray count."""
    escene = embree_scene(tris)
    origins, dirs = primary_rays(scene, width, height)
    p, n, _ = hit_frames(tracer, origins, dirs, t, prim)
    so, sd, st = shadow_rays(scene.light.astype(np.float32), p, n)
    ao_o, ao_d, ao_t = ao_rays(p, n, AO_RAYS, AO_RADIUS * scene.diagonal)
    runs = {
        "primary": lambda: escene.run(origins, dirs, output=1),
        "shadow": lambda: escene.run(so, sd, dists=st, query="OCCLUDED"),
        "ao": lambda: escene.run(ao_o, ao_d, dists=ao_t, query="OCCLUDED"),
    }
    return runs, {"primary": width * height, "shadow": len(so), "ao": len(ao_o)}


def time_interleaved(
    phase: Callable[[str, Tracer], float], runs: dict[str, Callable[[], Any]],
    results: dict[str, Any], tracers: tuple[Tracer, Tracer, Tracer | None], repeats: int
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Best wall and CPU seconds per ray kind of ours, the untraced kernels and Embree's
    batches, interleaved ``repeats`` times (``results`` keeps Embree's last answers); and,
    with a default-launch tracer, every phase under the chosen and the default launches."""
    tracer, untraced, default = tracers
    best = {f"{who}_{what}": dict.fromkeys(RAY_KINDS, float("inf"))
            for who in ("ours", "embree", "untraced") for what in ("wall", "cpu")}
    launch_best = {who: dict.fromkeys(PHASES, float("inf")) for who in ("chosen", "default")}
    for _ in range(repeats):  # interleaved: ours' three phases, untraced, Embree's batches
        for kind in RAY_KINDS:
            _, cpu, sec = timed(lambda kind=kind: phase(kind, tracer))
            best["ours_wall"][kind] = min(best["ours_wall"][kind], sec)
            best["ours_cpu"][kind] = min(best["ours_cpu"][kind], cpu)
        for kind in ("shadow", "ao"):
            _, cpu, sec = timed(lambda kind=kind: phase(kind, untraced))
            best["untraced_wall"][kind] = min(best["untraced_wall"][kind], sec)
            best["untraced_cpu"][kind] = min(best["untraced_cpu"][kind], cpu)
        for kind, run in runs.items():
            sec, cpu, results[kind] = timed(run)
            best["embree_wall"][kind] = min(best["embree_wall"][kind], sec)
            best["embree_cpu"][kind] = min(best["embree_cpu"][kind], cpu)
        if default is not None:
            for who, renderer in (("chosen", tracer), ("default", default)):
                for p in PHASES:
                    launch_best[who][p] = min(launch_best[who][p], phase(p, renderer))
    return best, launch_best


def ray_kind_figures(best: dict[str, dict[str, float]], rays: dict[str, int],
                     results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per ray kind: Mrays/s of ours and Embree, per wall and per CPU second, and their
    ratios; for shadow and AO rays also Embree's occluded share and ours without traversal."""
    figures: dict[str, dict[str, Any]] = {}
    for kind in RAY_KINDS:
        n_rays = rays[kind]
        figures[kind] = {
            "rays": n_rays,
            "ours_mrays_s": n_rays / best["ours_wall"][kind] / 1e6,
            "embree_mrays_s": n_rays / best["embree_wall"][kind] / 1e6,
            "ratio_ours_over_embree": best["embree_wall"][kind] / best["ours_wall"][kind],
            "ours_mrays_per_cpu_s": n_rays / best["ours_cpu"][kind] / 1e6,
            "embree_mrays_per_cpu_s": n_rays / best["embree_cpu"][kind] / 1e6,
            "ratio_cpu_time": best["embree_cpu"][kind] / best["ours_cpu"][kind],
        }
    for kind in ("shadow", "ao"):
        figures[kind]["embree_occluded_share"] = float(np.mean(np.asarray(results[kind]) >= 0))
        untraced = best["untraced_cpu"][kind]
        figures[kind].update({
            "ours_without_traversal_cpu_s": untraced,
            "share_without_traversal": untraced / best["ours_cpu"][kind],
            "ratio_traversal_only": best["embree_cpu"][kind] / max(best["ours_cpu"][kind]
                                                                   - untraced, 1e-12),
        })
    return figures


def primary_agreement(tracer: Tracer, t: np.ndarray, prim: np.ndarray,
                      embree: dict[str, np.ndarray]) -> dict[str, float]:
    """How often our primary hits (``t``, ``prim``) and Embree's name the same triangle (or
    tie with it at the same depth), and agree on depth where both hit."""
    ours_face = np.where(prim >= 0, tracer.bvh.face_ids[np.maximum(prim, 0)], -1)
    t_agree = np.abs(embree["tfar"] - t) <= 1e-3 * np.abs(embree["tfar"])
    both = (prim >= 0) & (embree["primID"] >= 0)
    # a different triangle at the same depth: a ray through a shared edge or coplanar faces
    tie = both & (np.abs(embree["tfar"] - t) <= 1e-4 * np.abs(embree["tfar"]))
    return {
        "same_primary_hit_share": float(np.mean(ours_face == embree["primID"])),
        "same_hit_or_tie_share": float(np.mean((ours_face == embree["primID"]) | tie)),
        "depth_agrees_where_both_hit": float(np.mean(t_agree[both])),
    }


def launch_figures(tracer: Tracer,
                   launch_best: dict[str, dict[str, float]] | None) -> dict[str, Any]:
    """The device's kernel launches; with ``launch_best`` (timed against the default ones)
    each phase's ms both ways and default over chosen, per phase and per frame."""
    figures: dict[str, Any] = {"chosen": tracer.launches.signature or "default everywhere"}
    if launch_best is not None:
        figures.update({
            "phase_ms": {who: {p: v * 1e3 for p, v in t.items()}
                         for who, t in launch_best.items()},
            "default_over_chosen": {p: launch_best["default"][p] / launch_best["chosen"][p]
                                    for p in PHASES},
            "frame_default_over_chosen": sum(launch_best["default"].values())
            / sum(launch_best["chosen"].values()),
        })
    return figures


def bench_scene(name: str, width: int, height: int, repeats: int,
                device: str | None) -> dict[str, Any]:
    """All ray figures for one scene in this process (its PoCL thread count), ours and Embree
    interleaved, best of ``repeats`` each."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scene = load_scene(name)
    tris = scene.triangles()
    tracers = scene_tracers(scene, device)
    tracer, untraced, default = tracers
    settings = RenderSettings(ao_rays=AO_RAYS, ao_radius=AO_RADIUS, shadows=True, phong=True,
                              ao_history=False, ao_filter=False)  # the rays alone, as Embree
    untraced.render(scene.camera, width, height, settings)  # warm-up; its primary hits
    tracer.render(scene.camera, width, height, settings)  # warm-up (first launch)
    hits = tracer.hits().reshape(-1, 4)
    t = hits[:, 0].copy()
    prim = hits[:, 3].copy().view(np.int32)
    runs, rays = embree_batches(scene, tris, tracer, width, height, t, prim)
    results = {kind: run() for kind, run in runs.items()}  # warm-up

    def phase(kind: str, who: Tracer) -> float:
        return who.time_phase(kind, scene.camera, width, height, settings)

    best, launch_best = time_interleaved(phase, runs, results, tracers, repeats)
    frame = tracer.render(scene.camera, width, height, settings)
    threads = embree_threads(runs["primary"])
    figures: dict[str, Any] = {
        "compute_units": tracer.device.compute_units,
        "triangles": len(tris),
        "resolution": f"{width}x{height}",
        "hit_share": float(np.mean(prim >= 0)),
        **ray_kind_figures(best, rays, results),
    }
    figures["primary"].update(primary_agreement(tracer, t, prim, results["primary"]))
    figures["ours_frame_phase_ms"] = {k: v * 1e3 for k, v in frame.phase_seconds.items()}
    figures["kernel_launches"] = launch_figures(tracer,
                                                launch_best if default is not None else None)
    figures["embree_cpu_per_wall"] = threads
    figures["device"] = tracer.device.name
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = tracer.bvh.stats
    figures["bvh"] = {"bytes": s.bytes, "node_bytes": int(tracer.bvh.nodes.nbytes),
                      "shadow_node_bytes": int(tracer.bvh.shadow_nodes.nbytes),
                      "triangle_bytes": int(tracer.bvh.leaf_blocks.nbytes)}
    return figures


def worker_main(argv: list[str]) -> int:
    """``--worker NAME WIDTH HEIGHT REPEATS [DEVICE]``: one scene in this process."""
    name, width, height, repeats = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    device = argv[4] if len(argv) > 4 else None
    print(MARK + json.dumps(plain(bench_scene(name, width, height, repeats, device))),
          flush=True)
    return 0


def run_worker(name: str, width: int, height: int, repeats: int, device: str | None,
               threads: int | None) -> dict[str, Any]:
    """One scene in a fresh process; ``threads`` cuts the device to that many compute units
    (None: all)."""
    env = dict(os.environ)
    for key in (COMPUTE_UNITS_ENV, "POCL_MAX_PTHREAD_COUNT"):
        env.pop(key, None)
    if threads is not None:
        env[COMPUTE_UNITS_ENV] = str(threads)
    cmd = [sys.executable, "-m", "benchmarks.renderers.throughput", "--worker", name, str(width),
           str(height), str(repeats)] + ([device] if device else [])
    done = subprocess.run(cmd, env=env, cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise RuntimeError(f"throughput worker for {name} ({threads or 'all'} threads) failed "
                       f"(exit {done.returncode}):\n{done.stderr[-3000:]}")


def embree_build_seconds(tris: np.ndarray) -> float:
    """Wall seconds of Embree's build of ``tris`` (its scene commit, on every core: embreex
    commits on a scene's first query, so this times one query of one ray on a fresh scene;
    the mesh's conversion before it is not timed)."""
    scene = embree_scene(tris)
    origin, direction = np.zeros((1, 3), np.float32), np.array([[0, 0, 1]], np.float32)
    return timed(lambda: scene.run(origin, direction))[0]


def bench_build(tris: np.ndarray, repeats: int) -> dict[str, Any]:
    """Build speed of the binned builder and its SAH cost against the exact full sweep, beside
    Embree's build of the same triangles timed interleaved (a reference from the same minutes:
    a machine that builds slowly for a while slows both)."""
    tris = np.ascontiguousarray(tris, np.float32)
    build_bvh(tris)  # compile / warm
    embree_build_seconds(tris)
    times, cpu_times, embree_times = [], [], []
    for _ in range(repeats):
        sec, cpu, bvh = timed(lambda: build_bvh(tris))
        times.append(sec)
        cpu_times.append(cpu)
        embree_times.append(embree_build_seconds(tris))
    full = build_bvh_full_sweep(tris)
    return {
        "triangles": len(tris),
        "build_seconds_min": min(times),
        "build_seconds_median": float(np.median(times)),
        "mtris_per_s": len(tris) / min(times) / 1e6,
        "cpu_seconds_min": min(cpu_times),
        "mtris_per_cpu_s": len(tris) / min(cpu_times) / 1e6,
        "embree_build_seconds_min": min(embree_times),
        "embree_build_seconds_median": float(np.median(embree_times)),
        "ratio_embree_over_ours": min(embree_times) / min(times),
        "sah_binned": bvh.stats.sah_cost,
        "sah_full_sweep": full.stats.sah_cost,
        "sah_ratio_binned_over_full": bvh.stats.sah_cost / full.stats.sah_cost,
        "full_sweep_seconds": full.stats.build_seconds,
        "depth": bvh.stats.depth,
        "inner_nodes": bvh.stats.inner_nodes,
        "mean_leaf_size": bvh.stats.mean_leaf_size,
        "threads": nb.get_num_threads(),
    }


def goals(figures: dict[str, Any]) -> dict[str, Any]:
    """The goals block, computed from the figures: per runtime and scene, each ray kind."""
    out: dict[str, Any] = {}
    for runtime, per_runtime in figures["runtimes"].items():
        for name in (n for n in SCENES if n in per_runtime):
            per_core = per_runtime[name].get("one_thread")
            if per_core is None:
                continue
            for kind in RAY_KINDS:
                ratio = per_core[kind]["ratio_cpu_time"]
                out[f"{runtime}_{name}_{kind}_per_core"] = {
                    "value": ratio,
                    "goal": f">= {GOAL_RATIO:g}",
                    "met": bool(ratio >= GOAL_RATIO),
                    "what": f"{name} {kind} rays per CPU second: ours on one {runtime} compute "
                    "unit / Embree on one thread, same rays (CPU time, robust to a shared "
                    "machine; the wall-time ratio is beside it in one_thread)",
                }
    build = figures["build_dragon"]
    out["bvh_build_mtris_s"] = {
        "value": build["mtris_per_s"],
        "goal": f">= {GOAL_BUILD_MTRIS:g}",
        "met": bool(build["mtris_per_s"] >= GOAL_BUILD_MTRIS),
        "what": f"dragon BVH build (binned SAH + 8-wide collapse + packing), million triangles "
        f"per second on {build['threads']} threads (wall time: only meaningful on an idle "
        "machine; mtris_per_cpu_s beside it, and Embree's build of the same triangles, timed "
        "interleaved, in build_dragon)",
    }
    out["sah_vs_full_sweep"] = {
        "value": build["sah_ratio_binned_over_full"],
        "goal": f"<= {GOAL_SAH_RATIO:g}",
        "met": bool(build["sah_ratio_binned_over_full"] <= GOAL_SAH_RATIO),
        "what": "dragon binary-tree SAH cost, binned build / exact full-sweep build",
    }
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of ``autotune bench throughput``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="dragon alone, at 640x360 instead of 1280x720")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")
    parser.add_argument("--device", default=None,
                        help="one OpenCL device (gpu, cpu, P:D, intel-cpu, pocl, name); "
                             "default: one device of every runtime that builds here")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (best of)")
    parser.add_argument("--save", action="store_true",
                        help="also write results/<machine>/throughput_<runtimes>.json (with "
                             "--repeats set, repeats-N before <runtimes>: such a run decides no "
                             "goal)")
    args = parser.parse_args(argv)
    args.changed = changed_options(parser, args, ("quick", "repeats"))
    if args.quick and args.save:  # a quick run lacks sibenik: it must not replace a full one
        parser.error("--save keeps full runs only: run it without --quick")
    return args


def runtime_figures(info: Any, configs: list[tuple[str, int | None]], scenes: tuple[str, ...],
                    width: int, height: int, repeats: int, bar: tqdm) -> dict[str, Any]:
    """Each of ``scenes`` on one runtime's device (``info``), one worker process per
    configuration (label, compute units), and the dragon worker's memory."""
    per_runtime: dict[str, Any] = {"device": info.describe()}
    for name in scenes:
        scene_fig: dict[str, Any] = {}
        for label, threads in configs:
            bar.set_postfix_str(f"{info.runtime} {name}: {label}")
            scene_fig[label] = run_worker(name, width, height, repeats, info.spec, threads)
            bar.update(1)
        if "one_thread" in scene_fig and "all_cores" in scene_fig:
            scene_fig["all_cores_over_one_thread"] = {
                kind: scene_fig["all_cores"][kind]["ours_mrays_s"]
                / scene_fig["one_thread"][kind]["ours_mrays_s"] for kind in RAY_KINDS}
        per_runtime[name] = scene_fig
    last = per_runtime["dragon"][configs[-1][0]]
    per_runtime["memory_dragon"] = {
        "peak_rss_mb": last["peak_rss_mb"],
        **{f"bvh_{k}": v for k, v in last["bvh"].items()},
        "note": "peak RSS of the dragon worker process: ours (BVH, buffers, OpenCL "
        "runtime) and Embree's scene together",
    }
    return per_runtime


def notes(cores: int) -> dict[str, str]:
    """The JSON's ``notes``: how rays are counted, timed and threaded."""
    return {
        "ray_counting": "primary: every pixel (hit or miss) for both; shadow/AO: only rays "
        "traced (hit pixels facing the light; 8 per hit pixel), the same count for both",
        "timing": "each phase of ours launched alone and waited for, then Embree's batch "
        "(scene.run), interleaved in one process, best of repeats; wall: ours from the OpenCL "
        "profiling event, Embree around scene.run; cpu: process CPU time (all threads) around "
        "each, which a busy shared machine does not inflate the way it inflates wall time",
        "threads": "one_thread: AUTOTUNE_COMPUTE_UNITS=1 (device fission; PoCL: "
        "POCL_MAX_PTHREAD_COUNT=1) vs embreex on one thread (its scene.run is single-threaded, "
        f"embree_cpu_per_wall ~ 1); all_cores: the device on {cores} cores vs the same "
        "one-thread Embree",
    }


def machine(cores: int, quick: bool, repeats: int) -> dict[str, Any]:
    """The JSON's ``machine``: CPU, cores, date, Python, the run's size and PoCL's method."""
    return {
        "cpu": cpu_model(),
        "cores": cores,
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "quick": bool(quick),
        "repeats": repeats,
        "pocl_work_group_method": os.environ.get(POCL_METHOD_ENV),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a table or JSON (``--json``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    args = parse_args(argv)
    width, height = (640, 360) if args.quick else (1280, 720)
    repeats = args.repeats or (3 if args.quick else 5)
    cores = os.cpu_count() or 1
    devices = one_device_per_runtime(args.device)
    # (label, compute units): per core first, then every core; a GPU runs once as itself
    configs = {info.runtime: ([("one_thread", 1), ("all_cores", None)] if info.kind == "CPU"
                              else [("device", None)]) for info in devices}
    figures: dict[str, Any] = {"runtimes": {}}
    scenes = QUICK_SCENES if args.quick else SCENES
    steps = len(scenes) * sum(len(c) for c in configs.values()) + 2
    with measured_run() as run, tqdm(total=steps, file=sys.stderr, desc="throughput") as bar:
        for info in devices:
            figures["runtimes"][info.runtime] = runtime_figures(
                info, configs[info.runtime], scenes, width, height, repeats, bar)
        bar.set_postfix_str("BVH build")
        figures["build_dragon"] = bench_build(load_scene("dragon").triangles(),
                                              5 if args.quick else 10)
        bar.update(1)
        bar.set_postfix_str("kernel calls")
        if any(info.is_pocl for info in devices):
            figures["pocl_kernel_calls"] = kernel_call_figures()
        bar.update(1)
    figures["run"] = run.figures()
    figures["goals"] = mark_goals(goals(figures), figures["run"], args.changed)
    figures["notes"] = notes(cores)
    figures["machine"] = machine(cores, args.quick, repeats)
    title = "Ray throughput: OpenCL tracer vs Embree (embreex), same rays, equal threads"
    emit(figures, args.json, title)
    if args.save:
        save_result(variant_name("throughput", args.changed, "+".join(figures["runtimes"])),
                    figures)
    return 0


def kernel_call_figures() -> dict[str, Any]:
    """Out-of-line calls in the PoCL-compiled kernels (none but libm are expected); a
    developer tool of the repository (``tools/kernel_calls.py``), so only from a checkout
    (:func:`benchmarks.harness.checkout_tools.load_tool`)."""
    try:
        kernel_calls = load_tool("kernel_calls")
    except FileNotFoundError as exc:
        return {"skipped": str(exc)}
    try:
        calls = kernel_calls.compiled_kernel_calls()
    except kernel_calls.KernelCallsUnavailable as exc:
        return {"skipped": str(exc)}
    return {"forbidden": kernel_calls.forbidden_calls(calls),
            "all": {k: dict(v) for k, v in sorted(calls.items())}}


if __name__ == "__main__":
    raise SystemExit(main())
