"""The scene's normals laid out in a BVH's triangle slot order (what the shading kernels and the
CPU twin read beside ``BVH.triangles``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from raytracer.mesh.bvh.layout import BVH
    from raytracer.mesh.scene import Scene


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
