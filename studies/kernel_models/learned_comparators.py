"""The learned comparators: LR, linear SVR and a random forest on log2 features.

The comparators of Amarís, de Camargo, Dyab, Goldman, Trystram, "A Comparison of GPU
Execution Time Prediction using Machine Learning and Analytical Modeling".

As the paper: every feature and the time are taken in log2 (a feature must be > 0), a model is
fitted on the log2 time and predicts ``2 ** prediction`` (``log2=False`` fits raw features and
seconds instead, so that a benchmark can choose between the two on validation data); SVR
with a linear kernel; the forest with 50 trees and 5 features tried per split (the paper's mtry,
all features where there are fewer; R's default would be 500 and p / 3). scikit-learn is
imported when a model is made, so importing this module stays light. A prediction is held to
the training times' range widened by its own width on each side, and the model counts the
predictions it held (``clipped``): an extrapolating fit says so instead of printing 1e241.

Metrics: accuracy is ``predicted / measured`` per sample (the paper's). The paper gives no
formula for NMSE; here it is the normalized mean squared error of Cox et al.,
``mean((predicted - measured) ** 2) / (mean(predicted) * mean(measured))``: 0 for a perfect
prediction, about 0.5 for predictions twice the measured time, scale-free.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# The paper's 13 features, in its order.
SEED_FEATURES = (
    "num_of_cores", "max_clock_rate", "bandwidth", "input_size", "total_load_gm",
    "total_store_gm", "total_load_sm", "total_store_sm", "flops_sp", "block_size",
    "grid_size", "threads", "achieved_occupancy",
)
APPROACHES = ("LR", "SVR", "RF")
MTRY = 5  # features the forest tries per split (all of them where there are fewer)
MIN_ROWS = 3  # below this no approach is fitted: too few rows is an error, not a guess


def log2_features(x: Any) -> np.ndarray:
    """log2 of a feature matrix; a feature that is NaN, infinite or <= 0 is an error."""
    x = finite_features(x)
    if np.any(x <= 0):
        raise ValueError("a feature is <= 0: log2 space needs positive numbers (add 1 to counts)")
    return np.log2(x)


def make_regressor(approach: str, seed: int = 0) -> Any:
    """An unfitted scikit-learn model for one of :data:`APPROACHES`."""
    from sklearn.ensemble import RandomForestRegressor  # lazy: scikit-learn
    from sklearn.linear_model import LinearRegression  # lazy: scikit-learn
    from sklearn.pipeline import make_pipeline  # lazy: scikit-learn
    from sklearn.preprocessing import StandardScaler  # lazy: scikit-learn
    from sklearn.svm import SVR  # lazy: scikit-learn

    if approach == "LR":
        return LinearRegression()
    if approach == "SVR":
        return make_pipeline(StandardScaler(), SVR(kernel="linear"))
    if approach == "RF":
        return RandomForestRegressor(n_estimators=50, max_features=MTRY, random_state=seed)
    raise ValueError(f"unknown approach {approach!r}; one of {APPROACHES}")


def finite_features(x: Any) -> np.ndarray:
    """A feature matrix as floats; one that is not 2-D or holds NaN or infinity is an error."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"features must be a 2-D matrix (rows x features), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("a feature is NaN or infinite")
    return x


class LogRegressor:
    """One approach fitted on log2 features and log2 seconds (raw ones with ``log2=False``);
    predicts seconds."""

    def __init__(self, approach: str, seed: int = 0, log2: bool = True) -> None:
        self.approach = approach
        self.model = make_regressor(approach, seed)
        self.log2 = log2
        self.columns: int | None = None
        self.bounds: tuple[float, float] = (-np.inf, np.inf)  # what a prediction is held to
        self.clipped = 0  # predictions the last predict() held to the bounds

    def _x(self, features: Any) -> np.ndarray:
        return log2_features(features) if self.log2 else finite_features(features)

    def fit(self, features: Any, seconds: Any) -> LogRegressor:
        """Fit on rows of features (positive ones in log2) and their measured seconds."""
        x = self._x(features)
        y = np.asarray(seconds, dtype=float).reshape(-1)
        if len(y) != len(x):
            raise ValueError(f"{len(x)} feature rows but {len(y)} times")
        if len(y) < MIN_ROWS:
            raise ValueError(f"{self.approach} needs at least {MIN_ROWS} rows, got {len(y)}")
        if not (np.all(np.isfinite(y)) and np.all(y > 0)):
            raise ValueError("measured times must be finite and > 0")
        if self.approach == "RF":
            self.model.set_params(max_features=min(MTRY, x.shape[1]))
        target = np.log2(y) if self.log2 else y
        self.model.fit(x, target)
        self.columns = x.shape[1]
        # a fit may extrapolate without limit (LR on collinear log features predicted 1e241 s
        # for a held-out size): predictions are held to the training times' range widened by
        # its own width on each side (in log2 space: 2x that span of octaves)
        width = max(float(np.ptp(target)), 1.0 if self.log2 else float(np.max(target)))
        self.bounds = (float(target.min()) - width, float(target.max()) + width)
        if not self.log2:
            self.bounds = (max(self.bounds[0], 0.0), self.bounds[1])
        return self

    def predict(self, features: Any) -> np.ndarray:
        """Predicted seconds per row."""
        if self.columns is None:
            raise ValueError(f"{self.approach} is not fitted yet")
        x = self._x(features)
        if x.shape[1] != self.columns:
            raise ValueError(f"fitted on {self.columns} features, got {x.shape[1]}")
        raw = self.model.predict(x)
        out = np.clip(raw, *self.bounds)
        self.clipped = int(np.count_nonzero(out != raw))
        return 2.0 ** out if self.log2 else out


def accuracy(predicted: Any, measured: Any) -> np.ndarray:
    """The paper's accuracy per sample: predicted / measured (1 is perfect)."""
    return np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float)


def nmse(predicted: Any, measured: Any) -> float:
    """Normalized mean squared error, ``mean((p - m)^2) / (mean(p) * mean(m))``."""
    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    if p.shape != m.shape or p.size == 0:
        raise ValueError(f"need two equal, non-empty arrays, got {p.shape} and {m.shape}")
    return float(np.mean((p - m) ** 2) / (p.mean() * m.mean()))
