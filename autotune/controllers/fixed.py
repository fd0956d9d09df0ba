"""Baseline: tuned on the first frame (by the model, or given knobs tuned by measurement),
then frozen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from autotune.controllers.base import Controller, Decision, LoopOptions, timed_decision
from autotune.knobs import KnobSpace
from autotune.search import MAX_GRID, Choice, Predictor, as_predictor, make_search


class FixedController(Controller):
    """Baseline: one setting for the whole run.

    Given ``knobs`` (tuned by measurement on the first frame, as Ganestam & Doggett, "Auto-tuning
    Interactive Ray Tracing using an Analytical GPU Architecture Model", did by hand; see
    :func:`autotune.replay.fixed_by_measurement`) it holds them; otherwise the model picks them
    on the first frame.
    """

    label = "fixed"
    summary = "chosen on the first frame"

    def __init__(self, space: KnobSpace, target_seconds: float, max_grid: int = MAX_GRID,
                 knobs: dict[str, Any] | None = None) -> None:
        super().__init__(space, target_seconds)
        self.max_grid = max_grid
        self.knobs: dict[str, Any] | None = dict(knobs) if knobs is not None else None

    @classmethod
    def from_loop(cls, space: KnobSpace, target_seconds: float,
                  options: LoopOptions) -> FixedController:
        return cls(space, target_seconds, knobs=options.held)

    @property
    def needs_price(self) -> bool:
        """Only to choose the knobs by the model (the first frame, when none were given)."""
        return self.knobs is None

    def choose(self, predictor: Predictor | Callable[..., Any]) -> Decision:
        """The held knobs (no prediction: NaN), or on the first frame the model's choice."""
        started = time.perf_counter()
        if self.knobs is None:
            predictor = as_predictor(predictor)
            search = make_search(self.space, predictor.vectorized, 0.0, self.max_grid)
            choice = search.run(predictor, 1.0, self.target_seconds)
            self.knobs = choice.knobs
            return timed_decision(choice, started)
        nan = float("nan")
        return timed_decision(Choice(dict(self.knobs), nan, nan, False, 0), started)

    def observe(self, measured_seconds: float) -> None:
        """A fixed setting learns nothing."""
