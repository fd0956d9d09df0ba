"""The one frame loop every governed renderer runs: it owns the target, which controller
chooses, whether tuning is on, and the rules for what the controller learns from a frame.

A renderer prices candidate knobs as a :class:`FramePrice`: ``modelled`` seconds (what its
model predicts) and ``known`` seconds of this frame already measured before the choice (the
probe, the host overhead). The rules, the same for every renderer:

- measured parts are never scaled by the controller's correction (a bias of the model is not
  a bias of the probe's clock);
- a renderer that corrects its modelled parts itself (the ray tracer's per-phase feedback:
  ``corrects_itself=True``) gets the controller's correction cancelled out of its price, so
  one error is not learnt twice (a 2x step learnt by both became 4x);
- a frame whose modelled part is too small a share to say anything about the model
  (``teaches=False``: an empty view, where probe and overhead dominate) gives a model-based
  controller (``Controller.model_based``: feed-forward) its own expected time, i.e. no
  innovation;
- a model-free controller (PI, fixed) always observes the measured frame;
- tuning off holds the last chosen knobs with the fixed controller (the ``fixed`` baseline
  holds those :meth:`hold` is given); on starts the named controller afresh, by its
  ``from_loop`` with the loop's options (:class:`~autotune.controllers.LoopOptions`).

The renderer sets :attr:`space` and :attr:`price` when it can (a volume renderer only after
its calibration): until then the loop keeps the target, controller and tuning switch only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from autotune.controllers import (
    CONTROLLERS,
    DEFAULT_CONTROLLER,
    Decision,
    FeedForwardController,
    LoopOptions,
    check_target,
)
from autotune.controllers.base import NO_SETTLE
from autotune.knobs import KnobSpace
from autotune.tuner import Tuner

DEFAULT_PI_GAINS = (0.1, 0.1)
DEFAULT_FEEDBACK_GAIN = 0.1  # the feed-forward controller's slow bias feedback


class FramePrice(NamedTuple):
    """Seconds of candidate knobs: ``modelled`` (per candidate) and ``known`` (measured)."""

    modelled: Any  # array-like, one entry per candidate
    known: float = 0.0


class FrameLoop:
    """Target, controller, tuning switch and feedback rules of one governed renderer."""

    def __init__(self, target_seconds: float, controller: str = DEFAULT_CONTROLLER, *,
                 corrects_itself: bool = False,
                 pi_gains: tuple[float, float] = DEFAULT_PI_GAINS,
                 feedback_gain: float = DEFAULT_FEEDBACK_GAIN,
                 settle: tuple[int, float] = NO_SETTLE) -> None:
        self._target = check_target(target_seconds)
        self._controller = self._checked(controller)
        self._tuning = True
        self.corrects_itself = corrects_itself
        self.pi_gains = pi_gains
        self.feedback_gain = feedback_gain
        self.settle = settle  # how feed-forward raises (FeedForwardController's settle_*)
        self.space: KnobSpace | None = None
        self.price: Callable[[Mapping[str, np.ndarray]], FramePrice] | None = None
        self.tuner: Tuner | None = None
        self._held: dict[str, Any] | None = None
        self.last_knobs: dict[str, Any] | None = None

    @staticmethod
    def _checked(name: str) -> str:
        if name not in CONTROLLERS:
            raise ValueError(f"unknown controller {name!r}; choose from {sorted(CONTROLLERS)}")
        return name

    def configure(self, space: KnobSpace,
                  price: Callable[[Mapping[str, np.ndarray]], FramePrice]) -> None:
        """Give the loop its knob space and pricing (again after they change); starts the
        controller afresh."""
        self.space, self.price = space, price
        self._start()

    def _start(self) -> None:
        if self.space is None:
            return
        name = self._controller if self._tuning else "fixed"
        options = LoopOptions(self._held, self.pi_gains, self.feedback_gain, self.settle)
        ctrl = CONTROLLERS[name].from_loop(self.space, self._target, options)
        self.tuner = Tuner(self.space, self._predict, self._target, controller=ctrl)

    @property
    def target_seconds(self) -> float:
        return self._target

    @target_seconds.setter
    def target_seconds(self, value: float) -> None:
        self._target = check_target(value)
        if self.tuner is not None:
            self.tuner.target_seconds = self._target

    @property
    def controller(self) -> str:
        """The chosen controller's name (``autotune.CONTROLLERS``), also while tuning is off."""
        return self._controller

    def use_controller(self, name: str, pi_gains: tuple[float, float] | None = None) -> None:
        """Start the named controller afresh (PI with ``pi_gains`` if given)."""
        self._controller = self._checked(name)
        if pi_gains is not None:
            self.pi_gains = pi_gains
        self._start()

    @property
    def tuning(self) -> bool:
        return self._tuning

    @tuning.setter
    def tuning(self, on: bool) -> None:
        if bool(on) == self._tuning:
            return
        self._tuning = bool(on)
        self._held = None if on or self.last_knobs is None else dict(self.last_knobs)
        self._start()

    def hold(self, knobs: Mapping[str, Any]) -> None:
        """The knobs a fixed controller holds (tuning off, or the ``fixed`` baseline, e.g. as
        tuned by measurement), from the next frame on."""
        self._held = dict(knobs)
        self._start()

    def settle_raises(self, on: bool) -> None:
        """Whether feed-forward settles its small raises from the next frame on (``settle``;
        the other controllers raise by their own rules): a renderer whose view stands still
        settles them, since a frame that looks cheaper there is noise."""
        controller = self.tuner.controller if self.tuner is not None else None
        if isinstance(controller, FeedForwardController):
            controller.settling = bool(on)

    @property
    def needs_price(self) -> bool:
        """Whether the next :meth:`choose` prices candidates (a renderer that knows it does not
        need not measure the frame's workload: a baseline pays only its own work)."""
        return self.tuner is not None and self.tuner.controller.needs_price

    @property
    def correction(self) -> float:
        """The controller's slow correction of the modelled seconds (1 before any frame)."""
        return 1.0 if self.tuner is None else self.tuner.correction

    def _predict(self, candidates: Mapping[str, np.ndarray]) -> np.ndarray:
        """What the controller multiplies by its correction: see the module's rules."""
        p = self.price(candidates)
        modelled = np.asarray(p.modelled, np.float64)
        correction = self.tuner.controller.correction  # asked while the tuner chooses
        if self.corrects_itself:
            return (modelled + p.known) / correction
        return modelled + p.known / correction

    def choose(self) -> Decision:
        """The knobs of the next frame (the renderer must be configured)."""
        if self.tuner is None:
            raise RuntimeError("the frame loop has no knob space and price yet (configure())")
        decision = self.tuner.choose()
        self.last_knobs = decision.knobs  # copied where held (tuning off)
        return decision

    def expected(self, modelled: float, known: float) -> float:
        """The frame time the loop expects for a rendered setting's ``modelled`` + ``known``
        seconds (its corrected prediction)."""
        if self.corrects_itself:
            return modelled + known
        return modelled * self.correction + known

    def observe(self, measured: float, expected: float, teaches: bool = True) -> None:
        """Feed one rendered frame back by the module's rules."""
        model_based = self.tuner.controller.model_based
        self.tuner.observe(expected if model_based and not teaches else measured)


class Governed:
    """What a governed renderer exposes of its :class:`FrameLoop` (``self.loop``): the same
    target, controller and tuning switch for every renderer."""

    loop: FrameLoop

    @property
    def target_seconds(self) -> float:
        return self.loop.target_seconds

    @target_seconds.setter
    def target_seconds(self, seconds: float) -> None:
        self.loop.target_seconds = seconds

    @property
    def controller(self) -> str:
        """The chosen controller's name (``autotune.CONTROLLERS``)."""
        return self.loop.controller

    def use_controller(self, name: str, pi_gains: tuple[float, float] | None = None) -> None:
        """Start the named controller afresh (PI with ``pi_gains`` if given)."""
        self.loop.use_controller(name, pi_gains)

    @property
    def tuning(self) -> bool:
        """Off: the frames hold the last chosen knobs."""
        return self.loop.tuning

    @tuning.setter
    def tuning(self, on: bool) -> None:
        self.loop.tuning = on

    @property
    def tuner(self) -> Tuner | None:
        """The loop's tuner once configured (its controller, correction and history)."""
        return self.loop.tuner
