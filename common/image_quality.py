"""Image quality of a tuned frame against the full-quality frame: PSNR and SSIM.

So that "holds the target" never hides "by dropping to the lowest setting", every
governed run reports these for its chosen frames. SSIM is Wang et al. 2004 with the usual
Gaussian window (σ = 1.5) and constants (K1 = 0.01, K2 = 0.03), on luminance.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.ndimage import gaussian_filter

LUMA = np.array([0.299, 0.587, 0.114])


def _luma(image: ArrayLike, peak: float) -> NDArray[np.float64]:
    a = np.asarray(image, np.float64)
    if a.ndim == 3:
        a = a[..., :3] @ LUMA[: a.shape[-1]] if a.shape[-1] >= 3 else a[..., 0]
    return a / peak


def _check(a: ArrayLike, b: ArrayLike) -> None:
    if np.shape(a) != np.shape(b):
        raise ValueError(f"images differ in shape: {np.shape(a)} vs {np.shape(b)}")


def psnr(image: ArrayLike, reference: ArrayLike, peak: float = 1.0) -> float:
    """Peak signal-to-noise ratio in dB over all channels (inf for identical images)."""
    _check(image, reference)
    mse = float(np.mean((np.asarray(image, np.float64) - np.asarray(reference, np.float64)) ** 2))
    return math.inf if mse == 0 else 10.0 * math.log10(peak * peak / mse)


def ssim(image: ArrayLike, reference: ArrayLike, peak: float = 1.0, sigma: float = 1.5) -> float:
    """Mean structural similarity of the luminance (1.0 for identical images)."""
    _check(image, reference)
    x, y = _luma(image, peak), _luma(reference, peak)
    c1, c2 = 0.01**2, 0.03**2
    mx, my = gaussian_filter(x, sigma), gaussian_filter(y, sigma)
    sxx = gaussian_filter(x * x, sigma) - mx * mx
    syy = gaussian_filter(y * y, sigma) - my * my
    sxy = gaussian_filter(x * y, sigma) - mx * my
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return float(s.mean())
