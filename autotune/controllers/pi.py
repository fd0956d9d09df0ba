"""Baseline: no model; a PI law on the previous frame's measured time drives a quality level in
[0, 1] (what dynamic resolution in game engines does)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from autotune.controllers.base import Controller, Decision, LoopOptions, timed_decision
from autotune.controllers.ladder import QualityLadder
from autotune.knobs import KnobSpace
from autotune.search import Choice, Predictor


class PIController(Controller):
    """Baseline: PI law on the last measured frame time; no model.

    The error ``e = (target - measured) / target`` moves a quality level ``u`` in [0, 1]
    (velocity form: ``u += kp * (e - e_prev) + ki * e``; clamping is the anti-windup). ``u``
    walks the space's quality chain (:class:`~autotune.controllers.ladder.QualityLadder`: one
    knob up at each rung, worst look first, so cost rises with ``u``); it starts at
    ``initial``. Gains should be tuned on a path not used for evaluation
    (:func:`autotune.replay.tune_pi_gains`).
    """

    label = "PI"
    summary = "feedback only"

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
        self.ladder = QualityLadder(space)

    @classmethod
    def from_loop(cls, space: KnobSpace, target_seconds: float,
                  options: LoopOptions) -> PIController:
        kp, ki = options.pi_gains
        return cls(space, target_seconds, kp=kp, ki=ki)

    def knobs_at(self, level: float) -> dict[str, Any]:
        """Settings for a quality level in [0, 1]: that share along the quality chain."""
        return self.ladder.knobs_at(level)

    @property
    def needs_price(self) -> bool:
        return False

    def choose(self, predictor: Predictor | Callable[..., Any]) -> Decision:
        """Ignores the predictor: this controller only reacts to measured times."""
        started = time.perf_counter()
        over = self.level == 0 and self._measured is not None and self._measured > self._target
        nan = float("nan")
        return timed_decision(Choice(self.knobs_at(self.level), nan, nan, over, 0), started)

    def observe(self, measured_seconds: float) -> None:
        error = max(-1.0, (self.target_seconds - measured_seconds) / self.target_seconds)
        step = self.kp * (error - self._error) + self.ki * error
        self.level = min(1.0, max(0.0, self.level + step))
        self._error = error
        self._measured = measured_seconds
