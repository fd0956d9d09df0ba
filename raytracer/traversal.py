"""Ray traversal of the flat BVH on the CPU (numba): the probe, the CPU reference and the tests.

Mirrors ``kernels/traverse.cl`` step for step (same slab test, same Möller–Trumbore, same
near-child-first order), so counts measured here describe what the OpenCL kernels do.
"""

from __future__ import annotations

import numba as nb
import numpy as np

STACK_SIZE = 64
EPS_DIR = 1e-12
NO_HIT = -1


@nb.njit(cache=True, inline="always")
def safe_inverse(d):
    """1/d with tiny components replaced by a signed epsilon (keeps the slab test NaN-free)."""
    if abs(d) < EPS_DIR:
        d = EPS_DIR if d >= 0.0 else -EPS_DIR
    return 1.0 / d


@nb.njit(cache=True, inline="always")
def _slab(nodes, n, c, oix, oiy, oiz, ix, iy, iz, tmax):
    """Ray/box distance for child c of node n (``oi* = o * inv``: t = lo * inv - o * inv)."""
    b = 8 * c
    tx0 = nodes[n, b + 0] * ix - oix
    tx1 = nodes[n, b + 4] * ix - oix
    ty0 = nodes[n, b + 1] * iy - oiy
    ty1 = nodes[n, b + 5] * iy - oiy
    tz0 = nodes[n, b + 2] * iz - oiz
    tz1 = nodes[n, b + 6] * iz - oiz
    tnear = max(max(min(tx0, tx1), min(ty0, ty1)), max(min(tz0, tz1), 0.0))
    tfar = min(min(max(tx0, tx1), max(ty0, ty1)), min(max(tz0, tz1), tmax))
    return tnear if tnear <= tfar else np.inf


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


@nb.njit(cache=True)
def trace(nodes, ints, tris, ox, oy, oz, dx, dy, dz, tmax, any_hit):
    """Closest (or any, with ``any_hit``) hit below ``tmax``.

    Returns (t, prim, u, v, steps, tests, last_node): ``prim`` is the packed triangle index or
    -1, ``steps`` the inner nodes visited, ``tests`` the triangle tests, ``last_node`` the
    last inner node visited (the probe's coherence measure).
    """
    ix, iy, iz = safe_inverse(dx), safe_inverse(dy), safe_inverse(dz)
    oix, oiy, oiz = ox * ix, oy * iy, oz * iz
    stack = np.empty(STACK_SIZE, np.int32)
    sp = 0
    node = 0
    best_t, best_prim, best_u, best_v = tmax, NO_HIT, 0.0, 0.0
    steps = 0
    tests = 0
    last = 0
    while node >= 0:
        steps += 1
        last = node
        t0 = _slab(nodes, node, 0, oix, oiy, oiz, ix, iy, iz, best_t)
        t1 = _slab(nodes, node, 1, oix, oiy, oiz, ix, iy, iz, best_t)
        nxt0 = -1
        nxt1 = -1
        for c in range(2):
            tc = t0 if c == 0 else t1
            if tc == np.inf:
                continue
            count = ints[node, 8 * c + 7]
            first = ints[node, 8 * c + 3]
            if count > 0:
                for k in range(first, first + count):
                    tests += 1
                    t, u, v = intersect_triangle(tris, k, ox, oy, oz, dx, dy, dz)
                    if t < best_t:
                        best_t, best_prim, best_u, best_v = t, k, u, v
                        if any_hit:
                            return best_t, best_prim, best_u, best_v, steps, tests, last
            elif c == 0:
                nxt0 = first
            else:
                nxt1 = first
        if nxt0 >= 0 and nxt1 >= 0:
            # re-test after leaf hits may have shortened best_t; near child first
            if t1 < t0:
                nxt0, nxt1 = nxt1, nxt0
            stack[sp] = nxt1
            sp += 1
            node = nxt0
        elif nxt0 >= 0:
            node = nxt0
        elif nxt1 >= 0:
            node = nxt1
        elif sp > 0:
            sp -= 1
            node = stack[sp]
        else:
            node = -1
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
