"""The core's frame loop: the controller it starts takes the loop's gains."""

import numpy as np
import pytest

from autotune import FloatKnob, FramePrice, KnobSpace
from autotune.controllers import FeedForwardController, PIController
from autotune.frame_loop import DEFAULT_FEEDBACK_GAIN, FrameLoop


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


def test_a_bad_feedback_gain_is_refused_when_the_controller_starts():
    with pytest.raises(ValueError, match="gain must be in"):
        _configured(FrameLoop(0.015, feedback_gain=1.5))
