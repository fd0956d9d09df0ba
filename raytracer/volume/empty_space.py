"""Empty-space grid: per-block min/max of the normalized data and which blocks the TF hides.

A block covers ``BLOCK``³ voxel cells aligned to global multiples of ``BLOCK`` (so every brick
agrees on the grid); its min/max include the far corner voxels that trilinear samples inside
it read. A block is skipped only when the transfer function's opacity is 0 over its whole
[min, max] range (with one lookup-table entry of margin), so skipping never changes an image.
The same grid gives the partition its cost per cell.
"""

from __future__ import annotations

import numpy as np

BLOCK = 8
EMPTY_COST = 0.05  # relative cost of a cell in a skipped block (one lookup per block crossing)


def _window_reduce(arr: np.ndarray, axis: int, origin: int, block: int,
                   ufunc: np.ufunc) -> np.ndarray:
    """Reduce ``arr`` along ``axis`` over each block's voxels [bB, bB + B] (inclusive, clipped),
    where local index 0 is global voxel ``origin``."""
    n = arr.shape[axis]
    first, last = origin // block, (origin + n - 2) // block
    starts = np.maximum(np.arange(first, last + 1) * block - origin, 0)
    red = ufunc.reduceat(arr, starts, axis=axis)
    if len(starts) > 1:  # each block also reads the first voxel of the next one
        nxt = np.take(arr, starts[1:], axis=axis)
        head = [slice(None)] * arr.ndim
        head[axis] = slice(0, len(starts) - 1)
        red[tuple(head)] = ufunc(red[tuple(head)], nxt)
    return red


def minmax_grid(data: np.ndarray, origin: tuple[int, int, int] = (0, 0, 0),
                block: int = BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """Per-block (min, max) of ``data[z, y, x]`` whose voxel (0, 0, 0) is global voxel
    ``origin`` (x, y, z); blocks indexed [bz, by, bx] from global block ``origin // block``."""
    mins, maxs = data, data
    for axis, o in zip((2, 1, 0), origin, strict=True):
        mins = _window_reduce(mins, axis, o, block, np.minimum)
        maxs = _window_reduce(maxs, axis, o, block, np.maximum)
    return mins, maxs


def empty_blocks(mins: np.ndarray, maxs: np.ndarray, opacity_lut: np.ndarray) -> np.ndarray:
    """uint8 flags, 1 where the lookup table's opacity is 0 over the block's value range."""
    n = len(opacity_lut)
    nonzero = np.concatenate([[0], np.cumsum(np.asarray(opacity_lut) > 0)])
    i0 = np.clip(np.floor(mins * (n - 1)).astype(np.int64) - 1, 0, n - 1)
    i1 = np.clip(np.ceil(maxs * (n - 1)).astype(np.int64) + 1, 0, n - 1)
    return (nonzero[i1 + 1] - nonzero[i0] == 0).astype(np.uint8)


def empty_distance(empty: np.ndarray, cap: int = 32) -> np.ndarray:
    """uint8 [bz, by, bx]: r > 0 where the cube of (2r − 1)³ blocks centred on the block is
    all empty (the largest such r, at most ``cap``), 0 where the block is not empty. Blocks
    beyond the grid count as empty: the ray caster clips every jump to the brick's box. One
    lookup per block a ray enters then jumps the whole empty cube (the ray caster's skipping)."""
    cur = np.asarray(empty).astype(bool)
    dist = np.zeros(cur.shape, np.uint8)
    r = 0
    while r < cap and cur.any():
        r += 1
        dist[cur] = r
        for axis in range(3):  # erode by one block: a 3-wide AND along each axis
            pad = [(1, 1) if a == axis else (0, 0) for a in range(3)]
            p = np.pad(cur, pad, constant_values=True)
            n = cur.shape[axis]
            cur = (np.take(p, range(0, n), axis) & np.take(p, range(1, n + 1), axis)
                   & np.take(p, range(2, n + 2), axis))
    return dist


def macro_blocks(empty: np.ndarray, block_origin: tuple[int, int, int],
                 factor: int = 4) -> tuple[np.ndarray, tuple[int, int, int]]:
    """Coarser flags for two-level skipping: a macro cell of ``factor``³ blocks (aligned to
    global multiples) is empty when every one of its blocks that the brick has is empty.
    Returns the flags [mz, my, mx] and the global index (x, y, z) of macro cell [0, 0, 0]."""
    org = tuple(o // factor for o in block_origin)
    pad = [(o - m * factor, 0) for o, m in zip(block_origin[::-1], org[::-1], strict=True)]
    padded = np.pad(empty, pad, constant_values=1)
    pad_hi = [(0, -s % factor) for s in padded.shape]
    padded = np.pad(padded, pad_hi, constant_values=1)
    mz, my, mx = (s // factor for s in padded.shape)
    flags = padded.reshape(mz, factor, my, factor, mx, factor).min(axis=(1, 3, 5))
    return flags.astype(np.uint8), org


def cost_grid(normalized: np.ndarray, opacity_lut: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """Render cost per cell, per block [bz, by, bx]: 1 where samples are taken, EMPTY_COST
    where the block is skipped (input of the cost-balanced partition)."""
    mins, maxs = minmax_grid(normalized, (0, 0, 0), block)
    empty = empty_blocks(mins, maxs, opacity_lut)
    return np.where(empty == 1, EMPTY_COST, 1.0)
