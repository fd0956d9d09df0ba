"""The cluster models trained on emulation rows, the form the shipped one takes, and the two
predictions without a network."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from benchmarks.studies.cluster_prediction.emulation_runs import (
    generated_source,
    is_training_histogram,
)
from benchmarks.studies.cluster_prediction.scoring import by_cores
from common.cpu_info import this_machine
from studies.cluster_prediction.model import ClusterModel, CompositingTerm, fit_cluster_model
from studies.cluster_prediction.perf_histogram import PerfHistogram
from studies.cluster_prediction.training_data import TrainingData, training_arrays


def compositing_term(d: dict[str, Any]) -> CompositingTerm:
    """The compositing term of a calibrated network (latency, bandwidth, blend rate)."""
    return CompositingTerm(d["latency"], d["bandwidth"], d["blend_rate"])


def train(rows: list[dict[str, Any]], term: CompositingTerm | None, spread: bool = False,
          seed: int = 0, baseline: str = "term", hidden: tuple[int, ...] = (16, 8),
          lambdas: tuple[float, ...] = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0),
          scales: tuple[float, ...] = ()) -> ClusterModel:
    """The cluster MLP on ``rows`` (the average of ``studies.cluster_prediction.model.MEMBERS``
    nets from random starts ``seed``, ``seed`` + 1, ...; λ over ``lambdas``): chosen on the rows
    of the histograms generated at the smallest of ``scales`` (the fastest node the rows hold:
    the upgrade extrapolates to a faster one) where there are such rows, else by
    cross-validation."""
    x, y, px, rk = training_arrays(rows, spread)
    held = fastest_generated(rows, scales) if scales else None
    model = fit_cluster_model(x, y, px, rk, term=term, hidden=hidden, seed=seed,
                              baseline=baseline, lambdas=lambdas, held_out=held)
    model.meta.update({"spread_features": spread, "trained_on": len(rows),
                       "ranks": [int(rk.min()), int(rk.max())],
                       "image_pixels": [int(px.min()), int(px.max())]})
    return model


def fastest_generated(rows: list[dict[str, Any]], scales: tuple[float, ...]) -> np.ndarray:
    """Which rows emulate the histograms generated at the smallest of ``scales``."""
    prefix = generated_source(min(scales)) + ":"
    return np.array([r["hist"].startswith(prefix) for r in rows], bool)


def predict_rows(model: ClusterModel, rows: list[dict[str, Any]],
                 term: CompositingTerm | None = None) -> np.ndarray:
    """Frame seconds ``model`` predicts for ``rows`` (with ``term`` swapped in if given)."""
    x, _, px, rk = training_arrays(rows, bool(model.meta.get("spread_features")))
    return model.predict(x, px, rk, term=term)


def analytic(rows: list[dict[str, Any]], term: CompositingTerm) -> np.ndarray:
    """No network: E[max of P draws] from the histogram + the compositing term."""
    out = []
    for r in rows:
        f = r["features"]
        h = PerfHistogram(f[0], f[1], f[2], tuple(f[3:]), 1)
        out.append(h.expected_max(r["ranks"]) + float(term.seconds(r["width"] * r["height"],
                                                                   r["ranks"])))
    return np.array(out)


def train_models(cfg: dict[str, Any], data: TrainingData, shm: CompositingTerm,
                 slow: CompositingTerm) -> tuple[dict[str, Any], dict[str, Any], list]:
    """Every variant of the cluster MLP, the training figures, and the shared-memory
    histogram rows (the learning curve and the sweep retrain on them)."""
    f = cfg["frames"]
    rows = data.select(network="shm", mode="histogram", frames=f, hist=is_training_histogram)
    pf_rows = data.select(network="shm", mode="per-frame", frames=f, hist=is_training_histogram)
    slow_rows = data.select(network="slow", mode="histogram", frames=f,
                            hist=is_training_histogram)
    t0 = time.perf_counter()
    sc = tuple(cfg["scales"])  # λ on the fastest generated histograms' rows
    models = {"nn_term": train(rows, shm, scales=sc), "nn_no_term": train(rows, None, scales=sc),
              "nn_analytic": train(rows, shm, baseline="expected_max", scales=sc),
              "nn_term_per_frame": train(pf_rows, shm, spread=True, scales=sc),
              "nn_analytic_per_frame": train(pf_rows, shm, spread=True,
                                             baseline="expected_max", scales=sc),
              "slow_nn_term": train(slow_rows, slow, scales=sc),
              "slow_nn_no_term": train(slow_rows, None, scales=sc),
              "slow_nn_analytic": train(slow_rows, slow, baseline="expected_max", scales=sc)}
    training = {
        "rows": {"histogram": len(rows), "per_frame": len(pf_rows),
                 "slow_network": len(slow_rows)},
        "lambda": {k: m.lam for k, m in models.items()},
        "validation_mse": {k: m.meta["validation_mse"] for k, m in models.items()},
        "unconverged_fits": {k: m.meta["unconverged_fits"] for k, m in models.items()},
        "seconds": time.perf_counter() - t0}
    return models, training, rows


#: the MLP's two forms (``studies.cluster_prediction.model.BASELINES``), by the model key each
#: trains under: the study's (the net learns frame − compositing term, in ms) and the one on the
#: analytic estimate (the net learns log(frame / (E[max over ranks] + term)))
FORMS = {"term": "nn_term", "expected_max": "nn_analytic"}
#: the machines whose real runs' R² of both forms were known when :func:`choose_form`'s rule
#: was written: there its choice is not a blind test (docs/design-notes.md)
FORM_RULE_SEEN_ON = ("amd-epyc-family25-model1-2cpus", "amd-epyc-family25-model17-2cpus")


def choose_form(cfg: dict[str, Any], rows: list[dict[str, Any]], slow_models: dict[str, Any],
                shm: CompositingTerm, cores: int) -> dict[str, Any]:
    """The form the cluster model takes on this machine, chosen on emulation rows alone
    before any real run is scored, in the shapes of the two experiments:

    - *faster node*: each form trained on the shared-memory training rows but those of the
      most scaled generated histograms (x``min(cfg["scales"])``: a node that renders faster
      than any other training row), predicting them;
    - *faster network*: each form as trained on the slow network (``slow_models``, by form),
      predicting every shared-memory training row with shared memory's term swapped in.

    Scored on the predicted rows with at most one rank per core, the regime the goals' real
    runs are in (above ``cores`` ranks the emulation composites oversubscribed, which measures
    how MPI yields a shared core, not a network; see :func:`form_scores`)."""
    kept, held = faster_node_split(cfg, rows)
    faster = tuple(sorted(cfg["scales"])[1:])  # λ on the next fastest, where there is one
    node, network = {}, {}
    for baseline in FORMS:
        node[baseline] = predict_rows(train(kept, shm, baseline=baseline, scales=faster), held)
        network[baseline] = predict_rows(slow_models[baseline], rows, term=shm)
    scores = form_scores({"faster_node": (node, held), "faster_network": (network, rows)},
                         cores)
    chosen = holds_in_both(scores)
    return {"what": "the MLP's form, chosen on emulation rows before any real run is scored: "
                    "mean |predicted / emulated - 1| of each form on the most scaled generated "
                    "histograms' rows, trained without them (faster_node), and on the "
                    "shared-memory rows, trained on the slow network's with the term swapped "
                    "(faster_network), each over the predicted rows with at most one rank per "
                    f"core ({cores} cores: oversubscribed rows composite as no network does); "
                    "the form whose worse score is lower",
            "form": chosen, "model": FORMS[chosen], "scores": scores,
            "blind": this_machine() not in FORM_RULE_SEEN_ON,
            "rows": {"faster_node": {"trained": len(kept), "predicted": len(held),
                                     "scored": by_cores(held, cores)["one_rank_per_core"].size},
                     "faster_network": {"predicted": len(rows),
                                        "scored": by_cores(rows, cores)["one_rank_per_core"].size}}}


def form_scores(shapes: dict[str, tuple[dict[str, np.ndarray], list[dict[str, Any]]]],
                cores: int) -> dict[str, dict[str, float]]:
    """Per form and shape, mean |predicted / emulated − 1| over the shape's rows with at most
    ``cores`` ranks. ``shapes``: shape -> (predicted seconds by form, the rows predicted).

    Rows with more ranks than cores are left out: on the Zen 3's and the Zen 4's data, the
    E[max] form's faster-network score over all rows (52 % and 49 % off) came from them (18 %
    off at 3 ranks, 89 % at 32), while on the rows with one rank per core it scored below the
    paper's form (3.9 against 5.3 %, 3.4 against 3.9 %). Rule changed after both machines'
    real runs had been seen (docs/design-notes.md says so)."""
    out: dict[str, dict[str, float]] = {}
    for shape, (predicted, rows) in shapes.items():
        emulated = np.array([r["frame_seconds"] for r in rows])
        mine = by_cores(rows, cores)["one_rank_per_core"]
        if not mine.size:
            raise ValueError(f"form choice: no {shape} row has at most {cores} ranks")
        for form, pred in predicted.items():
            out.setdefault(form, {})[shape] = float(
                np.mean(np.abs(pred[mine] / emulated[mine] - 1)))
    return out



def faster_node_split(cfg: dict[str, Any], rows: list[dict[str, Any]]
                      ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Training rows split into those kept and those of the most scaled generated histograms
    (the fastest node the training rows hold), which the faster-node shape predicts."""
    held = fastest_generated(rows, tuple(cfg["scales"]))
    return ([r for r, h in zip(rows, held, strict=True) if not h],
            [r for r, h in zip(rows, held, strict=True) if h])


def holds_in_both(scores: dict[str, dict[str, float]]) -> str:
    """The form whose worse score (over the shapes) is the lowest."""
    return min(scores, key=lambda form: max(scores[form].values()))
