"""Cluster-level model: mean cluster frame time from image size, ranks, histogram.

The model of the cluster study (Tkachev, Frey, Müller, Bruder, Ertl: "Prediction of
Distributed Volume Visualization Performance to Support Render Hardware Acquisition", §3).
A small MLP (the paper's 16+8 ReLU with L2; λ chosen on a validation set) maps
``(image pixels, ranks, performance-histogram features)`` to the mean frame time over a path.
The model averages :data:`MEMBERS` such nets trained from different random starts: on this
project's 126 training rows one net's fit depends on its start (cross-validated MSE
0.017-0.028 over five starts), and the average of five is below the mean single net's in every
check made (two training sets x two fold splits, 2-7 % lower).

Beyond the paper, an explicit compositing term (:class:`CompositingTerm`: latency, bandwidth and
blend rate from a microbenchmark) is subtracted before learning and added back after, so the
network learns only what the render-time distribution does to the frame, and a cluster with a
faster network is predicted by changing the term's three numbers, not by retraining.

The trained networks are stored as plain weights in versioned JSON (no pickles), and evaluated
with numpy, so a model file outlives library versions.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from common.json_file import check_versioned, versioned
from studies.cluster_prediction.perf_histogram import BINS, expected_max

MODEL_KIND = "autotune-cluster-model"
MODEL_VERSION = 2  # 2: an ensemble of networks (1: one network)
BYTES_PER_PIXEL = 16  # RGBA float32
LAMBDAS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)
MEMBERS = 5  # networks averaged, each from its own random start


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


@dataclass(frozen=True)
class Network:
    """One trained MLP: a weight matrix and a bias vector per layer, ReLU between layers."""

    weights: list[NDArray]
    biases: list[NDArray]

    def __call__(self, a: NDArray) -> NDArray:
        """The network's output for standardised feature rows ``a``."""
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            a = a @ w + b
            if i < len(self.weights) - 1:
                a = np.maximum(a, 0.0)
        return a[:, 0]

    def to_dict(self) -> dict[str, Any]:
        return {"weights": [w.tolist() for w in self.weights],
                "biases": [b.tolist() for b in self.biases]}


@dataclass
class ClusterModel:
    """Standardised features -> the mean of the ensemble's MLPs -> frame − compositing term in
    ms (baseline "term"), or log(frame / (E[max] + term)) (baseline "expected_max")."""

    networks: list[Network]
    x_mean: NDArray
    x_std: NDArray
    y_mean: float
    y_std: float
    term: CompositingTerm | None
    lam: float
    meta: dict[str, Any]
    baseline: str = "term"

    def predict(self, x: ArrayLike, pixels: ArrayLike, ranks: ArrayLike,
                term: CompositingTerm | None = None) -> NDArray:
        """Mean frame seconds; ``term`` swaps in another network's compositing term."""
        a = (np.atleast_2d(np.asarray(x, np.float64)) - self.x_mean) / self.x_std
        y = np.mean([net(a) for net in self.networks], axis=0) * self.y_std + self.y_mean
        base = baseline_seconds(self.baseline, x, pixels, ranks, term or self.term)
        return base * np.exp(y) if self.baseline == "expected_max" else base + y * 1e-3

    def to_dict(self) -> dict[str, Any]:
        return versioned(MODEL_KIND, MODEL_VERSION, {
            "networks": [net.to_dict() for net in self.networks],
            "x_mean": self.x_mean.tolist(), "x_std": self.x_std.tolist(),
            "y_mean": self.y_mean, "y_std": self.y_std,
            "term": asdict(self.term) if self.term else None, "lambda": self.lam,
            "baseline": self.baseline, "meta": self.meta})

    @classmethod
    def from_dict(cls, d: Any, where: str) -> ClusterModel:
        d = check_versioned(d, MODEL_KIND, MODEL_VERSION, where, ClusterModelError,
                            "cluster model", " (retrain it)")
        try:
            model = cls([Network([np.asarray(w, np.float64) for w in net["weights"]],
                                 [np.asarray(b, np.float64) for b in net["biases"]])
                         for net in d["networks"]],
                        np.asarray(d["x_mean"], np.float64), np.asarray(d["x_std"], np.float64),
                        float(d["y_mean"]), float(d["y_std"]),
                        CompositingTerm(**d["term"]) if d.get("term") else None,
                        float(d["lambda"]), dict(d.get("meta", {})),
                        str(d.get("baseline", "term")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ClusterModelError(f"{where}: malformed cluster model ({exc})") from None
        if model.baseline not in BASELINES:
            raise ClusterModelError(f"{where}: unknown baseline {model.baseline!r}")
        if not model.networks:
            raise ClusterModelError(f"{where}: no networks")
        for net in model.networks:
            dims = [model.x_mean.size] + [w.shape[1] for w in net.weights]
            if (len(net.biases) != len(net.weights) or dims[-1] != 1
                    or any(w.shape != (dims[i], dims[i + 1]) for i, w in enumerate(net.weights))
                    or any(b.shape != (dims[i + 1],) for i, b in enumerate(net.biases))):
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


BASELINES = ("term", "expected_max")


def baseline_seconds(baseline: str, x: ArrayLike, pixels: ArrayLike, ranks: ArrayLike,
                     term: CompositingTerm | None) -> NDArray:
    """What the network does not have to learn: the compositing term ("term": the network
    learns the rest in ms), or that plus E[max of P draws] of the row's histogram
    ("expected_max": the frame if every rank drew its render time on its own and compositing
    were the term; the network learns the log of measured / this, a relative correction, so
    a 20 ms frame counts as much as a 300 ms one)."""
    if baseline not in BASELINES:
        raise ClusterModelError(f"unknown baseline {baseline!r}; choose from {BASELINES}")
    out = term.seconds(pixels, ranks) if term is not None else np.zeros(len(np.atleast_1d(ranks)))
    out = np.broadcast_to(np.asarray(out, np.float64), (np.atleast_2d(x).shape[0],)).copy()
    if baseline == "expected_max":
        rows = np.atleast_2d(np.asarray(x, np.float64))
        rk = np.broadcast_to(np.asarray(ranks, np.float64), (rows.shape[0],))
        out += np.array([expected_max(r[3] * 1e-3, r[5] * 1e-3, r[6:6 + BINS], int(p))
                         for r, p in zip(rows, rk, strict=True)])
    return out


def fit_cluster_model(x: ArrayLike, y_seconds: ArrayLike, pixels: ArrayLike, ranks: ArrayLike,
                      term: CompositingTerm | None = None, hidden: Sequence[int] = (16, 8),
                      lambdas: Sequence[float] = LAMBDAS, seed: int = 0,
                      where: str = "training data", baseline: str = "term",
                      folds: int = 5, members: int = MEMBERS,
                      held_out: ArrayLike | None = None) -> ClusterModel:
    """Train ``members`` MLPs (random starts ``seed``, ``seed`` + 1, ...) on what ``baseline``
    leaves of the frame time; choose λ by the mean MSE of their average over ``folds``
    cross-validation folds (one 80/20 split when ``folds`` < 2), or, where ``held_out`` marks
    some rows (a mask), trained on the others and scored on those (rows shaped like what the
    model must extrapolate to: random folds measure interpolation); refit on all."""
    from threadpoolctl import threadpool_limits  # lazy: only training needs it

    if members < 1:
        raise ClusterModelError(f"members must be >= 1, got {members}")
    with threadpool_limits(1):  # a 16+8 net: BLAS threads only contend (20x slower, loaded)
        return _fit(x, y_seconds, pixels, ranks, term, hidden, lambdas, seed, where, baseline,
                    folds, members, held_out)


def _fit(x: ArrayLike, y_seconds: ArrayLike, pixels: ArrayLike, ranks: ArrayLike,
         term: CompositingTerm | None, hidden: Sequence[int], lambdas: Sequence[float],
         seed: int, where: str, baseline: str, folds: int, members: int,
         held_out: ArrayLike | None) -> ClusterModel:
    from sklearn.exceptions import ConvergenceWarning  # lazy: scikit-learn, training only
    from sklearn.neural_network import MLPRegressor  # lazy: scikit-learn, training only

    x = np.asarray(x, np.float64)
    y = np.asarray(y_seconds, np.float64)
    _check_rows(x, y, where)
    base = baseline_seconds(baseline, x, pixels, ranks, term)
    if baseline == "expected_max":
        if np.any(base <= 0):
            raise ClusterModelError(f"{where}: the E[max] + term baseline needs render times > 0")
        resid_ms = np.log(y / base)  # (named for the other baseline: unitless here)
    else:
        resid_ms = (y - base) * 1e3
    x_mean, x_std = x.mean(axis=0), x.std(axis=0)
    x_std[x_std == 0] = 1.0
    y_mean, y_std = float(resid_ms.mean()), float(resid_ms.std() or 1.0)
    xs, ys = (x - x_mean) / x_std, (resid_ms - y_mean) / y_std
    order = np.random.default_rng(seed).permutation(len(y))
    held = np.zeros(len(y), bool) if held_out is None else np.asarray(held_out, bool)
    if held.shape != y.shape:
        raise ClusterModelError(f"{where}: held_out marks {held.size} rows, there are {len(y)}")
    on_held = bool(held.any() and not held.all())
    if on_held:
        splits = [(np.flatnonzero(~held), np.flatnonzero(held))]
    elif folds >= 2 and len(y) >= 2 * folds:
        parts = np.array_split(order, folds)
        splits = [(np.concatenate(parts[:i] + parts[i + 1:]), parts[i]) for i in range(folds)]
    else:
        cut = max(1, int(0.8 * len(y)))
        splits = [(order[:cut], order[cut:] if cut < len(y) else order[:1])]

    unconverged = 0  # fits whose optimizer stopped short (kept: the folds score them)

    def train(idx: NDArray, lam: float) -> list[Network]:
        nonlocal unconverged
        nets = []
        for start in range(seed, seed + members):
            net = MLPRegressor(hidden_layer_sizes=tuple(hidden), activation="relu", alpha=lam,
                               solver="lbfgs", max_iter=5000, random_state=start)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                net.fit(xs[idx], ys[idx])
            for warning in caught:
                if issubclass(warning.category, ConvergenceWarning):
                    unconverged += 1
                else:
                    warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                           warning.lineno)
            nets.append(Network([np.asarray(w) for w in net.coefs_],
                                [np.asarray(b) for b in net.intercepts_]))
        return nets

    def mean_of(nets: list[Network], idx: NDArray) -> NDArray:
        return np.mean([net(xs[idx]) for net in nets], axis=0)

    scores = {lam: float(np.mean([np.mean((mean_of(train(tr, lam), va) - ys[va]) ** 2)
                                  for tr, va in splits])) for lam in lambdas}
    best = min(scores, key=scores.get)
    return ClusterModel(train(np.arange(len(y)), best), x_mean, x_std, y_mean, y_std,
                        term, best, {"validation_mse": scores, "rows": int(len(y)),
                                     "hidden": list(hidden), "folds": len(splits),
                                     "lambda_on": "held-out rows" if on_held else "folds",
                                     "members": members, "unconverged_fits": unconverged},
                        baseline)


def regression_scores(predicted: ArrayLike, measured: ArrayLike) -> dict[str, float]:
    """MSE (ms²), RMSE (ms), R² and mean relative error of predictions."""
    p = np.asarray(predicted, np.float64) * 1e3
    m = np.asarray(measured, np.float64) * 1e3
    mse = float(np.mean((p - m) ** 2))
    ss = float(np.sum((m - m.mean()) ** 2))
    return {"mse_ms2": mse, "rmse_ms": math.sqrt(mse),
            "r2": 1.0 - mse * len(m) / ss if ss > 0 else math.nan,
            "mean_rel_error": float(np.mean(np.abs(p - m) / m))}
