"""Per-frame workload estimate of each rank's raycast: the volume analogue of the tracer's probe.

For the current view, a few thousand rays march the coarse block grid (mean opacity per block,
after the transfer function) at a coarse step. Each rank's brick is ray-cast on its own in
sort-last rendering, so early ray termination is tracked per brick (a back brick does not know
the front one made the ray opaque). The probe returns, per rank, the path length (in voxels)
through non-empty blocks that rays walk before their in-brick opacity passes each termination
threshold, and how many rays enter the brick. Samples for a step Δs follow as length / Δs,
scaled from probe rays to image pixels: that is what the per-rank model prices.
"""

from __future__ import annotations

import math
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from common.jit_cache import njit
from governed.probe_worker import ProbeWorker
from raytracer.camera import Camera
from raytracer.volume.empty_space import empty_blocks, empty_distance, minmax_grid
from raytracer.volume.partition import Partition
from raytracer.volume.raycaster import OPAQUE_TRANSMITTANCE, SKIP_BLOCK
from raytracer.volume.transfer_function import TransferFunction
from raytracer.volume.volume_data import Volume

PROBE_SIZE = 32  # about PROBE_SIZE² probe rays a frame (0.3 ms for bonsai after a frame)
BLOCK = SKIP_BLOCK  # voxels per block side of the coarse grid: the ray caster's skipping blocks


#: Levels of the one-byte block code: 0 is an empty block, k >= 1 a mean opacity of
#: ((k - 1) / OPACITY_LEVELS)² (square-root spacing keeps faint blocks distinct)
OPACITY_LEVELS = 254
#: The opacity each code stands for (code 0, an empty block: none)
CODE_OPACITY = np.concatenate(
    [[0.0], (np.arange(OPACITY_LEVELS + 1, dtype=np.float64) / OPACITY_LEVELS) ** 2])


@dataclass(frozen=True)
class BlockGrid:
    """Coarse per-block opacity of a volume under a transfer function, in world placement.

    One byte per block (``code``) and a per-frame table of what each code lets through, in
    place of float opacities, flags and a power per sample: the probe runs between frames,
    on the controller's budget (measured on bonsai, 2 ranks, first probe after a frame:
    0.70 -> 0.60 ms)."""

    code: NDArray[np.uint8]  # (bz, by, bx): 0 empty, else 1 + quantized mean opacity
    origin: NDArray[np.float64]  # world position of voxel (0, 0, 0)
    spacing: NDArray[np.float64]  # (x, y, z)
    dims: tuple[int, int, int]  # voxels (x, y, z)
    # (bz, by, bx) the ray caster's jump from each empty block: the radius in blocks of the
    # empty cube around it (:func:`~raytracer.volume.empty_space.empty_distance`), 0 where
    # the block is not empty
    distance: NDArray[np.uint8]
    block: int = BLOCK

    @classmethod
    def for_volume(cls, volume: Volume, tf: TransferFunction, block: int = BLOCK) -> BlockGrid:
        """The grid of a volume under a transfer function (opacities at its reference step)."""
        return cls.of(volume.normalized, tf.lut()[:, 3], volume.origin,
                      np.asarray(volume.spacing), block)

    @classmethod
    def of(cls, normalized: NDArray[np.float32], alpha_lut: NDArray[np.float32],
           origin: NDArray, spacing: NDArray, block: int = BLOCK) -> BlockGrid:
        """From values in [0, 1] indexed [z, y, x] and a per-reference-step opacity table.
        A block is empty exactly where the ray caster skips it (:func:`empty_blocks`: the
        table shows nothing over the value range its trilinear samples read), not only where
        no voxel of its own is visible: the caster samples every block whose range reaches a
        visible value (on aneurism's thin vessels a third more than that)."""
        n = len(alpha_lut)
        idx = np.clip((normalized * (n - 1) + 0.5).astype(np.int32), 0, n - 1)
        alpha = alpha_lut[idx]
        nz, ny, nx = alpha.shape
        pad = [(0, (-s) % block) for s in alpha.shape]
        a = np.pad(alpha, pad, mode="edge")
        shape = (a.shape[0] // block, block, a.shape[1] // block, block, a.shape[2] // block,
                 block)
        mean = np.clip(a.reshape(shape).mean(axis=(1, 3, 5)), 0.0, 1.0)
        level = np.rint(np.sqrt(mean) * OPACITY_LEVELS).astype(np.uint8) + 1
        skipped = empty_blocks(*minmax_grid(normalized, (0, 0, 0), block), alpha_lut)
        sampled = np.zeros(mean.shape, bool)  # (the caster's grid may be a block shorter)
        sampled[tuple(slice(0, m) for m in skipped.shape)] = skipped[
            tuple(slice(0, m) for m in mean.shape)] == 0
        code = np.where(sampled, level, 0).astype(np.uint8)
        return cls(code, np.asarray(origin, np.float64), np.asarray(spacing, np.float64),
                   (nx, ny, nz), empty_distance(code == 0), block)

    @property
    def nonempty(self) -> NDArray[np.bool_]:
        """(bz, by, bx) the ray caster samples the block (does not skip it)."""
        return self.code > 0

    @property
    def opacity(self) -> NDArray[np.float64]:
        """(bz, by, bx) the blocks' quantized mean opacity per reference step."""
        return CODE_OPACITY[self.code]

    def working_set_bytes(self, brick_boxes: NDArray) -> NDArray[np.float64]:
        """(ranks,) bytes of 4-byte voxels (float32, or the ray caster's byte cells) in the
        non-empty blocks of each brick (world boxes [lo, hi)): what a rank's samples read, to
        set against the cache it has."""
        boxes = np.asarray(brick_boxes, np.float64)
        lo = np.floor((boxes[:, 0] - self.origin) / self.spacing / self.block).astype(int)
        hi = np.ceil((boxes[:, 1] - self.origin) / self.spacing / self.block).astype(int)
        lo = np.maximum(lo, 0)
        nonempty = self.nonempty
        blocks = [nonempty[a[2]:b[2], a[1]:b[1], a[0]:b[0]].sum()
                  for a, b in zip(lo, hi, strict=True)]
        return np.asarray(blocks, np.float64) * self.block**3 * 4

    def transmittance(self, step_ratio: float) -> NDArray[np.float64]:
        """Per code: what one step of ``step_ratio`` reference steps lets through."""
        return (1.0 - CODE_OPACITY) ** step_ratio


@dataclass(frozen=True)
class RankWorkload:
    """Per rank: non-empty path length before termination (voxels) per threshold, rays entering
    the brick; both per probe ray, so they scale to any image size."""

    thresholds: NDArray[np.float64]  # (T,)
    length: NDArray[np.float64]  # (T, ranks) mean voxels walked in non-empty blocks per ray
    span: NDArray[np.float64]  # (T, ranks) mean voxels walked in the brick (any block) per ray
    rays: NDArray[np.float64]  # (ranks,) share of probe rays that enter the brick
    # (T, ranks) mean jumps over empty space per ray: the ray caster looks an empty block's
    # distance up and jumps the empty cube around it (a cost per jump, not per position
    # passed over); each probe step in an empty block adds its share of the jump from there
    jumps: NDArray[np.float64]
    # (T, ranks) mean |difference| of horizontally adjacent probe rays' non-empty lengths
    neighbour_change: NDArray[np.float64]
    # (T, ranks) that change relative to the mean non-empty length (0 where no ray walks
    # any): what makes the lanes of a SIMD group take unequal samples, so the group pays for
    # its longest ray. Divided out in the march: a NumPy division after it took 0.05 of the
    # 0.32 ms a fresh frame's pricing took (bonsai, 512², 2 ranks, after a render)
    roughness: NDArray[np.float64]
    probe_width: int  # probe rays across the image (what the neighbours' distance is)
    # mean |z component| of the rays' direction in voxels: how fast they cross the volume's
    # z slices, its slowest memory axis (a step along z lands a slice away; along x, in the
    # same cache line)
    slice_crossing: float
    # |z component| of the image's right axis plus its up axis, in voxels: how far the image
    # plane runs along the z slices (neighbouring rays, a SIMD group's lanes, then read
    # different slices where across them they share cache lines): models.volume_cost
    plane_crossing: float = 0.0

    def samples(self, threshold_index: NDArray, pixels_per_step: NDArray) -> NDArray:
        """(ranks, candidates) samples for candidate thresholds and pixels / step (voxels)."""
        return (self.length[threshold_index] * pixels_per_step[:, None]).T

    def skipped(self, threshold_index: NDArray, pixels_per_step: NDArray) -> NDArray:
        """(ranks, candidates) lattice positions passed over in empty blocks."""
        return ((self.span - self.length)[threshold_index] * pixels_per_step[:, None]).T

    def jump_counts(self, threshold_index: NDArray, pixels: NDArray) -> NDArray:
        """(ranks, candidates) jumps over empty space for candidate thresholds and pixels: as
        many at any step, since each lands past a whole empty cube."""
        return (self.jumps[threshold_index] * np.asarray(pixels, np.float64)[:, None]).T

    def ray_counts(self, pixels: NDArray) -> NDArray:
        """(ranks, candidates) rays entering each brick."""
        return self.rays[:, None] * np.asarray(pixels, np.float64)[None, :]


def nearest_threshold(thresholds: NDArray, ert: ArrayLike) -> NDArray[np.intp]:
    """Index of the probed threshold nearest each early-termination threshold ``ert`` (the
    probe walks only its own thresholds; a knob between them is priced at the nearest)."""
    return np.abs(np.asarray(ert, np.float64)[..., None]
                  - np.asarray(thresholds, np.float64)).argmin(axis=-1)


# One numba hot loop, kept whole: per probe ray, per brick, a walk of the ray's samples whose
# running state (transmittance, thresholds passed, voxels walked, non-empty voxels, jumps)
# stays in registers and lands in the per-brick accumulators once per brick. A function per
# ray or per brick would be a call inside the probe's ray loop, taking the accumulators and
# returning that state each time.
@njit(fastmath=True, nogil=True)  # nogil: a probe ahead runs beside the frame's wait
def _march(eye, top_left, du, dv, pw, ph, vol_lo, vol_hi, origin, spacing, block, code,
           distance, passes, jump_share, bricks_lo, bricks_hi, step_vox, thresholds
           ):  # pragma: no cover
    """Per brick, the ray's samples inside it (clipped by a ray-box test, not a search per
    sample); per threshold (ascending) the voxels walked before the brick's own
    transmittance fell to 1 − threshold (at most OPAQUE_TRANSMITTANCE, where the caster
    stops), and the jumps over empty space before then, totalled once when it does; a ray
    stops once every threshold is passed. A step in an empty block counts ``jump_share[r]``
    jumps (its length over the ``r`` blocks the caster's jump from there crosses, ``r`` the
    block's ``distance``): the sum over a run of empty space is about the caster's jumps
    across it, without a walk from landing to landing (where each lands decides the next
    sample, so the walk cannot run ahead: on bonsai after a frame evicted the caches, that
    probe took 0.67 ms, this one 0.29 and none 0.23).
    All per probe ray, and per threshold and brick the mean |difference| of horizontally
    adjacent rays' non-empty lengths (per pair of rays) and that over the mean non-empty
    length (the roughness); last the mean |z component| of the direction, in voxels, of the
    rays that enter the volume."""
    n_bricks = bricks_lo.shape[0]
    n_thr = thresholds.shape[0]
    length = np.zeros((n_thr, n_bricks))
    span = np.zeros((n_thr, n_bricks))
    jumps = np.zeros((n_thr, n_bricks))
    rays = np.zeros(n_bricks)
    change = np.zeros((n_thr, n_bricks))  # Σ |this ray's length − its left neighbour's|
    mine = np.zeros((n_thr, n_bricks))  # this ray's non-empty length per threshold, brick
    left = np.zeros((n_thr, n_bricks))  # its left neighbour's
    crossing, entering = 0.0, 0  # Σ |z component| of rays entering the volume, their count
    bz, by, bx = code.shape
    smin = min(spacing[0], min(spacing[1], spacing[2]))
    dt = step_vox * smin
    inv_cell = 1.0 / (spacing * block)
    limits = np.maximum(1.0 - thresholds, OPAQUE_TRANSMITTANCE)  # as the caster stops
    d = np.empty(3)  # the ray's direction, filled in place (an array per ray cost 30 µs)
    for py in range(ph):
        for px in range(pw):
            for a in range(3):
                d[a] = top_left[a] + (px + 0.5) * du[a] + (py + 0.5) * dv[a]
            norm = math.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
            for a in range(3):
                d[a] /= norm
            t0, t1 = 0.0, 1e30
            for a in range(3):
                inv = 1.0 / d[a] if d[a] != 0.0 else 1e30
                ta = (vol_lo[a] - eye[a]) * inv
                tb = (vol_hi[a] - eye[a]) * inv
                t0 = max(t0, min(ta, tb))
                t1 = min(t1, max(ta, tb))
            mine[:] = 0.0
            if t0 < t1:
                vx, vy, vz = d[0] / spacing[0], d[1] / spacing[1], d[2] / spacing[2]
                crossing += abs(vz) / math.sqrt(vx * vx + vy * vy + vz * vz)
                entering += 1
            for b in range(n_bricks if t0 < t1 else 0):
                # the ray's samples t0 + (i + 0.5)·dt that fall in this brick: [enter, leave)
                enter, leave = t0, t1
                for a in range(3):
                    inv = 1.0 / d[a] if d[a] != 0.0 else 1e30
                    ta = (bricks_lo[b, a] - eye[a]) * inv
                    tb = (bricks_hi[b, a] - eye[a]) * inv
                    enter = max(enter, min(ta, tb))
                    leave = min(leave, max(ta, tb))
                if enter >= leave:
                    continue
                i = max(0, int(math.ceil((enter - t0) / dt - 0.5)))
                t = t0 + (i + 0.5) * dt
                trans = 1.0
                k = 0  # thresholds 0..k-1 passed: their totals are final
                walked = 0.0  # voxels walked in the brick so far
                full = 0.0  # of which in non-empty blocks
                hops = 0.0  # jumps over empty space so far
                rays[b] += 1.0 if t < leave else 0.0
                while t < leave:
                    while k < n_thr and trans <= limits[k]:
                        span[k, b] += walked
                        length[k, b] += full
                        jumps[k, b] += hops
                        mine[k, b] = full
                        k += 1
                    if k == n_thr:
                        break
                    p0 = eye[0] + t * d[0]
                    p1 = eye[1] + t * d[1]
                    p2 = eye[2] + t * d[2]
                    ix = min(max(int((p0 - origin[0]) * inv_cell[0]), 0), bx - 1)
                    iy = min(max(int((p1 - origin[1]) * inv_cell[1]), 0), by - 1)
                    iz = min(max(int((p2 - origin[2]) * inv_cell[2]), 0), bz - 1)
                    c = code[iz, iy, ix]
                    walked += step_vox
                    if c > 0:
                        full += step_vox
                        trans *= passes[c]
                    else:
                        hops += jump_share[distance[iz, iy, ix]]
                    t += dt
                for j in range(k, n_thr):
                    span[j, b] += walked
                    length[j, b] += full
                    jumps[j, b] += hops
                    mine[j, b] = full
            if px > 0:
                for j in range(n_thr):
                    for b in range(n_bricks):
                        change[j, b] += abs(mine[j, b] - left[j, b])
            left[:] = mine
    n = float(pw * ph)
    change /= max(1.0, float((pw - 1) * ph))
    length /= n
    roughness = np.zeros_like(change)
    for j in range(n_thr):
        for b in range(n_bricks):
            if length[j, b] > 0.0:
                roughness[j, b] = change[j, b] / length[j, b]
    return (length, span / n, jumps / n, rays / n, change, roughness,
            crossing / max(entering, 1))


def plane_crossing(du: NDArray, dv: NDArray, spacing: NDArray) -> float:
    """|z component| of the image's right (``du``) plus its up axis (``dv``), each in voxels
    (divided by the volume's ``spacing``) and of unit length: 0 for an image plane across the
    z slices, up to √2 for one that runs along them."""
    sx, sy, sz = (float(v) for v in spacing)
    total = 0.0
    for ax, ay, az in (du, dv):  # plain floats: the probe runs in the frame
        x, y, z = float(ax) / sx, float(ay) / sy, float(az) / sz
        total += abs(z) / max(math.sqrt(x * x + y * y + z * z), 1e-30)
    return total


def brick_boxes(partition: Partition) -> NDArray[np.float64]:
    """(ranks, 2, 3) world boxes [lo, hi) of the partition's bricks (cells between voxel
    centres: world = origin + voxel · spacing); outer faces widened a little so samples on
    the volume's boundary belong to a brick, as in the ray caster."""
    origin = np.asarray(partition.origin, np.float64)
    spacing = np.asarray(partition.spacing, np.float64)
    last = np.asarray(partition.dims, np.float64) - 1.0
    out = np.empty((len(partition.bricks), 2, 3))
    for i, b in enumerate(partition.bricks):
        lo = np.where(np.asarray(b.lo) == 0, -1e-3, b.lo)
        hi = np.where(np.asarray(b.hi) == last, last + 1e-3, b.hi)
        out[i, 0], out[i, 1] = origin + lo * spacing, origin + hi * spacing
    return out


def probe_raster(width: int, height: int, rays: int = PROBE_SIZE * PROBE_SIZE) -> tuple[int, int]:
    """A probe raster of about ``rays`` rays with the image's aspect ratio."""
    pw = max(4, round(math.sqrt(rays * width / height)))
    return pw, max(4, round(rays / pw))


class WorkloadProbe:
    """The probe of one volume's bricks, called once per frame with the view: what does not
    change from frame to frame (the volume's and the bricks' boxes, the step's transmittance
    table, the thresholds) is checked and laid out once, so a frame pays for little more than
    the march (the governed loop probes right after a frame, when every Python call costs
    several times its warm time).

    ``brick_boxes`` is (ranks, 2, 3): each rank's brick as a world box [lo, hi);
    ``thresholds`` ascending; about ``rays`` probe rays (the image's aspect) march at
    ``step_vox`` voxels, with opacities per ``ref_step``."""

    def __init__(self, grid: BlockGrid, brick_boxes: NDArray, thresholds: NDArray,
                 ref_step: float = 1.0, rays: int = PROBE_SIZE * PROBE_SIZE,
                 step_vox: float = 4.0) -> None:
        self.thresholds = np.asarray(thresholds, np.float64)
        if np.any(np.diff(self.thresholds) < 0):
            raise ValueError(f"probe thresholds must be ascending, got "
                             f"{self.thresholds.tolist()}")
        self.grid, self.rays, self.step_vox = grid, rays, float(step_vox)
        boxes = np.asarray(brick_boxes, np.float64)
        self._bricks_lo = np.ascontiguousarray(boxes[:, 0])
        self._bricks_hi = np.ascontiguousarray(boxes[:, 1])
        self._volume_hi = grid.origin + (np.asarray(grid.dims) - 1.0) * grid.spacing
        self._passes = grid.transmittance(step_vox / ref_step)
        # per distance r: the share of one jump over r blocks a probe step is (0: not empty)
        r = np.arange(int(grid.distance.max()) + 1, dtype=np.float64)
        self._jump_share = np.divide(step_vox, r * grid.block, out=np.zeros_like(r), where=r > 0)
        self._worker = ProbeWorker("volume-probe")  # measure_async's thread

    def __call__(self, camera: Camera, width: int, height: int) -> RankWorkload:
        """Each brick's workload for ``camera`` rendering ``width`` x ``height`` pixels."""
        pw, ph = probe_raster(width, height, self.rays)
        eye, top_left, du, dv = camera.basis(pw, ph).astype(np.float64)
        g = self.grid
        length, span, jumps, hits, change, roughness, crossing = _march(
            eye, top_left, du, dv, pw, ph, g.origin, self._volume_hi, g.origin, g.spacing,
            g.block, g.code, g.distance, self._passes, self._jump_share, self._bricks_lo,
            self._bricks_hi, self.step_vox, self.thresholds)
        return RankWorkload(self.thresholds, length, span, hits, jumps, change, roughness, pw,
                            crossing, plane_crossing(du, dv, g.spacing))

    def measure_async(self, camera: Camera, width: int, height: int) -> Future[RankWorkload]:
        """Start a probe of ``camera`` on this probe's worker thread (the next view, while the
        device renders this one: Ganestam & Doggett's probe beside the GPU's frame)."""
        return self._worker.submit(self, camera, width, height)

    def close(self) -> None:
        """Let a probe on the worker thread finish and end the thread (a probe replaced by
        another's)."""
        self._worker.close()


def probe_workload(grid: BlockGrid, camera: Camera, width: int, height: int,
                   brick_boxes: NDArray, thresholds: NDArray, ref_step: float = 1.0,
                   rays: int = PROBE_SIZE * PROBE_SIZE, step_vox: float = 4.0
                   ) -> RankWorkload:
    """One probe of ``camera`` (see :class:`WorkloadProbe`, which a frame loop keeps)."""
    return WorkloadProbe(grid, brick_boxes, thresholds, ref_step, rays, step_vox)(
        camera, width, height)
