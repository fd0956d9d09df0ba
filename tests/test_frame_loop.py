"""The core's frame loop: the controller it starts takes the loop's gains; it starts any
registered controller."""

import numpy as np
import pytest

from autotune import FloatKnob, FramePrice, KnobSpace
from autotune.controllers import (
    CONTROLLERS,
    Controller,
    FeedForwardController,
    FixedController,
    PIController,
    timed_decision,
)
from autotune.frame_loop import DEFAULT_FEEDBACK_GAIN, FrameLoop
from autotune.search import Choice


def _configured(loop: FrameLoop) -> FrameLoop:
    space = KnobSpace([FloatKnob("quality", 0.0, 1.0, 5)])
    loop.configure(space, lambda knobs: FramePrice(0.01 + 0.01 * np.asarray(knobs["quality"])))
    return loop


def test_feed_forward_feedback_takes_the_loops_gain():
    default = _configured(FrameLoop(0.015)).tuner.controller
    assert isinstance(default, FeedForwardController)
    assert default.feedback.gain == DEFAULT_FEEDBACK_GAIN
    loop = _configured(FrameLoop(0.015, feedback_gain=0.3))
    assert loop.tuner.controller.feedback.gain == 0.3
    loop.use_controller("pi")  # other controllers keep their own gains
    assert isinstance(loop.tuner.controller, PIController)
    loop.use_controller("feedforward")  # started afresh with the same gain
    assert loop.tuner.controller.feedback.gain == 0.3


def test_the_loop_switches_feed_forwards_settling_and_leaves_other_controllers_alone():
    loop = _configured(FrameLoop(0.015, settle=(3, 0.1)))
    loop.settle_raises(False)
    assert loop.tuner.controller.settling is False
    loop.settle_raises(True)
    assert loop.tuner.controller.settling is True
    loop.use_controller("pi")
    loop.settle_raises(False)  # PI raises by its own rule
    assert not hasattr(loop.tuner.controller, "settling")


def test_a_bad_feedback_gain_is_refused_when_the_controller_starts():
    with pytest.raises(ValueError, match="gain must be in"):
        _configured(FrameLoop(0.015, feedback_gain=1.5))


def test_the_loop_starts_every_controller_by_its_from_loop():
    loop = _configured(FrameLoop(0.015, pi_gains=(0.2, 0.3)))
    loop.use_controller("pi")
    assert (loop.tuner.controller.kp, loop.tuner.controller.ki) == (0.2, 0.3)
    loop.hold({"quality": 0.5})
    loop.use_controller("fixed")
    assert isinstance(loop.tuner.controller, FixedController)
    assert loop.tuner.controller.knobs == {"quality": 0.5}


class _Cheapest(Controller):
    """A controller the loop has never heard of: always the lowest setting."""

    label = "cheapest"
    summary = "the lowest setting"

    def __init__(self, space, target_seconds):
        super().__init__(space, target_seconds)
        self.seen: list[float] = []

    def choose(self, predictor):
        return timed_decision(Choice(self.space.lowest(), 0.0, 0.0, False, 0), 0.0)

    def observe(self, measured_seconds: float) -> None:
        self.seen.append(measured_seconds)


def test_a_new_controller_needs_only_its_registry_line(monkeypatch):
    monkeypatch.setitem(CONTROLLERS, "cheapest", _Cheapest)
    loop = _configured(FrameLoop(0.015, "cheapest"))
    assert isinstance(loop.tuner.controller, _Cheapest)
    assert loop.choose().knobs == {"quality": 0.0}
    loop.observe(0.02, expected=0.01, teaches=False)  # not model-based: the measured frame
    assert loop.tuner.controller.seen == [0.02]
