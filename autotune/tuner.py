"""The object a render loop holds: choose knobs before a frame, learn from its time after.

Measured time: ``with tuner.frame() as knobs:`` times its block with ``time.perf_counter``.
Rendering that finishes asynchronously (a GPU queue) should report its own time instead: call
``tuner.observe(gpu_seconds)`` inside the block and the wall-clock time is then not used.
If the block raises, the frame is not observed.

A learned predictor (:mod:`autotune.learned`) is taught by the tuner: the numbers passed as
``frame(features=...)`` (or ``choose(features=...)``) go to it before the choice and the
measured time after it. Until it has seen a frame it cannot predict, and the tuner renders the
cheapest setting (a safe start, not a failure: no warning).

Failures never stop the render loop: a predictor that raises or returns NaN/inf/negative
times leaves the last good setting in place (the cheapest one on the very first frame); a
non-finite or non-positive measurement is ignored. Each kind of trouble warns once
(:class:`AutotuneWarning`), is counted in :attr:`Tuner.trouble` and is recorded in
:attr:`Tuner.history`.
"""

from __future__ import annotations

import math
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from autotune.controllers import (
    CONTROLLERS,
    DEFAULT_CONTROLLER,
    Controller,
    Decision,
    check_target,
)
from autotune.knobs import KnobSpace
from autotune.learned import Learner
from autotune.search import Predictor, PredictorError

__all__ = ["CONTROLLERS", "AutotuneWarning", "FrameRecord", "Tuner"]


class AutotuneWarning(RuntimeWarning):
    """Something went wrong in a frame and the tuner carried on; see ``Tuner.trouble``."""


@dataclass
class FrameRecord:
    """One frame as the tuner saw it, for plots and post-mortems (``measured`` None if unknown)."""

    knobs: dict[str, Any]
    predicted: float
    corrected: float
    over_budget: bool
    target: float
    measured: float | None = None
    trouble: str | None = None


class FrameHistory(deque):
    """The last frames' records, oldest first: a deque (the oldest dropped in O(1) once full)
    that also slices like a list (``history[10:]``, a list)."""

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(self)[index]
        return super().__getitem__(index)


class Tuner:
    """Per-frame auto-tuner: a knob space, a cost model and a target frame time."""

    def __init__(
        self,
        space: KnobSpace,
        predictor: Callable[..., Any],
        target_seconds: float,
        controller: str | Controller = DEFAULT_CONTROLLER,
        vectorized: bool = True,
        history_limit: int | None = 100_000,
    ) -> None:
        if not callable(predictor):
            raise ValueError(f"predictor must be callable, got {predictor!r}")
        target = check_target(target_seconds)
        if isinstance(controller, str):
            if controller not in CONTROLLERS:
                raise ValueError(
                    f"unknown controller {controller!r}; choose one of {sorted(CONTROLLERS)}"
                )
            controller = CONTROLLERS[controller](space, target)
        elif not isinstance(controller, Controller):
            raise ValueError(f"controller must be a name or a Controller, got {controller!r}")
        elif controller.space.names != space.names:
            raise ValueError(
                f"controller tunes knobs {controller.space.names}, the tuner {space.names}"
            )
        if isinstance(predictor, Learner):
            if not vectorized:
                raise ValueError("a learned predictor is vectorized; do not pass vectorized=False")
            if predictor.space.names != space.names:
                raise ValueError(
                    f"the learned predictor knows knobs {predictor.space.names}, "
                    f"the tuner {space.names}"
                )
        if history_limit is not None and history_limit < 1:
            raise ValueError(f"history_limit must be >= 1 or None, got {history_limit!r}")
        self.space = space
        self.predictor = Predictor(predictor, vectorized)
        self.learner = predictor if isinstance(predictor, Learner) else None
        self.controller = controller
        self.target_seconds = target
        # the last ``history_limit`` frames (all where None); a deque drops the oldest in
        # O(1): a list's ``del history[0]`` moved every kept record, 0.8 MB a frame once
        # 100,000 frames (half an hour at 60 fps) were kept
        self.history = FrameHistory(maxlen=history_limit)
        self.trouble: Counter[str] = Counter()
        self._last_good: dict[str, Any] | None = None
        # Frame awaiting observe(): its record, and whether the controller chose it.
        self._pending: tuple[FrameRecord, bool] | None = None
        self._warned: set[str] = set()

    @property
    def target_seconds(self) -> float:
        """Frame-time target in seconds; may be changed between frames."""
        return self.controller.target_seconds

    @target_seconds.setter
    def target_seconds(self, value: float) -> None:
        self.controller.target_seconds = check_target(value)

    @property
    def correction(self) -> float:
        """The controller's current multiplicative model correction."""
        return self.controller.correction

    def _warn(self, kind: str, message: str) -> None:
        """Count a kind of trouble; warn about it the first time only."""
        self.trouble[kind] += 1
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(f"{message} (further ones are only counted)", AutotuneWarning, 3)

    def choose(self, features: Mapping[str, Any] | None = None) -> Decision:
        """Pick the knobs for the next frame (call once per frame, before rendering).

        ``features``: this frame's numbers for a learned predictor (``ValueError`` otherwise).
        """
        if self.learner is None and features is not None:
            raise ValueError("per-frame features need a learned predictor (autotune.learned)")
        if self.learner is not None:
            self.learner.see(features)
        if self._pending is not None:
            self._warn(
                "unobserved-frame",
                "choose() was called again before observe(): the previous frame's time is "
                "lost to the controller (call observe() once per frame; do not nest frame())",
            )
        trouble = None
        safe_start = self.learner is not None and not self.learner.ready
        try:
            if safe_start:
                nan = float("nan")
                decision = Decision(self.space.lowest(), nan, nan, False, 0, 0.0)
            else:
                decision = self.controller.choose(self.predictor)
                self._last_good = decision.knobs
        except PredictorError as exc:
            trouble = f"predictor-{exc.kind}"
            fallback = "last good setting" if self._last_good else "cheapest setting"
            self._warn(trouble, f"{exc}; using the {fallback}")
            knobs = dict(self._last_good) if self._last_good else self.space.lowest()
            nan = float("nan")
            decision = Decision(knobs, nan, nan, False, 0, 0.0)
        if decision.over_budget:
            trouble = "over-budget"
            priced = (f" ({decision.corrected * 1e3:.3g} ms predicted)"
                      if math.isfinite(decision.corrected) else "")  # PI predicts nothing
            self._warn(
                trouble,
                f"no setting fits the {self.target_seconds * 1e3:.3g} ms target; "
                f"using the cheapest{priced}",
            )
        record = FrameRecord(
            dict(decision.knobs),
            decision.predicted,
            decision.corrected,
            decision.over_budget,
            self.target_seconds,
            trouble=trouble,
        )
        chosen = not safe_start and (trouble is None or not trouble.startswith("predictor"))
        self._pending = (record, chosen)
        self.history.append(record)
        return decision

    def observe(self, measured_seconds: float) -> None:
        """Report the last chosen frame's measured time in seconds (once per frame)."""
        if self._pending is None:
            raise RuntimeError("observe() needs a frame chosen by choose() and not yet observed")
        (record, chosen_by_controller), self._pending = self._pending, None
        measured = float(measured_seconds)
        if not math.isfinite(measured) or measured <= 0:
            self._warn("bad-measurement", f"ignored measured time {measured_seconds!r}")
            record.trouble = record.trouble or "bad-measurement"
            return
        record.measured = measured
        if self.learner is None:
            if chosen_by_controller:
                self.controller.observe(measured)
        else:  # the learner is the feedback: a controller's correction on top would double it
            try:
                self.learner.learn(record.knobs, measured)
            except PredictorError as exc:  # a hybrid's own model failed on the rendered knobs
                self._warn(f"predictor-{exc.kind}", f"{exc}; this frame is not learned")

    @contextmanager
    def frame(self, features: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Choose knobs, yield them, and observe the block's wall time unless observed inside."""
        knobs = dict(self.choose(features).knobs)
        started = time.perf_counter()
        try:
            yield knobs
        except BaseException:
            self._pending = None  # a failed frame is not observed, and not a forgotten one
            raise
        elapsed = time.perf_counter() - started
        if self._pending is not None:
            self.observe(elapsed)
