"""The inputs of a build checked before any of it runs (both builders share them)."""

from __future__ import annotations

import numpy as np

from raytracer.mesh.bvh.layout import MAX_LEAF_SIZE


def checked_triangles(triangles: np.ndarray, leaf_size: int) -> np.ndarray:
    """Validate the inputs of a build; returns C-contiguous float32 corners."""
    if (
        isinstance(leaf_size, bool)
        or int(leaf_size) != leaf_size
        or not 1 <= leaf_size <= MAX_LEAF_SIZE
    ):
        raise ValueError(f"leaf_size must be an integer in 1..{MAX_LEAF_SIZE} (the kernels test "
                         f"a leaf's triangles in one float4), got {leaf_size!r}")
    try:
        tris = np.ascontiguousarray(triangles, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"triangles must be a numeric (F, 3, 3) array ({exc})") from None
    if tris.ndim != 3 or tris.shape[1:] != (3, 3) or len(tris) == 0:
        raise ValueError(f"triangles must be a non-empty (F, 3, 3) array, got shape {tris.shape}")
    if not np.isfinite(tris).all():
        raise ValueError("triangles contain NaN or infinite coordinates")
    return tris
