"""The tracer's four phases on the CPU (numba), with per-pixel work counters.

Two users: the probe traces tiles of the view to measure the workload, and the tests
render a reference image that the OpenCL output must match. The math mirrors
``kernels/tracer.cl`` line for line (same camera rays, same PCG random numbers, same shading),
and ``traversal.trace`` walks the same 8-wide BVH as ``kernels/traverse.cl``, so the per-pixel
counters (nodes visited, leaves tested) match the kernels'. (Compiled code is cached under
the digest of this file and of ``traversal.py`` and ``bvh.py``: :mod:`raytracer.jit_cache`.)
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from raytracer.jit_cache import njit
from raytracer.phases import PRIMARY_PACKET
from raytracer.traversal import trace, trace_packet

SHADOW_EPS = 1e-4
# counters[y, x, phase, 0|1] = traversal steps | leaf tests, phases in this order
PRIMARY, SHADOW, AO = 0, 1, 2
PACKET_COLS, PACKET_ROWS = PRIMARY_PACKET


@njit(inline="always")
def pcg_hash(v):
    """PCG hash on uint32 values carried in int64 (identical to tracer.cl's pcg_hash)."""
    state = (v * 747796405 + 2891336453) & 0xFFFFFFFF
    word = (((state >> ((state >> 28) + 4)) ^ state) * 277803737) & 0xFFFFFFFF
    return ((word >> 22) ^ word) & 0xFFFFFFFF


@njit(inline="always")
def _normalize(x, y, z):
    n = math.sqrt(x * x + y * y + z * z)
    return x / n, y / n, z / n


@njit(inline="always")
def _primary_dir(basis, x, y):
    """Unit direction of frame pixel (x, y)'s primary ray (tracer.cl's primary_dir)."""
    return _normalize(basis[1, 0] + (x + 0.5) * basis[2, 0] + (y + 0.5) * basis[3, 0],
                      basis[1, 1] + (x + 0.5) * basis[2, 1] + (y + 0.5) * basis[3, 1],
                      basis[1, 2] + (x + 0.5) * basis[2, 2] + (y + 0.5) * basis[3, 2])


@njit()
def _pixel(nodes, ints, snodes, sints, tris, normals, basis, x, y, width, light, scale, ao_rays,
           ao_radius, shadows, phong, seed, counters, last_node, prim_out, row, col):
    """All phases for frame pixel (x, y), its primary ray traced alone; returns linear RGB.
    Its counters, last node and triangle go to [row, col] of the output arrays. Shadow rays
    walk ``snodes`` (``BVH.shadow_nodes``), the other rays ``nodes``."""
    dx, dy, dz = _primary_dir(basis, x, y)
    t, prim, u, v, steps, tests, last = trace(nodes, ints, tris, basis[0, 0], basis[0, 1],
                                              basis[0, 2], dx, dy, dz, np.inf, False)
    counters[row, col, PRIMARY, 0] = steps
    counters[row, col, PRIMARY, 1] = tests
    last_node[row, col] = last
    prim_out[row, col] = prim
    return _secondary(nodes, ints, snodes, sints, tris, normals, basis, x, y, width, light,
                      scale, ao_rays, ao_radius, shadows, phong, seed, counters, row, col, dx, dy,
                      dz, t, prim, u, v)


@njit()
def _packet(nodes, ints, snodes, sints, tris, normals, basis, x0, y0, width, height, light,
            scale, ao_rays, ao_radius, shadows, phong, seed, counters, last_node, prim_out, rgb,
            row0, col0):
    """All phases for the ``PACKET_ROWS`` x ``PACKET_COLS`` block of frame pixels at (x0, y0),
    its primary rays traced as one packet (kernels/primary_packet.cl): every pixel gets the
    packet's primary counters. Pixel (x0 + i, y0 + j) writes [row0 + j, col0 + i] of the output
    arrays and its linear RGB to ``rgb``; those beyond ``width`` x ``height`` are not traced."""
    lanes = PACKET_ROWS * PACKET_COLS
    dirs = np.empty((lanes, 3), np.float64)
    best = np.empty(lanes, np.float64)
    for lane in range(lanes):
        x, y = x0 + lane % PACKET_COLS, y0 + lane // PACKET_COLS
        dirs[lane, 0], dirs[lane, 1], dirs[lane, 2] = _primary_dir(basis, x, y)
        best[lane] = np.inf if x < width and y < height else -1.0
    prim, bu, bv, hit_node, steps, tests = trace_packet(nodes, ints, tris, basis[0, 0],
                                                        basis[0, 1], basis[0, 2], dirs, best)
    for lane in range(lanes):
        if best[lane] < 0.0:
            continue
        i, j = lane % PACKET_COLS, lane // PACKET_COLS
        row, col = row0 + j, col0 + i
        counters[row, col, PRIMARY, 0] = steps
        counters[row, col, PRIMARY, 1] = tests
        last_node[row, col] = hit_node[lane]
        prim_out[row, col] = prim[lane]
        rgb[row, col, 0], rgb[row, col, 1], rgb[row, col, 2] = _secondary(
            nodes, ints, snodes, sints, tris, normals, basis, x0 + i, y0 + j, width, light,
            scale, ao_rays, ao_radius, shadows, phong, seed, counters, row, col, dirs[lane, 0],
            dirs[lane, 1], dirs[lane, 2], best[lane], prim[lane], bu[lane], bv[lane])


@njit()
def _secondary(nodes, ints, snodes, sints, tris, normals, basis, x, y, width, light, scale,
               ao_rays, ao_radius, shadows, phong, seed, counters, row, col, dx, dy, dz, t, prim,
               u, v):
    """The phases after primary for frame pixel (x, y), whose primary ray (dx, dy, dz) hit
    triangle ``prim`` at ``t`` (u, v): shadow and AO rays (counters to [row, col]) and
    shading. Returns linear RGB."""
    ex, ey, ez = basis[0, 0], basis[0, 1], basis[0, 2]
    if prim < 0:
        s = 0.5 * (1.0 - dy)
        return (0.55 * (1 - s) + 0.9 * s, 0.65 * (1 - s) + 0.9 * s, 0.8 * (1 - s) + 0.92 * s)
    # geometric normal facing the viewer, offset origin
    gx, gy, gz = normals[prim, 3], normals[prim, 7], normals[prim, 11]  # unit, from the host
    if gx * dx + gy * dy + gz * dz > 0.0:
        gx, gy, gz = -gx, -gy, -gz
    px, py, pz = ex + t * dx, ey + t * dy, ez + t * dz
    eps = SHADOW_EPS * scale
    ox, oy, oz = px + gx * eps, py + gy * eps, pz + gz * eps
    vis = 1.0
    if shadows:
        lx, ly, lz = light[0] - ox, light[1] - oy, light[2] - oz  # the segment, t in (0, 1)
        if lx * gx + ly * gy + lz * gz <= 0.0:
            vis = 0.0
        else:
            _, p2, _, _, s2, k2, _ = trace(snodes, sints, tris, ox, oy, oz, lx, ly, lz,
                                           1.0 - SHADOW_EPS, True)
            counters[row, col, SHADOW, 0] = s2
            counters[row, col, SHADOW, 1] = k2
            if p2 >= 0:
                vis = 0.0
    open_ = 1.0
    state = pcg_hash((y * width + x) ^ pcg_hash(seed))
    rays = int(ao_rays)
    frac = ao_rays - rays
    if frac > 0.0:  # a fractional count: one more ray in that share of the pixels
        state = pcg_hash(state)
        if (state >> 8) * (1.0 / 16777216.0) < frac:
            rays += 1
    if rays > 0:
        sign = 1.0 if gz >= 0.0 else -1.0
        a = -1.0 / (sign + gz)
        b = gx * gy * a
        b1x, b1y, b1z = 1.0 + sign * gx * gx * a, sign * b, -sign * gx
        b2x, b2y, b2z = b, sign + gy * gy * a, -gy
        blocked = 0
        steps_ao = 0
        tests_ao = 0
        for _ in range(rays):
            state = pcg_hash(state)
            r1 = (state >> 8) * (1.0 / 16777216.0)
            state = pcg_hash(state)
            r2 = (state >> 8) * (1.0 / 16777216.0)
            r = math.sqrt(r1)
            phi = 6.28318530718 * r2
            cz = math.sqrt(max(0.0, 1.0 - r1))
            cx, cy = r * math.cos(phi), r * math.sin(phi)
            # unit up to rounding (an orthonormal basis): not normalized again, as in the kernel
            qx, qy, qz = (b1x * cx + b2x * cy + gx * cz, b1y * cx + b2y * cy + gy * cz,
                          b1z * cx + b2z * cy + gz * cz)
            _, p3, _, _, s3, k3, _ = trace(nodes, ints, tris, ox, oy, oz, qx, qy, qz, ao_radius,
                                           True)
            steps_ao += s3
            tests_ao += k3
            if p3 >= 0:
                blocked += 1
        counters[row, col, AO, 0] = steps_ao
        counters[row, col, AO, 1] = tests_ao
        open_ = 1.0 - blocked / rays
    w = 1.0 - u - v
    nx = normals[prim, 0] * w + normals[prim, 4] * u + normals[prim, 8] * v
    ny = normals[prim, 1] * w + normals[prim, 5] * u + normals[prim, 9] * v
    nz = normals[prim, 2] * w + normals[prim, 6] * u + normals[prim, 10] * v
    nx, ny, nz = _normalize(nx, ny, nz)
    if nx * dx + ny * dy + nz * dz > 0.0:
        nx, ny, nz = -nx, -ny, -nz
    ar, ag, ab = 0.8, 0.78, 0.72
    if phong:
        lx, ly, lz = _normalize(light[0] - px, light[1] - py, light[2] - pz)
        ndl = nx * lx + ny * ly + nz * lz
        diffuse = max(ndl, 0.0)
        rx, ry, rz = 2.0 * ndl * nx - lx, 2.0 * ndl * ny - ly, 2.0 * ndl * nz - lz
        spec = max(-(rx * dx + ry * dy + rz * dz), 0.0) ** 32.0 if diffuse > 0.0 else 0.0
        k = 0.25 * open_ + 0.75 * diffuse * vis
        return ar * k + 0.3 * spec * vis, ag * k + 0.3 * spec * vis, ab * k + 0.3 * spec * vis
    k = open_ * (0.3 + 0.7 * abs(nx * dx + ny * dy + nz * dz))
    return ar * k, ag * k, ab * k


@njit(inline="always")
def _store(image, y, x, r, g, b):
    """Linear RGB to the RGBA8 pixel, gamma 2.2 (tracer.cl's store)."""
    image[y, x, 0] = np.uint8(min(max(r, 0.0), 1.0) ** (1.0 / 2.2) * 255.0 + 0.5)
    image[y, x, 1] = np.uint8(min(max(g, 0.0), 1.0) ** (1.0 / 2.2) * 255.0 + 0.5)
    image[y, x, 2] = np.uint8(min(max(b, 0.0), 1.0) ** (1.0 / 2.2) * 255.0 + 0.5)
    image[y, x, 3] = 255


@njit(parallel=True, nogil=True)
def render_cpu(nodes, ints, snodes, sints, tris, normals, basis, width, height, light, scale,
               ao_rays, ao_radius, shadows, phong, seed, packets=False):
    """Render like the OpenCL tracer (shadow rays walk ``snodes``), its primary rays one per
    pixel or, with ``packets``, in the packets of kernels/primary_packet.cl. Returns (RGBA8
    image, counters (H,W,3,2), last inner node per pixel (H,W), primary triangle per pixel
    (H,W), -1 = miss)."""
    image = np.empty((height, width, 4), np.uint8)
    counters = np.zeros((height, width, 3, 2), np.int32)
    last_node = np.zeros((height, width), np.int32)
    prim = np.full((height, width), -1, np.int32)
    if packets:
        rgb = np.zeros((height, width, 3), np.float64)
        for py in nb.prange((height + PACKET_ROWS - 1) // PACKET_ROWS):
            y0 = py * PACKET_ROWS
            for x0 in range(0, width, PACKET_COLS):
                _packet(nodes, ints, snodes, sints, tris, normals, basis, x0, y0, width, height,
                        light, scale, ao_rays, ao_radius, shadows, phong, seed, counters,
                        last_node, prim, rgb, y0, x0)
            for y in range(y0, min(y0 + PACKET_ROWS, height)):
                for x in range(width):
                    _store(image, y, x, rgb[y, x, 0], rgb[y, x, 1], rgb[y, x, 2])
        return image, counters, last_node, prim
    for y in nb.prange(height):
        for x in range(width):
            r, g, b = _pixel(nodes, ints, snodes, sints, tris, normals, basis, x, y, width,
                             light, scale, ao_rays, ao_radius, shadows, phong, seed, counters,
                             last_node, prim, y, x)
            _store(image, y, x, r, g, b)
    return image, counters, last_node, prim


@njit(parallel=True, nogil=True)
def trace_tiles(nodes, ints, snodes, sints, tris, normals, basis, width, height, corners, rows,
                cols, light, scale, ao_rays, ao_radius, seed, packets=False):
    """Trace ``rows`` x ``cols`` frame-resolution tiles whose top-left pixels (x, y) are
    ``corners`` (N, 2), in a ``width`` x ``height`` frame, with shadows. Returns counters
    (N, rows, cols, 3, 2), last inner node (N, rows, cols) and primary triangle (N, rows, cols),
    as :func:`render_cpu` gives them for those pixels. With ``packets`` the tiles and corners
    must be whole packets (``PACKET_COLS`` x ``PACKET_ROWS``); pixels beyond the frame are
    then not traced (zero counters, a miss), as the packet kernel leaves them, else they trace
    the camera's rays there."""
    n = corners.shape[0]
    counters = np.zeros((n * rows, cols, 3, 2), np.int32)
    last_node = np.zeros((n * rows, cols), np.int32)
    prim = np.full((n * rows, cols), -1, np.int32)
    rgb = np.zeros((n * rows, cols, 3), np.float64)
    for t in nb.prange(n):
        if packets:
            for dy in range(0, rows, PACKET_ROWS):
                for dx in range(0, cols, PACKET_COLS):
                    _packet(nodes, ints, snodes, sints, tris, normals, basis, corners[t, 0] + dx,
                            corners[t, 1] + dy, width, height, light, scale, ao_rays, ao_radius,
                            True, False, seed, counters, last_node, prim, rgb, t * rows + dy, dx)
            continue
        for dy in range(rows):
            for dx in range(cols):
                _pixel(nodes, ints, snodes, sints, tris, normals, basis, corners[t, 0] + dx,
                       corners[t, 1] + dy, width, light, scale, ao_rays, ao_radius, True, False,
                       seed, counters, last_node, prim, t * rows + dy, dx)
    return (counters.reshape(n, rows, cols, 3, 2), last_node.reshape(n, rows, cols),
            prim.reshape(n, rows, cols))
