"""Baseline: a dynamic-resolution governor as game engines ship one, on the quality ladder.

Its rules are those of Unreal Engine 5's dynamic-resolution heuristic (``DynamicResolution.cpp``,
``FHeuristicSettings``): a 10 % headroom under the budget, a *panic* drop after 2 consecutive
frames over budget, at most one raise per 8 frames, and the frame after a change ignored (its
time still carries the old setting's work). The frame time is smoothed as Hilo3D's governor
smooths it (an exponential average, weight 0.2); a raise is one damped step of the level. No
model: it needs no probe and pays none.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from autotune.controllers.base import Controller, Decision, timed_decision
from autotune.controllers.ladder import QualityLadder
from autotune.knobs import KnobSpace
from autotune.search import Choice, Predictor


class GovernorController(Controller):
    """Baseline: step the quality level down at once when over budget, up slowly when under.

    ``headroom``: raise only while the smoothed frame is below ``(1 - headroom) x target``;
    ``panic_frames``: consecutive frames over the target that drop the level at once, by the
    share the last frame overshot (at least one ``step``); ``raise_every``: frames between
    raises; ``step``: a raise, as a share of the level range; ``smoothing``: the weight of a new
    frame in the smoothed time.
    """

    label = "governor"
    summary = "dynamic resolution as engines ship it"

    def __init__(self, space: KnobSpace, target_seconds: float, headroom: float = 0.10,
                 panic_frames: int = 2, raise_every: int = 8, step: float = 0.05,
                 smoothing: float = 0.2, initial: float = 0.5) -> None:
        super().__init__(space, target_seconds)
        if not 0 <= initial <= 1:
            raise ValueError(f"initial quality level must be in [0, 1], got {initial!r}")
        self.ladder = QualityLadder(space)
        self.headroom, self.panic_frames, self.raise_every = headroom, panic_frames, raise_every
        self.step, self.smoothing = step, smoothing
        self.level = float(initial)
        self._smoothed: float | None = None
        self._over = 0
        self._since_change = 0
        self._skip_next = False

    @property
    def needs_price(self) -> bool:
        return False

    def choose(self, predictor: Predictor | Callable[..., Any]) -> Decision:
        """Ignores the predictor: the level follows measured times only."""
        started = time.perf_counter()
        nan = float("nan")
        over = self.level == 0 and self._over > 0
        return timed_decision(Choice(self.ladder.knobs_at(self.level), nan, nan, over, 0),
                              started)

    def observe(self, measured_seconds: float) -> None:
        if self._skip_next:  # the first frame of a new setting: its time is not the setting's
            self._skip_next = False
            return
        s = self._smoothed
        self._smoothed = measured_seconds if s is None else s + self.smoothing * (
            measured_seconds - s)
        self._over = self._over + 1 if measured_seconds > self.target_seconds else 0
        self._since_change += 1
        if self._over >= self.panic_frames and self.level > 0:
            overshoot = measured_seconds / self.target_seconds - 1.0
            self._change(-max(self.step, self.level * overshoot))
        elif (self._since_change >= self.raise_every and self.level < 1
              and self._smoothed < (1.0 - self.headroom) * self.target_seconds):
            self._change(self.step)

    def _change(self, by: float) -> None:
        self.level = min(1.0, max(0.0, self.level + by))
        self._over, self._since_change, self._skip_next = 0, 0, True
        self._smoothed = None  # the old setting's times say nothing of the new one
