"""Predict a bigger or faster cluster (the cluster study): histograms, emulation, model.

``main`` runs every step and prints (or saves) the figures; ``--worker PART ...`` runs one MPI
part on a rank instead (``mpi_workers``). The cluster study: Tkachev, Frey, Müller, Bruder,
Ertl, "Prediction of Distributed Volume Visualization Performance to Support Render Hardware
Acquisition"; the package's docstring says what each step measures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune_app import options as opt
from autotune_app.report import emit
from benchmarks.harness.results import machine_folder, save_result
from benchmarks.harness.run_record import (
    RunRecord,
    cpu_model,
    mark_limits,
    quick_run,
    stamp,
    variant_name,
)
from benchmarks.studies.cluster_prediction.emulation_runs import (
    STALL_CV,
    emulate,
    emulation_plan,
    histograms,
    remeasure_stalls,
)
from benchmarks.studies.cluster_prediction.experiments import experiments
from benchmarks.studies.cluster_prediction.goals import diagnostics, goals
from benchmarks.studies.cluster_prediction.limits import goal_limits
from benchmarks.studies.cluster_prediction.mpi_runs import (
    NODE_PHASE,
    calibrate_term,
    node_runs,
    real_runs,
)
from benchmarks.studies.cluster_prediction.mpi_workers import worker_main
from benchmarks.studies.cluster_prediction.plots import plot
from common.atomic_files import check_output_dir, output_dir
from studies.cluster_prediction.files import write_model
from studies.cluster_prediction.training_data import TrainingData

RESULTS_NAME = variant_name("cluster", {}, "cpu")  # in results/<machine>/
RESULTS_QUICK_NAME = variant_name("cluster", quick_run(True), "cpu")
DATA_NAME = "cluster"  # results/<machine>/cluster/: the real runs, histograms, training data
MODEL_NAME = "cluster_model.json"  # results/<machine>/cluster/: the model a full run trained
CONFIGS = {
    "full": {"volume": "bonsai", "sizes": [128, 256, 384], "real_ranks": [1, 2, 3, 4, 6, 8],
             "emu_ranks": [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 28, 32], "frames": 24,
             "scales": [0.7, 0.5], "slow_sources": 2, "term_repeats": 15, "real_repeats": 3},
    "quick": {"volume": "bonsai", "sizes": [128, 256], "real_ranks": [1, 2, 4],
              "emu_ranks": [1, 2, 4, 8], "frames": 6, "scales": [0.6],
              "slow_sources": 2, "term_repeats": 5, "real_repeats": 1},
}


@dataclass
class Measured:
    """What the steps made: the figures, what the plots need, the runs and the training rows."""

    figures: dict[str, Any]
    plots: dict[str, Any]
    runs: list[dict[str, Any]]  # every real and node run
    data: TrainingData
    stalled: list[str]  # emulation rows that spread as a stall would, twice


def parser() -> argparse.ArgumentParser:
    """The benchmark's options."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="2 image sizes, 1-4 real ranks, 1-8 emulated, 6 frames")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.add_argument("--data", type=Path, help="reuse this folder's real runs, histograms "
                   "and training data (finished runs are not repeated; they were measured "
                   "on the machine that wrote them); default: measure everything afresh "
                   "into a new folder ./autotune-cluster-<date> (a temporary one with "
                   f"--quick). The committed data: results/<machine>/{DATA_NAME}")
    p.add_argument("--save", action="store_true",
                   help=f"also write results/<machine>/{RESULTS_NAME} and the trained model "
                   f"results/<machine>/{DATA_NAME}/{MODEL_NAME} (with --quick: only "
                   f"{RESULTS_QUICK_NAME}); the shipped model is never replaced")
    opt.add_plots(p)
    return p


def data_folder(data: Path | None, quick: bool, tmp: Path) -> tuple[Path, str]:
    """The data folder (absolute: the MPI parts run in the repository root) and a note on
    where its runs come from."""
    stamp_name = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = (data or (tmp if quick else Path(f"autotune-cluster-{stamp_name}"))).resolve()
    note = (f"reused from {work} (measured where and when it was written; runs "
            "the plan needs and the folder lacks are measured now and added)"
            if data else f"measured afresh into {work}" + (" (temporary)" if quick else ""))
    return work, note


def run_steps(cfg: dict[str, Any], work: Path, cores: int) -> Measured:
    """Every step on the data folder ``work`` (what it holds is reused): the compositing
    terms, the real and node runs, histograms, emulation, then the experiments."""
    terms = {net: calibrate_term(net, cfg["term_repeats"], work) for net in ("shm", "slow")}
    real = real_runs(cfg, work)
    node = node_runs(cfg, work)
    hists, use = histograms(cfg, real, node, work)
    plan = emulation_plan(cfg, use)
    emulate(plan, hists, work / "training_data.json")
    data, stalled = remeasure_stalls(plan, hists, work / "training_data.json")
    figures, plots = experiments(cfg, real, hists, data, terms, cores)
    return Measured(figures, plots, [*real.values(), *node.values()], data, stalled)


def notes(cfg: dict[str, Any], cores: int, load_before: float, got: Measured
          ) -> dict[str, str]:
    """The notes block: what was timed, how loaded the machine was, the protocol."""
    return {
        "time": "rank 0's frame time (frame start to the final composited image), mean over the "
                f"path of {cfg['frames']} frames (the cluster study's two-turn orbit), one "
                "warm-up frame",
        "machine_loaded": f"{os.cpu_count()} cores shared with other jobs: load average "
                          f"{load_before:.1f} at the start of this run, "
                          f"{os.getloadavg()[0]:.1f} at its end; "
                          + _loads(got.runs, got.data),
        "no_leak": "a test row's features come from a node run (one process renders each "
                   "brick of the partition in turn, on the cluster study's orbit turned by "
                   f"{NODE_PHASE:g} of a view step: none of the real runs' views), never from the "
                   "real run it predicts; its target is that real run's mean frame time, each "
                   f"frame the median of {cfg['real_repeats']} passes, each pass its own job "
                   "with its ranks pinned one per core as the product pins them",
        "oversubscribed": f"accuracy goals use the real runs with at most one rank per core "
                          f"({cores} cores); runs with more ranks share cores (their render "
                          "times include it, the node runs' do not) and are scored apart "
                          "('oversubscribed'); emulation above that many ranks composites "
                          "under oversubscription (MPICH yields while waiting)",
        "histograms_beyond_measured_ranks": "an emulated rank count without a node run "
                          "uses the histogram of the largest measured rank count below it",
        "generated": f"the current node's node-run histograms scaled by {cfg['scales']} and "
                     "perturbed (±20 %)",
        "stalls": f"emulation rows whose frame times spread more than std > {STALL_CV:g} x "
                  "mean (a stall, e.g. a numba kernel loading inside a timed frame before "
                  "warm_blend existed) are measured again once; these still spread that "
                  "wide (their draws do) and are kept as measured: "
                  + (", ".join(got.stalled) if got.stalled else "none"),
        "model_variance": "the MLP figures move by a few hundredths of R² when a few training "
                          "rows are re-measured (λ choice changes; see learning_curve r2_each); "
                          "the analytic E[max] + term figures do not depend on training",
    }


def save(figures: dict[str, Any], plots: dict[str, Any], quick: bool) -> None:
    """The figures into results/<machine>/; after a full run also the trained model (in the
    form the run chose: ``model_form``), as
    results/<machine>/cluster/cluster_model.json (``autotune predict --model`` reads it): a
    run on one machine never replaces the model shipped from another. The model's meta is
    made before anything is written, so that a run never leaves the figures without it."""
    model = None
    if not quick:
        model = plots["models"][plots["shipped"]]
        model.meta.update(model_meta(figures))
    save_result(RESULTS_QUICK_NAME if quick else RESULTS_NAME, figures)
    if model is not None:
        folder = machine_folder() / DATA_NAME
        folder.mkdir(parents=True, exist_ok=True)
        write_model(folder / MODEL_NAME, model)


def model_meta(figures: dict[str, Any]) -> dict[str, Any]:
    """What a saved model says of its training: the volume, the machine and its cores (above
    that many ranks its emulation rows shared cores: ``autotune predict`` says so), the form,
    the date."""
    config, machine = figures["config"], figures["machine"]
    return {"volume": config["volume"], "machine": machine["cpu"],
            "form": figures["model_form"]["form"], "cores": config["cores"],
            "date": machine["date"]}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures (``--worker PART ...``: one MPI part)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    args = parser().parse_args(argv)
    if args.plots:
        check_output_dir(args.plots, args.force)
    cfg = CONFIGS["quick" if args.quick else "full"]
    cores = os.cpu_count() or 1
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    run = RunRecord()
    with tempfile.TemporaryDirectory(prefix="autotune-cluster-") as tmp:
        work, data_note = data_folder(args.data, args.quick, Path(tmp))
        print(f"bench cluster-prediction: data {data_note}", file=sys.stderr, flush=True)
        work.mkdir(parents=True, exist_ok=True)
        got = run_steps(cfg, work, cores)
        if args.plots:
            with output_dir(args.plots, args.force) as folder:
                plot(cfg, got.plots, folder, cores)
    figures = got.figures
    figures["goals"] = goals(figures, quick=args.quick)
    figures["diagnostics"] = diagnostics(figures, quick=args.quick)
    mark_limits(figures["goals"], goal_limits(figures))
    figures["data"] = data_note
    stamp(figures, run, quick_run(args.quick))
    figures["config"] = {**cfg, "cores": cores, "node_run_phase": NODE_PHASE}
    figures["notes"] = notes(cfg, cores, load_before, got)
    figures["machine"] = {"cpu": cpu_model(), "cores": os.cpu_count(),
                          "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                          "python": platform.python_version(), "quick": bool(args.quick),
                          "wall_seconds": time.perf_counter() - started}
    emit(figures, args.json, "Cluster model: histograms, emulation, 16+8 MLP (the cluster study)")
    if args.save:
        save(figures, got.plots, args.quick)
    return 0


def _loads(runs: list[dict[str, Any]], data: TrainingData) -> str:
    """The load averages recorded with the runs (a rerun reuses the cached runs)."""
    got = [r["load_avg"] for r in runs + data.rows if "load_avg" in r]
    total = len(runs) + len(data.rows)
    if not got:
        return ("the runs recorded no load average (measured before it was kept): "
                + str(data.meta.get("collected", "not known")))
    return (f"{len(got)} of {total} runs recorded the load average while measured: "
            f"{min(got):.1f}..{max(got):.1f}")
