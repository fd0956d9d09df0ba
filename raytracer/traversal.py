"""Ray traversal of the flat 4-wide BVH on the CPU (numba): the probe, the CPU reference and
the tests.

Mirrors ``kernels/traverse.cl`` step for step (same slab planes picked by the ray's direction
signs, same Möller–Trumbore, leaves in slot order with all of a leaf's triangles tested at once
and its nearest hit kept, a single hit inner child taken directly, several sorted by entry
distance with ties in slot order for closest hit and unsorted for any hit, the same culling of
popped nodes), so counts measured here describe what the OpenCL kernels do. ``tests`` counts
leaf tests (the kernels test a leaf's up to four triangles in one float4 test).
"""

from __future__ import annotations

import numba as nb
import numpy as np

STACK_SIZE = 64  # bvh.KERNEL_STACK
EPS_DIR = 1e-12
NO_HIT = -1
WIDTH = 4


@nb.njit(cache=True, inline="always")
def safe_inverse(d):
    """1/d with tiny components replaced by a signed epsilon (keeps the slab test NaN-free)."""
    if abs(d) < EPS_DIR:
        d = EPS_DIR if d >= 0.0 else -EPS_DIR
    return 1.0 / d


@nb.njit(cache=True, inline="always")
def intersect_triangle(tris, k, ox, oy, oz, dx, dy, dz):
    """Möller–Trumbore on packed triangle ``k``: returns (t, u, v); t = inf on a miss."""
    e1x, e1y, e1z = tris[k, 4], tris[k, 5], tris[k, 6]
    e2x, e2y, e2z = tris[k, 8], tris[k, 9], tris[k, 10]
    px = dy * e2z - dz * e2y
    py = dz * e2x - dx * e2z
    pz = dx * e2y - dy * e2x
    det = e1x * px + e1y * py + e1z * pz
    if abs(det) < 1e-12:
        return np.inf, 0.0, 0.0
    inv = 1.0 / det
    sx, sy, sz = ox - tris[k, 0], oy - tris[k, 1], oz - tris[k, 2]
    u = (sx * px + sy * py + sz * pz) * inv
    if u < 0.0 or u > 1.0:
        return np.inf, 0.0, 0.0
    qx = sy * e1z - sz * e1y
    qy = sz * e1x - sx * e1z
    qz = sx * e1y - sy * e1x
    v = (dx * qx + dy * qy + dz * qz) * inv
    if v < 0.0 or u + v > 1.0:
        return np.inf, 0.0, 0.0
    t = (e2x * qx + e2y * qy + e2z * qz) * inv
    if t <= 0.0:
        return np.inf, 0.0, 0.0
    return t, u, v


@nb.njit(cache=True, inline="always")
def intersect_leaf(tris, first, count, ox, oy, oz, dx, dy, dz, best_t):
    """The kernel's leaf test: every triangle of ``first .. first + count - 1`` tested, the
    nearest hit closer than ``best_t`` kept (ties: the lowest index). Returns (t, prim, u, v);
    prim = -1 if none."""
    best_prim, best_u, best_v = NO_HIT, 0.0, 0.0
    for k in range(first, first + count):
        t, u, v = intersect_triangle(tris, k, ox, oy, oz, dx, dy, dz)
        if t < best_t:
            best_t, best_prim, best_u, best_v = t, k, u, v
    return best_t, best_prim, best_u, best_v


@nb.njit(cache=True)
def trace(nodes, ints, tris, ox, oy, oz, dx, dy, dz, tmax, any_hit):
    """Closest (or any, with ``any_hit``) hit below ``tmax``.

    Returns (t, prim, u, v, steps, tests, last_node): ``prim`` is the packed triangle index or
    -1, ``steps`` the nodes visited, ``tests`` the leaves tested, ``last_node`` the last node
    visited (the probe's coherence measure).
    """
    ix, iy, iz = safe_inverse(dx), safe_inverse(dy), safe_inverse(dz)
    oix, oiy, oiz = ox * ix, oy * iy, oz * iz
    # float offsets of each axis' near / far plane block in a node (4 floats per block)
    xn = 4 if ix < 0.0 else 0
    yn = 12 if iy < 0.0 else 8
    zn = 20 if iz < 0.0 else 16
    xf, yf, zf = 4 - xn, 20 - yn, 36 - zn
    stack = np.empty(STACK_SIZE, np.int32)
    stack_t = np.empty(STACK_SIZE, np.float64)
    tn = np.empty(WIDTH, np.float64)
    hit = np.empty(WIDTH, np.bool_)
    inner = np.empty(WIDTH, np.bool_)
    sp = 0
    node = 0
    best_t, best_prim, best_u, best_v = tmax, NO_HIT, 0.0, 0.0
    steps = 0
    tests = 0
    last = 0
    while True:
        if node < 0:  # pop; closest-hit rays drop nodes that start beyond the best hit
            if sp == 0:
                break
            sp -= 1
            if not any_hit and stack_t[sp] > best_t:
                continue
            node = stack[sp]
        steps += 1
        last = node
        for c in range(WIDTH):
            t_near = max(max(nodes[node, xn + c] * ix - oix, nodes[node, yn + c] * iy - oiy),
                         max(nodes[node, zn + c] * iz - oiz, 0.0))
            t_far = min(min(nodes[node, xf + c] * ix - oix, nodes[node, yf + c] * iy - oiy),
                        min(nodes[node, zf + c] * iz - oiz, best_t))
            tn[c] = t_near
            hit[c] = t_near <= t_far
        for c in range(WIDTH):  # leaves in slot order
            count = ints[node, 28 + c]
            if hit[c] and count > 0 and tn[c] <= best_t:
                tests += 1
                t, k, u, v = intersect_leaf(tris, ints[node, 24 + c], count, ox, oy, oz, dx,
                                            dy, dz, best_t)
                if k >= 0:
                    best_t, best_prim, best_u, best_v = t, k, u, v
                    if any_hit:
                        return best_t, best_prim, best_u, best_v, steps, tests, last
        # hit inner children still starting before the closest hit
        n_in = 0
        one = -1
        for c in range(WIDTH):
            inner[c] = hit[c] and ints[last, 28 + c] == 0 and tn[c] <= best_t
            if inner[c]:
                n_in += 1
                one = ints[last, 24 + c]
        if n_in <= 1:  # none: pop; one: it is the next node (no sort, no stack)
            node = one
        elif any_hit:
            node = -1
            for c in range(WIDTH - 1, -1, -1):  # popped in slot order
                if inner[c]:
                    stack[sp] = ints[last, 24 + c]
                    sp += 1
        else:
            n0 = n1 = n2 = n3 = -1
            d0 = d1 = d2 = d3 = np.inf
            for c in range(WIDTH):  # insertion by entry distance, ties keep slot order
                if inner[c]:
                    ci, cd = ints[last, 24 + c], tn[c]
                    if cd < d0:
                        n0, d0, ci, cd = ci, cd, n0, d0
                    if cd < d1:
                        n1, d1, ci, cd = ci, cd, n1, d1
                    if cd < d2:
                        n2, d2, ci, cd = ci, cd, n2, d2
                    if cd < d3:
                        n3, d3, ci, cd = ci, cd, n3, d3
            if n3 >= 0:
                stack[sp], stack_t[sp] = n3, d3
                sp += 1
            if n2 >= 0:
                stack[sp], stack_t[sp] = n2, d2
                sp += 1
            if n1 >= 0:
                stack[sp], stack_t[sp] = n1, d1
                sp += 1
            node = n0
    return best_t, best_prim, best_u, best_v, steps, tests, last


@nb.njit(cache=True, parallel=True)
def trace_rays(nodes, ints, tris, origins, dirs, tmax, any_hit):
    """Trace many rays; returns (t, prim, steps, tests) arrays."""
    n = origins.shape[0]
    t_out = np.empty(n, np.float32)
    prim_out = np.empty(n, np.int32)
    steps_out = np.empty(n, np.int32)
    tests_out = np.empty(n, np.int32)
    for i in nb.prange(n):
        t, p, _, _, s, k, _ = trace(
            nodes,
            ints,
            tris,
            origins[i, 0],
            origins[i, 1],
            origins[i, 2],
            dirs[i, 0],
            dirs[i, 1],
            dirs[i, 2],
            tmax[i],
            any_hit,
        )
        t_out[i], prim_out[i], steps_out[i], tests_out[i] = t, p, s, k
    return t_out, prim_out, steps_out, tests_out


@nb.njit(cache=True, parallel=True)
def brute_force(tris, origins, dirs, tmax):
    """Closest hit by testing every triangle: the ground truth for BVH tests."""
    n = origins.shape[0]
    t_out = np.empty(n, np.float32)
    prim_out = np.full(n, NO_HIT, np.int32)
    for i in nb.prange(n):
        best = tmax[i]
        for k in range(tris.shape[0]):
            t, _, _ = intersect_triangle(
                tris,
                k,
                origins[i, 0],
                origins[i, 1],
                origins[i, 2],
                dirs[i, 0],
                dirs[i, 1],
                dirs[i, 2],
            )
            if t < best:
                best = t
                prim_out[i] = k
        t_out[i] = best
    return t_out, prim_out
