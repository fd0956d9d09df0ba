"""Controllers: each frame ``choose(predictor)`` a setting, then ``observe(measured_seconds)``.

* :class:`FeedForwardController` - the product: model-driven search every frame plus the slow
  bias-correcting feedback (seed 002 section 4.4, figures 1 and 2).
* :class:`FixedController` - baseline: tuned with the model on the first frame, then frozen.
* :class:`PIController` - baseline: no model; a PI law on the previous frame's measured time
  drives a quality level in [0, 1] (what dynamic resolution in game engines does).
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.feedback import BiasCorrection
from autotune.knobs import KnobSpace
from autotune.search import MAX_GRID, Choice, Predictor, as_predictor, make_search


def check_target(target_seconds: Any) -> float:
    """A target frame time must be a finite number of seconds > 0."""
    if (
        isinstance(target_seconds, bool)
        or not isinstance(target_seconds, (int, float, np.number))
        or not math.isfinite(target_seconds)
        or target_seconds <= 0
    ):
        raise ValueError(
            f"target_seconds must be a finite number of seconds > 0, got {target_seconds!r}"
        )
    return float(target_seconds)


@dataclass(frozen=True)
class Decision:
    """One frame's choice: the knobs, the model's and the corrected prediction, and its cost."""

    knobs: dict[str, Any]
    predicted: float
    corrected: float
    over_budget: bool
    evaluations: int
    search_seconds: float


class Controller(ABC):
    """Common interface; ``target_seconds`` may be changed between frames."""

    def __init__(self, space: KnobSpace, target_seconds: float) -> None:
        self.space = space
        self.target_seconds = target_seconds

    @property
    def target_seconds(self) -> float:
        """Frame-time target in seconds."""
        return self._target

    @target_seconds.setter
    def target_seconds(self, value: float) -> None:
        self._target = check_target(value)

    @property
    def correction(self) -> float:
        """Multiplicative correction applied to predictions (1.0 when the controller has none)."""
        return 1.0

    @abstractmethod
    def choose(self, predictor: Predictor | Callable[..., Any]) -> Decision:
        """Pick this frame's knobs."""

    @abstractmethod
    def observe(self, measured_seconds: float) -> None:
        """Learn from the measured time of the frame last chosen."""


def _decision(choice: Choice, started: float) -> Decision:
    """Stamp a search's answer with the time the search took."""
    return Decision(*choice, search_seconds=time.perf_counter() - started)


class FeedForwardController(Controller):
    """Model-driven search every frame, corrected by a slow outer feedback loop."""

    def __init__(
        self,
        space: KnobSpace,
        target_seconds: float,
        gain: float = 0.1,
        hysteresis: float = 0.02,
        max_grid: int = MAX_GRID,
    ) -> None:
        super().__init__(space, target_seconds)
        self.feedback = BiasCorrection(gain)
        self.hysteresis = hysteresis
        self.max_grid = max_grid
        self._searches: dict[bool, Any] = {}
        self.last: Decision | None = None

    @property
    def correction(self) -> float:
        return self.feedback.correction

    def choose(self, predictor: Predictor | Callable[..., Any]) -> Decision:
        started = time.perf_counter()
        predictor = as_predictor(predictor)
        search = self._searches.get(predictor.vectorized)
        if search is None:
            search = make_search(self.space, predictor.vectorized, self.hysteresis, self.max_grid)
            self._searches[predictor.vectorized] = search
        previous = self.last.knobs if self.last is not None else None
        choice = search.run(predictor, self.correction, self.target_seconds, previous)
        self.last = _decision(choice, started)
        return self.last

    def observe(self, measured_seconds: float) -> None:
        if self.last is not None:
            self.feedback.update(self.last.predicted, measured_seconds)


class FixedController(Controller):
    """Baseline: one setting for the whole run.

    Given ``knobs`` (tuned by measurement on the first frame, as seed 002 did by hand; see
    :func:`autotune.replay.fixed_by_measurement`) it holds them; otherwise the model picks them
    on the first frame.
    """

    def __init__(self, space: KnobSpace, target_seconds: float, max_grid: int = MAX_GRID,
                 knobs: dict[str, Any] | None = None) -> None:
        super().__init__(space, target_seconds)
        self.max_grid = max_grid
        self.knobs: dict[str, Any] | None = dict(knobs) if knobs is not None else None

    def choose(self, predictor: Predictor | Callable[..., Any]) -> Decision:
        started = time.perf_counter()
        predictor = as_predictor(predictor)
        if self.knobs is None:
            search = make_search(self.space, predictor.vectorized, 0.0, self.max_grid)
            choice = search.run(predictor, 1.0, self.target_seconds)
            self.knobs = choice.knobs
            return _decision(choice, started)
        one = {k: np.array([v]) for k, v in self.knobs.items()}
        predicted = float(predictor(one)[0])
        over = predicted > self.target_seconds
        return _decision(Choice(dict(self.knobs), predicted, predicted, over, 1), started)

    def observe(self, measured_seconds: float) -> None:
        """A fixed setting learns nothing."""


class PIController(Controller):
    """Baseline: PI law on the last measured frame time; no model.

    The error ``e = (target - measured) / target`` moves a quality level ``u`` in [0, 1]
    (velocity form: ``u += kp * (e - e_prev) + ki * e``; clamping is the anti-windup). ``u``
    walks the same quality-ranked candidate order the feed-forward search ranks by (every
    setting of the space, worst look first), so it can reach every setting the tuned controller
    can; it starts at ``initial``. Gains should be tuned on a path not used for evaluation
    (:func:`autotune.replay.tune_pi_gains`).
    """

    def __init__(
        self,
        space: KnobSpace,
        target_seconds: float,
        kp: float = 0.1,
        ki: float = 0.1,
        initial: float = 0.5,
    ) -> None:
        super().__init__(space, target_seconds)
        if not 0 <= initial <= 1:
            raise ValueError(f"initial quality level must be in [0, 1], got {initial!r}")
        self.kp, self.ki = float(kp), float(ki)
        self.level = float(initial)
        self._error = 0.0
        self._measured: float | None = None
        self._order: np.ndarray | None = None

    def knobs_at(self, level: float) -> dict[str, Any]:
        """Settings for a quality level in [0, 1]: that share along the quality-ranked order."""
        if self._order is None:
            self._order = self.space.quality_order()
        index = int(math.floor(level * (len(self._order) - 1) + 0.5))
        return self.space.at_index(int(self._order[index]))

    def choose(self, predictor: Predictor | Callable[..., Any]) -> Decision:
        """Ignores the predictor: this controller only reacts to measured times."""
        started = time.perf_counter()
        over = self.level == 0 and self._measured is not None and self._measured > self._target
        nan = float("nan")
        return _decision(Choice(self.knobs_at(self.level), nan, nan, over, 0), started)

    def observe(self, measured_seconds: float) -> None:
        error = max(-1.0, (self.target_seconds - measured_seconds) / self.target_seconds)
        step = self.kp * (error - self._error) + self.ki * error
        self.level = min(1.0, max(0.0, self.level + step))
        self._error = error
        self._measured = measured_seconds


# The one registry of controllers: the name a caller passes (Tuner, TunedRenderer, the CLI and
# the viewer), the class, and the name shown to a person. The first is the default.
CONTROLLERS: dict[str, type[Controller]] = {
    "feedforward": FeedForwardController,
    "fixed": FixedController,
    "pi": PIController,
}
CONTROLLER_NAMES: dict[str, str] = {"feedforward": "feed-forward", "fixed": "fixed", "pi": "PI"}
DEFAULT_CONTROLLER = "feedforward"
