"""The experiments of the cluster study on this machine: upgrade, faster network, fidelity, sweeps.

The cluster study: Tkachev et al., "Prediction of Distributed Volume Visualization Performance
to Support Render Hardware Acquisition"; its figures and tables are named as it numbers them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.studies.cluster_prediction.emulation_runs import TRAINING_KIND
from benchmarks.studies.cluster_prediction.model_training import (
    analytic,
    choose_form,
    compositing_term,
    predict_rows,
    train,
    train_models,
)
from benchmarks.studies.cluster_prediction.mpi_runs import CURRENT_STEP, FASTER_STEP, NODE_PHASE
from benchmarks.studies.cluster_prediction.scoring import (
    by_cores,
    feature_fidelity,
    held_out_rows,
    row_table,
    scores,
    split_scores,
)
from studies.cluster_prediction.model import ClusterModel, CompositingTerm, features
from studies.cluster_prediction.training_data import TrainingData

LEARNING_SEEDS = 3
SWEEP_SHAPES = ((8,), (64,), (128,), (16, 8), (128, 64), (64, 32, 16), (8, 4, 2))
SWEEP_LAMBDAS = (0.01, 0.1, 1.0, 10.0)
IB_TERM = {"latency": 1.5e-6, "bandwidth": 12.5e9}  # assumed: HDR InfiniBand, 100 Gb/s links


def upgrade_experiment(cfg: dict[str, Any], real: dict[str, Any], hists: dict[str, Any],
                       data: TrainingData, models: dict[str, Any], shm: CompositingTerm,
                       cores: int) -> tuple[dict[str, Any], dict[str, Any]]:
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
    figures = {"what": f"trained on emulation rows from the current node's node-run "
                       f"histograms (step {CURRENT_STEP:g}, 1 compute unit per rank) and "
                       "generated ones; tested "
                       f"on real runs of the faster node (step {FASTER_STEP:g}, never seen in "
                       "training), each row's features from a node run of the faster node (one "
                       "process renders each brick in turn, on the cluster study's orbit turned "
                       f"by {NODE_PHASE:g} of a view step), whose mean local "
                       f"render time is {speed:.2f}x the current node's node runs",
               "scores": split_scores(preds, meas, rows, cores),
               "feature_fidelity": feature_fidelity(rows, cores),
               "rows": row_table(rows, meas, preds)}
    return figures, {"rows": rows, "measured": meas, "preds": preds}


def emulation_vs_real(cfg: dict[str, Any], real: dict[str, Any], data: TrainingData, cores: int
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
                       "(the cluster study's Fig. 5: the fidelity of emulation, not a prediction)",
               "scores": comp}
    return figures, fig5


def faster_network(real: dict[str, Any], hists: dict[str, Any], models: dict[str, Any],
                   shm: CompositingTerm, terms: dict[str, Any], cores: int
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


def learning_curve(rows: list[dict[str, Any]], up: dict[str, Any], shm: CompositingTerm,
                   cores: int) -> dict[str, Any]:
    """The cluster study's Fig. 4b: the upgrade test (one rank per core) against the number of
    training rows, the 16+8 MLP + term retrained on random subsets (mean over LEARNING_SEEDS
    draws)."""
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
    return {"what": "R² and MSE of the cluster study's MLP + term on the upgrade test (real "
                    "runs of the faster node, one rank per core) against training-set size",
            "analytic_term_r2 (no training)": scores(analytic(test, shm), meas)["r2"],
            "curve": curve}


def network_sweep(rows: list[dict[str, Any]], up: dict[str, Any], shm: CompositingTerm,
                  cores: int) -> dict[str, Any]:
    """The cluster study's Table 1: hidden-layer shapes x λ, each scored on validation (5-fold)
    and on the upgrade test (one rank per core); sorted by the validation score."""
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
    return {"what": "the cluster study's Table 1 on this machine's training rows: validation "
                    "MSE of the standardised residual (5-fold), test on the upgrade's real runs",
            "table": table}


def experiments(cfg: dict[str, Any], real: dict[str, Any], hists: dict[str, Any],
                data: TrainingData, terms: dict[str, Any], cores: int
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """All figures (and what the plots need)."""
    shm, slow = compositing_term(terms["shm"]), compositing_term(terms["slow"])
    models, training, rows = train_models(cfg, data, shm, slow)
    form = choose_form(cfg, rows, {"term": models["slow_nn_term"],
                                   "expected_max": models["slow_nn_analytic"]}, shm, cores)
    out: dict[str, Any] = {"training": training, "model_form": form}
    plots: dict[str, Any] = {"models": models, "shipped": form["model"]}
    out["upgrade"], plots["upgrade"] = upgrade_experiment(cfg, real, hists, data, models, shm,
                                                          cores)
    out["emulation_vs_real"], plots["fig5"] = emulation_vs_real(cfg, real, data, cores)
    out["faster_network"], plots["network"] = faster_network(real, hists, models, shm, terms,
                                                             cores)
    out["learning_curve"] = learning_curve(rows, plots["upgrade"], shm, cores)
    out["network_sweep"] = network_sweep(rows, plots["upgrade"], shm, cores)
    out["beyond_this_machine"] = beyond(cfg, hists, shm, models[form["model"]])
    return out, plots


def beyond(cfg: dict[str, Any], hists: dict[str, Any], shm: CompositingTerm, nn: ClusterModel
           ) -> dict[str, Any]:
    """64..1024 ranks on paper (assumptions in the 'assumptions' entry)."""
    size = max(cfg["sizes"])
    one = hists[f"{TRAINING_KIND}{size}r1"][0].overall
    shape = hists[f"{TRAINING_KIND}{size}r{max(cfg['real_ranks'])}"][0].overall
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
        "nn_extrapolated: the shipped network (model_form) far outside its 1..32-rank "
        "training range, shown to say it is not to be trusted there"], "table": table}
