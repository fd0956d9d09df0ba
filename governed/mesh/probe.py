"""CPU probe: trace a sample of the coming view and measure its workload.

The probe of the ray tracer's auto-tuner (Ganestam & Doggett, "Auto-tuning Interactive Ray
Tracing using an Analytical GPU Architecture Model", §4).

It runs on the CPU through the same BVH as the OpenCL tracer, so it can run on a worker thread
while the device renders the previous frame (numba releases the GIL).

The sample is a lattice of whole SIMD groups at the frame's own resolution (2x8 pixels on a
16-lane device), about as many rays as a 1/``factor`` image. A group runs as long as its
slowest lane, and its lanes are neighbours whose rays are coherent: a coarse image, whose
neighbouring rays lie ``factor`` pixels apart, took the maximum over divergent rays and moved
the predictions 11-21 % against a half-resolution probe on Intel's 16-lane CPU runtime.

Where the tracer's primary or shadow rays run in packets (kernels/primary_packet.cl,
kernels/shadow_packet.cl), the lattice is of whole packets too and those rays are traced as
packets: a packet pays for the union of its rays' paths (at 67x37, a dragon packet visited
2.2x the nodes of one of its rays), and pricing it by single rays left the primary phase's
held-out error 7-11 points worse.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import Future

import numpy as np

from common.jit_cache import njit
from governed.probe_worker import ProbeWorker
from models.workload import Workload
from raytracer.camera import Camera
from raytracer.mesh.bvh import BVH, packed_normals
from raytracer.mesh.cpu_render import AO, PRIMARY, SHADOW, trace_tiles
from raytracer.mesh.phases import PACKET_PHASES, RAY_PACKET, TILE, simd_lanes
from raytracer.mesh.scene import Scene


# One numba pass, kept whole: the probe's summary of its tiles (what NumPy did in a dozen
# reshapes, reductions and a sort: 0.52-0.55 ms of a 1.7-2.5 ms probe in governed orbits of
# aneurism and dragon, after the frame's render had evicted the caches). Integer sums, so the
# means are the same floats as NumPy's.
@njit(nogil=True)
def tile_sums(counters, last_node, prim, lane_rows, lanes, seen):  # pragma: no cover
    """Over tiles (N, rows, cols) of SIMD groups ``lane_rows`` x ``lanes``: the sums of each
    group's slowest lane's counters and of every lane's (3, 2), the groups with a hit, the
    distinct triangles hit (``seen``: a cleared flag per triangle slot, cleared again on
    return), and the adjacent pairs that both hit and of them those ending in the same leaf."""
    n, rows, cols = prim.shape
    group_sum = np.zeros((3, 2), np.int64)
    lane_sum = np.zeros((3, 2), np.int64)
    top = np.zeros((3, 2), np.int64)
    groups_hit = distinct = pairs = same = 0
    for t in range(n):
        for gy in range(0, rows, lane_rows):
            for gx in range(0, cols, lanes):
                top[:] = counters[t, gy, gx]
                hit = False
                for y in range(gy, gy + lane_rows):
                    for x in range(gx, gx + lanes):
                        for k in range(3):
                            for c in range(2):
                                v = counters[t, y, x, k, c]
                                lane_sum[k, c] += v
                                top[k, c] = max(top[k, c], v)
                        p = prim[t, y, x]
                        if p >= 0:
                            hit = True
                            if not seen[p]:
                                seen[p] = True
                                distinct += 1
                group_sum += top
                groups_hit += hit
        for y in range(rows):
            for x in range(cols):
                if prim[t, y, x] < 0:
                    continue
                if x + 1 < cols and prim[t, y, x + 1] >= 0:
                    pairs += 1
                    same += last_node[t, y, x] == last_node[t, y, x + 1]
                if y + 1 < rows and prim[t, y + 1, x] >= 0:
                    pairs += 1
                    same += last_node[t, y, x] == last_node[t, y + 1, x]
    for p in prim.ravel():
        if p >= 0:
            seen[p] = False
    return group_sum, lane_sum, groups_hit, distinct, pairs, same


class Probe:
    """Measures :class:`Workload` of a view from a lattice of SIMD groups (see
    :meth:`lane_tile`, :meth:`tile_corners`) with as many rays as :meth:`resolution`'s image.

    ``simd_width`` (lanes that run in lockstep on the rendering device) defaults to the width of
    the device a default :class:`~raytracer.mesh.tracer.Tracer` would use, looked up on first use;
    ``group`` is the traversal kernels' work-group (x, y). :meth:`for_tracer` takes both from a
    tracer. ``packets``: the phases ("primary", "shadow") whose rays the tracer traces in
    packets (kernels/primary_packet.cl, kernels/shadow_packet.cl), which the probe then traces
    as such: a packet pays for the union of its rays' paths, which
    grows where neighbouring rays diverge, and it does not run in SIMD groups of work-items.
    ``ao_radius`` must be the renderer's (a
    :class:`~governed.mesh.tuned_renderer.TunedRenderer` keeps the two tied).
    """

    def __init__(self, scene: Scene, bvh: BVH, factor: int = 8, ao_samples: int = 2,
                 ao_radius: float = 0.1, min_pixels: int = 160 * 90,
                 simd_width: int | None = None, group: tuple[int, int] = (TILE, TILE),
                 packets: tuple[str, ...] = ()) -> None:
        unknown = set(packets) - set(PACKET_PHASES)
        if unknown:
            raise ValueError(f"probe packets: no packet form of {sorted(unknown)} (have "
                             f"{', '.join(PACKET_PHASES)})")
        if factor < 1 or ao_samples < 1:
            raise ValueError(f"probe factor and ao_samples must be >= 1, "
                             f"got {factor}, {ao_samples}")
        if simd_width is not None and simd_width < 1:
            raise ValueError(f"probe simd_width must be >= 1, got {simd_width}")
        self.scene, self.bvh = scene, bvh
        self.factor, self.ao_samples = factor, ao_samples
        self.ao_radius = ao_radius
        self.min_pixels = min_pixels
        self._simd_width = simd_width
        self.group = group
        self.packets = packets
        self._normals = packed_normals(scene, bvh)
        self._seen = np.zeros(len(bvh.triangles), np.bool_)  # tile_sums' scratch, kept clear
        self._seen_lock = threading.Lock()  # measure() may run on a worker thread too
        self._corners: tuple[tuple, np.ndarray] | None = None  # the last frame size's lattice
        self._worker = ProbeWorker("probe")  # measure_async's thread
        self.last_seconds = 0.0

    @classmethod
    def for_tracer(cls, tracer, **options) -> Probe:
        """A probe of ``tracer``'s scene and BVH, its rays grouped as the tracer launches them:
        in packets for the phases it traces in packets, else in its primary launch's
        sub-groups or the device's SIMD width (the traversal kernels launch alike on every
        device measured, see ``raytracer/device/launches.py``)."""
        launch = tracer.launches["primary"]
        options.setdefault("simd_width", launch.lane_width(tracer.device_info.simd_width))
        options.setdefault("group", launch.group)
        options.setdefault("packets", tuple(phase for phase in PACKET_PHASES
                                            if tracer.launches[phase].packet == RAY_PACKET))
        return cls(tracer.scene, tracer.bvh, **options)

    @property
    def simd_width(self) -> int:
        if self._simd_width is None:  # the default device's, as a default Tracer would pick
            from raytracer.device.choice import choose_device  # lazy: loads pyopencl

            self._simd_width = choose_device()[0].simd_width
        return self._simd_width

    @simd_width.setter
    def simd_width(self, value: int) -> None:
        self._simd_width = value

    def resolution(self, width: int, height: int) -> tuple[int, int]:
        """Probe size, whose pixel count is the probe's ray budget: ``1/factor`` per axis, but
        never below ``min_pixels`` (nor above the frame): small frames would otherwise be
        probed with too few rays to measure anything."""
        f = min(float(self.factor), max(1.0, (width * height / self.min_pixels) ** 0.5))
        return max(1, round(width / f)), max(1, round(height / f))

    def lane_tile(self) -> tuple[int, int]:
        """Frame pixels (rows, columns) of one SIMD group: a work-group of ``group`` pixels runs
        its lanes along its rows, ``simd_width`` at a time."""
        return simd_lanes(self.simd_width, self.group)

    def traced_tile(self) -> tuple[int, int]:
        """Frame pixels (rows, columns) traced per lattice point: one SIMD group, two one-lane
        groups side by side where groups are one pixel (so that adjacent pairs give ``m``);
        with packets, whole packets and whole groups."""
        rows, cols = self.lane_tile()
        cols = max(cols, 2)
        if self.packets:
            rows, cols = math.lcm(rows, RAY_PACKET[1]), math.lcm(cols, RAY_PACKET[0])
        return rows, cols

    def tile_corners(self, width: int, height: int) -> np.ndarray:
        """Top-left pixels (x, y) of the traced tiles, group-aligned: a regular lattice about
        as far apart on both axes, with about :meth:`resolution`'s pixel count of rays (every
        group when that covers the frame). Shape (N, 2), int32, read-only: the last size's is
        kept (a probe in a frame need not build it again)."""
        rows, cols = self.traced_tile()
        key = (width, height, rows, cols, self.factor, self.min_pixels)
        if self._corners is None or self._corners[0] != key:
            self._corners = (key, self._lattice(width, height, rows, cols))
        return self._corners[1]

    def _lattice(self, width: int, height: int, rows: int, cols: int) -> np.ndarray:
        """:meth:`tile_corners` for tiles of ``rows`` x ``cols`` pixels, built."""
        pw, ph = self.resolution(width, height)
        gx, gy = max(width // cols, 1), max(height // rows, 1)
        tiles = pw * ph / (rows * cols)
        spacing = (width * height / tiles) ** 0.5
        nx = min(gx, max(1, round(width / spacing)))
        ny = min(gy, max(1, round(tiles / nx)))
        nx = min(gx, max(1, round(tiles / ny)))
        xs = ((np.arange(nx) + 0.5) * gx / nx).astype(np.int32) * cols
        ys = ((np.arange(ny) + 0.5) * gy / ny).astype(np.int32) * rows
        corners = np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2).astype(np.int32)
        corners.flags.writeable = False
        return corners

    def measure(self, camera: Camera, width: int, height: int) -> Workload:
        """Trace the lattice of SIMD groups and return per-pixel mean work counts: each
        group's slowest lane, as the device runs it; the counts of rays traced in packets are
        each packet's shared by its rays."""
        start = time.perf_counter()
        rows, cols = self.traced_tile()
        lane_rows, lanes = self.lane_tile()
        corners = self.tile_corners(width, height)
        b = self.bvh
        counters, last_node, prim = trace_tiles(
            b.nodes, b.node_ints, b.shadow_nodes, b.shadow_node_ints, b.triangles, self._normals,
            camera.basis(width, height), width, height, corners, rows, cols, self.scene.light,
            np.float32(self.scene.diagonal), self.ao_samples,
            self.ao_radius * self.scene.diagonal, 0, "primary" in self.packets,
            "shadow" in self.packets)
        with self._seen_lock:
            group_sum, lane_sum, groups_hit, distinct, pairs, same = tile_sums(
                counters, last_node, prim, lane_rows, lanes, self._seen)
        n_groups = prim.size // (lane_rows * lanes)
        mean = group_sum / n_groups  # each group's slowest lane
        lane = lane_sum / prim.size  # every lane alike, no group maximum
        for phase in self.packets:  # every pixel carries its packet's counts
            index = PRIMARY if phase == "primary" else SHADOW
            mean[index] = lane[index] / (RAY_PACKET[0] * RAY_PACKET[1])
        (p_t, p_i), (s_t, s_i), (a_t, a_i) = (mean[i].tolist() for i in (PRIMARY, SHADOW, AO))
        workload = Workload(
            pixels=int(width * height), hit_fraction=groups_hit / n_groups,
            p_t=p_t, p_i=p_i, s_t=s_t, s_i=s_i,
            a_t=a_t / self.ao_samples, a_i=a_i / self.ao_samples,
            t_v=float(distinct), m=same / pairs if pairs else 0.0,
            a_t_lane=float(lane[AO, 0] / self.ao_samples),
            a_i_lane=float(lane[AO, 1] / self.ao_samples), ao_probe_rays=self.ao_samples)
        self.last_seconds = time.perf_counter() - start
        return workload

    def measure_async(self, camera: Camera, width: int, height: int) -> Future[Workload]:
        """Start :meth:`measure` on a worker thread (overlaps the device's previous frame)."""
        return self._worker.submit(self.measure, camera, width, height)

    def close(self) -> None:
        """Let a probe on the worker thread finish and end the thread."""
        self._worker.close()
