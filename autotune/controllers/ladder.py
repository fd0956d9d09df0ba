"""The settings of a knob space worst look first, reached by a quality level in [0, 1]: the one
knob of the model-free baselines (as a resolution scale is a dynamic-resolution governor's)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autotune.knobs import KnobSpace


class QualityLadder:
    """Every setting of ``space`` in its quality order (the order the feed-forward search ranks
    by), so a level can reach every setting the tuned controller can."""

    def __init__(self, space: KnobSpace) -> None:
        self.space = space
        self._order: np.ndarray | None = None

    def knobs_at(self, level: float) -> dict[str, Any]:
        """Settings for a quality level in [0, 1]: that share along the quality-ranked order."""
        if self._order is None:
            self._order = self.space.quality_order()
        index = int(math.floor(level * (len(self._order) - 1) + 0.5))
        return self.space.at_index(int(self._order[index]))
