"""k-d partition of a volume into one brick per rank, for any rank count, and visibility order.

Bricks are boxes of voxel *cells* (positions between voxel centres): cell i spans [i, i + 1)
in voxel coordinates, so a volume of N voxels has N − 1 cells per axis and bricks are
half-open [lo, hi). A brick's samples read voxels lo..hi, i.e. one ghost layer on its upper
faces (``Brick.ghost_lo`` / ``ghost_hi``). Each split cuts the longest axis (in world units);
an odd count splits the parts ⌊P/2⌋ : ⌈P/2⌉ with the cut placed proportionally, by cell count
or, given a cost grid, by cost; given ``shares`` (one weight per brick), each side gets the sum
of its bricks' shares instead of equal parts (a deliberately imbalanced partition, as the
HemoCell study builds its imbalanced-subdomain scenario). The tree gives a front-to-back order
for any eye position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from raytracer.volume.errors import VolumeError

Int3 = tuple[int, int, int]


@dataclass(frozen=True)
class Brick:
    """One rank's box of cells [lo, hi) (x, y, z) in voxel-cell coordinates."""

    index: int
    lo: Int3
    hi: Int3

    @property
    def ghost_lo(self) -> Int3:
        """First voxel (x, y, z) the brick's samples read."""
        return self.lo

    @property
    def ghost_hi(self) -> Int3:
        """One past the last voxel (x, y, z) the brick's samples read (trilinear needs hi)."""
        return (self.hi[0] + 1, self.hi[1] + 1, self.hi[2] + 1)

    @property
    def cells(self) -> int:
        """Number of cells in the brick."""
        return int(np.prod(np.subtract(self.hi, self.lo)))


@dataclass(frozen=True)
class _Node:
    """An inner k-d node: cells with coordinate < ``split`` on ``axis`` go ``left``."""

    axis: int
    split: int
    left: _Node | int  # a node or a brick index
    right: _Node | int


@dataclass(frozen=True)
class Partition:
    """Bricks of a volume of ``dims`` voxels and the k-d tree that orders them."""

    dims: Int3
    bricks: tuple[Brick, ...]
    root: _Node | int
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0)
    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def visibility_order(self, eye: np.ndarray | tuple[float, float, float]) -> list[int]:
        """Brick indices front to back as seen from world position ``eye`` (inside or out)."""
        e = (np.asarray(eye, np.float64) - np.asarray(self.origin)) / np.asarray(self.spacing)
        order: list[int] = []
        stack: list[_Node | int] = [self.root]
        while stack:
            node = stack.pop()
            if isinstance(node, int):
                order.append(node)
                continue
            near, far = ((node.left, node.right) if e[node.axis] < node.split
                         else (node.right, node.left))
            stack.append(far)
            stack.append(near)
        return order


def _marginal(cost: np.ndarray, block: int, lo: np.ndarray, hi: np.ndarray,
              axis: int) -> np.ndarray:
    """Cost of each cell slice along ``axis`` within [lo, hi), from a per-block cost density."""
    weights = []
    for a in range(3):
        nb = cost.shape[2 - a]
        b_lo, b_hi = np.arange(nb) * block, np.arange(nb) * block + block
        weights.append(np.clip(np.minimum(b_hi, hi[a]) - np.maximum(b_lo, lo[a]), 0, None))
    w = [weights[a].astype(np.float64) for a in range(3)]
    w[axis] = np.ones_like(w[axis])
    per_block = np.einsum("zyx,z,y,x->" + "xyz"[axis], cost, w[2], w[1], w[0])
    cells = np.arange(lo[axis], hi[axis])
    return per_block[np.minimum(cells // block, len(per_block) - 1)]


def _split_at(lo: np.ndarray, hi: np.ndarray, axis: int, fraction: float,
              cost: np.ndarray | None, block: int) -> int:
    """Where to cut [lo, hi) on ``axis`` so the lower side holds ``fraction`` of the cells (of
    the cost, given a cost grid)."""
    n = int(hi[axis] - lo[axis])
    cut = round(n * fraction)
    if cost is not None:
        cum = np.cumsum(_marginal(cost, block, lo, hi, axis))
        if cum[-1] > 0:
            cut = int(np.argmin(np.abs(cum - cum[-1] * fraction))) + 1
    return int(lo[axis] + min(max(cut, 1), n - 1))


def kd_partition(dims: Int3, parts: int, spacing: tuple[float, float, float] = (1.0, 1.0, 1.0),
                 origin: tuple[float, float, float] | None = None, cost: np.ndarray | None = None,
                 block: int = 8, shares: tuple[float, ...] | None = None) -> Partition:
    """Split a volume of ``dims`` voxels (x, y, z) into ``parts`` bricks.

    ``cost`` is an optional per-block cost density [bz, by, bx] (``empty_space.cost_grid``)
    to balance render work instead of cell counts; ``shares`` (one positive weight per brick,
    default equal) gives brick i that share of the cells (or of the cost); ``origin``
    defaults to the centred box that :class:`~raytracer.volume.volume_data.Volume` uses."""
    if int(parts) != parts or parts < 1:
        raise VolumeError(f"brick count must be a positive integer, got {parts}")
    weights = np.ones(int(parts)) if shares is None else np.asarray(shares, np.float64)
    if weights.shape != (int(parts),) or not np.all(np.isfinite(weights) & (weights > 0)):
        raise VolumeError(f"shares must be {parts} positive numbers, one per brick, "
                          f"got {shares!r}")
    cells = np.asarray(dims, np.int64) - 1
    if np.any(cells < 1):
        raise VolumeError(f"volume dims {tuple(dims)} have no cells to partition")
    if int(np.prod(cells)) < parts:
        raise VolumeError(f"volume dims {tuple(dims)} have fewer cells than {parts} bricks")
    spacing_arr = np.asarray(spacing, np.float64)
    if origin is None:
        origin = tuple(-0.5 * cells * spacing_arr)
    bricks: list[Brick] = []

    def build(lo: np.ndarray, hi: np.ndarray, count: int) -> _Node | int:
        if count == 1:
            bricks.append(Brick(len(bricks), tuple(map(int, lo)), tuple(map(int, hi))))
            return bricks[-1].index
        size = hi - lo
        extent = np.where(size >= 2, size * spacing_arr, -1.0)
        if extent.max() < 0:
            raise VolumeError(f"volume dims {tuple(dims)} cannot be cut into {parts} bricks "
                              f"(a region of {tuple(map(int, size))} cells must hold {count})")
        axis = int(np.argmax(extent))
        left = count // 2
        first = len(bricks)  # bricks are numbered depth first, lower side first
        mine = weights[first:first + count]
        split = _split_at(lo, hi, axis, mine[:left].sum() / mine.sum(), cost, block)
        l_hi, r_lo = hi.copy(), lo.copy()
        l_hi[axis] = split
        r_lo[axis] = split
        return _Node(axis, split, build(lo, l_hi, left), build(r_lo, hi, count - left))

    root = build(np.zeros(3, np.int64), cells, int(parts))
    return Partition(tuple(int(d) for d in dims), tuple(bricks), root,
                     tuple(map(float, spacing)), tuple(map(float, origin)))


def whole_brick(dims: Int3) -> Brick:
    """The single brick that covers a whole volume of ``dims`` voxels."""
    return Brick(0, (0, 0, 0), tuple(int(d) - 1 for d in dims))
