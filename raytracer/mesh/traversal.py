"""Ray traversal of the flat 8-wide BVH on the CPU (numba): the probe, the CPU reference and
the tests.

Mirrors ``kernels/traverse.cl`` step for step (same slab planes picked by the ray's direction
signs, same Möller–Trumbore, leaves in slot order with all of a leaf's triangles tested at once
and its nearest hit kept, hit inner children pushed last slot first with their entry
distances, then the top popped for any hit or the nearest of those just pushed taken for
closest hit, the same culling of popped nodes), so counts measured here describe what the
OpenCL kernels do. ``tests`` counts leaf tests (the kernels test a leaf's up to four triangles
in one float4 test). ``trace_packet`` mirrors the packet kernels (``kernels/primary_packet.cl``,
``kernels/shadow_packet.cl``) alike.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from common.jit_cache import njit
from raytracer.mesh.bvh import CHILD_COUNT, CHILD_INDEX, KERNEL_STACK, WIDTH, plane

EPS_DIR = 1e-12
NO_HIT = -1


@njit()
def safe_inverse(d):
    """1/d with tiny components replaced by a signed epsilon (keeps the slab test NaN-free)."""
    if abs(d) < EPS_DIR:
        d = EPS_DIR if d >= 0.0 else -EPS_DIR
    return 1.0 / d


@njit()
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


@njit()
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


@njit()
def ray_axis(o, d, axis):
    """One axis of a ray's slab set-up (traverse.cl's): the safe inverse direction, the origin
    times it and the first floats of the near and far planes in a node, picked by the
    direction's sign."""
    inv = safe_inverse(d)
    return inv, o * inv, plane(axis, inv < 0.0), plane(axis, inv >= 0.0)


@njit()
def slab(nodes, node, c, xn, yn, zn, xf, yf, zf, ix, iy, iz, oix, oiy, oiz, tmax):
    """(t_near, t_far) of child ``c``'s box in ``node`` along a ray with inverse direction
    (ix, iy, iz) and origin times it (oix, oiy, oiz): each axis' near and far plane at the
    first floats (xn, yn, zn) and (xf, yf, zf) its direction signs pick, entry clamped to 0,
    exit to ``tmax`` (traverse.cl's slab test). The box is hit where t_near <= t_far."""
    t_near = max(max(nodes[node, xn + c] * ix - oix, nodes[node, yn + c] * iy - oiy),
                 max(nodes[node, zn + c] * iz - oiz, 0.0))
    t_far = min(min(nodes[node, xf + c] * ix - oix, nodes[node, yf + c] * iy - oiy),
                min(nodes[node, zf + c] * iz - oiz, tmax))
    return t_near, t_far


@njit()
def take_nearest(stack, stack_t, pushed, sp):
    """The next node of a closest-hit traversal (traverse.cl's take_nearest): the nearest of
    the entries pushed since ``pushed`` (ties: the top if it is one of them, else the lowest
    pushed); the top moves into its place. Returns (node, new stack size)."""
    nearest = sp - 1
    for j in range(pushed, sp - 1):
        if stack_t[j] < stack_t[nearest]:
            nearest = j
    node = stack[nearest]
    sp -= 1
    stack[nearest], stack_t[nearest] = stack[sp], stack_t[sp]
    return node, sp


@njit()
def trace(nodes, ints, tris, ox, oy, oz, dx, dy, dz, tmax, any_hit):
    """Closest (or any, with ``any_hit``) hit below ``tmax``.

    Returns (t, prim, u, v, steps, tests, last_node): ``prim`` is the packed triangle index or
    -1, ``steps`` the nodes visited, ``tests`` the leaves tested, ``last_node`` the last node
    visited (the probe's coherence measure).
    """
    ix, oix, xn, xf = ray_axis(ox, dx, 0)
    iy, oiy, yn, yf = ray_axis(oy, dy, 1)
    iz, oiz, zn, zf = ray_axis(oz, dz, 2)
    stack = np.empty(KERNEL_STACK, np.int32)
    stack_t = np.empty(KERNEL_STACK, np.float64)
    tn = np.empty(WIDTH, np.float64)
    hit = np.empty(WIDTH, np.bool_)
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
            t_near, t_far = slab(nodes, node, c, xn, yn, zn, xf, yf, zf, ix, iy, iz, oix, oiy,
                                 oiz, best_t)
            tn[c] = t_near
            hit[c] = t_near <= t_far
        for c in range(WIDTH):  # leaves in slot order
            count = ints[node, CHILD_COUNT + c]
            if hit[c] and count > 0 and tn[c] <= best_t:
                tests += 1
                t, k, u, v = intersect_leaf(tris, ints[node, CHILD_INDEX + c], count, ox, oy,
                                            oz, dx, dy, dz, best_t)
                if k >= 0:
                    best_t, best_prim, best_u, best_v = t, k, u, v
                    if any_hit:
                        return best_t, best_prim, best_u, best_v, steps, tests, last
        # hit inner children still starting before the closest hit: pushed last slot first
        node = -1
        pushed = sp
        for c in range(WIDTH - 1, -1, -1):
            if hit[c] and ints[last, CHILD_COUNT + c] == 0 and tn[c] <= best_t:
                stack[sp], stack_t[sp] = ints[last, CHILD_INDEX + c], tn[c]
                sp += 1
        if any_hit or sp == pushed:  # any hit pops the top: slot order
            continue
        node, sp = take_nearest(stack, stack_t, pushed, sp)  # closest hit
    return best_t, best_prim, best_u, best_v, steps, tests, last


@njit(parallel=True)
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


@njit(parallel=True)
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


# One numba hot loop, kept whole: the traversal's state (node, stack pointer, step and test
# counts, the last node) is a handful of scalars carried from one step to the next. Moving a
# step's child tests or leaf tests into a function would put a call in the per-step loop and
# pass that state in and out of it on every node, where here it stays in registers.
@njit()
def trace_packet(nodes, ints, tris, origins, dirs, best, any_hit):
    """Rays traversed together, one per row of ``origins`` and ``dirs`` (lanes, 3), as the
    packet kernels do: each child box tested against every lane, a leaf tested at once (in
    slot order) where any lane hits its box, its triangles against those lanes.

    Closest hit (``kernels/primary_packet.cl``): an inner child is pushed at once where any
    lane hits it, with those lanes' nearest entry, the nearest just pushed is taken next and a
    popped node is dropped beyond every lane's closest hit. Any hit (``any_hit``,
    ``kernels/shadow_packet.cl``): a lane with a hit is done (its ``best`` becomes -1), the
    hit inner children are pushed after the node's leaves, last slot first, the top popped,
    and the packet stops when every lane is done.

    ``best`` (lanes,) holds each lane's tmax on entry (a negative one: a lane that nothing
    hits, such as one outside the image) and its closest hit on exit. Returns (prim, u, v,
    hit_node, steps, tests): per lane the triangle (-1: none), its barycentrics and the node
    whose leaf it was found in (the packet's last node for a lane that hit nothing); the
    packet's node steps and triangle tests (a packet tests a leaf's triangles one after
    another, each against every lane, so its cost follows triangles, where one ray's follows
    leaves).
    """
    lanes = dirs.shape[0]
    inv = np.empty((lanes, 3), np.float64)
    oi = np.empty((lanes, 3), np.float64)
    near = np.empty((lanes, 3), np.int64)
    far = np.empty((lanes, 3), np.int64)
    for lane in range(lanes):
        for axis in range(3):
            inv[lane, axis], oi[lane, axis], near[lane, axis], far[lane, axis] = ray_axis(
                origins[lane, axis], dirs[lane, axis], axis)
    prim = np.full(lanes, NO_HIT, np.int32)
    bu = np.zeros(lanes, np.float64)
    bv = np.zeros(lanes, np.float64)
    hit_node = np.zeros(lanes, np.int32)
    active = np.empty(lanes, np.bool_)
    inner = np.empty(WIDTH, np.bool_)
    stack = np.empty(KERNEL_STACK, np.int32)
    stack_t = np.empty(KERNEL_STACK, np.float64)
    sp = 0
    node = 0
    steps = 0
    tests = 0
    last = 0
    while True:
        if node < 0:
            if sp == 0:
                break
            sp -= 1
            if not any_hit and stack_t[sp] > best.max():
                continue
            node = stack[sp]
        steps += 1
        last = node
        pushed = sp
        for c in range(WIDTH):  # in slot order: a leaf tested at once
            inner[c] = False
            entry = np.inf
            for lane in range(lanes):
                t_near, t_far = slab(nodes, node, c, near[lane, 0], near[lane, 1], near[lane, 2],
                                     far[lane, 0], far[lane, 1], far[lane, 2], inv[lane, 0],
                                     inv[lane, 1], inv[lane, 2], oi[lane, 0], oi[lane, 1],
                                     oi[lane, 2], best[lane])
                active[lane] = t_near <= t_far
                if active[lane]:
                    entry = min(entry, t_near)
            if entry == np.inf:
                continue
            count = ints[node, CHILD_COUNT + c]
            if count > 0:
                tests += count  # each triangle: one test of every lane
                first = ints[node, CHILD_INDEX + c]
                for k in range(first, first + count):
                    for lane in range(lanes):
                        if not active[lane]:
                            continue
                        t, u, v = intersect_triangle(tris, k, origins[lane, 0],
                                                     origins[lane, 1], origins[lane, 2],
                                                     dirs[lane, 0], dirs[lane, 1], dirs[lane, 2])
                        if t < best[lane]:
                            best[lane], prim[lane], bu[lane], bv[lane] = t, k, u, v
                            hit_node[lane] = node
                            if any_hit:
                                best[lane] = -1.0
            elif any_hit:
                inner[c] = True
            else:
                stack[sp], stack_t[sp] = ints[node, CHILD_INDEX + c], entry
                sp += 1
        node = -1
        if any_hit:
            if best.max() < 0.0:  # every lane done
                break
            for c in range(WIDTH - 1, -1, -1):
                if inner[c]:
                    stack[sp] = ints[last, CHILD_INDEX + c]
                    sp += 1
            continue
        if sp == pushed:
            continue
        node, sp = take_nearest(stack, stack_t, pushed, sp)
    for lane in range(lanes):
        if prim[lane] < 0:
            hit_node[lane] = last
    return prim, bu, bv, hit_node, steps, tests
