"""Feed-forward search: the best-looking knob setting whose corrected prediction fits the target.

Two strategies share one selection rule:

* :class:`GridSearch` scores the whole enumerated grid with one vectorized predictor call and
  is exact (used when the predictor is vectorized and the grid has <= ``max_grid`` settings);
* :class:`BisectionSearch` raises knobs one at a time (highest weight first), bisecting each
  knob's levels for the highest that still fits. It needs only ``sum(log2(levels))`` predictions
  per pass, so it serves scalar predictors and huge spaces, but it is greedy: exact for one knob,
  a good (not always optimal) setting for several. Both assume cost rises with every knob's level.

Selection rule: highest quality whose ``correction * predicted <= target``; ties go to the
lower prediction. Hysteresis: the previous setting is kept while it still fits, unless some
setting of strictly higher quality fits with ``hysteresis`` headroom
(``corrected <= target * (1 - hysteresis)``), so measurement noise cannot flip the choice back
and forth across the target. A caller may also hold a raise (``hold_band``): the previous
setting is then kept while its corrected prediction fits within ``hold_band`` of the target,
even when a better-looking one fits with headroom, and the choice says so (``held_raise``), so
that a controller can ask a small raise to fit on several frames in a row before it takes it.
If nothing fits, the cheapest setting is returned, over budget.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from autotune.knobs import Candidates, KnobSpace
from common.jit_cache import njit

MAX_GRID = 100_000


class PredictorError(RuntimeError):
    """The predictor raised or returned NaN/inf/negative/wrong-shaped times; ``kind`` says which."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Predictor:
    """A user's cost model, called on a batch of candidates; validates what it returns."""

    fn: Callable[..., Any]
    vectorized: bool = True

    def __call__(self, candidates: Candidates) -> np.ndarray:
        """Predicted seconds for each candidate (arrays in, one float per candidate out)."""
        seconds = self.batch(candidates)
        if not np.all(np.isfinite(seconds)):
            raise PredictorError(*_BAD_VALUES[_NON_FINITE])
        if np.any(seconds < 0):
            raise PredictorError(*_BAD_VALUES[_NEGATIVE])
        return seconds

    def batch(self, candidates: Candidates) -> np.ndarray:
        """The predictor's seconds as one float64 array per candidate, shape-checked only:
        :class:`GridSearch` checks the values in its compiled selection (the same errors)."""
        n = len(next(iter(candidates.values())))
        try:
            if self.vectorized:
                raw = self.fn(candidates)
            else:
                raw = [self.fn({k: v[i].item() for k, v in candidates.items()}) for i in range(n)]
            seconds = np.asarray(raw, dtype=np.float64)
        except Exception as exc:  # any failure of user code is reported the same way
            raise PredictorError("raised", f"predictor raised {exc!r}") from exc
        if seconds.shape == (n,):
            return np.ascontiguousarray(seconds)  # one layout: compiled once (_select)
        if seconds.shape == ():
            return np.full(n, float(seconds))
        raise PredictorError("shape", f"predictor returned shape {seconds.shape}, expected ({n},)")


def as_predictor(predictor: Predictor | Callable[..., Any]) -> Predictor:
    """Wrap a bare callable as a vectorized :class:`Predictor`."""
    return predictor if isinstance(predictor, Predictor) else Predictor(predictor)


class Choice(NamedTuple):
    """A search's answer for one frame; ``held_raise``: the previous setting was kept by
    ``hold_band`` where a better-looking one fitted with the hysteresis headroom."""

    knobs: dict[str, Any]
    predicted: float
    corrected: float
    over_budget: bool
    evaluations: int
    held_raise: bool = False


def _check_hysteresis(hysteresis: float) -> float:
    """Hysteresis is a fraction of the target in [0, 1)."""
    if not (isinstance(hysteresis, (int, float)) and 0 <= hysteresis < 1):
        raise ValueError(f"hysteresis must be in [0, 1), got {hysteresis!r}")
    return float(hysteresis)


class GridSearch:
    """Exact search: one vectorized predictor call over every candidate of a small space, the
    selection in one compiled pass (:func:`_select`)."""

    def __init__(self, space: KnobSpace, hysteresis: float = 0.02) -> None:
        self.space = space
        self.hysteresis = _check_hysteresis(hysteresis)
        self.grid = space.grid()
        # the candidates' count, kept: asked every frame, the property took 9 µs after a
        # render had evicted the caches (the volume renderer's governed frames, rank 0)
        self.size = space.size
        self.quality = space.quality(self.grid)
        if self.quality.shape != (self.size,) or not np.all(np.isfinite(self.quality)):
            raise ValueError("quality function must return one finite number per candidate")
        # Candidates by falling quality; _tie_end[i] closes the run of equal quality holding i.
        self._order = np.argsort(-self.quality, kind="stable").astype(np.int64)
        ranked = self.quality[self._order]
        tol = 1e-12 * max(1.0, float(np.abs(ranked).max()))
        ends = np.append(np.flatnonzero(np.diff(ranked) < -tol) + 1, self.size)
        self._tie_end = ends[np.searchsorted(ends, np.arange(self.size), side="right")].astype(
            np.int64)
        self._last: tuple[dict[str, Any], int] | None = None  # the last pick and its index
        self._settings: dict[int, dict[str, Any]] = {}  # the settings picked so far, by index
        self._select = compiled_select()

    def _index_of(self, knobs: Mapping[str, Any]) -> int:
        """Position of ``knobs`` in the grid: the last pick's without a lookup."""
        if self._last is not None and self._last[0] == knobs:
            return self._last[1]
        return self.space.index_of(knobs)

    def run(
        self,
        predictor: Predictor,
        correction: float,
        target: float,
        previous: Mapping[str, Any] | None = None,
        hold_band: float = 0.0,
    ) -> Choice:
        """Choose this frame's setting; ``previous`` enables hysteresis, ``hold_band`` keeps it
        while it fits within that share of the target (see the module)."""
        predicted = predictor.batch(self.grid)
        prev = -1 if previous is None else self._index_of(previous)
        n = self.size
        pick = self._select(predicted, float(correction), float(target), prev, self.hysteresis,
                            float(hold_band), self._order, self._tie_end, self.quality)
        if pick < 0:
            raise PredictorError(*_BAD_VALUES[pick])
        held = pick >= n
        if held:
            pick -= n
        knobs = self._settings.get(pick)
        if knobs is None:
            knobs = self._settings[pick] = self.space.at_index(pick)
        self._last = (knobs, pick)
        seconds = float(predicted[pick])
        corrected = float(correction) * seconds
        return Choice(dict(knobs), seconds, corrected, corrected > target, n, held)


#: What :func:`_select` returns for a predictor's bad values, and the error each one raises
_NON_FINITE, _NEGATIVE = -1, -2
_BAD_VALUES = {_NON_FINITE: ("non-finite", "predictor returned NaN or inf"),
               _NEGATIVE: ("negative", "predictor returned a negative time")}


def _select(predicted: np.ndarray, correction: float, target: float, previous: int,
            hysteresis: float, hold_band: float, order: np.ndarray, tie_end: np.ndarray,
            quality: np.ndarray) -> int:
    """The module's selection rule over every candidate: the chosen index; that index plus the
    number of candidates where ``hold_band`` kept the previous setting against a better-looking
    pick; or a negative code for bad values.

    ``order``: candidates by falling quality; ``tie_end[k]`` ends the run of equal quality
    holding ``order[k]``; ``previous``: the last setting's index (-1: none). One compiled pass
    in place of a dozen NumPy calls: after a frame that evicted the caches, the search took
    240 µs in NumPy and 12 µs compiled (1,028 candidates)."""
    n = predicted.shape[0]
    for i in range(n):
        if not np.isfinite(predicted[i]):
            return _NON_FINITE
        if predicted[i] < 0.0:
            return _NEGATIVE
    pick = -1
    if previous >= 0 and correction * predicted[previous] <= target:
        pick = previous  # kept unless the best-looking setting with headroom looks better
        roomy = target * (1.0 - hysteresis)
        for k in range(n):
            if correction * predicted[order[k]] <= roomy:
                if quality[order[k]] > quality[previous]:
                    pick = -1
                break
    if pick < 0:
        pick = int(np.argmin(predicted))  # nothing fits: the cheapest, over budget
        for k in range(n):  # the best-looking setting that fits; ties: the lowest prediction
            if correction * predicted[order[k]] <= target:
                pick = order[k]
                for m in range(k + 1, tie_end[k]):
                    j = order[m]
                    if correction * predicted[j] <= target and predicted[j] < predicted[pick]:
                        pick = j
                break
    if (0 <= previous != pick and quality[pick] > quality[previous]
            and target * (1.0 - hold_band) < correction * predicted[previous] <= target):
        return previous + n  # held
    return pick


@functools.cache
def compiled_select() -> Callable[..., int]:
    """:func:`_select` compiled by numba (cached on disk: :mod:`common.jit_cache`) and called
    once, so that the first frame does not pay for loading it (0.3 s from numba's cache, more
    to compile); numba is imported here, when a tuner is set up, not with ``import autotune``."""
    select = njit(nogil=True)(_select)
    one = np.ones(1)
    select(one, 1.0, 1.0, -1, 0.0, 0.0, np.zeros(1, np.int64), np.ones(1, np.int64), one)
    return select


class BisectionSearch:
    """Greedy coordinate-wise bisection over knob levels: few predictor calls, any space size."""

    def __init__(self, space: KnobSpace, hysteresis: float = 0.02) -> None:
        self.space = space
        self.hysteresis = _check_hysteresis(hysteresis)
        weights = [k.weight for k in space.knobs]
        self.order = sorted(range(len(weights)), key=lambda j: -weights[j])

    def _candidate(self, levels: list[int]) -> Candidates:
        """One setting as length-1 arrays."""
        return {k.name: k.values[i : i + 1] for k, i in zip(self.space.knobs, levels, strict=True)}

    def _quality(self, levels: list[int]) -> float:
        """Quality score of one setting."""
        return float(np.asarray(self.space.quality(self._candidate(levels))).reshape(-1)[0])

    def run(
        self,
        predictor: Predictor,
        correction: float,
        target: float,
        previous: Mapping[str, Any] | None = None,
        hold_band: float = 0.0,
    ) -> Choice:
        """Choose this frame's setting; ``previous`` enables hysteresis, ``hold_band`` keeps it
        while it fits within that share of the target (see the module)."""
        count = 0

        def predict(levels: list[int]) -> float:
            nonlocal count
            count += 1
            return float(predictor(self._candidate(levels))[0])

        def climb(start_time: float, threshold: float) -> tuple[list[int], float]:
            levels, time = [0] * len(self.space.knobs), start_time
            for j in self.order:
                lo, hi = 0, len(self.space.knobs[j]) - 1
                while lo < hi:
                    levels[j] = (lo + hi + 1) // 2
                    t = predict(levels)
                    if correction * t <= threshold:
                        lo, time = levels[j], t
                    else:
                        hi = levels[j] - 1
                levels[j] = lo
            return levels, time

        lowest = [0] * len(self.space.knobs)
        base = predict(lowest)
        if correction * base > target:
            return self._choice(lowest, base, correction, target, count)
        if previous is not None:
            prev = self.space.levels_of(previous)
            t_prev = predict(prev)
            if correction * t_prev <= target:
                roomy, _ = climb(base, target * (1 - self.hysteresis))
                if self._quality(roomy) <= self._quality(prev):
                    return self._choice(prev, t_prev, correction, target, count)
                if correction * t_prev > target * (1 - hold_band):
                    return self._choice(prev, t_prev, correction, target, count, True)
        levels, time = climb(base, target)
        return self._choice(levels, time, correction, target, count)

    def _choice(self, levels: list[int], predicted: float, correction: float, target: float,
                count: int, held_raise: bool = False) -> Choice:
        corrected = correction * predicted
        return Choice(self.space.at_levels(levels), predicted, corrected, corrected > target,
                      count, held_raise)


def make_search(
    space: KnobSpace, vectorized: bool, hysteresis: float = 0.02, max_grid: int = MAX_GRID
) -> GridSearch | BisectionSearch:
    """Grid search for vectorized predictors on small spaces, bisection otherwise."""
    if vectorized and space.size <= max_grid:
        return GridSearch(space, hysteresis)
    return BisectionSearch(space, hysteresis)
