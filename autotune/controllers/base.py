"""What every controller is: ``choose(predictor)`` a setting each frame, then
``observe(measured_seconds)``; and how the frame loop starts one (:meth:`Controller.from_loop`).
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from autotune.knobs import KnobSpace
from autotune.search import Choice, Predictor


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


class Decision(NamedTuple):
    """One frame's choice: the knobs, the model's and the corrected prediction, and its cost
    (a tuple: made every frame, after a render has evicted the caches)."""

    knobs: dict[str, Any]
    predicted: float
    corrected: float
    over_budget: bool
    evaluations: int
    search_seconds: float


NO_SETTLE = (1, 0.0)  # (settle_frames, settle_band): every raise that fits is taken at once


@dataclass(frozen=True)
class LoopOptions:
    """What a frame loop (:class:`autotune.frame_loop.FrameLoop`) offers the controller it
    starts; each controller takes what concerns it in :meth:`Controller.from_loop`."""

    held: dict[str, Any] | None  # knobs to hold (tuning off, or tuned by measurement)
    pi_gains: tuple[float, float]  # (kp, ki) of a PI law
    feedback_gain: float  # the slow bias feedback of a model-based controller
    settle: tuple[int, float] = NO_SETTLE  # feed-forward's (settle_frames, settle_band)


class Controller(ABC):
    """Common interface; ``target_seconds`` may be changed between frames.

    A subclass says how a person knows it (``label``: the viewer's overlay and help;
    ``summary``: the CLI's help), whether it learns the model's bias from the frames it
    observes (``model_based``: the frame loop then feeds it its own expectation for a frame
    that says nothing about the model), and, if the frame loop's options concern it, how the
    loop starts it (:meth:`from_loop`)."""

    label: ClassVar[str]
    summary: ClassVar[str]
    model_based: ClassVar[bool] = False

    def __init__(self, space: KnobSpace, target_seconds: float) -> None:
        self.space = space
        self.target_seconds = target_seconds

    @classmethod
    def from_loop(cls, space: KnobSpace, target_seconds: float,
                  options: LoopOptions) -> Controller:
        """The controller a frame loop starts with its ``options`` (none concern this one)."""
        return cls(space, target_seconds)

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

    @property
    def needs_price(self) -> bool:
        """Whether the next :meth:`choose` asks its predictor. A renderer need not price (nor
        probe) a frame for a controller that does not: a baseline pays only its own work."""
        return True

    @abstractmethod
    def choose(self, predictor: Predictor | Callable[..., Any]) -> Decision:
        """Pick this frame's knobs."""

    @abstractmethod
    def observe(self, measured_seconds: float) -> None:
        """Learn from the measured time of the frame last chosen."""


def timed_decision(choice: Choice, started: float) -> Decision:
    """Stamp a search's answer with the time the search took."""
    return Decision(choice.knobs, choice.predicted, choice.corrected, choice.over_budget,
                    choice.evaluations, search_seconds=time.perf_counter() - started)
