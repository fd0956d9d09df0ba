"""Figures of a run that holds a target: how many frames it took to get within reach of it."""

from __future__ import annotations

import numpy as np


def frames_to_within(errors: np.ndarray, tolerance: float = 0.05) -> int | None:
    """Frames from the first of ``errors`` until one is within ``tolerance`` (None: never)."""
    back = np.flatnonzero(np.asarray(errors) <= tolerance)
    return int(back[0]) if back.size else None
