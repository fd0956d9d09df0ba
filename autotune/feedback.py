"""Slow outer feedback: a multiplicative correction that removes the model's bias.

``corrected = correction * predicted``. After each frame the innovation
``e = log(measured / predicted) - log(correction)`` drives a low-gain integrator in log space,
``log(correction) += gain * e``, which converges geometrically (factor ``1 - gain`` per frame)
to the model's true bias and averages measurement noise down by ``sqrt(gain / (2 - gain))``.

Start-up: the first frames use the decreasing gain ``max(gain, 1 / (n + 1))`` (the running
mean of the first n log ratios), so a model that is off by 40 % on its first view is corrected
within a frame or two instead of the ~20 frames a low gain needs; the first frame has no
reference yet and is never treated as an outlier.

Robustness: an innovation larger than ``outlier`` (in log units) is treated as a one-off spike
(a page fault, a compositor hiccup) and ignored, unless ``persist`` such outliers of the same
sign arrive in a row: then it is a real change and is integrated. A single 10x frame therefore
leaves the correction, and so the chosen quality, untouched.

Change detection: a lasting change of the renderer's cost (a heavier view, another volume, a
slower device clock) shows as ``persist`` innovations in a row of the same sign, each larger
than ``shift`` (log units, above the frame noise). Then the correction jumps by their median
and the start-up averaging restarts, so the tuner is back on target ``persist`` + 1 frames
after the change instead of the ~1/gain frames an integrator needs. A spike is one frame, so
it never triggers a jump; a jump lands on the new level, so it cannot oscillate.

Scope: a correction is learnt at some size of the workload (the running log-mean of the
predicted seconds it was fed, or of the workload's price at fixed knobs where the renderer
gives one). :meth:`BiasCorrection.learnt_near` says whether a new workload is within a factor
of that size; a renderer whose workload jumps far outside it (an empty view turning into a
full one) restarts the correction instead of carrying a bias learnt on a different workload
(:meth:`PartCorrections.rescope`). A knob that cuts a phase to a fifth is not another workload:
scoped by the predicted seconds, the AO correction restarted when a 2x cost step dropped the AO
rays, and the next frame raised them back over budget.
"""

from __future__ import annotations

import math
import statistics
from collections import deque


class BiasCorrection:
    """Low-gain log-space integrator of measured/predicted ratios with outlier rejection."""

    def __init__(self, gain: float = 0.1, outlier: float = math.log(1.5), persist: int = 3,
                 shift: float = math.log(1.12)) -> None:
        if not 0 < gain <= 1:
            raise ValueError(f"gain must be in (0, 1], got {gain!r}")
        if not outlier > 0:
            raise ValueError(f"outlier must be > 0 (log units), got {outlier!r}")
        if persist < 1:
            raise ValueError(f"persist must be >= 1, got {persist!r}")
        self.gain = float(gain)
        self.outlier = float(outlier)
        self.persist = int(persist)
        if not 0 < shift <= outlier:
            raise ValueError(f"shift must be in (0, outlier], got {shift!r}")
        self.shift = float(shift)
        self.shifts = 0  # lasting changes detected so far
        self._recent: deque[float] = deque(maxlen=self.persist)
        self.log_correction = 0.0
        self.rejected = 0
        self._streak = 0  # signed count of consecutive same-sign outliers
        self.observed = 0  # frames folded in so far
        self.log_scale = 0.0  # running log-mean of the predicted seconds learnt on
        self._scaled = 0  # frames in log_scale

    @property
    def correction(self) -> float:
        """Factor applied to every prediction (1.0 = trust the model)."""
        return math.exp(self.log_correction)

    def update(self, predicted: float, measured: float, scale: float | None = None) -> float:
        """Fold one frame's measured/predicted ratio in; returns the new correction.
        ``scale``: the size the correction is learnt at (:meth:`learnt_near`), ``predicted``
        unless given (a renderer whose knobs change the prediction gives the workload's price
        at fixed knobs, so that a knob change is not taken for another workload)."""
        if not (predicted > 0 and measured > 0 and math.isfinite(predicted * measured)):
            return self.correction
        size = predicted if scale is None or not scale > 0 else scale
        self._scaled += 1
        self.log_scale += (max(self.gain, 1.0 / self._scaled)
                           * (math.log(size) - self.log_scale))
        innovation = math.log(measured / predicted) - self.log_correction
        self._recent.append(innovation)
        if self.observed and self._lasting_change():
            self.log_correction += statistics.median(self._recent)
            self._recent.clear()
            self._streak = 0
            self.shifts += 1
            self.observed = 1  # restart the start-up average at the new level
            return self.correction
        if self.observed and abs(innovation) > self.outlier:
            sign = 1 if innovation > 0 else -1
            self._streak = self._streak + sign if self._streak * sign > 0 else sign
            if abs(self._streak) < self.persist:
                self.rejected += 1
                return self.correction
        else:
            self._streak = 0
        self.log_correction += max(self.gain, 1.0 / (self.observed + 1)) * innovation
        self.observed += 1
        return self.correction

    def learnt_near(self, predicted: float, factor: float) -> bool:
        """Whether ``predicted`` seconds are within ``factor`` of the size this correction was
        learnt at (True before any frame: nothing learnt, nothing to distrust)."""
        if self._scaled == 0 or not predicted > 0:
            return True
        return abs(math.log(predicted) - self.log_scale) <= math.log(factor)

    def restart(self) -> None:
        """Forget what was learnt: correction 1, start-up averaging from the next frame."""
        self.log_correction = self.log_scale = 0.0
        self.observed = self._scaled = self._streak = 0
        self._recent.clear()

    def _lasting_change(self) -> bool:
        """``persist`` innovations in a row, same sign, each beyond ``shift`` (all above it or
        all below minus it; asked every frame, so no generators)."""
        r = self._recent
        return len(r) == self.persist and (min(r) > self.shift or max(r) < -self.shift)


#: How far (a factor of the predicted seconds) a part's workload may move from where its
#: correction was learnt before the correction is restarted: the orbits' view-to-view changes
#: stay well inside it, an empty view turning into a full one does not
REGIME_FACTOR = 3.0


class PartCorrections:
    """One :class:`BiasCorrection` per named part of a prediction (a renderer's phases).

    A single correction of the whole frame lets one mispriced part distort the price of the
    others (a shadow phase 40 % over makes every AO ray look dearer); each part corrected by
    its own measured/predicted ratio keeps their relative prices right. A part that did not
    run in a frame (predicted or measured 0) teaches nothing that frame.
    """

    def __init__(self, parts: tuple[str, ...], **bias_options: float) -> None:
        if not parts:
            raise ValueError("PartCorrections needs at least one part")
        self.parts = tuple(parts)
        self._bias = {p: BiasCorrection(**bias_options) for p in self.parts}

    def factors(self) -> dict[str, float]:
        """``{part: correction}``: what each part's prediction is multiplied by."""
        return {p: b.correction for p, b in self._bias.items()}

    def rescope(self, predicted: dict[str, float], factor: float = REGIME_FACTOR) -> list[str]:
        """Restart the parts whose ``predicted`` seconds (the coming frame's workload, priced
        as the sizes given to :meth:`update`) are more than ``factor`` away from the size their
        correction was learnt at; returns their names. A bias learnt on an empty view's miss
        rays says nothing about a view full of geometry."""
        far = [p for p, b in self._bias.items()
               if predicted.get(p, 0.0) > 0 and not b.learnt_near(predicted[p], factor)]
        for p in far:
            self._bias[p].restart()
        return far

    def update(self, predicted: dict[str, float], measured: dict[str, float],
               scales: dict[str, float] | None = None) -> None:
        """Fold one frame in: each part's measured over predicted seconds (parts that ran);
        ``scales``: each part's size to scope it by (:meth:`BiasCorrection.update`)."""
        for part, bias in self._bias.items():
            p, m = predicted.get(part, 0.0), measured.get(part, 0.0)
            if p > 0 and m > 0:
                bias.update(p, m, scales.get(part) if scales else None)


class PartDrift:
    """Fast per-part factors for prices made on a stale measurement of the workload.

    A renderer that measures the workload only on some views (a probe policy) prices the
    others on the last measurement; the frames rendered since then say how far each part has
    moved (kernels time their phases at no cost). Each factor follows the log of measured /
    priced seconds with ``gain`` on frames priced on a stale workload, and goes back to 1 when
    the workload is measured afresh (:meth:`restart`). A frame more than ``outlier`` (log
    units) off is a spike and moves nothing."""

    def __init__(self, gain: float, outlier: float = math.log(1.5)) -> None:
        if not 0 < gain <= 1:
            raise ValueError(f"drift gain must be in (0, 1], got {gain!r}")
        self.gain, self.outlier = float(gain), float(outlier)
        self._log: dict[str, float] = {}

    def factor(self, part: str) -> float:
        """One part's factor (1 where it has not drifted): asked every frame by a renderer
        whose frame is one part, right after a render has evicted the caches."""
        return math.exp(self._log.get(part, 0.0))

    def factors(self, parts: tuple[str, ...]) -> dict[str, float]:
        """``{part: factor}`` for ``parts`` (1 for a part that has not drifted)."""
        return {p: self.factor(p) for p in parts}

    def restart(self) -> None:
        """The workload was measured afresh: nothing has drifted yet."""
        self._log.clear()

    def update(self, priced: dict[str, float], measured: dict[str, float]) -> None:
        """Fold in one frame priced on the stale workload: each part's ``priced`` seconds
        (drift included) against its ``measured`` seconds (parts that ran)."""
        for part, p in priced.items():
            self.update_part(part, p, measured.get(part, 0.0))

    def update_part(self, part: str, priced: float, measured: float) -> None:
        """:meth:`update` for one part's ``priced`` and ``measured`` seconds."""
        if priced > 0 and measured > 0:
            ratio = math.log(measured / priced)
            if abs(ratio) <= self.outlier:
                self._log[part] = self._log.get(part, 0.0) + self.gain * ratio


SPIKE_FLOOR = 1e-3  # seconds: an overhead this close to its estimate is never a spike


class RunningOverhead:
    """The part of a frame no model prices (launch, read-back, the choice itself, sharing the
    knobs): the running mean of the first frames' measured overhead, then a slow average with
    ``gain`` that follows a lasting change (a resize, another volume).

    One-off frames do not teach it, as engines drop long frames from their averages: the
    first frame's overhead is not learnt (a renderer's first frame builds its search and price
    tables), and one more than ``spike`` times the estimate (and :data:`SPIKE_FLOOR` over it)
    waits for the next frame, which learns both if it is high too (a lasting change) and drops
    it if not (a stall). ``dropped`` counts the frames left out.
    """

    def __init__(self, gain: float = 0.2, spike: float = 3.0) -> None:
        if not 0.0 < gain <= 1.0:
            raise ValueError(f"overhead gain must be in (0, 1], got {gain!r}")
        if not (spike >= 1.0 and math.isfinite(spike)):
            raise ValueError(f"overhead spike must be a finite factor >= 1, got {spike!r}")
        self.gain, self.spike = gain, spike
        self.seconds = 0.0
        self.frames = 0  # frames shown, the left-out ones included
        self.learned = 0
        self.dropped = 0
        self._held: float | None = None

    def start_from(self, seconds: float) -> None:
        """Take an overhead measured outside the loop (a warm-up frame) as the estimate the
        first frames are priced with; the first frame shown is still left out."""
        self.seconds = max(0.0, float(seconds))
        self.learned = max(self.learned, 1)

    def update(self, seconds: float) -> None:
        """Take one frame's overhead (seconds; a negative one counts as none)."""
        seconds = max(0.0, seconds)
        self.frames += 1
        if self.frames == 1:
            self.dropped += 1
            return
        held, self._held = self._held, None
        if self.learned and seconds > self.spike * self.seconds + SPIKE_FLOOR:
            if held is None:
                self._held = seconds
                return
            self._learn(held)
        elif held is not None:
            self.dropped += 1
        self._learn(seconds)

    def _learn(self, seconds: float) -> None:
        weight = max(self.gain, 1.0 / (self.learned + 1))
        self.seconds += weight * (seconds - self.seconds)
        self.learned += 1


class ModelFitCheck:
    """Whether a model's calibration fits the machine it prices: the geometric mean of
    measured / predicted (uncorrected) seconds over a renderer's first ``frames`` frames that
    teach, set against ``factor``. The slow corrections take any such bias within a few frames,
    but a new scene's first frame is priced before they can: on a slower host of the CPU model
    a calibration was shipped for, it priced dragon's kernels at 0.74x what they took, and the
    demo's first frame was 27-38 % over its target. Checked once: later frames are the
    corrections' business."""

    def __init__(self, frames: int = 10, factor: float = 1.3) -> None:
        if frames < 1:
            raise ValueError(f"fit check frames must be >= 1, got {frames!r}")
        if not factor > 1.0:
            raise ValueError(f"fit check factor must be > 1, got {factor!r}")
        self.frames, self.factor = int(frames), float(factor)
        self._log_sum = 0.0
        self._seen = 0
        self.ratio: float | None = None  # measured / predicted once checked

    def observe(self, predicted: float, measured: float) -> float | None:
        """Fold one frame in (seconds; a frame with either not > 0 is skipped); on the frame
        that completes the check, the ratio if it is beyond ``factor`` either way, else None."""
        if self.ratio is not None or not (predicted > 0 and measured > 0):
            return None
        self._log_sum += math.log(measured / predicted)
        self._seen += 1
        if self._seen < self.frames:
            return None
        self.ratio = math.exp(self._log_sum / self._seen)
        return self.ratio if abs(math.log(self.ratio)) > math.log(self.factor) else None
