"""In-application auto-tuning runtime: predict a frame's cost, choose knobs, learn from the measurement.

Floor 1 of the layers (docs/architecture.md): the tuner core imports only ``common``; it knows
nothing about rendering.

Embedding it in a render loop (this example is run by the tests)::

    from autotune import BoolKnob, IntKnob, KnobSpace, Tuner

    def my_model(c):  # predicted seconds for many candidates at once (numpy arrays in and out)
        return 0.004 + 0.0004 * c["ao_rays"] + 0.006 * c["shadows"]

    def render(ao_rays, shadows):  # your renderer
        pass

    space = KnobSpace([IntKnob("ao_rays", 0, 64), BoolKnob("shadows")])
    tuner = Tuner(space, predictor=my_model, target_seconds=1 / 30)
    for _ in range(3):
        with tuner.frame() as knobs:
            render(**knobs)

The core knows nothing about ray tracing: any renderer with knobs and a cost model will do.
With no cost model, ``predictor=LearnedPredictor(space)`` learns one from the frames
(:mod:`autotune.learned`); ``HybridPredictor(model, space)`` learns a model's residual.
"""  # noqa: E501

from autotune.controllers import (
    CONTROLLER_NAMES,
    CONTROLLERS,
    DEFAULT_CONTROLLER,
    GOVERNOR_SETTLE,
    Controller,
    Decision,
    FeedForwardController,
    FixedController,
    GovernorController,
    PIController,
)
from autotune.feedback import (
    BiasCorrection,
    ModelFitCheck,
    PartCorrections,
    PartDrift,
    RunningOverhead,
)
from autotune.frame_loop import FrameLoop, FramePrice, Governed
from autotune.knobs import BoolKnob, FloatKnob, IntKnob, Knob, KnobSpace
from autotune.learned import (
    UNEXPLORED_SECONDS,
    Confidence,
    HybridPredictor,
    LearnedPredictor,
    Learner,
    NotLearnedError,
)
from autotune.search import BisectionSearch, GridSearch, Predictor, PredictorError
from autotune.tuner import AutotuneWarning, FrameRecord, Tuner

__all__ = [
    "CONTROLLERS",
    "CONTROLLER_NAMES",
    "DEFAULT_CONTROLLER",
    "GOVERNOR_SETTLE",
    "UNEXPLORED_SECONDS",
    "AutotuneWarning",
    "BiasCorrection",
    "BisectionSearch",
    "BoolKnob",
    "Confidence",
    "Controller",
    "Decision",
    "FeedForwardController",
    "FixedController",
    "GovernorController",
    "FloatKnob",
    "FrameLoop",
    "FramePrice",
    "Governed",
    "FrameRecord",
    "GridSearch",
    "HybridPredictor",
    "IntKnob",
    "Knob",
    "KnobSpace",
    "LearnedPredictor",
    "Learner",
    "ModelFitCheck",
    "NotLearnedError",
    "PIController",
    "PartCorrections",
    "PartDrift",
    "Predictor",
    "PredictorError",
    "RunningOverhead",
    "Tuner",
]
