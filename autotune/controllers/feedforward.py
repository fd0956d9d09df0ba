"""The product: model-driven search every frame plus the slow bias-correcting feedback (seed
002 section 4.4, figures 1 and 2)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from autotune.controllers.base import Controller, Decision, LoopOptions, timed_decision
from autotune.feedback import BiasCorrection
from autotune.knobs import KnobSpace
from autotune.search import MAX_GRID, Predictor, as_predictor, compiled_select, make_search


class FeedForwardController(Controller):
    """Model-driven search every frame, corrected by a slow outer feedback loop."""

    label = "feed-forward"
    summary = "model + feedback"
    model_based = True

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
        compiled_select()  # compiled (or loaded) now, when the loop is set up, not in a frame

    @classmethod
    def from_loop(cls, space: KnobSpace, target_seconds: float,
                  options: LoopOptions) -> FeedForwardController:
        return cls(space, target_seconds, gain=options.feedback_gain)

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
        self.last = timed_decision(choice, started)
        return self.last

    def observe(self, measured_seconds: float) -> None:
        if self.last is not None:
            self.feedback.update(self.last.predicted, measured_seconds)
