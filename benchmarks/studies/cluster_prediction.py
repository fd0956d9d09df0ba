"""Predict a bigger or faster cluster (seed 000, issues 14 and 20): histograms, emulation, model.

Parts, each its own ``mpiexec`` job (``python -m mpi4py -m benchmarks.studies.cluster_prediction --worker ...``),
every rank's OpenCL device on one compute unit (``AUTOTUNE_COMPUTE_UNITS=1``):

- ``term``: 2 ranks, ``Sendrecv`` at sizes 1 KiB..16 MiB and the numba "over" blend rate:
  latency, bandwidth and blend rate of the compositing term (studies/cluster_prediction/model.py), once
  on shared memory (``shm``) and once on the "slow network" (``slow``: every message pays
  an emulated link of 2 ms + bytes / 100 MB/s, studies/cluster_prediction/emulation.py SlowLinks).
- ``real``: the ray caster renders the seed's orbit on 1..8 ranks (sub-communicators of one
  job) at each image size, on shared memory, at sample step 1 (the *current node*) and
  step 3 (the *faster node*: a third of the samples). Per frame: every rank's local render
  seconds and rank 0's frame time. These are the targets of every prediction.
- ``node``: the cheap measurement of a node on its own: one process renders each brick of a
  P-rank partition in turn (no compositing, no other rank), on the seed's orbit turned by
  NODE_PHASE of a view step (another camera path: none of the real runs' views), both steps.
  The features of every test row come from these histograms, never from the real run being
  predicted.
- ``emulate``: emulation runs (studies/cluster_prediction/emulation.py) over image size x rank count
  (1..32) x histogram (the current node's, measured in its real runs, and generated: x0.7
  and x0.5, x0.6 with --quick; perturbed) x mode (one histogram, per-frame histograms,
  per-rank mean vectors) x network, plus emulation of the faster node's node-run histograms.
  Rows are appended to the training-data file atomically as they finish; a rerun skips
  the rows already there.

Then the cluster models are trained (16+8 ReLU MLP, λ by cross-validation; with and without
the compositing term) on emulation rows of the current node only, and the experiments:

- *upgrade*: predicts the faster node's real runs (never seen: no histogram of them is made)
  from its node-run histograms;
- *faster network*: trained on slow-network emulation rows only, predicts real runs on shared
  memory by swapping the compositing term (goal on the faster node, nothing of which was
  seen; the current node's real runs, whose render times made the training histograms,
  scored apart);
- *vectors vs histograms* and *per-frame histograms*: emulation against the real runs whose
  own render times it emulates (the fidelity of emulation, seed Fig. 5; not a prediction);
- *learning curve* (seed Fig. 4b: upgrade R² against training rows) and *network sweep*
  (seed Table 1: hidden shapes x λ, validation and upgrade test scores);
- *beyond this machine*: 64..1024 ranks, on paper.

Controlled time: rank 0's frame time (frame start to the final composited image), mean over
the path. Accuracy goals use the real runs with one rank per core; runs with more ranks than
cores share cores (their render times include it, the node runs' do not) and are scored
apart as ``oversubscribed``. Emulation above that many ranks composites under
oversubscription (MPICH told to yield). Every JSON records others_share (the ``run`` block).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.results import CHECKOUT, machine_folder

RESULTS_NAME = "cluster_cpu.json"  # in results/<machine>/
RESULTS_QUICK_NAME = "cluster_quick_cpu.json"
DATA_NAME = "cluster"  # results/<machine>/cluster/: the real runs, histograms, training data
CURRENT_STEP, FASTER_STEP = 1.0, 3.0


# ------------------------------------------------------------------ inside the MPI jobs


def worker_term(out: str, repeats: int, net: str) -> None:
    """2 ranks: Sendrecv seconds per message size, blend rate; rank 0 writes ``out``."""
    from mpi4py import MPI

    from common.atomic_files import write_json
    from raytracer.volume.span_blend import kernels
    from studies.cluster_prediction.training_data import network

    comm = network(MPI.COMM_WORLD, net)
    rank = comm.Get_rank()
    if comm.Get_size() != 2:
        raise SystemExit("the term part needs exactly 2 ranks")
    points = []
    for nbytes in [1 << k for k in range(10, 25, 2)]:
        send = np.ones(nbytes // 4, np.float32)
        recv = np.empty_like(send)
        times = []
        for i in range(repeats + 1):
            comm.Barrier()
            t = time.perf_counter()
            comm.Sendrecv([send, MPI.FLOAT], 1 - rank, 5, [recv, MPI.FLOAT], 1 - rank, 5)
            if i:
                times.append(time.perf_counter() - t)
        points.append((nbytes, times))
    blend = None
    if rank == 0:
        over, _ = kernels()
        npix = 1 << 20
        rng = np.random.default_rng(0)
        a, b = (rng.random(npix * 4, dtype=np.float32) for _ in range(2))
        over(a, b)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            over(a, b)
            times.append(time.perf_counter() - t)
        blend = npix / float(np.median(times))
    comm.Barrier()
    if rank == 0:
        write_json(out, {"points": points, "blend_rate": blend})


def worker_real(plan_path: str, out: str) -> None:
    """Real runs of the plan on sub-communicators; rank 0 adds each run to ``out``."""
    from common.atomic_files import write_json
    from raytracer.mpi.faults import world
    from raytracer.volume.distributed import load_everywhere
    from studies.cluster_prediction.training_data import first_ranks, idle_barrier, run_real

    plan = json.loads(Path(plan_path).read_text())
    comm = world()
    volume, tf = load_everywhere(plan["volume"], None, comm)
    done: dict[str, Any] = {}
    if comm.Get_rank() == 0 and Path(out).exists():
        done = json.loads(Path(out).read_text())
    bar = _bar(len(plan["runs"]), "real runs") if comm.Get_rank() == 0 else None
    for ranks in sorted({r["ranks"] for r in plan["runs"]}):
        sub = first_ranks(comm, ranks)
        for run in (r for r in plan["runs"] if r["ranks"] == ranks):
            if sub is not None:
                got = run_real(sub, volume, tf, run["size"], run["size"], plan["frames"],
                               run["step"])
                if got is not None:
                    done[run["key"]] = {**run, "frames": plan["frames"],
                                        "render_seconds": got.render_seconds.tolist(),
                                        "frame_seconds": got.frame_seconds.tolist(),
                                        "composite_seconds": got.composite_seconds.tolist(),
                                        "load_avg": os.getloadavg()[0]}
                    write_json(out, done, indent=None)
            if bar is not None:
                bar.update(1)
            idle_barrier(comm)
        if sub is not None and sub is not comm:
            sub.Free()
    if bar is not None:
        bar.close()


def worker_node(plan_path: str, out: str) -> None:
    """Node runs of the plan in this one process (see run_node); writes each to ``out``."""
    from common.atomic_files import write_json
    from raytracer.mpi.faults import world
    from raytracer.volume.distributed import load_everywhere, seed_orbit
    from studies.cluster_prediction.training_data import run_node

    plan = json.loads(Path(plan_path).read_text())
    volume, tf = load_everywhere(plan["volume"], None, world())
    cams = seed_orbit(volume.radius, plan["frames"], phase=plan["phase"])
    done: dict[str, Any] = json.loads(Path(out).read_text()) if Path(out).exists() else {}
    for ranks in sorted({r["ranks"] for r in plan["runs"]}):
        runs = [r for r in plan["runs"] if r["ranks"] == ranks]
        got = run_node(volume, tf, ranks, sorted({r["size"] for r in runs}),
                       sorted({r["step"] for r in runs}), cams)
        for run in runs:
            done[run["key"]] = {**run, "frames": plan["frames"], "phase": plan["phase"],
                                "render_seconds": got[(run["step"], run["size"])].tolist(),
                                "load_avg": os.getloadavg()[0]}
        write_json(out, done, indent=None)


def worker_emulate(plan_path: str, data_path: str) -> None:
    """Emulation runs of the plan; rank 0 appends every row to ``data_path`` atomically."""
    from raytracer.mpi.faults import world
    from studies.cluster_prediction.files import read_training_data, write_training_data
    from studies.cluster_prediction.perf_histogram import PathHistogram
    from studies.cluster_prediction.training_data import EmulationConfig, run_plan

    plan = json.loads(Path(plan_path).read_text())
    comm = world()
    hists = {k: (PathHistogram.from_dict(v["hist"], f"{plan_path}: {k}"), v["source"])
             for k, v in plan["histograms"].items()}
    configs = [EmulationConfig(**c) for c in plan["configs"]]
    data = read_training_data(data_path, missing_ok=True) if comm.Get_rank() == 0 else None
    bar = _bar(len(configs), plan.get("label", "emulation")) if comm.Get_rank() == 0 else None

    def sink(row: dict[str, Any]) -> None:
        data.add(row)
        write_training_data(data_path, data)

    run_plan(comm, configs, hists, sink if data is not None else None,
             (lambda c: bar.update(1)) if bar is not None else None)
    if bar is not None:
        bar.close()


def _bar(total: int, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, file=sys.stderr, mininterval=2.0)


def worker_main(argv: list[str]) -> int:
    from raytracer.mpi.faults import install_excepthook

    install_excepthook()
    part = argv[0]
    if part == "term":
        worker_term(argv[1], int(argv[2]), argv[3])
    elif part == "real":
        worker_real(argv[1], argv[2])
    elif part == "node":
        worker_node(argv[1], argv[2])
    elif part == "emulate":
        worker_emulate(argv[1], argv[2])
    else:
        raise SystemExit(f"unknown worker part {part!r}")
    return 0



# ---------------------------------------------------------------------- the launcher


def _launch(part: str, ranks: int, args: list[str], env: dict[str, str] | None = None,
            timeout: float = 4 * 3600) -> None:
    from raytracer.mpi.launch import launch

    done = launch(["benchmarks.studies.cluster_prediction", "--worker", part, *args], ranks, timeout=timeout,
                  env=env, cwd=CHECKOUT, capture=False)
    if done.returncode:
        raise RuntimeError(f"cluster benchmark part {part!r} on {ranks} ranks failed (exit "
                           f"{done.returncode}); its ranks' messages are above")


def calibrate_term(net: str, repeats: int, work: Path) -> dict[str, Any]:
    """Latency (fastest of the repeats of the two smallest messages: on a loaded machine the
    noise only adds), bandwidth (least squares on the median times of messages of 256 KiB and
    more, the sizes compositing sends) and the blend rate, from the ``term`` part. MPICH runs
    as in the emulation jobs (yielding while it waits)."""
    from raytracer.mpi.launch import OVERSUBSCRIBED_ENV

    out = work / f"term_{net}.json"
    if not out.exists():
        _launch("term", 2, [str(out), str(repeats), net], dict(OVERSUBSCRIBED_ENV),
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
        from common.atomic_files import write_json

        with tempfile.TemporaryDirectory(prefix="autotune-cluster-plan-") as tmp:
            plan = Path(tmp) / f"{part}_plan.json"
            write_json(plan, {"volume": cfg["volume"], "frames": cfg["frames"], "runs": todo,
                              **(extra or {})})
            _launch(part, ranks or max(r["ranks"] for r in todo), [str(plan), str(out)],
                    {"AUTOTUNE_COMPUTE_UNITS": "1"})
        done = json.loads(out.read_text())
    return {r["key"]: done[r["key"]] for r in runs}


def real_runs(cfg: dict[str, Any], work: Path) -> dict[str, Any]:
    """Every real run of the plan: the ray caster on 1..8 ranks, composited (resumable)."""
    runs = [{"key": f"s{step:g}:{size}:{ranks}:f{cfg['frames']}", "step": step, "size": size,
             "ranks": ranks}
            for step in (CURRENT_STEP, FASTER_STEP) for size in cfg["sizes"]
            for ranks in cfg["real_ranks"]]
    return _measure("real", runs, cfg, work / "real_runs.json", None)


NODE_PHASE = 0.5  # node runs take the views halfway between the real runs' views: another path


def node_runs(cfg: dict[str, Any], work: Path) -> dict[str, Any]:
    """Every node run of the plan (one process renders each brick of a P-rank partition in
    turn, on another camera path than the real runs; resumable)."""
    runs = [{"key": f"node:s{step:g}:{size}:{ranks}:f{cfg['frames']}:p{NODE_PHASE:g}",
             "step": step, "size": size, "ranks": ranks}
            for step in (CURRENT_STEP, FASTER_STEP) for size in cfg["sizes"]
            for ranks in cfg["real_ranks"]]
    return _measure("node", runs, cfg, work / "node_runs.json", 1,
                    {"phase": NODE_PHASE})


def _hist(run: dict[str, Any], volume: str) -> Any:
    from studies.cluster_prediction.perf_histogram import PathHistogram

    t = np.asarray(run["render_seconds"], np.float64)
    meta = {"volume": volume, "step": run["step"], "image": f"{run['size']}x{run['size']}",
            "ranks": run["ranks"], "rank_means": t.mean(axis=0).tolist(),
            "frames": int(t.shape[0]), "threads_per_rank": 1, "run": run["key"],
            "source": "autotune bench cluster-prediction"}
    return PathHistogram.of(t, meta)


#: histogram ids: "m" the current node from its real runs (training and emulation fidelity),
#: "nc" / "nt" the current / faster node from their node runs (features of the test rows);
#: the ids and the source differ from the real-run "t" histograms of data written before
#: issue 20, so a reused data folder never serves an emulation of those
KINDS = {("real", CURRENT_STEP): ("m", "measured"),
         ("node", CURRENT_STEP): ("nc", "node-run"), ("node", FASTER_STEP): ("nt", "node-run")}


def histograms(cfg: dict[str, Any], real: dict[str, Any], node: dict[str, Any], work: Path
               ) -> tuple[dict[str, tuple[Any, str]], dict[tuple[str, int, int], str]]:
    """Measured (current node), node-run and generated histograms by id; and the id of the
    measured histogram each (size, emulated ranks) uses. The faster node's real runs make
    no histogram: nothing of them may reach a model."""
    import zlib

    from studies.cluster_prediction.files import write_histogram

    hists: dict[str, tuple[Any, str]] = {}
    folder = work / "histograms"
    folder.mkdir(exist_ok=True)
    for part, runs in (("real", real), ("node", node)):
        for run in runs.values():
            if (part, run["step"]) not in KINDS:
                continue
            kind, source = KINDS[(part, run["step"])]
            h = _hist(run, cfg["volume"])
            hists[f"{kind}{run['size']}r{run['ranks']}"] = (h, source)
            write_histogram(folder / f"{cfg['volume']}_{run['size']}px_{run['ranks']}ranks_step"
                                     f"{run['step']:g}_{part}.json", h)
    use: dict[tuple[str, int, int], str] = {}
    for size in cfg["sizes"]:
        for ranks in cfg["emu_ranks"]:
            base = max(r for r in cfg["real_ranks"] if r <= ranks)
            mid = f"m{size}r{base}"
            use[("m", size, ranks)] = mid
            for scale in cfg["scales"]:
                gid = f"g{scale:g}:{size}r{base}:{ranks}"
                rng = np.random.default_rng(zlib.crc32(gid.encode()))
                hists[gid] = (hists[mid][0].scaled(scale).perturbed(rng), "generated")
                use[(f"g{scale:g}", size, ranks)] = gid
    return hists, use


def emulation_plan(cfg: dict[str, Any], use: dict[tuple[str, int, int], str]) -> list[Any]:
    """Training rows (measured and generated histograms, shared memory and the slow network),
    vector emulation of the current node and histogram emulation of the faster node's node
    runs (emulation as a predictor)."""
    from studies.cluster_prediction.training_data import EmulationConfig

    f = cfg["frames"]
    gens = [f"g{s:g}" for s in cfg["scales"]]
    out = []
    for size in cfg["sizes"]:
        for ranks in cfg["emu_ranks"]:
            for src in ["m", *gens]:
                for mode in ("histogram", "per-frame"):
                    out.append(EmulationConfig(use[(src, size, ranks)], size, size, ranks, mode, f))
            for src in ["m", *gens[: cfg["slow_sources"] - 1]]:
                out.append(EmulationConfig(use[(src, size, ranks)], size, size, ranks,
                                           "histogram", f, "slow"))
        for ranks in cfg["real_ranks"]:
            out.append(EmulationConfig(f"m{size}r{ranks}", size, size, ranks, "vector", f))
            out.append(EmulationConfig(f"nt{size}r{ranks}", size, size, ranks, "histogram", f))
    return out


def emulate(configs: list[Any], hists: dict[str, tuple[Any, str]], data_path: Path,
            work: Path) -> Any:
    """Run the configurations not yet in the data file (one job; a rerun resumes)."""
    import dataclasses

    from common.atomic_files import write_json
    from studies.cluster_prediction.files import read_training_data

    todo = read_training_data(data_path, missing_ok=True).pending(configs)
    if todo:
        ids = {c.hist for c in todo}
        with tempfile.TemporaryDirectory(prefix="autotune-cluster-plan-") as tmp:
            plan = Path(tmp) / "emulation_plan.json"
            write_json(plan, {"label": "emulation",
                              "histograms": {i: {"hist": hists[i][0].to_dict(),
                                                 "source": hists[i][1]} for i in ids},
                              "configs": [dataclasses.asdict(c) for c in todo]}, indent=None)
            _launch("emulate", max(c.ranks for c in todo), [str(plan), str(data_path)])
    return read_training_data(data_path)


STALL_CV = 0.3  # frame-time std / mean above this: a stall (a numba kernel loading on its
# first call, 1-3 s, before warm_blend; or the shared machine) more likely than the draws


def remeasure_stalls(configs: list[Any], hists: dict[str, tuple[Any, str]], data_path: Path,
                     work: Path) -> tuple[Any, list[str]]:
    """Rows of the plan whose frame times suggest a stall (std > STALL_CV x mean) are dropped
    and measured again, once; a row that still has that spread is kept as measured."""
    from studies.cluster_prediction.files import read_training_data, write_training_data

    data = read_training_data(data_path)
    keys = {c.key for c in configs}
    stalled = [r["key"] for r in data.rows if r["key"] in keys and not r.get("remeasured")
               and r.get("frame_seconds_std", 0.0) > STALL_CV * r["frame_seconds"]]
    if stalled:
        data.rows = [r for r in data.rows if r["key"] not in stalled]
        write_training_data(data_path, data)
        data = emulate(configs, hists, data_path, work)
        for r in data.rows:  # kept as measured if it stalls again: then it is no accident
            if r["key"] in stalled:
                r["remeasured"] = True
        write_training_data(data_path, data)
    again = [r["key"] for r in data.rows if r.get("remeasured")
             and r.get("frame_seconds_std", 0.0) > STALL_CV * r["frame_seconds"]]
    return data, again


# ------------------------------------------------------------------ models, experiments


def _term(d: dict[str, Any]) -> Any:
    from studies.cluster_prediction.model import CompositingTerm

    return CompositingTerm(d["latency"], d["bandwidth"], d["blend_rate"])


def train(rows: list[dict[str, Any]], term: Any, spread: bool = False, seed: int = 0,
          baseline: str = "term", hidden: tuple[int, ...] = (16, 8),
          lambdas: tuple[float, ...] = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)) -> Any:
    """The cluster MLP on ``rows`` (the average of ``studies.cluster_prediction.model.MEMBERS`` nets from
    random starts ``seed``, ``seed`` + 1, ...; λ by cross-validation over ``lambdas``)."""
    from studies.cluster_prediction.model import fit_cluster_model
    from studies.cluster_prediction.training_data import training_arrays

    x, y, px, rk = training_arrays(rows, spread)
    model = fit_cluster_model(x, y, px, rk, term=term, hidden=hidden, seed=seed,
                              baseline=baseline, lambdas=lambdas)
    model.meta.update({"spread_features": spread, "trained_on": len(rows),
                       "ranks": [int(rk.min()), int(rk.max())],
                       "image_pixels": [int(px.min()), int(px.max())]})
    return model


def predict_rows(model: Any, rows: list[dict[str, Any]], term: Any = None) -> np.ndarray:
    from studies.cluster_prediction.training_data import training_arrays

    x, _, px, rk = training_arrays(rows, bool(model.meta.get("spread_features")))
    return model.predict(x, px, rk, term=term)


def analytic(rows: list[dict[str, Any]], term: Any) -> np.ndarray:
    """No network: E[max of P draws] from the histogram + the compositing term."""
    from studies.cluster_prediction.perf_histogram import PerfHistogram

    out = []
    for r in rows:
        f = r["features"]
        h = PerfHistogram(f[0], f[1], f[2], tuple(f[3:]), 1)
        out.append(h.expected_max(r["ranks"]) + float(term.seconds(r["width"] * r["height"],
                                                                   r["ranks"])))
    return np.array(out)


class LeakError(ValueError):
    """A test row's features would come from the run it is to predict."""


def held_out_row(run: dict[str, Any], hist: Any) -> dict[str, Any]:
    """A real run as a row the models can read: its target is the run's mean frame time, its
    features those of ``hist``, which must come from another run (a node run)."""
    if hist.meta.get("run") == run["key"]:
        raise LeakError(f"the features of {run['key']} come from that run itself")
    return {"width": run["size"], "height": run["size"], "ranks": run["ranks"],
            "frame_seconds": float(np.mean(run["frame_seconds"])),
            "features": hist.overall.features().tolist(), "spread": hist.frame_spread().tolist(),
            "target_run": run["key"], "feature_run": hist.meta.get("run")}


def held_out_rows(real: dict[str, Any], hists: dict[str, Any], step: float, kind: str
              ) -> list[dict[str, Any]]:
    """Test rows of the real runs at ``step``, features from histogram ``kind`` (a node run of
    the same size and rank count)."""
    runs = sorted((r for r in real.values() if r["step"] == step),
                  key=lambda r: (r["size"], r["ranks"]))
    return [held_out_row(r, hists[f"{kind}{r['size']}r{r['ranks']}"][0]) for r in runs]


def by_cores(rows: list[dict[str, Any]], cores: int) -> dict[str, np.ndarray]:
    """Row indices of the one-rank-per-core rows (the accuracy goals) and the oversubscribed."""
    rk = np.array([r["ranks"] for r in rows])
    return {"one_rank_per_core": np.flatnonzero(rk <= cores),
            "oversubscribed": np.flatnonzero(rk > cores)}


def scores(pred: np.ndarray, meas: np.ndarray) -> dict[str, float]:
    from studies.cluster_prediction.model import regression_scores

    s = regression_scores(pred, meas)
    s["mean_signed_rel_error"] = float(np.mean((np.asarray(pred) - meas) / meas))
    s["n"] = int(len(meas))
    return s


def split_scores(preds: dict[str, np.ndarray], meas: np.ndarray, rows: list[dict[str, Any]],
                 cores: int) -> dict[str, dict[str, Any]]:
    """Scores of every prediction on the one-rank-per-core rows and on the oversubscribed."""
    return {part: {k: scores(v[idx], meas[idx]) for k, v in preds.items()}
            for part, idx in by_cores(rows, cores).items() if len(idx) >= 2}


def row_table(rows: list[dict[str, Any]], meas: np.ndarray, preds: dict[str, np.ndarray]
              ) -> list[dict[str, Any]]:
    """Each test row in ms: the run predicted, the run its features came from, the features'
    mean render time, the measured frame time and every prediction."""
    return [{"target_run": r["target_run"], "feature_run": r["feature_run"],
             "feature_mean_render_ms": 1e3 * r["features"][1], "measured_ms": 1e3 * float(m),
             **{k: 1e3 * float(v[i]) for k, v in preds.items()}}
            for i, (r, m) in enumerate(zip(rows, meas, strict=True))]


def train_models(cfg: dict[str, Any], data: Any, shm: Any, slow: Any
                 ) -> tuple[dict[str, Any], dict[str, Any], list]:
    """Every variant of the cluster MLP, the training figures, and the shared-memory
    histogram rows (the learning curve and the sweep retrain on them)."""
    f = cfg["frames"]
    train_src = {"measured", "generated"}
    rows = data.select(network="shm", mode="histogram", frames=f,
                       source=lambda s: s in train_src)
    pf_rows = data.select(network="shm", mode="per-frame", frames=f,
                          source=lambda s: s in train_src)
    slow_rows = data.select(network="slow", mode="histogram", frames=f,
                            source=lambda s: s in train_src)
    t0 = time.perf_counter()
    models = {"nn_term": train(rows, shm), "nn_no_term": train(rows, None),
              "nn_analytic": train(rows, shm, baseline="expected_max"),
              "nn_term_per_frame": train(pf_rows, shm, spread=True),
              "nn_analytic_per_frame": train(pf_rows, shm, spread=True,
                                             baseline="expected_max"),
              "slow_nn_term": train(slow_rows, slow), "slow_nn_no_term": train(slow_rows, None),
              "slow_nn_analytic": train(slow_rows, slow, baseline="expected_max")}
    training = {
        "rows": {"histogram": len(rows), "per_frame": len(pf_rows), "slow_network": len(slow_rows)},
        "lambda": {k: m.lam for k, m in models.items()},
        "validation_mse": {k: m.meta["validation_mse"] for k, m in models.items()},
        "unconverged_fits": {k: m.meta["unconverged_fits"] for k, m in models.items()},
        "seconds": time.perf_counter() - t0}
    return models, training, rows


def upgrade_experiment(cfg: dict[str, Any], real: dict[str, Any], hists: dict[str, Any],
                       data: Any, models: dict[str, Any], shm: Any, cores: int
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Trained on the current node only; predicts the faster node's real runs from the
    histograms of its node runs (another camera path, one process, no compositing)."""
    rows = held_out_rows(real, hists, FASTER_STEP, "nt")
    meas = np.array([r["frame_seconds"] for r in rows])
    preds = {k: predict_rows(models[k], rows)
             for k in ("nn_term", "nn_no_term", "nn_analytic", "nn_term_per_frame",
                       "nn_analytic_per_frame")}
    preds["analytic_term"] = analytic(rows, shm)
    emu = {r["hist"]: r["frame_seconds"] for r in data.select(
        source="node-run", mode="histogram", frames=cfg["frames"], network="shm")}
    preds["emulation_of_node_run_histograms"] = np.array(
        [emu.get(f"nt{r['width']}r{r['ranks']}", np.nan) for r in rows])
    speed = np.mean([hists[f"nt{r['width']}r{r['ranks']}"][0].overall.mean
                     / hists[f"nc{r['width']}r{r['ranks']}"][0].overall.mean for r in rows])
    figures = {"what": f"trained on emulation rows from current-node histograms (step "
                       f"{CURRENT_STEP:g}, 1 compute unit per rank) and generated ones; tested "
                       f"on real runs of the faster node (step {FASTER_STEP:g}, never seen in "
                       "training), each row's features from a node run of the faster node (one "
                       "process renders each brick in turn, on the seed's orbit turned by "
                       f"{NODE_PHASE:g} of a view step), whose mean local "
                       f"render time is {speed:.2f}x the current node's node runs",
               "scores": split_scores(preds, meas, rows, cores),
               "rows": row_table(rows, meas, preds)}
    return figures, {"rows": rows, "measured": meas, "preds": preds}


def emulation_vs_real(cfg: dict[str, Any], real: dict[str, Any], data: Any, cores: int
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Vectors vs histograms vs per-frame histograms: emulation against the real runs whose
    render times it emulates (a test of emulation, not a prediction)."""
    f = cfg["frames"]
    emu_by = {(r["hist"], r["mode"]): r["frame_seconds"] for r in data.rows
              if r["network"] == "shm" and r["frames"] == f}
    comp: dict[str, Any] = {}
    fig5: dict[str, Any] = {}
    runs = [r for r in real.values() if r["step"] == CURRENT_STEP]
    for mode in ("vector", "histogram", "per-frame"):
        pairs = [(emu_by[(f"m{r['size']}r{r['ranks']}", mode)], float(np.mean(r["frame_seconds"])),
                  r) for r in runs if (f"m{r['size']}r{r['ranks']}", mode) in emu_by]
        if pairs:
            fig5[mode] = pairs
            for part, idx in by_cores([p[2] for p in pairs], cores).items():
                if len(idx):
                    comp.setdefault(part, {})[mode] = scores(
                        np.array([pairs[i][0] for i in idx]), np.array([pairs[i][1] for i in idx]))
    figures = {"what": "mean frame time of emulation runs (sleep + real compositing) against "
                       "the real runs of the current node whose own render times they emulate "
                       "(seed Fig. 5: the fidelity of emulation, not a prediction)",
               "scores": comp}
    return figures, fig5


def faster_network(real: dict[str, Any], hists: dict[str, Any], models: dict[str, Any],
                   shm: Any, terms: dict[str, Any], cores: int
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Trained only on slow-network emulation rows; predicts real runs on shared memory (the
    faster network) from node-run histograms, the compositing term swapped to shared memory's."""
    out: dict[str, Any] = {}
    plots: dict[str, Any] = {}
    for name, step, kind in (("faster_node", FASTER_STEP, "nt"),
                             ("current_node", CURRENT_STEP, "nc")):
        rows = held_out_rows(real, hists, step, kind)
        meas = np.array([r["frame_seconds"] for r in rows])
        preds = {
            "nn_term_swapped": predict_rows(models["slow_nn_term"], rows, term=shm),
            "nn_analytic_swapped": predict_rows(models["slow_nn_analytic"], rows, term=shm),
            "nn_term_kept_slow": predict_rows(models["slow_nn_term"], rows),
            "nn_no_term (seed)": predict_rows(models["slow_nn_no_term"], rows),
            "analytic_term": analytic(rows, shm)}
        out[name] = split_scores(preds, meas, rows, cores)
        plots[name] = {"rows": rows, "measured": meas, "preds": preds}
    figures = {
        "what": "trained only on emulation runs over the slow network (every message delayed "
                "by an emulated link of 2 ms + bytes / 100 MB/s); predicts real runs on shared "
                "memory (no emulated link: the faster network), each row's features from a node "
                "run. faster_node: the step-3 runs, nothing of which was seen in training (the "
                "goal); current_node: the step-1 runs, whose render times made the training "
                "histograms (the targets and the shared-memory network were not seen)",
        "terms": {k: {kk: v[kk] for kk in ("latency", "bandwidth", "blend_rate")}
                  for k, v in terms.items()},
        "scores": out,
        "rows": {k: row_table(v["rows"], v["measured"], v["preds"]) for k, v in plots.items()}}
    return figures, plots


LEARNING_SEEDS = 3


def learning_curve(rows: list[dict[str, Any]], up: dict[str, Any], shm: Any, cores: int
                   ) -> dict[str, Any]:
    """Seed Fig. 4b: the upgrade test (one rank per core) against the number of training rows,
    the 16+8 MLP + term retrained on random subsets (mean over LEARNING_SEEDS draws)."""
    idx = by_cores(up["rows"], cores)["one_rank_per_core"]
    test, meas = [up["rows"][i] for i in idx], up["measured"][idx]
    sizes = sorted({n for n in (8, 16, 32, 64, 128, 256) if n < len(rows)} | {len(rows)})
    curve = []
    for n in sizes:
        got = []
        for seed in range(LEARNING_SEEDS if n < len(rows) else 1):
            pick = np.random.default_rng(seed).choice(len(rows), n, replace=False)
            got.append(scores(predict_rows(train([rows[i] for i in pick], shm, seed=seed),
                                           test), meas))
        curve.append({"rows": n, "r2": float(np.mean([g["r2"] for g in got])),
                      "mse_ms2": float(np.mean([g["mse_ms2"] for g in got])),
                      "r2_each": [g["r2"] for g in got]})
    return {"what": "R² and MSE of the seed's MLP + term on the upgrade test (real runs of the "
                    "faster node, one rank per core) against training-set size",
            "analytic_term_r2 (no training)": scores(analytic(test, shm), meas)["r2"],
            "curve": curve}


SWEEP_SHAPES = ((8,), (64,), (128,), (16, 8), (128, 64), (64, 32, 16), (8, 4, 2))
SWEEP_LAMBDAS = (0.01, 0.1, 1.0, 10.0)


def network_sweep(rows: list[dict[str, Any]], up: dict[str, Any], shm: Any, cores: int
                  ) -> dict[str, Any]:
    """Seed Table 1: hidden-layer shapes x λ, each scored on validation (5-fold) and on the
    upgrade test (one rank per core); sorted by the validation score."""
    idx = by_cores(up["rows"], cores)["one_rank_per_core"]
    test, meas = [up["rows"][i] for i in idx], up["measured"][idx]
    table = []
    for shape in SWEEP_SHAPES:
        for lam in SWEEP_LAMBDAS:
            model = train(rows, shm, hidden=shape, lambdas=(lam,))
            s = scores(predict_rows(model, test), meas)
            table.append({"hidden": "+".join(map(str, shape)), "lambda": lam,
                          "validation_mse": model.meta["validation_mse"][lam],
                          "test_mse_ms2": s["mse_ms2"], "test_r2": s["r2"]})
    table.sort(key=lambda t: t["validation_mse"])
    return {"what": "seed Table 1 on this machine's training rows: validation MSE of the "
                    "standardised residual (5-fold), test on the upgrade's real runs",
            "table": table}


def experiments(cfg: dict[str, Any], real: dict[str, Any], hists: dict[str, Any],
                data: Any, terms: dict[str, Any], cores: int
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """All figures (and what the plots need)."""
    shm, slow = _term(terms["shm"]), _term(terms["slow"])
    models, training, rows = train_models(cfg, data, shm, slow)
    out: dict[str, Any] = {"training": training}
    plots: dict[str, Any] = {"models": models}
    out["upgrade"], plots["upgrade"] = upgrade_experiment(cfg, real, hists, data, models, shm,
                                                          cores)
    out["emulation_vs_real"], plots["fig5"] = emulation_vs_real(cfg, real, data, cores)
    out["faster_network"], plots["network"] = faster_network(real, hists, models, shm, terms,
                                                             cores)
    out["learning_curve"] = learning_curve(rows, plots["upgrade"], shm, cores)
    out["network_sweep"] = network_sweep(rows, plots["upgrade"], shm, cores)
    out["beyond_this_machine"] = beyond(cfg, hists, shm, models["nn_term"])
    return out, plots


IB_TERM = {"latency": 1.5e-6, "bandwidth": 12.5e9}  # assumed: HDR InfiniBand, 100 Gb/s links


def beyond(cfg: dict[str, Any], hists: dict[str, Any], shm: Any, nn: Any) -> dict[str, Any]:
    """64..1024 ranks on paper (assumptions in the 'assumptions' entry)."""
    from studies.cluster_prediction.model import CompositingTerm, features

    size = max(cfg["sizes"])
    one = hists[f"m{size}r1"][0].overall
    shape = hists[f"m{size}r{max(cfg['real_ranks'])}"][0].overall
    ib = CompositingTerm(IB_TERM["latency"], IB_TERM["bandwidth"], shm.blend_rate)
    table = []
    for image in (2048, 4096):
        for ranks in (64, 128, 256, 512, 1024):
            mean = one.mean * (image * image) / (size * size) / ranks
            h = shape.scaled(mean / shape.mean)
            render = h.expected_max(ranks)
            px = image * image
            x = features(px, ranks, h.features())
            table.append({
                "image": f"{image}x{image}", "ranks": ranks, "render_ms": 1e3 * render,
                "this_machine_term_ms": 1e3 * float(shm.seconds(px, ranks)),
                "ib_term_ms": 1e3 * float(ib.seconds(px, ranks)),
                "frame_ms_this_network": 1e3 * (render + float(shm.seconds(px, ranks))),
                "frame_ms_ib": 1e3 * (render + float(ib.seconds(px, ranks))),
                "nn_extrapolated_ms": 1e3 * float(nn.predict(x, px, ranks)[0])})
    return {"assumptions": [
        "one rank per node, each with this machine's single-thread speed on its OpenCL runtime",
        f"local render time of a rank = the 1-rank mean at {size}² scaled by pixels and by 1/P "
        "(perfect strong scaling of the bricks), with the spread (shape) of the "
        f"{max(cfg['real_ranks'])}-rank histogram",
        "ranks draw independently: render part = E[max of P draws] of that histogram",
        "compositing = the explicit term (binary-swap rounds, gather of P-1 pieces to rank 0), "
        "per-link bandwidth constant (full bisection), blend rate of one core",
        f"'ib' term: latency {IB_TERM['latency'] * 1e6:g} µs, {IB_TERM['bandwidth'] / 1e9:g} GB/s "
        "per link (assumed, not measured)",
        "nn_extrapolated: the trained network far outside its 1..32-rank training range, shown "
        "to say it is not to be trusted there"], "table": table}


# ---------------------------------------------------------------------- plots, goals


def plot(cfg: dict[str, Any], plots: dict[str, Any], folder: Path, cores: int) -> None:
    """The upgrade, emulation and faster-network figures (oversubscribed ranks shaded)."""
    from autotune_app.report import pyplot
    from common.atomic_files import save_figure

    plt = pyplot()
    sizes = cfg["sizes"]

    def panels(title: str) -> tuple[Any, Any]:
        fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 3.6), squeeze=False)
        fig.suptitle(title, fontsize=10)
        return fig, axes[0]

    up = plots["upgrade"]
    fig, axes = panels("Upgrade: trained on the current node, real runs of the faster node, "
                       "features from node runs (seed 000 Fig. 6)")
    for ax, size in zip(axes, sizes, strict=True):
        _curves(ax, up, size, {"nn_term": ("b-", "NN + term (seed + term)"),
                               "nn_analytic": ("c-", "NN on E[max] + term"),
                               "nn_term_per_frame": ("g--", "NN + term, per-frame hists"),
                               "analytic_term": ("r:", "E[max] + term"),
                               "emulation_of_node_run_histograms": ("mx", "emulation")})
        _axes(ax, f"{size}²", cores)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, folder / "cluster_upgrade.png")

    fig, axes = panels("Emulation against real runs: vectors vs histograms (seed 000 Fig. 5)")
    marks = {"vector": "rs", "histogram": "bx", "per-frame": "g+"}
    for ax, size in zip(axes, sizes, strict=True):
        for mode, pairs in plots["fig5"].items():
            sel = sorted((p for p in pairs if p[2]["size"] == size and p[2]["step"] == 1.0),
                         key=lambda p: p[2]["ranks"])
            if mode == "vector":
                ax.plot([p[2]["ranks"] for p in sel], [1e3 * p[1] for p in sel], "ko-",
                        label="real (current node)")
            ax.plot([p[2]["ranks"] for p in sel], [1e3 * p[0] for p in sel], marks[mode],
                    label=f"{mode} emulation")
        _axes(ax, f"{size}²", cores)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, folder / "cluster_emulation.png")

    net = plots["network"]["faster_node"]
    fig, axes = panels("Faster network: trained on the slow network, real runs of the faster "
                       "node on shared memory")
    for ax, size in zip(axes, sizes, strict=True):
        _curves(ax, net, size, {"nn_term_swapped": ("b-", "NN, term swapped"),
                                "nn_analytic_swapped": ("c-", "NN on E[max] + term, swapped"),
                                "analytic_term": ("r:", "E[max] + term"),
                                "nn_no_term (seed)": ("r--", "NN, no term")})
        _axes(ax, f"{size}²", cores)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, folder / "cluster_network.png")


def _curves(ax: Any, got: dict[str, Any], size: int, styles: dict[str, tuple[str, str]]
            ) -> None:
    """Real runs of one image size and the predictions named in ``styles``, over ranks."""
    idx = sorted((i for i, r in enumerate(got["rows"]) if r["width"] == size),
                 key=lambda i: got["rows"][i]["ranks"])
    rk = [got["rows"][i]["ranks"] for i in idx]
    ax.plot(rk, 1e3 * got["measured"][idx], "ko", label="real runs")
    for key, (style, label) in styles.items():
        ax.plot(rk, 1e3 * got["preds"][key][idx], style, label=label)


def _axes(ax: Any, title: str, cores: int) -> None:
    ax.set_title(title, fontsize=9)
    ax.axvspan(cores + 0.5, ax.get_xlim()[1], color="0.9", label="oversubscribed")
    ax.set_xlabel("ranks")
    ax.set_ylabel("mean frame time (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)


def goals(fig: dict[str, Any]) -> dict[str, Any]:
    """The goals block: accuracy on real runs with one rank per core, no leak."""
    up = fig["upgrade"]["scores"]["one_rank_per_core"]
    emu = fig["emulation_vs_real"]["scores"].get("one_rank_per_core", {})
    net = fig["faster_network"]["scores"]["faster_node"]["one_rank_per_core"]
    out: dict[str, Any] = {}

    def goal(name: str, value: float, text: str, met: bool, what: str) -> None:
        out[name] = {"value": value, "goal": text, "met": bool(met), "what": what}

    experiments = (
        ("upgrade", up, 0.97, "trained on the current node only, against real runs of the "
         "faster node with one rank per core, features from node runs (no leak; seed: 0.95)",
         (("nn_term", "the seed's MLP (+ compositing term)"),
          ("nn_analytic", "the MLP on E[max over ranks] + term"),
          ("analytic_term", "E[max over ranks] + term, no training"))),
        ("faster_network", net, 0.95, "trained on the slow network only, against real runs on "
         "shared memory (faster node, one rank per core, features from node runs; seed "
         "cross-cluster: 0.93)",
         (("nn_term_swapped", "the seed's MLP (+ term), term swapped"),
          ("nn_analytic_swapped", "the MLP on E[max] + term, term swapped"),
          ("analytic_term", "E[max] + shared memory's term, no training"))),
    )
    for name, scores, limit, protocol, models in experiments:
        for key, what in models:
            r2 = scores[key]["r2"]
            goal(f"{name}_r2_{key}", r2, f">= {limit}", r2 >= limit,
                 f"R² of {what}, {protocol}")
    if "histogram" in emu and "vector" in emu:
        h, v = emu["histogram"]["mean_rel_error"], emu["vector"]["mean_rel_error"]
        goal("histogram_emulation_error", h, "<= 0.10", h <= 0.10, "mean |emulated − real| / "
             "real frame time, one histogram per path, one rank per core")
        goal("histograms_beat_vectors", h, f"< {v:.4f} (vector emulation)", h < v,
             "histogram emulation closer to the real runs than per-rank mean vectors (seed Fig. 5)")
    if "per-frame" in emu and "histogram" in emu:
        h, p = emu["histogram"]["mean_rel_error"], emu["per-frame"]["mean_rel_error"]
        goal("per_frame_beats_one_histogram", p, f"< {h:.4f} (one histogram)", p < h,
             "emulation from per-frame histograms closer to the real runs")
    bs, bn = (abs(net[k]["mean_signed_rel_error"]) for k in ("nn_term_swapped",
                                                             "nn_no_term (seed)"))
    goal("faster_network_bias", bs, f"< {bn:.4f} (no term)", bs < bn, "|mean signed relative "
         "error| with the swapped term below the seed's term-less network's")
    return out


# ------------------------------------------------------------------------------ main


CONFIGS = {
    "full": {"volume": "bonsai", "sizes": [128, 256, 384], "real_ranks": [1, 2, 3, 4, 6, 8],
             "emu_ranks": [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 28, 32], "frames": 24,
             "scales": [0.7, 0.5], "slow_sources": 2, "term_repeats": 15},
    "quick": {"volume": "bonsai", "sizes": [128, 256], "real_ranks": [1, 2, 4],
              "emu_ranks": [1, 2, 4, 8], "frames": 6, "scales": [0.6],
              "slow_sources": 2, "term_repeats": 5},
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 image sizes, 1-4 real ranks, 1-8 emulated, 6 frames")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")
    parser.add_argument("--data", type=Path, help="reuse this folder's real runs, histograms "
                        "and training data (finished runs are not repeated; they were measured "
                        "on the machine that wrote them); default: measure everything afresh "
                        "into a new folder ./autotune-cluster-<date> (a temporary one with "
                        f"--quick). The committed data: results/<machine>/{DATA_NAME}")
    parser.add_argument("--save", action="store_true", help=f"also write results/<machine>/{RESULTS_NAME} and the "
                        "trained model studies/cluster_prediction/data/cluster_model.json (with --quick: only "
                        f"{RESULTS_QUICK_NAME}; the shipped model stays)")
    from autotune_app import options as opt

    opt.add_plots(parser)
    args = parser.parse_args(argv)
    from autotune_app.report import emit, plain
    from benchmarks.harness.run_record import RunRecord, stamp
    from common.atomic_files import check_output_dir, output_dir, write_json
    from studies.cluster_prediction.files import DEFAULT_MODEL, write_model

    if args.plots:
        check_output_dir(args.plots, args.force)
    cfg = CONFIGS["quick" if args.quick else "full"]
    cores = os.cpu_count() or 1
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    run = RunRecord()
    with tempfile.TemporaryDirectory(prefix="autotune-cluster-") as tmp:
        stamp_name = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        work = (args.data or (Path(tmp) if args.quick else Path(f"autotune-cluster-{stamp_name}"))
                ).resolve()  # absolute: the MPI parts run in the repository root
        data_note = (f"reused from {work} (measured where and when it was written; runs "
                     "the plan needs and the folder lacks are measured now and added)"
                     if args.data else f"measured afresh into {work}"
                     + (" (temporary)" if args.quick else ""))
        print(f"bench cluster-prediction: data {data_note}", file=sys.stderr, flush=True)
        work.mkdir(parents=True, exist_ok=True)
        terms = {net: calibrate_term(net, cfg["term_repeats"], work) for net in ("shm", "slow")}
        real = real_runs(cfg, work)
        node = node_runs(cfg, work)
        hists, use = histograms(cfg, real, node, work)
        plan = emulation_plan(cfg, use)
        emulate(plan, hists, work / "training_data.json", work)
        data, stalled = remeasure_stalls(plan, hists, work / "training_data.json", work)
        figures, plots = experiments(cfg, real, hists, data, terms, cores)
        if args.plots:
            with output_dir(args.plots, args.force) as folder:
                plot(cfg, plots, folder, cores)
    figures["goals"] = goals(figures)
    figures["data"] = data_note
    stamp(figures, run)
    figures["config"] = {**cfg, "cores": cores, "node_run_phase": NODE_PHASE}
    figures["notes"] = {
        "time": "rank 0's frame time (frame start to the final composited image), mean over the "
                f"path of {cfg['frames']} frames (seed 000's two-turn orbit), one warm-up frame",
        "machine_loaded": f"{os.cpu_count()} cores shared with other jobs: load average "
                          f"{load_before:.1f} at the start of this run, "
                          f"{os.getloadavg()[0]:.1f} at its end; "
                          + _loads([*real.values(), *node.values()], data),
        "no_leak": "a test row's features come from a node run (one process renders each "
                   "brick of the partition in turn, on the seed's orbit turned by "
                   f"{NODE_PHASE:g} of a view step: none of the real runs' views), never from the "
                   "real run it predicts; its target is that real run's mean frame time",
        "oversubscribed": f"accuracy goals use the real runs with at most one rank per core "
                          f"({cores} cores); runs with more ranks share cores (their render "
                          "times include it, the node runs' do not) and are scored apart "
                          "('oversubscribed'); emulation above that many ranks composites "
                          "under oversubscription (MPICH yields while waiting)",
        "histograms_beyond_measured_ranks": "an emulated rank count without a real run uses the "
                          "histogram of the largest measured rank count below it",
        "generated": f"measured histograms scaled by {cfg['scales']} and perturbed (±20 %)",
        "stalls": f"emulation rows whose frame times spread more than std > {STALL_CV:g} x "
                  "mean (a stall, e.g. a numba kernel loading inside a timed frame before "
                  "warm_blend existed) are measured again once; these still spread that "
                  "wide (their draws do) and are kept as measured: "
                  + (", ".join(stalled) if stalled else "none"),
        "model_variance": "the MLP figures move by a few hundredths of R² when a few training "
                          "rows are re-measured (λ choice changes; see learning_curve r2_each); "
                          "the analytic E[max] + term figures do not depend on training",
    }
    figures["machine"] = {"cpu": _cpu(), "cores": os.cpu_count(),
                          "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                          "python": platform.python_version(), "quick": bool(args.quick),
                          "wall_seconds": time.perf_counter() - started}
    emit(figures, args.json, "Cluster model: histograms, emulation, 16+8 MLP (seed 000)")
    if args.save:
        folder = machine_folder()
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / (RESULTS_QUICK_NAME if args.quick else RESULTS_NAME), plain(figures))
    if args.save and not args.quick:
        model = plots["models"]["nn_term"]
        model.meta.update({"volume": cfg["volume"], "machine": _cpu(),
                           "date": figures["machine"]["date"]})
        write_model(DEFAULT_MODEL, model)
    return 0


def _loads(runs: list[dict[str, Any]], data: Any) -> str:
    """The load averages recorded with the runs (a rerun reuses the cached runs)."""
    got = [r["load_avg"] for r in runs + data.rows if "load_avg" in r]
    total = len(runs) + len(data.rows)
    if not got:
        return ("the runs recorded no load average (measured before it was kept): "
                + str(data.meta.get("collected", "not known")))
    return (f"{len(got)} of {total} runs recorded the load average while measured: "
            f"{min(got):.1f}..{max(got):.1f}")


def _cpu() -> str:
    from benchmarks.harness.run_record import cpu_model

    return cpu_model()


if __name__ == "__main__":
    raise SystemExit(main())
