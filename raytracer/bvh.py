"""Binned-SAH bounding volume hierarchy built with numba, flattened for the OpenCL kernels.

Flat layout (what ``kernels/*.cl`` and ``raytracer/traversal.py`` read), one inner node per
64 bytes = four float4, storing the bounds of *both* children so one fetch tests two boxes:

    float4 0: child0.lo.xyz, child0.index  (int32 bits)
    float4 1: child0.hi.xyz, child0.count  (int32 bits)
    float4 2: child1.lo.xyz, child1.index
    float4 3: child1.hi.xyz, child1.count

``count > 0``: the child is a leaf holding triangles ``index .. index + count - 1``;
``count == 0``: the child is the inner node ``index``. Node 0 is the root. Triangles are
reordered to leaf order, 48 bytes each: float4 v0 (w = original face id as int32 bits),
float4 edge1 = v1 - v0, float4 edge2 = v2 - v0 (Möller–Trumbore reads the edges directly).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numba as nb
import numpy as np

NODE_FLOATS = 16
TRI_FLOATS = 12
BINS = 16
TRAVERSAL_COST = 1.0
INTERSECT_COST = 1.0


@dataclass(frozen=True)
class BVHStats:
    """Summary of a built hierarchy (SAH cost with C_trav = C_isect = 1, root area normalised)."""

    triangles: int
    inner_nodes: int
    leaves: int
    depth: int
    sah_cost: float
    mean_leaf_size: float
    build_seconds: float
    bytes: int


@dataclass
class BVH:
    """Flattened two-child BVH plus reordered triangles (see the module docstring for bytes)."""

    nodes: np.ndarray  # (N, 16) float32
    triangles: np.ndarray  # (F, 12) float32
    face_ids: np.ndarray  # (F,) int32: original face index of each reordered triangle
    stats: BVHStats

    @property
    def node_ints(self) -> np.ndarray:
        """The same node memory read as int32 (child indices and counts)."""
        return self.nodes.view(np.int32)


@nb.njit(cache=True)
def _area(lo0, lo1, lo2, hi0, hi1, hi2):
    dx, dy, dz = hi0 - lo0, hi1 - lo1, hi2 - lo2
    if dx < 0.0 or dy < 0.0 or dz < 0.0:
        return 0.0
    return 2.0 * (dx * dy + dy * dz + dz * dx)


@nb.njit(cache=True)
def _build_binned(tri_lo, tri_hi, cent, leaf_size):
    """Top-down binned SAH over 3 axes; returns binary-tree arrays and the triangle order."""
    n_tris = tri_lo.shape[0]
    max_nodes = 2 * n_tris + 1
    node_lo = np.empty((max_nodes, 3), np.float32)
    node_hi = np.empty((max_nodes, 3), np.float32)
    node_first = np.zeros(max_nodes, np.int32)  # leaf: first triangle; inner: left child
    node_count = np.zeros(max_nodes, np.int32)  # leaf: count; inner: 0
    node_depth = np.zeros(max_nodes, np.int32)
    order = np.arange(n_tris).astype(np.int32)
    stack_node = np.empty(128, np.int64)
    stack_start = np.empty(128, np.int64)
    stack_end = np.empty(128, np.int64)
    bin_count = np.zeros((3, BINS), np.int64)
    bin_lo = np.empty((3, BINS, 3), np.float32)
    bin_hi = np.empty((3, BINS, 3), np.float32)
    right_area = np.empty(BINS, np.float64)
    right_n = np.empty(BINS, np.int64)
    n_nodes = 1
    sp = 0
    stack_node[0], stack_start[0], stack_end[0] = 0, 0, n_tris
    sp = 1
    while sp > 0:
        sp -= 1
        node, start, end = stack_node[sp], stack_start[sp], stack_end[sp]
        lo = np.full(3, np.inf, np.float32)
        hi = np.full(3, -np.inf, np.float32)
        clo = np.full(3, np.inf, np.float32)
        chi = np.full(3, -np.inf, np.float32)
        for k in range(start, end):
            t = order[k]
            for a in range(3):
                lo[a] = min(lo[a], tri_lo[t, a])
                hi[a] = max(hi[a], tri_hi[t, a])
                clo[a] = min(clo[a], cent[t, a])
                chi[a] = max(chi[a], cent[t, a])
        node_lo[node] = lo
        node_hi[node] = hi
        n = end - start
        parent_area = _area(lo[0], lo[1], lo[2], hi[0], hi[1], hi[2])
        best_cost = np.inf
        best_axis = -1
        best_bin = 0
        if n > 1:
            bin_count[:] = 0
            bin_lo[:] = np.inf
            bin_hi[:] = -np.inf
            for k in range(start, end):
                t = order[k]
                for a in range(3):
                    ext = chi[a] - clo[a]
                    if ext <= 0.0:
                        continue
                    b = int((cent[t, a] - clo[a]) * (BINS / ext))
                    b = min(b, BINS - 1)
                    bin_count[a, b] += 1
                    for c in range(3):
                        bin_lo[a, b, c] = min(bin_lo[a, b, c], tri_lo[t, c])
                        bin_hi[a, b, c] = max(bin_hi[a, b, c], tri_hi[t, c])
            for a in range(3):
                if chi[a] - clo[a] <= 0.0:
                    continue
                rl0 = rl1 = rl2 = np.inf
                rh0 = rh1 = rh2 = -np.inf
                rn = 0
                for b in range(BINS - 1, 0, -1):
                    rn += bin_count[a, b]
                    rl0 = min(rl0, bin_lo[a, b, 0]); rl1 = min(rl1, bin_lo[a, b, 1])  # noqa: E702
                    rl2 = min(rl2, bin_lo[a, b, 2]); rh0 = max(rh0, bin_hi[a, b, 0])  # noqa: E702
                    rh1 = max(rh1, bin_hi[a, b, 1]); rh2 = max(rh2, bin_hi[a, b, 2])  # noqa: E702
                    right_area[b] = _area(rl0, rl1, rl2, rh0, rh1, rh2)
                    right_n[b] = rn
                ll0 = ll1 = ll2 = np.inf
                lh0 = lh1 = lh2 = -np.inf
                ln = 0
                for b in range(BINS - 1):
                    ln += bin_count[a, b]
                    ll0 = min(ll0, bin_lo[a, b, 0]); ll1 = min(ll1, bin_lo[a, b, 1])  # noqa: E702
                    ll2 = min(ll2, bin_lo[a, b, 2]); lh0 = max(lh0, bin_hi[a, b, 0])  # noqa: E702
                    lh1 = max(lh1, bin_hi[a, b, 1]); lh2 = max(lh2, bin_hi[a, b, 2])  # noqa: E702
                    if ln == 0 or right_n[b + 1] == 0:
                        continue
                    cost = _area(ll0, ll1, ll2, lh0, lh1, lh2) * ln + right_area[b + 1] * right_n[b + 1]
                    if cost < best_cost:
                        best_cost, best_axis, best_bin = cost, a, b
        leaf_cost = INTERSECT_COST * n
        split_cost = TRAVERSAL_COST + (best_cost / parent_area if parent_area > 0 else np.inf)
        make_leaf = n <= 1 or (n <= leaf_size and leaf_cost <= split_cost)
        mid = start
        if not make_leaf:
            if best_axis >= 0:
                a = best_axis
                scale = BINS / (chi[a] - clo[a])
                i, j = start, end - 1
                while i <= j:
                    t = order[i]
                    b = min(int((cent[t, a] - clo[a]) * scale), BINS - 1)
                    if b <= best_bin:
                        i += 1
                    else:
                        order[i], order[j] = order[j], order[i]
                        j -= 1
                mid = i
            if mid == start or mid == end:  # all centroids coincide: split the range in half
                mid = start + n // 2
        if make_leaf:
            node_first[node] = start
            node_count[node] = n
            continue
        left = n_nodes
        n_nodes += 2
        node_first[node] = left
        node_count[node] = 0
        node_depth[left] = node_depth[node] + 1
        node_depth[left + 1] = node_depth[node] + 1
        # push right first so the left subtree is built (and numbered) first: depth-first layout
        stack_node[sp], stack_start[sp], stack_end[sp] = left + 1, mid, end
        stack_node[sp + 1], stack_start[sp + 1], stack_end[sp + 1] = left, start, mid
        sp += 2
    return node_lo[:n_nodes], node_hi[:n_nodes], node_first[:n_nodes], node_count[:n_nodes], \
        node_depth[:n_nodes], order


@nb.njit(cache=True)
def _flatten(node_lo, node_hi, node_first, node_count):
    """Binary tree -> two-child flat layout (inner nodes only, renumbered)."""
    n = node_lo.shape[0]
    flat_id = np.full(n, -1, np.int32)
    inner = 0
    for i in range(n):
        if node_count[i] == 0:
            flat_id[i] = inner
            inner += 1
    out = np.zeros((max(inner, 1), NODE_FLOATS), np.float32)
    ints = out.view(np.int32)
    if inner == 0:  # the root is a leaf: give it two children (the second repeats the first)
        for c in range(2):
            for a in range(3):
                out[0, 8 * c + a] = node_lo[0, a]
                out[0, 8 * c + 4 + a] = node_hi[0, a]
            ints[0, 8 * c + 3] = node_first[0]
            ints[0, 8 * c + 7] = node_count[0]
        return out
    for i in range(n):
        if node_count[i] != 0:
            continue
        f = flat_id[i]
        for c in range(2):
            child = node_first[i] + c
            for a in range(3):
                out[f, 8 * c + a] = node_lo[child, a]
                out[f, 8 * c + 4 + a] = node_hi[child, a]
            if node_count[child] > 0:
                ints[f, 8 * c + 3] = node_first[child]
                ints[f, 8 * c + 7] = node_count[child]
            else:
                ints[f, 8 * c + 3] = flat_id[child]
                ints[f, 8 * c + 7] = 0
    return out


def _sah_cost(node_lo, node_hi, node_count) -> float:
    areas = _areas(node_lo, node_hi)
    root = areas[0] if areas[0] > 0 else 1.0
    inner = node_count == 0
    return float((TRAVERSAL_COST * areas[inner].sum()
                  + INTERSECT_COST * (areas[~inner] * node_count[~inner]).sum()) / root)


def _areas(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    d = np.maximum(hi.astype(np.float64) - lo, 0.0)
    return 2.0 * (d[:, 0] * d[:, 1] + d[:, 1] * d[:, 2] + d[:, 2] * d[:, 0])


def pack_triangles(tris: np.ndarray, order: np.ndarray) -> np.ndarray:
    """(F,3,3) corners in leaf order -> (F,12) float32 rows ``v0,id | e1,0 | e2,0``."""
    t = tris[order].astype(np.float32)
    out = np.zeros((len(order), TRI_FLOATS), np.float32)
    out[:, 0:3] = t[:, 0]
    out[:, 3] = order.astype(np.int32).view(np.float32)
    out[:, 4:7] = t[:, 1] - t[:, 0]
    out[:, 8:11] = t[:, 2] - t[:, 0]
    return out


def build_bvh(triangles: np.ndarray, leaf_size: int = 4) -> BVH:
    """Build a binned-SAH BVH over ``triangles`` (F,3,3); ``leaf_size`` caps SAH leaves."""
    if leaf_size < 1 or leaf_size > 64:
        raise ValueError(f"leaf_size must be in 1..64, got {leaf_size}")
    tris = np.ascontiguousarray(triangles, dtype=np.float32)
    if tris.ndim != 3 or tris.shape[1:] != (3, 3) or len(tris) == 0:
        raise ValueError(f"triangles must be a non-empty (F, 3, 3) array, got shape {tris.shape}")
    start = time.perf_counter()
    tri_lo, tri_hi = tris.min(axis=1), tris.max(axis=1)
    cent = (tri_lo + tri_hi) * np.float32(0.5)
    lo, hi, first, count, depth, order = _build_binned(tri_lo, tri_hi, cent, leaf_size)
    nodes = _flatten(lo, hi, first, count)
    packed = pack_triangles(tris, order)
    seconds = time.perf_counter() - start
    leaves = count > 0
    stats = BVHStats(
        triangles=len(tris), inner_nodes=int((~leaves).sum()), leaves=int(leaves.sum()),
        depth=int(depth.max()) if len(depth) else 0, sah_cost=_sah_cost(lo, hi, count),
        mean_leaf_size=float(count[leaves].mean()), build_seconds=seconds,
        bytes=int(nodes.nbytes + packed.nbytes),
    )
    return BVH(nodes, packed, order, stats)
