"""OpenCL ray caster of one brick (or the whole volume): PyOpenCL host for kernels/raycast.cl
(a ray per work-item) and kernels/raycast_packet.cl (a packet of rays per work-item, in vector
lanes), whichever the device's measured launch names.

The brick's voxels (with their ghost layer) and the empty-space flags are uploaded once: 8-bit
volumes as byte cells (:func:`cell_words`), normalised in the kernel bit for bit as
``Volume.normalized``; any other as normalized float32. Each ``render`` takes the tuner's
knobs (sample step, early-termination threshold, image size) and returns a full-size
premultiplied RGBA float image in which pixels whose rays miss the brick are 0, with the
kernel time from profiling events and cheap sample counters.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

import numpy as np
import pyopencl as cl

from raytracer.camera import Camera
from raytracer.device.choice import DeviceInfo, build_quietly, choose_device
from raytracer.device.event_time import event_seconds
from raytracer.device.launches import (
    Launch,
    device_launches,
    time_rounds,
    with_sub_groups,
)
from raytracer.volume.empty_space import empty_blocks, empty_distance, minmax_grid
from raytracer.volume.errors import VolumeError
from raytracer.volume.partition import Brick, whole_brick
from raytracer.volume.ray_counts import count_totals
from raytracer.volume.transfer_function import LUT_SIZE, TransferFunction, default_for
from raytracer.volume.volume_data import Volume, load_volume

KERNEL = "raycast"
PACKET_KERNEL = "raycast_packet"  # kernels/raycast_packet.cl, built with packet_options
#: the fixed workload every device's caster launch is chosen on (device_launch): a validation
#: volume (governed.volume.volume_sets; a test checks it), since a launch shape is a design
#: choice
LAUNCH_VOLUME = "aneurism"
LAUNCH_SIZE = 256
#: The packet form timed on every device: 4x4 pixels per work-item ran bonsai 512² (one
#: compute unit, three views) in 121 ms on PoCL and 102 ms on Intel's runtime, against 241 and
#: 146 ms for the scalar kernel and 126 / 104 ms in 8x2 packets, 134 / 118 ms in 16x1.
PACKETS = ((4, 4),)
#: Voxels per side of an empty-space block: 4 evaluates a third fewer samples than 8 on
#: bonsai (only 30 % of the samples in non-empty 8³ blocks have opacity) and, with jumps over
#: whole empty cubes of blocks, costs less per frame (measured); 2 gains nothing more.
SKIP_BLOCK = 4
MAX_PIXELS = 16384 * 16384
MIN_STEP = 1e-3
#: Faces on the volume boundary are widened by this many voxels so that rounding never drops
#: a ray's first or last sample; interior faces stay exact so bricks share none.
BOUNDARY_EPS = 1e-3
#: A ray stops once what it lets through falls to this, whatever its threshold (VTK's
#: fixed-point caster stops there too): nothing behind can then change a pixel by more than
#: 2^-15 of full intensity. Without it, threshold 1 stopped where float32 rounding happened
#: to make the opacity exactly 1.0, which large steps through dense matter reach and small
#: ones stall short of (its remainder rounding back up), so no probe could say where.
OPAQUE_TRANSMITTANCE = 2.0**-15
#: Opacity-corrected colour tables kept per step (16 KB each at the default size): a tuner
#: moves the step from frame to frame over a few dozen levels, and building a table and its
#: buffer again cost the next frame 0.2-0.3 ms of its 3.7 ms render (bonsai 256², 2 ranks)
LUT_CACHE_STEPS = 64


def stopping_opacity(ert_threshold: float) -> float:
    """The accumulated opacity at which a ray stops for ``ert_threshold``: the threshold, or
    opaque (1 − :data:`OPAQUE_TRANSMITTANCE`) where that comes first."""
    return min(float(ert_threshold), 1.0 - OPAQUE_TRANSMITTANCE)


@dataclass
class BrickImage:
    """One brick's rendering: premultiplied RGBA (H, W, 4) float32 and what it cost."""

    rgba: np.ndarray
    kernel_seconds: float
    samples: int  # lattice samples evaluated (trilinear + TF)
    skipped: int  # lattice samples jumped over in empty blocks
    rays: int  # pixels whose ray took or skipped at least one sample in the brick
    brick_index: int = 0
    # samples as the SIMD groups pay them: each group's slowest lane times its lanes (lanes in
    # lockstep wait for the longest ray; 0: not counted)
    group_samples: int = 0


@dataclass
class _Runtime:
    info: DeviceInfo
    device: cl.Device
    context: cl.Context
    queue: cl.CommandQueue
    # by build options, sub-group size and the kernel it is required on
    programs: dict[tuple[tuple[str, ...], int, str], cl.Program]


_RUNTIMES: dict[str, _Runtime] = {}


def kernel_source() -> str:
    """The OpenCL C source of the ray-casting kernel, after the tracer's math macros
    (raytracer/device/kernels/rtmath.cl: FMIN, SQRT, ... are builtins or, with -DINLINE_MATH, plain
    code): raycast.cl's kernel and, built with -DPACKET (:func:`packet_options`),
    raycast_packet.cl's."""
    math_macros = (resources.files("raytracer.device") / "kernels" / "rtmath.cl").read_text()
    kernels = resources.files("raytracer.volume") / "kernels"
    return "\n".join([math_macros, (kernels / "raycast.cl").read_text(),
                      (kernels / "raycast_packet.cl").read_text()])


def build_options(info: DeviceInfo) -> list[str]:
    """``-DINLINE_MATH`` on PoCL, whose OpenCL builtins are out-of-line calls on this CPU (see
    rtmath.cl; 1.6x per frame here); none elsewhere. No fast-math: the image is exact."""
    return ["-DINLINE_MATH"] if info.is_pocl else []


def packet_options(launch: Launch) -> tuple[str, ...]:
    """Build options for ``launch``'s packet: none for a ray per work-item, else the lanes and
    the columns of raycast_packet.cl's kernel."""
    cols, rows = launch.packet
    return () if launch.packet == (1, 1) else (f"-DPACKET={cols * rows}", f"-DPACKET_COLS={cols}")


def _runtime(device: str | None) -> _Runtime:
    """One context and queue per device spec, shared by all Raycasters of a process (tests and
    benchmarks make many bricks)."""
    key = device or ""
    if key not in _RUNTIMES:
        info, dev = choose_device(device)
        context = cl.Context([dev])
        queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        _RUNTIMES[key] = _Runtime(info, dev, context, queue, {})
    return _RUNTIMES[key]


def kernel_name(launch: Launch) -> str:
    """The kernel ``launch`` runs: raycast.cl's, or raycast_packet.cl's for a packet."""
    return KERNEL if launch.packet == (1, 1) else PACKET_KERNEL


def _program(rt: _Runtime, options: tuple[str, ...], launch: Launch) -> cl.Program:
    """The kernels built with ``options`` and the required sub-group size of ``launch`` on the
    kernel it runs (0: none), once per runtime (PoCL builds take a second each)."""
    key = (options, launch.sub_group, kernel_name(launch))
    if key not in rt.programs:
        source = with_sub_groups(kernel_source(), {kernel_name(launch): launch.sub_group})
        try:
            rt.programs[key] = build_quietly(cl.Program(rt.context, source), list(options))
        except cl.RuntimeError as exc:
            raise VolumeError(f"OpenCL build of raytracer/volume/kernels/raycast*.cl with "
                              f"{' '.join(options)} failed:\n{exc}") from None
    return rt.programs[key]


def device_launch(device: str | None = None) -> Launch:
    """How the caster is launched on ``device`` (a spec; None: the default): measured once per
    device and cached (``raytracer/device/launches.py``), the :data:`PACKETS` among the
    candidates. Intel's CPU runtime runs the scalar kernel in SIMD lanes in 16x4 groups by
    itself and one work-item at a time in 8x8 ones (bonsai 512², one compute unit, three
    views: 112 ms against 217; in required sub-groups of 16 114 ms, of 8 147 ms)."""
    rt = _runtime(device)
    return device_launches(rt.device, kernel_source(), (KERNEL,),
                           lambda options: time_launches(device, options),
                           rt.info.simd_width, PACKETS,
                           workload=f"{LAUNCH_VOLUME} at {LAUNCH_SIZE}x{LAUNCH_SIZE}")[KERNEL]


def time_launches(device: str | None, candidates: list[Launch]
                  ) -> dict[Launch, dict[str, float]]:
    """Seconds of the caster launched each way in ``candidates`` on ``device`` (a spec, as
    given to :func:`device_launch`, so the timing casters share its runtime): the
    :data:`LAUNCH_VOLUME` at :data:`LAUNCH_SIZE` from three sides
    (:func:`raytracer.device.launches.time_rounds`). A candidate that does not build is left
    out."""
    volume = load_volume(LAUNCH_VOLUME)
    tf = default_for(volume.name)
    r = 2.8 * volume.radius
    cameras = [Camera(eye, (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), 45.0)
               for eye in ((0.0, 0.0, r), (r, 0.0, 0.0), (0.0, 0.5 * r, -r))]
    casters = {}
    for launch in candidates:
        try:
            casters[launch] = Raycaster(volume, tf, device=device, launch=launch)
        except VolumeError:
            continue

    def run(launch: Launch, kernel: str) -> float:
        return sum(casters[launch].render(cam, LAUNCH_SIZE, LAUNCH_SIZE).kernel_seconds
                   for cam in cameras)

    return time_rounds(list(casters), (KERNEL,), run)


def voxel_options(byte_cells: bool, count: int) -> tuple[str, ...]:
    """Build options for a brick's voxels: ``-DBYTE_CELLS`` for :func:`cell_words`, and the
    index type: 32-bit below 2³² voxels (a 64-bit index halves the lanes of each gather)."""
    index = "uint" if count < 2**32 else "ulong"
    return ("-DBYTE_CELLS",) * byte_cells + (f"-DVOXEL_INDEX={index}",)


def cell_words(levels: np.ndarray) -> np.ndarray:
    """uint32 [z, y, x] of uint8 ``levels[z, y, x]``: the bytes of voxels (x, y), (x+1, y),
    (x, y+1), (x+1, y+1) of each z, low byte first (0 past the last column or row), so a
    trilinear sample reads 2 words instead of 8 voxels."""
    words = np.ascontiguousarray(levels, dtype=np.uint32)
    words[:, :, :-1] |= levels[:, :, 1:].astype(np.uint32) << 8
    words[:, :-1, :] |= levels[:, 1:, :].astype(np.uint32) << 16
    words[:, :-1, :-1] |= levels[:, 1:, 1:].astype(np.uint32) << 24
    return words


def owned_box(brick: Brick, dims: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The brick's half-open sample box [lo, hi) in voxel coordinates (float32), with faces on
    the volume boundary widened by BOUNDARY_EPS; the CPU reference uses the same box."""
    lo = np.asarray(brick.lo, np.float64)
    hi = np.asarray(brick.hi, np.float64)
    last = np.asarray(dims, np.float64) - 1.0
    lo = np.where(lo == 0.0, -BOUNDARY_EPS, lo)
    hi = np.where(hi == last, last + BOUNDARY_EPS, hi)
    return lo.astype(np.float32), hi.astype(np.float32)


def validate_knobs(width: int, height: int, step: float, ert_threshold: float) -> None:
    """Reject bad frame parameters with one message naming the value."""
    if int(width) != width or int(height) != height or width < 1 or height < 1:
        raise VolumeError(f"image size must be positive integers, got {width}x{height}")
    if width * height > MAX_PIXELS:
        raise VolumeError(f"image size {width}x{height} is absurd")
    if not (math.isfinite(step) and step >= MIN_STEP):
        raise VolumeError(f"sample step must be >= {MIN_STEP} voxels, got {step}")
    if not (math.isfinite(ert_threshold) and 0.0 < ert_threshold <= 1.0):
        raise VolumeError(f"early-termination threshold must be in (0, 1] (1: only when "
                          f"opaque), got {ert_threshold}")


def _f4(v) -> np.ndarray:
    return np.append(np.asarray(v, np.float32)[:3], np.float32(0)).astype(np.float32)


def _i4(v) -> np.ndarray:
    return np.append(np.asarray(v, np.int32)[:3], np.int32(0)).astype(np.int32)


class Raycaster:
    """Renders one brick of a volume (default: the whole volume) with OpenCL."""

    def __init__(self, volume: Volume, tf: TransferFunction, brick: Brick | None = None,
                 device: str | None = None, lut_size: int = LUT_SIZE,
                 block: int = SKIP_BLOCK, launch: Launch | None = None) -> None:
        """``launch``: work-group and sub-group of the kernel; default: the device's, measured
        once (:func:`device_launch`)."""
        self.volume = volume
        self.brick = brick or whole_brick(volume.dims)
        self.block = int(block)
        if self.block < 1 or self.block & (self.block - 1):
            raise VolumeError(f"empty-space block size must be a power of two, got {block}")
        self.lut_size = int(lut_size)
        rt = _runtime(device)
        self.device_info, self.context, self.queue = rt.info, rt.context, rt.queue
        #: bytes of the device's global memory cache (OpenCL ``global_mem_cache_size``): what
        #: a brick's working set is set against on a GPU (models.volume_cost.streamed_share)
        self.cache_bytes = int(rt.device.global_mem_cache_size)
        self.launch = launch or device_launch(device)
        self.group = self.launch.group
        self.lanes = self.launch.lanes(rt.info.simd_width)
        dims = volume.dims
        glo, ghi = self.brick.ghost_lo, self.brick.ghost_hi
        if any(lo < 0 or hi > d or hi - lo < 2 for lo, hi, d in zip(glo, ghi, dims, strict=True)):
            raise VolumeError(f"brick {self.brick} does not fit volume dims {dims}")
        box = np.s_[glo[2]:ghi[2], glo[1]:ghi[1], glo[0]:ghi[0]]
        normalized = volume.normalized[box]
        self._gdim = normalized.shape[::-1]
        self._mins, self._maxs = minmax_grid(normalized, glo, self.block)
        self._borg = tuple(g // self.block for g in glo)
        self._blo, self._bhi = owned_box(self.brick, dims)
        levels = volume.byte_levels
        #: "bytes" (cell_words of the byte levels) or "float" (normalized values)
        self.voxels = "float" if levels is None else "bytes"
        data = (np.ascontiguousarray(normalized) if levels is None
                else cell_words(levels[box]))
        options = (tuple(build_options(rt.info)) + voxel_options(levels is not None, data.size)
                   + packet_options(self.launch))
        self._kernel = cl.Kernel(_program(rt, options, self.launch), kernel_name(self.launch))
        mf = cl.mem_flags
        self._data = cl.Buffer(self.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=data)
        self._luts: OrderedDict[float, cl.Buffer] = OrderedDict()  # by step, last used last
        self.set_transfer_function(tf)
        self._capacity = 0  # pixels the output buffers hold

    @property
    def device(self) -> DeviceInfo:
        return self.device_info

    def set_transfer_function(self, tf: TransferFunction) -> None:
        """Use ``tf`` from the next frame on (re-derives the empty-block flags and the kept
        steps' colour tables)."""
        self.tf = tf
        self.empty = empty_blocks(self._mins, self._maxs, tf.lut(self.lut_size)[:, 3])
        self.distance = empty_distance(self.empty)
        self._dist = cl.Buffer(self.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                               hostbuf=self.distance.astype(np.int32))  # int: see raycast.cl
        kept, self._luts = list(self._luts), OrderedDict()
        self.prepare_steps(kept)

    def prepare_steps(self, steps: Iterable[float]) -> None:
        """Build the colour tables of ``steps`` now (the last ones kept if they are more than
        :data:`LUT_CACHE_STEPS`), so that no timed frame at these steps builds one."""
        for step in steps:
            self._lut(float(step))

    @property
    def kept_table_steps(self) -> tuple[float, ...]:
        """The steps whose colour tables are kept, least recently used first."""
        return tuple(self._luts)

    def _lut(self, step: float) -> cl.Buffer:
        """The colour table for ``step``, opacity-corrected: kept for the last
        :data:`LUT_CACHE_STEPS` steps used."""
        if step in self._luts:
            self._luts.move_to_end(step)
        else:
            table = self.tf.lut(self.lut_size, step=step)
            self._luts[step] = cl.Buffer(self.context, cl.mem_flags.READ_ONLY
                                         | cl.mem_flags.COPY_HOST_PTR, hostbuf=table)
            while len(self._luts) > LUT_CACHE_STEPS:
                self._luts.popitem(last=False)
        return self._luts[step]

    def _allocate(self, width: int, height: int) -> None:
        """Output buffers for ``width`` x ``height`` pixels: grow-only, and their pages written
        once when made. A frame whose kernel wrote fresh buffers took 16 % longer (page
        faults: 6 MB at 512², aneurism), so a tuner changing the image scale paid for it in
        the next frame, and a model calibrated on random scales learnt that as render cost."""
        n = width * height
        if n > self._capacity:
            mf = cl.mem_flags
            self._image = cl.Buffer(self.context, mf.WRITE_ONLY, 16 * n)
            self._counters = cl.Buffer(self.context, mf.WRITE_ONLY, 8 * n)
            for buf, size in ((self._image, 16 * n), (self._counters, 8 * n)):
                cl.enqueue_fill_buffer(self.queue, buf, np.zeros(1, np.uint32), 0, size)
            self._count_store = np.zeros(2 * n, np.uint32)  # reused: host-side only
            self._capacity = n
        self._counts = self._count_store[:2 * n].reshape(height, width, 2)

    def render(self, camera: Camera, width: int, height: int, step: float = 1.0,
               ert_threshold: float = 1.0, skip_empty: bool = True) -> BrickImage:
        """Ray-cast the brick at ``step`` voxels (relative to the smallest spacing) with early
        termination at accumulated opacity ``ert_threshold`` (at the latest once opaque:
        :data:`OPAQUE_TRANSMITTANCE`)."""
        validate_knobs(width, height, step, ert_threshold)
        self._allocate(width, height)
        eye, top_left, du, dv = camera.basis(width, height)
        spacing = np.asarray(self.volume.spacing, np.float64)
        dt = np.float32(step * spacing.min())
        event = self._kernel(
            self.queue, self.launch.work_items(width, height), self.group, self._data,
            self.volume.value_scale, _i4(self.brick.ghost_lo),
            _i4(self._gdim), _i4(self.volume.dims), _f4(self._blo), _f4(self._bhi),
            self._dist, _i4(self._borg), _i4(self.empty.shape[::-1]),
            np.int32(self.block.bit_length() - 1),
            np.int32(1 if skip_empty else 0), self._lut(float(step)), np.int32(self.lut_size),
            _f4(eye), _f4(top_left), _f4(du), _f4(dv), _f4(self.volume.origin),
            _f4(1.0 / spacing), np.int32(width), np.int32(height), dt,
            np.float32(stopping_opacity(ert_threshold)), self._image, self._counters)
        rgba = np.empty((height, width, 4), np.float32)
        counts = self._counts
        cl.enqueue_copy(self.queue, rgba, self._image, wait_for=[event])
        cl.enqueue_copy(self.queue, counts, self._counters, wait_for=[event]).wait()
        seconds = event_seconds(event)
        t = count_totals(counts, self.lanes)
        return BrickImage(rgba, seconds, t.samples, t.skipped, t.rays, self.brick.index,
                          t.group_samples)
