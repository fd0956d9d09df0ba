"""How many samples a rank's SIMD groups pay per sample its rays take (the *group ratio*).

A CPU OpenCL runtime that packs work-items into SIMD lanes (Intel's: 8 or 16) runs a group
of adjacent pixels' rays until its longest ray ends, so a brick's render costs its samples
times a ratio of 1.4-2.0 that changes from view to view. Adjacent rays differ in length where
the visible data's depth changes quickly across the image: the workload probe measures that
as the *roughness* (mean |difference| of horizontally adjacent probe rays' lengths over the
mean length), and each rank's excess ``ratio − 1`` is priced as ``b·roughness`` carried from
the probe's ray spacing to the image's pixel spacing, ``b`` fitted per rank on the frames
already rendered of the current volume.

Chosen on the validation volumes (bonsai's held-out orbit, aneurism, neghip, field:96; the
caster's exact counts, 12 views 30° apart with random knobs, 2 ranks): the ratio 4.3 % off at
256² and 2.8 % at 512² with ``b`` fitted on 47 frames of the volume's own calibration views,
5.0 % and 3.2 % with ``b`` fitted only on the frames of the orbit seen so far, against 6.3 %
and 4.5 % for the last frame's ratio (the predictor it replaces, still used until a rank has
a frame to fit on). Pure numbers: the probe and the records are read elsewhere.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numpy.typing import ArrayLike, NDArray

#: How a SIMD group's excess over its lanes' mean samples grows as the image gets coarser
#: (adjacent pixels' rays lie farther apart): ``(ratio - 1) ∝ scale^-GROUP_EXCESS_EXPONENT``,
#: measured on bonsai (the calibration volume): 0.59, 0.72 and 0.96 at 256², 192² and 128²
GROUP_EXCESS_EXPONENT = 0.7


def group_ratio_at(ratio: ArrayLike, measured_scale: float, scale: ArrayLike) -> NDArray:
    """A rank's samples as its SIMD groups pay them over those taken (``ratio``, measured at
    image scale ``measured_scale``), carried to image scale ``scale``."""
    excess = np.asarray(ratio, np.float64) - 1.0
    return 1.0 + excess * (np.asarray(scale, np.float64) / measured_scale) ** (
        -GROUP_EXCESS_EXPONENT)


def roughness_at(roughness: ArrayLike, probe_width: int, render_width: ArrayLike) -> NDArray:
    """The probe's roughness (measured between rays ``1 / probe_width`` of the image apart)
    carried to adjacent pixels of an image ``render_width`` pixels wide, as the group excess
    carries across image scales (:data:`GROUP_EXCESS_EXPONENT`)."""
    return np.asarray(roughness, np.float64) * (
        probe_width / np.asarray(render_width, np.float64)) ** GROUP_EXCESS_EXPONENT


class GroupRatioFit:
    """Per rank, ``ratio − 1 = b·x`` by least squares through the origin over every frame
    observed (``x``: :func:`roughness_at` of the frame), kept as two running sums (replaced,
    not updated in place, so a shallow copy keeps the fit as it was)."""

    def __init__(self, ranks: int) -> None:
        self._xy = np.zeros(ranks)
        self._xx = np.zeros(ranks)

    @property
    def fitted(self) -> NDArray[np.bool_]:
        """(ranks,) whether a rank has a frame with any roughness to fit on."""
        return self._xx > 0

    def observe(self, roughness: ArrayLike, ratio: ArrayLike) -> None:
        """Take one frame: each rank's carried roughness and its measured group ratio."""
        x = np.asarray(roughness, np.float64)
        self._xy = self._xy + x * (np.asarray(ratio, np.float64) - 1.0)
        self._xx = self._xx + x * x

    def table(self, roughness: ArrayLike, probe_width: int, render_widths: ArrayLike,
              fallback: ArrayLike, fallback_width: float) -> NDArray:
        """(thresholds, ranks, widths) each rank's group ratio in images ``render_widths``
        pixels wide, at each threshold's probe ``roughness`` (thresholds, ranks) carried there
        (:func:`roughness_at`) where the rank has a fit, else at its ``fallback`` ratio
        (ranks,) measured ``fallback_width`` pixels wide, carried as :func:`group_ratio_at`
        carries it. One compiled pass: the tuner asks it after each probe, right after a
        render has evicted the caches, where the dozen NumPy calls it replaces took 66 µs
        (bonsai, 2 ranks, 512²)."""
        return _ratio_table(np.ascontiguousarray(roughness, np.float64), float(probe_width),
                            np.ascontiguousarray(render_widths, np.float64),
                            np.ascontiguousarray(fallback, np.float64), float(fallback_width),
                            self._xy, self._xx, GROUP_EXCESS_EXPONENT)


@nb.njit(cache=True)
def _ratio_table(roughness, probe_width, widths, fallback, fallback_width, xy, xx,
                 exponent):  # pragma: no cover
    """:meth:`GroupRatioFit.table`, compiled."""
    thresholds, ranks = roughness.shape
    out = np.empty((thresholds, ranks, widths.shape[0]))
    for r in range(ranks):
        slope = max(xy[r] / xx[r], 0.0) if xx[r] > 0 else 0.0
        for s in range(widths.shape[0]):
            if xx[r] > 0:
                carry = (probe_width / widths[s]) ** exponent
                for t in range(thresholds):
                    out[t, r, s] = 1.0 + slope * (roughness[t, r] * carry)
            else:
                ratio = 1.0 + (fallback[r] - 1.0) * (widths[s] / fallback_width) ** -exponent
                for t in range(thresholds):
                    out[t, r, s] = ratio
    return out
