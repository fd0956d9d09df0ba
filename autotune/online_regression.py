"""Weighted ridge least squares refit every frame from a window of recent rows.

The learned predictors fit log seconds on a few columns (a constant, the knobs' levels, the
logs of the application's per-frame numbers). Rows age: row ``i`` frames old weighs
``0.5 ** (i / half_life)``, so the fit follows a renderer whose cost drifts, and only the last
``window`` rows are kept, so a refit costs the same on frame 10 and frame 10,000.

Too few rows: the ridge term (``ridge``; the first column, the constant, is not shrunk) keeps
the normal equations solvable from the first row on; effects that the rows do not yet tell
apart shrink to zero. The residual spread needs more rows than columns (by effective weight);
until then it is ``prior_spread``, and it never goes below ``spread_floor``. With no row at all
there is no fit: :meth:`OnlineRegression.predict` raises :class:`NotLearnedError`.

Sign: coefficients of the ``nonnegative`` columns are kept >= 0 (an active set: the most
negative one is pinned at zero and the rest refit, until none is negative). A learned cost
model needs it: in a closed loop the tuner lowers the knobs when the scene gets heavier, and an
unconstrained fit of that data can find a knob that makes frames cheaper.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np


class NotLearnedError(RuntimeError):
    """A learned predictor was asked for a prediction before it saw any frame."""


class OnlineRegression:
    """Ridge regression of a target on ``columns`` features, refit from the recent rows."""

    def __init__(
        self,
        columns: int,
        window: int = 64,
        half_life: float = 16.0,
        ridge: float = 1e-3,
        prior_spread: float = math.log(1.25),
        spread_floor: float = 0.005,
        nonnegative: Sequence[int] = (),
    ) -> None:
        if columns < 1:
            raise ValueError(f"columns must be >= 1, got {columns!r}")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window!r}")
        if not half_life > 0:
            raise ValueError(f"half_life must be > 0 frames, got {half_life!r}")
        if not ridge > 0:
            raise ValueError(f"ridge must be > 0, got {ridge!r}")
        self.columns = columns
        self.half_life = float(half_life)
        self.ridge = float(ridge)
        self.prior_spread = float(prior_spread)
        self.spread_floor = float(spread_floor)
        self.nonnegative = sorted(set(nonnegative))
        if any(not 0 <= j < columns for j in self.nonnegative):
            raise ValueError(f"nonnegative columns must be in 0..{columns - 1}, "
                             f"got {nonnegative!r}")
        self._rows: deque[tuple[np.ndarray, float]] = deque(maxlen=window)
        self._fit: tuple[np.ndarray, np.ndarray, float] | None = None
        self.seen = 0  # rows added over the whole life, not only the window

    def add(self, x: np.ndarray, y: float) -> None:
        """Add one row; a NaN or infinite feature or target is an error, never a silent zero."""
        x = np.asarray(x, dtype=float).reshape(-1)
        if x.shape != (self.columns,):
            raise ValueError(f"a row needs {self.columns} features, got shape {x.shape}")
        if not (np.all(np.isfinite(x)) and math.isfinite(y)):
            raise ValueError(f"a row must be finite, got features {x.tolist()} and target {y!r}")
        self._rows.append((x, float(y)))
        self._fit = None
        self.seen += 1

    @property
    def rows(self) -> int:
        """Rows in the window."""
        return len(self._rows)

    def _solve(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Coefficients, the inverse normal matrix and the residual spread (cached per row)."""
        if self._fit is not None:
            return self._fit
        if not self._rows:
            raise NotLearnedError("the predictor has seen no frame yet: nothing to predict from")
        x = np.array([r[0] for r in self._rows])
        y = np.array([r[1] for r in self._rows])
        age = np.arange(len(y))[::-1]
        w = 0.5 ** (age / self.half_life)
        shrink = np.full(self.columns, self.ridge)
        shrink[0] = 1e-12 * self.ridge  # the constant is not shrunk, only kept invertible
        a = (x * w[:, None]).T @ x + np.diag(shrink)
        b = (x * w[:, None]).T @ y
        free = np.ones(self.columns, dtype=bool)
        while True:
            inverse = np.zeros((self.columns, self.columns))
            inverse[np.ix_(free, free)] = np.linalg.inv(a[np.ix_(free, free)])
            beta = inverse @ b
            negative = [j for j in self.nonnegative if free[j] and beta[j] < 0]
            if not negative:
                break
            free[min(negative, key=lambda j: beta[j])] = False
        residual = y - x @ beta
        effective = w.sum() ** 2 / (w**2).sum()
        if effective > self.columns + 1:
            variance = float(w @ residual**2 / w.sum()) * effective / (effective - self.columns)
            spread = max(self.spread_floor, math.sqrt(variance))
        else:
            spread = self.prior_spread
        self._fit = (beta, inverse, spread)
        return self._fit

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard error of the mean for each row of ``x`` (rows x columns)."""
        beta, inverse, spread = self._solve()
        x = np.asarray(x, dtype=float)
        mean = x @ beta
        leverage = np.einsum("ij,jk,ik->i", x, inverse, x)
        return mean, spread * np.sqrt(np.maximum(leverage, 0.0))

    @property
    def spread(self) -> float:
        """Standard deviation of the residuals (``prior_spread`` while rows are too few)."""
        return self._solve()[2]
