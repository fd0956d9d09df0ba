"""How far frames of one view at fixed knobs stray from their median: the noise floor that no
controller can go below, shared by the governed benchmarks (``bench tracer-tuned``, ``bench
volume-tuned``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

WARMUP_FRAMES = 2  # frames rendered first and left out (a view's first frames are slower)


def frame_spread(seconds: Sequence[float]) -> dict[str, float]:
    """Summary of repeated frame times after the warm-up frames: count, median (ms), mean and
    p95 of |frame / median - 1|, coefficient of variation."""
    t = np.asarray(seconds[WARMUP_FRAMES:], np.float64)
    off = np.abs(t / np.median(t) - 1.0)
    return {"frames": len(t), "median_ms": float(np.median(t) * 1e3),
            "mean_off_median": float(off.mean()), "p95_off_median": float(np.percentile(off, 95)),
            "coefficient_of_variation": float(t.std() / t.mean())}
