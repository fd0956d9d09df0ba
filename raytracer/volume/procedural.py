"""Procedural volumes: the analytic Marschner–Lobb test signal and a large generated field.

Both are made on the fly (never shipped): Marschner–Lobb checks interpolation quality at any
size, the blob field (512³ and up) gives the scaling runs a volume larger than the shipped ones.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from common.jit_cache import njit

ML_FM = 6.0  # Marschner & Lobb (1994): f_M = 6, alpha = 0.25 on [-1, 1]^3
ML_ALPHA = 0.25
FIELD_BLOBS = 40
FIELD_SEED = 20240509


def marschner_lobb_value(x: np.ndarray | float, y: np.ndarray | float,
                         z: np.ndarray | float) -> np.ndarray | float:
    """The analytic signal rho(x, y, z) on [-1, 1]^3, values in [0, 1]."""
    r = np.sqrt(np.asarray(x, np.float64) ** 2 + np.asarray(y, np.float64) ** 2)
    rho_r = np.cos(2.0 * math.pi * ML_FM * np.cos(math.pi * r / 2.0))
    return (1.0 - np.sin(math.pi * np.asarray(z, np.float64) / 2.0)
            + ML_ALPHA * (1.0 + rho_r)) / (2.0 * (1.0 + ML_ALPHA))


def marschner_lobb(n: int = 41) -> np.ndarray:
    """The signal sampled on n^3 grid points spanning [-1, 1]^3, as a float32 [z, y, x] array."""
    c = np.linspace(-1.0, 1.0, n)
    z, y, x = np.meshgrid(c, c, c, indexing="ij")
    return marschner_lobb_value(x, y, z).astype(np.float32)


def _blob_tables(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Separable 1-D Gaussian factors (blobs x n) per axis, from a fixed seed."""
    rng = np.random.default_rng(FIELD_SEED)
    centers = rng.uniform(0.15, 0.85, (FIELD_BLOBS, 3))
    sigma = rng.uniform(0.025, 0.09, FIELD_BLOBS)
    amp = rng.uniform(0.4, 1.0, FIELD_BLOBS)
    u = (np.arange(n) + 0.5) / n
    tables = [np.exp(-((u[None, :] - centers[:, a, None]) ** 2) / (2.0 * sigma[:, None] ** 2))
              for a in range(3)]
    tables[0] = tables[0] * amp[:, None]
    return tuple(t.astype(np.float32) for t in tables)


@njit(parallel=True)
def _blob_sum(gx: np.ndarray, gy: np.ndarray, gz: np.ndarray, out: np.ndarray) -> None:
    nb, n = gx.shape
    for z in numba.prange(n):
        for y in range(n):
            for b in range(nb):
                w = gz[b, z] * gy[b, y]
                if w < 1e-4:
                    continue
                for x in range(n):
                    out[z, y, x] += w * gx[b, x]
            for x in range(n):  # fine ripple so the interior is not smooth blobs only
                v = out[z, y, x]
                out[z, y, x] = v * (1.0 + 0.2 * math.sin(0.37 * x + 0.23 * y + 0.31 * z))


def large_field(n: int = 512) -> np.ndarray:
    """A deterministic n^3 float32 field in [0, 1] of 40 Gaussian blobs with a ripple: empty
    space around dense clouds, like simulation data (512^3 takes a few seconds on 2 cores)."""
    gx, gy, gz = _blob_tables(n)
    out = np.zeros((n, n, n), np.float32)
    _blob_sum(gx, gy, gz, out)
    out /= out.max()  # values in [0, 1] exactly: the Volume then needs no normalized copy
    return out
