"""Each rank's render-cost correction, learned from the frames the model priced.

A render model fitted on other volumes (the tuner swapped to a volume it did not calibrate)
misprices what a sample costs there by a factor per rank that holds from frame to frame
(aneurism from bonsai and ironprot: 15-19 % off per rank); a model fitted on the volume
itself is off by little. The factor is the geometric mean of measured / predicted CPU seconds
over the frames seen, shrunk towards 1 as if ``prior_frames`` frames had measured exactly
what was predicted, so the first frames move it only part of the way.

Chosen on the validation volumes' collected frames (aneurism, neghip, field:96, 12 views 30°
apart with random knobs, 2 ranks; the prior from 0.5, 1, 2, 4 frames): carried over from
bonsai and ironprot the per-rank error 11.1 -> 9.1 % at 256² and 10.0 -> 8.1 % at 512²;
calibrated on the volume itself 8.4 -> 7.5 % and 6.7 -> 6.7 % (a smaller prior helped the
first case and hurt the second). Pure numbers.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

PRIOR_FRAMES = 4.0
#: Frames a correction learns from: by then a frame moves it by at most 1/28 of that frame's
#: log ratio, and pricing the frame's setting once more per rank costs the tuner about 80 µs
#: a frame after a render at 256² (as much as the rest of its bookkeeping)
LEARNING_FRAMES = 24


class RankCorrection:
    """Per rank, ``exp(Σ log(measured / predicted) / (frames + prior_frames))``, kept as
    running sums (replaced, not updated in place, so a shallow copy keeps the factor as it
    was)."""

    def __init__(self, ranks: int, prior_frames: float = PRIOR_FRAMES) -> None:
        self.prior_frames = float(prior_frames)
        self._log_sum = np.zeros(ranks)
        self._frames = np.zeros(ranks)
        self._learning = True

    @property
    def learning(self) -> bool:
        """Whether some rank has seen fewer than LEARNING_FRAMES frames (kept as a flag: the
        tuner asks every frame, and a NumPy reduction right after a render took 37 µs)."""
        return self._learning

    @property
    def factor(self) -> NDArray[np.float64]:
        """(ranks,) what each rank's predicted render seconds are multiplied by."""
        return np.exp(self._log_sum / (self._frames + self.prior_frames))

    def observe(self, measured: ArrayLike, predicted: ArrayLike) -> None:
        """Take one frame: each rank's measured and (uncorrected) predicted CPU seconds; a
        rank with either not > 0 (nothing rendered, nothing timed) teaches nothing."""
        m = np.asarray(measured, np.float64)
        p = np.asarray(predicted, np.float64)
        ok = (m > 0) & (p > 0) & np.isfinite(m) & np.isfinite(p)
        ratio = np.log(np.divide(m, p, out=np.ones_like(m), where=ok))
        self._log_sum = self._log_sum + np.where(ok, ratio, 0.0)
        self._frames = self._frames + ok
        self._learning = bool(np.min(self._frames, initial=np.inf) < LEARNING_FRAMES)
