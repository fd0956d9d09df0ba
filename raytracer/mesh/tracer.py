"""PyOpenCL host code: uploads a scene's BVH once, renders frames in four timed phases."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import resources

import numpy as np
import pyopencl as cl

from raytracer.camera import Camera
from raytracer.device.choice import DeviceInfo, build_quietly, choose_device
from raytracer.device.event_time import events_seconds
from raytracer.device.launches import (
    KernelLaunches,
    Launch,
    device_launches,
    time_rounds,
    with_sub_groups,
)
from raytracer.mesh.bvh import BVH, build_bvh, packed_normals
from raytracer.mesh.phases import PACKET_PHASES, PHASE_LIST, RAY_PACKET, TRACING_PHASES
from raytracer.mesh.scene import Scene, load_scene

MAX_AO_RAYS = 64
#: Pixels on each side whose AO the filter gathers (a 5x5 window; kernels/tracer.cl, ao_filter)
AO_FILTER_REACH = 2
#: What the AO history keeps of the rays before each frame: 0.9, about the last ten frames'
#: rays (temporal anti-aliasing keeps 0.9-0.95 of its history the same way)
AO_HISTORY_KEEP = 0.9
MAX_PIXELS = 16384 * 16384
# the device layer's math macros, shared with the volume caster
SHARED_KERNEL_FILES = ("rtmath.cl",)
KERNEL_FILES = ("rtmath.cl", "traverse.cl", "tracer.cl", "primary_packet.cl", "shadow_packet.cl")
KERNELS = tuple(p.kernel for p in PHASE_LIST)
PACKET_KERNELS = {phase: f"{phase}_packet" for phase in PACKET_PHASES}
#: the fixed workload every device's kernel launches are chosen on (device/launches.py)
LAUNCH_SCENE = "spheres"
LAUNCH_SIZE = (640, 360)


class TracerError(RuntimeError):
    """Rendering could not start: bad parameters or a kernel that failed to build."""


@dataclass(frozen=True)
class RenderSettings:
    """The knobs the tuner controls for one frame."""

    ao_rays: float = 0  # fractional counts trace one extra ray in that share of the pixels
    ao_radius: float = 0.1  # fraction of the scene diagonal
    shadows: bool = True
    phong: bool = True
    # AO kept over frames: the last frames' rays where they saw the same surface, reprojected
    # and spread a pixel a frame (kernels/tracer.cl, ao); off, a frame's AO is its own rays
    # alone (a reference image, a ray-throughput measurement)
    ao_history: bool = True
    # AO spread over the neighbours that see the same surface (kernels/tracer.cl, ao_filter),
    # part of the AO phase: a few rays a pixel give a smooth term; off, each pixel's AO is
    # its own rays (and history) alone
    ao_filter: bool = True

    def validate(self) -> None:
        if not (math.isfinite(self.ao_rays) and 0 <= self.ao_rays <= MAX_AO_RAYS):
            raise TracerError(f"ao_rays must be a number in 0..{MAX_AO_RAYS}, got {self.ao_rays}")
        if not (math.isfinite(self.ao_radius) and self.ao_radius > 0):
            raise TracerError(f"ao_radius must be a positive fraction of the scene diagonal, "
                              f"got {self.ao_radius}")


@dataclass
class Frame:
    """One rendered frame: RGBA8 image, kernel seconds per phase, optional per-pixel counters."""

    image: np.ndarray  # (H, W, 4) uint8
    phase_seconds: dict[str, float]
    counters: dict[str, np.ndarray] = field(default_factory=dict)  # phase -> (H, W, 2) int32

    @property
    def seconds(self) -> float:
        """Total kernel time of the frame."""
        return float(sum(self.phase_seconds.values()))


def validate_size(width: int, height: int) -> None:
    """Reject empty or absurd image sizes with one clear message."""
    if int(width) != width or int(height) != height or width < 1 or height < 1:
        raise TracerError(f"image size must be positive integers, got {width}x{height}")
    if width * height > MAX_PIXELS:
        raise TracerError(f"image size {width}x{height} is absurd (more than {MAX_PIXELS} pixels)")


def kernel_source() -> str:
    """The OpenCL C source of all tracer kernels, in include order."""
    shared = resources.files("raytracer.device") / "kernels"
    own = resources.files("raytracer.mesh") / "kernels"
    return "\n".join([f"#define AO_FILTER_REACH {AO_FILTER_REACH}",
                      *(((shared if name in SHARED_KERNEL_FILES else own) / name).read_text()
                        for name in KERNEL_FILES)])


def build_options(info: DeviceInfo, counters: bool = False) -> list[str]:
    """Compiler options for ``info``'s driver: ``-DINLINE_MATH`` on PoCL, whose builtins are
    out-of-line calls on this kind of CPU (see raytracer/device/kernels/rtmath.cl); builtins
    elsewhere."""
    options = ["-cl-fast-relaxed-math"]
    if info.is_pocl:
        options.append("-DINLINE_MATH")
    if counters:
        options.append("-DCOUNTERS")
    return options


def _build(context: cl.Context, options: list[str], source: str) -> cl.Program:
    program = cl.Program(context, source)
    try:
        return build_quietly(program, options)
    except cl.RuntimeError as exc:
        raise TracerError(f"OpenCL kernel build failed for raytracer/mesh/kernels "
                          f"({' '.join(options) or 'no options'}):\n{exc}") from None


class Tracer:
    """Renders a scene with OpenCL; phase times come from profiling events."""

    def __init__(self, scene: Scene, bvh: BVH | None = None, device: str | None = None,
                 counters: bool = False, leaf_size: int = 4, source: str | None = None,
                 launches: KernelLaunches | None = None) -> None:
        """``source``: OpenCL C to build instead of :func:`kernel_source` (a variant of the
        kernels with the same entry points, for measuring what a part of them costs).
        ``launches``: how each kernel is launched; default: the device's, measured once
        (:func:`raytracer.device.launches.device_launches`)."""
        self.scene = scene
        self.bvh = bvh or build_bvh(scene.triangles(), leaf_size=leaf_size)
        self.device_info, dev = choose_device(device)
        spec = self.device_info.spec
        self.launches = launches if launches is not None else device_launches(
            dev, kernel_source(), KERNELS, lambda options: time_launches(spec, options),
            self.device_info.simd_width, (RAY_PACKET,))
        self.context = cl.Context([dev])
        self.queue = cl.CommandQueue(self.context,
                                     properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.counters = counters
        sizes = {k: self.launches[k].sub_group for k in KERNELS}
        self.build_options = build_options(self.device_info, counters)
        self.program = _build(self.context, self.build_options,
                              with_sub_groups(kernel_source() if source is None else source,
                                              sizes))
        self._launch = {p.name: self.launches[p.kernel] for p in PHASE_LIST}
        self._kernels = {p.name: getattr(self.program, kernel_for(p.kernel, self._launch[p.name]))
                         for p in PHASE_LIST}
        self._ao_filter = self.program.ao_filter
        mf = cl.mem_flags
        ro = mf.READ_ONLY | mf.COPY_HOST_PTR
        self._nodes = cl.Buffer(self.context, ro, hostbuf=self.bvh.nodes)
        self._shadow_nodes = cl.Buffer(self.context, ro, hostbuf=self.bvh.shadow_nodes)
        self._tris = cl.Buffer(self.context, ro, hostbuf=self.bvh.leaf_blocks)
        self._normals = cl.Buffer(self.context, ro, hostbuf=packed_normals(scene, self.bvh))
        self._size = (0, 0)
        self.scene_scale = np.float32(scene.diagonal)

    @property
    def device(self) -> DeviceInfo:
        return self.device_info

    def _allocate(self, width: int, height: int) -> None:
        if self._size == (width, height):
            return
        n = width * height
        mf = cl.mem_flags
        self._hits = cl.Buffer(self.context, mf.READ_WRITE, 16 * n)
        self._vis = cl.Buffer(self.context, mf.READ_WRITE, 4 * n)
        self._occ = cl.Buffer(self.context, mf.READ_WRITE, 4 * n)
        self._image = cl.Buffer(self.context, mf.WRITE_ONLY, 4 * n)
        self._counter_bufs = {p: cl.Buffer(self.context, mf.READ_WRITE, 8 * n)
                              for p in TRACING_PHASES} if self.counters else {}
        # the AO history, two of each (the last frame's read, this frame's written)
        self._history = [cl.Buffer(self.context, mf.READ_WRITE, 8 * n) for _ in range(2)]
        self._depth = [cl.Buffer(self.context, mf.READ_WRITE, 4 * n) for _ in range(2)]
        # ao_filter's input: planes with a border of pixels without rays, and the normals
        padded = (width + 2 * AO_FILTER_REACH) * (height + 2 * AO_FILTER_REACH)
        self._spread = [cl.Buffer(self.context, mf.READ_WRITE, 4 * padded) for _ in range(3)]
        for plane in self._spread:
            cl.enqueue_fill_buffer(self.queue, plane, np.float32(0), 0, 4 * padded)
        self._spread.append(cl.Buffer(self.context, mf.READ_WRITE, 16 * n))
        self._history_from: tuple[np.ndarray, float] | None = None  # its camera, AO radius
        self._size = (width, height)

    def launch(self, phase: str, camera: Camera, width: int, height: int,
               settings: RenderSettings = RenderSettings(), seed: int = 0
               ) -> tuple[cl.Event, ...]:
        """Enqueue one phase of a frame and return its kernels' events, in launch order (not
        waited for; ``ao`` with its filter is two). ``shadow``, ``ao`` and ``shade`` read the
        primary hits last computed at this size; ``shade`` reads visibility / occlusion only
        where ``settings`` turn them on."""
        validate_size(width, height)
        settings.validate()
        self._allocate(width, height)
        eye, top_left, du, dv = (np.append(v, 0).astype(np.float32)
                                 for v in camera.basis(width, height))
        cam = (eye, top_left, du, dv, np.int32(width), np.int32(height))
        light = np.append(self.scene.light, 0).astype(np.float32)
        lsize = self._launch[phase].group
        gsize = self._launch[phase].work_items(width, height)
        q, k = self.queue, self._kernels[phase]
        extra = (self._counter_bufs[phase],) if phase in self._counter_bufs else ()
        ao_rays = float(settings.ao_rays)
        if phase == "primary":
            return (k(q, gsize, lsize, self._nodes, self._tris, *cam, self._hits, *extra),)
        if phase == "shadow":
            return (k(q, gsize, lsize, self._shadow_nodes, self._tris, self._normals, *cam,
                      light, self.scene_scale, self._hits, self._vis, *extra),)
        if phase == "ao":
            return self._launch_ao(k, gsize, lsize, camera, (width, height), settings, seed,
                                   cam, extra)
        flags = np.int32((1 if settings.phong else 0) | (2 if settings.shadows else 0)
                         | (4 if ao_rays > 0 else 0))
        return (k(q, gsize, lsize, self._tris, self._normals, *cam, light, flags,
                  self._hits, self._vis, self._occ, self._image),)

    def _launch_ao(self, kernel: cl.Kernel, gsize: tuple, lsize: tuple, camera: Camera,
                   size: tuple[int, int], settings: RenderSettings, seed: int, cam: tuple,
                   extra: tuple) -> tuple[cl.Event, ...]:
        """The AO rays (``kernel`` launched ``gsize`` by ``lsize``), then
        (``settings.ao_filter``) their filter, launched as the shade phase is (a kernel a
        pixel that traces nothing)."""
        q, (width, height) = self.queue, size
        filtered = bool(settings.ao_filter)
        radius = np.float32(settings.ao_radius * self.scene.diagonal)
        traced = kernel(q, gsize, lsize, self._nodes, self._tris, self._normals, *cam,
                        np.float32(settings.ao_rays), radius, self.scene_scale, np.uint32(seed),
                        self._hits, self._occ,
                        *self._ao_history(camera, width, height, settings), np.int32(filtered),
                        *self._spread, *extra)
        if not filtered:
            return (traced,)
        shape = self._launch["shade"]
        return traced, self._ao_filter(q, shape.work_items(width, height), shape.group,
                                       *cam[1:], *self._spread, self._occ)

    def _ao_history(self, camera: Camera, width: int, height: int, settings: RenderSettings
                    ) -> tuple:
        """The AO kernel's history arguments: what it keeps of the last frame's sums, that
        frame's camera (forward axis and pixel steps scaled for reprojection), the buffers it
        reads and those it writes. A frame without history keeps nothing and writes nothing;
        the first frame with it (or after a resize, another AO radius, a frame without it)
        reads nothing and starts one."""
        keep = np.float32(AO_HISTORY_KEEP if settings.ao_history else 0.0)
        last = self._history_from
        valid = (settings.ao_history and last is not None
                 and last[1] == settings.ao_radius)
        basis = last[0] if valid else np.zeros((5, 4), np.float32)
        read, write = self._history[0], self._history[1]
        last_depth, depth = self._depth[0], self._depth[1]
        if settings.ao_history:
            self._history.reverse()
            self._depth.reverse()
            self._history_from = (history_basis(camera, width, height), settings.ao_radius)
        else:
            self._history_from = None
        return (keep, *basis, read, last_depth, write, depth)

    def forget_history(self) -> None:
        """Start the AO history afresh with the next frame (a new path: what the frames
        before it saw is not this path's)."""
        self._history_from = None

    def time_phase(self, phase: str, camera: Camera, width: int, height: int,
                   settings: RenderSettings = RenderSettings(), seed: int = 0) -> float:
        """Kernel seconds of one phase launched alone and waited for (its profiling event)."""
        events = self.launch(phase, camera, width, height, settings, seed)
        events[-1].wait()
        return events_seconds(events)

    def render(self, camera: Camera, width: int, height: int,
               settings: RenderSettings = RenderSettings(), seed: int = 0) -> Frame:
        """Render one frame; returns the image and the kernel time of each phase."""
        validate_size(width, height)
        settings.validate()
        events = {}
        for p in PHASE_LIST:
            if p.enabled_by is None or getattr(settings, p.enabled_by):
                events[p.name] = self.launch(p.name, camera, width, height, settings, seed)
        q = self.queue
        image = np.empty((height, width, 4), np.uint8)
        cl.enqueue_copy(q, image, self._image)
        counters = {}
        for phase, buf in self._counter_bufs.items():
            if phase in events:
                counters[phase] = np.empty((height, width, 2), np.int32)
                cl.enqueue_copy(q, counters[phase], buf)
        q.finish()
        seconds = {p: events_seconds(e) for p, e in events.items()}
        return Frame(image, seconds, counters)

    def hits(self) -> np.ndarray:
        """The last frame's primary hits as (H, W, 4) float32 ``(t, u, v, prim bits)``."""
        return self._read_back(self._hits, 4)

    def ao_term(self) -> np.ndarray:
        """The last frame's AO term as shade read it: (H, W) float32, the share of open rays
        (1 where no ray was traced), filtered where that frame's settings filter it."""
        return self._read_back(self._occ)

    def _read_back(self, buffer: cl.Buffer, *per_pixel: int) -> np.ndarray:
        """A per-pixel float32 buffer of the last frame as (H, W, *per_pixel), waited for."""
        w, h = self._size
        out = np.empty((h, w, *per_pixel), np.float32)
        cl.enqueue_copy(self.queue, out, buffer).wait()
        return out


def history_basis(camera: Camera, width: int, height: int) -> np.ndarray:
    """(5, 4) float32 what the AO kernel reprojects a point into this camera's image with: its
    eye, the direction through the image's top-left corner, its forward axis, and its pixel
    steps each divided by its squared length."""
    eye, top_left, du, dv = camera.basis(width, height).astype(np.float64)
    forward = top_left + du * (width / 2) + dv * (height / 2)  # through the image's centre
    forward /= np.linalg.norm(forward)
    rows = [eye, top_left, forward, du / du.dot(du), dv / dv.dot(dv)]
    return np.array([np.append(r, 0.0) for r in rows], np.float32)


def kernel_for(kernel: str, launch: Launch) -> str:
    """The entry point that runs ``kernel`` launched as ``launch``: its packet form for a
    packet launch."""
    if not has_form(kernel, launch):
        raise TracerError(f"kernel {kernel!r} has no packet form of {launch.packet} pixels")
    return kernel if launch.packet == (1, 1) else PACKET_KERNELS[kernel]


def has_form(kernel: str, launch: Launch) -> bool:
    """Whether ``kernel`` can be launched as ``launch`` (a packet launch: its packet form)."""
    return launch.packet == (1, 1) or (kernel in PACKET_KERNELS
                                       and launch.packet == RAY_PACKET)


def time_launches(device: str, candidates: list[Launch]) -> dict[Launch, dict[str, float]]:
    """Seconds of each kernel launched each way in ``candidates`` on ``device`` (a spec), on
    :data:`LAUNCH_SCENE` at :data:`LAUNCH_SIZE` with every phase on
    (:func:`raytracer.device.launches.time_rounds`). A candidate that does not build is left
    out, and so is a packet launch for a kernel without a packet form."""
    scene = load_scene(LAUNCH_SCENE)
    bvh = build_bvh(scene.triangles())
    settings = RenderSettings(ao_rays=2, shadows=True, phong=True)
    width, height = LAUNCH_SIZE
    tracers = {}
    for launch in candidates:
        try:
            tracers[launch] = Tracer(scene, bvh, device=device, launches=KernelLaunches(
                {k: launch for k in KERNELS if has_form(k, launch)}))
        except TracerError:
            continue
    phase_of = {p.kernel: p.name for p in PHASE_LIST}

    def run(launch: Launch, kernel: str) -> float:
        return tracers[launch].time_phase(phase_of[kernel], scene.camera, width, height,
                                          settings)

    return time_rounds(list(tracers), KERNELS, run,
                       lambda launch, kernel: has_form(kernel, launch))
