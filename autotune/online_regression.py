"""Weighted ridge least squares refit every frame from a window of recent rows.

The learned predictors fit log seconds on a few columns (a constant, the knobs' levels, the
logs of the application's per-frame numbers). Rows age: row ``i`` frames old weighs
``0.5 ** (i / half_life)``, so the fit follows a renderer whose cost drifts, and only the last
``window`` rows are kept, so a refit costs the same on frame 10 and frame 10,000.

Too few rows: the ridge term (``ridge``; the first column, the constant, is not shrunk) keeps
the normal equations solvable from the first row on; effects that the rows do not yet tell
apart shrink to zero. The residual spread needs more rows (by effective weight) than the
parameters the fit pays for (the trace of its hat matrix: fewer than the columns where the
ridge or the penalty ties some); until then it is ``prior_spread``, then an estimate that
keeps ``prior_rows`` rows' worth of the prior (a few residuals alone can say "no noise"), and
it never goes below ``spread_floor``. With no row at all there is no fit:
:meth:`OnlineRegression.predict` raises :class:`NotLearnedError`.

Prior: ``penalty`` (a symmetric positive semi-definite matrix, columns x columns) is added to
the normal equations, ``beta' P beta`` to the weighted squared error. The learned predictor
uses it to tie neighbouring rungs of a knob's cost ladder (:mod:`autotune.cost_ladder`): a rung
no frame has reached takes its neighbour's slope, so a step not taken is priced from the steps
taken. Its uncertainty (the standard error) grows with the distance from the data.

Sign: coefficients of the ``nonnegative`` columns are kept >= 0 (an active set: the most
negative one is pinned at zero and the rest refit, until none is negative). A learned cost
model needs it: in a closed loop the tuner lowers the knobs when the scene gets heavier, and an
unconstrained fit of that data can find a knob that makes frames cheaper.

Tracking: with ``track`` (frames), a prediction adds the mean residual of the latest rows,
row ``i`` frames old weighing ``0.5 ** (i / track)``: the knobs' effects are learned from the
whole window while the level follows a cost that drifts faster than ``half_life`` allows (a
camera turning), as a frame-time controller's bias correction would.
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
        penalty: np.ndarray | None = None,
        track: float | None = None,
        prior_rows: float = 0.0,
    ) -> None:
        if columns < 1:
            raise ValueError(f"columns must be >= 1, got {columns!r}")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window!r}")
        if not half_life > 0:
            raise ValueError(f"half_life must be > 0 frames, got {half_life!r}")
        if not (prior_rows >= 0 and math.isfinite(prior_rows)):
            raise ValueError(f"prior_rows must be a finite number >= 0, got {prior_rows!r}")
        if track is not None and not track > 0:
            raise ValueError(f"track must be > 0 frames or None, got {track!r}")
        if not ridge > 0:
            raise ValueError(f"ridge must be > 0, got {ridge!r}")
        self.columns = columns
        self.half_life = float(half_life)
        self.ridge = float(ridge)
        self.track = track
        self.prior_rows = float(prior_rows)
        self.prior_spread = float(prior_spread)
        self.spread_floor = float(spread_floor)
        self.nonnegative = sorted(set(nonnegative))
        if any(not 0 <= j < columns for j in self.nonnegative):
            raise ValueError(f"nonnegative columns must be in 0..{columns - 1}, "
                             f"got {nonnegative!r}")
        self.penalty = np.zeros((columns, columns)) if penalty is None else np.array(
            penalty, dtype=float)
        if self.penalty.shape != (columns, columns) or not np.all(np.isfinite(self.penalty)):
            raise ValueError(f"penalty must be a finite {columns}x{columns} matrix, got "
                             f"shape {self.penalty.shape}")
        if not np.allclose(self.penalty, self.penalty.T):
            raise ValueError("penalty must be symmetric")
        self._rows: deque[tuple[np.ndarray, float]] = deque(maxlen=window)
        self._fit: tuple[np.ndarray, np.ndarray, float, float] | None = None
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

    def _solve(self) -> tuple[np.ndarray, np.ndarray, float, float]:
        """Coefficients, the inverse normal matrix, the residual spread and the recent residuals'
        mean (cached per row)."""
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
        gram = (x * w[:, None]).T @ x
        a = gram + np.diag(shrink) + self.penalty
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
        fitted = float(np.trace(inverse @ gram))  # parameters the rows pay for (< columns
        if effective > fitted + 1:  # where the ridge or the penalty ties some of them)
            squares = float(w @ residual**2 / w.sum()) * effective
            variance = ((self.prior_rows * self.prior_spread**2 + squares)
                        / (self.prior_rows + effective - fitted))
            spread = max(self.spread_floor, math.sqrt(variance))
        else:
            spread = self.prior_spread
        offset = 0.0
        if self.track is not None:
            recent = 0.5 ** (age / self.track)
            offset = float(recent @ residual / recent.sum())
        self._fit = (beta, inverse, spread, offset)
        return self._fit

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard error of the mean for each row of ``x`` (rows x columns)."""
        beta, inverse, spread, offset = self._solve()
        x = np.asarray(x, dtype=float)
        mean = x @ beta + offset
        leverage = np.einsum("ij,jk,ik->i", x, inverse, x)
        return mean, spread * np.sqrt(np.maximum(leverage, 0.0))

    def residuals(self) -> np.ndarray:
        """Each row's target less its prediction now (the tracked level included), oldest
        first: what the fit still misses of the frames it was given."""
        beta, _, _, offset = self._solve()
        x = np.array([r[0] for r in self._rows])
        return np.array([r[1] for r in self._rows]) - x @ beta - offset

    @property
    def spread(self) -> float:
        """Standard deviation of the residuals (``prior_spread`` while rows are too few)."""
        return self._solve()[2]
