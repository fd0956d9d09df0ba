"""k-d partition: bricks tile the volume for any count, balance, and visibility order."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from raytracer.volume import VolumeError, cost_grid, kd_partition, minmax_grid, preset
from raytracer.volume.empty_space import macro_blocks


def _coverage(part) -> np.ndarray:
    cells = np.subtract(part.dims, 1)
    count = np.zeros(cells[::-1], np.int32)
    for b in part.bricks:
        count[b.lo[2]:b.hi[2], b.lo[1]:b.hi[1], b.lo[0]:b.hi[0]] += 1
    return count


@pytest.mark.parametrize("dims", [(256, 256, 256), (66, 66, 66), (103, 94, 161), (9, 40, 5)])
def test_bricks_tile_exactly_and_are_balanced(dims):
    for parts in range(1, 10):
        part = kd_partition(dims, parts)
        assert [b.index for b in part.bricks] == list(range(parts))
        assert np.all(_coverage(part) == 1), (dims, parts)
        sizes = [b.cells for b in part.bricks]
        assert max(sizes) / min(sizes) < (1.12 if min(dims) > 20 else 1.6), (dims, parts, sizes)
        for b in part.bricks:
            assert b.ghost_lo == b.lo and b.ghost_hi == tuple(h + 1 for h in b.hi)
            assert all(h <= d for h, d in zip(b.ghost_hi, dims, strict=True))


def test_odd_counts_split_proportionally():
    part = kd_partition((301, 11, 11), 3)
    assert part.root.split == 100  # 1 : 2 along x, then the 2 split again
    assert [b.hi[0] - b.lo[0] for b in part.bricks] == [100, 100, 100]
    part = kd_partition((101, 11, 11), 5)
    assert part.root.split == 40  # 2 : 3
    assert sorted(b.hi[0] - b.lo[0] for b in part.bricks) == [20] * 5


def test_longest_axis_is_cut_in_world_units():
    assert kd_partition((50, 20, 20), 2).root.axis == 0
    assert kd_partition((50, 20, 20), 2, spacing=(1, 4, 1)).root.axis == 1


def test_cost_balanced_partition_equalizes_cost():
    dims = (129, 65, 65)
    cost = np.full((8, 8, 16), 0.05)
    cost[:, :, :4] = 1.0  # the dense quarter at low x
    part = kd_partition(dims, 4, cost=cost)
    assert np.all(_coverage(part) == 1)
    dens = np.repeat(np.repeat(np.repeat(cost, 8, 0), 8, 1), 8, 2)
    per_brick = [dens[b.lo[2]:b.hi[2], b.lo[1]:b.hi[1], b.lo[0]:b.hi[0]].sum()
                 for b in part.bricks]
    assert max(per_brick) / min(per_brick) < 1.15, per_brick
    plain = kd_partition(dims, 4)
    plain_cost = [dens[b.lo[2]:b.hi[2], b.lo[1]:b.hi[1], b.lo[0]:b.hi[0]].sum()
                  for b in plain.bricks]
    assert max(plain_cost) / min(plain_cost) > 3


def _entries(eye, targets, boxes):
    """Entry parameter of each ray eye -> target into each box (inf where it misses)."""
    d = targets - eye
    out = np.full((len(targets), len(boxes)), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i, (lo, hi) in enumerate(boxes):
            ta, tb = (lo - eye) / d, (hi - eye) / d
            t0 = np.nanmax(np.minimum(ta, tb), axis=1).clip(0.0)
            t1 = np.nanmin(np.maximum(ta, tb), axis=1)
            out[:, i] = np.where(t1 > t0 + 1e-9, t0, np.inf)
    return out


def test_visibility_order_matches_brute_force():
    rng = np.random.default_rng(1)
    for parts in range(1, 10):
        part = kd_partition((41, 30, 57), parts, spacing=(1.0, 1.5, 0.8))
        origin, spacing = np.asarray(part.origin), np.asarray(part.spacing)
        boxes = [(origin + np.asarray(b.lo) * spacing, origin + np.asarray(b.hi) * spacing)
                 for b in part.bricks]
        for _ in range(40):
            eye = rng.uniform(-60, 60, 3) * rng.choice([0.2, 1.0])  # inside and outside
            order = part.visibility_order(eye)
            assert sorted(order) == list(range(parts))
            rank = np.empty(parts, int)
            rank[order] = np.arange(parts)
            # face neighbours: the one on the eye's side of the shared face comes first
            for a, b in itertools.permutations(range(parts), 2):
                ba, bb = part.bricks[a], part.bricks[b]
                for ax in range(3):
                    others = [o for o in range(3) if o != ax]
                    touching = ba.hi[ax] == bb.lo[ax] and all(
                        min(ba.hi[o], bb.hi[o]) > max(ba.lo[o], bb.lo[o]) for o in others)
                    if touching and eye[ax] < boxes[a][1][ax]:
                        assert rank[a] < rank[b], (parts, eye, a, b)
            # brute force: along rays from the eye through the volume, bricks are entered in
            # visibility order
            targets = rng.uniform(origin, -origin, (300, 3))
            t = _entries(eye, targets, boxes)
            by_t = np.argsort(t, axis=1, kind="stable")
            ranks = rank[by_t]
            both_hit = np.isfinite(np.take_along_axis(t, by_t, axis=1))[:, 1:]
            assert np.all((np.diff(ranks, axis=1) > 0) | ~both_hit), (parts, eye)


def test_bad_counts_are_errors():
    with pytest.raises(VolumeError, match="positive integer"):
        kd_partition((10, 10, 10), 0)
    with pytest.raises(VolumeError, match="fewer cells than 9 bricks"):
        kd_partition((2, 2, 3), 9)


def test_minmax_grid_and_cost_grid_against_brute_force():
    rng = np.random.default_rng(3)
    data = rng.random((20, 17, 30)).astype(np.float32)
    for origin in [(0, 0, 0), (3, 5, 9), (8, 16, 0)]:
        mins, maxs = minmax_grid(data, origin, 8)
        for bz, by, bx in np.ndindex(mins.shape):
            g = [(o // 8 + b) * 8 for o, b in zip(origin, (bx, by, bz), strict=True)]
            sl = tuple(slice(max(g[a] - origin[a], 0), min(g[a] + 9 - origin[a],
                                                           data.shape[2 - a]))
                       for a in (2, 1, 0))
            assert mins[bz, by, bx] == data[sl].min() and maxs[bz, by, bx] == data[sl].max()
    sparse = np.zeros((33, 33, 33), np.float32)
    sparse[20:30, 2:5, 2:30] = 1.0
    cost = cost_grid(sparse, preset("grey").lut()[:, 3])
    assert cost.shape == (4, 4, 4)
    assert cost[2, 0, 1] == 1.0 and cost[0, 0, 0] < 0.1 and cost[3, 3, 3] < 0.1


def test_macro_cells_are_empty_only_when_all_their_blocks_are():
    rng = np.random.default_rng(5)
    empty = (rng.random((7, 9, 11)) < 0.9).astype(np.uint8)
    empty[:4, :4, :4] = 1
    for origin in [(0, 0, 0), (5, 2, 3)]:
        macro, morg = macro_blocks(empty, origin)
        assert morg == tuple(o // 4 for o in origin)
        for mz, my, mx in np.ndindex(macro.shape):
            lo = [(m + mo) * 4 - o for m, mo, o in zip((mx, my, mz), morg, origin, strict=True)]
            sub = empty[max(lo[2], 0):max(lo[2] + 4, 0), max(lo[1], 0):max(lo[1] + 4, 0),
                        max(lo[0], 0):max(lo[0] + 4, 0)]
            assert macro[mz, my, mx] == (1 if sub.size == 0 else sub.min())
    assert macro_blocks(empty, (0, 0, 0))[0][0, 0, 0] == 1


@pytest.mark.parametrize("shares", [(3, 1), (1, 3), (3, 3, 1, 1), (2, 1, 1)])
def test_shares_give_each_brick_its_share_of_the_cells(shares):
    """The HemoCell study's deliberately imbalanced subdomains: brick i holds shares[i] / sum of the
    cells (to within one slice of the cut axis), and the bricks still tile the volume."""
    dims = (65, 49, 81)
    p = kd_partition(dims, len(shares), shares=shares)
    cells = np.array([b.cells for b in p.bricks], float)
    total = np.prod(np.subtract(dims, 1))
    assert cells.sum() == total
    slice_share = 1.0 / min(np.subtract(dims, 1))  # one slice of the shortest axis, at most
    assert np.allclose(cells / total, np.array(shares) / sum(shares), atol=2 * slice_share)


def test_bad_shares_are_one_clear_error():
    for shares in ((1,), (1, 0), (1, float("nan")), (1, -2)):
        with pytest.raises(VolumeError, match="shares must be 2 positive numbers"):
            kd_partition((9, 9, 9), 2, shares=shares)

