"""Premultiplied-alpha image operations: the serial "over" composite and display conversion.

``composite_over`` is the reference every compositing algorithm (binary swap, 2-3 swap,
radix-k) must reproduce: out = front + (1 − front.a) · back, images in front-to-back order.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from common.jit_cache import njit


def over(front: np.ndarray, back: np.ndarray) -> np.ndarray:
    """``front`` over ``back`` for premultiplied RGBA (…, 4) float32 images."""
    return front + (1.0 - front[..., 3:4]) * back


def composite_over(images_front_to_back: Sequence[np.ndarray]) -> np.ndarray:
    """Blend premultiplied RGBA images given in visibility order (front first), serially."""
    if len(images_front_to_back) == 0:
        raise ValueError("composite_over needs at least one image")
    out = np.array(images_front_to_back[0], dtype=np.float32, copy=True)
    for img in images_front_to_back[1:]:
        out += (1.0 - out[..., 3:4]) * img
    return out


def _rgb8_py(rgba: np.ndarray, background: np.ndarray, out: np.ndarray) -> None:
    """Each pixel of flat (n, 4) float32 ``rgba`` over ``background``, clamped, into (n, 3)
    uint8 ``out``: one pass, no temporaries."""
    for p in range(rgba.shape[0]):
        t = np.float32(1.0) - rgba[p, 3]
        for c in range(3):
            v = min(max(rgba[p, c] + t * background[c], np.float32(0.0)), np.float32(1.0))
            out[p, c] = np.uint8(v * np.float32(255.0) + np.float32(0.5))


@functools.cache
def _rgb8_kernel() -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    return njit(nogil=True, boundscheck=False)(_rgb8_py)


def to_rgb8(rgba: np.ndarray, background: tuple[float, float, float] = (0.0, 0.0, 0.0)
            ) -> np.ndarray:
    """(H, W, 3) uint8 for display: the premultiplied image over an opaque ``background``.
    Compiled (numba): in numpy's three passes a 1280x720 frame took 16 ms of the viewer's
    interval, and 4 ms here (the same bytes)."""
    *shape, channels = rgba.shape
    if channels != 4:
        raise ValueError(f"to_rgb8 needs (..., 4) RGBA, got shape {rgba.shape}")
    flat = np.ascontiguousarray(rgba, np.float32).reshape(-1, 4)
    out = np.empty((flat.shape[0], 3), np.uint8)
    _rgb8_kernel()(flat, np.asarray(background, np.float32), out)
    return out.reshape(*shape, 3)
