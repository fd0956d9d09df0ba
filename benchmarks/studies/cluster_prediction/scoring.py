"""Test rows made from the real runs (never their own features) and how predictions are scored."""

from __future__ import annotations

from typing import Any

import numpy as np

from studies.cluster_prediction.model import regression_scores
from studies.cluster_prediction.perf_histogram import PathHistogram


class LeakError(ValueError):
    """A test row's features would come from the run it is to predict."""


def held_out_row(run: dict[str, Any], hist: PathHistogram) -> dict[str, Any]:
    """A real run as a row the models can read: its target is the run's mean frame time, its
    features those of ``hist``, which must come from another run (a node run)."""
    if hist.meta.get("run") == run["key"]:
        raise LeakError(f"the features of {run['key']} come from that run itself")
    return {"width": run["size"], "height": run["size"], "ranks": run["ranks"],
            "frame_seconds": float(np.mean(run["frame_seconds"])),
            "real_mean_render_seconds": float(np.mean(run["render_seconds"])),
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
    """Regression scores of ``pred`` against ``meas``, the mean signed relative error, n."""
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
    mean render time beside the predicted run's own, the measured frame time and every
    prediction."""
    return [{"target_run": r["target_run"], "feature_run": r["feature_run"],
             "feature_mean_render_ms": 1e3 * r["features"][1],
             "real_mean_render_ms": 1e3 * r["real_mean_render_seconds"],
             "measured_ms": 1e3 * float(m),
             **{k: 1e3 * float(v[i]) for k, v in preds.items()}}
            for i, (r, m) in enumerate(zip(rows, meas, strict=True))]


def feature_fidelity(rows: list[dict[str, Any]], cores: int) -> dict[str, Any]:
    """How far the test rows' features are from the runs they predict, on the rows with one
    rank per core: each node run's mean render time over its real run's (the same partition
    and image on another path, one brick at a time); a model fed these features cannot be
    closer to the real runs than they are."""
    idx = by_cores(rows, cores)["one_rank_per_core"]
    ratio = np.array([rows[i]["features"][1] / rows[i]["real_mean_render_seconds"]
                      for i in idx])
    if not len(ratio):
        return {}
    worst = int(np.argmax(np.abs(ratio - 1.0)))
    return {"mean_abs_off": float(np.mean(np.abs(ratio - 1.0))),
            "worst": {"target_run": rows[idx[worst]]["target_run"],
                      "node_over_real_render": float(ratio[worst])},
            "node_over_real_render": {rows[i]["target_run"]: float(r)
                                      for i, r in zip(idx, ratio, strict=True)}}
