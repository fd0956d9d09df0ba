"""Replay runner: compare controllers on identical recorded frames, deterministically.

In the spirit of Kernel Tuner's simulation runner. A :class:`Recording` holds, for every frame of
a camera path, the model's predicted seconds and the measured seconds of each setting in a small
grid (ordered worst look first, with a quality score each). :func:`replay` runs any controller
over it: the controller sees the frame's predictions, its choice is "rendered" by looking up the
measured time of that setting on that frame, and the controller observes it. No renderer, no
noise between controllers, the same answer every time — so CI can compare controllers.

The baselines get a fair chance here: :func:`fixed_by_measurement` picks the fixed
setting by measurement on the first frame, :func:`tune_pi_gains` tunes the PI gains on a
recording that is not the one evaluated.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autotune.controllers import Controller, FixedController, PIController
from autotune.knobs import IntKnob, KnobSpace
from common.json_file import check_versioned, versioned

RECORDING_KIND = "autotune-recording"
RECORDING_VERSION = 1


class RecordingError(ValueError):
    """A recording is malformed; the message names it and the problem."""


@dataclass
class Recording:
    """Predicted and measured seconds of every grid setting on every frame of a path."""

    settings: list[dict[str, Any]]  # the grid, worst look first
    quality: np.ndarray  # (n,) non-decreasing
    predicted: np.ndarray  # (frames, n) model seconds (uncorrected)
    measured: np.ndarray  # (frames, n) measured seconds of the controlled time
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.quality = np.asarray(self.quality, np.float64)
        self.predicted = np.asarray(self.predicted, np.float64)
        self.measured = np.asarray(self.measured, np.float64)
        n = len(self.settings)
        if n < 1 or self.quality.shape != (n,):
            raise RecordingError(f"recording: {n} settings but {self.quality.shape} qualities")
        if self.predicted.shape != self.measured.shape or self.predicted.ndim != 2 \
                or self.predicted.shape[1] != n or self.predicted.shape[0] < 1:
            raise RecordingError(f"recording: predicted {self.predicted.shape} and measured "
                                 f"{self.measured.shape} must both be (frames, {n})")
        for name, a in (("predicted", self.predicted), ("measured", self.measured)):
            if not np.all(np.isfinite(a)) or np.any(a <= 0):
                raise RecordingError(f"recording: {name} times must be finite and > 0")
        if np.any(np.diff(self.quality) < 0):
            raise RecordingError("recording: settings must be ordered worst look first")

    @property
    def frames(self) -> int:
        return self.predicted.shape[0]

    def space(self) -> KnobSpace:
        """One knob, the setting's index, scored by the recorded quality."""
        quality = self.quality
        return KnobSpace([IntKnob("setting", 0, len(self.settings) - 1)],
                         quality=lambda c: quality[np.asarray(c["setting"], int)])

    def to_dict(self) -> dict[str, Any]:
        return versioned(RECORDING_KIND, RECORDING_VERSION, {
            "settings": self.settings, "quality": self.quality.tolist(),
            "predicted": self.predicted.tolist(), "measured": self.measured.tolist(),
            "meta": self.meta})

    @classmethod
    def from_dict(cls, d: Any, where: str) -> Recording:
        d = check_versioned(d, RECORDING_KIND, RECORDING_VERSION, where, RecordingError,
                            "recording")
        try:
            return cls(list(d["settings"]), d["quality"], d["predicted"], d["measured"],
                       dict(d.get("meta", {})))
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordingError(f"{where}: {exc}") from None


@dataclass
class ReplayResult:
    """Per frame: the chosen setting, its measured and predicted (corrected) seconds."""

    chosen: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray  # corrected prediction of the chosen setting (nan for PI)
    quality: np.ndarray
    target: np.ndarray

    def summary(self, tolerance: float = 0.05) -> dict[str, float]:
        """Mean / p95 |frame − target| / target, frames over target + tolerance, mean quality,
        and the corrected model's error against the measured frame."""
        err = np.abs(self.measured - self.target) / self.target
        model = np.abs(self.predicted - self.measured) / self.measured
        model = model[np.isfinite(model)]
        return {"mean_error": float(err.mean()), "p95_error": float(np.percentile(err, 95)),
                "over": int(np.sum(self.measured > self.target * (1 + tolerance))),
                "frames": int(len(err)), "mean_quality": float(self.quality.mean()),
                "model_error": float(model.mean()) if model.size else math.nan}


def replay(recording: Recording, controller: Controller,
           target: float | Sequence[float] | None = None) -> ReplayResult:
    """Run ``controller`` (built on ``recording.space()``) over every recorded frame."""
    frames = recording.frames
    targets = np.broadcast_to(np.asarray(controller.target_seconds if target is None
                                         else target, np.float64), (frames,))
    chosen = np.empty(frames, int)
    measured = np.empty(frames)
    predicted = np.empty(frames)
    for f in range(frames):
        controller.target_seconds = float(targets[f])
        row = recording.predicted[f]

        def predictor(c: Mapping[str, np.ndarray], row: np.ndarray = row) -> np.ndarray:
            return row[np.asarray(c["setting"], int)]

        decision = controller.choose(predictor)
        i = int(decision.knobs["setting"])
        chosen[f], measured[f] = i, recording.measured[f, i]
        predicted[f] = decision.corrected
        controller.observe(measured[f])
    return ReplayResult(chosen, measured, predicted, recording.quality[chosen], targets.copy())


def fixed_by_measurement(recording: Recording, target: float, frame: int = 0) -> int:
    """The best-looking setting whose measured time on ``frame`` fits ``target`` (the paper's
    hand-tuned baseline); the cheapest setting if none fits."""
    fits = np.flatnonzero(recording.measured[frame] <= target)
    if fits.size == 0:
        return int(np.argmin(recording.measured[frame]))
    return int(fits[np.argmax(recording.quality[fits])])


def fixed_controller(recording: Recording, target: float) -> FixedController:
    """A fixed controller holding the setting tuned by measurement on the first frame."""
    return FixedController(recording.space(), target,
                           knobs={"setting": fixed_by_measurement(recording, target)})


def tune_pi_gains(recordings: Sequence[Recording], target_of: Callable[[Recording], float],
                  gains: Sequence[float] = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8)
                  ) -> tuple[float, float]:
    """The (kp, ki) with the lowest mean |frame − target| / target over training recordings."""
    best, best_err = (0.1, 0.1), math.inf
    for kp, ki in itertools.product(gains, gains):
        err = np.mean([replay(r, PIController(r.space(), target_of(r), kp=kp, ki=ki))
                       .summary()["mean_error"] for r in recordings])
        if err < best_err:
            best, best_err = (kp, ki), float(err)
    return best
