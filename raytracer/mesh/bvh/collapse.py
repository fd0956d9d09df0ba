"""A binary slot tree made into the flat 8-wide BVH: the collapse, the shadow rays' child order,
the leaves' triangle slots and their packing (layouts: :mod:`raytracer.mesh.bvh.layout`).

The collapse makes each wide node from a binary inner node by replacing, while fewer than
eight children, the inner child of largest surface area by its two children (leaves stay
leaves). Eight children rather than four: the same tree in fewer, wider steps, 7-38 % faster
per ray kind on Intel's CPU runtime, whose float8 box test is one AVX instruction per plane.
Both builders end in :func:`finish_bvh`.
"""

from __future__ import annotations

import time

import numba as nb
import numpy as np

from common.jit_cache import njit
from raytracer.mesh.bvh.cost import area, binary_sah, box_area
from raytracer.mesh.bvh.layout import (
    BVH,
    CHILD_COUNT,
    CHILD_INDEX,
    EMPTY_BOX,
    KERNEL_STACK,
    LEAF_LANES,
    NODE_FLOATS,
    STACK,
    TRI_FLOATS,
    WIDTH,
    BVHStats,
    plane,
)


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
def _open_children(b, node_box, node_first, node_count, kids):
    """The children of the wide node made from binary node ``b`` into ``kids`` (``b`` itself
    when it is a leaf: the root); returns how many. Opens the largest-area inner child in
    place, order kept, until ``WIDTH``."""
    if node_count[b] > 0:
        kids[0] = b
        return 1
    kids[0] = node_first[b]
    kids[1] = node_first[b] + 1
    m = 2
    while m < WIDTH:
        best, best_area = -1, -1.0
        for j in range(m):
            k = kids[j]
            if node_count[k] == 0:
                a = box_area(node_box, k)
                if a > best_area:
                    best, best_area = j, a
        if best < 0:
            break
        k = kids[best]
        for j in range(m, best + 1, -1):
            kids[j] = kids[j - 1]
        kids[best] = node_first[k]
        kids[best + 1] = node_first[k] + 1
        m += 1
    return m


@njit()
def _write_node(out, w, kids, m, node_box, node_first, node_count, src, n_wide):
    """Wide node ``w``'s ``WIDTH`` slots from its ``m`` binary children ``kids`` (empty slots
    after them); its inner children become wide nodes ``n_wide, n_wide + 1, ...`` (``src``
    records their binary nodes). Returns how many inner children it has."""
    ints = out.view(np.int32)
    inner = 0
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
            ints[w, CHILD_INDEX + c] = n_wide + inner
            ints[w, CHILD_COUNT + c] = 0
            src[n_wide + inner] = k
            inner += 1
    return inner


@njit()
def _stack_need(ints, inner_kids, n_wide):
    """Traversal-stack entries a ray may need from the root: a ray at node w holds the pending
    siblings of its ancestors' paths, and an any-hit ray pushes all of w's inner children
    before taking one."""
    need = np.zeros(n_wide, np.int64)
    for w in range(n_wide - 1, -1, -1):
        k = inner_kids[w]
        best = k
        for c in range(WIDTH):
            if ints[w, CHILD_COUNT + c] == 0:
                best = max(best, k - 1 + need[ints[w, CHILD_INDEX + c]])
        need[w] = best
    return need[0]


@njit()
def _collapse(node_box, node_first, node_count, out):
    """Binary tree (slot arrays, root 0) -> WIDTH-wide nodes in the flat layout.

    Returns (wide nodes made, stack entries needed). Each wide node takes one binary inner node
    and opens its largest-area inner child until it has ``WIDTH`` children, so there are at most
    as many wide nodes as binary inner nodes, the rows of ``out``; every slot of a used row is
    written."""
    cap = out.shape[0]
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
        m = _open_children(src[w], node_box, node_first, node_count, kids)
        first_new = n_wide
        inner_kids[w] = _write_node(out, w, kids, m, node_box, node_first, node_count, src,
                                    n_wide)
        n_wide += inner_kids[w]
        for v in range(n_wide - 1, first_new - 1, -1):  # children depth-first, first on top
            todo[sp] = v
            sp += 1
    return n_wide, _stack_need(out.view(np.int32), inner_kids, n_wide)


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
                key[c] = area(nodes[n, plane(0, False) + c], nodes[n, plane(1, False) + c],
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


def finish_bvh(
    tris: np.ndarray,
    node_box: np.ndarray,
    node_first: np.ndarray,
    node_count: np.ndarray,
    ids: np.ndarray,
    leaf_size: int,
    start: float,
) -> BVH:
    """Collapse the binary slot arrays into the wide flat layout and pack the triangles;
    ``start``: the build's ``time.perf_counter()`` at its start."""
    order, leaves, depth = _dfs_order(node_first, node_count)
    sah = binary_sah(node_box, node_first, node_count, order, leaf_size)
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
