"""The settings of a knob space worst look first, reached by a quality level in [0, 1]: the one
knob of the model-free baselines (as a resolution scale is a dynamic-resolution governor's),
along a chain on which every knob rises, so that a higher level never costs less."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autotune.knobs import KnobSpace


class QualityLadder:
    """The settings of ``space`` along its quality chain (:meth:`KnobSpace.quality_chain`): one
    knob one level up at each rung, from the lowest setting to the highest. A feedback law
    needs a level whose cost rises with it; the quality order of the whole grid zig-zags in
    cost, and a PI law or a governor walking it swung between settings 3x apart in cost. A
    chain cannot trade one knob for another: where the target falls between two rungs far apart
    in cost (shadows switched on), a feedback law swings across that gap."""

    def __init__(self, space: KnobSpace) -> None:
        self.space = space
        self._order: np.ndarray | None = None

    def knobs_at(self, level: float) -> dict[str, Any]:
        """Settings for a quality level in [0, 1]: that share along the quality chain."""
        if self._order is None:
            self._order = np.asarray(self.space.quality_chain())
        index = int(math.floor(level * (len(self._order) - 1) + 0.5))
        return self.space.at_index(int(self._order[index]))
