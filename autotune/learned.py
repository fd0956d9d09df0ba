"""Predictors that learn a frame's cost from the frames the :class:`~autotune.Tuner` observes.

For a renderer with no cost model: ``Tuner(space, LearnedPredictor(space), target)``. The
predictor fits log seconds on a constant, a *cost ladder* per knob
(:class:`~autotune.cost_ladder.CostLadder`: a rung per level, or per segment of a long knob,
each rung's cost kept >= 0 because cost grows with every knob's quality) and the log of every
number the application passes per frame (``tuner.frame(features={...})``; ``log1p``, so a
counter may be 0). The model is log-linear: lowering one knob buys its rungs for another, so
the search trades knobs. Neighbouring rungs are tied (a prior worth one frame), so a rung no
frame reached costs what the last one reached did: a step not taken is priced from the steps
taken. The fit is :class:`~autotune.online_regression.OnlineRegression`: ridge, refit every
frame, recent frames weigh more, and its level follows the residuals of the last frames
(half-life :data:`TRACK`) so that a turning camera is tracked.

Safe start and exploration (:class:`LearnedPredictor`): until it has fitted a frame it cannot
predict (:class:`NotLearnedError`) and the tuner renders the cheapest setting. A setting is
*inside* when it is at or below, in every knob, a setting rendered by a fitted frame of the
window (so it costs no more than that one did); it is one knob *past* a rendered setting when
it is at or below it in every knob but one. A knob's slope is *known* when the fitted frames
show it at two levels or more. Prices, in log seconds above the fitted mean (the tracked level
included):

* inside, or one knob past a rendered setting in a knob with a known slope (the ladder
  continues its last rungs): ``max(0, z * standard error - log(1 + margin))``, what of ``z``
  standard errors the margin does not cover; the error grows with the distance from the
  frames seen, and it is large for a rung the frames do not pin down;
* one knob past a rendered setting in a knob never varied (no slope to go on): ``margin`` for
  each span of its explored levels, at most one span (1, 2, 4, ... levels: geometric steps);
* anything else (two knobs past at once, a longer unknown step): :data:`UNEXPLORED_SECONDS`,
  which no target accepts.

Guarantees (cost rising with each knob, as the searches assume): the search renders a setting
only if its price fits the target (or, none fitting, the cheapest), so a frame overshoots the
target by more than ``margin`` only when it costs more than ``margin`` over its price. A
setting the fit prices is rendered only if its fitted mean fits the target and its fitted mean
plus ``z`` standard errors is at most ``margin`` over it: frames up to ``margin`` over the
target are the price of settling as close under it as the grid, the noise and the search's
hysteresis allow. A first step in a knob never varied is priced ``margin`` per span over the
fitted mean. A frame at a setting not inside is never held as one-off (below): a step that
turns out dearer than its price is fitted at once, so it is not priced too cheaply again while
the frame is in the window. Nothing is guaranteed of a renderer whose cost falls as a knob rises.

One-off frames do not teach (:class:`Learner`): a frame more than ``one_off`` (default 50 %)
and four spreads over its prediction, at a setting inside, is held out of the fit; the
next frame decides: if it also runs long (half the threshold) the cost is real and both are
fitted, else the held frame is dropped. A renderer's first frame (set-up) is always held: the
second frame is the cheapest setting again and keeps it only within ``one_off`` of it.
:attr:`Learner.dropped` lists the dropped frames (0 = the first frame the learner was shown).

:class:`HybridPredictor` starts from the user's analytical model and learns only its
residual, ``log(measured / model)``, on the same columns; it is ready from the first frame.

Bad input raises ``ValueError``: a feature that is NaN, infinite or negative, a missing or
unknown feature name, a measured time that is not a finite number > 0.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.cost_ladder import CostLadder
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
TRACK = 2.0  # frames: the half-life of the residuals that move the fitted level (a drift)
PRIOR_ROWS = 0.5  # frames' worth of the prior spread kept in the fitted one (few frames)


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


@dataclass(frozen=True)
class HeldFrame:
    """A frame that ran long against its prediction, kept out of the fit until the next one."""

    index: int  # the learner's frame count when it came (0: the first frame it was shown)
    levels: np.ndarray
    row: np.ndarray
    value: float  # what the regression would fit for it


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
        one_off: float = 0.5,
    ) -> None:
        names = tuple(features)
        if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"features must be distinct non-empty names, got {features!r}")
        if not (z >= 0 and math.isfinite(z)):
            raise ValueError(f"z must be a finite number >= 0, got {z!r}")
        if not (margin >= 0 and math.isfinite(margin)):
            raise ValueError(f"margin must be a finite number >= 0, got {margin!r}")
        if not (one_off > 0 and math.isfinite(one_off)):
            raise ValueError(f"one_off must be a finite number > 0, got {one_off!r}")
        self.space = space
        self.features = names
        self.z = float(z)
        self.cap = math.log1p(margin)
        self.one_off = math.log1p(one_off)
        self.ladder = CostLadder(space)
        width = self.ladder.width
        monotone = range(1, 1 + width) if self.monotone else ()
        penalty = np.zeros((1 + width + len(names),) * 2)
        penalty[1:1 + width, 1:1 + width] = self.ladder.penalty()
        self.fit = OnlineRegression(1 + width + len(names), window, half_life,
                                    nonnegative=monotone, penalty=penalty, track=TRACK,
                                    prior_rows=PRIOR_ROWS)
        self._now: np.ndarray | None = None if names else np.zeros(0)
        self.frames = 0  # frames shown to learn(), the dropped ones included
        self.dropped: list[int] = []  # which of them were one-off frames kept out of the fit
        self.held: HeldFrame | None = None
        self.recent: deque[np.ndarray] = deque(maxlen=window)  # levels of the fitted rows

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

    def levels(self, candidates: Candidates) -> np.ndarray:
        """Level index of every knob of each candidate (rows: candidates)."""
        return np.column_stack([levels_of(k, candidates[k.name]) for k in self.space.knobs])

    def columns(self, candidates: Candidates) -> np.ndarray:
        """Regression columns of each candidate under the current frame's features."""
        if self._now is None:
            raise ValueError(f"no features seen for this frame; pass {list(self.features)}")
        rungs = self.ladder.columns(self.levels(candidates))
        n = len(rungs)
        return np.column_stack([np.ones(n), rungs, *(np.full(n, f) for f in self._now)])

    def learn(self, knobs: Mapping[str, Any], seconds: float) -> None:
        """Fold in the measured time of the frame rendered with ``knobs``; a frame that ran long
        against its prediction waits for the next one, which keeps it or drops it."""
        seconds = float(seconds)
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"a measured time must be finite and > 0, got {seconds!r}")
        one = {k.name: np.array([knobs[k.name]]) for k in self.space.knobs}
        levels, row = self.levels(one)[0], self.columns(one)[0]
        value, index = self.target(one, seconds), self.frames
        self.frames += 1
        held, self.held = self.held, None
        if held is not None:
            if self.lasts(held, row, value):
                self.add(held.levels, held.row, held.value)
            else:
                self.dropped.append(held.index)
        else:
            if self.excess(levels, row, value) is not None:
                self.held = HeldFrame(index, levels, row, value)
                return
        self.add(levels, row, value)

    def add(self, levels: np.ndarray, row: np.ndarray, value: float) -> None:
        """One frame into the fit."""
        self.fit.add(row, value)
        self.recent.append(levels)

    def excess(self, levels: np.ndarray, row: np.ndarray, value: float) -> float | None:
        """How far (log) a frame ran over its prediction if it is to be held, else None.

        Held: a frame more than ``one_off`` over its prediction (and four spreads) at a setting
        the fit knows; a step past the settings rendered is the price of that step, never held.
        """
        if self.fit.rows == 0:  # a hybrid's first frame: its model is the prediction
            excess, limit = value, max(self.one_off, 4 * self.fit.prior_spread)
        else:
            excess = value - float(self.fit.predict(row[None, :])[0][0])
            limit = max(self.one_off, 4 * self.fit.spread)
        return excess if excess > limit and self.known(levels) else None

    def known(self, levels: np.ndarray) -> bool:
        """Whether the fit has rendered a setting at or above these levels in every knob."""
        return True

    def lasts(self, held: HeldFrame, row: np.ndarray, value: float) -> bool:
        """Whether the frame after a held one runs long too (then the cost is real, kept)."""
        if self.fit.rows == 0:  # a first frame held: the second renders the same setting
            return held.value - value <= self.one_off
        mean, _ = self.fit.predict(row[None, :])
        return value - float(mean[0]) > self.one_off / 2

    def target(self, one: Candidates, seconds: float) -> float:
        """What the regression fits for one rendered frame (log seconds here)."""
        return math.log(seconds)

    @property
    def ready(self) -> bool:
        """Whether it can predict now."""
        return True

    def confidence(self) -> Confidence:
        """Frames fitted and the relative spread of the residuals."""
        if self.fit.rows == 0:
            return Confidence(0, math.expm1(self.fit.prior_spread), self.ready)
        return Confidence(self.fit.seen, math.expm1(self.fit.spread), self.ready)

    @abstractmethod
    def __call__(self, candidates: Candidates) -> np.ndarray:
        """Predicted seconds of each candidate (vectorized, like any model the tuner takes)."""


class LearnedPredictor(Learner):
    """A cost model learned from scratch, exploring the knobs step by step within the budget."""

    monotone = True  # the searches assume it; a closed loop's data alone can suggest otherwise

    @property
    def ready(self) -> bool:
        return self.fit.rows > 0

    def excess(self, levels: np.ndarray, row: np.ndarray, value: float) -> float | None:
        """As :meth:`Learner.excess`; and the very first frame is always held (set-up)."""
        return 0.0 if self.fit.rows == 0 else super().excess(levels, row, value)

    def known(self, levels: np.ndarray) -> bool:
        return bool(self.routes(levels[None, :])[0][0])

    @property
    def explored(self) -> np.ndarray:
        """Per knob: the highest level among the fitted frames of the window (-1: none)."""
        if not self.recent:
            return np.full(len(self.space.knobs), -1)
        return np.array(self.recent).max(axis=0)

    def varied(self) -> np.ndarray:
        """Per knob: whether the fitted frames show it at two levels or more (a known slope)."""
        seen = np.array(self.recent)
        return seen.min(axis=0) < seen.max(axis=0)

    def routes(self, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """How each setting (rows of levels) lies against the settings the window rendered:
        inside (at or below one of them in every knob), one step past one of them in a knob
        with a known slope, and the shortest step past one of them in a knob never varied,
        in spans of its explored levels (inf: none)."""
        seen = np.unique(np.array(self.recent), axis=0)
        over = np.clip(levels[:, None, :] - seen[None, :, :], 0, None)  # settings x seen x knobs
        single = np.count_nonzero(over, axis=2) == 1
        inside = np.any(~over.any(axis=2), axis=1)
        varied = self.varied()
        stepped = np.any(single & (over[:, :, varied].sum(axis=2) > 0), axis=1)
        spans = (over[:, :, ~varied] / np.maximum(1, self.explored[~varied])).sum(axis=2)
        guessed = np.where(single & (spans > 0), spans, np.inf)
        return inside, stepped, guessed.min(axis=1, initial=np.inf)

    def overruns(self, levels: np.ndarray) -> np.ndarray:
        """Per setting (rows of levels): how much dearer (log) its own frames in the window ran
        than the fit now predicts them, frames weighing as in the fit and one frame's worth of
        no overrun added; 0 for a setting not rendered or one that ran cheaper. A log-linear
        fit can miss one setting's cost while it fits the rest: that setting's own frames say
        so, and it is not chosen again on the fit's word."""
        sizes = np.array([len(k) for k in self.space.knobs])
        radix = np.concatenate([[1], np.cumprod(sizes[:0:-1])])[::-1]
        rendered = np.array(self.recent) @ radix
        residual = self.fit.residuals()
        weight = 0.5 ** (np.arange(len(residual))[::-1] / self.fit.half_life)
        keys, at = np.unique(rendered, return_inverse=True)
        overrun = np.bincount(at, weight * residual) / (np.bincount(at, weight) + 1.0)
        where = np.clip(np.searchsorted(keys, levels @ radix), 0, len(keys) - 1)
        return np.where(keys[where] == levels @ radix, np.maximum(0.0, overrun[where]), 0.0)

    def __call__(self, candidates: Candidates) -> np.ndarray:
        if not self.ready:
            raise NotLearnedError("LearnedPredictor has seen no frame yet: render the cheapest "
                                  "setting first (the Tuner does)")
        levels = self.levels(candidates)
        inside, stepped, guessed = self.routes(levels)
        mean, error = self.fit.predict(self.columns(candidates))
        mean = mean + self.overruns(levels)
        priced = np.where(inside | stepped, np.maximum(0.0, self.z * error - self.cap), np.inf)
        priced = np.minimum(priced, np.where(guessed <= 1, self.cap * guessed, np.inf))
        fits = np.isfinite(priced)
        return np.where(fits, np.exp(mean + np.where(fits, priced, 0.0)), UNEXPLORED_SECONDS)


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
        one_off: float = 0.5,
    ) -> None:
        super().__init__(space, features, z, margin, window, half_life, one_off)
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
