"""The tracer's four phases on the CPU (numba), with per-pixel work counters.

Two users: the probe traces tiles of the view to measure the workload, and the tests
render a reference image that the OpenCL output must match (each pixel's own AO rays: the AO
filter's twin, :func:`filter_ao`, is checked on its own). The math mirrors
``kernels/tracer.cl`` line for line (same camera rays, same PCG random numbers, same shading),
and ``traversal.trace`` walks the same 8-wide BVH as ``kernels/traverse.cl`` (``trace_packet``
as the packet kernels do), so the per-pixel counters (nodes visited, leaves tested; a packet's
triangles tested) match the kernels'. (Compiled code is cached under the digest of this
file, of ``traversal.py`` and of the ``bvh`` package: :mod:`common.jit_cache`.)
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from common.jit_cache import njit
from raytracer.mesh.phases import RAY_PACKET
from raytracer.mesh.traversal import trace, trace_packet

SHADOW_EPS = 1e-4
# counters[y, x, phase, 0|1] = traversal steps | leaf (packets: triangle) tests, in this order
PRIMARY, SHADOW, AO = 0, 1, 2
PACKET_COLS, PACKET_ROWS = RAY_PACKET


@njit()
def pcg_hash(v):
    """PCG hash on uint32 values carried in int64 (identical to tracer.cl's pcg_hash)."""
    state = (v * 747796405 + 2891336453) & 0xFFFFFFFF
    word = (((state >> ((state >> 28) + 4)) ^ state) * 277803737) & 0xFFFFFFFF
    return ((word >> 22) ^ word) & 0xFFFFFFFF


@njit()
def _normalize(x, y, z):
    n = math.sqrt(x * x + y * y + z * z)
    return x / n, y / n, z / n


@njit()
def _primary_dir(basis, x, y):
    """Unit direction of frame pixel (x, y)'s primary ray (tracer.cl's primary_dir)."""
    return _normalize(basis[1, 0] + (x + 0.5) * basis[2, 0] + (y + 0.5) * basis[3, 0],
                      basis[1, 1] + (x + 0.5) * basis[2, 1] + (y + 0.5) * basis[3, 1],
                      basis[1, 2] + (x + 0.5) * basis[2, 2] + (y + 0.5) * basis[3, 2])


# One numba function, kept whole: it is the kernels' phase sequence over one block (primary
# rays, shadow set-up, shadow rays, AO and shading), and the phases hand each other a dozen
# per-lane arrays (eye, direction, hit, normal, shadow origin, visibility ...) that live only
# here. Split by phase, each part would take those arrays through a numba call boundary, and
# the per-lane shadow set-up moved out would be a call per ray; whole, each phase is one loop.
@njit()
def _block(nodes, ints, snodes, sints, tris, normals, basis, x0, y0, cols, rows, width, height,
           light, scale, ao_rays, ao_radius, shadows, phong, seed, primary_packet, shadow_packet,
           counters, last_node, prim_out, rgb, row0, col0):
    """All phases for the ``rows`` x ``cols`` block of frame pixels at (x0, y0), phase by
    phase as the kernels run: primary rays one per pixel or, with ``primary_packet``, as one
    packet (kernels/primary_packet.cl; the block is then one packet, and each of its pixels
    gets the packet's counters), then shadow rays alike (``shadow_packet``,
    kernels/shadow_packet.cl), then AO rays and shading per pixel. Pixel (x0 + i, y0 + j)
    writes [row0 + j, col0 + i] of the output arrays and its linear RGB to ``rgb``; those
    beyond ``width`` x ``height`` are not traced. Shadow rays walk ``snodes``
    (``BVH.shadow_nodes``), the other rays ``nodes``."""
    n = rows * cols
    eye = np.empty((n, 3), np.float64)
    dirs = np.empty((n, 3), np.float64)
    best = np.empty(n, np.float64)
    for lane in range(n):
        x, y = x0 + lane % cols, y0 + lane // cols
        eye[lane, 0], eye[lane, 1], eye[lane, 2] = basis[0, 0], basis[0, 1], basis[0, 2]
        dirs[lane, 0], dirs[lane, 1], dirs[lane, 2] = _primary_dir(basis, x, y)
        best[lane] = np.inf if x < width and y < height else -1.0
    inside = best > 0.0
    prim = np.full(n, -1, np.int32)
    bu = np.zeros(n, np.float64)
    bv = np.zeros(n, np.float64)
    if primary_packet:
        prim, bu, bv, hit_node, steps, tests = trace_packet(nodes, ints, tris, eye, dirs, best,
                                                            False)
        for lane in range(n):
            if inside[lane]:
                _count(counters, row0, col0, lane, cols, PRIMARY, steps, tests)
                last_node[row0 + lane // cols, col0 + lane % cols] = hit_node[lane]
    else:
        for lane in range(n):
            if inside[lane]:
                best[lane], prim[lane], bu[lane], bv[lane], steps, tests, last = trace(
                    nodes, ints, tris, eye[lane, 0], eye[lane, 1], eye[lane, 2], dirs[lane, 0],
                    dirs[lane, 1], dirs[lane, 2], np.inf, False)
                _count(counters, row0, col0, lane, cols, PRIMARY, steps, tests)
                last_node[row0 + lane // cols, col0 + lane % cols] = last
    # shadow rays as the shadow kernels set them up: from the hit point, offset along the
    # geometric normal facing the viewer, toward the light (the segment, t in (0, 1 - eps));
    # none where the primary ray missed or the light is behind the surface (vis 0)
    origin = np.zeros((n, 3), np.float64)
    to_light = np.ones((n, 3), np.float64)
    normal = np.zeros((n, 3), np.float64)
    tmax = np.full(n, -1.0, np.float64)
    vis = np.ones(n, np.float64)
    for lane in range(n):
        k = prim[lane]
        if not inside[lane] or k < 0:
            continue
        prim_out[row0 + lane // cols, col0 + lane % cols] = k
        dx, dy, dz = dirs[lane, 0], dirs[lane, 1], dirs[lane, 2]
        gx, gy, gz = normals[k, 3], normals[k, 7], normals[k, 11]  # unit, from the host
        if gx * dx + gy * dy + gz * dz > 0.0:
            gx, gy, gz = -gx, -gy, -gz
        normal[lane, 0], normal[lane, 1], normal[lane, 2] = gx, gy, gz
        eps = SHADOW_EPS * scale
        for axis in range(3):
            origin[lane, axis] = eye[lane, axis] + best[lane] * dirs[lane, axis] + normal[
                lane, axis] * eps
            to_light[lane, axis] = light[axis] - origin[lane, axis]
        if shadows:
            if (to_light[lane, 0] * gx + to_light[lane, 1] * gy + to_light[lane, 2] * gz
                    <= 0.0):
                vis[lane] = 0.0
            else:
                tmax[lane] = 1.0 - SHADOW_EPS
    if shadows and shadow_packet:
        traced = tmax > 0.0
        steps = tests = 0
        if traced.any():
            _, _, _, _, steps, tests = trace_packet(snodes, sints, tris, origin, to_light, tmax,
                                                    True)
        for lane in range(n):
            if inside[lane]:
                _count(counters, row0, col0, lane, cols, SHADOW, steps, tests)
                if traced[lane] and tmax[lane] < 0.0:
                    vis[lane] = 0.0
    elif shadows:
        for lane in range(n):
            if tmax[lane] > 0.0:
                _, k, _, _, steps, tests, _ = trace(
                    snodes, sints, tris, origin[lane, 0], origin[lane, 1], origin[lane, 2],
                    to_light[lane, 0], to_light[lane, 1], to_light[lane, 2], tmax[lane], True)
                _count(counters, row0, col0, lane, cols, SHADOW, steps, tests)
                if k >= 0:
                    vis[lane] = 0.0
    for lane in range(n):
        if not inside[lane]:
            continue
        row, col = row0 + lane // cols, col0 + lane % cols
        if prim[lane] < 0:
            s = 0.5 * (1.0 - dirs[lane, 1])
            rgb[row, col, 0] = 0.55 * (1 - s) + 0.9 * s
            rgb[row, col, 1] = 0.65 * (1 - s) + 0.9 * s
            rgb[row, col, 2] = 0.8 * (1 - s) + 0.92 * s
            continue
        rgb[row, col, 0], rgb[row, col, 1], rgb[row, col, 2] = _ao_and_shade(
            nodes, ints, tris, normals, x0 + lane % cols, y0 + lane // cols, width, light,
            ao_rays, ao_radius, phong, seed, counters, row, col, eye[lane], dirs[lane],
            best[lane], prim[lane], bu[lane], bv[lane], normal[lane], origin[lane], vis[lane])


@njit()
def _count(counters, row0, col0, lane, cols, phase, steps, tests):
    counters[row0 + lane // cols, col0 + lane % cols, phase, 0] = steps
    counters[row0 + lane // cols, col0 + lane % cols, phase, 1] = tests


@njit()
def _ao_and_shade(nodes, ints, tris, normals, x, y, width, light, ao_rays, ao_radius, phong,
                  seed, counters, row, col, eye, d, t, prim, u, v, g, o, vis):
    """AO rays (counters to [row, col]) and shading of frame pixel (x, y), whose primary ray
    from ``eye`` along ``d`` hit triangle ``prim`` at ``t`` (u, v); ``g`` is its geometric
    normal facing the viewer, ``o`` the offset origin of its secondary rays, ``vis`` its
    visibility of the light. Returns linear RGB."""
    dx, dy, dz = d[0], d[1], d[2]
    gx, gy, gz = g[0], g[1], g[2]
    ox, oy, oz = o[0], o[1], o[2]
    px, py, pz = eye[0] + t * dx, eye[1] + t * dy, eye[2] + t * dz
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


@njit()
def _store(image, y, x, r, g, b):
    """Linear RGB to the RGBA8 pixel, gamma 2.2 (tracer.cl's store)."""
    image[y, x, 0] = np.uint8(min(max(r, 0.0), 1.0) ** (1.0 / 2.2) * 255.0 + 0.5)
    image[y, x, 1] = np.uint8(min(max(g, 0.0), 1.0) ** (1.0 / 2.2) * 255.0 + 0.5)
    image[y, x, 2] = np.uint8(min(max(b, 0.0), 1.0) ** (1.0 / 2.2) * 255.0 + 0.5)
    image[y, x, 3] = 255


@njit(parallel=True, nogil=True)
def render_cpu(nodes, ints, snodes, sints, tris, normals, basis, width, height, light, scale,
               ao_rays, ao_radius, shadows, phong, seed, primary_packets=False,
               shadow_packets=False):
    """Render like the OpenCL tracer, its primary and shadow rays one per pixel or in the
    packets of the packet kernels (``primary_packets``, ``shadow_packets``). Returns (RGBA8
    image, counters (H,W,3,2), last inner node per pixel (H,W), primary triangle per pixel
    (H,W), -1 = miss)."""
    image = np.empty((height, width, 4), np.uint8)
    counters = np.zeros((height, width, 3, 2), np.int32)
    last_node = np.zeros((height, width), np.int32)
    prim = np.full((height, width), -1, np.int32)
    rgb = np.zeros((height, width, 3), np.float64)
    for py in nb.prange((height + PACKET_ROWS - 1) // PACKET_ROWS):
        y0 = py * PACKET_ROWS
        for x0 in range(0, width, PACKET_COLS):
            _block(nodes, ints, snodes, sints, tris, normals, basis, x0, y0, PACKET_COLS,
                   PACKET_ROWS, width, height, light, scale, ao_rays, ao_radius, shadows, phong,
                   seed, primary_packets, shadow_packets, counters, last_node, prim, rgb, y0, x0)
        for y in range(y0, min(y0 + PACKET_ROWS, height)):
            for x in range(width):
                _store(image, y, x, rgb[y, x, 0], rgb[y, x, 1], rgb[y, x, 2])
    return image, counters, last_node, prim


@njit(parallel=True, nogil=True)
def trace_tiles(nodes, ints, snodes, sints, tris, normals, basis, width, height, corners, rows,
                cols, light, scale, ao_rays, ao_radius, seed, primary_packets=False,
                shadow_packets=False):
    """Trace ``rows`` x ``cols`` frame-resolution tiles whose top-left pixels (x, y) are
    ``corners`` (N, 2), in a ``width`` x ``height`` frame, with shadows. Returns counters
    (N, rows, cols, 3, 2), last inner node (N, rows, cols) and primary triangle (N, rows, cols),
    as :func:`render_cpu` gives them for those pixels (zero counters and a miss beyond the
    frame). With packets the tiles and corners must be whole packets
    (``PACKET_COLS`` x ``PACKET_ROWS``)."""
    n = corners.shape[0]
    counters = np.zeros((n * rows, cols, 3, 2), np.int32)
    last_node = np.zeros((n * rows, cols), np.int32)
    prim = np.full((n * rows, cols), -1, np.int32)
    rgb = np.zeros((n * rows, cols, 3), np.float64)
    packets = primary_packets or shadow_packets
    block_rows, block_cols = (PACKET_ROWS, PACKET_COLS) if packets else (1, 1)
    for t in nb.prange(n):
        for dy in range(0, rows, block_rows):
            for dx in range(0, cols, block_cols):
                _block(nodes, ints, snodes, sints, tris, normals, basis, corners[t, 0] + dx,
                       corners[t, 1] + dy, block_cols, block_rows, width, height, light, scale,
                       ao_rays, ao_radius, True, False, seed, primary_packets, shadow_packets,
                       counters, last_node, prim, rgb, t * rows + dy, dx)
    return (counters.reshape(n, rows, cols, 3, 2), last_node.reshape(n, rows, cols),
            prim.reshape(n, rows, cols))


def filter_ao(open_share: np.ndarray, rays: np.ndarray, depth: np.ndarray, normal: np.ndarray,
              basis: np.ndarray, reach: int) -> np.ndarray:
    """The AO filter of ``kernels/tracer.cl`` (``ao_filter``) in NumPy: each pixel's open share
    of its ``rays`` (H, W) pooled with its neighbours within ``reach`` pixels whose point lies
    on its tangent plane, within a quarter of a pixel's footprint per pixel of reach. ``depth``:
    the primary hit's distance (negative: a miss), ``normal`` (H, W, 3) its geometric normal
    facing the viewer, ``basis`` the camera's (:meth:`Camera.basis`). Returns (H, W) the
    filtered share (1 where no ray was pooled; misses untouched)."""
    height, width = depth.shape
    _, corner, du, dv = (np.asarray(v, np.float64) for v in basis)
    ys, xs = np.mgrid[0:height, 0:width]
    ray = corner + (xs[..., None] + 0.5) * du + (ys[..., None] + 0.5) * dv
    length = np.linalg.norm(ray, axis=-1)
    along = np.where(depth >= 0, depth / length, -1.0)
    a, b, c = ((normal * v).sum(-1) for v in (ray, du, dv))
    footprint = 0.25 * along * length * np.linalg.norm(du)
    pad = ((reach, reach), (reach, reach))
    sums = [np.pad(v, pad) for v in (open_share * rays, rays, along)]
    pooled_open, pooled_rays = np.zeros((height, width)), np.zeros((height, width))
    for dy in range(-reach, reach + 1):
        for dx in range(-reach, reach + 1):
            o, r, t = (v[reach + dy:reach + dy + height, reach + dx:reach + dx + width]
                       for v in sums)
            same = np.abs(t * (a + dx * b + dy * c) - along * a) <= footprint * max(abs(dx),
                                                                                   abs(dy))
            pooled_open += np.where(same, o, 0.0)
            pooled_rays += np.where(same, r, 0.0)
    shared = np.where(pooled_rays > 0, pooled_open / np.maximum(pooled_rays, 1e-30), 1.0)
    return np.where(depth >= 0, shared, open_share).astype(np.float32)
