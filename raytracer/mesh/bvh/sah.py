"""How one node is split: binned SAH, the exact sweep of small nodes, the median fallback.

A node is binned once (``nbins`` bins on each of the three centroid axes); the winning split's
bin sweep also gives both children's exact bounds and the partition pass their centroid
bounds, so no node is re-scanned for bounds. Per-triangle boxes live in one contiguous (F, 8)
array (``lo.xyz, 0, hi.xyz, 0``) that is partitioned in place with the triangle ids, so every
pass reads memory in order. Nodes of at most ``SMALL_NODE`` triangles get an exact sweep
instead of bins; below ``MEDIAN_DEPTH`` nodes split at the object median, which bounds the
depth (the kernels' stack is bounded). The cost model is :mod:`raytracer.mesh.bvh.cost`.

Work items (the builders' stack entries and parallel tasks) are ints (node, start, end, depth)
and ``ITEM_F`` floats: 0:8 node bounds (lo.xyz, -, hi.xyz, -), 8:14 doubled-centroid bounds
(lo.xyz, hi.xyz). :func:`split_node` writes both children's item floats.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from common.jit_cache import njit
from raytracer.mesh.bvh.cost import area, is_leaf, sides_cost

SMALL_NODE = 16  # nodes up to this many triangles get an exact sweep instead of bins
MEDIAN_DEPTH = 40  # below this depth nodes split at the object median (bounds the stack)
ITEM_F = 14  # floats of a work item: bounds 0:8, doubled-centroid bounds 8:14


@njit()
def _bin_of(c2, cmin, scale, nbins):
    """Bin of a doubled centroid coordinate (the same expression for binning and partition)."""
    b = int((c2 - cmin) * scale)
    if b < 0:
        b = 0
    if b > nbins - 1:
        b = nbins - 1
    return b


@njit()
def bin_scale(item_f, nbins, cmin, scale):
    """Origin (``cmin``) and bins per unit (``scale``, 0 on an axis of one centroid) of an
    item's doubled-centroid bounds over ``nbins`` bins."""
    for a in range(3):
        cmin[a] = item_f[8 + a]
        ext = item_f[11 + a] - item_f[8 + a]
        sc = nbins / ext if ext > 0.0 else 0.0
        scale[a] = sc if np.isfinite(sc) else 0.0


@njit()
def _bin_range(box, s, e, cmin, scale, cnt, bins):
    """Accumulate triangles s..e-1 into per-axis bins (counts and bounds)."""
    nbins = cnt.shape[1]
    for k in range(s, e):
        l0, l1, l2 = box[k, 0], box[k, 1], box[k, 2]
        h0, h1, h2 = box[k, 4], box[k, 5], box[k, 6]
        for a in range(3):  # an unusable axis (scale 0) fills bin 0, which _sweep ignores
            b = _bin_of(box[k, a] + box[k, 4 + a], cmin[a], scale[a], nbins)
            cnt[a, b] += 1
            bins[a, b, 0] = min(bins[a, b, 0], l0)
            bins[a, b, 1] = min(bins[a, b, 1], l1)
            bins[a, b, 2] = min(bins[a, b, 2], l2)
            bins[a, b, 4] = max(bins[a, b, 4], h0)
            bins[a, b, 5] = max(bins[a, b, 5], h1)
            bins[a, b, 6] = max(bins[a, b, 6], h2)


@njit()
def _reset_bins(cnt, bins):
    """Empty bins: zero counts, inverted bounds."""
    for a in range(3):
        for b in range(cnt.shape[1]):
            cnt[a, b] = 0
            for c in range(3):
                bins[a, b, c] = np.inf
                bins[a, b, 4 + c] = -np.inf


@njit(parallel=True)
def bin_parallel(box, s, e, cmin, scale, cnt, bins, threads):
    """Binning of a big node split over threads, each into its own bins, then merged."""
    chunks = 2 * threads
    nbins = cnt.shape[1]
    pc = np.zeros((chunks, 3, nbins), np.int64)
    pb = np.empty((chunks, 3, nbins, 8), np.float32)
    for c in nb.prange(chunks):
        _reset_bins(pc[c], pb[c])
        _bin_range(
            box,
            s + c * (e - s) // chunks,
            s + (c + 1) * (e - s) // chunks,
            cmin,
            scale,
            pc[c],
            pb[c],
        )
    _reset_bins(cnt, bins)
    for c in range(chunks):
        for a in range(3):
            for b in range(nbins):
                cnt[a, b] += pc[c, a, b]
                for k in range(3):
                    bins[a, b, k] = min(bins[a, b, k], pb[c, a, b, k])
                    bins[a, b, 4 + k] = max(bins[a, b, 4 + k], pb[c, a, b, 4 + k])


@njit()
def _empty_bounds():
    """Running bounds (lo.xyz, hi.xyz) of nothing yet: inverted, float32 like the boxes."""
    inf = np.float32(np.inf)
    return inf, inf, inf, -inf, -inf, -inf


@njit()
def _grown(r, box, i):
    """Running bounds ``r`` grown by row ``i`` of (N, 8) boxes (lo.xyz, -, hi.xyz, -): of the
    triangles, or of one axis' bins."""
    return (min(r[0], box[i, 0]), min(r[1], box[i, 1]), min(r[2], box[i, 2]),
            max(r[3], box[i, 4]), max(r[4], box[i, 5]), max(r[5], box[i, 6]))


@njit()
def _sweep(cnt, bins, scale, right_area, right_n, leaf_size):
    """Best (cost, axis, bin) over the bin boundaries of all usable axes; axis -1 if none."""
    nbins = cnt.shape[1]
    best_cost = np.inf
    best_axis = -1
    best_bin = 0
    for a in range(3):
        if scale[a] <= 0.0:
            continue
        ab = bins[a]
        r = _empty_bounds()
        rn = 0
        for b in range(nbins - 1, 0, -1):
            rn += cnt[a, b]
            r = _grown(r, ab, b)
            right_area[b] = area(r[0], r[1], r[2], r[3], r[4], r[5])
            right_n[b] = rn
        r = _empty_bounds()
        ln = 0
        for b in range(nbins - 1):
            ln += cnt[a, b]
            r = _grown(r, ab, b)
            if ln == 0 or right_n[b + 1] == 0:
                continue
            left_area = area(r[0], r[1], r[2], r[3], r[4], r[5])
            cost = sides_cost(left_area, ln, right_area[b + 1], right_n[b + 1], leaf_size)
            if cost < best_cost:
                best_cost, best_axis, best_bin = cost, a, b
    return best_cost, best_axis, best_bin


@njit()
def _child_bounds(bins, a, split, out):
    """Bounds of bins 0..split (out[0:8]) and the bins after it (out[8:16]) on axis a."""
    for h in range(2):
        o = 8 * h
        for c in range(3):
            out[o + c] = np.inf
            out[o + 4 + c] = -np.inf
        b0, b1 = (0, split + 1) if h == 0 else (split + 1, bins.shape[1])
        for b in range(b0, b1):
            for c in range(3):
                out[o + c] = min(out[o + c], bins[a, b, c])
                out[o + 4 + c] = max(out[o + 4 + c], bins[a, b, 4 + c])


@njit()
def _grow_centroids(cb, o, c0, c1, c2):
    """Grow the doubled-centroid bounds ``cb[o:o+3]`` (lo) and ``cb[o+3:o+6]`` (hi) by one."""
    cb[o] = min(cb[o], c0)
    cb[o + 1] = min(cb[o + 1], c1)
    cb[o + 2] = min(cb[o + 2], c2)
    cb[o + 3] = max(cb[o + 3], c0)
    cb[o + 4] = max(cb[o + 4], c1)
    cb[o + 5] = max(cb[o + 5], c2)


@njit()
def _partition(box, ids, s, e, a, cmin, scale, nbins, split, cb):
    """In-place partition of s..e-1 by bin <= split on axis a; cb gets both children's
    doubled-centroid bounds (left lo/hi in 0:6, right in 6:12). Returns the split index."""
    for c in range(3):
        cb[c] = cb[6 + c] = np.inf
        cb[3 + c] = cb[9 + c] = -np.inf
    i, j = s, e - 1
    while i <= j:
        c0 = box[i, 0] + box[i, 4]
        c1 = box[i, 1] + box[i, 5]
        c2 = box[i, 2] + box[i, 6]
        ca = c0 if a == 0 else (c1 if a == 1 else c2)
        if _bin_of(ca, cmin, scale, nbins) <= split:
            _grow_centroids(cb, 0, c0, c1, c2)
            i += 1
        else:
            _grow_centroids(cb, 6, c0, c1, c2)
            for c in range(8):
                box[i, c], box[j, c] = box[j, c], box[i, c]
            ids[i], ids[j] = ids[j], ids[i]
            j -= 1
    return i


@njit()
def range_bounds(box, s, e, out, o):
    """Exact bounds and doubled-centroid bounds of s..e-1 into out[o:o+8] and out[o+8:o+14]."""
    for c in range(3):
        out[o + c] = out[o + 8 + c] = np.inf
        out[o + 4 + c] = out[o + 11 + c] = -np.inf
    for k in range(s, e):
        for c in range(3):
            out[o + c] = min(out[o + c], box[k, c])
            out[o + 4 + c] = max(out[o + 4 + c], box[k, 4 + c])
            cc = box[k, c] + box[k, 4 + c]
            out[o + 8 + c] = min(out[o + 8 + c], cc)
            out[o + 11 + c] = max(out[o + 11 + c], cc)


@njit()
def exact_sweep(box, s, e, perm, keys, left_area, left_box, out_f, leaf_size, ranked):
    """Exact SAH sweep of the boxes s..e-1: on each axis sorts them by centroid into ``perm[a]``
    (offsets from s) and tries every cut. Returns the best (cost, axis, k), left = the first
    k of ``perm[axis]``, or (inf, -1, 0) when no cut separates anything; ``out_f`` gets both
    sides' bounds (item floats 0:8 and ``ITEM_F``:``ITEM_F + 8``). ``ranked``: sort by counting
    every key's rank (the keys before it that are <=, after it that are <): the stable order
    an insertion sort gives, without its unpredictable shifts (small nodes: the same trees,
    dragon builds 3 % faster); else a stable mergesort (any size). Scratch: ``keys``
    (float32), ``left_area`` (float64), ``left_box`` (float32, 6 a row), n rows each. Kept one
    loop per axis, sort and sweep together: split in two passes it made builds 2-3 % slower."""
    n = e - s
    best_cost, best_axis, best_k = np.inf, -1, 0
    for a in range(3):
        for k in range(n):
            keys[k] = box[s + k, a] + box[s + k, 4 + a]
        if ranked:
            for k in range(n):
                key = keys[k]
                rank = 0
                for j in range(k):
                    rank += keys[j] <= key
                for j in range(k + 1, n):
                    rank += keys[j] < key
                perm[a, rank] = k
        else:
            perm[a, :n] = np.argsort(keys[:n], kind="mergesort")
        r = _empty_bounds()
        for k in range(n - 1):
            r = _grown(r, box, s + perm[a, k])
            left_area[k] = area(r[0], r[1], r[2], r[3], r[4], r[5])
            left_box[k, 0], left_box[k, 1], left_box[k, 2] = r[0], r[1], r[2]
            left_box[k, 3], left_box[k, 4], left_box[k, 5] = r[3], r[4], r[5]
        r = _empty_bounds()
        for k in range(n - 1, 0, -1):  # right = perm[k:], left = perm[:k]
            r = _grown(r, box, s + perm[a, k])
            cost = sides_cost(left_area[k - 1], k, area(r[0], r[1], r[2], r[3], r[4], r[5]),
                              n - k, leaf_size)
            if cost < best_cost:
                best_cost, best_axis, best_k = cost, a, k
                for c in range(3):
                    out_f[c] = left_box[k - 1, c]
                    out_f[4 + c] = left_box[k - 1, 3 + c]
                out_f[ITEM_F], out_f[ITEM_F + 1], out_f[ITEM_F + 2] = r[0], r[1], r[2]
                out_f[ITEM_F + 4], out_f[ITEM_F + 5], out_f[ITEM_F + 6] = r[3], r[4], r[5]
    return best_cost, best_axis, best_k


@njit()
def reorder(box, ids, s, e, order, tmp_box, tmp_ids):
    """Rows s..e-1 of ``box`` and ``ids`` put in ``order`` (offsets from s), through the
    scratch ``tmp_box`` and ``tmp_ids``."""
    n = e - s
    for k in range(n):
        for c in range(8):
            tmp_box[k, c] = box[s + order[k], c]
        tmp_ids[k] = ids[s + order[k]]
    for k in range(n):
        for c in range(8):
            box[s + k, c] = tmp_box[k, c]
        ids[s + k] = tmp_ids[k]


@njit()
def _small_sweep(box, ids, s, e, small, out_f, leaf_size):
    """:func:`exact_sweep` of a small node (rank sort); reorders s..e-1 along the best axis
    and returns (cost, mid), or (inf, -1) when no split separates anything. out_f gets both
    children's bounds (their centroid bounds are not needed: small nodes have small
    children). ``small``: :func:`_small_scratch`."""
    perm, keys, left_area, tmp_box, tmp_ids, left_box = small
    best_cost, best_axis, best_k = exact_sweep(box, s, e, perm, keys, left_area, left_box,
                                               out_f, leaf_size, True)
    if best_axis < 0:
        return np.inf, -1
    reorder(box, ids, s, e, perm[best_axis], tmp_box, tmp_ids)
    return best_cost, s + best_k


@njit()
def _small_scratch():
    """Work arrays of ``_small_sweep``."""
    return (
        np.empty((3, SMALL_NODE), np.int64),
        np.empty(SMALL_NODE, np.float32),
        np.empty(SMALL_NODE, np.float64),
        np.empty((SMALL_NODE, 8), np.float32),
        np.empty(SMALL_NODE, np.int32),
        np.empty((SMALL_NODE, 6), np.float32),
    )


@njit()
def workspace(nbins):
    """The arrays one sequential builder reuses for every node it splits: ``nbins`` bins per
    axis (counts, bounds), the bin sweep's right-side areas and counts, the bins' scale and
    origin, the popped item's floats and its two children's, the partition's two bound arrays
    and the small sweep's scratch. What :func:`split_node` takes as ``work``. Inlined, so that
    the bin loops see ``nbins`` as the constant it is (a separate call: builds 5-7 % slower)."""
    return (
        np.zeros((3, nbins), np.int64),
        np.empty((3, nbins, 8), np.float32),
        np.empty(nbins, np.float64),
        np.empty(nbins, np.int64),
        np.empty(3, np.float64),
        np.empty(3, np.float64),
        np.empty(ITEM_F, np.float32),
        np.empty(2 * ITEM_F, np.float32),
        (np.empty(12, np.float32), np.empty(16, np.float32)),
        _small_scratch(),
    )


@njit()
def _halve(box, s, e, out_f):
    """Split s..e-1 at its middle as it lies; out_f gets both halves' item floats (bounds and
    centroid bounds). Returns the split index."""
    mid = s + (e - s) // 2
    range_bounds(box, s, mid, out_f, 0)
    range_bounds(box, mid, e, out_f, ITEM_F)
    return mid


@njit()
def split_node(box, ids, s, e, depth, leaf_size, work, binned):
    """Decide the node of triangles s..e-1 at ``depth`` whose item floats are ``work``'s
    (:func:`workspace`): returns mid (-1 for a leaf); work's child floats get both children's
    item floats. ``binned``: work's bins already hold this node's bins (parallel binning of
    the top phase)."""
    cnt, bins, right_area, right_n, scale, cmin, item_f, out_f, scratch, small = work
    n = e - s
    parent_area = area(item_f[0], item_f[1], item_f[2], item_f[4], item_f[5], item_f[6])
    if n <= 1 or is_leaf(n, leaf_size, 0.0, parent_area):
        # a leaf even against a split that cost nothing beyond its traversal step (the
        # cheapest any sweep could find) is a leaf: no sweep is needed to decide it
        return -1
    if depth >= MEDIAN_DEPTH:
        # the tree is deep (the kernels' stack is bounded): a node past one leaf test is
        # halved, which bounds the depth by MEDIAN_DEPTH + log2(n)
        return _halve(box, s, e, out_f)
    if n <= SMALL_NODE:
        best_cost, mid = _small_sweep(box, ids, s, e, small, out_f, leaf_size)
        if is_leaf(n, leaf_size, best_cost, parent_area):
            return -1
        return _halve(box, s, e, out_f) if mid < 0 else mid
    bin_scale(item_f, cnt.shape[1], cmin, scale)
    best_cost, best_axis, best_bin = np.inf, -1, 0
    if scale[0] > 0.0 or scale[1] > 0.0 or scale[2] > 0.0:
        if not binned:
            _reset_bins(cnt, bins)
            _bin_range(box, s, e, cmin, scale, cnt, bins)
        best_cost, best_axis, best_bin = _sweep(cnt, bins, scale, right_area, right_n, leaf_size)
    if is_leaf(n, leaf_size, best_cost, parent_area):
        return -1
    if best_axis < 0:  # all centroids coincide
        return _halve(box, s, e, out_f)
    cb, bounds = scratch
    mid = _partition(
        box, ids, s, e, best_axis, cmin[best_axis], scale[best_axis], cnt.shape[1], best_bin, cb
    )
    _child_bounds(bins, best_axis, best_bin, bounds)
    for h in range(2):
        for c in range(8):
            out_f[ITEM_F * h + c] = bounds[8 * h + c]
        for c in range(6):
            out_f[ITEM_F * h + 8 + c] = cb[6 * h + c]
    return mid
