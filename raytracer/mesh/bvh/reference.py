"""``build_bvh_full_sweep``: the exact O(n log² n) sort-and-sweep SAH reference, with the same
leaf policy (:mod:`raytracer.mesh.bvh.cost`) and the same collapse as :func:`build_bvh`, for
comparing the binned builder's trees against (``BVHStats.sah_cost``)."""

from __future__ import annotations

import time

import numpy as np

from common.jit_cache import njit
from raytracer.mesh.bvh.checks import checked_triangles
from raytracer.mesh.bvh.collapse import finish_bvh
from raytracer.mesh.bvh.cost import area, is_leaf
from raytracer.mesh.bvh.layout import BVH, STACK
from raytracer.mesh.bvh.sah import ITEM_F, MEDIAN_DEPTH, exact_sweep, range_bounds, reorder


@njit()
def _build_full_sweep(box, leaf_size):
    """Top-down SAH with an exact sweep over the centroid-sorted triangles on all 3 axes;
    ``box``: the triangles' (F, 8) boxes (``lo.xyz, -, hi.xyz, -``), reordered in place with
    the ids it returns."""
    n_tris = box.shape[0]
    slots = 2 * n_tris + 1
    node_box = np.empty((slots, 8), np.float32)
    node_first = np.zeros(slots, np.int32)
    node_count = np.zeros(slots, np.int32)
    ids = np.arange(n_tris).astype(np.int32)
    perm = np.empty((3, n_tris), np.int64)
    keys = np.empty(n_tris, np.float32)
    left_area = np.empty(n_tris, np.float64)
    left_box = np.empty((n_tris, 6), np.float32)
    tmp_box = np.empty((n_tris, 8), np.float32)
    tmp_ids = np.empty(n_tris, np.int32)
    item_f = np.empty(2 * ITEM_F, np.float32)  # the node's bounds; the sweep's, unused
    st = np.zeros((STACK, 4), np.int64)
    st[0, 0], st[0, 1], st[0, 2] = 0, 0, n_tris
    sp = 1
    n_nodes = 1
    while sp > 0:
        sp -= 1
        node, s, e, depth = st[sp, 0], st[sp, 1], st[sp, 2], st[sp, 3]
        n = e - s
        range_bounds(box, s, e, item_f, 0)
        for c in range(3):
            node_box[node, c] = item_f[c]
            node_box[node, 4 + c] = item_f[4 + c]
        parent_area = area(item_f[0], item_f[1], item_f[2], item_f[4], item_f[5], item_f[6])
        best_cost, best_axis, best_k = exact_sweep(box, s, e, perm, keys, left_area, left_box,
                                                   item_f, leaf_size, False)
        if n <= 1 or is_leaf(n, leaf_size, best_cost, parent_area):
            node_first[node] = s
            node_count[node] = n
            continue
        mid = s + n // 2
        if best_axis >= 0 and depth < MEDIAN_DEPTH:
            reorder(box, ids, s, e, perm[best_axis], tmp_box, tmp_ids)
            mid = s + best_k
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
    tris = checked_triangles(triangles, leaf_size)
    start = time.perf_counter()
    box = np.zeros((len(tris), 8), np.float32)
    box[:, 0:3], box[:, 4:7] = tris.min(axis=1), tris.max(axis=1)
    node_box, node_first, node_count, ids = _build_full_sweep(box, int(leaf_size))
    return finish_bvh(tris, node_box, node_first, node_count, ids, int(leaf_size), start)
