"""Predictors that learn a frame's cost from the frames the :class:`~autotune.Tuner` observes.

For a renderer with no cost model: ``Tuner(space, LearnedPredictor(space), target)``. The
predictor fits log seconds on a constant, each knob's normalized level (and its square root,
for knobs of more than two levels: cost often grows less than linearly in log space) and the
log of every number the application passes per frame (``tuner.frame(features={...})``, e.g.
its own workload counters; ``log1p``, so a counter may be 0), the knobs' effects kept >= 0.
The fit is
:class:`~autotune.online_regression.OnlineRegression`: ridge, refit every frame, recent frames
weigh more.

Safe start and exploration (:class:`LearnedPredictor`): with no frame seen it cannot predict
(calling it raises :class:`NotLearnedError`); the tuner renders the cheapest setting instead.
After that only the *explored* region is trusted: every knob at or below the highest level it
has been rendered at. A candidate may go beyond it in one knob only, by at most as many levels
as are explored (1, 2, 4, ... levels: geometric steps), and it is priced at its extrapolated
mean times ``(1 + margin) ** (levels beyond / levels explored)``: a first or a doubling step
needs the whole ``margin`` of headroom, one level past 32 explored ones 1/32 of it. Inside the
region a candidate is priced at its mean plus ``z`` standard errors, capped at the same margin.
Anything further is priced at :data:`UNEXPLORED_SECONDS`, which no target accepts; the search
then falls back to the cheapest setting, as it does when nothing fits.

:class:`HybridPredictor` starts from the user's analytical model and learns only its
residual, ``log(measured / model)``, on the same columns; it is ready from the first frame.

Bad input raises ``ValueError``: a feature that is NaN, infinite or negative, a missing or
unknown feature name, a measured time that is not a finite number > 0.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.knobs import Candidates, Knob, KnobSpace
from autotune.online_regression import NotLearnedError, OnlineRegression
from autotune.search import Predictor

__all__ = [
    "UNEXPLORED_SECONDS",
    "Confidence",
    "HybridPredictor",
    "LearnedPredictor",
    "Learner",
    "NotLearnedError",
]

UNEXPLORED_SECONDS = 1e9  # the price of a setting too far from any frame seen: never fits


@dataclass(frozen=True)
class Confidence:
    """How far to trust a learned predictor: frames seen and the spread of its residuals."""

    frames: int
    spread: float  # relative standard deviation of a frame around the prediction (0.05 = 5 %)
    ready: bool  # False until it can predict (a LearnedPredictor before its first frame)


def levels_of(knob: Knob, values: np.ndarray) -> np.ndarray:
    """Level index of every value of one knob (the nearest level), vectorized."""
    numeric = knob.values.astype(float)
    v = np.asarray(values, dtype=float).reshape(-1)
    right = np.clip(np.searchsorted(numeric, v), 1, max(1, len(numeric) - 1))
    left = right - 1
    if len(numeric) == 1:
        return np.zeros(len(v), dtype=int)
    return np.where(np.abs(numeric[right] - v) < np.abs(v - numeric[left]), right, left)


class Learner(ABC):
    """A predictor the tuner teaches: it sees each frame's features, then its measured time."""

    monotone = False  # whether the knobs' fitted effects are kept >= 0 (cost rises with level)

    def __init__(
        self,
        space: KnobSpace,
        features: Sequence[str] = (),
        z: float = 1.0,
        margin: float = 0.2,
        window: int = 64,
        half_life: float = 16.0,
    ) -> None:
        names = tuple(features)
        if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"features must be distinct non-empty names, got {features!r}")
        if not (z >= 0 and math.isfinite(z)):
            raise ValueError(f"z must be a finite number >= 0, got {z!r}")
        if not (margin >= 0 and math.isfinite(margin)):
            raise ValueError(f"margin must be a finite number >= 0, got {margin!r}")
        self.space = space
        self.features = names
        self.z = float(z)
        self.cap = math.log1p(margin)
        width = sum(2 if len(k) > 2 else 1 for k in space.knobs)
        monotone = range(1, 1 + width) if self.monotone else ()
        self.fit = OnlineRegression(1 + width + len(names), window, half_life,
                                    nonnegative=monotone)
        self._now: np.ndarray | None = None if names else np.zeros(0)

    def see(self, features: Mapping[str, Any] | None) -> None:
        """The numbers of the frame about to be chosen (None when it declares no features)."""
        given = dict(features or {})
        if set(given) != set(self.features):
            raise ValueError(
                f"features must be exactly {sorted(self.features)}, got {sorted(given)}"
            )
        values = []
        for name in self.features:
            value = given[name]
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise ValueError(f"feature {name!r} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"feature {name!r} must be finite and >= 0, got {value!r}")
            values.append(math.log1p(float(value)))
        self._now = np.array(values)

    def columns(self, candidates: Candidates) -> np.ndarray:
        """Regression columns of each candidate under the current frame's features."""
        if self._now is None:
            raise ValueError(f"no features seen for this frame; pass {list(self.features)}")
        n = len(next(iter(candidates.values())))
        cols = [np.ones(n)]
        for knob in self.space.knobs:
            level = knob.normalized(np.asarray(candidates[knob.name]).reshape(-1))
            cols.append(level)
            if len(knob) > 2:
                cols.append(np.sqrt(np.clip(level, 0.0, None)))
        cols.extend(np.full(n, f) for f in self._now)
        return np.column_stack(cols)

    def learn(self, knobs: Mapping[str, Any], seconds: float) -> None:
        """Fold in the measured time of the frame rendered with ``knobs`` and the seen features."""
        seconds = float(seconds)
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"a measured time must be finite and > 0, got {seconds!r}")
        one = {k.name: np.array([knobs[k.name]]) for k in self.space.knobs}
        self.fit.add(self.columns(one)[0], self.target(one, seconds))

    def target(self, one: Candidates, seconds: float) -> float:
        """What the regression fits for one rendered frame (log seconds here)."""
        return math.log(seconds)

    @property
    def ready(self) -> bool:
        """Whether it can predict now."""
        return True

    def confidence(self) -> Confidence:
        """Frames seen and the relative spread of the residuals."""
        if self.fit.rows == 0:
            return Confidence(0, math.expm1(self.fit.prior_spread), self.ready)
        return Confidence(self.fit.seen, math.expm1(self.fit.spread), self.ready)

    @abstractmethod
    def __call__(self, candidates: Candidates) -> np.ndarray:
        """Predicted seconds of each candidate (vectorized, like any model the tuner takes)."""


class LearnedPredictor(Learner):
    """A cost model learned from scratch, exploring the knobs step by step within the budget."""

    monotone = True  # the searches assume it; a closed loop's data alone can suggest otherwise

    def __init__(
        self,
        space: KnobSpace,
        features: Sequence[str] = (),
        z: float = 1.0,
        margin: float = 0.2,
        window: int = 64,
        half_life: float = 16.0,
    ) -> None:
        super().__init__(space, features, z, margin, window, half_life)
        self.explored = np.full(len(space.knobs), -1)  # highest level rendered, per knob

    @property
    def ready(self) -> bool:
        return self.fit.seen > 0

    def learn(self, knobs: Mapping[str, Any], seconds: float) -> None:
        """Fold the frame in and widen the explored region to the knobs it was rendered with."""
        super().learn(knobs, seconds)
        for j, knob in enumerate(self.space.knobs):
            self.explored[j] = max(self.explored[j], int(levels_of(knob, [knobs[knob.name]])[0]))

    def __call__(self, candidates: Candidates) -> np.ndarray:
        if not self.ready:
            raise NotLearnedError("LearnedPredictor has seen no frame yet: render the cheapest "
                                  "setting first (the Tuner does)")
        levels = np.column_stack(
            [levels_of(k, candidates[k.name]) for k in self.space.knobs]
        )
        step = np.maximum(1, self.explored)
        excess = np.clip((levels - self.explored) / step, 0.0, None)  # in explored spans
        unreachable = (np.count_nonzero(excess, axis=1) > 1) | np.any(excess > 1, axis=1)
        mean, error = self.fit.predict(self.columns(candidates))
        inside = mean + np.minimum(self.z * error, self.cap)
        log_seconds = np.where(excess.any(axis=1), mean + self.cap * excess.max(axis=1), inside)
        return np.where(unreachable, UNEXPLORED_SECONDS, np.exp(log_seconds))


class HybridPredictor(Learner):
    """An analytical model times a learned correction of its residual (ready from frame one)."""

    def __init__(
        self,
        model: Callable[[Candidates], Any],
        space: KnobSpace,
        features: Sequence[str] = (),
        z: float = 1.0,
        margin: float = 0.2,
        window: int = 64,
        half_life: float = 16.0,
    ) -> None:
        super().__init__(space, features, z, margin, window, half_life)
        self.model = Predictor(model)

    def target(self, one: Candidates, seconds: float) -> float:
        predicted = float(self.model(one)[0])
        if predicted <= 0:
            raise ValueError(f"the model predicted {predicted!r} s; its residual has no log")
        return math.log(seconds / predicted)

    def __call__(self, candidates: Candidates) -> np.ndarray:
        base = self.model(candidates)
        if self.fit.rows == 0:
            return base
        mean, error = self.fit.predict(self.columns(candidates))
        return base * np.exp(mean + np.minimum(self.z * error, self.cap))
