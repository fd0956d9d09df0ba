"""The product: model-driven search every frame plus the slow bias-correcting feedback (seed
002 section 4.4, figures 1 and 2)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from autotune.controllers.base import (
    NO_SETTLE,
    Controller,
    Decision,
    LoopOptions,
    timed_decision,
)
from autotune.feedback import BiasCorrection
from autotune.knobs import KnobSpace
from autotune.search import MAX_GRID, Predictor, as_predictor, make_search

# a raise within 10 % of the target after 3 frames in a row: the ray tracer's always, the
# volume renderer's on a still view (chosen on their validation paths: docs/design-notes.md,
# "raising like a governor")
GOVERNOR_SETTLE = (3, 0.10)


class FeedForwardController(Controller):
    """Model-driven search every frame, corrected by a slow outer feedback loop.

    A lower setting is taken on the frame it is needed. A better-looking one is taken at once
    where the current setting is more than ``settle_band`` under the target (the view got
    cheaper), but a small raise only once it has fitted with the hysteresis headroom on
    ``settle_frames`` frames in a row, so that one cheap frame of noise cannot buy a raise the
    next frames take back. Engines' governors raise more slowly than they drop for the same
    reason: UE's dynamic resolution changes at most once per 8 frames, Unity's HDRP scales up
    after twice as long as down."""

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
        settle_frames: int = NO_SETTLE[0],
        settle_band: float = NO_SETTLE[1],
    ) -> None:
        super().__init__(space, target_seconds)
        if not (isinstance(settle_frames, int) and settle_frames >= 1):
            raise ValueError(f"settle_frames must be an integer >= 1, got {settle_frames!r}")
        if not (isinstance(settle_band, (int, float)) and 0 <= settle_band < 1):
            raise ValueError(f"settle_band must be in [0, 1), got {settle_band!r}")
        self.feedback = BiasCorrection(gain)
        self.hysteresis = hysteresis
        self.max_grid = max_grid
        self.settle_frames, self.settle_band = settle_frames, float(settle_band)
        # whether small raises settle on the next frames: an owner that knows its view moves
        # may switch it off, since a raise then is the view getting cheaper, not noise
        self.settling = True
        self._held = 0  # frames in a row on which a small raise was held
        # the search of a vectorized predictor (a frame loop's) built now, when the loop is set
        # up, not in its first frame (0.4 ms for the volume renderer's 540 settings); a grid
        # search loads its compiled selection as it is built
        self._searches: dict[bool, Any] = {
            True: make_search(space, True, hysteresis, max_grid)}
        self.last: Decision | None = None

    @classmethod
    def from_loop(cls, space: KnobSpace, target_seconds: float,
                  options: LoopOptions) -> FeedForwardController:
        return cls(space, target_seconds, gain=options.feedback_gain,
                   settle_frames=options.settle[0], settle_band=options.settle[1])

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
        settles = self.settling and self._held + 1 < self.settle_frames
        band = self.settle_band if settles else 0.0
        choice = search.run(predictor, self.correction, self.target_seconds, previous, band)
        self._held = self._held + 1 if choice.held_raise else 0
        self.last = timed_decision(choice, started)
        return self.last

    def observe(self, measured_seconds: float) -> None:
        if self.last is not None:
            self.feedback.update(self.last.predicted, measured_seconds)
