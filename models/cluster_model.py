"""Cluster-level model (seed 000 §3): mean cluster frame time from image size, ranks, histogram.

A small MLP (the seed's 16+8 ReLU with L2; λ chosen on a validation set) maps
``(image pixels, ranks, performance-histogram features)`` to the mean frame time over a path.
Beyond the seed, an explicit compositing term (:class:`CompositingTerm`: latency, bandwidth and
blend rate from a microbenchmark) is subtracted before learning and added back after, so the
network learns only what the render-time distribution does to the frame, and a cluster with a
faster network is predicted by changing the term's three numbers, not by retraining.

The trained network is stored as plain weights in versioned JSON (no pickles), and evaluated
with numpy, so a model file outlives library versions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

MODEL_VERSION = 1
BYTES_PER_PIXEL = 16  # RGBA float32
LAMBDAS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


class ClusterModelError(ValueError):
    """Training data or a model file is unusable; the message names it and the problem."""


@dataclass(frozen=True)
class CompositingTerm:
    """Analytical sort-last compositing + gather time (binary-swap schedule) for P ranks.

    ``latency`` seconds per message, ``bandwidth`` bytes/s per link, ``blend_rate`` pixels/s.
    T = Σ_rounds latency + N·B·(1 − 1/P)/bandwidth (swap) + N·(1 − 1/P)/blend_rate
        + (P − 1)·latency + N·B·(1 − 1/P)/bandwidth (gather: rank 0 receives P − 1 pieces).
    """

    latency: float
    bandwidth: float
    blend_rate: float

    def __post_init__(self) -> None:
        for k, v in asdict(self).items():
            if not (math.isfinite(v) and v >= 0) or (k != "latency" and v == 0):
                raise ClusterModelError(f"compositing term: {k} must be finite and > 0, got {v}")

    def seconds(self, pixels: ArrayLike, ranks: ArrayLike) -> NDArray:
        n = np.asarray(pixels, np.float64)
        p = np.maximum(np.asarray(ranks, np.float64), 1.0)
        share = 1.0 - 1.0 / p
        rounds = np.ceil(np.log2(p))
        swap = rounds * self.latency + n * BYTES_PER_PIXEL * share / self.bandwidth
        blend = n * share / self.blend_rate
        gather = np.where(p > 1, (p - 1) * self.latency + n * BYTES_PER_PIXEL * share
                          / self.bandwidth, 0.0)
        return swap + blend + gather


def features(pixels: ArrayLike, ranks: ArrayLike, hist_features: ArrayLike) -> NDArray:
    """Feature rows: log2 pixels, ranks, log2 ranks, histogram features (times in ms)."""
    px = np.atleast_1d(np.asarray(pixels, np.float64))
    rk = np.atleast_1d(np.asarray(ranks, np.float64))
    h = np.atleast_2d(np.asarray(hist_features, np.float64)).copy()
    h[:, :3] *= 1e3
    return np.column_stack([np.log2(px), rk, np.log2(rk), h])


@dataclass
class ClusterModel:
    """Standardised features -> MLP -> (frame − compositing term) in ms."""

    weights: list[NDArray]
    biases: list[NDArray]
    x_mean: NDArray
    x_std: NDArray
    y_mean: float
    y_std: float
    term: CompositingTerm | None
    lam: float
    meta: dict[str, Any]

    def predict(self, x: ArrayLike, pixels: ArrayLike, ranks: ArrayLike,
                term: CompositingTerm | None = None) -> NDArray:
        """Mean frame seconds; ``term`` swaps in another network's compositing term."""
        a = (np.atleast_2d(np.asarray(x, np.float64)) - self.x_mean) / self.x_std
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            a = a @ w + b
            if i < len(self.weights) - 1:
                a = np.maximum(a, 0.0)
        y = (a[:, 0] * self.y_std + self.y_mean) * 1e-3
        t = term or self.term
        return y + (t.seconds(pixels, ranks) if t is not None else 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "autotune-cluster-model", "version": MODEL_VERSION,
                "weights": [w.tolist() for w in self.weights],
                "biases": [b.tolist() for b in self.biases],
                "x_mean": self.x_mean.tolist(), "x_std": self.x_std.tolist(),
                "y_mean": self.y_mean, "y_std": self.y_std,
                "term": asdict(self.term) if self.term else None, "lambda": self.lam,
                "meta": self.meta}

    @classmethod
    def from_dict(cls, d: Any, where: str) -> ClusterModel:
        if not isinstance(d, Mapping) or d.get("kind") != "autotune-cluster-model":
            raise ClusterModelError(f"{where}: not an autotune cluster model")
        if d.get("version") != MODEL_VERSION:
            raise ClusterModelError(f"{where}: model version {d.get('version')!r}; this "
                                    f"version reads {MODEL_VERSION} (retrain it)")
        try:
            model = cls([np.asarray(w, np.float64) for w in d["weights"]],
                        [np.asarray(b, np.float64) for b in d["biases"]],
                        np.asarray(d["x_mean"], np.float64), np.asarray(d["x_std"], np.float64),
                        float(d["y_mean"]), float(d["y_std"]),
                        CompositingTerm(**d["term"]) if d.get("term") else None,
                        float(d["lambda"]), dict(d.get("meta", {})))
        except (KeyError, TypeError, ValueError) as exc:
            raise ClusterModelError(f"{where}: malformed cluster model ({exc})") from None
        dims = [model.x_mean.size] + [w.shape[1] for w in model.weights]
        if any(w.shape != (dims[i], dims[i + 1]) for i, w in enumerate(model.weights)):
            raise ClusterModelError(f"{where}: layer shapes do not chain")
        return model


def _check_rows(x: NDArray, y: NDArray, where: str) -> None:
    if x.ndim != 2 or len(x) != len(y) or len(y) < 4:
        raise ClusterModelError(f"{where}: need >= 4 rows of features and targets, got "
                                f"{x.shape} and {y.shape}")
    bad = ~np.all(np.isfinite(x), axis=1) | ~np.isfinite(y)
    if bad.any():
        raise ClusterModelError(f"{where}: rows {np.flatnonzero(bad)[:5].tolist()} have "
                                f"missing or non-finite values")


def fit_cluster_model(x: ArrayLike, y_seconds: ArrayLike, pixels: ArrayLike, ranks: ArrayLike,
                      term: CompositingTerm | None = None, hidden: Sequence[int] = (16, 8),
                      lambdas: Sequence[float] = LAMBDAS, seed: int = 0,
                      where: str = "training data") -> ClusterModel:
    """Train the MLP on 80 % of the rows, choose λ by MSE on the other 20 %, refit on all."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # a 16+8 net: BLAS threads only contend (20x slower, loaded)
        return _fit(x, y_seconds, pixels, ranks, term, hidden, lambdas, seed, where)


def _fit(x: ArrayLike, y_seconds: ArrayLike, pixels: ArrayLike, ranks: ArrayLike,
         term: CompositingTerm | None, hidden: Sequence[int], lambdas: Sequence[float],
         seed: int, where: str) -> ClusterModel:
    from sklearn.neural_network import MLPRegressor

    x = np.asarray(x, np.float64)
    y = np.asarray(y_seconds, np.float64)
    _check_rows(x, y, where)
    resid_ms = (y - (term.seconds(pixels, ranks) if term else 0.0)) * 1e3
    x_mean, x_std = x.mean(axis=0), x.std(axis=0)
    x_std[x_std == 0] = 1.0
    y_mean, y_std = float(resid_ms.mean()), float(resid_ms.std() or 1.0)
    xs, ys = (x - x_mean) / x_std, (resid_ms - y_mean) / y_std
    order = np.random.default_rng(seed).permutation(len(y))
    cut = max(1, int(0.8 * len(y)))
    tr, va = order[:cut], order[cut:] if cut < len(y) else order[:1]

    def train(idx: NDArray, lam: float) -> Any:
        net = MLPRegressor(hidden_layer_sizes=tuple(hidden), activation="relu", alpha=lam,
                           solver="lbfgs", max_iter=5000, random_state=seed)
        return net.fit(xs[idx], ys[idx])

    scores = {lam: float(np.mean((train(tr, lam).predict(xs[va]) - ys[va]) ** 2))
              for lam in lambdas}
    best = min(scores, key=scores.get)
    net = train(np.arange(len(y)), best)
    return ClusterModel([np.asarray(w) for w in net.coefs_],
                        [np.asarray(b) for b in net.intercepts_], x_mean, x_std, y_mean, y_std,
                        term, best, {"validation_mse": scores, "rows": int(len(y)),
                                     "hidden": list(hidden)})


def regression_scores(predicted: ArrayLike, measured: ArrayLike) -> dict[str, float]:
    """MSE (ms²), RMSE (ms), R² and mean relative error of predictions."""
    p = np.asarray(predicted, np.float64) * 1e3
    m = np.asarray(measured, np.float64) * 1e3
    mse = float(np.mean((p - m) ** 2))
    ss = float(np.sum((m - m.mean()) ** 2))
    return {"mse_ms2": mse, "rmse_ms": math.sqrt(mse),
            "r2": 1.0 - mse * len(m) / ss if ss > 0 else math.nan,
            "mean_rel_error": float(np.mean(np.abs(p - m) / m))}
