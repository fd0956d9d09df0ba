"""Controllers: each frame ``choose(predictor)`` a setting, then ``observe(measured_seconds)``.

* :class:`FeedForwardController` - the product: model-driven search every frame plus the slow
  bias-correcting feedback (section 4.4, figures 1 and 2 of Ganestam & Doggett, "Auto-tuning
  Interactive Ray Tracing using an Analytical GPU Architecture Model").
* :class:`FixedController` - baseline: tuned with the model on the first frame, then frozen.
* :class:`PIController` - baseline: no model; a PI law on the previous frame's measured time
  drives a quality level in [0, 1].
* :class:`GovernorController` - baseline: no model; a dynamic-resolution governor's rules as
  game engines ship them (drop at once after 2 frames over budget, raise slowly with headroom).

A new controller is one file here (a :class:`Controller` with its ``label`` and ``summary``,
and :meth:`Controller.from_loop` if the frame loop's options concern it) plus one line in
:data:`CONTROLLERS`: the frame loop starts it by ``from_loop``, the CLI offers its name and
the viewer gives it the next number key.
"""

from autotune.controllers.base import (
    Controller,
    Decision,
    LoopOptions,
    check_target,
    timed_decision,
)
from autotune.controllers.feedforward import GOVERNOR_SETTLE, FeedForwardController
from autotune.controllers.fixed import FixedController
from autotune.controllers.governor import GovernorController
from autotune.controllers.pi import PIController

# The one registry of controllers: the name a caller passes (Tuner, TunedRenderer, the CLI and
# the viewer) and the class. The first is the default; the viewer's keys follow this order.
CONTROLLERS: dict[str, type[Controller]] = {
    "feedforward": FeedForwardController,
    "fixed": FixedController,
    "pi": PIController,
    "governor": GovernorController,
}
CONTROLLER_NAMES: dict[str, str] = {name: c.label for name, c in CONTROLLERS.items()}
DEFAULT_CONTROLLER = next(iter(CONTROLLERS))

__all__ = [
    "CONTROLLERS",
    "CONTROLLER_NAMES",
    "DEFAULT_CONTROLLER",
    "GOVERNOR_SETTLE",
    "Controller",
    "Decision",
    "FeedForwardController",
    "FixedController",
    "GovernorController",
    "LoopOptions",
    "PIController",
    "check_target",
    "timed_decision",
]
