"""bench throughput's rays for Embree: the primary, shadow and ambient-occlusion rays our
kernels trace, rebuilt on the CPU in float32 (see :mod:`benchmarks.renderers.throughput`)."""

from __future__ import annotations

import numpy as np

from raytracer.mesh.bvh import packed_normals
from raytracer.mesh.scene import Scene
from raytracer.mesh.tracer import Tracer

SHADOW_EPS = 1e-4  # as in kernels/tracer.cl


def primary_rays(scene: Scene, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's primary rays in float32: (origins, unit directions), row-major pixels."""
    eye, top_left, du, dv = scene.camera.basis(width, height)
    ys, xs = np.mgrid[0:height, 0:width]
    x = (xs.reshape(-1, 1) + np.float32(0.5)).astype(np.float32)
    y = (ys.reshape(-1, 1) + np.float32(0.5)).astype(np.float32)
    dirs = (top_left + x * du + y * dv).astype(np.float32)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    origins = np.ascontiguousarray(np.broadcast_to(eye, dirs.shape), dtype=np.float32)
    return origins, np.ascontiguousarray(dirs, dtype=np.float32)


def hit_frames(
    tracer: Tracer, origins: np.ndarray, dirs: np.ndarray, t: np.ndarray, prim: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Offset hit points and facing unit normals of the hit pixels, and their indices (the
    kernels' geometric normals: the ``w`` slots of ``packed_normals``)."""
    idx = np.flatnonzero(prim >= 0)
    n = packed_normals(tracer.scene, tracer.bvh)[prim[idx]][:, [3, 7, 11]].astype(np.float32)
    d = dirs[idx]
    n[np.einsum("ij,ij->i", n, d) > 0] *= -1.0
    p = origins[idx] + t[idx, None] * d + n * np.float32(SHADOW_EPS * tracer.scene_scale)
    return p.astype(np.float32), n.astype(np.float32), idx


def shadow_rays(
    light: np.ndarray, p: np.ndarray, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rays toward the light from points that face it: origins, unit dirs, max distances."""
    to_light = light[None, :] - p
    facing = np.einsum("ij,ij->i", to_light, n) > 0
    to_light = to_light[facing]
    dist = np.linalg.norm(to_light, axis=1)
    dirs = to_light / dist[:, None]
    tmax = dist * (1.0 - SHADOW_EPS)
    f32 = np.float32
    return (
        np.ascontiguousarray(p[facing], f32),
        np.ascontiguousarray(dirs, f32),
        tmax.astype(f32),
    )


def ao_rays(
    p: np.ndarray, n: np.ndarray, count: int, radius: float, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` cosine-weighted rays per point around its normal (Duff et al. basis)."""
    rng = np.random.default_rng(seed)
    sign = np.where(n[:, 2] >= 0, 1.0, -1.0)
    a = -1.0 / (sign + n[:, 2])
    b = n[:, 0] * n[:, 1] * a
    b1 = np.stack([1.0 + sign * n[:, 0] ** 2 * a, sign * b, -sign * n[:, 0]], axis=1)
    b2 = np.stack([b, sign + n[:, 1] ** 2 * a, -n[:, 1]], axis=1)
    r1 = rng.random((len(p), count))
    r2 = rng.random((len(p), count))
    r, phi = np.sqrt(r1), 2.0 * np.pi * r2
    dirs = (
        b1[:, None, :] * (r * np.cos(phi))[..., None]
        + b2[:, None, :] * (r * np.sin(phi))[..., None]
        + n[:, None, :] * np.sqrt(np.maximum(0.0, 1.0 - r1))[..., None]
    ).reshape(-1, 3)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    origins = np.repeat(p, count, axis=0)
    f32 = np.float32
    return (
        np.ascontiguousarray(origins, f32),
        np.ascontiguousarray(dirs, f32),
        np.full(len(dirs), radius, f32),
    )
