"""Binned-SAH bounding volume hierarchy built with numba, collapsed to an 8-wide BVH for the
OpenCL kernels.

Flat layout (what ``kernels/traverse.cl`` and ``raytracer/traversal.py`` read): one node per
256 bytes = eight float8, the eight children's boxes stored structure-of-arrays so that one
float8 operation tests one slab of all eight children:

    float8 0: lo.x of children 0..7      float8 1: hi.x of children 0..7
    float8 2: lo.y                       float8 3: hi.y
    float8 4: lo.z                       float8 5: hi.z
    float8 6: index of children 0..7  (int32 bits)
    float8 7: count of children 0..7  (int32 bits)

As a (N, 64) float32 array: child c's ``lo`` on axis a is ``nodes[n, plane(a, False) + c]``
(= 16 a + c), its ``hi`` ``nodes[n, plane(a, True) + c]`` (= 16 a + 8 + c), its index
``node_ints[n, CHILD_INDEX + c]`` (48 + c), its count ``node_ints[n, CHILD_COUNT + c]``
(56 + c). ``count > 0``: the child is a leaf holding triangles
``index .. index + count - 1`` (at most ``leaf_size``: 4, the default, is the most the
kernels' one-float4 leaf test covers); ``count == 0``: the child
is node ``index``; ``count == -1``: an empty slot, whose box is inverted (lo = +1e20,
hi = -1e20) so the kernels' slab test, which takes each axis' near plane by the sign of the
ray direction, never hits it. Node 0 is the root; a node's inner children are numbered
consecutively, subtrees depth-first. Triangles are reordered to leaf order in slots of
``LEAF_LANES`` (4): each leaf's first triangle is at a multiple of 4, and the slots after its
count repeat that triangle with face id -1 (never reported: the kernels mask lanes past the
count). ``BVH.triangles`` holds one slot per row, 48 bytes: float4 v0 (w = original face id as
int32 bits), float4 edge1 = v1 - v0, float4 edge2 = v2 - v0 (Möller–Trumbore reads the edges
directly); the CPU code reads it. The kernels read ``BVH.leaf_blocks``, the same slots four at
a time structure-of-arrays: block ``first / 4`` is nine float4, v0.x v0.y v0.z e1.x e1.y e1.z
e2.x e2.y e2.z of its four slots, so a leaf's one-float4-per-lane test loads nine vectors
instead of gathering twelve into lanes (dragon and sibenik, one compute unit, 1280x720: AO
rays 4-7 % faster on both CPU runtimes, one-ray primary and shadow rays 4-9 %).

Build (``build_bvh``): a binary SAH tree first. Per-triangle boxes are copied into one
contiguous (F, 8) array that is partitioned in place with the triangle ids, so every pass reads
memory in order. A node is binned once (16 bins on each of the three centroid axes); the
winning split's bin sweep also gives both children's exact bounds and the partition pass their
centroid bounds, so no node is re-scanned for bounds. The SAH counts leaf tests, not
triangles: a kernel tests a leaf's up to ``leaf_size`` triangles at once, so a side of n
triangles costs its area times ceil(n / leaf_size) (Embree's block SAH) and every node of at
most ``leaf_size`` triangles becomes a leaf. Counting triangles made leaves of 1.9 triangles
on the dragon, half-filled float4 tests under twice the nodes. Nodes above ``F / (4 * threads)``
triangles are built one at a time with the binning spread over all threads; the subtrees below
are then built in parallel (``prange``), each writing its nodes into its own slots
``[base + 2*start, base + 2*end)`` of a shared array (a subtree of m triangles has at most
2m - 1 nodes). The collapse then makes each wide node from a binary inner node by replacing,
while fewer than eight children, the inner child of largest surface area by its two children
(leaves stay leaves). Eight children rather than four: the same tree in fewer, wider steps,
7-38 % faster per ray kind on Intel's CPU runtime, whose float8 box test is one AVX
instruction per plane. ``build_bvh_full_sweep`` is the exact O(n log² n) sort-and-sweep SAH
reference with the same leaf policy and the same collapse (for quality comparisons).
Shadow rays walk a copy of the nodes with each node's children in increasing box area
(``shadow_order``: the same tree, another slot order; see there for why and what it gave).
The build's arrays are allocated by numpy and filled by the jitted passes, not allocated
inside them: numpy advises the kernel to back large arrays with huge pages, where numba's
allocator takes 4 KiB pages, each faulted in on its first write (the dragon: 7,500 faults and
18-34 ms of system time per build on a 2-core VM; the build 1.09x / 1.22x faster, median /
best of 25, the same tree).
``BVHStats`` describes the binary tree (its SAH cost is what the two builders are compared
on) and the wide one (nodes, the traversal stack it needs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numba as nb
import numpy as np

from raytracer.device.jit_cache import njit

if TYPE_CHECKING:
    from raytracer.scene import Scene

WIDTH = 8  # children per node
NODE_FLOATS = 8 * WIDTH  # one node: six planes, indices and counts, WIDTH lanes each
CHILD_INDEX = 6 * WIDTH  # first int32 of the children's indices in a node
CHILD_COUNT = 7 * WIDTH  # first int32 of the children's counts
EMPTY_BOX = 1e20  # empty slots: lo = +EMPTY_BOX, hi = -EMPTY_BOX (never hit)
KERNEL_STACK = 96  # traversal stack entries in kernels/traverse.cl and traversal.py
TRI_FLOATS = 12
BINS = 16  # bins per axis below the top phase
TOP_BINS = 64  # bins per axis in the (few, big) top-phase nodes
TRAVERSAL_COST = 1.0
INTERSECT_COST = 1.0  # one leaf test: up to leaf_size triangles, tested at once
LEAF_LANES = 4  # the kernels test a leaf's triangles in one float4, one per lane
MAX_LEAF_SIZE = LEAF_LANES
TASKS_PER_THREAD = 4  # subtrees of at most F / (4 * threads) triangles are built in parallel
MIN_TASK_TRIS = 2048  # ... but never split the top phase below this many triangles per task
PAR_BIN_MIN = 32768  # top-phase nodes with more triangles bin in parallel chunks
STACK = 256
SMALL_NODE = 16  # nodes up to this many triangles get an exact sweep instead of bins
MEDIAN_DEPTH = 40  # below this depth nodes split at the object median (bounds the stack)


@njit(inline="always")
def plane(axis: int, hi: bool) -> int:
    """First float of a node's ``lo`` (or ``hi``) plane of ``axis`` for its WIDTH children."""
    return 2 * WIDTH * axis + (WIDTH if hi else 0)


@dataclass(frozen=True)
class BVHStats:
    """Summary of a built hierarchy. ``inner_nodes``, ``leaves``, ``depth`` and ``sah_cost``
    (C_trav = 1, C_isect = 1 per leaf test, root area normalised) describe the binary SAH
    tree; ``wide_nodes`` the 8-wide nodes the kernels read and ``stack_entries`` the most
    traversal-stack entries a ray can need in it (at most ``KERNEL_STACK``)."""

    triangles: int
    inner_nodes: int
    leaves: int
    depth: int
    sah_cost: float
    mean_leaf_size: float
    build_seconds: float
    bytes: int
    wide_nodes: int = 0
    stack_entries: int = 0


@dataclass
class BVH:
    """Flattened 8-wide BVH plus reordered triangles (see the module docstring for bytes)."""

    nodes: np.ndarray  # (N, NODE_FLOATS) float32
    triangles: np.ndarray  # (S, 12) float32: one triangle slot per row, S = 4 x leaves
    face_ids: np.ndarray  # (S,) int32: original face index of each slot, -1 for padding
    stats: BVHStats
    shadow_nodes: np.ndarray  # the same nodes, children smallest box first (shadow_order)
    leaf_blocks: np.ndarray  # (S / 4, 9, 4) float32: the slots SoA, four per block (kernels)

    @property
    def node_ints(self) -> np.ndarray:
        """The same node memory read as int32 (child indices and counts)."""
        return self.nodes.view(np.int32)

    @property
    def shadow_node_ints(self) -> np.ndarray:
        """:attr:`shadow_nodes` read as int32."""
        return self.shadow_nodes.view(np.int32)


# ---------------------------------------------------------------------------------------------
# shared helpers


@njit(inline="always")
def _area(lo0, lo1, lo2, hi0, hi1, hi2):
    """Surface area of a box; 0 for an empty (inverted) box."""
    dx, dy, dz = hi0 - lo0, hi1 - lo1, hi2 - lo2
    if dx < 0.0 or dy < 0.0 or dz < 0.0:
        return 0.0
    return 2.0 * (dx * dy + dy * dz + dz * dx)


@njit(inline="always")
def _leaf_tests(n, leaf_size):
    """Leaf tests that ``n`` triangles cost: the kernels test up to ``leaf_size`` at once, so
    the SAH counts blocks of ``leaf_size``, not triangles (Embree's block SAH)."""
    return (n + leaf_size - 1) // leaf_size


@njit(inline="always")
def _sides_cost(left_area, left_n, right_area, right_n, leaf_size):
    """A split's two sides as the SAH counts them (each side's area times its leaf tests);
    the split costs ``TRAVERSAL_COST`` plus this over the parent's area."""
    return (left_area * _leaf_tests(left_n, leaf_size)
            + right_area * _leaf_tests(right_n, leaf_size))


@njit(inline="always")
def _is_leaf(n, leaf_size, best_cost, parent_area):
    """Whether ``n`` triangles make a leaf: they fit one leaf's test, and that test costs no
    more than the best split (``best_cost``: its :func:`_sides_cost`)."""
    split_cost = TRAVERSAL_COST + (best_cost / parent_area if parent_area > 0 else np.inf)
    return n <= leaf_size and split_cost >= INTERSECT_COST * _leaf_tests(n, leaf_size)


@njit(parallel=True)
def _prepare(tris, threads, box, ids):
    """(F,3,3) corners -> (F,8) boxes ``lo.xyz, 0, hi.xyz, 0`` and identity ids (into ``box``
    and ``ids``); returns the root bounds."""
    n = tris.shape[0]
    chunks = max(1, min(4 * threads, n // 4096))
    part = np.empty((chunks, 12), np.float32)  # node lo/hi, doubled-centroid lo/hi
    for c in nb.prange(chunks):
        s = c * n // chunks
        e = (c + 1) * n // chunks
        r = np.empty(12, np.float32)
        for a in range(3):
            r[a] = r[6 + a] = np.inf
            r[3 + a] = r[9 + a] = -np.inf
        for k in range(s, e):
            ids[k] = k
            for a in range(3):
                x0, x1, x2 = tris[k, 0, a], tris[k, 1, a], tris[k, 2, a]
                lo = min(x0, min(x1, x2))
                hi = max(x0, max(x1, x2))
                box[k, a] = lo
                box[k, 4 + a] = hi
                cc = lo + hi
                r[a] = min(r[a], lo)
                r[3 + a] = max(r[3 + a], hi)
                r[6 + a] = min(r[6 + a], cc)
                r[9 + a] = max(r[9 + a], cc)
            box[k, 3] = 0.0
            box[k, 7] = 0.0
        part[c] = r
    root = part[0].copy()
    for c in range(1, chunks):
        for a in range(3):
            root[a] = min(root[a], part[c, a])
            root[3 + a] = max(root[3 + a], part[c, 3 + a])
            root[6 + a] = min(root[6 + a], part[c, 6 + a])
            root[9 + a] = max(root[9 + a], part[c, 9 + a])
    return root


@njit(inline="always")
def _bin_of(c2, cmin, scale, nbins):
    """Bin of a doubled centroid coordinate (the same expression for binning and partition)."""
    b = int((c2 - cmin) * scale)
    if b < 0:
        b = 0
    if b > nbins - 1:
        b = nbins - 1
    return b


@njit(inline="always")
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


@njit(inline="always")
def _reset_bins(cnt, bins):
    """Empty bins: zero counts, inverted bounds."""
    for a in range(3):
        for b in range(cnt.shape[1]):
            cnt[a, b] = 0
            for c in range(3):
                bins[a, b, c] = np.inf
                bins[a, b, 4 + c] = -np.inf


@njit(inline="always")
def _sweep(cnt, bins, scale, right_area, right_n, leaf_size):
    """Best (cost, axis, bin) over the bin boundaries of all usable axes; axis -1 if none."""
    nbins = cnt.shape[1]
    best_cost = np.inf
    best_axis = -1
    best_bin = 0
    for a in range(3):
        if scale[a] <= 0.0:
            continue
        r0 = r1 = r2 = np.float32(np.inf)
        r4 = r5 = r6 = np.float32(-np.inf)
        rn = 0
        for b in range(nbins - 1, 0, -1):
            rn += cnt[a, b]
            r0 = min(r0, bins[a, b, 0])
            r1 = min(r1, bins[a, b, 1])
            r2 = min(r2, bins[a, b, 2])
            r4 = max(r4, bins[a, b, 4])
            r5 = max(r5, bins[a, b, 5])
            r6 = max(r6, bins[a, b, 6])
            right_area[b] = _area(r0, r1, r2, r4, r5, r6)
            right_n[b] = rn
        l0 = l1 = l2 = np.float32(np.inf)
        l4 = l5 = l6 = np.float32(-np.inf)
        ln = 0
        for b in range(nbins - 1):
            ln += cnt[a, b]
            l0 = min(l0, bins[a, b, 0])
            l1 = min(l1, bins[a, b, 1])
            l2 = min(l2, bins[a, b, 2])
            l4 = max(l4, bins[a, b, 4])
            l5 = max(l5, bins[a, b, 5])
            l6 = max(l6, bins[a, b, 6])
            if ln == 0 or right_n[b + 1] == 0:
                continue
            cost = _sides_cost(_area(l0, l1, l2, l4, l5, l6), ln, right_area[b + 1],
                               right_n[b + 1], leaf_size)
            if cost < best_cost:
                best_cost, best_axis, best_bin = cost, a, b
    return best_cost, best_axis, best_bin


@njit(inline="always")
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


@njit(inline="always")
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
            cb[0] = min(cb[0], c0)
            cb[1] = min(cb[1], c1)
            cb[2] = min(cb[2], c2)
            cb[3] = max(cb[3], c0)
            cb[4] = max(cb[4], c1)
            cb[5] = max(cb[5], c2)
            i += 1
        else:
            cb[6] = min(cb[6], c0)
            cb[7] = min(cb[7], c1)
            cb[8] = min(cb[8], c2)
            cb[9] = max(cb[9], c0)
            cb[10] = max(cb[10], c1)
            cb[11] = max(cb[11], c2)
            for c in range(8):
                box[i, c], box[j, c] = box[j, c], box[i, c]
            ids[i], ids[j] = ids[j], ids[i]
            j -= 1
    return i


@njit(inline="always")
def _range_bounds(box, s, e, out, o):
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


@njit(inline="always")
def _small_sweep(box, ids, s, e, perm, keys, left_area, tmp_box, tmp_ids, left_box, out_f,
                 leaf_size):
    """Exact SAH sweep of a small node; reorders s..e-1 along the best axis and returns
    (cost, mid), or (inf, -1) when no split separates anything. Each axis is sorted by
    counting every key's rank (the keys before it that are <=, after it that are <): the
    stable order an insertion sort gives, without its unpredictable shifts (the same trees,
    dragon builds 3 % faster). out_f gets both children's bounds (their centroid bounds are not
    needed: small nodes have small children)."""
    n = e - s
    best_cost, best_axis, best_k = np.inf, -1, 0
    for a in range(3):
        for k in range(n):
            keys[k] = box[s + k, a] + box[s + k, 4 + a]
        for k in range(n):
            key = keys[k]
            rank = 0
            for j in range(k):
                rank += keys[j] <= key
            for j in range(k + 1, n):
                rank += keys[j] < key
            perm[a, rank] = k
        l0 = l1 = l2 = np.float32(np.inf)
        h0 = h1 = h2 = np.float32(-np.inf)
        for k in range(n - 1):
            t = s + perm[a, k]
            l0 = min(l0, box[t, 0])
            l1 = min(l1, box[t, 1])
            l2 = min(l2, box[t, 2])
            h0 = max(h0, box[t, 4])
            h1 = max(h1, box[t, 5])
            h2 = max(h2, box[t, 6])
            left_area[k] = _area(l0, l1, l2, h0, h1, h2)
            left_box[k, 0], left_box[k, 1], left_box[k, 2] = l0, l1, l2
            left_box[k, 3], left_box[k, 4], left_box[k, 5] = h0, h1, h2
        l0 = l1 = l2 = np.float32(np.inf)
        h0 = h1 = h2 = np.float32(-np.inf)
        for k in range(n - 1, 0, -1):  # right = perm[k:], left = perm[:k]
            t = s + perm[a, k]
            l0 = min(l0, box[t, 0])
            l1 = min(l1, box[t, 1])
            l2 = min(l2, box[t, 2])
            h0 = max(h0, box[t, 4])
            h1 = max(h1, box[t, 5])
            h2 = max(h2, box[t, 6])
            cost = _sides_cost(left_area[k - 1], k, _area(l0, l1, l2, h0, h1, h2), n - k,
                               leaf_size)
            if cost < best_cost:
                best_cost, best_axis, best_k = cost, a, k
                for c in range(3):
                    out_f[c] = left_box[k - 1, c]
                    out_f[4 + c] = left_box[k - 1, 3 + c]
                out_f[ITEM_F], out_f[ITEM_F + 1], out_f[ITEM_F + 2] = l0, l1, l2
                out_f[ITEM_F + 4], out_f[ITEM_F + 5], out_f[ITEM_F + 6] = h0, h1, h2
    if best_axis < 0:
        return np.inf, -1
    for k in range(n):
        for c in range(8):
            tmp_box[k, c] = box[s + perm[best_axis, k], c]
        tmp_ids[k] = ids[s + perm[best_axis, k]]
    for k in range(n):
        for c in range(8):
            box[s + k, c] = tmp_box[k, c]
        ids[s + k] = tmp_ids[k]
    return best_cost, s + best_k


# Work items (stack entries and parallel tasks): ints (node, start, end, depth) and floats
# 0:8 node bounds (lo.xyz, -, hi.xyz, -), 8:14 doubled-centroid bounds (lo.xyz, hi.xyz).
ITEM_F = 14


@njit(inline="always")
def _halve(box, s, e, out_f):
    """Split s..e-1 at its middle as it lies; out_f gets both halves' item floats (bounds and
    centroid bounds). Returns the split index."""
    mid = s + (e - s) // 2
    _range_bounds(box, s, mid, out_f, 0)
    _range_bounds(box, mid, e, out_f, ITEM_F)
    return mid


@njit(inline="always")
def _split_node(
    box,
    ids,
    s,
    e,
    depth,
    item_f,
    leaf_size,
    cnt,
    bins,
    right_area,
    right_n,
    scale,
    cmin,
    binned,
    scratch,
    scratch_small,
    out_f,
):
    """Decide one node: returns mid (-1 for a leaf); out_f gets both children's item floats.
    ``binned``: cnt/bins already hold this node's bins (parallel binning of the top phase)."""
    n = e - s
    parent_area = _area(item_f[0], item_f[1], item_f[2], item_f[4], item_f[5], item_f[6])
    if n <= 1 or _is_leaf(n, leaf_size, 0.0, parent_area):
        # a leaf even against a split that cost nothing beyond its traversal step (the
        # cheapest any sweep could find) is a leaf: no sweep is needed to decide it
        return -1
    if depth >= MEDIAN_DEPTH:
        # the tree is deep (the kernels' stack is bounded): a node past one leaf test is
        # halved, which bounds the depth by MEDIAN_DEPTH + log2(n)
        return _halve(box, s, e, out_f)
    if n <= SMALL_NODE:
        small = scratch_small
        best_cost, mid = _small_sweep(
            box, ids, s, e, small[0], small[1], small[2], small[3], small[4], small[5], out_f,
            leaf_size,
        )
        if _is_leaf(n, leaf_size, best_cost, parent_area):
            return -1
        return _halve(box, s, e, out_f) if mid < 0 else mid
    for a in range(3):
        cmin[a] = item_f[8 + a]
        ext = item_f[11 + a] - item_f[8 + a]
        sc = cnt.shape[1] / ext if ext > 0.0 else 0.0
        scale[a] = sc if np.isfinite(sc) else 0.0
    best_cost, best_axis, best_bin = np.inf, -1, 0
    if scale[0] > 0.0 or scale[1] > 0.0 or scale[2] > 0.0:
        if not binned:
            _reset_bins(cnt, bins)
            _bin_range(box, s, e, cmin, scale, cnt, bins)
        best_cost, best_axis, best_bin = _sweep(cnt, bins, scale, right_area, right_n, leaf_size)
    if _is_leaf(n, leaf_size, best_cost, parent_area):
        return -1
    if best_axis < 0:  # all centroids coincide
        return _halve(box, s, e, out_f)
    cb = scratch[0]
    bounds = scratch[1]
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


@njit(inline="always")
def _push_children(node, left, s, mid, e, depth, out_f, node_first, node_count, st_i, st_f, sp):
    """Make ``node`` inner with children ``left``, ``left + 1`` and push both (right first, so
    the left subtree is built next: depth-first node order). Returns the new stack size."""
    node_first[node] = left
    node_count[node] = 0
    st_i[sp, 0], st_i[sp, 1], st_i[sp, 2], st_i[sp, 3] = left + 1, mid, e, depth + 1
    for c in range(ITEM_F):
        st_f[sp, c] = out_f[ITEM_F + c]
        st_f[sp + 1, c] = out_f[c]
    st_i[sp + 1, 0], st_i[sp + 1, 1], st_i[sp + 1, 2], st_i[sp + 1, 3] = left, s, mid, depth + 1
    return sp + 2


@njit()
def _build_subtree(box, ids, root_i, root_f, leaf_size, node_box, node_first, node_count, slot0):
    """Sequential binned-SAH build below one work item; new nodes go to slots from slot0."""
    cnt = np.zeros((3, BINS), np.int64)
    bins = np.empty((3, BINS, 8), np.float32)
    right_area = np.empty(BINS, np.float64)
    right_n = np.empty(BINS, np.int64)
    scale = np.empty(3, np.float64)
    cmin = np.empty(3, np.float64)
    st_i = np.empty((STACK, 4), np.int64)
    st_f = np.empty((STACK, ITEM_F), np.float32)
    out_f = np.empty(2 * ITEM_F, np.float32)
    it_f = np.empty(ITEM_F, np.float32)
    scratch = (np.empty(12, np.float32), np.empty(16, np.float32))
    small = _small_scratch()
    st_i[0] = root_i
    st_f[0] = root_f
    sp = 1
    slot = slot0
    max_depth = 0
    while sp > 0:
        sp -= 1
        node, s, e, depth = st_i[sp, 0], st_i[sp, 1], st_i[sp, 2], st_i[sp, 3]
        for c in range(ITEM_F):
            it_f[c] = st_f[sp, c]
        max_depth = max(max_depth, depth)
        for c in range(8):
            node_box[node, c] = it_f[c]
        mid = _split_node(
            box,
            ids,
            s,
            e,
            depth,
            it_f,
            leaf_size,
            cnt,
            bins,
            right_area,
            right_n,
            scale,
            cmin,
            False,
            scratch,
            small,
            out_f,
        )
        if mid < 0:
            node_first[node] = s
            node_count[node] = e - s
            continue
        sp = _push_children(node, slot, s, mid, e, depth, out_f, node_first, node_count, st_i,
                            st_f, sp)
        slot += 2
    return max_depth


@njit(parallel=True)
def _bin_parallel(box, s, e, cmin, scale, cnt, bins, threads):
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
def _task_cap(n_tris, task_max):
    """Most subtree tasks the top phase may hand out (then it stops splitting)."""
    return 2 * (n_tris // max(task_max, 1)) + 64


@njit()
def _build_top(box, ids, root, leaf_size, task_max, node_box, node_first, node_count, threads):
    """Sequential top phase: splits nodes above task_max, returns the subtrees left to build."""
    n_tris = box.shape[0]
    cnt = np.zeros((3, TOP_BINS), np.int64)
    bins = np.empty((3, TOP_BINS, 8), np.float32)
    right_area = np.empty(TOP_BINS, np.float64)
    right_n = np.empty(TOP_BINS, np.int64)
    scale = np.empty(3, np.float64)
    cmin = np.empty(3, np.float64)
    out_f = np.empty(2 * ITEM_F, np.float32)
    it_f = np.empty(ITEM_F, np.float32)
    scratch = (np.empty(12, np.float32), np.empty(16, np.float32))
    small = _small_scratch()
    cap = _task_cap(n_tris, task_max)
    st_i = np.empty((STACK, 4), np.int64)
    st_f = np.empty((STACK, ITEM_F), np.float32)
    tasks_i = np.empty((cap, 4), np.int64)
    tasks_f = np.empty((cap, ITEM_F), np.float32)
    n_tasks = 0
    st_i[0, 0], st_i[0, 1], st_i[0, 2], st_i[0, 3] = 0, 0, n_tris, 0
    for c in range(3):
        st_f[0, c] = root[c]
        st_f[0, 4 + c] = root[3 + c]
        st_f[0, 8 + c] = root[6 + c]
        st_f[0, 11 + c] = root[9 + c]
    st_f[0, 3] = st_f[0, 7] = 0.0
    sp = 1
    n_nodes = 1
    while sp > 0:
        sp -= 1
        node, s, e, depth = st_i[sp, 0], st_i[sp, 1], st_i[sp, 2], st_i[sp, 3]
        for c in range(ITEM_F):
            it_f[c] = st_f[sp, c]
        if e - s <= task_max or n_tasks >= cap - 2:
            tasks_i[n_tasks] = st_i[sp]
            tasks_f[n_tasks] = it_f
            n_tasks += 1
            continue
        for c in range(8):
            node_box[node, c] = it_f[c]
        for a in range(3):
            cmin[a] = it_f[8 + a]
            ext = it_f[11 + a] - it_f[8 + a]
            sc = TOP_BINS / ext if ext > 0.0 else 0.0
            scale[a] = sc if np.isfinite(sc) else 0.0
        use_par = e - s >= PAR_BIN_MIN
        if use_par:
            _bin_parallel(box, s, e, cmin, scale, cnt, bins, threads)
        mid = _split_node(
            box,
            ids,
            s,
            e,
            depth,
            it_f,
            leaf_size,
            cnt,
            bins,
            right_area,
            right_n,
            scale,
            cmin,
            use_par,
            scratch,
            small,
            out_f,
        )
        if mid < 0:
            node_first[node] = s
            node_count[node] = e - s
            continue
        sp = _push_children(node, n_nodes, s, mid, e, depth, out_f, node_first, node_count, st_i,
                            st_f, sp)
        n_nodes += 2
    return n_nodes, tasks_i[:n_tasks], tasks_f[:n_tasks]


@njit(parallel=True)
def _build_tasks(
    box, ids, tasks_i, tasks_f, leaf_size, node_box, node_first, node_count, base, threads
):
    """Build every subtree task; tasks are dealt to threads largest-first (LPT) by size."""
    n_tasks = tasks_i.shape[0]
    threads = max(1, min(threads, n_tasks))
    sizes = tasks_i[:, 2] - tasks_i[:, 1]
    by_size = np.argsort(-sizes)
    owner = np.empty(n_tasks, np.int64)
    load = np.zeros(threads, np.int64)
    for r in range(n_tasks):
        t = by_size[r]
        w = np.argmin(load)
        owner[t] = w
        load[w] += sizes[t]
    depths = np.zeros(n_tasks, np.int64)
    for w in nb.prange(threads):
        for t in range(n_tasks):
            if owner[t] != w:
                continue
            depths[t] = _build_subtree(
                box,
                ids,
                tasks_i[t],
                tasks_f[t],
                leaf_size,
                node_box,
                node_first,
                node_count,
                base + 2 * tasks_i[t, 1],
            )
    return depths.max() if n_tasks else 0


@njit()
def _dfs_order(node_first, node_count):
    """Inner nodes in depth-first preorder, plus leaves, max depth and SAH areas of the tree."""
    n_max = node_first.shape[0]
    order = np.empty(n_max // 2 + 1, np.int64)
    stack = np.empty(STACK, np.int64)
    dstack = np.empty(STACK, np.int64)
    stack[0] = 0
    dstack[0] = 0
    sp = 1
    k = 0
    leaves = 0
    depth = 0
    while sp > 0:
        sp -= 1
        node, d = stack[sp], dstack[sp]
        depth = max(depth, d)
        if node_count[node] > 0:
            leaves += 1
            continue
        order[k] = node
        k += 1
        left = node_first[node]
        stack[sp], dstack[sp] = left + 1, d + 1
        stack[sp + 1], dstack[sp + 1] = left, d + 1
        sp += 2
    return order[:k], leaves, depth


@njit()
def _binary_sah(node_box, node_first, node_count, order, leaf_size):
    """SAH cost of the binary tree (C_trav = C_isect = 1 per leaf test of up to ``leaf_size``
    triangles, normalised by the root's area)."""
    root_area = _area(node_box[0, 0], node_box[0, 1], node_box[0, 2], node_box[0, 4],
                      node_box[0, 5], node_box[0, 6])
    if root_area <= 0.0:
        root_area = 1.0
    if order.shape[0] == 0:  # the root is a leaf
        return INTERSECT_COST * _leaf_tests(node_count[0], leaf_size)
    cost = 0.0
    for f in range(order.shape[0]):
        i = order[f]
        cost += TRAVERSAL_COST * _area(node_box[i, 0], node_box[i, 1], node_box[i, 2],
                                       node_box[i, 4], node_box[i, 5], node_box[i, 6])
        for c in range(2):
            k = node_first[i] + c
            if node_count[k] > 0:
                cost += INTERSECT_COST * _leaf_tests(node_count[k], leaf_size) * _area(
                    node_box[k, 0], node_box[k, 1], node_box[k, 2], node_box[k, 4],
                    node_box[k, 5], node_box[k, 6])
    return cost / root_area


@njit()
def _collapse(node_box, node_first, node_count, out):
    """Binary tree (slot arrays, root 0) -> WIDTH-wide nodes in the flat layout.

    Returns (wide nodes made, stack entries needed). Each wide node takes one binary inner node and
    opens its largest-area inner child until it has ``WIDTH`` children, so there are at most as
    many wide nodes as binary inner nodes, the rows of ``out``; every slot of a used row is
    written."""
    cap = out.shape[0]
    ints = out.view(np.int32)
    inner_kids = np.zeros(cap, np.int64)
    src = np.empty(cap, np.int64)  # binary node behind each wide node
    todo = np.empty(3 * STACK + WIDTH, np.int64)
    todo[0] = 0
    src[0] = 0
    sp = 1
    n_wide = 1
    kids = np.empty(WIDTH, np.int64)
    while sp > 0:
        sp -= 1
        w = todo[sp]
        b = src[w]
        if node_count[b] > 0:  # the root is a leaf: one leaf child
            kids[0] = b
            m = 1
        else:
            kids[0] = node_first[b]
            kids[1] = node_first[b] + 1
            m = 2
            while m < WIDTH:
                best, best_area = -1, -1.0
                for j in range(m):
                    k = kids[j]
                    if node_count[k] == 0:
                        a = _area(node_box[k, 0], node_box[k, 1], node_box[k, 2],
                                  node_box[k, 4], node_box[k, 5], node_box[k, 6])
                        if a > best_area:
                            best, best_area = j, a
                if best < 0:
                    break
                k = kids[best]
                for j in range(m, best + 1, -1):  # open kids[best] in place: order kept
                    kids[j] = kids[j - 1]
                kids[best] = node_first[k]
                kids[best + 1] = node_first[k] + 1
                m += 1
        first_new = n_wide
        for c in range(WIDTH):
            if c >= m:
                for a in range(3):
                    out[w, plane(a, False) + c] = EMPTY_BOX
                    out[w, plane(a, True) + c] = -EMPTY_BOX
                ints[w, CHILD_INDEX + c] = 0
                ints[w, CHILD_COUNT + c] = -1
                continue
            k = kids[c]
            for a in range(3):
                out[w, plane(a, False) + c] = node_box[k, a]
                out[w, plane(a, True) + c] = node_box[k, 4 + a]
            if node_count[k] > 0:
                ints[w, CHILD_INDEX + c] = node_first[k]
                ints[w, CHILD_COUNT + c] = node_count[k]
            else:
                ints[w, CHILD_INDEX + c] = n_wide
                ints[w, CHILD_COUNT + c] = 0
                src[n_wide] = k
                n_wide += 1
                inner_kids[w] += 1
        for v in range(n_wide - 1, first_new - 1, -1):  # children depth-first, first on top
            todo[sp] = v
            sp += 1
    # stack entries: a ray at node w holds the pending siblings of its ancestors' paths, and
    # an any-hit ray pushes all of w's inner children before taking one
    need = np.zeros(n_wide, np.int64)
    for w in range(n_wide - 1, -1, -1):
        k = inner_kids[w]
        best = k
        for c in range(WIDTH):
            if ints[w, CHILD_COUNT + c] == 0:
                best = max(best, k - 1 + need[ints[w, CHILD_INDEX + c]])
        need[w] = best
    return n_wide, need[0]


def shadow_order(nodes: np.ndarray) -> np.ndarray:
    """``nodes`` with each node's children in increasing box surface area (empty slots last):
    the tree shadow rays walk. An any-hit ray tests a node's leaves and pops its inner children
    in slot order, and a shadow ray starts on a surface, inside the large boxes of whatever
    encloses it (a building's walls and floor), which it leaves unblocked; small boxes are
    compact occluders. Scratch A/B, one compute unit, both CPU runtimes: sibenik's shadow rays
    27-34 % faster, the dragon's 1.5-2 %, city, bunny and terrain within ±1.4 %; the other ray
    kinds keep the build's order (primary rays were up to 13 % slower in this one, AO rays up to
    4 % faster or slower by scene)."""
    out = np.empty(nodes.shape, np.float32)
    _sorted_by_area(nodes, out)
    return out


@njit(parallel=True)
def _sorted_by_area(nodes, out):
    """Each node's child slots sorted by box area into ``out``, empty slots last (stable:
    insertion sort)."""
    ints = nodes.view(np.int32)
    for n in nb.prange(nodes.shape[0]):
        order = np.empty(WIDTH, np.int64)
        key = np.empty(WIDTH, np.float64)
        for c in range(WIDTH):
            if ints[n, CHILD_COUNT + c] < 0:
                key[c] = np.inf
            else:
                key[c] = _area(nodes[n, plane(0, False) + c], nodes[n, plane(1, False) + c],
                               nodes[n, plane(2, False) + c], nodes[n, plane(0, True) + c],
                               nodes[n, plane(1, True) + c], nodes[n, plane(2, True) + c])
            j = c
            while j > 0 and key[order[j - 1]] > key[c]:
                order[j] = order[j - 1]
                j -= 1
            order[j] = c
        for r in range(0, NODE_FLOATS, WIDTH):
            for c in range(WIDTH):
                out[n, r + c] = nodes[n, r + order[c]]


@njit()
def _leaf_slots(nodes, ids, leaves):
    """Give each of the ``leaves`` leaves LEAF_LANES slots starting at a multiple of
    LEAF_LANES, in the order of its triangles in ``ids`` (leaves cover it in contiguous runs):
    rewrites the leaves' first indices in ``nodes`` (in place) and returns the original face of
    each slot, -1 for a slot past its leaf's count."""
    ints = nodes.view(np.int32)
    n = ids.shape[0]
    leaf_at = np.full(n, -1, np.int64)  # node * WIDTH + child of the leaf starting there
    for w in range(nodes.shape[0]):
        for c in range(WIDTH):
            if ints[w, CHILD_COUNT + c] > 0:
                leaf_at[ints[w, CHILD_INDEX + c]] = w * WIDTH + c
    slots = np.full(LEAF_LANES * leaves, -1, np.int32)
    rank = 0
    for k in range(n):
        at = leaf_at[k]
        if at < 0:
            continue
        w, c = at // WIDTH, at % WIDTH
        for lane in range(ints[w, CHILD_COUNT + c]):
            slots[LEAF_LANES * rank + lane] = ids[k + lane]
        ints[w, CHILD_INDEX + c] = LEAF_LANES * rank
        rank += 1
    return slots


def _pack(tris: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Triangle slots from (F,3,3) corners and each slot's face (-1: padding, which repeats its
    leaf's first triangle, so the masked lanes of a leaf test stay finite): the (S, 12) rows
    ``v0,id | e1,0 | e2,0`` and their (S / 4, 9, 4) structure-of-arrays blocks."""
    slots = len(faces)
    packed = np.empty((slots, TRI_FLOATS), np.float32)
    blocks = np.empty((slots // LEAF_LANES, 9, LEAF_LANES), np.float32)
    _pack_corners(tris, faces, packed, blocks)
    packed.view(np.int32)[:, 3] = faces  # (numba's parfors do not see writes through a view)
    return packed, blocks


@njit(parallel=True)
def _pack_corners(tris, faces, packed, blocks):
    """:func:`_pack`'s two layouts written into ``packed`` and ``blocks``, all but the face
    ids (:func:`_pack` writes those through an int32 view, outside the parallel loop)."""
    slots = faces.shape[0]
    for q in nb.prange(slots // LEAF_LANES):
        for lane in range(LEAF_LANES):
            i = LEAF_LANES * q + lane
            t = faces[i] if faces[i] >= 0 else faces[LEAF_LANES * q]
            for a in range(3):
                v0 = tris[t, 0, a]
                e1 = tris[t, 1, a] - v0
                e2 = tris[t, 2, a] - v0
                packed[i, a] = v0
                packed[i, 4 + a] = e1
                packed[i, 8 + a] = e2
                blocks[q, a, lane] = v0
                blocks[q, 3 + a, lane] = e1
                blocks[q, 6 + a, lane] = e2
            packed[i, 7] = 0.0
            packed[i, 11] = 0.0


def _check(triangles: np.ndarray, leaf_size: int) -> np.ndarray:
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


def _finish(
    tris: np.ndarray,
    node_box: np.ndarray,
    node_first: np.ndarray,
    node_count: np.ndarray,
    ids: np.ndarray,
    leaf_size: int,
    start: float,
) -> BVH:
    """Collapse the binary slot arrays into the wide flat layout and pack the triangles."""
    order, leaves, depth = _dfs_order(node_first, node_count)
    sah = _binary_sah(node_box, node_first, node_count, order, leaf_size)
    wide = np.empty((max(len(order), 1), NODE_FLOATS), np.float32)
    n_wide, stack_entries = _collapse(node_box, node_first, node_count, wide)
    nodes = wide[:n_wide].copy()
    if stack_entries > KERNEL_STACK:
        raise ValueError(f"BVH too deep for the kernels: a ray may need {stack_entries} stack "
                         f"entries, the kernels hold {KERNEL_STACK}")
    faces = _leaf_slots(nodes, ids, leaves)
    packed, blocks = _pack(tris, faces)
    shadow_nodes = shadow_order(nodes)
    seconds = time.perf_counter() - start
    stats = BVHStats(
        triangles=len(tris),
        inner_nodes=len(order),
        leaves=int(leaves),
        depth=int(depth),
        sah_cost=float(sah),
        mean_leaf_size=len(tris) / leaves,
        build_seconds=seconds,
        bytes=int(2 * nodes.nbytes + blocks.nbytes),
        wide_nodes=len(nodes),
        stack_entries=int(stack_entries),
    )
    return BVH(nodes, packed, faces, stats, shadow_nodes, blocks)


def build_bvh(triangles: np.ndarray, leaf_size: int = 4) -> BVH:
    """Build a binned-SAH BVH over ``triangles`` (F,3,3); ``leaf_size`` caps SAH leaves."""
    tris = _check(triangles, leaf_size)
    start = time.perf_counter()
    n = len(tris)
    threads = nb.get_num_threads()
    box, ids = np.empty((n, 8), np.float32), np.empty(n, np.int32)
    root = _prepare(tris, threads, box, ids)
    task_max = max(n // (TASKS_PER_THREAD * threads), MIN_TASK_TRIS)
    # the top phase makes at most cap tasks, so at most 2 * cap - 1 nodes
    base = 2 * _task_cap(n, task_max)
    slots = base + 2 * n
    node_box = np.empty((slots, 8), np.float32)
    node_first = np.zeros(slots, np.int32)
    node_count = np.zeros(slots, np.int32)
    _, tasks_i, tasks_f = _build_top(
        box, ids, root, int(leaf_size), task_max, node_box, node_first, node_count, threads
    )
    _build_tasks(
        box, ids, tasks_i, tasks_f, int(leaf_size), node_box, node_first, node_count, base, threads
    )
    return _finish(tris, node_box, node_first, node_count, ids, int(leaf_size), start)


# ---------------------------------------------------------------------------------------------
# exact reference


@njit()
def _build_full_sweep(tri_lo, tri_hi, leaf_size):
    """Top-down SAH with an exact sweep over the centroid-sorted triangles on all 3 axes."""
    n_tris = tri_lo.shape[0]
    slots = 2 * n_tris + 1
    node_box = np.empty((slots, 8), np.float32)
    node_first = np.zeros(slots, np.int32)
    node_count = np.zeros(slots, np.int32)
    ids = np.arange(n_tris).astype(np.int32)
    cent = tri_lo + tri_hi
    left_area = np.empty(n_tris, np.float64)
    st = np.zeros((STACK, 4), np.int64)
    st[0, 0], st[0, 1], st[0, 2] = 0, 0, n_tris
    sp = 1
    n_nodes = 1
    while sp > 0:
        sp -= 1
        node, s, e, depth = st[sp, 0], st[sp, 1], st[sp, 2], st[sp, 3]
        n = e - s
        lo = np.full(3, np.inf, np.float32)
        hi = np.full(3, -np.inf, np.float32)
        for k in range(s, e):
            for a in range(3):
                lo[a] = min(lo[a], tri_lo[ids[k], a])
                hi[a] = max(hi[a], tri_hi[ids[k], a])
        node_box[node, 0:3] = lo
        node_box[node, 4:7] = hi
        best_cost, best_axis, best_pos = np.inf, -1, 0
        best_perm = ids[s:e].copy()
        if n > 1:
            for a in range(3):
                perm = ids[s:e][np.argsort(cent[ids[s:e], a], kind="mergesort")]
                l0 = l1 = l2 = np.float32(np.inf)
                h0 = h1 = h2 = np.float32(-np.inf)
                for k in range(n - 1):
                    t = perm[k]
                    l0 = min(l0, tri_lo[t, 0])
                    l1 = min(l1, tri_lo[t, 1])
                    l2 = min(l2, tri_lo[t, 2])
                    h0 = max(h0, tri_hi[t, 0])
                    h1 = max(h1, tri_hi[t, 1])
                    h2 = max(h2, tri_hi[t, 2])
                    left_area[k] = _area(l0, l1, l2, h0, h1, h2)
                l0 = l1 = l2 = np.float32(np.inf)
                h0 = h1 = h2 = np.float32(-np.inf)
                found = False
                for k in range(n - 1, 0, -1):  # right part = perm[k:], left = perm[:k]
                    t = perm[k]
                    l0 = min(l0, tri_lo[t, 0])
                    l1 = min(l1, tri_lo[t, 1])
                    l2 = min(l2, tri_lo[t, 2])
                    h0 = max(h0, tri_hi[t, 0])
                    h1 = max(h1, tri_hi[t, 1])
                    h2 = max(h2, tri_hi[t, 2])
                    cost = _sides_cost(left_area[k - 1], k, _area(l0, l1, l2, h0, h1, h2),
                                       n - k, leaf_size)
                    if cost < best_cost:
                        best_cost, best_axis, best_pos = cost, a, k
                        found = True
                if found:
                    best_perm = perm
        parent_area = _area(lo[0], lo[1], lo[2], hi[0], hi[1], hi[2])
        if n <= 1 or _is_leaf(n, leaf_size, best_cost, parent_area):
            node_first[node] = s
            node_count[node] = n
            continue
        mid = s + n // 2
        if best_axis >= 0 and depth < MEDIAN_DEPTH:
            ids[s:e] = best_perm
            mid = s + best_pos
        left = n_nodes
        n_nodes += 2
        node_first[node] = left
        node_count[node] = 0
        st[sp, 0], st[sp, 1], st[sp, 2], st[sp, 3] = left + 1, mid, e, depth + 1
        st[sp + 1, 0], st[sp + 1, 1], st[sp + 1, 2], st[sp + 1, 3] = left, s, mid, depth + 1
        sp += 2
    return node_box, node_first, node_count, ids


def build_bvh_full_sweep(triangles: np.ndarray, leaf_size: int = 4) -> BVH:
    """Exact (unbinned) sweep-SAH BVH with the same leaf policy: the quality reference."""
    tris = _check(triangles, leaf_size)
    start = time.perf_counter()
    lo, hi = tris.min(axis=1), tris.max(axis=1)
    node_box, node_first, node_count, ids = _build_full_sweep(lo, hi, int(leaf_size))
    return _finish(tris, node_box, node_first, node_count, ids, int(leaf_size), start)


def packed_normals(scene: Scene, bvh: BVH) -> np.ndarray:
    """Normals in the BVH's slot order: (S, 12) float32, three float4 per slot.

    ``xyz`` of float4 k is corner k's vertex normal (shading); the three ``w`` hold the unit
    geometric normal ``normalize(e1 x e2)`` (computed here in float64, so the kernels and the
    CPU twin build their secondary rays from the same bits: a normal whose z is 0 here but a
    rounding error in a kernel would flip the sign choice of the AO basis). Degenerate
    triangles (never hit) and padding slots get a zero normal.
    """
    out = np.zeros((len(bvh.face_ids), 12), np.float32)
    real = bvh.face_ids >= 0
    corners = np.zeros((len(bvh.face_ids), 3, 3), np.float32)
    corners[real] = scene.normals[scene.faces[bvh.face_ids[real]]]
    for k in range(3):
        out[:, 4 * k:4 * k + 3] = corners[:, k]
    tri = bvh.triangles.astype(np.float64)
    g = np.cross(tri[:, 4:7], tri[:, 8:11])
    length = np.linalg.norm(g, axis=1, keepdims=True)
    g = np.divide(g, length, out=np.zeros_like(g), where=(length > 0) & real[:, None])
    out[:, 3], out[:, 7], out[:, 11] = g[:, 0], g[:, 1], g[:, 2]
    return out
