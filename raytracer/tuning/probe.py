"""CPU low-resolution probe: trace the coming view coarsely and measure its workload (seed 002 §4).

It runs on the CPU through the same BVH as the OpenCL tracer, so it can run on a worker thread
while the device renders the previous frame (numba releases the GIL).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from models.workload import Workload
from raytracer.bvh import BVH, packed_normals
from raytracer.camera import Camera
from raytracer.cpu_render import AO, PRIMARY, SHADOW, render_cpu
from raytracer.phases import TILE
from raytracer.scene import Scene


def coherence(last_node: np.ndarray, hit: np.ndarray, tile: int) -> float:
    """Seed 002 §4.2's ``m`` as printed: share of hit rays whose last BVH node is shared by
    another hit ray of the same ``tile`` x ``tile`` screen tile. It depends on the resolution it
    is measured at, so the probe now reports :func:`adjacent_coherence` instead."""
    h, w = last_node.shape
    ys, xs = np.nonzero(hit)
    if ys.size == 0:
        return 0.0
    tile_id = (ys // tile) * ((w + tile - 1) // tile) + xs // tile
    keys = tile_id.astype(np.int64) * (int(last_node.max()) + 1) + last_node[ys, xs]
    _, counts = np.unique(keys, return_counts=True)
    return float(counts[counts > 1].sum()) / ys.size


def adjacent_coherence(last_node: np.ndarray, hit: np.ndarray, spacing: float) -> float:
    """The model's ``m``: the probability that the rays of two adjacent *frame* pixels end in
    the same BVH leaf (they then share its cache lines), estimated from a probe whose pixels are
    ``spacing`` frame pixels apart.

    Among probe neighbours (right and below) that both hit, ``s`` share a last node; leaf
    boundaries crossing a scanline like a Poisson process give ``s = m^spacing``, so
    ``m = s^(1/spacing)``. Measured on dragon / sibenik / bunny at 1280x720: the estimate moves
    by <= 0.06 between probes at 1/1 and 1/8 of the frame's resolution per axis, where the
    seed's tile-peer share fell from 0.82-0.95 to 0.11-0.63 (dragon) and moved every
    prediction that uses it by up to 26 %.
    """
    pairs = same = 0
    for a, b, ha, hb in ((last_node[:, 1:], last_node[:, :-1], hit[:, 1:], hit[:, :-1]),
                         (last_node[1:, :], last_node[:-1, :], hit[1:, :], hit[:-1, :])):
        both = ha & hb
        pairs += int(both.sum())
        same += int(((a == b) & both).sum())
    if pairs == 0:
        return 0.0
    return float((same / pairs) ** (1.0 / max(spacing, 1.0)))


def warp_max(values: np.ndarray, group: tuple[int, int]) -> np.ndarray:
    """Each pixel's value replaced by the maximum of its SIMD group (rows x cols pixels).

    Lanes of a GPU warp run in lockstep until the slowest is done, so the per-thread
    instruction count Hong–Kim needs is the group's maximum, not the pixel's own. On PoCL's CPU
    device each work-item runs alone (SIMD width 1): the group is one pixel.
    """
    rows, cols = group
    if rows == cols == 1:
        return values.astype(np.float64)
    h, w = values.shape[:2]
    h2, w2 = h - h % rows or h, w - w % cols or w
    v = values[:h2, :w2].astype(np.float64)
    rows, cols = min(rows, h2), min(cols, w2)
    blocks = v.reshape(h2 // rows, rows, w2 // cols, cols, *v.shape[2:]).max(axis=(1, 3))
    return np.repeat(np.repeat(blocks, rows, axis=0), cols, axis=1)


class Probe:
    """Measures :class:`Workload` of a view at a reduced resolution (see :meth:`resolution`).

    ``simd_width`` (lanes that run in lockstep on the rendering device) defaults to the width of
    the device a default :class:`~raytracer.tracer.Tracer` would use, looked up on first use;
    :meth:`for_tracer` takes it from a tracer. ``ao_radius`` must be the renderer's (a
    :class:`~raytracer.tuning.tuned_renderer.TunedRenderer` keeps the two tied).
    """

    def __init__(self, scene: Scene, bvh: BVH, factor: int = 8, ao_samples: int = 2,
                 tile: int = 4, ao_radius: float = 0.1, min_pixels: int = 160 * 90,
                 simd_width: int | None = None) -> None:
        if factor < 1 or ao_samples < 1 or tile < 1:
            raise ValueError(f"probe factor, ao_samples and tile must be >= 1, "
                             f"got {factor}, {ao_samples}, {tile}")
        if simd_width is not None and simd_width < 1:
            raise ValueError(f"probe simd_width must be >= 1, got {simd_width}")
        self.scene, self.bvh = scene, bvh
        self.factor, self.ao_samples, self.tile = factor, ao_samples, tile
        self.ao_radius = ao_radius
        self.min_pixels = min_pixels
        self._simd_width = simd_width
        self._normals = packed_normals(scene, bvh)
        self._pool: ThreadPoolExecutor | None = None
        self.last_seconds = 0.0

    @classmethod
    def for_tracer(cls, tracer, **options) -> Probe:
        """A probe of ``tracer``'s scene and BVH with its device's SIMD width."""
        options.setdefault("simd_width", tracer.device_info.simd_width)
        return cls(tracer.scene, tracer.bvh, **options)

    @property
    def simd_width(self) -> int:
        if self._simd_width is None:  # the default device's, as a default Tracer would pick
            from raytracer.opencl_device import choose_device

            self._simd_width = choose_device()[0].simd_width
        return self._simd_width

    @simd_width.setter
    def simd_width(self, value: int) -> None:
        self._simd_width = value

    def resolution(self, width: int, height: int) -> tuple[int, int]:
        """Probe size: ``1/factor`` per axis, but never below ``min_pixels`` (nor above the
        frame): small frames would otherwise be probed with too few rays to measure anything."""
        f = min(float(self.factor), max(1.0, (width * height / self.min_pixels) ** 0.5))
        return max(1, round(width / f)), max(1, round(height / f))

    def lane_group(self, factor: float) -> tuple[int, int]:
        """Probe pixels (rows, columns) standing for one SIMD group of lanes: the tracer's
        8x8 work-group runs lanes along rows of 8 pixels, ``simd_width`` at a time."""
        cols = max(1, round(min(self.simd_width, TILE) / factor))
        rows = max(1, round(max(self.simd_width // TILE, 1) / factor))
        return rows, cols

    def measure(self, camera: Camera, width: int, height: int) -> Workload:
        """Trace the view at low resolution and return per-pixel mean work counts."""
        start = time.perf_counter()
        pw, ph = self.resolution(width, height)
        b = self.bvh
        _, counters, last_node, prim = render_cpu(
            b.nodes, b.node_ints, b.triangles, self._normals, camera.basis(pw, ph), pw, ph,
            self.scene.light, np.float32(self.scene.diagonal), self.ao_samples,
            self.ao_radius * self.scene.diagonal, True, False, 0)
        hit = prim >= 0
        group = self.lane_group(width / pw)
        mean = warp_max(counters, group).reshape(-1, 3, 2).mean(axis=0)
        workload = Workload(
            pixels=int(width * height), hit_fraction=float(warp_max(hit, group).mean()),
            p_t=float(mean[PRIMARY, 0]), p_i=float(mean[PRIMARY, 1]),
            s_t=float(mean[SHADOW, 0]), s_i=float(mean[SHADOW, 1]),
            a_t=float(mean[AO, 0] / self.ao_samples), a_i=float(mean[AO, 1] / self.ao_samples),
            t_v=float(np.unique(prim[hit]).size),
            m=adjacent_coherence(last_node, hit, width / pw))
        self.last_seconds = time.perf_counter() - start
        return workload

    def measure_async(self, camera: Camera, width: int, height: int) -> Future[Workload]:
        """Start :meth:`measure` on a worker thread (overlaps the device's previous frame)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="probe")
        return self._pool.submit(self.measure, camera, width, height)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
