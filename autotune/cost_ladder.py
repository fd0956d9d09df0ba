"""A knob's cost ladder: the columns that let a learned model price steps it has not taken.

Every render loop shares one thing: a knob's higher level costs at least as much as its lower
one. The learned predictor (:mod:`autotune.learned`) fits log seconds as a constant plus, per
knob, a ladder of *rungs*: rung ``j`` of a knob covers its levels ``knots[j]..knots[j + 1]``
(one level per rung for a knob of at most ``rungs + 1`` levels, even segments of several
levels for a longer one); its column runs from 0 to 1 across the rung and its coefficient,
kept >= 0, is what climbing the rung adds to the log cost. The model is log-linear: a
setting's log cost is the constant plus the rungs each knob climbs, so knobs trade (lowering
one knob buys exactly its rungs for another).

:meth:`CostLadder.penalty` ties each rung's cost per level to its neighbours' (``smoothness``
frames' worth of evidence that they are equal): a rung no frame has reached takes the slope of the
nearest one that has, so the next step of a knob is priced from the steps already taken, and
rungs between measured ones are interpolated. A knob never varied has no slope to continue:
its rungs stay at zero and the predictor prices its first step with its margin instead.
"""

from __future__ import annotations

import numpy as np

from autotune.knobs import KnobSpace

RUNGS = 8  # at most this many rungs per knob: a longer knob's rungs span several levels


class CostLadder:
    """Per-knob rung columns and the prior that ties neighbouring rungs of a knob."""

    def __init__(self, space: KnobSpace, rungs: int = RUNGS, smoothness: float = 1.0) -> None:
        if isinstance(rungs, bool) or not isinstance(rungs, int) or rungs < 1:
            raise ValueError(f"rungs must be an integer >= 1, got {rungs!r}")
        if not (isinstance(smoothness, (int, float)) and 0 <= smoothness < float("inf")):
            raise ValueError(f"smoothness must be a finite number >= 0, got {smoothness!r}")
        self.space = space
        self.smoothness = float(smoothness)
        self.knots = [np.unique(np.round(np.linspace(0, len(k) - 1, min(len(k) - 1, rungs) + 1))
                                .astype(int)) for k in space.knobs]
        self.owner = np.array([j for j, knots in enumerate(self.knots)
                               for _ in range(len(knots) - 1)], dtype=int)
        self.width = len(self.owner)

    def columns(self, levels: np.ndarray) -> np.ndarray:
        """Rung columns of each setting (rows: settings, columns: one level index per knob)."""
        levels = np.asarray(levels, dtype=float).reshape(-1, len(self.knots))
        cols = []
        for j, knots in enumerate(self.knots):
            for low, high in zip(knots[:-1], knots[1:], strict=True):
                cols.append(np.clip(levels[:, j] - low, 0, high - low) / (high - low))
        return np.column_stack(cols) if cols else np.zeros((len(levels), 0))

    def penalty(self) -> np.ndarray:
        """``smoothness * (step[j + 1] - step[j])^2`` summed over neighbouring rungs of a knob,
        ``step`` being a rung's log cost per level: the evidence of ``smoothness`` frames."""
        widths = np.concatenate([np.diff(knots) for knots in self.knots]).astype(float)
        out = np.zeros((self.width, self.width))
        for i in range(self.width - 1):
            if self.owner[i] != self.owner[i + 1]:
                continue
            d = np.zeros(self.width)
            d[i], d[i + 1] = -1 / widths[i], 1 / widths[i + 1]
            out += self.smoothness * np.outer(d, d)
        return out
