"""What one brick's frame cost, totalled from the caster's per-pixel counts.

The kernel writes each pixel's (samples taken, samples skipped); the frame record needs their
totals, the rays that touched the brick and the samples as the SIMD groups paid them. One
compiled pass instead of four NumPy reductions over the count image: 276 -> 95 µs at 320²
(the render of a 512² frame at scale 0.625), paid by every rank on every frame.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from common.jit_cache import njit


class CountTotals(NamedTuple):
    """A frame's totals over one brick's count image."""

    samples: int  # lattice samples evaluated
    skipped: int  # lattice samples jumped over in empty blocks
    rays: int  # pixels whose ray took or skipped at least one sample
    group_samples: int  # Σ over SIMD groups of (the slowest lane's samples × lanes)


def count_totals(counts: np.ndarray, lanes: tuple[int, int]) -> CountTotals:
    """Totals of a (height, width, 2) count image (samples taken, skipped per pixel) for SIMD
    groups of ``lanes`` (rows, columns) pixels: a device whose lanes run in lockstep pays each
    group's slowest lane on every lane (the image padded to whole groups with empty lanes)."""
    rows, cols = lanes
    return CountTotals(*(int(v) for v in _totals(counts, int(rows), int(cols))))


@njit()
def _totals(counts, rows, cols):  # pragma: no cover
    """:func:`count_totals`, one group of pixels at a time."""
    h, w = counts.shape[0], counts.shape[1]
    samples, skipped, rays, slowest = 0, 0, 0, 0
    for gy in range(0, h, rows):
        for gx in range(0, w, cols):
            most = 0
            for y in range(gy, min(gy + rows, h)):
                for x in range(gx, min(gx + cols, w)):
                    taken, jumped = counts[y, x, 0], counts[y, x, 1]
                    samples += taken
                    skipped += jumped
                    if taken != 0 or jumped != 0:
                        rays += 1
                    most = max(most, taken)
            slowest += most
    return samples, skipped, rays, slowest * rows * cols
