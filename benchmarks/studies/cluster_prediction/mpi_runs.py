"""The benchmark's ``mpiexec`` jobs seen from the launching process: term, real and node runs."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.results import CHECKOUT
from common.atomic_files import write_json
from raytracer.mpi.launch import OVERSUBSCRIBED_ENV, launch

CURRENT_STEP, FASTER_STEP = 1.0, 3.0
NODE_PHASE = 0.5  # node runs take the views halfway between the real runs' views: another path


def launch_part(part: str, ranks: int, args: list[str], env: dict[str, str] | None = None,
                timeout: float = 4 * 3600) -> None:
    """Run the worker ``part`` (``mpi_workers``) on ``ranks`` ranks; raise if it fails."""
    done = launch(["benchmarks.studies.cluster_prediction", "--worker", part, *args], ranks,
                  timeout=timeout, env=env, cwd=CHECKOUT, capture=False)
    if done.returncode:
        raise RuntimeError(f"cluster benchmark part {part!r} on {ranks} ranks failed (exit "
                           f"{done.returncode}); its ranks' messages are above")


def calibrate_term(net: str, repeats: int, work: Path) -> dict[str, Any]:
    """Latency (fastest of the repeats of the two smallest messages: on a loaded machine the
    noise only adds), bandwidth (least squares on the median times of messages of 256 KiB and
    more, the sizes compositing sends) and the blend rate, from the ``term`` part. MPICH runs
    as in the emulation jobs (yielding while it waits)."""
    out = work / f"term_{net}.json"
    if not out.exists():
        launch_part("term", 2, [str(out), str(repeats), net], dict(OVERSUBSCRIBED_ENV),
                    timeout=600)
    got = json.loads(out.read_text())
    nbytes = np.array([p[0] for p in got["points"]], np.float64)
    secs = np.array([np.median(p[1]) for p in got["points"]])
    lat = float(min(min(p[1]) for p in got["points"][:2]))
    big = nbytes >= 1 << 18
    inv_bw = float(np.sum(nbytes[big] * (secs[big] - lat)) / np.sum(nbytes[big] ** 2))
    return {"latency": lat, "bandwidth": 1.0 / max(inv_bw, 1e-13),
            "blend_rate": float(got["blend_rate"]), "points": got["points"]}


def _measure(part: str, runs: list[dict[str, Any]], cfg: dict[str, Any], out: Path,
             ranks: int | None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The runs of a ``real`` or ``node`` part not yet in ``out`` measured into it (one job
    on ``ranks`` ranks, default the most any run needs; a rerun resumes); every run by key."""
    done = json.loads(out.read_text()) if out.exists() else {}
    todo = [r for r in runs if r["key"] not in done]
    if todo:
        with tempfile.TemporaryDirectory(prefix="autotune-cluster-plan-") as tmp:
            plan = Path(tmp) / f"{part}_plan.json"
            write_json(plan, {"volume": cfg["volume"], "frames": cfg["frames"], "runs": todo,
                              **(extra or {})})
            launch_part(part, ranks or max(r["ranks"] for r in todo), [str(plan), str(out)],
                        {"AUTOTUNE_COMPUTE_UNITS": "1"})
        done = json.loads(out.read_text())
    return {r["key"]: done[r["key"]] for r in runs}


def real_runs(cfg: dict[str, Any], work: Path) -> dict[str, Any]:
    """Every real run of the plan: the ray caster on 1..8 ranks, composited (resumable),
    measured ``cfg["real_repeats"]`` times, each pass its own job after the last (a job's
    ranks start afresh: another draw of what stays put within a job), and kept per frame as
    the median over the passes (:func:`median_run`). Single draws of one run scattered by
    ±12 % from job to job here (s3:256:2, pinned), which an R² over a few rows reads as the
    model's error. The first pass keeps the run's own key (data measured before repeats is
    that pass); pass i after it adds ``:r<i>``."""
    plan = [{"key": f"s{step:g}:{size}:{ranks}:f{cfg['frames']}", "step": step, "size": size,
             "ranks": ranks}
            for step in (CURRENT_STEP, FASTER_STEP) for size in cfg["sizes"]
            for ranks in cfg["real_ranks"]]
    passes = [[{**run, "key": run["key"] + (f":r{i}" if i else "")} for run in plan]
              for i in range(cfg.get("real_repeats", 1))]
    measured = [_measure("real", runs, cfg, work / "real_runs.json", None) for runs in passes]
    return {run["key"]: median_run([m[runs[j]["key"]] for m, runs in zip(measured, passes,
                                                                        strict=True)])
            for j, run in enumerate(plan)}


def median_run(draws: list[dict[str, Any]]) -> dict[str, Any]:
    """One real run from its passes: each frame's render, frame and compositing seconds the
    median over the passes (per rank for the render), under the first pass's key; the
    passes' mean frame times and the highest load average recorded beside them."""
    first = draws[0]
    out = {**first, "repeats": len(draws),
           "pass_frame_ms": [1e3 * float(np.mean(d["frame_seconds"])) for d in draws]}
    for name in ("render_seconds", "frame_seconds", "composite_seconds"):
        out[name] = np.median([np.asarray(d[name], np.float64) for d in draws], axis=0).tolist()
    loads = [d["load_avg"] for d in draws if "load_avg" in d]
    if loads:
        out["load_avg"] = max(loads)
    return out


def node_runs(cfg: dict[str, Any], work: Path) -> dict[str, Any]:
    """Every node run of the plan (one process renders each brick of a P-rank partition in
    turn, on another camera path than the real runs; resumable)."""
    runs = [{"key": f"node:s{step:g}:{size}:{ranks}:f{cfg['frames']}:p{NODE_PHASE:g}",
             "step": step, "size": size, "ranks": ranks}
            for step in (CURRENT_STEP, FASTER_STEP) for size in cfg["sizes"]
            for ranks in cfg["real_ranks"]]
    return _measure("node", runs, cfg, work / "node_runs.json", 1,
                    {"phase": NODE_PHASE})
