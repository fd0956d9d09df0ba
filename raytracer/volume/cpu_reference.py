"""Independent CPU reference of the ray caster (numba, float64): the tests' ground truth.

Written from the sampling rules, not from the kernel: the same global lattice t_k = t0 + k·Δt
from the entry into the whole volume box, the same owned box, trilinear interpolation, the
same step-corrected lookup table read with linear interpolation, front-to-back accumulation
and early termination; no empty-space skipping (it must not change the image).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from common.jit_cache import njit
from raytracer.camera import Camera
from raytracer.volume.partition import Brick, whole_brick
from raytracer.volume.raycaster import owned_box, stopping_opacity, validate_knobs
from raytracer.volume.transfer_function import LUT_SIZE, TransferFunction
from raytracer.volume.volume_data import Volume


@njit()
def _trilinear(vol: np.ndarray, p: np.ndarray) -> float:
    nz, ny, nx = vol.shape
    n = (nx, ny, nz)
    c = [0, 0, 0]
    f = [0.0, 0.0, 0.0]
    for a in range(3):
        c[a] = min(max(int(math.floor(p[a])), 0), n[a] - 2)
        f[a] = min(max(p[a] - c[a], 0.0), 1.0)
    x, y, z = c
    fx, fy, fz = f
    v = 0.0
    for dz in range(2):
        for dy in range(2):
            for dx in range(2):
                w = ((fx if dx else 1.0 - fx) * (fy if dy else 1.0 - fy)
                     * (fz if dz else 1.0 - fz))
                v += w * vol[z + dz, y + dy, x + dx]
    return v


@njit(parallel=True)
def _render(vol: np.ndarray, lut: np.ndarray, basis: np.ndarray, origin: np.ndarray,
            spacing: np.ndarray, lo: np.ndarray, hi: np.ndarray, dt: float, ert: float,
            width: int, height: int) -> np.ndarray:
    out = np.zeros((height, width, 4))
    nz, ny, nx = vol.shape
    vmax = np.array([nx - 1.0, ny - 1.0, nz - 1.0])
    n_lut = lut.shape[0]
    o = (basis[0] - origin) / spacing
    for y in numba.prange(height):
        for x in range(width):
            dw = basis[1] + (x + 0.5) * basis[2] + (y + 0.5) * basis[3]
            d = dw / math.sqrt(np.sum(dw * dw)) / spacing
            t_near, t_far = -np.inf, np.inf
            for a in range(3):
                if d[a] != 0.0:
                    ta, tb = -o[a] / d[a], (vmax[a] - o[a]) / d[a]
                    t_near = max(t_near, min(ta, tb))
                    t_far = min(t_far, max(ta, tb))
                elif o[a] < 0.0 or o[a] > vmax[a]:
                    t_far = -np.inf
            t0 = max(t_near, 0.0)
            if t_far < t0:
                continue
            acc = np.zeros(4)
            k = 0
            while True:
                t = t0 + k * dt
                if t > t_far + 2.0 * dt:
                    break
                k += 1
                p = o + t * d
                inside = True
                for a in range(3):
                    if not (lo[a] <= p[a] < hi[a]):
                        inside = False
                if not inside:
                    continue
                v = _trilinear(vol, p)
                u = v * (n_lut - 1)
                j = min(max(int(math.floor(u)), 0), n_lut - 2)
                w = min(max(u - j, 0.0), 1.0)
                s = lut[j] * (1.0 - w) + lut[j + 1] * w
                weight = (1.0 - acc[3]) * s[3]
                acc[:3] += weight * s[:3]
                acc[3] += weight
                if acc[3] >= ert:
                    break
            out[y, x] = acc
    return out


def render_reference(volume: Volume, tf: TransferFunction, camera: Camera, width: int,
                     height: int, step: float = 1.0, ert_threshold: float = 1.0,
                     brick: Brick | None = None, lut_size: int = LUT_SIZE) -> np.ndarray:
    """Premultiplied RGBA (H, W, 4) float32 of the whole volume (or one brick's samples, with
    the brick's data taken from the whole volume) as the OpenCL ray caster should draw it."""
    validate_knobs(width, height, step, ert_threshold)
    brick = brick or whole_brick(volume.dims)
    lo, hi = owned_box(brick, volume.dims)
    spacing = np.asarray(volume.spacing, np.float64)
    img = _render(volume.normalized.astype(np.float64),
                  tf.lut(lut_size, step=step).astype(np.float64),
                  camera.basis(width, height).astype(np.float64),
                  np.asarray(volume.origin, np.float64), spacing, lo.astype(np.float64),
                  hi.astype(np.float64), float(np.float32(step * spacing.min())),
                  stopping_opacity(ert_threshold), int(width), int(height))
    return img.astype(np.float32)
