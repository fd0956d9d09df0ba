"""Premultiplied-alpha image operations: the serial "over" composite and display conversion.

``composite_over`` is the reference every compositing algorithm (binary swap, 2-3 swap,
radix-k) must reproduce: out = front + (1 − front.a) · back, images in front-to-back order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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


def to_rgb8(rgba: np.ndarray, background: tuple[float, float, float] = (0.0, 0.0, 0.0)
            ) -> np.ndarray:
    """(H, W, 3) uint8 for display: the premultiplied image over an opaque ``background``."""
    bg = np.asarray(background, np.float32)
    rgb = rgba[..., :3] + (1.0 - rgba[..., 3:4]) * bg
    return (np.clip(rgb, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
